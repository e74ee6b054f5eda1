//! Benchmark of one swarm at scale: `--agents N` (default 10,000) agents declared on 50 hives,
//! each with its own NATS account and credential, measured twice in one run, at 1,000 agents (the
//! baseline) and at N, and printed with the ratio N/1,000:
//!
//! 1. **Accounts**: the agents are declared as an operator declares them (`nats agent-creds` and
//!    `nats hive-creds`: `hyperhive_nats_creds::mint_many_agent_creds` and `mint_hive_creds`), and
//!    the running server given every account as `swarm-controller nats push-accounts` does
//!    (`Accounts::push_all`, timed). Then the next agents are created as the API creates one
//!    (`Accounts::create_agent`: its account, its hive's account gaining its queue, the `nats init`
//!    directory and fragment rewritten, both accounts pushed): the median of ten. Also the bytes
//!    the server's configuration fragment and its resolver directory hold per account, and
//!    nats-server's resident memory per account (`/varz`; accounts load when first used, so most
//!    of their memory shows under connections).
//! 2. **Connections**: every declared agent connected with its own credential, kept connected;
//!    nats-server's resident memory per connection, for the first 1,000 and for the rest.
//! 3. **The hives**: one `hive-c0re` per hive (process runner) with its agents declared, each
//!    run as a light stand-in (see `support/scale_hives.rs`: a real hive-agent per agent does not
//!    fit in memory at 10,000), waited for until every hive reports every agent running; the
//!    hive-c0re processes' memory per agent.
//! 4. **The controller**: the `swarm-controller` binary started on the hives' statuses: its start
//!    with every bucket already written (spawn to serving the API, then to the roster listing
//!    every agent), its resident memory; `GET /api/agents` and `GET /api/agents/status`, whole and
//!    a page of 100 from the middle, and `GET /api/overview` once it counts every agent's last
//!    turn (one recorded per agent in `TURNS`, as its hive-agent records one; median of five, and
//!    the body size); the periodic hive pass
//!    with nothing to change (roster sync, every tenant's consumers checked, wanted states read;
//!    median of three, run in the benchmark's process on the same buckets), and its consumer
//!    check alone, against the same check asking after each consumer in turn (as the pass did
//!    before it read them a page at a time); the schedules' reconcile pass with nothing to change,
//!    every agent named by one schedule of 100 agents (median of three, in the benchmark's
//!    process); wanted state to hive status for one agent while all others idle (twenty
//!    changes, paused and up in turn: from the PUT's answer to its hive's status showing it, p50
//!    and p99); and the whole server's messages and bytes in a quiet window (`/varz`).
//!
//! The stand-ins change these figures: no agent's own NATS traffic is in the quiet window (each
//! agent's connection is the benchmark's, idle; a real hive-agent's own idle traffic is measured
//! per agent by the `hives` benchmark's window), and no agent takes a turn (each has one turn
//! record, written by the benchmark). The credential pass
//! (forge, Matrix, certificates) is measured per agent by the `provisioning` benchmark: it needs
//! a forge and a Matrix server holding an account per agent, which this run does not make.
//!
//! `cargo build --release -p hive-c0re && cargo bench -p swarm-controller --bench scale [--
//! --agents N --window SECS]` (defaults 10,000 and 120: two of the controller's reconcile passes). Needs `scripts/setup` (nats-server) and
//! `setpriv` (util-linux).

#[path = "support/scale_hives.rs"]
mod scale_hives;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hyper::http::Method;
use hyperhive_hive_proto::directory::parse_directory;
use hyperhive_hive_proto::status::{ActualState, HiveStatus};
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_creds::{DEFAULT_AGENT_TTL, files::SERVER_CONF};
use hyperhive_nats_objects::HIVE_STATUS_BUCKET;
use hyperhive_swarm_api::agents::StateRequest;
use hyperhive_swarm_api::paths;
use hyperhive_testkit::stats::{percentile, rss_kib};
use hyperhive_testkit::{NatsJwt, Process, free_port, wait_until};
use scale_hives::Hives;
use serde_json::Value;
use swarm_controller::clock::SystemClock;
use swarm_controller::lifecycle::hive_pass::HivePass;
use swarm_controller::lifecycle::roster::Roster;
use swarm_controller::lifecycle::tenant_consumers::TenantConsumers;
use swarm_controller::lifecycle::wanted::WantedStore;
use swarm_controller::nats::tenants::Accounts;
use swarm_controller::schedules::reconcile::Reconciler;
use swarm_controller::schedules::store::Definitions;
use swarmctl::{Api, client};

const HIVES: usize = 50;
const BASELINE: usize = 1_000;
/// Creations timed after each checkpoint (their median is "the next agent").
const NEXT: usize = 10;
/// Requests per list route (their median is reported).
const LISTS: usize = 5;
/// Agents a page of a list holds.
const PAGE: usize = 100;
/// Hive passes timed (their median is reported).
const PASSES: usize = 3;
/// Agents one schedule of the benchmark names (every agent is named by one).
const SCHEDULED_TOGETHER: usize = 100;
/// Wanted state changes timed to their hive's status.
const CHANGES: usize = 20;
const PATIENCE: Duration = Duration::from_secs(600);

/// `--NAME VALUE` from the command line, else `default`.
fn option(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().unwrap_or_else(|_| panic!("{name} N")))
}

fn agent(i: usize) -> AgentName {
    AgentName::parse(&format!("agent-{i:05}")).unwrap()
}

fn hive(i: usize) -> HiveName {
    HiveName::parse(&format!("hive-{:02}", i % HIVES)).unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}

/// A line of the report: its name, its figure in one run, its unit.
type Measure = (&'static str, fn(&Figures) -> f64, &'static str);

/// One measurement at a number of agents.
#[derive(Debug, Default)]
struct Figures {
    agents: usize,
    push_all: Duration,
    next_agent: Duration,
    fragment_bytes_per_account: f64,
    resolver_bytes_per_account: f64,
    server_kib_per_account: f64,
    server_kib_per_connection: f64,
    controller_start: Duration,
    controller_roster_complete: Duration,
    controller_rss_kib: u64,
    list_agents: Duration,
    list_agents_bytes: usize,
    list_status: Duration,
    list_status_bytes: usize,
    page_agents: Duration,
    page_agents_bytes: usize,
    page_status: Duration,
    page_status_bytes: usize,
    overview: Duration,
    overview_bytes: usize,
    hive_pass: Duration,
    schedules_pass: Duration,
    consumer_pass: Duration,
    consumer_check_each: Duration,
    wanted_to_status_p50: Duration,
    wanted_to_status_p99: Duration,
    idle_msgs_per_min: f64,
    idle_kib_per_min: f64,
    hives_kib_per_agent: f64,
}

struct Swarm {
    nats: NatsJwt,
    monitor: u16,
    accounts: Accounts,
    js: async_nats::jetstream::Context,
    dir: tempfile::TempDir,
    /// Agents declared so far (`agent(0)` to `agent(declared - 1)`).
    declared: usize,
    /// Agents created through the API path so far.
    created: usize,
    /// One connection per declared agent, kept open.
    clients: Vec<async_nats::Client>,
    /// nats-server's resident memory when last read.
    server_kib: u64,
    /// The hives, running every declared agent.
    hives: Option<Hives>,
    /// The quiet window's length.
    window: Duration,
    /// Agents named by a schedule so far (`agent(0)` to `agent(scheduled - 1)`).
    scheduled: usize,
}

impl Swarm {
    async fn start(window: Duration) -> Swarm {
        let monitor = free_port();
        let nats = NatsJwt::start_with_config(&format!("http: \"127.0.0.1:{monitor}\"")).await.unwrap();
        let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
        hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
        let accounts = Accounts::new(nats.creds_dir().to_path_buf(), nats.url());
        let dir = tempfile::tempdir().unwrap();
        let hives: serde_json::Map<String, Value> = (0..HIVES)
            .map(|i| {
                let xkey = nkeys::XKey::new().public_key();
                (hive(i).to_string(), serde_json::json!({"description": "scale bench", "xkey": xkey}))
            })
            .collect();
        std::fs::write(dir.path().join("hives.json"), Value::Object(hives).to_string()).unwrap();
        std::fs::create_dir(dir.path().join("creds")).unwrap();
        let mut swarm = Swarm {
            nats,
            monitor,
            accounts,
            js,
            dir,
            declared: 0,
            created: 0,
            clients: Vec::new(),
            server_kib: 0,
            hives: None,
            window,
            scheduled: 0,
        };
        swarm.server_kib = swarm.read_server_kib().await;
        swarm
    }

    /// nats-server's own `/varz`.
    async fn varz(&self) -> Value {
        let url = format!("http://127.0.0.1:{}/varz", self.monitor);
        reqwest::get(url).await.unwrap().json().await.unwrap()
    }

    /// nats-server's resident memory, from its own `/varz`.
    async fn read_server_kib(&self) -> u64 {
        self.varz().await["mem"].as_u64().expect("varz has mem") / 1024
    }

    /// The growth of nats-server's memory since it was last read, per `count` things added.
    async fn server_kib_per(&mut self, count: usize) -> f64 {
        let now = self.read_server_kib().await;
        let per = now.saturating_sub(self.server_kib) as f64 / count as f64;
        self.server_kib = now;
        per
    }

    fn creds_path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join("creds").join(format!("{name}.creds"))
    }

    /// Declares agents up to `n` (and every hive with its agents) as an operator does, then gives
    /// the server every account; the time of that push.
    async fn declare_up_to(&mut self, n: usize) -> Duration {
        let batch: Vec<(AgentName, std::path::PathBuf)> =
            (self.declared..n).map(|i| (agent(i), self.creds_path(agent(i).as_str()))).collect();
        let hives: Vec<(HiveName, Vec<AgentName>, std::path::PathBuf)> = (0..HIVES)
            .map(|h| {
                let agents = (h..n).step_by(HIVES).map(agent).collect();
                (hive(h), agents, self.creds_path(hive(h).as_str()))
            })
            .collect();
        let from = self.nats.creds_dir().to_path_buf();
        tokio::task::spawn_blocking(move || {
            hyperhive_nats_creds::mint_many_agent_creds(&from, &batch, DEFAULT_AGENT_TTL).unwrap();
            for (hive, agents, out) in hives {
                hyperhive_nats_creds::mint_hive_creds(&from, &hive, &agents, DEFAULT_AGENT_TTL, &out).unwrap();
            }
        })
        .await
        .unwrap();
        self.declared = n;
        let started = Instant::now();
        self.accounts.push_all().await.unwrap();
        started.elapsed()
    }

    /// Declares agents up to `n`, measures everything there, then creates [`NEXT`] agents as the
    /// API does, timed.
    async fn measure_at(&mut self, n: usize) -> Figures {
        let before = self.declared;
        let mut figures = Figures { agents: n, push_all: self.declare_up_to(n).await, ..Figures::default() };
        let accounts = n + HIVES + self.created;
        let fragment = std::fs::metadata(self.nats.creds_dir().join(SERVER_CONF)).unwrap().len();
        figures.fragment_bytes_per_account = fragment as f64 / accounts as f64;
        figures.resolver_bytes_per_account = dir_bytes(self.nats.resolver_dir()) as f64 / accounts as f64;
        figures.server_kib_per_account = self.server_kib_per(n - before).await;
        self.connect(before..n).await;
        self.record_turns(before..n).await;
        figures.server_kib_per_connection = self.server_kib_per(n - before).await;
        self.start_hives().await;
        figures.hives_kib_per_agent = self.hives.as_ref().unwrap().rss_kib() as f64 / n as f64;
        self.controller(&mut figures).await;
        let mut next = Vec::new();
        for _ in 0..NEXT {
            let name = AgentName::parse(&format!("created-{:05}", self.created)).unwrap();
            let started = Instant::now();
            self.accounts.create_agent(&hive(self.created), &name, DEFAULT_AGENT_TTL).await.unwrap();
            next.push(started.elapsed());
            self.created += 1;
        }
        next.sort();
        figures.next_agent = percentile(&next, 0.5);
        self.server_kib = self.read_server_kib().await;
        figures
    }

    /// Connects the declared agents `range`, each with its own credential, and keeps them.
    async fn connect(&mut self, range: std::ops::Range<usize>) {
        let url = self.nats.url();
        for i in range {
            let options =
                async_nats::ConnectOptions::with_credentials_file(self.creds_path(agent(i).as_str())).await.unwrap();
            self.clients.push(options.connect(url.as_str()).await.unwrap());
        }
        // The memory is read once the server counts every agent's connection and the
        // benchmark's own one.
        let url = format!("http://127.0.0.1:{}/varz", self.monitor);
        let want = self.clients.len() + 1;
        wait_until("every agent connected", PATIENCE, || async {
            let varz: Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
            (varz["connections"].as_u64()? as usize >= want).then_some(())
        })
        .await
        .unwrap();
    }

    /// One finished turn recorded in `TURNS` for each of the declared agents `range`, as its
    /// hive-agent records one (every third failed), so that every agent has a last turn.
    async fn record_turns(&self, range: std::ops::Range<usize>) {
        let acks = futures::stream::iter(range.map(|i| {
            let outcome = if i % 3 == 0 { "failed" } else { "succeeded" };
            let record = serde_json::json!({
                "todo_id": format!("t{i}"), "source": "operator:bench", "prompt": "p",
                "started_at": "2026-12-01T00:00:00Z", "ended_at": "2026-12-01T00:00:01Z",
                "duration_ms": 1000, "outcome": outcome, "exit_code": 1, "output": "",
            });
            let subject = hyperhive_nats_objects::agent_turns_subject(&agent(i));
            let js = self.js.clone();
            async move { js.publish(subject, record.to_string().into()).await.unwrap().await.unwrap() }
        }))
        .buffer_unordered(256);
        acks.collect::<Vec<_>>().await;
    }

    /// Every hive's hive-c0re, again, with every declared agent (the old ones stopped first).
    async fn start_hives(&mut self) {
        self.hives = None;
        let mut hives: BTreeMap<HiveName, Vec<AgentName>> = BTreeMap::new();
        for i in 0..self.declared {
            hives.entry(hive(i)).or_default().push(agent(i));
        }
        let creds = |name: &str| self.creds_path(name);
        self.hives = Some(Hives::start(&self.nats, self.dir.path(), &hives, creds, PATIENCE).await);
    }

    /// Starts the controller twice on the hives' statuses: the first start adds the agents to
    /// the roster, the second (measured) reads every bucket as written. Then measures what the
    /// running controller does.
    async fn controller(&mut self, figures: &mut Figures) {
        let socket = self.dir.path().join("run/controller.sock");
        let first = self.start_controller(&socket).await;
        self.wait_for_roster(&socket).await;
        drop(first);
        let started = Instant::now();
        let controller = self.start_controller(&socket).await;
        figures.controller_start = started.elapsed();
        self.wait_for_roster(&socket).await;
        figures.controller_roster_complete = started.elapsed();
        (figures.list_agents, figures.list_agents_bytes) = median_get(&socket, paths::AGENTS).await;
        (figures.list_status, figures.list_status_bytes) = median_get(&socket, paths::AGENTS_STATUS).await;
        let middle = agent(self.declared / 2);
        let page = |list| paths::agents_page(list, PAGE, Some(&middle), None);
        (figures.page_agents, figures.page_agents_bytes) = median_get(&socket, &page(paths::AGENTS)).await;
        (figures.page_status, figures.page_status_bytes) = median_get(&socket, &page(paths::AGENTS_STATUS)).await;
        self.wait_for_last_turns(&socket).await;
        (figures.overview, figures.overview_bytes) = median_get(&socket, paths::OVERVIEW).await;
        (figures.hive_pass, figures.consumer_pass) = self.passes().await;
        figures.schedules_pass = self.schedules_pass(&socket).await;
        figures.consumer_check_each = self.consumer_check_each().await;
        (figures.wanted_to_status_p50, figures.wanted_to_status_p99) = self.wanted_to_status(&socket).await;
        (figures.idle_msgs_per_min, figures.idle_kib_per_min) = self.quiet_window().await;
        figures.controller_rss_kib = rss_kib(controller.pid());
    }

    /// The periodic hive pass with nothing to change, and its consumer check alone (median of
    /// [`PASSES`] each), on the controller's buckets.
    async fn passes(&self) -> (Duration, Duration) {
        let hives = std::fs::read_to_string(self.dir.path().join("hives.json")).unwrap();
        let hives = Arc::new(parse_directory(&hives).unwrap());
        let nats_dir = Some(self.nats.creds_dir().to_path_buf());
        let roster =
            Roster::new(self.js.clone(), self.js.get_key_value(hyperhive_nats_objects::AGENTS_BUCKET).await.unwrap())
                .minted_in(nats_dir.clone());
        let wanted = WantedStore::new(
            self.js.clone(),
            self.js.get_key_value(hyperhive_nats_objects::AGENT_WANTED_BUCKET).await.unwrap(),
        );
        // As in the controller: the roster's index follows the bucket.
        let watching = tokio::spawn(roster.clone().keep_index());
        let consumers = TenantConsumers { js: self.js.clone(), hives: hives.clone(), roster: roster.clone(), nats_dir };
        let pass = HivePass {
            js: self.js.clone(),
            hives,
            roster,
            wanted,
            revoker: None,
            clock: Arc::new(SystemClock),
            consumers: Some(consumers.clone()),
        };
        let (mut whole, mut alone) = (Vec::new(), Vec::new());
        for _ in 0..PASSES {
            let started = Instant::now();
            pass.run().await;
            whole.push(started.elapsed());
            let started = Instant::now();
            let report = consumers.pass().await;
            alone.push(started.elapsed());
            assert_eq!(report, Default::default(), "a pass with nothing to change changes nothing");
        }
        watching.abort();
        whole.sort();
        alone.sort();
        (percentile(&whole, 0.5), percentile(&alone, 0.5))
    }

    /// Schedules for the agents that have none yet, [`SCHEDULED_TOGETHER`] agents each, made
    /// through the API; then the schedules' reconcile pass with nothing to change (median of
    /// [`PASSES`]), on the controller's buckets.
    async fn schedules_pass(&mut self, socket: &Path) -> Duration {
        let api = Api::Socket(socket.to_owned());
        let scheduled = self.scheduled;
        for (n, group) in (scheduled..self.declared).collect::<Vec<_>>().chunks(SCHEDULED_TOGETHER).enumerate() {
            let agents: Vec<String> = group.iter().map(|&i| agent(i).to_string()).collect();
            let body = serde_json::json!({
                "name": format!("standup-{scheduled}-{n}"),
                "agents": agents,
                "body": "say what you did since the last standup",
                "anchor": "2026-12-01T09:00:00Z",
                "interval": 86_400,
            });
            client::request(&api, Method::POST, paths::SCHEDULES, None, Some(body.to_string().into_bytes()))
                .await
                .unwrap();
        }
        self.scheduled = self.declared;
        let buckets = hyperhive_nats_objects::ensure_objects(&self.js).await.unwrap();
        let definitions = Definitions::new(self.js.clone(), buckets.definitions);
        let reconciler = Reconciler::new(self.js.clone(), definitions, buckets.agent_schedules);
        reconciler.pass().await.unwrap();
        let mut took = Vec::new();
        for _ in 0..PASSES {
            let report = reconciler.pass().await.unwrap();
            assert_eq!((report.written, report.removed, report.failed), (0, 0, 0), "nothing to change: {report:?}");
            assert!(report.compared >= self.declared, "every agent's key compared: {report:?}");
            took.push(report.elapsed);
        }
        took.sort();
        percentile(&took, 0.5)
    }

    /// Every tenant's consumers checked as the pass did before it read them a page at a time:
    /// one request per consumer, one after another (the baseline of its consumer check).
    async fn consumer_check_each(&self) -> Duration {
        let agents = (0..self.declared)
            .map(agent)
            .chain((0..self.created).map(|i| AgentName::parse(&format!("created-{i:05}")).unwrap()));
        let hives = (0..HIVES).map(hive);
        let wanted: Vec<_> = agents
            .map(|a| hyperhive_nats_objects::agent_consumer(&a))
            .chain(hives.flat_map(|h| hyperhive_nats_objects::hive_consumers(&h)))
            .collect();
        let started = Instant::now();
        for consumer in &wanted {
            consumer.ensure(&self.js).await.unwrap();
        }
        started.elapsed()
    }

    /// [`CHANGES`] wanted states for the first agent, paused and up in turn: from each PUT's
    /// answer to its hive's status showing it (p50, p99).
    async fn wanted_to_status(&self, socket: &Path) -> (Duration, Duration) {
        let (hive, agent) = (hive(0), agent(0));
        let api = Api::Socket(socket.to_owned());
        let bucket = self.js.get_key_value(HIVE_STATUS_BUCKET).await.unwrap();
        let mut watch = bucket.watch(hive.as_str()).await.unwrap();
        let mut took = Vec::new();
        for i in 0..CHANGES {
            let (wanted, actual) = if i % 2 == 0 {
                (WantedState::Paused, ActualState::Paused)
            } else {
                (WantedState::Up, ActualState::Running)
            };
            let body = client::body(&StateRequest::new(wanted));
            client::request(&api, Method::PUT, &paths::agent_state(&hive, &agent), None, Some(body)).await.unwrap();
            let answered = Instant::now();
            let deadline = tokio::time::Instant::now() + PATIENCE;
            loop {
                let entry = tokio::time::timeout_at(deadline, watch.next()).await.expect("the change shown in time");
                let entry = entry.expect("the watch goes on").unwrap();
                let Ok(status) = serde_json::from_slice::<HiveStatus>(&entry.value) else { continue };
                if status.agents.get(&agent).is_some_and(|a| a.actual == actual) {
                    took.push(answered.elapsed());
                    break;
                }
            }
        }
        took.sort();
        (percentile(&took, 0.5), percentile(&took, 0.99))
    }

    /// The whole server's messages and KiB (in and out) a minute while nothing changes.
    async fn quiet_window(&self) -> (f64, f64) {
        let counts = |varz: Value| {
            let n = |key: &str| varz[key].as_u64().unwrap_or(0) as f64;
            (n("in_msgs") + n("out_msgs"), n("in_bytes") + n("out_bytes"))
        };
        let (msgs, bytes) = counts(self.varz().await);
        // The window is the measure itself: what the swarm sends in it, left alone.
        tokio::time::sleep(self.window).await;
        let (msgs_after, bytes_after) = counts(self.varz().await);
        let minutes = self.window.as_secs_f64() / 60.0;
        ((msgs_after - msgs) / minutes, (bytes_after - bytes) / 1024.0 / minutes)
    }

    async fn start_controller(&self, socket: &Path) -> Process {
        let mut controller = Process::builder(env!("CARGO_BIN_EXE_swarm-controller"))
            .env("SWARM_CONTROLLER_SOCKET", socket)
            .env("SWARM_NATS_URL", self.nats.url())
            .env("SWARM_NATS_CREDS", self.nats.controller_creds())
            .env("SWARM_NATS_DIR", self.nats.creds_dir())
            .env("SWARM_HIVES_FILE", self.dir.path().join("hives.json"))
            .env("NO_COLOR", "1")
            .start("swarm-controller")
            .unwrap();
        controller.wait_for_log("serving the API", PATIENCE).await.unwrap();
        controller
    }

    /// Until the overview counts every declared agent's last turn.
    async fn wait_for_last_turns(&self, socket: &Path) {
        let api = Api::Socket(socket.to_owned());
        wait_until("the overview to count every last turn", PATIENCE, || async {
            let body = client::request(&api, Method::GET, paths::OVERVIEW, None, None).await.ok()?;
            let overview: hyperhive_swarm_api::overview::Overview = serde_json::from_slice(&body).ok()?;
            (overview.agents as usize >= self.declared && overview.no_turn_yet == 0).then_some(())
        })
        .await
        .unwrap();
    }

    async fn wait_for_roster(&self, socket: &Path) {
        let api = Api::Socket(socket.to_owned());
        let want = self.declared;
        wait_until("the roster to list every agent", PATIENCE, || async {
            let body = client::request(&api, Method::GET, "/api/agents/status", None, None).await.ok()?;
            let listed: Vec<Value> = serde_json::from_slice(&body).ok()?;
            (listed.len() == want).then_some(())
        })
        .await
        .unwrap();
    }
}

/// The median time of [`LISTS`] `GET path`s on the socket, and the body's size.
async fn median_get(socket: &Path, path: &str) -> (Duration, usize) {
    let api = Api::Socket(socket.to_owned());
    let mut took = Vec::new();
    let mut bytes = 0;
    for _ in 0..LISTS {
        let started = Instant::now();
        let body = client::request(&api, Method::GET, path, None, None).await.unwrap();
        took.push(started.elapsed());
        bytes = body.len();
    }
    took.sort();
    (percentile(&took, 0.5), bytes)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()
}

fn row(measure: &str, base: f64, at_n: f64, unit: &str) {
    let ratio = if base > 0.0 { format!("{:.2}x", at_n / base) } else { "-".to_owned() };
    println!("| {measure} | {base:.1} {unit} | {at_n:.1} {unit} | {ratio} |");
}

#[tokio::main]
async fn main() {
    hyperhive_logging::init("warn");
    let n = option("--agents", 10_000) as usize;
    assert!(n > BASELINE, "--agents must be more than the baseline's {BASELINE}");
    let mut swarm = Swarm::start(Duration::from_secs(option("--window", 120))).await;
    eprintln!("declaring {BASELINE} agents");
    let base = swarm.measure_at(BASELINE).await;
    eprintln!("declaring {n} agents");
    let at_n = swarm.measure_at(n).await;
    println!("| measure | {} agents | {} agents | ratio |", base.agents, at_n.agents);
    println!("|---|---|---|---|");
    let measures: [Measure; 28] = [
        ("giving the server every account (push-accounts)", |f| ms(f.push_all), "ms"),
        ("creating the next agent as the API does (median of 10)", |f| ms(f.next_agent), "ms"),
        ("configuration fragment, bytes per account", |f| f.fragment_bytes_per_account, "B"),
        ("resolver directory, bytes per account", |f| f.resolver_bytes_per_account, "B"),
        ("nats-server memory per account", |f| f.server_kib_per_account, "KiB"),
        ("nats-server memory per connection", |f| f.server_kib_per_connection, "KiB"),
        ("controller start, to serving the API", |f| ms(f.controller_start), "ms"),
        ("controller start, to the roster listing every agent", |f| ms(f.controller_roster_complete), "ms"),
        ("controller resident memory", |f| f.controller_rss_kib as f64, "KiB"),
        ("GET /api/agents (median of 5)", |f| ms(f.list_agents), "ms"),
        ("GET /api/agents body", |f| kib(f.list_agents_bytes), "KiB"),
        ("GET /api/agents/status (median of 5)", |f| ms(f.list_status), "ms"),
        ("GET /api/agents/status body", |f| kib(f.list_status_bytes), "KiB"),
        ("GET /api/agents, a page of 100 (median of 5)", |f| ms(f.page_agents), "ms"),
        ("GET /api/agents, a page of 100, body", |f| kib(f.page_agents_bytes), "KiB"),
        ("GET /api/agents/status, a page of 100 (median of 5)", |f| ms(f.page_status), "ms"),
        ("GET /api/agents/status, a page of 100, body", |f| kib(f.page_status_bytes), "KiB"),
        ("GET /api/overview (median of 5)", |f| ms(f.overview), "ms"),
        ("GET /api/overview body", |f| kib(f.overview_bytes), "KiB"),
        ("hive pass, nothing to change (median of 3)", |f| ms(f.hive_pass), "ms"),
        ("its check of every tenant's consumers alone", |f| ms(f.consumer_pass), "ms"),
        ("the same check, a request per consumer (before)", |f| ms(f.consumer_check_each), "ms"),
        ("schedules' reconcile pass, nothing to change (median of 3)", |f| ms(f.schedules_pass), "ms"),
        ("wanted state to hive status, one agent, p50", |f| ms(f.wanted_to_status_p50), "ms"),
        ("wanted state to hive status, one agent, p99", |f| ms(f.wanted_to_status_p99), "ms"),
        ("idle swarm: NATS messages a minute (whole server)", |f| f.idle_msgs_per_min, ""),
        ("idle swarm: NATS KiB a minute (whole server)", |f| f.idle_kib_per_min, "KiB"),
        ("hive-c0re memory per agent (stand-in agents)", |f| f.hives_kib_per_agent, "KiB"),
    ];
    for (measure, figure, unit) in measures {
        row(measure, figure(&base), figure(&at_n), unit);
    }
}
