//! Measurements, not run by default (the figures go in docs/benchmarks.md), both counted by the
//! `/metrics` store-operation counters:
//!
//! - the store requests an idle copy makes per minute, with 0, 100 and 1,000 paired devices, on
//!   the file store and on the real S3 server from the test kit (the real `serve::run`, in
//!   process);
//! - the store requests per copy and minute of 1, 3 and 5 idle `agents-control serve` processes
//!   linked to each other on SeaweedFS, and how long the survivors' membership takes to notice a
//!   copy killed with SIGKILL, and one whose host vanished (SIGSTOP: its links stay open and
//!   silent).
//!
//! cargo test -p agents-control --test idle_store_requests -- --ignored --nocapture

use agents_control::clock::SystemClock;
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::membership::Membership;
use agents_control::peers;
use agents_control::records::{self, DeviceRecord};
use agents_control::{cadence, serve};
use futures::StreamExt;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::encoding;
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::process::http_get_ok;
use hyperhive_testkit::{Process, S3, S3Server, free_port, wait_until};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Scaled to a minute; a multiple of the sweep period (30 s) so each window holds one sweep.
const WINDOW: Duration = Duration::from_secs(30);
const OPERATIONS: [&str; 5] = ["list", "get", "create", "replace", "delete"];

fn device(n: usize) -> DeviceRecord {
    let code = format!("{n:064x}");
    DeviceRecord {
        schema: records::SCHEMA,
        id: records::device_id_for(&code),
        kind: if n.is_multiple_of(2) { DeviceKind::Client } else { DeviceKind::Host },
        name: format!("device {n}"),
        public_key: "AAAA".into(),
        paired_at: "2026-01-01T00:00:00Z".into(),
        code,
        forgotten_at: None,
        role: None,
        write_id: records::write_id(),
    }
}

async fn pair_many(store: &dyn Store, devices: usize) {
    futures::stream::iter(0..devices)
        .for_each_concurrent(16, |n| async move {
            let record = device(n);
            store.create(&records::device_key(&record.id), records::encode(&record)).await.unwrap();
        })
        .await;
}

/// Store requests per minute by operation, of a copy serving `store` with nobody connected.
async fn idle_requests_per_minute(store: Arc<dyn Store>) -> Vec<(&'static str, u64)> {
    let membership = Arc::new(Membership::new("idle".into(), None));
    // Named as its membership record names it, as `agents-control serve` names it: otherwise
    // the copy takes its own record for another copy's, live and never linked, and lists
    // `members/` at every refresh to watch it.
    let control = Arc::new(
        Control::new(store, ControlKey::from_seed([7; 32]), Arc::new(SystemClock)).with_copy_name(membership.copy_id()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let copy = tokio::spawn(serve::run(
        control.clone(),
        membership,
        listener,
        async move {
            let _ = stopped.await;
        },
        Duration::ZERO,
    ));
    let metrics = control.metrics.clone();
    // Start counting once start-up (probe, first registry read) is over and the background
    // loop has run once.
    wait_until("the copy's first background refresh", Duration::from_secs(60), || {
        let lists = metrics.store_operations("list");
        async move { (lists >= 3).then_some(()) }
    })
    .await
    .unwrap();
    // A starting copy lists `members/` at every refresh for its first seconds: not idle yet (a
    // measured pause, not a wait for a condition).
    tokio::time::sleep(peers::MEMBERS_STARTING).await;
    let before: Vec<u64> = OPERATIONS.iter().map(|op| metrics.store_operations(op)).collect();
    // The window is what is measured, not a wait for something to happen.
    tokio::time::sleep(WINDOW).await;
    let per_minute = OPERATIONS
        .iter()
        .zip(before)
        .map(|(op, before)| (*op, (metrics.store_operations(op) - before) * 60 / WINDOW.as_secs()))
        .collect();
    stop.send(()).unwrap();
    copy.await.unwrap().unwrap();
    per_minute
}

fn report(backend: &str, devices: usize, per_minute: &[(&str, u64)]) -> u64 {
    let total: u64 = per_minute.iter().map(|(_, n)| n).sum();
    let by_op: Vec<String> = per_minute.iter().filter(|(_, n)| *n > 0).map(|(op, n)| format!("{op} {n}")).collect();
    println!("| {backend} | {devices} | {total} | {} |", by_op.join(", "));
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of about 3 minutes: run with --ignored --nocapture"]
async fn an_idle_copy_makes_as_many_store_requests_whatever_the_number_of_devices() {
    let s3 = S3::start(S3Server::Moto).await.unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    println!("| store | devices | requests per minute | by operation |\n|---|---|---|---|");
    for backend in ["file", "s3"] {
        let mut totals = Vec::new();
        for (devices, dir) in [0, 100, 1000].into_iter().zip(&dirs) {
            let store: Arc<dyn Store> = match backend {
                "file" => Arc::new(FileStore::open(dir.path()).unwrap()),
                _ => Arc::new(S3Store::from_client(&s3.client(), s3.bucket(), &format!("idle{devices}"))),
            };
            pair_many(store.as_ref(), devices).await;
            let per_minute = idle_requests_per_minute(store).await;
            totals.push(report(backend, devices, &per_minute));
            let gets = per_minute.iter().find(|(op, _)| *op == "get").map_or(0, |(_, n)| *n);
            assert!(gets < 10, "{backend}, {devices} devices: {gets} GETs a minute: the idle copy reads records");
        }
        // The same requests whatever the count (give or take a heartbeat falling at a window's edge).
        assert!(totals.iter().max().unwrap() - totals.iter().min().unwrap() <= 4, "{backend}: {totals:?}");
    }
}

/// A copy run as its own process, with its address (for `/metrics`).
struct Served {
    process: Process,
    addr: SocketAddr,
}

/// The counters and gauges of a copy's `/metrics`.
struct Scraped(String);

impl Scraped {
    async fn of(copy: &Served) -> Scraped {
        Scraped(http_get_ok(copy.addr, "/metrics").await.unwrap_or_default())
    }

    /// The sum of every sample whose name and labels start with `prefix`.
    fn sum(&self, prefix: &str) -> u64 {
        self.0
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn store_requests(&self) -> Vec<u64> {
        OPERATIONS
            .iter()
            .map(|op| self.sum(&format!("agents_control_store_operations_total{{operation=\"{op}\"")))
            .collect()
    }
}

/// Starts `n` copies on `prefix` of the bucket, each with its own peer URL, and waits until each
/// is linked to every other.
async fn start_copies(s3: &S3, prefix: &str, n: usize) -> Vec<Served> {
    let mut copies = Vec::new();
    for index in 0..n {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut env = s3.env();
        env.extend([
            ("AGENTS_STORE".to_string(), s3.store_url(prefix)),
            ("AGENTS_CONTROL_KEY".to_string(), encoding::encode(&[7; 32])),
            ("AGENTS_CONTROL_URL".to_string(), "https://agents.example.com".to_string()),
            ("AGENTS_CONTROL_PEER_URL".to_string(), format!("http://{addr}")),
            ("RUST_LOG".to_string(), "info".to_string()),
        ]);
        let mut process = Process::builder(env!("CARGO_BIN_EXE_agents-control"))
            .args(["serve", "--listen", &addr.to_string(), "--drain", "0s"])
            .envs(env)
            .start(&format!("{prefix}-{index}"))
            .unwrap();
        process.wait_for_http_ok(addr, "/readyz", Duration::from_secs(30)).await.unwrap();
        copies.push(Served { process, addr });
    }
    let linked = (n - 1) as u64;
    wait_until(&format!("{n} copies linked to each other"), Duration::from_secs(90), || async {
        for copy in &copies {
            if Scraped::of(copy).await.sum("agents_control_peers ") != linked {
                return None;
            }
        }
        Some(())
    })
    .await
    .unwrap();
    copies
}

/// Store requests per minute by operation, of each copy, over `window`.
async fn requests_per_minute(copies: &[Served], window: Duration) -> Vec<Vec<u64>> {
    let mut before = Vec::new();
    for copy in copies {
        before.push(Scraped::of(copy).await.store_requests());
    }
    // The window is what is measured, not a wait for something to happen.
    tokio::time::sleep(window).await;
    let mut rates = Vec::new();
    for (copy, before) in copies.iter().zip(before) {
        let after = Scraped::of(copy).await.store_requests();
        rates.push(after.iter().zip(before).map(|(a, b)| (a - b) * 60 / window.as_secs()).collect());
    }
    rates
}

/// How a copy is lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// SIGKILL: its sockets close at once.
    Killed,
    /// Its whole host vanishes, emulated by SIGSTOP: its sockets stay open and silent, as a
    /// host's do when it loses power or network, until the survivors' links time out.
    Vanished,
}

impl Loss {
    fn name(self) -> &'static str {
        match self {
            Loss::Killed => "killed (SIGKILL)",
            Loss::Vanished => "host vanished (SIGSTOP)",
        }
    }
}

/// Loses the last copy and returns how long each survivor took to hold one member fewer live.
async fn time_to_notice(copies: &mut Vec<Served>, loss: Loss) -> Vec<Duration> {
    // Every copy counts every other live first (a copy may find a younger one only at its
    // once-a-minute listing, when that one dialed it).
    let live_before = (copies.len() - 1) as u64;
    wait_until("every copy to count the others live", Duration::from_secs(90), || async {
        for copy in copies.iter() {
            if Scraped::of(copy).await.sum("agents_control_members ") != live_before {
                return None;
            }
        }
        Some(())
    })
    .await
    .unwrap();
    // In a steady fleet the survivors last listed `members/` up to a minute ago and the copy
    // lost beat since; right after the previous loss they listed at every refresh until it was
    // dead, and would see no beat of it since. A measured pause restores the steady state (a
    // heartbeat and two refreshes), not a wait for a condition.
    tokio::time::sleep(cadence::HEARTBEAT_EVERY + 2 * cadence::REFRESH_EVERY).await;
    let mut lost = copies.pop().unwrap();
    let live_after = live_before - 1;
    let lost_at = Instant::now();
    match loss {
        Loss::Killed => lost.process.kill(),
        Loss::Vanished => lost.process.signal(nix::sys::signal::Signal::SIGSTOP).unwrap(),
    }
    let noticed = std::sync::Mutex::new(vec![None; copies.len()]);
    wait_until("every survivor to notice the lost copy", Duration::from_secs(120), || async {
        for (index, copy) in copies.iter().enumerate() {
            let live = Scraped::of(copy).await.sum("agents_control_members ");
            let mut noticed = noticed.lock().unwrap();
            if noticed[index].is_none() && live == live_after {
                noticed[index] = Some(lost_at.elapsed());
            }
        }
        noticed.lock().unwrap().iter().all(Option::is_some).then_some(())
    })
    .await
    .unwrap();
    // A stopped process dies of SIGKILL too: nothing is left behind.
    lost.process.kill();
    noticed.into_inner().unwrap().into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement of about 12 minutes: run with --ignored --nocapture"]
async fn idle_copies_make_as_many_store_requests_whatever_their_number_and_notice_a_lost_one() {
    // Two minutes: each periodic request (every 2 s, 10 s, 30 s, 60 s) may fall at both edges of
    // a window; over two minutes that adds at most half a request a minute each.
    const WINDOW: Duration = Duration::from_secs(120);
    const BOUND: u64 = 40;
    let s3 = S3::start(S3Server::SeaweedFs).await.unwrap();
    println!("| copies | requests per minute, each copy | by operation, first copy |\n|---|---|---|");
    let mut most = Vec::new();
    let mut survivors = Vec::new();
    for n in [1, 3, 5] {
        let copies = start_copies(&s3, &format!("copies{n}"), n).await;
        // Start-up (the probe, the first reads, the first seconds of listing the membership at
        // every refresh) is not idle: a measured pause, not a wait for a condition.
        tokio::time::sleep(peers::MEMBERS_STARTING + Duration::from_secs(2)).await;
        let rates = requests_per_minute(&copies, WINDOW).await;
        let totals: Vec<u64> = rates.iter().map(|r| r.iter().sum()).collect();
        let by_op: Vec<String> =
            OPERATIONS.iter().zip(&rates[0]).filter(|(_, n)| **n > 0).map(|(op, n)| format!("{op} {n}")).collect();
        let each: Vec<String> = totals.iter().map(u64::to_string).collect();
        println!("| {n} | {} | {} |", each.join(" / "), by_op.join(", "));
        most.push(*totals.iter().max().unwrap());
        survivors = copies;
    }
    println!("\n| loss | how | copies before | each survivor noticed it after |\n|---|---|---|---|");
    let mut slowest = [Duration::ZERO; 2];
    for (number, loss) in [Loss::Killed, Loss::Vanished, Loss::Killed, Loss::Vanished].into_iter().enumerate() {
        let before = survivors.len();
        let times = time_to_notice(&mut survivors, loss).await;
        let shown: Vec<String> = times.iter().map(|t| format!("{:.1} s", t.as_secs_f64())).collect();
        println!("| {} | {} | {before} | {} |", number + 1, loss.name(), shown.join(" / "));
        let slowest = &mut slowest[loss as usize];
        *slowest = (*slowest).max(times.into_iter().max().unwrap());
    }
    let [killed, vanished] = slowest;
    println!("\nslowest notice: killed {:.1} s, host vanished {:.1} s", killed.as_secs_f64(), vanished.as_secs_f64());
    assert!(most.iter().all(|n| *n <= BOUND), "an idle copy made more than {BOUND} requests a minute: {most:?}");
    // The bound of peers.rs (the record unchanged for MEMBER_STALE_AFTER, two refreshes), and
    // one more refresh for the gauge to be read.
    let notice_bound = peers::MEMBER_STALE_AFTER + 3 * cadence::REFRESH_EVERY;
    assert!(killed <= notice_bound, "a killed copy was noticed after {killed:?}, over {notice_bound:?}");
    assert!(vanished <= notice_bound, "a vanished copy was noticed after {vanished:?}, over {notice_bound:?}");
}
