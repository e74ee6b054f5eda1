//! A measurement, not run by default: the store requests an idle copy makes per minute, with 0,
//! 100 and 1,000 paired devices, on the file store and on the real S3 server from the test kit.
//! The copy is the real `serve::run` (what `agents-control serve` runs), counted by the
//! `/metrics` store-operation counters. The figures go in docs/benchmarks.md.
//!
//! cargo test -p agents-control --test idle_store_requests -- --ignored --nocapture

use agents_control::clock::SystemClock;
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::membership::Membership;
use agents_control::records::{self, DeviceRecord};
use agents_control::serve;
use futures::StreamExt;
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::{S3, S3Server, wait_until};
use std::sync::Arc;
use std::time::Duration;

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
    let control = Arc::new(Control::new(store, ControlKey::from_seed([7; 32]), Arc::new(SystemClock)));
    let membership = Arc::new(Membership::new("idle".into(), None));
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
