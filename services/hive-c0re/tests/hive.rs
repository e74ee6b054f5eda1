//! hive-c0re end to end: the hive-c0re binary with a credential from `NatsJwt::mint_hive`
//! (nothing wider), real hive-agent binaries, and a JWT-mode nats-server whose swarm objects are
//! made by swarm-controller's own code. The controller's part (wanted states, deploy messages,
//! todos) is played with the controller's credential.
//!
//! Needs `cargo build -p hive-agent -p hive-c0re` first (hive-agent is found with
//! `project_binary`).
//!
//! Each agent's turn appends "<body> <todo id>" to `<agent>.turns`, so order and exactly-once
//! are observable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use hyperhive_hive_proto::deploy::{DeployKind, MSG_ID_HEADER, Payload, Secrets, seal};
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::status::{ActualState, AgentStatus, HiveStatus};
use hyperhive_hive_proto::wanted::{Wanted, WantedState};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_schedule::Todo;
use hyperhive_testkit::{NatsJwt, Process, Signal, project_binary, wait_until};
use tempfile::TempDir;

const PATIENCE: Duration = Duration::from_secs(30);
/// Five quick crashes take 1 + 2 + 4 + 8 s of backoff plus five starts.
const CRASH_LOOP_PATIENCE: Duration = Duration::from_secs(60);
const HIVE: &str = "h1";

struct Hive {
    nats: NatsJwt,
    dir: TempDir,
    js: jetstream::Context,
    wanted: kv::Store,
    status: kv::Store,
    /// The hive's public xkey.
    public: String,
    /// The controller's deploy key, which signs the messages this test sends.
    signer: DeploySigner,
    /// What the hive pins (`HIVE_C0RE_CONTROLLER_KEYS`): the signer's public key unless a test
    /// changes it.
    pinned: String,
    hive_creds: PathBuf,
    agents_file: PathBuf,
    status_secs: u64,
    c0re: Option<Process>,
}

impl Hive {
    /// A swarm with hive `h1`; `declared` are agents declared in the host's configuration, each
    /// with a credential (`None`: a garbage credential file, so it crashes at start).
    async fn new(declared: &[(&str, bool)], status_secs: u64) -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let js = controller_js(&nats).await;
        hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
        let wanted = js.get_key_value("agent-wanted").await.unwrap();
        let status = js.get_key_value("hive-status").await.unwrap();
        let names: Vec<&str> = declared.iter().map(|(n, _)| *n).collect();
        let hive_creds = nats.mint_hive(HIVE, &names).await.unwrap();
        // The consumers the hive and its agents bind to, as swarm-controller makes them.
        for consumer in hyperhive_nats_objects::hive_consumers(&HiveName::parse(HIVE).unwrap()) {
            consumer.ensure(&js).await.unwrap();
        }
        for agent in &names {
            make_agent_consumer(&js, agent).await;
        }
        let public = hive_c0re::keygen::keygen(&dir.path().join("hive.xkey")).unwrap();
        let mut entries = serde_json::Map::new();
        for (agent, good) in declared {
            let creds = if *good {
                nats.mint_agent(agent).await.unwrap()
            } else {
                let bad = dir.path().join(format!("{agent}.bad.creds"));
                std::fs::write(&bad, "not a credential").unwrap();
                bad
            };
            let spec = spec_for(dir.path(), agent);
            entries.insert((*agent).to_owned(), serde_json::json!({"spec": spec, "creds_file": creds}));
        }
        let agents_file = dir.path().join("agents.json");
        std::fs::write(&agents_file, serde_json::to_vec(&entries).unwrap()).unwrap();
        let signer = DeploySigner::generate();
        let pinned = signer.public_key();
        Self { nats, dir, js, wanted, status, public, signer, pinned, hive_creds, agents_file, status_secs, c0re: None }
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("c0re")
    }

    async fn start(&mut self) {
        let mut c0re = Process::builder(env!("CARGO_BIN_EXE_hive-c0re"))
            .env("HIVE_C0RE_HIVE", HIVE)
            .env("HIVE_C0RE_NATS_URL", self.nats.url())
            .env("HIVE_C0RE_NATS_CREDS", &self.hive_creds)
            .env("HIVE_C0RE_XKEY_FILE", self.dir.path().join("hive.xkey"))
            .env("HIVE_C0RE_CONTROLLER_KEYS", &self.pinned)
            .env("HIVE_C0RE_STATE_DIR", self.state_dir())
            .env("HIVE_C0RE_RUNNER", "process")
            .env("HIVE_C0RE_AGENTS_FILE", &self.agents_file)
            .env("HIVE_C0RE_AGENT_BIN", project_binary("hive-agent").unwrap())
            .env("HIVE_C0RE_STATUS_SECS", self.status_secs.to_string())
            .env("NO_COLOR", "1")
            .start("hive-c0re")
            .unwrap();
        c0re.wait_for_log("hive-c0re started", PATIENCE).await.unwrap();
        self.c0re = Some(c0re);
    }

    fn c0re(&mut self) -> &mut Process {
        self.c0re.as_mut().expect("hive-c0re was started")
    }

    /// SIGTERM, as systemd stops it: its agents stop with it.
    async fn stop(&mut self) {
        let c0re = self.c0re();
        c0re.signal(Signal::SIGTERM).unwrap();
        let status = c0re.wait_exit(PATIENCE).await.unwrap();
        assert!(status.success(), "{status}: {}", c0re.log());
    }

    async fn put_wanted(&self, agent: &str, state: WantedState) {
        let wanted = Wanted { state, set_at: hive_c0re::now(), set_by: "test".into() };
        self.wanted.put(format!("{HIVE}.{agent}"), serde_json::to_vec(&wanted).unwrap().into()).await.unwrap();
    }

    async fn read_status(&self) -> Option<HiveStatus> {
        let bytes = self.status.get(HIVE).await.unwrap()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    /// Waits for the published status of `agent` to satisfy `check`, and returns it.
    async fn wait_agent(&self, agent: &str, what: &str, check: impl Fn(&AgentStatus) -> bool) -> AgentStatus {
        let name = AgentName::parse(agent).unwrap();
        wait_until(&format!("{agent}: {what}"), CRASH_LOOP_PATIENCE, || async {
            let status = self.read_status().await?;
            status.agents.get(&name).filter(|s| check(s)).cloned()
        })
        .await
        .unwrap()
    }

    async fn wait_actual(&self, agent: &str, actual: ActualState) -> AgentStatus {
        self.wait_agent(agent, actual.as_str(), |s| s.actual == actual).await
    }

    async fn publish_todo(&self, agent: &str, id: &str, body: &str) {
        let todo = Todo { id: id.into(), source: "test".into(), body: body.into() };
        self.js
            .publish(format!("todo.{agent}"), serde_json::to_vec(&todo).unwrap().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    fn turns(&self, agent: &str) -> Vec<String> {
        turns(&self.dir.path().join(format!("{agent}.turns")))
    }

    async fn wait_turns(&self, agent: &str, count: usize) -> Vec<String> {
        wait_until(&format!("{count} turns of {agent}"), PATIENCE, || async {
            let lines = self.turns(agent);
            (lines.len() >= count).then_some(lines)
        })
        .await
        .unwrap()
    }

    /// The hive-agent processes running as `agent` of this hive (found by their state dir).
    fn agent_pids(&self, agent: &str) -> Vec<i32> {
        let marker =
            format!("HIVE_AGENT_STATE_DIR={}", self.state_dir().join("agents").join(agent).join("state").display());
        live_pids_with_env(&marker)
    }

    async fn wait_one_agent_process(&self, agent: &str) -> i32 {
        wait_until(&format!("one process of {agent}"), PATIENCE, || async {
            let pids = self.agent_pids(agent);
            (pids.len() == 1).then(|| pids[0])
        })
        .await
        .unwrap()
    }

    async fn no_agent_process(&self, agent: &str) {
        wait_until(&format!("no process of {agent}"), PATIENCE, || async {
            self.agent_pids(agent).is_empty().then_some(())
        })
        .await
        .unwrap();
    }

    /// A deploy message for `agent`, sealed to `to`.
    async fn deploy_to(&self, to: &str, hive: &str, agent: &str, kind: DeployKind, revision: u64) -> Vec<u8> {
        self.deploy_with_files(to, hive, agent, kind, revision, BTreeMap::new()).await
    }

    /// [`Hive::deploy_to`] carrying further secret `files` (name -> content).
    async fn deploy_with_files(
        &self,
        to: &str,
        hive: &str,
        agent: &str,
        kind: DeployKind,
        revision: u64,
        files: BTreeMap<String, String>,
    ) -> Vec<u8> {
        self.deploy_with_secrets(to, hive, agent, kind, revision, files, BTreeMap::new()).await
    }

    /// A deploy message for `agent` on this hive, sealed to it, signed by `signer`.
    async fn deploy_signed_by(&self, signer: &DeploySigner, agent: &str, kind: DeployKind, revision: u64) -> Vec<u8> {
        let payload = self.payload(HIVE, agent, kind, revision, BTreeMap::new(), BTreeMap::new()).await;
        serde_json::to_vec(&seal(&payload, &self.public, signer).unwrap()).unwrap()
    }

    /// [`Hive::deploy_with_files`] carrying secret variables `env` (name -> value) as well.
    #[allow(clippy::too_many_arguments)]
    async fn deploy_with_secrets(
        &self,
        to: &str,
        hive: &str,
        agent: &str,
        kind: DeployKind,
        revision: u64,
        files: BTreeMap<String, String>,
        env: BTreeMap<String, String>,
    ) -> Vec<u8> {
        let payload = self.payload(hive, agent, kind, revision, files, env).await;
        serde_json::to_vec(&seal(&payload, to, &self.signer).unwrap()).unwrap()
    }

    async fn payload(
        &self,
        hive: &str,
        agent: &str,
        kind: DeployKind,
        revision: u64,
        files: BTreeMap<String, String>,
        env: BTreeMap<String, String>,
    ) -> Payload {
        let creds = std::fs::read_to_string(self.nats.mint_agent(agent).await.unwrap()).unwrap();
        make_agent_consumer(&self.js, agent).await;
        Payload {
            kind,
            hive: HiveName::parse(hive).unwrap(),
            agent: AgentName::parse(agent).unwrap(),
            revision,
            spec: (kind == DeployKind::Deploy).then(|| spec_for(self.dir.path(), agent)),
            secrets: Secrets { nats_creds: Some(creds), files, env },
        }
    }

    async fn publish_deploy(&self, bytes: Vec<u8>, msg_id: &str) {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(MSG_ID_HEADER, msg_id);
        self.js.publish_with_headers(format!("deploy.{HIVE}"), headers, bytes.into()).await.unwrap().await.unwrap();
    }

    async fn deploy(&self, agent: &str, revision: u64) {
        let bytes = self.deploy_to(&self.public, HIVE, agent, DeployKind::Deploy, revision).await;
        self.publish_deploy(bytes, &format!("{agent}:deploy:{revision}")).await;
    }
}

impl Drop for Hive {
    /// A failed test must not leave agents behind: whatever runs with this hive's state dir goes.
    fn drop(&mut self) {
        let marker = format!("HIVE_AGENT_STATE_DIR={}", self.state_dir().display());
        for pid in live_pids_with_env(&marker) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn spec_for(dir: &Path, agent: &str) -> AgentSpec {
    AgentSpec {
        turn_command: format!(
            "echo \"$(cat) $HIVE_TODO_ID${{API_TOKEN:+ $API_TOKEN}}\" >> {}",
            dir.join(format!("{agent}.turns")).display()
        ),
        schedule_tick: Some("200ms".into()),
        turn_timeout: None,
        env: BTreeMap::new(),
    }
}

/// Makes `agent`'s todo consumer as swarm-controller makes it when it mints the agent's credential.
async fn make_agent_consumer(js: &jetstream::Context, agent: &str) {
    hyperhive_nats_objects::agent_consumer(&AgentName::parse(agent).unwrap()).ensure(js).await.unwrap();
}

async fn controller_js(nats: &NatsJwt) -> jetstream::Context {
    jetstream::new(nats.controller_client().await.unwrap())
}

/// Live (not zombie) processes of this user whose environment holds a variable starting with
/// `marker`.
fn live_pids_with_env(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let has = environ.split(|b| *b == 0).any(|var| var.starts_with(marker.as_bytes()));
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
            .unwrap_or(true);
        if has && !zombie {
            pids.push(pid);
        }
    }
    pids
}

/// The finished lines of a turns file.
fn turns(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let finished = text.rfind('\n').map_or("", |end| &text[..end]);
    finished.lines().map(str::to_owned).collect()
}

/// The hive-agent's `state.db` is the whole of the agent's state; its queue is the stream.
async fn queued(hive: &Hive) -> u64 {
    hive.js.get_stream("TODO").await.unwrap().info().await.unwrap().state.messages
}

#[tokio::test]
async fn converges_through_up_paused_offline_up_and_destroyed() {
    let mut hive = Hive::new(&[], 1).await;
    hive.start().await;
    // A deployed agent waits paused until the controller says otherwise.
    hive.deploy("b", 1).await;
    let status = hive.wait_actual("b", ActualState::Paused).await;
    assert_eq!((status.wanted, status.revision), (WantedState::Paused, Some(1)));
    let creds = hive.state_dir().join("agents/b/secrets/nats.creds");
    assert!(creds.is_file());

    hive.put_wanted("b", WantedState::Up).await;
    hive.wait_actual("b", ActualState::Running).await;
    hive.publish_todo("b", "t1", "one").await;
    assert_eq!(hive.wait_turns("b", 1).await, ["one t1"]);

    // Paused: todos wait in the queue, none lost.
    hive.put_wanted("b", WantedState::Paused).await;
    hive.wait_agent("b", "paused with a paused turn", |s| {
        s.actual == ActualState::Paused
            && s.turn.as_ref().is_some_and(|t| t.turn == hyperhive_hive_proto::agent_files::Turn::Paused)
    })
    .await;
    for (id, body) in [("t2", "two"), ("t3", "three")] {
        hive.publish_todo("b", id, body).await;
    }
    // Two status publishes later (each reads the agent's turn file afresh) it still took none.
    let published = hive.read_status().await.unwrap().published_at;
    wait_until("two more status publishes", PATIENCE, || async {
        let now = hive.read_status().await?.published_at;
        (hyperhive_schedule::parse_instant(&now).ok()?
            >= hyperhive_schedule::parse_instant(&published).ok()? + time::Duration::seconds(2))
        .then_some(())
    })
    .await
    .unwrap();
    assert_eq!(hive.turns("b"), ["one t1"]);
    assert_eq!(queued(&hive).await, 2);

    hive.put_wanted("b", WantedState::Up).await;
    assert_eq!(hive.wait_turns("b", 3).await, ["one t1", "two t2", "three t3"]);

    // Offline: stopped, state kept; up again: the same agent carries on.
    hive.put_wanted("b", WantedState::Offline).await;
    hive.wait_actual("b", ActualState::Stopped).await;
    hive.no_agent_process("b").await;
    assert!(hive.state_dir().join("agents/b/state/state.db").is_file(), "offline keeps the state");
    hive.put_wanted("b", WantedState::Up).await;
    hive.wait_actual("b", ActualState::Running).await;
    hive.publish_todo("b", "t4", "four").await;
    assert_eq!(hive.wait_turns("b", 4).await[3], "four t4");

    // Destroyed: stopped, state and credential gone; a later deploy is refused.
    hive.put_wanted("b", WantedState::Destroyed).await;
    hive.wait_actual("b", ActualState::Stopped).await;
    hive.no_agent_process("b").await;
    wait_until("b's directory removed", PATIENCE, || async {
        (!hive.state_dir().join("agents/b").exists()).then_some(())
    })
    .await
    .unwrap();
    assert!(!creds.exists());
    hive.deploy("b", 2).await;
    hive.c0re().wait_for_log("agent b was destroyed on this hive; destroyed is final", PATIENCE).await.unwrap();
    assert!(!hive.state_dir().join("agents/b").exists(), "the refused deploy wrote nothing");
    assert_eq!(hive.turns("b").len(), 4, "each todo ran once");
    hive.stop().await;
}

#[tokio::test]
async fn a_killed_agent_is_restarted_and_a_crash_loop_ends_failed() {
    let mut hive = Hive::new(&[("a", true), ("c", false)], 1).await;
    hive.start().await;
    hive.wait_actual("a", ActualState::Running).await;
    let first = hive.wait_one_agent_process("a").await;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first), Signal::SIGKILL).unwrap();
    let status = hive.wait_agent("a", "restarted once", |s| s.restarts == 1 && s.actual == ActualState::Running).await;
    assert_eq!(status.last_exit.as_ref().and_then(|e| e.signal), Some(9));
    let second = hive.wait_one_agent_process("a").await;
    assert_ne!(first, second);
    hive.publish_todo("a", "t1", "after").await;
    assert_eq!(hive.wait_turns("a", 1).await, ["after t1"]);

    // c's credential is garbage: hive-agent exits 1 at every start.
    let failed = hive.wait_actual("c", ActualState::Failed).await;
    let exit = failed.last_exit.expect("a last exit");
    assert_eq!((exit.code, exit.signal), (Some(1), None));
    assert!(failed.log_tail.iter().any(|l| l.contains("credential")), "{:?}", failed.log_tail);
    assert_eq!(failed.restarts, 4, "four restarts, then the fifth crash is failed");
    hive.no_agent_process("c").await;
    hive.stop().await;
    hive.no_agent_process("a").await;
}

#[tokio::test]
async fn a_killed_c0re_leaves_no_orphan_and_runs_no_agent_twice() {
    let mut hive = Hive::new(&[("a", true), ("x", true)], 1).await;
    hive.start().await;
    hive.wait_actual("a", ActualState::Running).await;
    hive.publish_todo("a", "t1", "one").await;
    assert_eq!(hive.wait_turns("a", 1).await, ["one t1"]);
    let before = hive.wait_one_agent_process("a").await;
    let x = hive.wait_one_agent_process("x").await;

    hive.c0re().kill();
    // Its agents stop on their own (the kernel's SIGTERM when their parent ends): none runs
    // unsupervised, whether or not a hive-c0re ever starts again.
    let leftovers = [nix::unistd::Pid::from_raw(before), nix::unistd::Pid::from_raw(x)];
    hyperhive_testkit::wait_until_none_running(&leftovers, PATIENCE).await.unwrap();
    // x is no longer declared when hive-c0re comes back: it must not run again.
    let text = std::fs::read_to_string(&hive.agents_file).unwrap();
    let mut declared: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    declared.remove("x");
    std::fs::write(&hive.agents_file, serde_json::to_vec(&declared).unwrap()).unwrap();
    hive.start().await;
    let after = hive.wait_one_agent_process("a").await;
    assert_ne!(before, after);
    hive.no_agent_process("x").await;
    hive.wait_actual("a", ActualState::Running).await;
    hive.publish_todo("a", "t2", "two").await;
    assert_eq!(hive.wait_turns("a", 2).await, ["one t1", "two t2"]);
    assert_eq!(hive.agent_pids("a"), [after], "never two");
    hive.stop().await;
    hive.no_agent_process("a").await;
}

#[tokio::test]
async fn deploys_run_with_the_sealed_credential_once_and_refusals_change_nothing() {
    let mut hive = Hive::new(&[], 1).await;
    hive.start().await;
    hive.deploy("d", 1).await;
    hive.put_wanted("d", WantedState::Up).await;
    hive.wait_actual("d", ActualState::Running).await;
    hive.publish_todo("d", "t1", "sealed").await;
    assert_eq!(hive.wait_turns("d", 1).await, ["sealed t1"], "it runs with the credential from the seal");
    let pid = hive.wait_one_agent_process("d").await;
    let secret = std::fs::read_to_string(hive.state_dir().join("agents/d/secrets/nats.creds")).unwrap();
    let jwt = hyperhive_nats_creds::read_creds_jwt(&hive.state_dir().join("agents/d/secrets/nats.creds")).unwrap();

    // The same revision again (as a redelivery would bring it): nothing changes.
    let again = hive.deploy_to(&hive.public, HIVE, "d", DeployKind::Deploy, 1).await;
    hive.publish_deploy(again, "redelivered").await;
    hive.c0re().wait_for_log("already applied", PATIENCE).await.unwrap();

    // Sealed to another hive's key, addressed to another hive, garbage: refused, terminated.
    let other = nkeys::XKey::new().public_key();
    let bad_seal = hive.deploy_to(&other, HIVE, "d", DeployKind::Deploy, 5).await;
    hive.publish_deploy(bad_seal, "bad-seal").await;
    hive.c0re().wait_for_log("does not open with this hive's xkey", PATIENCE).await.unwrap();
    let wrong_hive = hive.deploy_to(&hive.public, "h2", "d", DeployKind::Deploy, 6).await;
    hive.publish_deploy(wrong_hive, "wrong-hive").await;
    hive.c0re().wait_for_log("is for hive h2, not this hive", PATIENCE).await.unwrap();
    hive.publish_deploy(b"garbage".to_vec(), "garbage").await;
    hive.c0re().wait_for_log("not a deploy message", PATIENCE).await.unwrap();
    // Sealed to this hive's own key (the hive directory shows it) by anyone but the controller,
    // with a revision no real message will pass: refused and named by its signer, and the real
    // revision 2 below is still applied.
    let forger = DeploySigner::generate();
    let forged = hive.deploy_signed_by(&forger, "d", DeployKind::Deploy, u64::MAX >> 1).await;
    hive.publish_deploy(forged, "forged").await;
    hive.c0re()
        .wait_for_log(&format!("signed by {}, which this hive does not pin", forger.public_key()), PATIENCE)
        .await
        .unwrap();

    // Terminated, not left to redeliver: the stream holds none of them.
    wait_until("the DEPLOY stream empty", PATIENCE, || async {
        (hive.js.get_stream("DEPLOY").await.ok()?.info().await.ok()?.state.messages == 0).then_some(())
    })
    .await
    .unwrap();
    let status = hive.wait_actual("d", ActualState::Running).await;
    assert_eq!((status.revision, status.restarts), (Some(1), 0));
    assert_eq!(hive.agent_pids("d"), [pid], "not restarted");
    assert_eq!(std::fs::read_to_string(hive.state_dir().join("agents/d/secrets/nats.creds")).unwrap(), secret);

    // New credentials: written in place of the old, and the running agent moves to them without
    // a restart (which would kill a running turn and run its todo again).
    let creds_file = hive.state_dir().join("agents/d/secrets/nats.creds");
    let renewed = hive.deploy_to(&hive.public, HIVE, "d", DeployKind::Credentials, 2).await;
    hive.publish_deploy(renewed, "d:credentials:2").await;
    let status =
        hive.wait_agent("d", "revision 2", |s| s.revision == Some(2) && s.actual == ActualState::Running).await;
    assert_eq!(status.restarts, 0);
    let agent_log = hive.state_dir().join("agents/d/agent.log");
    wait_until("d taking up the renewed credential", PATIENCE, || async {
        std::fs::read_to_string(&agent_log).ok()?.contains("credential renewed, expires at").then_some(())
    })
    .await
    .unwrap();
    assert_eq!(hive.agent_pids("d"), [pid], "not restarted");
    let renewed_secret = std::fs::read_to_string(&creds_file).unwrap();
    assert_ne!(renewed_secret, secret);
    let renewed_jwt = hyperhive_nats_creds::read_creds_jwt(&creds_file).unwrap();
    hive.publish_todo("d", "t2", "renewed").await;
    assert_eq!(hive.wait_turns("d", 2).await[1], "renewed t2");
    let agent_text = std::fs::read_to_string(&agent_log).unwrap();
    assert_eq!(agent_text.matches("hive-agent started").count(), 1, "{agent_text}");
    let seeds = [&secret, &renewed_secret].map(|text| text.lines().find(|l| l.starts_with("SU")).unwrap().to_owned());
    assert!(
        !agent_text.contains(&renewed_jwt) && seeds.iter().all(|seed| !agent_text.contains(seed.as_str())),
        "a secret in the agent's log"
    );

    // A deploy (a spec, even the same one) still restarts the agent.
    hive.deploy("d", 3).await;
    let status =
        hive.wait_agent("d", "revision 3", |s| s.revision == Some(3) && s.actual == ActualState::Running).await;
    assert_eq!(status.restarts, 0, "a restart for a deploy is not a crash");
    wait_until("a new process of d", PATIENCE, || async {
        let pids = hive.agent_pids("d");
        (pids.len() == 1 && pids[0] != pid).then_some(())
    })
    .await
    .unwrap();
    hive.publish_todo("d", "t3", "redeployed").await;
    assert_eq!(hive.wait_turns("d", 3).await[2], "redeployed t3");
    let redeployed = hive.wait_one_agent_process("d").await;

    // Credentials that add a secret file restart it: its environment names the secrets dir.
    let token = BTreeMap::from([("token".to_owned(), "t0ken".to_owned())]);
    let with_file = hive.deploy_with_files(&hive.public, HIVE, "d", DeployKind::Credentials, 4, token).await;
    hive.publish_deploy(with_file, "d:credentials:4").await;
    hive.wait_agent("d", "revision 4", |s| s.revision == Some(4) && s.actual == ActualState::Running).await;
    wait_until("a process of d with its secrets dir", PATIENCE, || async {
        let pids = hive.agent_pids("d");
        let environ = std::fs::read(format!("/proc/{}/environ", pids.first()?)).ok()?;
        let has_dir = environ.split(|b| *b == 0).any(|var| var.starts_with(b"HIVE_AGENT_SECRETS_DIR="));
        (pids.len() == 1 && pids[0] != redeployed && has_dir).then_some(())
    })
    .await
    .unwrap();

    let log = hive.c0re().log();
    assert!(
        !log.contains(&jwt) && !log.contains(&renewed_jwt) && !log.contains("NATS USER JWT") && !log.contains("SEED"),
        "a secret in the log"
    );
    hive.stop().await;
}

#[tokio::test]
async fn a_wanted_state_waits_for_its_agent_and_survives_a_lost_state_dir() {
    let mut hive = Hive::new(&[("a", true)], 1).await;
    // Written before the agent is deployed: kept, and applied on deploy (not the paused default).
    hive.put_wanted("e", WantedState::Up).await;
    hive.put_wanted("a", WantedState::Offline).await;
    hive.start().await;
    hive.wait_actual("a", ActualState::Stopped).await;
    hive.deploy("e", 1).await;
    hive.wait_actual("e", ActualState::Running).await;
    hive.stop().await;

    // The records are lost; a's wanted state is read again by direct get at start.
    std::fs::remove_dir_all(hive.state_dir().join("records")).unwrap();
    hive.start().await;
    let status = hive.wait_agent("a", "offline from NATS", |s| s.wanted == WantedState::Offline).await;
    assert_eq!(status.actual, ActualState::Stopped);
    hive.no_agent_process("a").await;
    // Not even for a moment on its default (up): it never wrote a log line.
    assert!(!hive.state_dir().join("agents/a/agent.log").exists(), "a ran");
    hive.stop().await;
}

#[tokio::test]
async fn the_status_is_published_at_once_on_a_change_and_on_every_interval() {
    // The longest interval hive-c0re takes, longer than this part of the test: every publish
    // after the first is a change's.
    let mut hive = Hive::new(&[("a", true)], 30).await;
    hive.start().await;
    hive.wait_actual("a", ActualState::Running).await;
    hive.put_wanted("a", WantedState::Paused).await;
    hive.wait_actual("a", ActualState::Paused).await;
    hive.stop().await;

    // An interval of 1 s with nothing changing: the status is published again and again.
    hive.status_secs = 1;
    hive.start().await;
    hive.wait_actual("a", ActualState::Paused).await;
    let first = hive.status.entry(HIVE).await.unwrap().unwrap().revision;
    wait_until("three more publishes", PATIENCE, || async {
        (hive.status.entry(HIVE).await.ok()??.revision >= first + 3).then_some(())
    })
    .await
    .unwrap();
    let status = hive.read_status().await.unwrap();
    assert_eq!(status.hive.as_str(), HIVE);
    assert!(status.load.iter().all(|l| *l >= 0.0));
    hive.stop().await;
}

#[tokio::test]
async fn another_hive_cannot_write_this_status_or_read_its_wanted_states() {
    let mut hive = Hive::new(&[("a", true)], 1).await;
    hive.put_wanted("a", WantedState::Up).await;
    hive.start().await;
    hive.wait_actual("a", ActualState::Running).await;

    let intruder = async_nats::ConnectOptions::with_credentials_file(hive.nats.mint_hive("h2", &[]).await.unwrap())
        .await
        .unwrap()
        .custom_inbox_prefix("_INBOX_hive-h2")
        .request_timeout(Some(Duration::from_secs(2)))
        .connect(hive.nats.url())
        .await
        .unwrap();
    let js = jetstream::new(intruder.clone());
    let forged = js.publish(format!("$KV.hive-status.{HIVE}"), "{}".into()).await;
    let stored = match forged {
        Ok(ack) => ack.await.is_ok(),
        Err(_) => false,
    };
    assert!(!stored, "another hive's status put was stored");
    let read =
        intruder.request(format!("$JS.API.DIRECT.GET.KV_agent-wanted.$KV.agent-wanted.{HIVE}.a"), "".into()).await;
    assert!(read.is_err(), "another hive read this hive's wanted state: {read:?}");
    // Its own are fine: the refusals above are the permissions, not a broken connection.
    let own = intruder.request("$JS.API.DIRECT.GET.KV_hive-status.$KV.hive-status.h2", "".into()).await;
    assert!(own.is_ok(), "{own:?}");
    assert_eq!(hive.read_status().await.unwrap().hive.as_str(), HIVE, "the status is still this hive's own");
    hive.stop().await;
}

#[tokio::test]
async fn bad_settings_are_all_reported_one_line_each() {
    let mut c0re = Process::builder(env!("CARGO_BIN_EXE_hive-c0re"))
        .env("HIVE_C0RE_HIVE", "Not.A.Hive")
        .env("HIVE_C0RE_NATS_URL", "localhost:4222")
        .env("HIVE_C0RE_RUNNER", "docker")
        .env("HIVE_C0RE_STATUS_SECS", "soon")
        .env_remove("HIVE_C0RE_NATS_CREDS")
        .start("hive-c0re")
        .unwrap();
    let status = c0re.wait_exit(PATIENCE).await.unwrap();
    assert!(!status.success());
    let log = c0re.log();
    for needle in [
        "hive-c0re: HIVE_C0RE_HIVE: invalid hive name",
        "hive-c0re: HIVE_C0RE_NATS_URL \"localhost:4222\" is not a NATS URL",
        "hive-c0re: HIVE_C0RE_NATS_CREDS is not set",
        "hive-c0re: HIVE_C0RE_RUNNER \"docker\" is not a runner",
        "hive-c0re: HIVE_C0RE_STATUS_SECS \"soon\" must be a whole number",
    ] {
        assert!(log.contains(needle), "{needle:?} not in:\n{log}");
    }
}

/// Puts something at the turn file's path.
type Plant = dyn Fn(&Path);

/// An agent owns its state directory, so it chooses what stands where hive-c0re reads its turn
/// file: each hostile choice is reported as that agent's problem while the hive's status keeps
/// being published, the other agent's turn is still read, and SIGTERM still stops hive-c0re.
#[tokio::test]
async fn a_hostile_turn_file_is_that_agents_problem_and_never_stalls_the_hive() {
    let mut hive = Hive::new(&[("a", true), ("b", true)], 1).await;
    hive.start().await;
    hive.wait_agent("a", "its turn read", |s| s.turn.is_some()).await;
    hive.wait_agent("b", "its turn read", |s| s.turn.is_some()).await;
    let turn = hive.state_dir().join("agents/a/state/turn.json");
    let fifo = |path: &Path| nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let zero = |path: &Path| std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    let sparse = |path: &Path| std::fs::File::create(path).unwrap().set_len(2 << 30).unwrap();
    // A turn state whose todo id alone is 1.1 MiB: it would make every status too large to store.
    let huge = |path: &Path| {
        let id = "x".repeat(1_100_000);
        std::fs::write(path, format!(r#"{{"turn":"working","todo_id":"{id}","since":"2026-12-01T00:00:00Z"}}"#))
            .unwrap();
    };
    let cases: [(&str, &Plant, &str); 4] = [
        ("a FIFO", &fifo, "FIFO"),
        ("a link to /dev/zero", &zero, "symbolic link"),
        ("a sparse 2 GiB file", &sparse, "more than the 4096"),
        ("a 1.1 MiB turn state", &huge, "more than the 4096"),
    ];
    for (what, plant, reported) in cases {
        let _ = std::fs::remove_file(&turn);
        plant(&turn);
        let a = hive
            .wait_agent("a", &format!("{what} reported"), |s| {
                s.problem.as_deref().is_some_and(|p| p.contains(reported))
            })
            .await;
        assert!(a.turn.is_none(), "{what}: {a:?}");
        // And the publisher goes on: a later status comes, b's turn read as before.
        let reported_in = hive.read_status().await.unwrap().published_at;
        let later = wait_until(&format!("{what}: a later status"), PATIENCE, || async {
            hive.read_status().await.filter(|s| s.published_at != reported_in)
        })
        .await
        .unwrap();
        let b = &later.agents[&AgentName::parse("b").unwrap()];
        assert!(b.problem.is_none() && b.turn.is_some(), "{what}: b's turn is read as before: {b:?}");
    }
    // The agent writes a good one again: its problem is gone.
    std::fs::remove_file(&turn).unwrap();
    std::fs::write(&turn, r#"{"turn":"idle","since":"2026-12-01T00:00:00Z"}"#).unwrap();
    hive.wait_agent("a", "its turn read again", |s| s.problem.is_none() && s.turn.is_some()).await;
    hive.stop().await;
}

#[tokio::test]
async fn a_deployed_agents_secret_variables_reach_its_next_turn_without_a_restart() {
    use hyperhive_hive_proto::env_secrets::ENV_FILE_VAR;
    let mut hive = Hive::new(&[], 1).await;
    hive.start().await;
    let env = |value: &str| BTreeMap::from([("API_TOKEN".to_owned(), value.to_owned())]);
    let first =
        hive.deploy_with_secrets(&hive.public, HIVE, "d", DeployKind::Deploy, 1, BTreeMap::new(), env("v-one")).await;
    hive.publish_deploy(first, "d:deploy:1").await;
    hive.put_wanted("d", WantedState::Up).await;
    hive.wait_actual("d", ActualState::Running).await;
    hive.publish_todo("d", "t1", "first").await;
    assert_eq!(hive.wait_turns("d", 1).await, ["first t1 v-one"], "the turn has the variable");
    let pid = hive.wait_one_agent_process("d").await;
    let env_file = hive.state_dir().join("agents/d/secrets/agent.env");
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&env_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(!environ.windows(5).any(|w| w == b"v-one"), "the variable is the turn's, not hive-agent's own");
    assert!(environ.split(|b| *b == 0).any(|var| var.starts_with(b"HIVE_AGENT_ENV_FILE=")), "it names the file");

    // Rotated by a credentials message: the next turn has the new value, nothing restarts.
    let rotated = hive
        .deploy_with_secrets(&hive.public, HIVE, "d", DeployKind::Credentials, 2, BTreeMap::new(), env("v-two"))
        .await;
    hive.publish_deploy(rotated, "d:credentials:2").await;
    hive.wait_agent("d", "revision 2", |s| s.revision == Some(2) && s.actual == ActualState::Running).await;
    hive.publish_todo("d", "t2", "second").await;
    assert_eq!(hive.wait_turns("d", 2).await[1], "second t2 v-two");
    // Removed: the next turn has none.
    let removed = hive.deploy_to(&hive.public, HIVE, "d", DeployKind::Credentials, 3).await;
    hive.publish_deploy(removed, "d:credentials:3").await;
    hive.wait_agent("d", "revision 3", |s| s.revision == Some(3) && s.actual == ActualState::Running).await;
    hive.publish_todo("d", "t3", "third").await;
    assert_eq!(hive.wait_turns("d", 3).await[2], "third t3");
    assert_eq!(hive.agent_pids("d"), [pid], "not restarted");

    // An env file something else broke: the turn does not start and counts as failed (acked, so
    // the queue moves on), the log names the file and the line, never a value.
    std::fs::write(&env_file, "{\n  \"API_TOKEN\": v-three\n}\n").unwrap();
    hive.publish_todo("d", "t4", "broken").await;
    let agent_log = hive.state_dir().join("agents/d/agent.log");
    wait_until("the refused turn logged", PATIENCE, || async {
        let log = std::fs::read_to_string(&agent_log).ok()?;
        (log.contains(&format!("{} ({ENV_FILE_VAR}) is malformed: line 2", env_file.display()))).then_some(())
    })
    .await
    .unwrap();
    // The next message writes it whole again, and turns run with it.
    let repaired = hive
        .deploy_with_secrets(&hive.public, HIVE, "d", DeployKind::Credentials, 4, BTreeMap::new(), env("v-four"))
        .await;
    hive.publish_deploy(repaired, "d:credentials:4").await;
    hive.wait_agent("d", "revision 4", |s| s.revision == Some(4) && s.actual == ActualState::Running).await;
    hive.publish_todo("d", "t5", "fifth").await;
    let turns = hive.wait_turns("d", 4).await;
    assert_eq!(turns[3], "fifth t5 v-four", "the broken turn never ran: {turns:?}");
    assert_eq!(hive.agent_pids("d"), [pid], "not restarted");
    let log = std::fs::read_to_string(&agent_log).unwrap() + &hive.c0re().log();
    for value in ["v-one", "v-two", "v-three", "v-four"] {
        assert!(!log.contains(value), "a variable's value in a log");
    }
}

/// Replacing the controller's deploy key: the hive pins the old and the new key and applies
/// messages of both; once it pins only the new one, a message the old key signed is refused.
#[tokio::test]
async fn a_replaced_deploy_key_is_taken_while_both_are_pinned_and_refused_after() {
    let mut hive = Hive::new(&[], 1).await;
    let (old, new) = (DeploySigner::generate(), DeploySigner::generate());
    hive.pinned = format!("{},{}", old.public_key(), new.public_key());
    hive.start().await;
    let by_old = hive.deploy_signed_by(&old, "d", DeployKind::Deploy, 1).await;
    hive.publish_deploy(by_old, "d:deploy:1").await;
    hive.wait_agent("d", "revision 1 from the old key", |s| s.revision == Some(1)).await;
    let by_new = hive.deploy_signed_by(&new, "d", DeployKind::Credentials, 2).await;
    hive.publish_deploy(by_new, "d:credentials:2").await;
    hive.wait_agent("d", "revision 2 from the new key", |s| s.revision == Some(2)).await;

    hive.stop().await;
    hive.pinned = new.public_key();
    hive.start().await;
    let late_by_old = hive.deploy_signed_by(&old, "d", DeployKind::Credentials, 3).await;
    hive.publish_deploy(late_by_old, "d:credentials:3").await;
    hive.c0re()
        .wait_for_log(&format!("signed by {}, which this hive does not pin", old.public_key()), PATIENCE)
        .await
        .unwrap();
    let by_new = hive.deploy_signed_by(&new, "d", DeployKind::Credentials, 4).await;
    hive.publish_deploy(by_new, "d:credentials:4").await;
    hive.wait_agent("d", "revision 4 from the new key", |s| s.revision == Some(4)).await;
}
