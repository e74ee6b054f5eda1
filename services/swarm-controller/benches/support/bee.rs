//! The one agent the relay, prompts and soak benchmarks drive: `bee` on hive `h1`, declared in
//! the hive's status (so the controller puts it on the roster) and run by a real hive-agent.
//!
//! Included with `#[path]` by each benchmark that uses it.
#![allow(dead_code)] // each benchmark uses a different part of this module

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_testkit::{NatsJwt, Process};

const PATIENCE: Duration = Duration::from_secs(60);

/// Publishes h1's status, as its hive-c0re would, naming `bee` running.
pub async fn report_bee_on_h1(nats: &NatsJwt) {
    let status = serde_json::json!({
        "hive": "h1", "version": "bench", "started_at": "2026-11-30T10:00:00Z",
        "published_at": hyperhive_schedule::format_instant(time::OffsetDateTime::now_utc()), "load": [0.0, 0.0, 0.0],
        "agents": {"bee": {"origin": "declared", "wanted": "up", "actual": "running", "since": "2026-11-30T10:00:00Z",
                           "restarts": 0, "last_exit": null, "log_tail": []}}
    });
    nats.publish_as_hive("h1", serde_json::to_vec(&status).unwrap()).await.unwrap();
}

/// bee's hive-agent (`binary`), its state in `state_dir`, running `turn_command` for each todo
/// with `extra_env`, once it consumes todos. Its credential is minted and its consumer made here,
/// as the controller makes them when it mints an agent.
pub async fn start_bee(
    nats: &NatsJwt,
    binary: PathBuf,
    state_dir: &Path,
    turn_command: &str,
    extra_env: &[(&str, &str)],
) -> Process {
    let creds = nats.mint_agent("bee").await.unwrap();
    let controller_js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
    let name = hyperhive_nats_creds::AgentName::parse("bee").unwrap();
    hyperhive_nats_objects::agent_consumer(&name).ensure(&controller_js).await.unwrap();
    let mut agent = Process::builder(binary)
        .env("HIVE_AGENT_NAME", "bee")
        .env("HIVE_AGENT_NATS_URL", nats.url())
        .env("HIVE_AGENT_CREDS", creds)
        .env("HIVE_AGENT_STATE_DIR", state_dir)
        .env("HIVE_AGENT_TURN_COMMAND", turn_command)
        .envs(extra_env.iter().copied())
        .start("hive-agent-bee")
        .unwrap();
    agent.wait_for_log("consuming todos", PATIENCE).await.unwrap();
    agent
}

/// Queues one todo for bee, as an operator's prompt would.
pub async fn give_bee(nats: &NatsJwt, id: &str) {
    let todo = serde_json::json!({"id": id, "source": "bench", "body": ""}).to_string();
    let bee = async_nats::jetstream::new(nats.agent_client("bee").await.unwrap());
    bee.publish("todo.bee", todo.into()).await.unwrap().await.unwrap();
}
