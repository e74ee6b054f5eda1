//! Idle memory per connected device: `n` hosts paired, three copies started (so each has read
//! the registry), then every host connected to copy A with the full client library, in batches.
//! Reported: copy A's resident growth (VmRSS) divided by `n`, a peer's growth (it holds where
//! each device is), and this process's growth (the client side: `connect::run` and its event
//! task per device). Hosts, because a client's presence frame lists every host (see the check
//! at the end).

use super::{Row, file_store};
use crate::support::cluster::{copy_env, three_copies};
use crate::support::devices::{Running, is_connected, pair, pair_many, start};
use crate::support::stats::{open_files_limit, rss_bytes};
use hyperhive_control_link::connect::Event;
use hyperhive_control_proto::DeviceKind;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const BATCH: usize = 500;
const BATCH_WITHIN: Duration = Duration::from_secs(120);
/// One keepalive period and a little: every link has exchanged a ping since it connected.
const SETTLE: Duration = Duration::from_secs(6);

fn kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}

pub async fn run(n: usize) -> Vec<Row> {
    let limit = open_files_limit().unwrap_or(0);
    if (limit as usize) < n + 1000 {
        eprintln!(
            "open files limit {limit} is below {n} devices plus the copy's own: run `ulimit -n 65536` (as root, or raise the hard limit) before the bench"
        );
    }
    let (_dir, store, url) = file_store();
    let paired_at = Instant::now();
    let identities = pair_many(store.as_ref(), "http://127.0.0.1:1", DeviceKind::Host, "host", n).await;
    let pairing = paired_at.elapsed();
    let copies = three_copies(&copy_env(&url, "http://127.0.0.1:1", vec![])).await;
    tokio::time::sleep(SETTLE).await;
    let (copy_before, peer_before, bench_before) = (copies[0].rss(), copies[1].rss(), rss_bytes(std::process::id()));

    let (events, mut receiver) = mpsc::unbounded_channel();
    let mut held: Vec<Running> = Vec::with_capacity(n);
    let mut connected = 0;
    let ramp = Instant::now();
    let mut identities = identities.into_iter().enumerate().peekable();
    while identities.peek().is_some() {
        for (i, mut identity) in identities.by_ref().take(BATCH) {
            identity.control_url = copies[0].url();
            held.push(start(identity, i, events.clone(), false));
        }
        let deadline = tokio::time::Instant::now() + BATCH_WITHIN;
        while connected < held.len() {
            let Ok(Some(tagged)) = tokio::time::timeout_at(deadline, receiver.recv()).await else {
                panic!("{connected} of {} devices connected after {BATCH_WITHIN:?}", held.len());
            };
            match tagged.event {
                event if is_connected(&event) => connected += 1,
                Event::Reconnecting { reason, .. } => eprintln!("device {} reconnecting: {reason}", tagged.device),
                _ => {}
            }
        }
    }
    let ramp = ramp.elapsed();
    tokio::time::sleep(SETTLE).await;
    let on_copy = copies[0].metrics().await.connections();
    let (copy_after, peer_after, bench_after) = (copies[0].rss(), copies[1].rss(), rss_bytes(std::process::id()));
    let per = |after: u64, before: u64| after.saturating_sub(before) as f64 / n as f64;
    let mut rows = vec![
        Row::new(
            format!("idle memory per device on its copy (N={n} hosts on copy A, {on_copy} counted by A)"),
            format!(
                "{} (VmRSS {:.0} -> {:.0} MiB)",
                kib(per(copy_after, copy_before)),
                copy_before as f64 / 1048576.0,
                copy_after as f64 / 1048576.0
            ),
            "<= 16 KiB",
        ),
        Row::new(format!("idle memory per device on a peer copy (N={n})"), kib(per(peer_after, peer_before)), ""),
        Row::new(
            format!("client side per device (connect::run + event task, N={n}, in the bench process)"),
            kib(per(bench_after, bench_before)),
            "",
        ),
        Row::new(
            format!("connecting N={n} devices (batches of {BATCH}); pairing them through the file store"),
            format!("{:.1} s; {:.1} s", ramp.as_secs_f64(), pairing.as_secs_f64()),
            "",
        ),
    ];
    rows.push(client_with_every_host_online(store.as_ref(), &copies[0].url(), n).await);
    rows
}

/// Whether a client can connect and stay connected while `n` hosts are paired and online: its
/// first frame lists every host.
async fn client_with_every_host_online(store: &dyn hyperhive_object_store::Store, url: &str, n: usize) -> Row {
    let mut client = pair(store, url, DeviceKind::Client, "window").await;
    client.control_url = url.to_owned();
    let (events, mut receiver) = mpsc::unbounded_channel();
    let _running = start(client, 0, events, true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while let Ok(Some(tagged)) = tokio::time::timeout_at(deadline, receiver.recv()).await {
        let line = match tagged.event {
            Event::Presence { hosts, .. } => {
                return Row::new(
                    format!("a client connecting with N={n} hosts online"),
                    format!("gets its presence list ({} hosts)", hosts.len()),
                    "",
                );
            }
            Event::Connected { .. } => "connected".to_owned(),
            other => format!("{other:?}"),
        };
        if seen.len() < 3 {
            seen.push(line);
        }
    }
    Row::new(
        format!("a client connecting with N={n} hosts online"),
        format!("NO presence list within 10 s; first events: {}", seen.join("; ")),
        "presence list",
    )
}
