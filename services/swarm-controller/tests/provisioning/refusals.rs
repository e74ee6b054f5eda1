//! Which failures the job graph retries: a forge user name someone else holds is a refusal no
//! retry changes, so its step fails after one attempt with the reason in `last_error`; a forge
//! that is down (nothing listens on its port) is retried with backoff, and the step succeeds once
//! the forge is back.

use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};

use crate::harness::{PATIENCE, Swarm, Tuning};
use hyperhive_testkit::wait_until;

/// The steps that wait for the forge user.
const AFTER_FORGE_USER: [&str; 4] = ["config-repo", "forge-token", "declare-paused", "deploy"];

/// The job `id` of `agent` as `GET /api/jobq/graph` shows it.
fn job(swarm: &Swarm, agent: &str, id: &str) -> Option<Value> {
    let graph = swarm.swarmctl_json(&["jobs", "--agent", agent]);
    graph["nodes"].as_array()?.iter().find(|n| n["id"] == id).cloned()
}

async fn wait_job(swarm: &Swarm, agent: &str, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until(&format!("{id} to be {what}"), PATIENCE, || async { job(swarm, agent, id).filter(|n| done(n)) })
        .await
        .unwrap_or_else(|e| panic!("{e}; jobs: {:?}", swarm.job_states(agent)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_user_name_held_by_someone_else_fails_its_step_after_one_attempt() {
    let swarm = Swarm::start(Tuning::default()).await;
    // gamma's name is someone else's before the controller looks; delta's is taken between the
    // controller's look-up (which finds nothing) and its create (which the forge answers 422).
    swarm.forge.add_user("gamma", "someone-elses-password", false);
    swarm.forge.take_name_before_create("delta");
    swarm.create("gamma").unwrap();
    swarm.create("delta").unwrap();
    for agent in ["gamma", "delta"] {
        let id = format!("{agent}.forge-user");
        let node = wait_job(&swarm, agent, &id, "failed", |n| n["state"] == "failed").await;
        assert_eq!(node["attempts"], 1, "a permanent refusal is not retried: {node}");
        assert_eq!(node["next_attempt_at"], Value::Null, "{node}");
        let reason = node["last_error"].as_str().unwrap();
        assert!(reason.contains(&format!("{agent} that this swarm did not make")), "{reason}");
        assert!(reason.contains("remove that account or create the agent under another name"), "{reason}");
        for step in AFTER_FORGE_USER {
            let id = format!("{agent}.{step}");
            wait_job(&swarm, agent, &id, "blocked", |n| n["state"] == "blocked").await;
        }
        let entry = swarm.roster_entry(agent).unwrap();
        assert_eq!(entry["provisioning"]["forge-user"]["state"], "failed", "{entry}");
        assert_eq!(entry["provisioning"]["forge-user"]["error"].as_str(), Some(reason), "{entry}");
        // Steps that do not need the forge user go on.
        wait_job(&swarm, agent, &format!("{agent}.sso"), "succeeded", |n| n["state"] == "succeeded").await;
    }
    let delta = job(&swarm, "delta", "delta.forge-user").unwrap();
    let reason = delta["last_error"].as_str().unwrap();
    assert!(reason.contains("HTTP 422") && reason.contains("user already exists [name: delta]"), "{reason}");
    assert_eq!(swarm.forge.counts().users_created, 0, "no account was made or taken over");
    let log = swarm.controller_log();
    assert!(log.contains("a retry cannot help"), "{log}");
}

/// Accepts connections on `listener` and passes each to `upstream` (`http://host:port`), both
/// ways, until dropped: the forge, back on the port the controller was given.
fn forward(listener: TcpListener, upstream: &str) -> tokio::task::JoinHandle<()> {
    let upstream = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_that_is_down_is_retried_and_its_step_succeeds_once_it_is_back() {
    // A port nothing listens on until the forge comes back: the controller's calls are refused.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let tuning = Tuning {
        env: vec![
            ("SWARM_FORGE_URL".into(), format!("http://{addr}")),
            // Enough attempts that the step does not fail while the forge is down.
            ("SWARM_JOBQ_MAX_ATTEMPTS".into(), "20".into()),
        ],
        ..Tuning::default()
    };
    let swarm = Swarm::start(tuning).await;
    swarm.create("gamma").unwrap();
    let node = wait_job(&swarm, "gamma", "gamma.forge-user", "retrying after two attempts", |n| {
        n["state"] == "retrying" && n["attempts"].as_u64() >= Some(2)
    })
    .await;
    assert!(node["next_attempt_at"].is_string(), "{node}");
    let reason = node["last_error"].as_str().unwrap();
    assert!(reason.contains("no answer from the server"), "{reason}");
    assert_eq!(swarm.forge.counts().users_created, 0);

    let _forge_is_back = forward(TcpListener::bind(addr).await.unwrap(), &swarm.forge.url());
    swarm.wait_provisioned("gamma").await;
    let node = job(&swarm, "gamma", "gamma.forge-user").unwrap();
    assert_eq!(node["state"], "succeeded", "{node}");
    assert!(node["attempts"].as_u64().unwrap() > 2, "{node}");
    assert_eq!(node["last_error"], Value::Null, "{node}");
    assert_eq!(swarm.forge.counts().users_created, 1);
}
