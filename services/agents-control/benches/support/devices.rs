//! Paired devices and the full client library holding their links.
//!
//! Pairing goes straight through the store, as a copy serving `/v1/pair` does (make the code,
//! redeem it), so thousands of devices pair without thousands of HTTP round trips. Each running
//! device is `connect::run` (reconnect, backoff, outbox, inbox) with a task forwarding its
//! events, tagged with the device's index and the moment they came, to one channel.
//! [`start`] must be called inside the bench's `LocalSet`.

use crate::support::cluster::SEED;
use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::key::ControlKey;
use agents_control::pairing;
use futures::StreamExt;
use hyperhive_control_link::connect::{self, Command, Event};
use hyperhive_control_link::{DeviceName, Identity, start_pairing};
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::Store;
use std::time::Instant;
use tokio::sync::mpsc;

/// Pairs one device whose codes name `control_url`.
pub async fn pair(store: &dyn Store, control_url: &str, kind: DeviceKind, name: &str) -> Identity {
    let key = ControlKey::from_seed(SEED);
    let issuer = Issuer { key: key.clone(), control_url: control_url.to_owned(), pin: None };
    let request = CodeRequest { kind, name: None, role: None, ttl: codes::DEFAULT_TTL, made_by: "bench".into() };
    let code = codes::make_code(store, &SystemClock, &issuer, &request).await.expect("the store takes the code");
    let (request, pending) =
        start_pairing(&code.to_token(), DeviceName::Chosen(name), &mut rand::rng()).expect("a well-formed code");
    let response = pairing::redeem(store, &SystemClock, &key, &request).await.expect("the code redeems").response;
    pending.finish(&response).expect("the answer is signed by the control key")
}

/// Pairs `n` devices of `kind` named `PREFIX-I`, several at a time.
pub async fn pair_many(
    store: &dyn Store,
    control_url: &str,
    kind: DeviceKind,
    prefix: &str,
    n: usize,
) -> Vec<Identity> {
    futures::stream::iter(0..n)
        .map(|i| async move { pair(store, control_url, kind, &format!("{prefix}-{i}")).await })
        .buffered(32)
        .collect()
        .await
}

/// An event of device `device`, and when this process saw it.
pub struct Tagged {
    pub device: usize,
    pub at: Instant,
    pub event: Event,
}

/// A device holding its link with `connect::run`.
pub struct Running {
    pub commands: mpsc::Sender<Command>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts `identity`'s link; its events go to `events` tagged with `device`. Presence events
/// are dropped here unless `presence` (clients get one per host change, which no measurement
/// here needs).
pub fn start(identity: Identity, device: usize, events: mpsc::UnboundedSender<Tagged>, presence: bool) -> Running {
    let (commands, command_receiver) = mpsc::channel(1024);
    let (event_sender, mut event_receiver) = mpsc::channel(1024);
    // connect::run holds a ThreadRng across awaits, so it is not Send: it runs on the LocalSet
    // the bench's main thread drives.
    let link = tokio::task::spawn_local(async move {
        let _ = connect::run(&identity, command_receiver, event_sender).await;
    });
    let forward = tokio::spawn(async move {
        while let Some(event) = event_receiver.recv().await {
            if !presence && matches!(event, Event::Presence { .. }) {
                continue;
            }
            if events.send(Tagged { device, at: Instant::now(), event }).is_err() {
                return;
            }
        }
    });
    Running { commands, tasks: [link, forward] }
}

pub fn is_connected(event: &Event) -> bool {
    matches!(event, Event::Connected { .. })
}
