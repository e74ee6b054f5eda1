//! A whole small swarm as processes: a JWT-mode nats-server, the swarm-controller binary on a
//! socket (its NATS connection through a proxy a test can stall), and hive `h1` run by the
//! hive-c0re binary (process runner) with real hive-agents.
//! Needs `cargo build -p hive-agent -p hive-c0re`.

use std::path::{Path, PathBuf};
use std::process::Command;

use async_nats::jetstream;
use hyperhive_testkit::{ChaosProxy, NatsJwt, Process, project_binary};
use serde_json::{Value, json};

/// The stack; every process stops when it is dropped.
pub struct OneHive {
    pub nats: NatsJwt,
    pub dir: tempfile::TempDir,
    pub js: jetstream::Context,
    pub socket: PathBuf,
    pub controller: Process,
    pub hive: Process,
    /// Between the controller and a single NATS server (the hive and agents connect directly);
    /// none on a cluster, where the controller is given every node.
    pub controller_nats: Option<ChaosProxy>,
    /// The controller's public deploy key, which the hive pins.
    deploy_public: String,
}

impl OneHive {
    /// Starts it with `agents` on `h1`, each with the turn command `turn(turns_file)`;
    /// `controller_env` is added to the controller's environment.
    pub async fn start(agents: &[&str], turn: impl Fn(&Path) -> String, controller_env: &[(&str, &str)]) -> OneHive {
        let nats = NatsJwt::start().await.unwrap();
        let nats_port: u16 = nats.url().rsplit(':').next().unwrap().parse().unwrap();
        let proxy = ChaosProxy::start(([127, 0, 0, 1], nats_port).into()).await.unwrap();
        Self::start_on(nats, Some(proxy), agents, turn, controller_env).await
    }

    /// [`OneHive::start`] on `nats` (a cluster: every process is given every node), the
    /// controller reaching it through `proxy` when there is one.
    pub async fn start_on(
        nats: NatsJwt,
        proxy: Option<ChaosProxy>,
        agents: &[&str],
        turn: impl Fn(&Path) -> String,
        controller_env: &[(&str, &str)],
    ) -> OneHive {
        Self::start_with_environment_files(nats, proxy, agents, turn, controller_env, &[]).await
    }

    /// [`OneHive::start`] on a new server with what creating agents needs (a secret store key and
    /// the NATS signing directory) and no SSO, forge, Matrix or store CA, so their provisioning
    /// steps are skipped unless `controller_env` configures them. The key's directory is
    /// returned: keep it while the swarm runs.
    pub async fn start_able_to_create(
        agents: &[&str],
        turn: impl Fn(&Path) -> String,
        controller_env: &[(&str, &str)],
    ) -> (OneHive, tempfile::TempDir) {
        let nats = NatsJwt::start().await.unwrap();
        let keys = tempfile::tempdir().unwrap();
        let key = keys.path().join("secrets.key");
        swarm_controller::secrets::SecretsKey::generate().write_new(&key).unwrap();
        let nats_dir = nats.creds_dir().display().to_string();
        let mut env = vec![("SWARM_SECRETS_KEY_FILE", key.to_str().unwrap()), ("SWARM_NATS_DIR", nats_dir.as_str())];
        env.extend_from_slice(controller_env);
        (Self::start_on(nats, None, agents, turn, &env).await, keys)
    }

    /// [`OneHive::start_on`], the agents named in `environment_files` declared with that
    /// `environment_file`.
    pub async fn start_with_environment_files(
        nats: NatsJwt,
        proxy: Option<ChaosProxy>,
        agents: &[&str],
        turn: impl Fn(&Path) -> String,
        controller_env: &[(&str, &str)],
        environment_files: &[(&str, PathBuf)],
    ) -> OneHive {
        let dir = tempfile::tempdir().unwrap();
        let names = agents;
        for name in names {
            nats.mint_agent(name).await.unwrap();
        }
        nats.mint_hive("h1", names).await.unwrap();
        let key = dir.path().join("h1.xkey");
        let out =
            Command::new(project_binary("hive-c0re").unwrap()).args(["keygen", "--out"]).arg(&key).output().unwrap();
        let hives = dir.path().join("hives.json");
        let xkey = String::from_utf8(out.stdout).unwrap();
        std::fs::write(&hives, json!({"h1": {"description": "the test's hive", "xkey": xkey.trim()}}).to_string())
            .unwrap();
        let deploy_key = dir.path().join("deploy.key");
        let out = Command::new(project_binary("swarm-controller").unwrap())
            .args(["deploy-key", "--out"])
            .arg(&deploy_key)
            .output()
            .unwrap();
        let deploy_public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        let socket = dir.path().join("run/controller.sock");
        let controller_url = match &proxy {
            Some(proxy) => format!("nats://127.0.0.1:{}", proxy.port()),
            None => nats.url(),
        };
        let mut env = vec![
            ("SWARM_HIVES_FILE", hives.to_str().unwrap()),
            ("SWARM_RECONCILE_SECS", "1"),
            ("SWARM_NATS_URL", &controller_url),
            ("SWARM_DEPLOY_KEY_FILE", deploy_key.to_str().unwrap()),
            ("NO_COLOR", "1"),
        ];
        env.extend_from_slice(controller_env);
        let controller = super::daemon_process(&nats, &socket, &env).await;
        let declared: serde_json::Map<String, Value> = agents
            .iter()
            .map(|name| {
                let mut entry = json!({
                    "spec": {"turn_command": turn(&dir.path().join(format!("{name}.turns"))), "schedule_tick": "200ms"},
                    "creds_file": nats.creds_dir().join(format!("agent-{name}.creds")),
                });
                if let Some((_, file)) = environment_files.iter().find(|(agent, _)| agent == name) {
                    entry["environment_file"] = json!(file);
                }
                ((*name).to_owned(), entry)
            })
            .collect();
        let agents_file = dir.path().join("h1.agents.json");
        std::fs::write(&agents_file, Value::Object(declared).to_string()).unwrap();
        let hive = start_hive(&nats, dir.path(), &deploy_public, "hive-c0re-h1");
        let js = jetstream::new(nats.controller_client().await.unwrap());
        OneHive { nats, dir, js, socket, controller, hive, controller_nats: proxy, deploy_public }
    }

    /// hive-c0re started again as [`OneHive::start`] started it.
    pub fn start_hive_again(&self) -> Process {
        start_hive(&self.nats, self.dir.path(), &self.deploy_public, "hive-c0re-h1-again")
    }

    /// A file in the stack's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The prompts `agent`'s turns were given, one per line (its turn command's `turns` file).
    pub fn turns(&self, agent: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{agent}.turns"))).unwrap_or_default()
    }

    /// The last `lines` lines of `agent`'s own log (its stdout and stderr under the process
    /// runner), for a failure to show what the agent did.
    pub fn agent_log_tail(&self, agent: &str, lines: usize) -> String {
        let log = std::fs::read_to_string(self.path(&format!("h1.state/agents/{agent}/agent.log"))).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// `agent`'s actual state in the hive's last status.
    pub async fn actual_in_hive_status(&self, agent: &str) -> Option<String> {
        let kv = self.js.get_key_value("hive-status").await.ok()?;
        let status: Value = serde_json::from_slice(&kv.get("h1").await.ok()??).ok()?;
        status["agents"][agent]["actual"].as_str().map(str::to_owned)
    }

    /// The sequence of `agent`'s last terminal chunk in `RELAY`.
    pub async fn last_terminal_sequence(&self, agent: &str) -> u64 {
        let stream = self.js.get_stream("RELAY").await.unwrap();
        stream.direct_get_last_for_subject(format!("term.{agent}")).await.map_or(0, |m| m.sequence)
    }
}

/// A turn command that appends the prompt to `turns`, then prints `lines` numbered lines
/// `pause` seconds apart.
pub fn printing_turn(turns: &Path, lines: u32, pause: &str) -> String {
    format!(
        "body=$(cat); printf '%s\\n' \"$body\" >> {}; for i in $(seq 1 {lines}); do echo \"line $i of $HIVE_TODO_ID\"; sleep {pause}; done",
        turns.display()
    )
}

/// hive `h1`'s hive-c0re on the files in `dir`, pinning the controller's `deploy_public` key.
fn start_hive(nats: &NatsJwt, dir: &Path, deploy_public: &str, name: &str) -> Process {
    Process::builder(project_binary("hive-c0re").unwrap())
        .arg("run")
        .env("HIVE_C0RE_HIVE", "h1")
        .env("HIVE_C0RE_NATS_URL", nats.url())
        .env("HIVE_C0RE_NATS_CREDS", nats.creds_dir().join("hive-h1.creds"))
        .env("HIVE_C0RE_XKEY_FILE", dir.join("h1.xkey"))
        .env("HIVE_C0RE_CONTROLLER_KEYS", deploy_public)
        .env("HIVE_C0RE_STATE_DIR", dir.join("h1.state"))
        .env("HIVE_C0RE_RUNNER", "process")
        .env("HIVE_C0RE_AGENTS_FILE", dir.join("h1.agents.json"))
        .env("HIVE_C0RE_AGENT_BIN", project_binary("hive-agent").unwrap())
        .env("HIVE_C0RE_STATUS_SECS", "1")
        .env("NO_COLOR", "1")
        .start(name)
        .unwrap()
}
