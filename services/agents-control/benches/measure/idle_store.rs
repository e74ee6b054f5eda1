//! Store requests of idle copies on S3 (moto from the test kit), three copies linked: each
//! copy's `agents_control_store_operations_total` read before and after an idle window, with 0
//! paired devices and then with `devices` paired (nobody connected). The method of
//! tests/idle_store_requests.rs (one copy in process), here with real processes and peers.

use super::Row;
use crate::support::cluster::{Copy, copy_env, three_copies};
use crate::support::devices::pair_many;
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::{S3, S3Server, wait_until};
use std::time::Duration;

const PREFIX: &str = "bench";
const OPERATIONS: [&str; 5] = ["list", "get", "create", "replace", "delete"];
const TOTAL: &str = "agents_control_store_operations_total";

async fn counts(copy: &Copy) -> Vec<f64> {
    let metrics = copy.metrics().await;
    OPERATIONS.iter().map(|op| metrics.sum(&format!("{TOTAL}{{operation=\"{op}\""))).collect()
}

/// Requests per minute by operation, per copy, over `window`.
async fn per_minute(copies: &[Copy], window: Duration) -> Vec<Vec<f64>> {
    let mut before = Vec::new();
    for copy in copies {
        before.push(counts(copy).await);
    }
    // The window is what is measured, not a wait for something to happen.
    tokio::time::sleep(window).await;
    let scale = 60.0 / window.as_secs_f64();
    let mut rates = Vec::new();
    for (copy, before) in copies.iter().zip(before) {
        let after = counts(copy).await;
        rates.push(after.iter().zip(before).map(|(a, b)| (a - b) * scale).collect());
    }
    rates
}

fn describe(rates: &[Vec<f64>]) -> String {
    let totals: Vec<String> = rates.iter().map(|r| format!("{:.0}", r.iter().sum::<f64>())).collect();
    let first = &rates[0];
    let by_op: Vec<String> =
        OPERATIONS.iter().zip(first).filter(|(_, n)| **n > 0.0).map(|(op, n)| format!("{op} {n:.0}")).collect();
    format!("{} per copy (A: {})", totals.join(" / "), by_op.join(", "))
}

pub async fn run(devices: usize, window: Duration) -> Vec<Row> {
    let s3 = S3::start(S3Server::Moto).await.expect("moto starts");
    let copies = three_copies(&copy_env(&s3.store_url(PREFIX), "http://127.0.0.1:1", s3.env())).await;
    let store = S3Store::from_client(&s3.client(), s3.bucket(), PREFIX);
    // Start-up (probe, first registry read, first membership writes) is not idle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = per_minute(&copies, window).await;
    let mut rows = vec![Row::new(
        format!("S3 requests per minute, idle copy, 0 devices, peers linked ({}s window)", window.as_secs()),
        describe(&idle),
        "bounded",
    )];
    pair_many(&store, "http://127.0.0.1:1", DeviceKind::Client, "idle", devices).await;
    // Every copy has listed the devices since they were paired (a refresh is a few LISTs).
    let mut targets = Vec::new();
    for copy in &copies {
        targets.push(counts(copy).await[0] + 4.0);
    }
    wait_until("every copy to read the registry again", Duration::from_secs(60), || async {
        for (copy, target) in copies.iter().zip(&targets) {
            if counts(copy).await[0] < *target {
                return None;
            }
        }
        Some(())
    })
    .await
    .unwrap();
    let busy = per_minute(&copies, window).await;
    rows.push(Row::new(
        format!("S3 requests per minute, idle copy, {devices} paired devices, peers linked"),
        describe(&busy),
        "same as with 0",
    ));
    rows
}
