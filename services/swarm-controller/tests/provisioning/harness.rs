//! A whole swarm with every system an agent is provisioned in, each a real server where one
//! installs here: a JWT-mode nats-server, the swarm-controller binary with a secret-store key,
//! the NATS signing directory and a store CA, one hive run by the hive-c0re binary (process
//! runner, no declared agents), swarm-authelia-bridge, Synapse, Caddy requiring client
//! certificates from the store CA, and the forge stand-in (no forge server installs here; the
//! stand-in checks what Forgejo checks).
//!
//! Needs `cargo build -p hive-agent -p hive-c0re -p swarm-authelia-bridge -p swarmctl` first
//! (found with `project_binary`).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use async_nats::jetstream;
use hyperhive_nats_objects::todo_subject;
use hyperhive_schedule::{AgentName, Todo};
use hyperhive_testkit::{
    AutheliaBridge, ClientCertSite, ForgeStandIn, HoldProxy, NatsJwt, Process, Synapse, project_binary, wait_until,
};
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{self, ControllerRuns};

pub const CONTROLLER: &str = env!("CARGO_BIN_EXE_swarm-controller");
pub const PATIENCE: Duration = Duration::from_secs(60);
pub const HIVE: &str = "hive1";
/// A hive in the directory without an xkey: nothing can be deployed to it.
pub const KEYLESS_HIVE: &str = "hive2";
/// The template every config repository is generated from.
pub const TEMPLATE: (&str, &str) = ("swarm", "agent-template");

/// One [`HoldProxy`] in front of each HTTP system.
pub struct Proxies {
    pub sso: HoldProxy,
    pub forge: HoldProxy,
    pub matrix: HoldProxy,
}

/// Settings a test changes before the controller starts.
#[derive(Debug, Clone, Default)]
pub struct Tuning {
    /// Extra controller environment (lifetimes, check interval, job graph settings).
    pub env: Vec<(String, String)>,
    /// Extra Synapse configuration (YAML), if any.
    pub synapse_config: Option<String>,
}

pub struct Swarm {
    pub nats: NatsJwt,
    pub dir: TempDir,
    pub socket: PathBuf,
    pub controller: ControllerRuns,
    pub hive: Option<Process>,
    pub bridge: AutheliaBridge,
    pub forge: ForgeStandIn,
    pub synapse: Synapse,
    pub site: ClientCertSite,
    /// What the controller reaches the bridge, the forge and Synapse through.
    pub proxies: Proxies,
    /// The controller's own connection, to queue todos and read buckets as an operator would.
    pub js: jetstream::Context,
}

fn secret_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn run(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

impl Swarm {
    pub async fn start(tuning: Tuning) -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        nats.mint_hive(HIVE, &[]).await.unwrap();
        let xkey = run(project_binary("hive-c0re").unwrap(), &["keygen", "--out", path("hive.xkey").to_str().unwrap()]);
        let hives = serde_json::json!({
            HIVE: {"description": "provisioning test hive", "xkey": xkey.trim()},
            KEYLESS_HIVE: {"description": "a hive without an xkey"},
        });
        std::fs::write(path("hives.json"), hives.to_string()).unwrap();
        run(CONTROLLER, &["secrets-key", "--out", path("secrets.key").to_str().unwrap()]);
        let deploy_public = run(CONTROLLER, &["deploy-key", "--out", path("deploy.key").to_str().unwrap()]);
        std::fs::write(path("deploy.pub"), deploy_public.trim()).unwrap();
        run(CONTROLLER, &["store-ca", "--out-dir", path("ca").to_str().unwrap()]);

        let bridge = AutheliaBridge::from_workspace().unwrap().start().await.unwrap();
        let forge = ForgeStandIn::start().await.unwrap();
        // The template lives in the swarm's organisation, where config repositories are made.
        forge.add_org(TEMPLATE.0);
        forge.add_template(TEMPLATE.0, TEMPLATE.1);
        let synapse = Synapse::start_with_config(tuning.synapse_config.as_deref().unwrap_or("")).await.unwrap();
        let site = ClientCertSite::start(dir.path(), &path("ca/store-ca.pem")).await.unwrap();
        let proxies = Proxies {
            sso: HoldProxy::start(&bridge.url()).await.unwrap(),
            forge: HoldProxy::start(&forge.url()).await.unwrap(),
            matrix: HoldProxy::start(&synapse.base_url()).await.unwrap(),
        };
        secret_file(&path("bridge.token"), bridge.token());
        secret_file(&path("forge.token"), &forge.admin_token());
        secret_file(&path("matrix.secret"), synapse.shared_secret());

        let mut controller_env: Vec<(String, String)> = [
            ("SWARM_HIVES_FILE", path("hives.json")),
            ("SWARM_NATS_DIR", nats.creds_dir().to_path_buf()),
            ("SWARM_SECRETS_KEY_FILE", path("secrets.key")),
            ("SWARM_DEPLOY_KEY_FILE", path("deploy.key")),
            ("SWARM_SSO_BRIDGE_TOKEN_FILE", path("bridge.token")),
            ("SWARM_FORGE_ADMIN_TOKEN_FILE", path("forge.token")),
            ("SWARM_MATRIX_SHARED_SECRET_FILE", path("matrix.secret")),
            ("SWARM_STORE_CA_KEY_FILE", path("ca/store-ca.key")),
            ("SWARM_STORE_CA_CERT_FILE", path("ca/store-ca.pem")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
        controller_env.extend([
            ("SWARM_SSO_BRIDGE_URL".to_owned(), proxies.sso.url()),
            ("SWARM_FORGE_URL".to_owned(), proxies.forge.url()),
            ("SWARM_FORGE_TEMPLATE_REPO".to_owned(), format!("{}/{}", TEMPLATE.0, TEMPLATE.1)),
            ("SWARM_MATRIX_URL".to_owned(), proxies.matrix.url()),
            ("SWARM_RECONCILE_SECS".to_owned(), "1".to_owned()),
            ("NO_COLOR".to_owned(), "1".to_owned()),
        ]);
        controller_env.extend(tuning.env);
        let client = nats.controller_client().await.unwrap();
        let socket = path("run/controller.sock");
        let mut swarm = Self {
            js: jetstream::new(client),
            nats,
            dir,
            socket,
            controller: ControllerRuns::new(controller_env),
            hive: None,
            bridge,
            forge,
            synapse,
            site,
            proxies,
        };
        swarm.start_controller().await;
        swarm.start_hive();
        swarm
    }

    pub async fn start_controller(&mut self) {
        self.controller.start(&self.nats, &self.socket).await;
    }

    /// `kill -9` of the controller: nothing it holds in memory survives.
    pub fn kill_controller(&mut self) {
        self.controller.kill();
    }

    pub fn controller_log(&self) -> String {
        self.controller.log()
    }

    fn start_hive(&mut self) {
        let agents_file = self.dir.path().join("declared.json");
        std::fs::write(&agents_file, "{}").unwrap();
        let process = Process::builder(project_binary("hive-c0re").unwrap())
            .arg("run")
            .env("HIVE_C0RE_HIVE", HIVE)
            .env("HIVE_C0RE_NATS_URL", self.nats.url())
            .env("HIVE_C0RE_NATS_CREDS", self.nats.creds_dir().join(format!("hive-{HIVE}.creds")))
            .env("HIVE_C0RE_XKEY_FILE", self.dir.path().join("hive.xkey"))
            .env("HIVE_C0RE_CONTROLLER_KEYS", std::fs::read_to_string(self.dir.path().join("deploy.pub")).unwrap())
            .env("HIVE_C0RE_STATE_DIR", self.hive_state())
            .env("HIVE_C0RE_RUNNER", "process")
            .env("HIVE_C0RE_AGENTS_FILE", agents_file)
            .env("HIVE_C0RE_AGENT_BIN", project_binary("hive-agent").unwrap())
            .env("HIVE_C0RE_STATUS_SECS", "1")
            .env("NO_COLOR", "1")
            .start("hive-c0re")
            .unwrap();
        self.hive = Some(process);
    }

    pub fn hive_state(&self) -> PathBuf {
        self.dir.path().join("hive.state")
    }

    /// What the hive wrote into the agent's secrets directory.
    pub fn agent_secret(&self, agent: &str, file: &str) -> Option<String> {
        std::fs::read_to_string(self.hive_state().join("agents").join(agent).join("secrets").join(file)).ok()
    }

    pub fn turns_file(&self, agent: &str) -> PathBuf {
        self.dir.path().join(format!("{agent}.turns"))
    }

    /// A turn command that appends the todo's id to the agent's turns file.
    pub fn turn_command(&self, agent: &str) -> String {
        format!("printf '%s\\n' \"$HIVE_TODO_ID\" >> {}", self.turns_file(agent).display())
    }

    pub fn swarmctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(crate::common::swarmctl_binary())
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        }
    }

    pub fn swarmctl_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.swarmctl(&all).unwrap()).unwrap()
    }

    /// `swarmctl agent create NAME --hive HIVE --turn-command ...` without waiting.
    pub fn create(&self, agent: &str) -> Result<String, String> {
        self.swarmctl(&["agent", "create", agent, "--hive", HIVE, "--turn-command", &self.turn_command(agent)])
    }

    /// Each of the agent's jobs, id -> state.
    pub fn job_states(&self, agent: &str) -> BTreeMap<String, String> {
        common::job_states(&self.swarmctl_json(&["jobs", "--agent", agent])).into_iter().collect()
    }

    /// Waits until the agent's roster entry says every provisioning step is done.
    pub async fn wait_provisioned(&self, agent: &str) -> Value {
        wait_until(&format!("{agent} to be provisioned"), PATIENCE, || async {
            let entry = self.roster_entry(agent)?;
            let steps = entry["provisioning"].as_object()?;
            (steps.len() == 9 && steps.values().all(|s| s["state"] == "done")).then_some(entry)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; jobs: {:?}; roster: {:?}", self.job_states(agent), self.roster_entry(agent)))
    }

    pub fn roster_entry(&self, agent: &str) -> Option<Value> {
        let agents = self.swarmctl_json(&["agents"]);
        agents.as_array()?.iter().find(|a| a["name"] == agent).cloned()
    }

    pub async fn wait_actual(&self, agent: &str, state: &str) {
        wait_until(&format!("{agent} to be {state}"), PATIENCE, || async {
            (self.roster_entry(agent)?["actual"]["actual"] == state).then_some(())
        })
        .await
        .unwrap();
    }

    pub async fn queue(&self, agent: &str, id: &str) {
        let todo = Todo { id: id.into(), source: "test".into(), body: id.into() };
        let subject = todo_subject(&AgentName::parse(agent).unwrap());
        self.js.publish(subject, serde_json::to_vec(&todo).unwrap().into()).await.unwrap().await.unwrap();
    }

    /// The todo ids the agent ran, in order.
    pub fn turns(&self, agent: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.turns_file(agent)).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }

    pub async fn wait_turns(&self, agent: &str, expected: &[String]) {
        self.wait_turns_within(agent, expected, PATIENCE).await;
    }

    /// [`Swarm::wait_turns`] with its own patience.
    pub async fn wait_turns_within(&self, agent: &str, expected: &[String], patience: Duration) {
        wait_until(&format!("{agent} to have run {} todos", expected.len()), patience, || async {
            (self.turns(agent).len() >= expected.len()).then_some(())
        })
        .await
        .unwrap_or_else(|e| {
            let agent_log = std::fs::read_to_string(self.hive_state().join("agents").join(agent).join("agent.log"))
                .unwrap_or_default();
            let tail = |text: &str| {
                text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
            };
            panic!(
                "{e}; ran {:?}\n--- agent log\n{}\n--- hive-c0re log\n{}\n--- controller log\n{}",
                self.turns(agent),
                tail(&agent_log),
                tail(&self.hive.as_ref().map(Process::log).unwrap_or_default()),
                tail(&self.controller_log())
            )
        });
        assert_eq!(self.turns(agent), expected, "each todo once, in order");
    }

    async fn get(&self, path: &str) -> Vec<u8> {
        let request = hyper::Request::builder().uri(path).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        let (status, body) = swarmctl::client::send(&self.socket, request).await.unwrap();
        assert!(status.is_success(), "GET {path}: {status}");
        body.to_vec()
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> String {
        String::from_utf8(self.get("/metrics").await).unwrap()
    }

    /// `GET /api/agents/status`.
    pub async fn agents_status(&self) -> Value {
        serde_json::from_slice(&self.get("/api/agents/status").await).unwrap()
    }
}
