//! A controller with a forge: nats-server in JWT mode, the forge stand-in with the swarm's
//! organisation and template, the swarm-controller binary with a state directory, and Caddy on
//! a loopback port proxying to the controller's socket, which the organisation's webhook points
//! at. Agents are put on the roster directly (no provisioning systems run here), each with its
//! config repository in the organisation, as the config-repo step leaves it.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use hyperhive_hive_proto::roster::{Identities, Origin, RosterEntry};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_testkit::forge::StandInHook;
use hyperhive_testkit::{Caddy, ForgeStandIn, NatsJwt, free_port, wait_until};
use serde_json::Value;
use swarm_controller::lifecycle::roster::Roster;
use tempfile::TempDir;

use crate::common::ControllerRuns;

pub const PATIENCE: Duration = Duration::from_secs(30);
/// The swarm's organisation, which holds the template too.
pub const ORG: &str = "swarm";
pub const TEMPLATE: &str = "agent-template";

pub struct ForgeSwarm {
    pub nats: NatsJwt,
    /// Holds the state directory, the token file and the socket; removed on drop.
    _dir: TempDir,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub controller: ControllerRuns,
    pub forge: ForgeStandIn,
    /// The forge's way to the controller; stopped on drop.
    _caddy: Caddy,
    /// `http://127.0.0.1:<caddy>/api/forge/webhook`.
    pub webhook_url: String,
    pub js: jetstream::Context,
}

impl ForgeSwarm {
    /// Starts everything; the controller's forge pass runs every `every` (e.g. "1s") for the
    /// organisation `org`.
    pub async fn start(org: &str, every: &str) -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        std::fs::create_dir(&state_dir).unwrap();
        let forge = ForgeStandIn::start().await.unwrap();
        forge.add_org(ORG);
        forge.add_template(ORG, TEMPLATE);
        let token = dir.path().join("forge.token");
        std::fs::write(&token, forge.admin_token()).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let socket = dir.path().join("run/controller.sock");
        let port = free_port();
        // As docs/swarm/forge.md says to deploy it: the webhook's path only, nothing else of the API.
        let site = format!(
            "http://127.0.0.1:{port} {{\n\thandle /api/forge/webhook {{\n\t\treverse_proxy unix/{}\n\t}}\n\trespond 404\n}}\n",
            socket.display()
        );
        let caddy = Caddy::start(&site, &[port]).await.unwrap();
        let webhook_url = format!("http://127.0.0.1:{port}/api/forge/webhook");
        let env = vec![
            ("SWARM_STATE_DIR", state_dir.to_str().unwrap().to_owned()),
            ("SWARM_FORGE_URL", forge.url()),
            ("SWARM_FORGE_ADMIN_TOKEN_FILE", token.to_str().unwrap().to_owned()),
            ("SWARM_FORGE_TEMPLATE_REPO", format!("{ORG}/{TEMPLATE}")),
            ("SWARM_FORGE_ORG", org.to_owned()),
            ("SWARM_FORGE_WEBHOOK_URL", webhook_url.clone()),
            ("SWARM_FORGE_RECONCILE_EVERY", every.to_owned()),
            ("NO_COLOR", "1".to_owned()),
        ];
        let env = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let client = nats.controller_client().await.unwrap();
        let mut swarm = Self {
            js: jetstream::new(client),
            nats,
            _dir: dir,
            socket,
            state_dir,
            controller: ControllerRuns::new(env),
            forge,
            _caddy: caddy,
            webhook_url,
        };
        swarm.start_controller().await;
        swarm
    }

    /// [`ForgeSwarm::start`] on the swarm's organisation [`ORG`] with the agent `alpha` (its
    /// config repository `swarm/alpha-config`), once the first forge pass has made every object;
    /// returns the swarm and the controller's hook.
    pub async fn with_alpha(every: &str) -> (Self, StandInHook) {
        let swarm = Self::start(ORG, every).await;
        swarm.add_agent("alpha").await;
        let hook = swarm.wait_objects(ORG).await;
        (swarm, hook)
    }

    pub async fn start_controller(&mut self) {
        self.controller.start(&self.nats, &self.socket).await;
    }

    /// The webhook secret as the forge's hook holds it: the state file's bytes in hex.
    pub fn secret_hex(&self) -> String {
        let bytes = std::fs::read(self.state_dir.join("webhook-secret")).unwrap();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Puts `agent` on the roster with its forge user and its config repository
    /// `<org>/<agent>-config` (both made in the stand-in), as provisioning leaves it.
    pub async fn add_agent(&self, agent: &str) {
        self.forge.add_user(agent, "agent-password-not-used", false);
        self.put_on_roster(agent).await;
    }

    /// Puts `agent` on the roster as [`ForgeSwarm::add_agent`] does, but makes no forge user
    /// (one deleted by hand since).
    pub async fn put_on_roster(&self, agent: &str) {
        self.forge.add_repo(ORG, &format!("{agent}-config"), false, true);
        let identities = Identities {
            forge_user: Some(agent.to_owned()),
            config_repo: Some(format!("{ORG}/{agent}-config")),
            ..Identities::default()
        };
        let entry = RosterEntry {
            hive: HiveName::parse("hive1").unwrap(),
            origin: Origin::Declared,
            created_at: "2026-11-30T00:00:00Z".into(),
            provisioning: Default::default(),
            identities,
            spec: None,
            revision: 0,
            labels: Default::default(),
        };
        let roster = Roster::new(self.js.clone(), self.js.get_key_value("agents").await.unwrap());
        assert!(roster.create(&AgentName::parse(agent).unwrap(), &entry).await.unwrap());
    }

    /// The hooks of `org` pointing at the controller.
    pub fn our_hooks(&self, org: &str) -> Vec<StandInHook> {
        self.forge.hooks(org).into_iter().filter(|h| h.url == self.webhook_url).collect()
    }

    /// Waits until the swarm's objects on `org` are all there (the labels, the agents' team, and
    /// the controller's one hook, active, with its secret); returns the hook.
    pub async fn wait_objects(&self, org: &str) -> StandInHook {
        let secret = self.secret_hex();
        wait_until("the swarm's objects, the hook with its secret", PATIENCE, || async {
            let hooks = self.our_hooks(org);
            let labels = self.forge.org_labels(org).len() == swarm_controller::forge::objects::LABELS.len();
            let team = self.forge.teams(org).contains_key(swarm_controller::forge::objects::AGENTS_TEAM);
            let hook_ok = hooks.len() == 1 && hooks[0].secret == secret && hooks[0].active;
            (labels && team && hook_ok).then(|| hooks[0].clone())
        })
        .await
        .unwrap()
    }

    /// `GET path` on the socket: the status and the JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let request = hyper::Request::builder().uri(path).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        let (status, body) = swarmctl::client::send(&self.socket, request).await.unwrap();
        (status.as_u16(), serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The stored `config-prs` value of `agent`, raw.
    pub async fn stored_pr(&self, agent: &str) -> Option<Value> {
        let kv = self.js.get_key_value("config-prs").await.unwrap();
        kv.get(agent).await.unwrap().map(|bytes| serde_json::from_slice(&bytes).unwrap())
    }

    /// The last sequence of `config-prs`: unchanged means nothing was written.
    pub async fn config_prs_sequence(&self) -> u64 {
        let mut stream = self.js.get_stream("KV_config-prs").await.unwrap();
        stream.info().await.unwrap().state.last_sequence
    }

    /// Waits until `agent`'s stored config pull request satisfies `check`.
    pub async fn wait_pr(&self, agent: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_until(what, PATIENCE, || async { self.stored_pr(agent).await.filter(|pr| check(pr)) }).await.unwrap()
    }

    /// Sends `body` with `headers` to the webhook URL through Caddy; the status and the body.
    pub async fn post_webhook(&self, headers: &[(String, String)], body: Vec<u8>) -> (u16, Value) {
        let mut request = reqwest::Client::new().post(&self.webhook_url).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}
