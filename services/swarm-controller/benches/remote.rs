//! Benchmark of the swarm API through the control plane, against the controller's unix socket
//! and against the link's own message round trip, in one process and one run.
//!
//! The stack is the end-to-end test's (tests/remote.rs) without the hive: three agents-control
//! copies behind Caddy sharing a moto bucket (the test kit's `Cluster`), a JWT-mode NATS, and the
//! `swarm-controller` binary (started by tests/common's `daemon_process`, included) paired as a
//! host (`swarm-controller pair`, `SWARM_CONTROL_IDENTITY`, `SWARM_REMOTE_RATE=10000` so the
//! per-client rate never throttles). `--schedules` schedules (default 20) are created on the
//! socket first.
//!
//! 1. **Socket**: `GET /api/schedules` on the unix socket, `--requests` times (default 500),
//!    one after another.
//! 2. **Control plane**: the same request from a client linked straight to a copy other than the
//!    controller's (client -> copy A -> peer link -> copy B -> controller and back), one
//!    `RemoteApi` (one link) for all of them.
//! 3. **Plain link** (the floor): a client and a host in this process (`connect::run`), the host
//!    on the controller's copy and echoing every message, the client on the other copy, timing
//!    send -> echoed message.
//!
//! Each is preceded by 20 untimed warm-up rounds. Prints p50, p90, p99 and mean, the ratios, and
//! the controller's resident memory before and after.
//!
//! `cargo build -p agents-control && cargo bench -p swarm-controller --bench remote [-- --requests
//! N --schedules M]`. Needs `scripts/setup` (moto, Caddy, nats-server).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/remote_stack.rs"]
mod remote_stack;

use std::path::Path;
use std::time::{Duration, Instant};

use hyper::http::Method;
use hyperhive_control_link::Identity;
use hyperhive_control_link::connect::{self, Command, Event};
use hyperhive_control_proto::link::Body;
use hyperhive_testkit::stats::{percentile, rss_kib};
use hyperhive_testkit::wait_until;
use remote_stack::RemoteStack;
use serde_json::{Value, json};
use swarmctl::{Api, client};
use tokio::sync::mpsc;

const SOON: Duration = Duration::from_secs(30);
const WARM_UP: usize = 20;

fn option(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().expect("a number"))
}

/// p50, p90, p99 and mean of a run, in milliseconds.
struct Figures {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    mean: f64,
}

impl Figures {
    fn of(mut samples: Vec<Duration>) -> Figures {
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64;
        Figures {
            n: samples.len(),
            p50: ms(percentile(&samples, 0.5)),
            p90: ms(percentile(&samples, 0.9)),
            p99: ms(percentile(&samples, 0.99)),
            mean,
        }
    }

    fn row(&self, what: &str) {
        println!("| {what} | {} | {:.3} | {:.3} | {:.3} | {:.3} |", self.n, self.p50, self.p90, self.p99, self.mean);
    }
}

/// `GET /api/schedules` on `api`, `n` times one after another (after the warm-up); each answer
/// must list `schedules` schedules.
async fn schedules_round_trips(api: &Api, n: usize, schedules: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(n);
    for round in 0..WARM_UP + n {
        let started = Instant::now();
        let bytes = client::request(api, Method::GET, "/api/schedules", None, None).await.unwrap();
        let took = started.elapsed();
        if round == 0 {
            let listed: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(listed.len(), schedules, "the answer lists every schedule");
        }
        if round >= WARM_UP {
            samples.push(took);
        }
    }
    samples
}

/// The consumers on the schedules' bucket now. Every scan of a bucket (each `GET
/// /api/schedules`) makes an ordered consumer that the server removes only after 30 s without
/// interest, and with a few hundred of them alive the server refused more ("maximum consumers
/// limit reached": 520 from the socket run and 39 from the next failed the 40th), so each run
/// starts after the last one's have gone.
async fn consumers(js: &async_nats::jetstream::Context) -> usize {
    let mut stream = js.get_stream("KV_schedule-definitions").await.unwrap();
    stream.info().await.unwrap().state.consumer_count
}

async fn consumers_gone(js: &async_nats::jetstream::Context) -> usize {
    let left = consumers(js).await;
    wait_until("the scans' consumers to expire", Duration::from_secs(120), || async {
        (consumers(js).await == 0).then_some(())
    })
    .await
    .unwrap();
    left
}

/// A device's link run in this process: its commands in, its events out.
fn link(identity: &Path) -> (mpsc::Sender<Command>, mpsc::Receiver<Event>) {
    let identity = Identity::load(identity).unwrap();
    let (commands, command_rx) = mpsc::channel(256);
    let (event_tx, events) = mpsc::channel(1024);
    tokio::spawn(async move {
        let _ = connect::run(&identity, command_rx, event_tx).await;
    });
    (commands, events)
}

/// The plain link's round trip: a client on `client_identity` sends `{"n": i}` to the host
/// `host_id`, which echoes it back; `n` times one after another (after the warm-up).
async fn plain_round_trips(client_identity: &Path, host_identity: &Path, host_id: &str, n: usize) -> Vec<Duration> {
    let (host_commands, mut host_events) = link(host_identity);
    let echo = tokio::spawn(async move {
        while let Some(event) = host_events.recv().await {
            if let Event::Message { from, body, .. } = event
                && host_commands.send(Command::Send { to: from, body }).await.is_err()
            {
                return;
            }
        }
    });
    let (commands, mut events) = link(client_identity);
    // Wait until the control plane shows the echo host online to this client.
    tokio::time::timeout(SOON, async {
        while let Some(event) = events.recv().await {
            if let Event::Presence { hosts, .. } = event
                && hosts.iter().any(|h| h.device_id == host_id && h.online)
            {
                return;
            }
        }
        panic!("the client's link stopped");
    })
    .await
    .expect("the echo host online");
    let mut samples = Vec::with_capacity(n);
    for round in 0..WARM_UP + n {
        let body = Body::parse(&json!({"n": round}).to_string()).unwrap();
        let started = Instant::now();
        commands.send(Command::Send { to: host_id.to_owned(), body }).await.unwrap();
        let echoed = tokio::time::timeout(SOON, async {
            loop {
                match events.recv().await.expect("the client's link runs") {
                    Event::Message { from, body, .. } if from == host_id => return body,
                    _ => {}
                }
            }
        })
        .await
        .expect("the echo");
        let took = started.elapsed();
        assert_eq!(serde_json::from_str::<Value>(echoed.get()).unwrap()["n"], round, "echoes come back in order");
        if round >= WARM_UP {
            samples.push(took);
        }
    }
    echo.abort();
    samples
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (requests, schedules) = (option("--requests", 500), option("--schedules", 20));
    let mut stack = RemoteStack::start(&[]).await;
    let (copy, far) = (stack.cluster.copies[stack.near].name.clone(), stack.far);
    let floor_client = stack.cluster.pair("--client", "floor").await.altered("direct", stack.on_copy(far));
    let echo = stack.cluster.pair("--host", "echo").await.altered("direct", stack.on_copy(stack.near));
    stack.cluster.wait_registry_read().await;

    let socket = stack.socket_api();
    for i in 0..schedules {
        // Anchored far ahead: nothing fires during the run (and no hive runs bee).
        let schedule = json!({"name": format!("bench-{i}"), "agents": ["bee"], "body": "never during the bench",
                              "anchor": "2035-01-01T00:00:00Z", "interval": 3600, "allow_unknown_agents": true});
        let body = serde_json::to_vec(&schedule).unwrap();
        client::request(&socket, Method::POST, "/api/schedules", None, Some(body)).await.unwrap();
    }

    let pid = stack.controller.pid();
    let rss_start = rss_kib(pid);
    println!(
        "remote benchmark: {requests} requests, {schedules} schedules; controller on {copy}, clients on {}",
        stack.cluster.copies[far].name
    );
    let js = async_nats::jetstream::new(stack.nats.controller_client().await.unwrap());
    consumers_gone(&js).await;
    let on_socket = Figures::of(schedules_round_trips(&socket, requests, schedules).await);
    let rss_socket = rss_kib(pid);
    let left_socket = consumers_gone(&js).await;
    let remote = stack.remote_api().await;
    let rss_linked = rss_kib(pid);
    let through = Figures::of(schedules_round_trips(&remote, requests, schedules).await);
    let rss_remote = rss_kib(pid);
    let left_remote = consumers_gone(&js).await;
    drop(remote);
    let plain = Figures::of(plain_round_trips(&floor_client.identity, &echo.identity, &echo.id, requests).await);

    println!();
    println!("| measure | n | p50 ms | p90 ms | p99 ms | mean ms |");
    println!("|---|---|---|---|---|---|");
    on_socket.row("GET /api/schedules, unix socket");
    through.row("GET /api/schedules, control plane (client -> copy -> peer -> copy -> controller)");
    plain.row("plain link message round trip, same two copies (floor)");
    let ratio = |a: &Figures, b: &Figures| {
        format!("{:.1}x / {:.1}x / {:.1}x / {:.1}x", a.p50 / b.p50, a.p90 / b.p90, a.p99 / b.p99, a.mean / b.mean)
    };
    println!("| control plane / socket (p50 / p90 / p99 / mean) | | {} | | | |", ratio(&through, &on_socket));
    println!("| control plane / plain link (p50 / p90 / p99 / mean) | | {} | | | |", ratio(&through, &plain));
    println!(
        "| controller VmRSS: start / after socket / client linked / after control plane | | {rss_start} / \
         {rss_socket} / {rss_linked} / {rss_remote} KiB | | | |"
    );
    println!(
        "| ordered consumers on the bucket right after each run (socket / control plane) | | {left_socket} / \
         {left_remote} | | | |"
    );
    println!(
        "| controller VmRSS growth for the one client link and its {requests} requests | | {} KiB | | | |",
        rss_remote as i64 - rss_socket as i64
    );
}
