//! Soak benchmark: the remote path and the relay under steady use for `--minutes` (default 30),
//! with the resident memory of the controller and of each control-plane copy taken every minute.
//!
//! The stack is the remote benchmark's (`support/remote_stack.rs`: three agents-control copies
//! behind Caddy on one bucket, JWT-mode NATS, the `swarm-controller` binary paired as a host),
//! plus one real hive-agent, `bee`, whose one long turn prints a line every 200 ms. Three loads
//! run at once for the whole time:
//!
//! 1. **Requests through the control plane**: one client linked to a copy other than the
//!    controller's sends `--rate` requests a second (default 20), one after another:
//!    `GET /api/hives`, and every tenth `GET /api/agents/status` (a roster and status read).
//! 2. **Watchers coming and going**: every second `--watchers` (default 20) server-sent-event
//!    watchers of bee's terminal are opened on the controller's socket, each reads its first event,
//!    and all are closed.
//! 3. **The relay**: bee's turn output flows to whoever watches.
//!
//! Each minute prints a row: the minute, the controller's and each copy's VmRSS, the requests
//! and watchers done so far. At the end, per process: VmRSS at the end of the warm-up
//! (`--warm-up` minutes, default 5) and at the end, the growth between them, the least-squares
//! slope over the minutes after the warm-up (KiB a minute), and that growth per 1,000 requests.
//! A request or watcher that fails is counted and reported, never retried silently.
//!
//! `cargo build -p agents-control -p hive-agent && cargo bench -p swarm-controller --bench soak
//! [-- --minutes N --rate R --watchers W --warm-up M]`. Needs `scripts/setup`.

#[path = "support/bee.rs"]
mod bee;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/remote_stack.rs"]
mod remote_stack;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::http::Method;
use hyperhive_testkit::stats::rss_kib;
use hyperhive_testkit::{Process, SseClient, project_binary, wait_until};
use remote_stack::RemoteStack;
use swarmctl::{Api, client};

const PATIENCE: Duration = Duration::from_secs(60);

fn option(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map_or(default, |p| p[1].parse().expect("a number"))
}

/// What the loads have done so far.
#[derive(Default)]
struct Done {
    requests: AtomicU64,
    request_failures: AtomicU64,
    watchers: AtomicU64,
    watcher_failures: AtomicU64,
}

/// bee on the roster (its hive's status) and running one endless turn that prints.
async fn printing_bee(stack: &RemoteStack) -> Process {
    bee::report_bee_on_h1(&stack.nats).await;
    let binary = project_binary("hive-agent").unwrap();
    let turn = "while :; do date +%s%N; sleep 0.2; done";
    let state = stack.dir().join("bee");
    let agent = bee::start_bee(&stack.nats, binary, &state, turn, &[("HIVE_AGENT_TURN_TIMEOUT", "24h")]).await;
    bee::give_bee(&stack.nats, "soak").await;
    // The turn's output reaches a watcher: the relay runs.
    let (_, mut watcher) = wait_until("bee's terminal served", PATIENCE, || async {
        SseClient::open(&stack.socket, "/api/agents/bee/terminal", None).await.ok().filter(|(s, _)| s.is_success())
    })
    .await
    .unwrap();
    watcher.take(2, PATIENCE).await.unwrap();
    agent
}

/// Requests through the control plane at `rate` a second until `until`.
async fn requests(api: Api, rate: u64, until: Instant, done: Arc<Done>) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    while Instant::now() < until {
        tick.tick().await;
        let path = if n % 10 == 9 { "/api/agents/status" } else { "/api/hives" };
        n += 1;
        match client::request(&api, Method::GET, path, None, None).await {
            Ok(_) => done.requests.fetch_add(1, Ordering::Relaxed),
            Err(_) => done.request_failures.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// `per_second` watchers of bee's terminal opened, read and closed every second until `until`.
async fn watchers(socket: std::path::PathBuf, per_second: u64, until: Instant, done: Arc<Done>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        tick.tick().await;
        let opened = (0..per_second).map(|_| async {
            let (status, mut watcher) = SseClient::open(&socket, "/api/agents/bee/terminal", None).await.ok()?;
            (status.is_success() && watcher.take(1, PATIENCE).await.is_ok()).then_some(())
        });
        for seen in futures::future::join_all(opened).await {
            match seen {
                Some(()) => done.watchers.fetch_add(1, Ordering::Relaxed),
                None => done.watcher_failures.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

/// The least-squares slope of `values` against their index.
fn slope(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    num / den
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (minutes, rate, per_second, warm_up) =
        (option("--minutes", 30), option("--rate", 20), option("--watchers", 20), option("--warm-up", 5));
    assert!(warm_up < minutes, "--warm-up must be shorter than --minutes");
    let stack = RemoteStack::start(&[]).await;
    let _bee = printing_bee(&stack).await;
    let remote = stack.remote_api().await;

    let mut processes: Vec<(String, u32)> = vec![("controller".into(), stack.controller.pid())];
    for copy in &stack.cluster.copies {
        processes.push((format!("copy {}", copy.name), copy.process.pid()));
    }
    println!(
        "soak benchmark: {minutes} min, {rate} requests/s through the control plane (controller on {}, client on {}), \
         {per_second} watchers/s; load {}",
        stack.cluster.copies[stack.near].name,
        stack.cluster.copies[stack.far].name,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    let done = Arc::new(Done::default());
    let until = Instant::now() + Duration::from_secs(minutes * 60);
    let loads = [
        tokio::spawn(requests(remote, rate, until, done.clone())),
        tokio::spawn(watchers(stack.socket.clone(), per_second, until, done.clone())),
    ];

    let names: Vec<&str> = processes.iter().map(|(n, _)| n.as_str()).collect();
    println!();
    println!("| minute | {} KiB | requests | watchers |", names.join(" KiB | "));
    println!("|---|{}---|---|", "---|".repeat(names.len()));
    let mut rows: Vec<Vec<u64>> = Vec::new();
    let mut requests_at: Vec<u64> = Vec::new();
    let started = Instant::now();
    for minute in 0..=minutes {
        tokio::time::sleep_until((started + Duration::from_secs(minute * 60)).into()).await;
        let row: Vec<u64> = processes.iter().map(|(_, pid)| rss_kib(*pid)).collect();
        let (r, w) = (done.requests.load(Ordering::Relaxed), done.watchers.load(Ordering::Relaxed));
        println!("| {minute} | {} | {r} | {w} |", row.iter().map(u64::to_string).collect::<Vec<_>>().join(" | "));
        rows.push(row);
        requests_at.push(r);
    }
    for load in loads {
        load.await.unwrap();
    }

    let warm = warm_up as usize;
    let requests_after = (requests_at[minutes as usize] - requests_at[warm]) as f64;
    println!();
    println!(
        "| process | VmRSS after warm-up (min {warm_up}) | VmRSS at the end | growth | slope after warm-up | growth per 1,000 requests |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, name) in names.iter().enumerate() {
        let after: Vec<f64> = rows[warm..].iter().map(|r| r[i] as f64).collect();
        let (first, last) = (rows[warm][i], rows[minutes as usize][i]);
        let growth = last as i64 - first as i64;
        println!(
            "| {name} | {first} KiB | {last} KiB | {growth:+} KiB ({:.3}x) | {:+.1} KiB/min | {:+.2} KiB |",
            last as f64 / first as f64,
            slope(&after),
            growth as f64 / requests_after * 1000.0
        );
    }
    println!(
        "\nrequests: {} done, {} failed; watchers: {} done, {} failed; load at the end {}",
        done.requests.load(Ordering::Relaxed),
        done.request_failures.load(Ordering::Relaxed),
        done.watchers.load(Ordering::Relaxed),
        done.watcher_failures.load(Ordering::Relaxed),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
}
