//! Benchmark of the relays: a real hive-agent's turn output to a server-sent events watcher of
//! the `swarm-controller` binary, on a JWT-mode nats-server from the test kit.
//!
//! 1. **Latency**: the turn command prints the time `--lines` times, 5 ms apart; for each line,
//!    the time from that write to the SSE watcher reading it (p50, p99, max), against a NATS
//!    publish to subscribe on the same server in the same run (the floor: the relay is that hop
//!    plus the pipe read, the stream write, the feed and the HTTP answer). Two turns, one after
//!    the other: the lines printed by one process (this benchmark's own binary, run as
//!    `--print-lines N`), and by a shell loop of `date` and `sleep` (the measure of the first
//!    runs), which starts two processes a line, so the relay shares the cores with them. The
//!    same lines are timed on their way too, at a plain NATS subscriber of `term.bee` (the
//!    agent's share) and at a consumer of the stream (plus the stream's), so the p50 is split
//!    into the agent, the stream, and the controller with its HTTP answer. Baselines, each in the
//!    same run: the pipe alone (the printer's lines read by this process); the relay's own NATS
//!    path (an agent's publish on its terminal subject, which crosses from the agent's account
//!    into the swarm's and is stored by `RELAY`, to a consumer of the stream as the controller's
//!    feed reads it); the least agent (the printer's lines read by this process and published as
//!    an agent, timed at a subscriber); and the least relay (the same, read from the stream and
//!    written on a Unix socket to a reader: every hop of the relay, in one process).
//! 2. **Memory per watcher** of one agent's terminal, in two batches of `--watchers` on the same
//!    controller: its resident memory (RSS) and, in a `heap-stats` build, its live heap bytes
//!    (`swarm_heap_live_bytes`), each against the figure before the batch. The first batch is
//!    measured once every watcher has its first event (the measure of the first runs) and again
//!    once every watcher has read the whole history and waits for live output; the second batch
//!    once settled so. A fresh process's first batch also pays the allocator's first growth
//!    (glibc's arena per thread), which the second batch shows apart from what a watcher holds.
//!
//! `cargo build --release -p hive-agent && cargo bench -p swarm-controller --bench relay --features heap-stats
//! [-- --lines N --watchers M]` (defaults 500 and 500; without the feature, RSS only). Needs
//! `scripts/setup`.

#[path = "support/bee.rs"]
mod bee;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use hyperhive_testkit::stats::{percentile, rss_kib};
use hyperhive_testkit::{NatsJwt, Process, SseClient, project_release_binary, wait_until};

const PATIENCE: Duration = Duration::from_secs(60);
const CONTROLLER: &str = env!("CARGO_BIN_EXE_swarm-controller");
/// The agent whose account the baselines publish as (not the relayed `bee`).
const PATH_AGENT: &str = "ant";

fn option(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().expect("a number"))
}

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn report(what: &str, mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    let (p50, p99, max) = (percentile(&samples, 0.5), percentile(&samples, 0.99), *samples.last().unwrap());
    println!(
        "{what}: n={} p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    p50
}

fn ratio(measure: Duration, baseline: Duration) -> f64 {
    measure.as_secs_f64() / baseline.as_secs_f64()
}

/// `seconds` in milliseconds to two places; a difference of two equal p50s reads 0.00, not -0.00.
fn millis(seconds: f64) -> String {
    let rounded = (seconds * 1e5).round() / 1e2;
    format!("{:.2} ms", if rounded == 0.0 { 0.0 } else { rounded })
}

/// The text of an SSE terminal event.
fn text_of(data: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(data).unwrap();
    value["text"].as_str().unwrap_or_default().to_owned()
}

async fn nats_floor(nats: &NatsJwt, n: usize) -> Vec<Duration> {
    let client = nats.controller_client().await.unwrap();
    let subscription = client.subscribe("bench.floor").await.unwrap();
    client.flush().await.unwrap();
    hop_times(&client, "bench.floor", subscription.map(|message| message.payload), n).await
}

/// `n` times, 5 ms apart: the time from `publisher`'s publish of the time on `subject` to its
/// arrival in `received`.
async fn hop_times<S>(publisher: &async_nats::Client, subject: &str, mut received: S, n: usize) -> Vec<Duration>
where
    S: futures::Stream<Item = bytes::Bytes> + Unpin,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        publisher.publish(subject.to_owned(), now_nanos().to_string().into()).await.unwrap();
        publisher.flush().await.unwrap();
        let payload = received.next().await.unwrap();
        let sent: u128 = std::str::from_utf8(&payload).unwrap().parse().unwrap();
        samples.push(Duration::from_nanos((now_nanos() - sent) as u64));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    samples
}

/// A consumer of `subject` on the relay stream from its next message on, on `client`: what the
/// controller's feed of a watched terminal reads.
async fn follow_relay(client: &async_nats::Client, subject: &str) -> impl futures::Stream<Item = bytes::Bytes> + use<> {
    let relay =
        async_nats::jetstream::new(client.clone()).get_stream(hyperhive_nats_objects::RELAY_STREAM).await.unwrap();
    relay
        .create_consumer(async_nats::jetstream::consumer::push::OrderedConfig {
            deliver_subject: client.new_inbox(),
            filter_subject: subject.to_owned(),
            deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::New,
            ..Default::default()
        })
        .await
        .unwrap()
        .messages()
        .await
        .unwrap()
        .map(|message| message.unwrap().payload.clone())
}

/// The relay's own NATS path: an agent's publish of the time on its terminal subject (through
/// its account's import into the swarm's, stored by the stream), to a consumer of the stream on
/// the controller's account.
async fn relay_path_floor(nats: &NatsJwt, n: usize) -> Vec<Duration> {
    let agent = nats.agent_client(PATH_AGENT).await.unwrap();
    let subject = format!("term.{PATH_AGENT}");
    let stored = follow_relay(&nats.controller_client().await.unwrap(), &subject).await;
    hop_times(&agent, &subject, Box::pin(stored), n).await
}

/// The turn's printer as a child of this process, its output piped here.
fn spawn_printer(lines: usize) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--print-lines", &lines.to_string()])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The pipe's share of the floor: the same printer as the turn's, its output read by this
/// process; each line's time from its write to its read.
async fn pipe_floor(lines: usize) -> Vec<Duration> {
    use tokio::io::AsyncBufReadExt;
    let mut printer = spawn_printer(lines);
    let mut output = tokio::io::BufReader::new(printer.stdout.take().unwrap()).lines();
    let mut samples = Vec::with_capacity(lines);
    while let Some(line) = output.next_line().await.unwrap() {
        samples_of(&line, now_nanos(), &mut samples);
    }
    printer.wait().await.unwrap();
    samples
}

/// The least an agent can do: the printer's pipe read by this process and each read published
/// as an agent on its terminal subject, timed at a subscriber of the controller's account.
async fn least_agent(nats: &NatsJwt, lines: usize) -> Vec<Duration> {
    let subscriber = nats.controller_client().await.unwrap();
    let received = subscriber.subscribe(format!("term.{PATH_AGENT}")).await.unwrap();
    subscriber.flush().await.unwrap();
    let timed = time_lines(received.map(|message| message.payload), lines);
    publish_printed_lines(nats, lines).await;
    timed.await.unwrap()
}

/// The least relay: the least agent's lines read from the stream, as the controller's feed
/// reads them, and written on a Unix socket to a reader (the watcher), where they are timed.
async fn least_relay(nats: &NatsJwt, lines: usize) -> Vec<Duration> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut stored = follow_relay(&nats.controller_client().await.unwrap(), &format!("term.{PATH_AGENT}")).await;
    let (mut to_watcher, watcher) = tokio::net::UnixStream::pair().unwrap();
    // Ended below: its consumer would otherwise follow the stream for the rest of the run.
    let forwarder = tokio::spawn(async move {
        while let Some(payload) = stored.next().await {
            to_watcher.write_all(&payload).await.unwrap();
        }
    });
    let read = futures::stream::unfold(tokio::io::BufReader::new(watcher).lines(), |mut read| async move {
        let line = read.next_line().await.unwrap()?;
        Some((bytes::Bytes::from(line), read))
    });
    let timed = time_lines(Box::pin(read), lines);
    publish_printed_lines(nats, lines).await;
    let samples = timed.await.unwrap();
    forwarder.abort();
    samples
}

/// Reads the printer's pipe here and publishes each read as the agent [`PATH_AGENT`] on its
/// terminal subject, until the printer ends.
async fn publish_printed_lines(nats: &NatsJwt, lines: usize) {
    use tokio::io::AsyncReadExt;
    let publisher = nats.agent_client(PATH_AGENT).await.unwrap();
    let mut printer = spawn_printer(lines);
    let mut output = printer.stdout.take().unwrap();
    let mut buffer = vec![0u8; 8192];
    loop {
        let read = output.read(&mut buffer).await.unwrap();
        if read == 0 {
            break;
        }
        publisher.publish(format!("term.{PATH_AGENT}"), bytes::Bytes::copy_from_slice(&buffer[..read])).await.unwrap();
    }
    printer.wait().await.unwrap();
}

/// Each line's time from its write (the timestamp it holds) to `read`.
fn samples_of(text: &str, read: u128, samples: &mut Vec<Duration>) {
    for line in text.lines() {
        let written: u128 = line.trim().parse().expect("a timestamp line");
        samples.push(Duration::from_nanos((read - written) as u64));
    }
}

/// Times the lines of the payloads `messages` yields as each arrives, until `lines` are timed.
fn time_lines<S>(mut messages: S, lines: usize) -> tokio::task::JoinHandle<Vec<Duration>>
where
    S: futures::Stream<Item = bytes::Bytes> + Send + Unpin + 'static,
{
    tokio::spawn(async move {
        let mut samples = Vec::with_capacity(lines);
        while samples.len() < lines {
            let payload = tokio::time::timeout(PATIENCE, messages.next()).await.expect("no output").unwrap();
            samples_of(std::str::from_utf8(&payload).unwrap(), now_nanos(), &mut samples);
        }
        samples
    })
}

/// The same lines timed at three points of their way: a plain NATS subscriber of `term.bee` (the
/// agent's share: the pipe read and the publish), a consumer of the stream (plus the stream's
/// write and delivery) and the SSE watcher (plus the controller and the HTTP answer).
struct Stages {
    published: Vec<Duration>,
    stored: Vec<Duration>,
    watched: Vec<Duration>,
}

/// The turn command's side: prints the time in nanoseconds `lines` times, 5 ms apart, each line
/// written as it is taken.
fn print_lines(lines: usize) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for _ in 0..lines {
        writeln!(out, "{}", now_nanos()).and_then(|()| out.flush()).expect("the turn's output is open");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What prints the turn's lines.
#[derive(Debug, Clone, Copy)]
enum Printer {
    /// This benchmark's binary: one process for every line.
    OneProcess,
    /// `date` and `sleep` from a shell loop: two new processes a line.
    ShellLoop,
}

impl Printer {
    fn command(self, lines: usize) -> String {
        match self {
            Printer::OneProcess => {
                format!("exec '{}' --print-lines {lines}", std::env::current_exe().unwrap().display())
            }
            Printer::ShellLoop => format!("for i in $(seq {lines}); do date +%s%N; sleep 0.005; done"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Printer::OneProcess => "printed by one process",
            Printer::ShellLoop => "printed by a shell loop of date and sleep",
        }
    }
}

async fn relay_latency(nats: &NatsJwt, socket: &Path, dir: &Path, lines: usize, printer: Printer) -> Stages {
    // The watcher is sent the terminal's history first: the earlier turn's lines are not timed.
    let before = last_sequence(nats, "term.bee").await;
    let state = dir.join(format!("bee-{printer:?}"));
    let command = printer.command(lines);
    let mut agent = bee::start_bee(nats, project_release_binary("hive-agent").unwrap(), &state, &command, &[]).await;
    let (_, mut watcher) = SseClient::open(socket, "/api/agents/bee/terminal", None).await.unwrap();
    // Each on its own connection, as the controller's is.
    let plain = nats.controller_client().await.unwrap();
    let published = plain.subscribe("term.bee").await.unwrap();
    plain.flush().await.unwrap();
    let stored = follow_relay(&nats.controller_client().await.unwrap(), "term.bee").await;
    let published = time_lines(published.map(|message| message.payload), lines);
    let stored = time_lines(Box::pin(stored), lines);
    bee::give_bee(nats, &format!("bench-{printer:?}")).await;
    let mut watched = Vec::with_capacity(lines);
    while watched.len() < lines {
        let event = tokio::time::timeout(PATIENCE, watcher.next()).await.expect("the relay stalled").unwrap();
        let read = now_nanos();
        if event.id.is_some_and(|id| id > before) {
            samples_of(&text_of(&event.data), read, &mut watched);
        }
    }
    agent.kill();
    Stages { published: published.await.unwrap(), stored: stored.await.unwrap(), watched }
}

fn main() {
    match option("--print-lines", 0) {
        0 => bench(),
        lines => print_lines(lines),
    }
}

#[tokio::main]
async fn bench() {
    let (lines, watchers) = (option("--lines", 500), option("--watchers", 500));
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The socket's directory must hold nothing else.
    let socket = dir.path().join("run/controller.sock");
    let mut controller = Process::builder(CONTROLLER)
        .env("SWARM_CONTROLLER_SOCKET", &socket)
        .env("SWARM_NATS_URL", nats.url())
        .env("SWARM_NATS_CREDS", nats.controller_creds())
        .env("SWARM_HIVES_FILE", {
            let file = dir.path().join("hives.json");
            std::fs::write(&file, r#"{"h1": {"description": "bench"}}"#).unwrap();
            file
        })
        .start("swarm-controller")
        .unwrap();
    if let Err(e) = controller.wait_for_log("serving the API", PATIENCE).await {
        panic!("{e}\n{}", controller.log());
    }
    bee::report_bee_on_h1(&nats).await;
    wait_until("bee on the roster", PATIENCE, || async {
        SseClient::open(&socket, "/api/agents/bee/turn", None).await.ok().filter(|(s, _)| s.is_success())
    })
    .await
    .unwrap();

    println!("relay benchmark: {lines} lines, {watchers} watchers");
    let floor = report("NATS publish to subscribe (floor)", nats_floor(&nats, lines).await);
    let path = report(
        "an agent's publish on its terminal to a consumer of the stream (the relay's NATS path)",
        relay_path_floor(&nats, lines).await,
    );
    println!("  ratio (p50): {:.1}x the NATS hop", ratio(path, floor));
    let pipe = report("a pipe from the printer to this process", pipe_floor(lines).await);
    let least = report(
        "the pipe read here and published as an agent, to a subscriber (the least agent)",
        least_agent(&nats, lines).await,
    );
    let least_relay = report(
        "the least agent's lines read from the stream and written on a Unix socket (the least relay)",
        least_relay(&nats, lines).await,
    );
    println!("  ratio (p50): {:.1}x the NATS hop", ratio(least_relay, floor));
    for printer in [Printer::OneProcess, Printer::ShellLoop] {
        println!("turn output {}:", printer.name());
        let stages = relay_latency(&nats, &socket, dir.path(), lines, printer).await;
        let published = report("  turn write to a NATS subscriber of term.bee", stages.published);
        let stored = report("  turn write to a consumer of the stream", stages.stored);
        let relay = report("  turn write to SSE watcher", stages.watched);
        println!(
            "  ratio (p50): {:.1}x the NATS hop; {:.1}x the relay's NATS path; {:.1}x the NATS hop and the pipe; {:.1}x the least relay",
            ratio(relay, floor),
            ratio(relay, path),
            ratio(relay, floor + pipe),
            ratio(relay, least_relay)
        );
        println!("  the agent's share: {:.2}x the least agent's", ratio(published, least));
        println!(
            "  p50 by stage: the agent {}, the stream {}, the controller and HTTP {}",
            millis(published.as_secs_f64()),
            millis(stored.as_secs_f64() - published.as_secs_f64()),
            millis(relay.as_secs_f64() - stored.as_secs_f64())
        );
    }

    let last = last_sequence(&nats, "term.bee").await;
    assert!(last > 0, "the turns wrote the terminal's history");
    let memory = Memory { pid: controller.pid(), socket };
    let before = memory.now().await;
    let mut first = memory.open_watchers(watchers).await;
    let first_event = memory.now().await;
    read_history(&mut first, last).await;
    let first_settled = memory.now().await;
    let mut second = memory.open_watchers(watchers).await;
    read_history(&mut second, last).await;
    let second_settled = memory.now().await;
    println!("controller memory with no watcher: {before}");
    println!("first {watchers} watchers, first event read: {}", first_event.per_watcher(&before, watchers));
    println!("first {watchers} watchers, history read: {}", first_settled.per_watcher(&before, watchers));
    println!("second {watchers} watchers, history read: {}", second_settled.per_watcher(&first_settled, watchers));
    drop((first, second));
}

/// The stream sequence of the last message on `subject`, 0 when there is none.
async fn last_sequence(nats: &NatsJwt, subject: &str) -> u64 {
    let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
    let stream = js.get_stream_no_info(hyperhive_nats_objects::RELAY_STREAM).await.unwrap();
    match stream.direct_get_last_for_subject(subject).await {
        Ok(message) => message.sequence,
        Err(e) if e.kind() == async_nats::jetstream::stream::DirectGetErrorKind::NotFound => 0,
        Err(e) => panic!("reading the last sequence of {subject}: {e}"),
    }
}

/// Each watcher reads events until the one with id `last`: it has had the whole history and
/// waits for live output. All at once: the controller drops a watcher that leaves its queue
/// full for five seconds, which one after the other the last ones would.
async fn read_history(watchers: &mut [SseClient], last: u64) {
    futures::future::join_all(watchers.iter_mut().map(|watcher| async move {
        loop {
            let event = tokio::time::timeout(PATIENCE, watcher.next()).await.expect("the history stalled");
            if event.expect("the controller ended a watcher").id.is_some_and(|id| id >= last) {
                break;
            }
        }
    }))
    .await;
}

/// The controller process whose memory is read.
struct Memory {
    pid: u32,
    socket: PathBuf,
}

/// Its resident memory, and its live heap bytes in a `heap-stats` build.
struct Sample {
    rss_kib: u64,
    heap_bytes: Option<u64>,
}

impl Memory {
    async fn now(&self) -> Sample {
        let request =
            hyper::Request::builder().uri("/metrics").body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        let (_, body) = swarmctl::client::send(&self.socket, request).await.unwrap();
        let heap_bytes = String::from_utf8_lossy(&body)
            .lines()
            .find_map(|line| line.strip_prefix("swarm_heap_live_bytes "))
            .map(|value| value.trim().parse().unwrap());
        Sample { rss_kib: rss_kib(self.pid), heap_bytes }
    }

    /// `n` watchers of the terminal, each once it has its first event (its answer is being read).
    async fn open_watchers(&self, n: usize) -> Vec<SseClient> {
        let mut open = Vec::with_capacity(n);
        for _ in 0..n {
            let (_, watcher) = SseClient::open(&self.socket, "/api/agents/bee/terminal", None).await.unwrap();
            open.push(watcher);
        }
        for watcher in &mut open {
            watcher.take(1, PATIENCE).await.unwrap();
        }
        open
    }
}

impl Sample {
    fn per_watcher(&self, before: &Sample, watchers: usize) -> String {
        let rss = self.rss_kib as f64 - before.rss_kib as f64;
        let mut text = format!("RSS +{:.0} KiB, {:.1} KiB per watcher", rss, rss / watchers as f64);
        if let (Some(now), Some(then)) = (self.heap_bytes, before.heap_bytes) {
            let heap = (now as f64 - then as f64) / 1024.0;
            text += &format!("; live heap +{heap:.0} KiB, {:.1} KiB per watcher", heap / watchers as f64);
        }
        text
    }
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RSS {} KiB", self.rss_kib)?;
        match self.heap_bytes {
            Some(bytes) => write!(f, ", live heap {} KiB", bytes / 1024),
            None => write!(f, " (live heap: build with --features heap-stats)"),
        }
    }
}
