//! Shared test setup: a JWT-mode nats-server from the test kit and swarm-controller running
//! in-process on a socket in a temp dir.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod as_user;
pub mod one_hive;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::directory::{HiveDirectory, HiveEntry};
use hyperhive_hive_proto::roster::Origin;
use hyperhive_hive_proto::status::{ActualState, AgentStatus, HiveStatus};
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_jobq::Jobq;
use hyperhive_nats_objects::{AGENT_SCHEDULES_BUCKET, SCHEDULE_DEFINITIONS_BUCKET};
use hyperhive_schedule::AgentSchedules;
use hyperhive_testkit::{NatsJwt, Process, wait_until};
use serde_json::Value;
use swarm_controller::clock::{Clock, SystemClock};
use swarm_controller::config::Settings;
use swarm_controller::daemon::{self, Config, StartError};
use swarmctl::client;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const STARTUP: Duration = Duration::from_secs(20);

/// A running controller and the NATS it uses.
pub struct Controller {
    pub nats: NatsJwt,
    pub socket: PathBuf,
    pub js: jetstream::Context,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), StartError>>>,
    /// What [`Controller::restart`] starts it with (a test may change it in between).
    pub options: Options,
    _dir: TempDir,
}

/// What a test controller runs with besides NATS.
#[derive(Clone)]
pub struct Options {
    pub reconcile_secs: u64,
    pub hives: HiveDirectory,
    /// Give it the `nats init` directory (SWARM_NATS_DIR).
    pub nats_dir: bool,
    pub clock: Arc<dyn Clock>,
    /// Serve this job graph (the test adds jobs to it) instead of a new, empty one.
    pub jobq: Option<Jobq>,
}

impl Options {
    pub fn new(reconcile_secs: u64) -> Self {
        Self { reconcile_secs, hives: HiveDirectory::new(), nats_dir: false, clock: Arc::new(SystemClock), jobq: None }
    }
}

/// A directory of `hives` without xkeys.
pub fn directory(hives: &[&str]) -> HiveDirectory {
    hives
        .iter()
        .map(|h| {
            let entry = HiveEntry { description: format!("hive {h}"), labels: Default::default(), xkey: None };
            (HiveName::parse(h).unwrap(), entry)
        })
        .collect()
}

pub fn config(nats: &NatsJwt, socket: PathBuf, reconcile_secs: u64) -> Config {
    Config {
        settings: Settings {
            socket,
            nats_url: nats.url(),
            nats_creds: Some(nats.controller_creds()),
            nats_replicas: 1,
            reconcile_every: Duration::from_secs(reconcile_secs),
            hives: Default::default(),
            nats_dir: None,
            socket_roles: swarm_controller::config::SocketRoles::EveryoneAdmin,
            gateway: None,
        },
        secrets_key: None,
        deploy_key: None,
        provisioning: Default::default(),
        quick_links: Vec::new(),
        webhook_secret: None,
        remote: None,
    }
}

impl Controller {
    /// Starts NATS and the controller; waits until `/healthz` answers.
    pub async fn start(reconcile_secs: u64) -> Self {
        Self::start_with(Options::new(reconcile_secs)).await
    }

    /// [`Controller::start`] with a hive directory, the NATS directory or a clock.
    pub async fn start_with(options: Options) -> Self {
        let nats = NatsJwt::start().await.expect("nats-server in JWT mode");
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/controller.sock");
        let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
        let mut controller =
            Self { nats, socket, js: jetstream::new(client), stop: None, task: None, options, _dir: dir };
        controller.run().await;
        controller
    }

    /// Starts the daemon again after [`Controller::stop`], with the same settings and NATS.
    pub async fn restart(&mut self) {
        self.run().await;
    }

    async fn run(&mut self) {
        let mut config = config(&self.nats, self.socket.clone(), self.options.reconcile_secs);
        config.settings.hives = self.options.hives.clone();
        config.settings.nats_dir = self.options.nats_dir.then(|| self.nats.creds_dir().to_path_buf());
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async move {
            let _ = stopped.await;
        };
        let clock = self.options.clock.clone();
        self.task = Some(match self.options.jobq.clone() {
            Some(jobq) => tokio::spawn(daemon::run_with_jobq(config, clock, jobq, stopped)),
            None => tokio::spawn(daemon::run(config, clock, stopped)),
        });
        self.stop = Some(stop);
        let controller = &*self;
        let ready = wait_until("the controller answers /healthz", STARTUP, || async {
            if controller.task.as_ref().is_some_and(JoinHandle::is_finished) {
                return Some(false);
            }
            let (status, _) = controller.call(Method::GET, "/healthz", &[], "").await.ok()?;
            (status == StatusCode::OK).then_some(true)
        })
        .await
        .unwrap();
        if !ready {
            let outcome = self.task.take().unwrap().await.unwrap();
            panic!("the controller stopped at start: {outcome:?}");
        }
    }

    /// Stops the daemon and returns what `run` returned.
    pub async fn stop(&mut self) -> Result<(), StartError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.take().expect("running").await.expect("the daemon task")
    }

    /// One request; the body parsed as JSON (Null when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<(StatusCode, Value), client::CtlError> {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        let (status, bytes) = client::send(&self.socket, request).await?;
        let value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("every answer is JSON") };
        Ok((status, value))
    }

    /// A JSON request that must get an answer.
    pub async fn json(&self, method: Method, path: &str, body: &Value) -> (StatusCode, Value) {
        self.call(method, path, &[("content-type", "application/json")], body.to_string()).await.unwrap()
    }

    pub async fn agent_key(&self, agent: &str) -> Option<AgentSchedules> {
        let kv = self.js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap();
        let bytes = kv.get(agent).await.unwrap()?;
        Some(AgentSchedules::from_bytes(&bytes).unwrap())
    }

    /// The last sequence of a bucket's stream: it moves on every write, so an unchanged value
    /// proves nothing was written.
    pub async fn last_sequence(&self, bucket: &str) -> u64 {
        let mut stream = self.js.get_stream(format!("KV_{bucket}")).await.unwrap();
        stream.info().await.unwrap().state.last_sequence
    }

    pub async fn writes_so_far(&self) -> (u64, u64) {
        (self.last_sequence(SCHEDULE_DEFINITIONS_BUCKET).await, self.last_sequence(AGENT_SCHEDULES_BUCKET).await)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// A valid create request for `agents`, under a name no other call gives (names are unique),
/// allowing agents that are not on the roster (these tests run no hive).
/// A route's path from the route table with `x` for each `{...}` segment: a request every role
/// test sends, naming nothing that exists.
pub fn route_example(path: &str) -> String {
    path.split('/').map(|s| if s.starts_with('{') { "x" } else { s }).collect::<Vec<_>>().join("/")
}

pub fn new_schedule(agents: &[&str]) -> Value {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    serde_json::json!({
        "name": format!("standup-{n}"),
        "agents": agents,
        "body": "say hello",
        "anchor": "2026-11-30T09:00:00Z",
        "interval": 3600,
        "allow_unknown_agents": true,
    })
}

/// The `swarm-controller` binary serving on `socket` with `nats`, started and ready.
pub async fn daemon_process(nats: &NatsJwt, socket: &std::path::Path, extra_env: &[(&str, &str)]) -> Process {
    let mut daemon = Process::builder(env!("CARGO_BIN_EXE_swarm-controller"))
        .env("SWARM_CONTROLLER_SOCKET", socket)
        .env("SWARM_NATS_URL", nats.url())
        .env("SWARM_NATS_CREDS", nats.controller_creds())
        .envs(extra_env.iter().copied())
        .start("swarm-controller")
        .unwrap();
    daemon.wait_for_log("serving the API", STARTUP).await.unwrap();
    daemon
}

/// Runs `swarm-controller pair CODE ARGS...` with neither `SWARM_STATE_DIR` nor
/// `SWARM_CONTROL_IDENTITY` set (the test says where the identity goes).
pub fn pair(code: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_swarm-controller"))
        .args(["pair", code])
        .args(args)
        .env_remove("SWARM_STATE_DIR")
        .env_remove("SWARM_CONTROL_IDENTITY")
        .output()
        .unwrap()
}

/// A declared agent as its hive reports it while it runs, since `since` (RFC 3339).
pub fn running_declared(since: &str) -> AgentStatus {
    AgentStatus {
        origin: Origin::Declared,
        wanted: WantedState::Up,
        actual: ActualState::Running,
        since: since.to_owned(),
        restarts: 0,
        last_exit: None,
        log_tail: Vec::new(),
        turn: None,
        revision: None,
        problem: None,
    }
}

/// Publishes `status` as its hive's hive-c0re does: with the hive's own credential, on its own key.
pub async fn publish_as_hive(nats: &NatsJwt, status: &HiveStatus) {
    nats.publish_as_hive(status.hive.as_str(), serde_json::to_vec(status).unwrap())
        .await
        .expect("the hive may write its status");
}

/// Each job of a `GET /api/jobq/graph` answer as (id, state), in the graph's order.
pub fn job_states(graph: &Value) -> Vec<(String, String)> {
    graph["nodes"]
        .as_array()
        .expect("the graph's nodes")
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_owned(), n["state"].as_str().unwrap().to_owned()))
        .collect()
}

/// Fails when any of `secrets` appears in `text` (`what` names where), never printing one.
pub fn assert_absent(secrets: &[String], what: &str, text: &str) {
    for secret in secrets {
        assert!(!text.contains(secret.as_str()), "a secret ({} characters) appears in {what}", secret.len());
    }
}

/// The swarm-controller binary, started again after each kill with one environment; the logs of
/// the runs it killed are kept, so a test can scan every run's log.
pub struct ControllerRuns {
    env: Vec<(String, String)>,
    process: Option<Process>,
    /// The logs of the runs killed so far, oldest first.
    pub past_logs: Vec<String>,
}

impl ControllerRuns {
    pub fn new(env: Vec<(String, String)>) -> Self {
        Self { env, process: None, past_logs: Vec::new() }
    }

    /// Starts a run on `nats`, serving on `socket`; waits until it serves.
    pub async fn start(&mut self, nats: &NatsJwt, socket: &std::path::Path) {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.process = Some(daemon_process(nats, socket, &env).await);
    }

    /// `kill -9` of the running one: nothing it holds in memory survives.
    pub fn kill(&mut self) {
        let mut process = self.process.take().expect("running");
        process.kill();
        self.past_logs.push(process.log());
    }

    /// The running one's log so far ("" when none runs).
    pub fn log(&self) -> String {
        self.process.as_ref().map(Process::log).unwrap_or_default()
    }
}

/// An agent's and a hive's credential each ask for `bucket`'s `key` by direct get and watch the
/// bucket's subjects while `write` makes the controller write to it: nothing reaches either.
pub async fn assert_no_tenant_reaches<F, Fut>(nats: &NatsJwt, bucket: &str, key: &str, write: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures::StreamExt;
    let alpha = hyperhive_nats_creds::AgentName::parse("alpha").unwrap();
    let tenants = [
        (nats.mint_agent("alpha").await.unwrap(), hyperhive_nats_objects::agent_inbox_prefix(&alpha)),
        (
            nats.mint_hive("h1", &["alpha"]).await.unwrap(),
            hyperhive_nats_objects::hive_inbox_prefix(&"h1".parse().unwrap()),
        ),
    ];
    for (creds, inbox) in tenants {
        let client = async_nats::ConnectOptions::with_credentials_file(creds)
            .await
            .unwrap()
            .custom_inbox_prefix(inbox)
            .request_timeout(Some(Duration::from_secs(2)))
            .connect(nats.url())
            .await
            .unwrap();
        let mut watch = client.subscribe(format!("$KV.{bucket}.>")).await.unwrap();
        let direct = format!("$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{key}");
        let answer = client.request_with_headers(direct, async_nats::HeaderMap::new(), "".into()).await;
        assert!(answer.is_err(), "a tenant's direct get of {bucket} was answered: {answer:?}");
        client.flush().await.unwrap();
        write().await;
        let seen = tokio::time::timeout(Duration::from_millis(500), watch.next()).await;
        assert!(seen.is_err(), "a tenant saw a write to {bucket}: {seen:?}");
    }
}

/// The swarmctl binary (a package of its own) in target/debug: a workspace test run builds it
/// (`cargo nextest run --workspace`); before running only this package's tests, `cargo build -p
/// swarmctl`.
/// The name of the user these tests run as: who the controller records a request from its
/// socket as (`<program>@<user>`).
pub fn this_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().expect("the test's user has a name").name
}

pub fn swarmctl_binary() -> PathBuf {
    hyperhive_testkit::project_binary("swarmctl").unwrap_or_else(|e| panic!("{e:#}"))
}

/// swarmctl run to its end against the controller on `socket`.
pub fn swarmctl_on(socket: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(swarmctl_binary())
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("swarmctl runs")
}

/// A 1x1 PNG (an agent icon).
pub const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\x0dIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82";
