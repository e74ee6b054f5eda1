//! Relay throughput: `pairs` hosts each stream small numbered messages to their own client
//! through the full client library (`connect::run`, which acks every message), each host
//! keeping at most `window` messages unacked. Counted: messages delivered to the clients'
//! applications per second over `seconds`, after a warm-up. Hosts and clients on the same copy,
//! then on different copies. Everything (copies and devices) shares the machine's cores.

use super::{Row, file_store};
use crate::support::cluster::{Copy, copy_env, three_copies};
use crate::support::devices::{Running, Tagged, pair, start};
use hyperhive_control_link::connect::{Command, Event};
use hyperhive_control_proto::DeviceKind;
use hyperhive_testkit::wait_until;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

const WARMUP: Duration = Duration::from_secs(2);

/// Keeps `window` messages to `to` in flight: sends more as acks come.
async fn stream(commands: mpsc::Sender<Command>, mut events: mpsc::UnboundedReceiver<Tagged>, to: String, window: u64) {
    let (mut sent, mut acked) = (0u64, 0u64);
    loop {
        while sent - acked < window {
            sent += 1;
            let body = json!({"n": sent}).into();
            if commands.send(Command::Send { to: to.clone(), body }).await.is_err() {
                return;
            }
        }
        match events.recv().await {
            Some(Tagged { event: Event::Acked { seq, .. }, .. }) => acked = acked.max(seq),
            Some(_) => {}
            None => return,
        }
    }
}

/// Messages per second delivered with hosts on `copies[at.0]` and clients on `copies[at.1]`.
async fn scenario(
    store: &dyn hyperhive_object_store::Store,
    copies: &[Copy],
    at: (usize, usize),
    pairs: usize,
    window: u64,
    seconds: u64,
) -> f64 {
    let (host_url, client_url) = (copies[at.0].url(), copies[at.1].url());
    let delivered = Arc::new(AtomicU64::new(0));
    let (client_events, mut client_receiver) = mpsc::unbounded_channel();
    let mut held: Vec<Running> = Vec::new();
    let mut hosts = Vec::new();
    for i in 0..pairs {
        let host = pair(store, &host_url, DeviceKind::Host, &format!("host-{i}")).await;
        let client = pair(store, &client_url, DeviceKind::Client, &format!("client-{i}")).await;
        hosts.push((host, client.device_id.clone()));
        held.push(start(client, i, client_events.clone(), false));
    }
    let mut connected = 0;
    while connected < pairs {
        if matches!(client_receiver.recv().await.expect("clients run").event, Event::Connected { .. }) {
            connected += 1;
        }
    }
    // A message to a client the host's copy does not yet know as online is refused and resent
    // only at the next keepalive: start once the host's copy sees every client.
    let series =
        if at.0 == at.1 { "agents_control_connections{kind=\"client\"}" } else { "agents_control_remote_devices" };
    wait_until("the hosts' copy to see every client", Duration::from_secs(30), || async {
        (copies[at.0].metrics().await.value(series) >= Some(pairs as f64)).then_some(())
    })
    .await
    .unwrap();
    for (i, (host, client_id)) in hosts.into_iter().enumerate() {
        let (host_events, host_receiver) = mpsc::unbounded_channel();
        let running = start(host, i, host_events, false);
        tokio::spawn(stream(running.commands.clone(), host_receiver, client_id, window));
        held.push(running);
    }
    let counter = delivered.clone();
    let counting = tokio::spawn(async move {
        while let Some(tagged) = client_receiver.recv().await {
            if matches!(tagged.event, Event::Message { .. }) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tokio::time::sleep(WARMUP).await;
    let before = delivered.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let count = delivered.load(Ordering::Relaxed) - before;
    let rate = count as f64 / started.elapsed().as_secs_f64();
    drop(held);
    counting.abort();
    rate
}

pub async fn run(pairs: usize, window: u64, seconds: u64) -> Vec<Row> {
    let (_dir, store, url) = file_store();
    let copies = three_copies(&copy_env(&url, "http://127.0.0.1:1", vec![])).await;
    let mut rows = Vec::new();
    for (place, at) in [("same copy", (0, 0)), ("different copies", (0, 1))] {
        let rate = scenario(store.as_ref(), &copies, at, pairs, window, seconds).await;
        rows.push(Row::new(
            format!("relay throughput, {place} ({pairs} host->client pairs, window {window}, {seconds} s)"),
            format!("{rate:.0} messages/s"),
            "",
        ));
    }
    rows
}
