//! The scale benchmark's hives: one `hive-c0re` per hive on the process runner, each running its
//! declared agents as light stand-ins, since a real hive-agent per agent does not fit this
//! machine's memory at 10,000 agents. A stand-in is `sleep`, killed with its hive-c0re (parent
//! death signal): hive-c0re supervises it, pauses it, reports it and stops it as it does a real
//! agent; it opens no NATS connection and takes no todo of its own.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::kv;
use hyperhive_hive_proto::status::{ActualState, HiveStatus};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_testkit::{NatsJwt, Process, project_release_binary, wait_until};

/// What a stand-in agent runs: nothing, until its hive-c0re stops it or dies.
const STAND_IN: &str = "#!/bin/sh\n# A stand-in agent for the scale benchmark: idle until hive-c0re stops it or dies.\nexec setpriv --pdeathsig KILL sleep 2147483647\n";

/// The running hives.
pub struct Hives {
    processes: Vec<Process>,
}

impl Hives {
    /// Starts one hive-c0re per entry of `hives` with its agents declared (each agent's
    /// credential at `creds(agent)`, the hive's at `creds(hive)`), in `dir`, and waits until
    /// every hive reports every one of its agents running.
    pub async fn start(
        nats: &NatsJwt,
        dir: &Path,
        hives: &BTreeMap<HiveName, Vec<AgentName>>,
        creds: impl Fn(&str) -> PathBuf,
        patience: Duration,
    ) -> Hives {
        let stand_in = dir.join("stand-in-agent");
        std::fs::write(&stand_in, STAND_IN).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hive_c0re = project_release_binary("hive-c0re").expect("cargo build --release -p hive-c0re");
        let mut processes = Vec::new();
        for (hive, agents) in hives {
            let declared: serde_json::Map<String, serde_json::Value> = agents
                .iter()
                .map(|agent| {
                    let entry =
                        serde_json::json!({"spec": {"turn_command": "true"}, "creds_file": creds(agent.as_str())});
                    (agent.to_string(), entry)
                })
                .collect();
            let file = dir.join(format!("{hive}.agents.json"));
            std::fs::write(&file, serde_json::Value::Object(declared).to_string()).unwrap();
            let process = Process::builder(&hive_c0re)
                .arg("run")
                .env("HIVE_C0RE_HIVE", hive.as_str())
                .env("HIVE_C0RE_NATS_URL", nats.url())
                .env("HIVE_C0RE_NATS_CREDS", creds(hive.as_str()))
                .env("HIVE_C0RE_STATE_DIR", dir.join(format!("{hive}.state")))
                .env("HIVE_C0RE_RUNNER", "process")
                .env("HIVE_C0RE_AGENTS_FILE", file)
                .env("HIVE_C0RE_AGENT_BIN", &stand_in)
                .env("RUST_LOG", "warn")
                .env("NO_COLOR", "1")
                .start(&format!("hive-c0re-{hive}"))
                .unwrap();
            processes.push(process);
        }
        let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
        let bucket = js.get_key_value(hyperhive_nats_objects::HIVE_STATUS_BUCKET).await.unwrap();
        for (hive, agents) in hives {
            wait_until(&format!("{hive} to report its {} agents running", agents.len()), patience, || async {
                let status = status(&bucket, hive).await?;
                let running = agents
                    .iter()
                    .filter(|a| status.agents.get(*a).is_some_and(|s| s.actual == ActualState::Running))
                    .count();
                (running == agents.len()).then_some(())
            })
            .await
            .unwrap();
        }
        Hives { processes }
    }

    /// The hive-c0re processes' summed resident memory.
    pub fn rss_kib(&self) -> u64 {
        self.processes.iter().map(|p| hyperhive_testkit::stats::rss_kib(p.pid())).sum()
    }
}

/// `hive`'s last status in `hive-status`.
pub async fn status(bucket: &kv::Store, hive: &HiveName) -> Option<HiveStatus> {
    let bytes = bucket.get(hive.as_str()).await.ok()??;
    serde_json::from_slice(&bytes).ok()
}
