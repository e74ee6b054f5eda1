//! Failover: `n` devices on copy A behind Caddy (round robin over the three copies, active
//! health checks on `/readyz`, failed dials retried for `lb_try_duration`), copy A killed with
//! SIGKILL while `streams` senders on A stream numbered messages to receivers pinned to copy C.
//! Reported: for every device that was on A, the time from the kill to its next `connected`
//! (p50, p99, max), and the messages the receivers' applications never got (and got twice).
//!
//! All devices land on A because only A runs when they connect (Caddy finds B and C down);
//! B and C start after, link to A, and the receivers connect to C directly.
//! Half the senders are hosts (to clients), half clients (to hosts); the other devices on A are
//! idle clients (hosts would make every client's presence list long; see the memory check).

use super::{Row, file_store};
use crate::support::cluster::{Copy, copy_env, free_address, start_copy, wait_peers};
use crate::support::devices::{Running, Tagged, pair_many, start};
use crate::support::stats::{millis, percentile};
use hyperhive_control_link::connect::{Command, Event};
use hyperhive_control_proto::DeviceKind;
use hyperhive_testkit::{Caddy, free_port};
use serde_json::json;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long senders stream before the kill, and the pace of each stream.
const BEFORE_KILL: Duration = Duration::from_secs(3);
const PACE: Duration = Duration::from_millis(10);
const WITHIN: Duration = Duration::from_secs(120);
/// Caddy checks health every 300 ms: a copy that came up is in rotation after a few checks.
const HEALTHY_AFTER: Duration = Duration::from_secs(2);

fn caddy_site(port: u16, upstreams: &[SocketAddr]) -> String {
    let to = upstreams.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
    format!(
        "http://127.0.0.1:{port} {{
\treverse_proxy {to} {{
\t\tlb_policy round_robin
\t\tlb_try_duration 2s
\t\tlb_try_interval 100ms
\t\thealth_uri /readyz
\t\thealth_interval 300ms
\t\thealth_timeout 1s
\t}}
}}"
    )
}

/// Sends `{"n": 1..=len}` to `to` at [`PACE`].
async fn stream(commands: mpsc::Sender<Command>, to: String, len: u64) {
    let mut ticks = tokio::time::interval(PACE);
    for n in 1..=len {
        ticks.tick().await;
        if commands.send(Command::Send { to: to.clone(), body: json!({"n": n}).into() }).await.is_err() {
            return;
        }
    }
}

/// Waits for `count` connected events, handing every other event to `other`.
async fn wait_connected(receiver: &mut mpsc::UnboundedReceiver<Tagged>, count: usize, mut other: impl FnMut(Tagged)) {
    let deadline = tokio::time::Instant::now() + WITHIN;
    let mut connected = 0;
    while connected < count {
        let Ok(Some(tagged)) = tokio::time::timeout_at(deadline, receiver.recv()).await else {
            panic!("{connected} of {count} devices connected within {WITHIN:?}");
        };
        if matches!(tagged.event, Event::Connected { .. }) {
            connected += 1;
        } else {
            other(tagged);
        }
    }
}

pub async fn run(n: usize, streams: usize, len: u64) -> Vec<Row> {
    assert!(streams <= n && streams.is_multiple_of(2), "streams must be even and at most the devices");
    let (_dir, store, url) = file_store();
    let addrs = [free_address(), free_address(), free_address()];
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let env = copy_env(&url, &public, vec![]);

    // Devices 0..n are on A: idle clients, then the senders; n.. are the receivers on C.
    let idle = n - streams;
    let half = streams / 2;
    let mut on_a = pair_many(store.as_ref(), &public, DeviceKind::Client, "idle", idle).await;
    on_a.extend(pair_many(store.as_ref(), &public, DeviceKind::Host, "sending-host", half).await);
    on_a.extend(pair_many(store.as_ref(), &public, DeviceKind::Client, "sending-client", half).await);
    let mut on_c = pair_many(store.as_ref(), &public, DeviceKind::Client, "receiving-client", half).await;
    on_c.extend(pair_many(store.as_ref(), &public, DeviceKind::Host, "receiving-host", half).await);

    let mut copies: Vec<Copy> = vec![start_copy(&env, addrs[0], "copyA").await];
    let _caddy = Caddy::start(&caddy_site(port, &addrs), &[port]).await.expect("Caddy starts");
    let (events, mut receiver) = mpsc::unbounded_channel();
    let mut held: Vec<Running> = Vec::new();
    for (i, identity) in on_a.iter().cloned().enumerate() {
        held.push(start(identity, i, events.clone(), false));
        if i % 500 == 499 {
            wait_connected(&mut receiver, 500, |_| {}).await;
        }
    }
    wait_connected(&mut receiver, n % 500, |_| {}).await;
    let on_copy_a = copies[0].metrics().await.connections();

    copies.push(start_copy(&env, addrs[1], "copyB").await);
    copies.push(start_copy(&env, addrs[2], "copyC").await);
    wait_peers(&copies, 2).await;
    for (j, mut identity) in on_c.iter().cloned().enumerate() {
        identity.control_url = copies[2].url();
        held.push(start(identity, n + j, events.clone(), false));
    }
    wait_connected(&mut receiver, streams, |_| {}).await;
    // The senders' copy must know the receivers are online, or the first sends wait for a resend.
    hyperhive_testkit::wait_until("copy A to see the receivers", WITHIN, || async {
        (copies[0].metrics().await.value("agents_control_remote_devices") >= Some(streams as f64)).then_some(())
    })
    .await
    .unwrap();
    tokio::time::sleep(HEALTHY_AFTER).await;

    for s in 0..streams {
        let commands = held[idle + s].commands.clone();
        tokio::spawn(stream(commands, on_c[s].device_id.clone(), len));
    }
    // Per receiver: how often each n arrived.
    let mut received: Vec<HashMap<u64, u32>> = vec![HashMap::new(); streams];
    let mut reconnected: HashMap<usize, Instant> = HashMap::new();
    let mut landed: HashMap<String, usize> = HashMap::new();
    let note = |tagged: Tagged, received: &mut Vec<HashMap<u64, u32>>| {
        if let (Event::Message { body, .. }, Some(r)) = (&tagged.event, tagged.device.checked_sub(n)) {
            let body: serde_json::Value = serde_json::from_str(body.get()).expect("a JSON body");
            *received[r].entry(body["n"].as_u64().expect("a numbered message")).or_default() += 1;
        }
    };
    let kill_at = tokio::time::Instant::now() + BEFORE_KILL;
    while let Ok(Some(tagged)) = tokio::time::timeout_at(kill_at, receiver.recv()).await {
        note(tagged, &mut received);
    }
    copies[0].kill();
    let killed = Instant::now();

    let deadline = tokio::time::Instant::now() + WITHIN;
    let complete = |received: &Vec<HashMap<u64, u32>>| received.iter().all(|r| r.len() as u64 == len);
    while reconnected.len() < n || !complete(&received) {
        let Ok(Some(tagged)) = tokio::time::timeout_at(deadline, receiver.recv()).await else { break };
        if let Event::Connected { copy, .. } = &tagged.event
            && tagged.device < n
            && tagged.at >= killed
            && !reconnected.contains_key(&tagged.device)
        {
            reconnected.insert(tagged.device, tagged.at);
            *landed.entry(copy.clone()).or_default() += 1;
        }
        note(tagged, &mut received);
    }
    let took: Vec<Duration> = reconnected.values().map(|at| *at - killed).collect();
    let got: u64 = received.iter().map(|r| r.len() as u64).sum();
    let twice: u64 = received.iter().flat_map(|r| r.values()).map(|&k| u64::from(k.saturating_sub(1))).sum();
    let lost = streams as u64 * len - got;
    vec![
        Row::new(
            format!(
                "failover: {n} devices on copy A ({on_copy_a} counted by A), A killed (SIGKILL); Caddy round robin"
            ),
            format!(
                "{} of {n} back: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (on {} copies: {:?})",
                reconnected.len(),
                millis(percentile(&took, 50.0)),
                millis(percentile(&took, 99.0)),
                millis(percentile(&took, 100.0)),
                landed.len(),
                landed.values().collect::<Vec<_>>()
            ),
            "p99 <= 2 s",
        ),
        Row::new(
            format!(
                "failover: messages lost ({streams} streams of {len}, one per {} ms, through the kill)",
                PACE.as_millis()
            ),
            format!("{lost} lost, {twice} delivered twice, of {}", streams as u64 * len),
            "0 lost",
        ),
    ]
}
