//! End to end: the swarm-controller and swarmctl binaries, two hives each run by a `hive-c0re`
//! (process runner) with one agent, on a JWT-mode nats-server where every party holds only its
//! own credential. The wanted state goes in through `swarmctl agent state`; what happened is
//! read back from the agents' turn files, the `TODO` stream and the hives' status.
//!
//! Needs `cargo build -p hive-agent -p hive-c0re -p swarmctl` first (found with `project_binary`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_nats_objects::todo_subject;
use hyperhive_schedule::{AgentName, Todo};
use hyperhive_testkit::{NatsJwt, Process, project_binary, wait_until};
use serde_json::Value;
use tempfile::TempDir;

const PATIENCE: Duration = Duration::from_secs(30);
/// Which agent each hive runs.
const HIVES: [(&str, &str); 2] = [("hive1", "alpha"), ("hive2", "beta")];

struct Swarm {
    nats: NatsJwt,
    dir: TempDir,
    socket: PathBuf,
    controller: Process,
    hives: Vec<(String, Process)>,
    /// The controller's own connection, to queue todos and read the queue as an operator would.
    js: jetstream::Context,
}

impl Swarm {
    async fn start() -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/controller.sock");
        let mut directory = serde_json::Map::new();
        for (hive, agent) in HIVES {
            nats.mint_agent(agent).await.unwrap();
            nats.mint_hive(hive, &[agent]).await.unwrap();
            let key = dir.path().join(format!("{hive}.xkey"));
            let out = Command::new(project_binary("hive-c0re").unwrap())
                .args(["keygen", "--out"])
                .arg(&key)
                .output()
                .unwrap();
            assert!(out.status.success(), "keygen: {}", String::from_utf8_lossy(&out.stderr));
            let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
            directory.insert(hive.into(), serde_json::json!({"description": format!("runs {agent}"), "xkey": public}));
        }
        let hives_file = dir.path().join("hives.json");
        std::fs::write(&hives_file, Value::Object(directory).to_string()).unwrap();
        swarm_controller::lifecycle::deploy_key::write_new(&dir.path().join("deploy.key")).unwrap();
        let controller = common::daemon_process(
            &nats,
            &socket,
            &[
                ("SWARM_HIVES_FILE", hives_file.to_str().unwrap()),
                ("SWARM_NATS_DIR", nats.creds_dir().to_str().unwrap()),
                ("SWARM_RECONCILE_SECS", "1"),
                ("NO_COLOR", "1"),
            ],
        )
        .await;
        let client = nats.controller_client().await.unwrap();
        let mut swarm = Self { nats, dir, socket, controller, hives: Vec::new(), js: jetstream::new(client) };
        for (hive, _) in HIVES {
            swarm.start_hive(hive);
        }
        for (_, agent) in HIVES {
            swarm.wait_actual(agent, "running").await;
        }
        swarm
    }

    fn turns_file(&self, agent: &str) -> PathBuf {
        self.dir.path().join(format!("{agent}.turns"))
    }

    /// The hive's hive-c0re, its agent declared as a host's configuration would declare it.
    fn start_hive(&mut self, hive: &str) {
        let agent = HIVES.iter().find(|(h, _)| *h == hive).unwrap().1;
        let turn = format!("printf '%s\\t%s\\n' \"$HIVE_TODO_ID\" \"$(cat)\" >> {}", self.turns_file(agent).display());
        let declared = serde_json::json!({
            agent: {
                "spec": {"turn_command": turn, "schedule_tick": "200ms"},
                "creds_file": self.nats.creds_dir().join(format!("agent-{agent}.creds")),
            }
        });
        let agents_file = self.dir.path().join(format!("{hive}.agents.json"));
        std::fs::write(&agents_file, declared.to_string()).unwrap();
        let process = Process::builder(project_binary("hive-c0re").unwrap())
            .arg("run")
            .env("HIVE_C0RE_HIVE", hive)
            .env("HIVE_C0RE_NATS_URL", self.nats.url())
            .env("HIVE_C0RE_NATS_CREDS", self.nats.creds_dir().join(format!("hive-{hive}.creds")))
            .env("HIVE_C0RE_XKEY_FILE", self.dir.path().join(format!("{hive}.xkey")))
            .env("HIVE_C0RE_CONTROLLER_KEYS", self.deploy_key().public_key())
            .env("HIVE_C0RE_STATE_DIR", self.state_dir(hive))
            .env("HIVE_C0RE_RUNNER", "process")
            .env("HIVE_C0RE_AGENTS_FILE", agents_file)
            .env("HIVE_C0RE_AGENT_BIN", project_binary("hive-agent").unwrap())
            .env("HIVE_C0RE_STATUS_SECS", "1")
            .env("NO_COLOR", "1")
            .start(&format!("hive-c0re-{hive}"))
            .unwrap();
        self.hives.push((hive.to_owned(), process));
    }

    /// The controller's deploy key, which every hive pins.
    fn deploy_key(&self) -> DeploySigner {
        swarm_controller::lifecycle::deploy_key::load(&self.dir.path().join("deploy.key")).unwrap()
    }

    fn state_dir(&self, hive: &str) -> PathBuf {
        self.dir.path().join(format!("{hive}.state"))
    }

    fn hive_process(&mut self, hive: &str) -> &mut Process {
        &mut self.hives.iter_mut().rev().find(|(h, _)| h == hive).unwrap().1
    }

    fn swarmctl(&self, args: &[&str]) -> Result<String, String> {
        let out =
            Command::new(common::swarmctl_binary()).arg("--socket").arg(&self.socket).args(args).output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn set_state(&self, hive: &str, agent: &str, state: &str) {
        self.swarmctl(&["agent", "state", hive, agent, state]).unwrap();
    }

    /// The agent's actual state as its hive last reported it, through the controller.
    fn actual(&self, agent: &str) -> Option<Value> {
        let agents: Value = serde_json::from_str(&self.swarmctl(&["agents", "--json"]).ok()?).ok()?;
        agents.as_array()?.iter().find(|a| a["name"] == agent).and_then(|a| a.get("actual").cloned())
    }

    async fn wait_actual(&self, agent: &str, state: &str) -> Value {
        wait_until(&format!("{agent} to be {state}"), PATIENCE, || async {
            self.actual(agent).filter(|actual| actual["actual"] == state)
        })
        .await
        .unwrap()
    }

    async fn queue(&self, agent: &str, id: &str) {
        let todo = Todo { id: id.into(), source: "test".into(), body: id.into() };
        let subject = todo_subject(&AgentName::parse(agent).unwrap());
        self.js.publish(subject, serde_json::to_vec(&todo).unwrap().into()).await.unwrap().await.unwrap();
    }

    /// The todo ids the agent ran, in order.
    fn turns(&self, agent: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.turns_file(agent)).unwrap_or_default();
        text.lines().map(|l| l.split('\t').next().unwrap().to_owned()).collect()
    }

    async fn wait_turns(&self, agent: &str, expected: &[&str]) {
        wait_until(&format!("{agent} to have run {expected:?}"), PATIENCE, || async {
            (self.turns(agent) == expected).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; ran {:?}", self.turns(agent)));
    }

    /// Todos the queue still holds for the agent: TODO is a work queue, so a todo leaves it only
    /// when acked. (Not the consumer's pending count: a pull the agent had open when it was
    /// paused takes one todo, which the agent hands back, and a handed-back todo is not counted
    /// as pending, though it still waits.)
    async fn waiting(&self, agent: &str) -> u64 {
        let subject = todo_subject(&AgentName::parse(agent).unwrap());
        let stream = self.js.get_stream("TODO").await.unwrap();
        let mut subjects = stream.info_with_subjects(subject).await.unwrap();
        let mut held = 0;
        while let Some(entry) = subjects.next().await {
            held += entry.unwrap().1;
        }
        held as u64
    }
}

/// Every live process running hive-agent for `agent` under this test's directory, by
/// its environment: what `ps` would show an operator.
fn agent_processes(agent: &str, under: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        let has = |needle: &str| vars.contains(&needle.as_bytes());
        let state_under = vars.iter().any(|v| {
            v.starts_with(b"HIVE_AGENT_STATE_DIR=")
                && String::from_utf8_lossy(&v[21..]).starts_with(&*under.to_string_lossy())
        });
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
        if has(&format!("HIVE_AGENT_NAME={agent}")) && state_under && !zombie {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_todos_and_up_runs_them_in_order_then_offline_and_back() {
    let swarm = Swarm::start().await;

    swarm.set_state("hive1", "alpha", "paused");
    swarm.wait_actual("alpha", "paused").await;
    for id in ["t1", "t2", "t3"] {
        swarm.queue("alpha", id).await;
    }
    // beta's todo, queued after alpha's, runs: the queue moves, alpha's todos wait.
    swarm.queue("beta", "b1").await;
    swarm.wait_turns("beta", &["b1"]).await;
    assert_eq!(swarm.turns("alpha"), Vec::<String>::new(), "a paused agent took a todo");
    assert_eq!(swarm.waiting("alpha").await, 3, "a paused agent's todos wait in its queue");

    swarm.set_state("hive1", "alpha", "up");
    swarm.wait_turns("alpha", &["t1", "t2", "t3"]).await;

    swarm.set_state("hive1", "alpha", "offline");
    swarm.wait_actual("alpha", "stopped").await;
    wait_until("alpha's process to be gone", PATIENCE, || async {
        agent_processes("alpha", swarm.dir.path()).is_empty().then_some(())
    })
    .await
    .unwrap();
    swarm.queue("alpha", "t4").await;
    swarm.set_state("hive1", "alpha", "up");
    swarm.wait_actual("alpha", "running").await;
    swarm.wait_turns("alpha", &["t1", "t2", "t3", "t4"]).await;
    assert_eq!(swarm.turns("beta"), ["b1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_of_an_agent_a_hive_and_the_controller_converge_again_and_nothing_runs_twice() {
    let mut swarm = Swarm::start().await;
    let under = swarm.dir.path().to_owned();

    // An agent killed: restarted, its restart counted.
    let pids = agent_processes("alpha", &under);
    assert_eq!(pids.len(), 1, "one alpha process: {pids:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pids[0] as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_until("alpha restarted after kill -9", PATIENCE, || async {
        swarm.actual("alpha").filter(|a| a["actual"] == "running" && a["restarts"].as_u64() >= Some(1))
    })
    .await
    .unwrap();
    swarm.queue("alpha", "t1").await;
    swarm.wait_turns("alpha", &["t1"]).await;

    // The hive's hive-c0re killed, and started again: still one alpha, the same work done once.
    swarm.set_state("hive1", "alpha", "paused");
    swarm.wait_actual("alpha", "paused").await;
    swarm.queue("alpha", "t2").await;
    swarm.hive_process("hive1").kill();
    swarm.start_hive("hive1");
    wait_until("hive1 to publish again with alpha paused", PATIENCE, || async {
        let pids = agent_processes("alpha", &under);
        (pids.len() == 1 && swarm.actual("alpha").is_some_and(|a| a["actual"] == "paused")).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(swarm.turns("alpha"), ["t1"], "a paused agent ran a todo across a hive-c0re restart");

    // The controller killed with the agent paused: the wanted state outlives it.
    swarm.controller.kill();
    swarm.controller = common::daemon_process(
        &swarm.nats,
        &swarm.socket,
        &[
            ("SWARM_HIVES_FILE", swarm.dir.path().join("hives.json").to_str().unwrap()),
            ("SWARM_NATS_DIR", swarm.nats.creds_dir().to_str().unwrap()),
            ("NO_COLOR", "1"),
        ],
    )
    .await;
    let agents: Value = serde_json::from_str(&swarm.swarmctl(&["agents", "--json"]).unwrap()).unwrap();
    let alpha = agents.as_array().unwrap().iter().find(|a| a["name"] == "alpha").unwrap().clone();
    assert_eq!(alpha["wanted"]["state"], "paused", "{alpha}");
    swarm.set_state("hive1", "alpha", "up");
    swarm.wait_turns("alpha", &["t1", "t2"]).await;
    assert_eq!(agent_processes("alpha", &under).len(), 1, "alpha runs once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroyed_removes_the_state_refuses_the_credential_and_is_final() {
    let swarm = Swarm::start().await;
    let under = swarm.dir.path().to_owned();
    let pid = agent_processes("alpha", &under)[0];
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let state_dir = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"HIVE_AGENT_STATE_DIR="))
        .map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()))
        .unwrap();
    assert!(state_dir.join("state.db").exists(), "{}", state_dir.display());
    // What the agent could have copied away while it ran.
    let stolen = swarm.dir.path().join("stolen.creds");
    std::fs::copy(swarm.nats.creds_dir().join("agent-alpha.creds"), &stolen).unwrap();

    swarm.set_state("hive1", "alpha", "destroyed");
    swarm.wait_actual("alpha", "stopped").await;
    wait_until("alpha's state directory to be removed", PATIENCE, || async {
        (!state_dir.exists() && agent_processes("alpha", &under).is_empty()).then_some(())
    })
    .await
    .unwrap();
    let refused = tokio::time::timeout(PATIENCE, async {
        async_nats::ConnectOptions::with_credentials_file(&stolen).await.unwrap().connect(swarm.nats.url()).await
    })
    .await
    .expect("a connect attempt with the destroyed agent's credential ends");
    let Err(error) = refused else { panic!("the destroyed agent's credential still connects") };
    let error = error.to_string();
    assert!(error.to_lowercase().contains("authorization"), "{error}");

    let again = swarm.swarmctl(&["agent", "state", "hive1", "alpha", "up"]).unwrap_err();
    assert!(again.contains("destroyed"), "{again}");
    // beta carries on.
    swarm.queue("beta", "b1").await;
    swarm.wait_turns("beta", &["b1"]).await;
}

/// The controller's deploy sender to a hive-c0re, end to end: the agent runs on its hive with the
/// credential that travelled sealed, joins the roster as `created`, waits paused until declared
/// `up`, then works; credentials for an agent never deployed there are refused and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_sent_by_the_controller_runs_the_agent_on_its_hive() {
    use hyperhive_hive_proto::deploy::{DeployKind, Payload, Secrets};
    use hyperhive_hive_proto::spec::AgentSpec;
    use hyperhive_hive_proto::{AgentName as Agent, HiveName};

    let swarm = Swarm::start().await;
    let directory = hyperhive_hive_proto::directory::parse_directory(
        &std::fs::read_to_string(swarm.dir.path().join("hives.json")).unwrap(),
    )
    .unwrap();
    let creds = std::fs::read_to_string(swarm.nats.mint_agent("gamma").await.unwrap()).unwrap();
    // As creating gamma does: its hive's account gains its queue (so the roster takes it from the
    // hive's status).
    swarm.nats.mint_hive("hive1", &["alpha", "gamma"]).await.unwrap();
    let turn = format!("printf '%s\\t%s\\n' \"$HIVE_TODO_ID\" \"$(cat)\" >> {}", swarm.turns_file("gamma").display());
    let payload = |kind, agent: &str, spec: Option<AgentSpec>, creds: &str| Payload {
        kind,
        hive: HiveName::parse("hive1").unwrap(),
        agent: Agent::parse(agent).unwrap(),
        revision: 1,
        spec,
        secrets: Secrets { nats_creds: Some(creds.to_owned()), ..Default::default() },
    };
    let spec = AgentSpec { turn_command: turn, schedule_tick: None, turn_timeout: None, env: Default::default() };
    let signer = swarm.deploy_key();
    let sent = swarm_controller::lifecycle::deploy::send(
        &swarm.js,
        &directory,
        &signer,
        &payload(DeployKind::Deploy, "gamma", Some(spec), &creds),
    )
    .await
    .unwrap();
    assert!(!sent.duplicate);

    // Deployed through the swarm, it waits paused; on the roster as created, under its hive.
    let actual = swarm.wait_actual("gamma", "paused").await;
    assert_eq!(actual["origin"], "created", "{actual}");
    swarm.queue("gamma", "g1").await;
    swarm.set_state("hive1", "gamma", "up");
    swarm.wait_turns("gamma", &["g1"]).await;
    assert_eq!(agent_processes("gamma", swarm.dir.path()).len(), 1);

    // Credentials for an agent hive1 never ran: refused (terminated), nothing started.
    swarm_controller::lifecycle::deploy::send(
        &swarm.js,
        &directory,
        &signer,
        &payload(DeployKind::Credentials, "delta", None, &creds),
    )
    .await
    .unwrap();
    wait_until("the refused message to leave the deploy queue", PATIENCE, || async {
        let mut stream = swarm.js.get_stream("DEPLOY").await.ok()?;
        (stream.info().await.ok()?.state.messages == 0).then_some(())
    })
    .await
    .unwrap();
    assert!(swarm.actual("delta").is_none(), "an agent appeared from credentials alone");
    assert!(agent_processes("delta", swarm.dir.path()).is_empty());
    wait_until("the refusal logged with its reason", PATIENCE, || async {
        swarm.hives[0].1.log().contains("never deployed").then_some(())
    })
    .await
    .unwrap();
}
