//! Benchmark of prompts given now: the `swarm-controller` binary and a real hive-agent (both
//! release builds) on a JWT-mode nats-server from the test kit.
//!
//! 1. **Prompt to turn start**: `POST /api/agents/bee/todos` on the socket to an idle agent, then
//!    the time until the agent's `working` header naming the prompt arrives (turn start), and
//!    until the turn command's first instruction runs (it appends `date +%s%N` to a file), one
//!    prompt after the other (`--prompts`, default 200), against a NATS request round trip
//!    (publish, subscriber answers, reply read) on the same server in the same run: the floor,
//!    taken twice: back to back (every process awake), and once right before each prompt, after
//!    the same idle wait the prompt meets (on a virtual machine, waking an idle vCPU is part of
//!    every hop).
//! 2. **Turn-history write**: the agent's record publish (`turns.<agent>` in `TURNS`, acked),
//!    measured as the same JetStream publish from an agent's own connection with a record of the
//!    size a turn writes (4 KiB prompt, 8 KiB output), and the bytes the stream keeps per record.
//!
//! `cargo build --release -p hive-agent && cargo bench -p swarm-controller --bench prompts [-- --prompts N]`.
//! Needs `scripts/setup`.

#[path = "support/bee.rs"]
mod bee;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use hyperhive_hive_proto::feed::{RelayState, TurnHeader};
use hyperhive_testkit::stats::percentile;
use hyperhive_testkit::{NatsJwt, Process, project_release_binary, wait_until};

const PATIENCE: Duration = Duration::from_secs(60);
const CONTROLLER: &str = env!("CARGO_BIN_EXE_swarm-controller");

fn option(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().expect("a number"))
}

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn report(what: &str, mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let (p50, p99, max) = (percentile(&samples, 0.5), percentile(&samples, 0.99), *samples.last().unwrap());
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{what}: n={} p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", samples.len(), ms(p50), ms(p99), ms(max));
    (p50, p99)
}

/// NATS request round trips on one connection (publish, a subscriber answers, the reply read):
/// the floor of any request the controller makes.
struct Echo {
    client: async_nats::Client,
    responder: tokio::task::JoinHandle<()>,
}

impl Echo {
    async fn start(nats: &NatsJwt) -> Echo {
        let client = nats.controller_client().await.unwrap();
        let mut requests = client.subscribe("bench.echo").await.unwrap();
        let answers = client.clone();
        let responder = tokio::spawn(async move {
            while let Some(message) = requests.next().await {
                if let Some(reply) = message.reply {
                    answers.publish(reply, message.payload).await.unwrap();
                }
            }
        });
        client.flush().await.unwrap();
        Echo { client, responder }
    }

    async fn round_trip(&self) -> Duration {
        let started = std::time::Instant::now();
        self.client.request("bench.echo", "x".into()).await.unwrap();
        started.elapsed()
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.responder.abort();
    }
}

/// Round trips one after the other, the connection and both ends busy with nothing else.
async fn nats_round_trips(echo: &Echo, n: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(echo.round_trip().await);
    }
    samples
}

/// `GET /healthz` on the socket: the HTTP exchange every request pays (a new connection each).
async fn http_round_trips(socket: &Path, n: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let request =
            hyper::Request::builder().uri("/healthz").body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        let started = std::time::Instant::now();
        let (status, _) = swarmctl::client::send(socket, request).await.unwrap();
        samples.push(started.elapsed());
        assert!(status.is_success());
    }
    samples
}

/// Reading bee's roster entry as the prompt route does (a JetStream message get from `agents`).
async fn roster_reads(nats: &NatsJwt, n: usize) -> Vec<Duration> {
    let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
    let roster = js.get_key_value(hyperhive_nats_objects::AGENTS_BUCKET).await.unwrap();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let started = std::time::Instant::now();
        assert!(roster.entry("bee").await.unwrap().is_some());
        samples.push(started.elapsed());
    }
    samples
}

/// Starting `sh -c 'date +%s%N'` from here until `date` reads the clock: the part of any turn's
/// start that is process creation, not the swarm.
fn spawn_floor(n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let before = now_nanos();
            let out = std::process::Command::new("sh").args(["-c", "date +%s%N"]).output().unwrap();
            let read: u128 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            Duration::from_nanos(read.saturating_sub(before) as u64)
        })
        .collect()
}

/// How long `POST /api/agents/bee/todos` takes to be answered 202 (the prompt stored in `TODO`).
async fn post_answered(socket: &Path, n: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let started = std::time::Instant::now();
        post_prompt(socket, &format!("answered-{i}")).await;
        samples.push(started.elapsed());
    }
    samples
}

async fn post_prompt(socket: &Path, id: &str) {
    let body = serde_json::json!({"body": "bench", "id": id}).to_string();
    let request = hyper::Request::builder()
        .method("POST")
        .uri("/api/agents/bee/todos")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let (status, answer) = swarmctl::client::send(socket, request).await.unwrap();
    assert_eq!(status.as_u16(), 202, "{}", String::from_utf8_lossy(&answer));
}

/// The next header on `headers` in `state` for todo `id`.
async fn header_of(headers: &mut async_nats::Subscriber, state: RelayState, id: &str) {
    loop {
        let message = tokio::time::timeout(PATIENCE, headers.next()).await.expect("a turn header").unwrap();
        let header: TurnHeader = serde_json::from_slice(&message.payload).unwrap();
        if header.state == state && header.todo_id.as_deref() == Some(id) {
            return;
        }
    }
}

/// Prompts one at a time, each to an idle agent (its last turn ended and its next pull waiting
/// at the server); for each, the time from just before the POST to the agent's `working` header
/// naming the prompt (the agent took the todo and starts its turn: what the swarm does), and to
/// the turn command's first instruction (that, and the creation of the turn's processes).
async fn prompt_to_start(nats: &NatsJwt, echo: &Echo, socket: &Path, starts: &Path, n: usize) -> Stages {
    let client = nats.controller_client().await.unwrap();
    let mut headers = client.subscribe("turn.bee").await.unwrap();
    // A plain subscriber sees the todo as the server takes the controller's publish.
    let mut todos = client.subscribe("todo.bee").await.unwrap();
    client.flush().await.unwrap();
    let js = async_nats::jetstream::new(client);
    let consumer: async_nats::jetstream::consumer::PullConsumer =
        js.get_consumer_from_stream("agent-bee", "TODO").await.unwrap();
    let mut stages = Stages::default();
    for i in 0..n {
        wait_until("the agent's next pull", PATIENCE, || async {
            (consumer.get_info().await.ok()?.num_waiting > 0).then_some(())
        })
        .await
        .unwrap();
        // The floor as the prompt meets it: taken after the same idle wait.
        stages.round_trip.push(echo.round_trip().await);
        let id = format!("bench-{i}");
        let sent = now_nanos();
        let since = |at: u128| Duration::from_nanos(at.saturating_sub(sent) as u64);
        let (_, published) = tokio::join!(post_prompt(socket, &id), async {
            let message = tokio::time::timeout(PATIENCE, todos.next()).await.expect("the todo").unwrap();
            assert!(String::from_utf8_lossy(&message.payload).contains(&id), "the todos come one at a time");
            now_nanos()
        });
        header_of(&mut headers, RelayState::Working, &id).await;
        let taken = now_nanos();
        stages.published.push(since(published));
        stages.agent.push(Duration::from_nanos(taken.saturating_sub(published) as u64));
        stages.taken.push(since(taken));
        let first_instruction: u128 = wait_until("the turn's start", PATIENCE, || async {
            let text = std::fs::read_to_string(starts).ok()?;
            text.lines().nth(i).and_then(|l| l.trim().parse().ok())
        })
        .await
        .unwrap();
        stages.started.push(since(first_instruction));
        header_of(&mut headers, RelayState::Idle, &id).await;
    }
    stages
}

/// Each prompt's times, from just before its POST.
#[derive(Default)]
struct Stages {
    /// A NATS request round trip taken just before the prompt.
    round_trip: Vec<Duration>,
    /// Until the server took the controller's publish of the todo.
    published: Vec<Duration>,
    /// From that publish to the agent's `working` header.
    agent: Vec<Duration>,
    /// Until the `working` header: turn start.
    taken: Vec<Duration>,
    /// Until the turn command's first instruction.
    started: Vec<Duration>,
}

/// The agent's record publish, from an agent connection, with a record of a turn's size.
async fn history_writes(nats: &NatsJwt, n: usize) -> (Vec<Duration>, f64) {
    let js = async_nats::jetstream::new(nats.agent_client("wasp").await.unwrap());
    let record = serde_json::json!({
        "todo_id": "t", "source": "operator:bench", "prompt": "p".repeat(4096), "prompt_truncated": false,
        "started_at": "2026-12-02T09:00:00Z", "ended_at": "2026-12-02T09:00:01Z", "duration_ms": 1000,
        "outcome": "succeeded", "exit_code": 0, "output": "o".repeat(8192), "output_dropped": 0
    })
    .to_string();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("turn:wasp:{i}").as_str());
        let started = std::time::Instant::now();
        js.publish_with_headers("turns.wasp", headers, record.clone().into()).await.unwrap().await.unwrap();
        samples.push(started.elapsed());
    }
    let controller = async_nats::jetstream::new(nats.controller_client().await.unwrap());
    let info = controller.get_stream("TURNS").await.unwrap().info().await.unwrap().state.clone();
    (samples, info.bytes as f64 / info.messages.max(1) as f64)
}

#[tokio::main]
async fn main() {
    let prompts = option("--prompts", 200);
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/controller.sock");
    let hives = dir.path().join("hives.json");
    std::fs::write(&hives, r#"{"h1": {"description": "bench"}}"#).unwrap();
    let mut controller = Process::builder(CONTROLLER)
        .env("SWARM_CONTROLLER_SOCKET", &socket)
        .env("SWARM_NATS_URL", nats.url())
        .env("SWARM_NATS_CREDS", nats.controller_creds())
        .env("SWARM_HIVES_FILE", &hives)
        .start("swarm-controller")
        .unwrap();
    if let Err(e) = controller.wait_for_log("serving the API", PATIENCE).await {
        panic!("{e}\n{}", controller.log());
    }
    bee::report_bee_on_h1(&nats).await;
    let starts = dir.path().join("starts");
    let turn = format!("date +%s%N >> {}; cat > /dev/null", starts.display());
    let mut agent =
        bee::start_bee(&nats, project_release_binary("hive-agent").unwrap(), &dir.path().join("bee"), &turn, &[]).await;
    wait_until("bee on the roster", PATIENCE, || async {
        let request = hyper::Request::builder()
            .uri("/api/agents/bee/todos")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let (status, _) = swarmctl::client::send(&socket, request).await.ok()?;
        status.is_success().then_some(())
    })
    .await
    .unwrap();

    println!("prompts benchmark: {prompts} prompts, one after the other");
    let echo = Echo::start(&nats).await;
    let (_, back_to_back_p99) =
        report("NATS request round trip, back to back (floor)", nats_round_trips(&echo, prompts).await);
    let (_, spawn_p99) = report("sh -c date started from here (process floor)", spawn_floor(prompts));
    report("GET /healthz answered (HTTP on the socket)", http_round_trips(&socket, prompts).await);
    report("roster entry read (JetStream message get)", roster_reads(&nats, prompts).await);
    let stages = prompt_to_start(&nats, &echo, &socket, &starts, prompts).await;
    let (_, floor_p99) = report("NATS request round trip, one before each prompt (floor)", stages.round_trip);
    report("  of which: POST to the todo published (the controller)", stages.published);
    report("  of which: the todo published to the working header (NATS and the agent)", stages.agent);
    let (_, taken_p99) = report("prompt to turn start (the agent's working header)", stages.taken);
    let (_, start_p99) = report("prompt to the turn command's first instruction", stages.started);
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "ratio (p99): turn start {:.1}x the round trip before each prompt, {:.1}x the back-to-back one (target at \
         most 10x); first instruction {:.1}x the round trip plus the process floor",
        ratio(taken_p99, floor_p99),
        ratio(taken_p99, back_to_back_p99),
        ratio(start_p99, floor_p99 + spawn_p99)
    );
    // The agent runs these after the measurement; only the time to the 202 is taken.
    // At most 90: the queue holds 100, and the agent takes them slower than they come.
    report("POST answered 202 (prompt stored in TODO)", post_answered(&socket, prompts.min(90)).await);
    let (writes, per_record) = history_writes(&nats, prompts).await;
    let (write_p50, _) = report("turn record write (12 KiB record, acked)", writes);
    println!(
        "turn record: {per_record:.0} bytes stored per record; {:.2} ms per turn at p50",
        write_p50.as_secs_f64() * 1e3
    );
    agent.kill();
    controller.kill();
}
