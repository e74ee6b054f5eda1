//! Relay latency of small messages: a client sends to a host, the host acks. Measured are the
//! one-way time (`send` written -> `message` read at the host) and the round trip (`send` ->
//! `message` -> `ack` -> `acked` read at the client), with host and client on the same copy and
//! on different copies, against one round trip to a plain WebSocket echo server (the same
//! payload, the same WebSocket configuration) measured in the same run. One message at a time.

use super::{Row, file_store};
use crate::support::cluster::{copy_env, three_copies};
use crate::support::devices::pair;
use crate::support::echo;
use crate::support::raw_link::RawLink;
use crate::support::stats::{micros, percentile};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::LinkFrame;
use serde_json::json;
use std::time::{Duration, Instant};

const EPOCH: u64 = 7;

struct Samples {
    one_way: Vec<Duration>,
    round_trip: Vec<Duration>,
}

fn send(to: &str, seq: u64) -> LinkFrame {
    LinkFrame::Send { to: to.into(), epoch: EPOCH, seq, first_unacked: seq, body: json!({"n": seq}).into() }
}

/// The first message, sent again until the client's copy knows the host is online (across
/// copies that takes the peer's word).
async fn first_delivery(client: &mut RawLink, host: &mut RawLink, host_id: &str) {
    loop {
        client.send(&send(host_id, 1)).await;
        match tokio::time::timeout(Duration::from_millis(500), host.next()).await {
            Ok(LinkFrame::Message { seq: 1, .. }) => return,
            Ok(other) => panic!("the host got {other:?} before the first message"),
            Err(_) => continue,
        }
    }
}

async fn sample(
    client: &mut RawLink,
    client_id: &str,
    host: &mut RawLink,
    host_id: &str,
    seq: u64,
) -> (Duration, Duration) {
    let started = Instant::now();
    client.send(&send(host_id, seq)).await;
    let one_way = loop {
        if let LinkFrame::Message { seq: got, .. } = host.next().await
            && got == seq
        {
            break started.elapsed();
        }
    };
    host.send(&LinkFrame::Ack { to: client_id.into(), epoch: EPOCH, seq }).await;
    loop {
        if let LinkFrame::Acked { seq: got, .. } = client.next().await
            && got == seq
        {
            return (one_way, started.elapsed());
        }
    }
}

async fn measure(
    client: &mut RawLink,
    client_id: &str,
    host: &mut RawLink,
    host_id: &str,
    warmup: usize,
    n: usize,
) -> Samples {
    first_delivery(client, host, host_id).await;
    host.send(&LinkFrame::Ack { to: client_id.into(), epoch: EPOCH, seq: 1 }).await;
    let mut samples = Samples { one_way: Vec::with_capacity(n), round_trip: Vec::with_capacity(n) };
    for i in 0..warmup + n {
        let (one_way, round_trip) = sample(client, client_id, host, host_id, i as u64 + 2).await;
        if i >= warmup {
            samples.one_way.push(one_way);
            samples.round_trip.push(round_trip);
        }
    }
    samples
}

pub async fn run(n: usize) -> Vec<Row> {
    let warmup = (n / 10).max(100);
    let (_dir, store, url) = file_store();
    let copies = three_copies(&copy_env(&url, "http://127.0.0.1:1", vec![])).await;
    let host = pair(store.as_ref(), &copies[0].url(), DeviceKind::Host, "host").await;
    let near = pair(store.as_ref(), &copies[0].url(), DeviceKind::Client, "near").await;
    let far = pair(store.as_ref(), &copies[1].url(), DeviceKind::Client, "far").await;

    let mut host_link = RawLink::connect(copies[0].addr, &host).await;
    let mut near_link = RawLink::connect(copies[0].addr, &near).await;
    let same = measure(&mut near_link, &near.device_id, &mut host_link, &host.device_id, warmup, n).await;
    let mut far_link = RawLink::connect(copies[1].addr, &far).await;
    let apart = measure(&mut far_link, &far.device_id, &mut host_link, &host.device_id, warmup, n).await;

    let payload = send(&host.device_id, 1_000_000).encode();
    let echo_addr = echo::start();
    let echo = echo::round_trips(echo_addr, &payload, warmup, n).await;
    let (echo_p50, echo_p99) = (percentile(&echo, 50.0), percentile(&echo, 99.0));

    let mut rows = vec![Row::new(
        format!("echo baseline: one WebSocket round trip ({} B text, n={n})", payload.len()),
        format!("p50 {:.0} µs, p99 {:.0} µs", micros(echo_p50), micros(echo_p99)),
        "baseline",
    )];
    for (place, samples) in [("same copy", &same), ("different copies", &apart)] {
        for (what, list) in
            [("send -> message", &samples.one_way), ("send -> message -> ack -> acked", &samples.round_trip)]
        {
            let (p50, p99) = (percentile(list, 50.0), percentile(list, 99.0));
            rows.push(Row::new(
                format!("relay latency, {place}: {what} (n={n})"),
                format!(
                    "p50 {:.0} µs ({:.2}x echo), p99 {:.0} µs ({:.2}x echo)",
                    micros(p50),
                    p50.as_secs_f64() / echo_p50.as_secs_f64(),
                    micros(p99),
                    p99.as_secs_f64() / echo_p99.as_secs_f64()
                ),
                "",
            ));
        }
    }
    rows
}
