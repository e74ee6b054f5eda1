//! Messages to clients, with a window per client.
//!
//! The link keeps every message until its client acks it, so a client that stops reading (its
//! laptop closed mid-stream) would make the controller hold everything a terminal printed since.
//! Each client may have at most [`WINDOW`] messages unacked; a sender waits for room, and gives
//! up after its own patience (a stream's is short: the client resumes by event id later).
//!
//! The link numbers each client's messages 1, 2, 3... in the order they are pushed, and acks say
//! "everything up to n": so counting what is pushed per client and taking the highest ack is
//! the unacked count. A push is never refused here: every message is under the link's size cap
//! ([`super::frames::PIECE_BYTES`]) and [`WINDOW`] is far below its per-stream limit.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hyperhive_control_link::connect::Command;
use hyperhive_control_proto::link::Body;
use tokio::sync::{mpsc, watch};

use super::frames::FromController;

/// Unacked messages per client: 64 pieces of 32 KiB, about 2.8 MiB of base64.
pub const WINDOW: u64 = 64;

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotSent {
    #[error("the client acked nothing for {0:?} with {WINDOW} messages waiting")]
    NoRoom(Duration),
    #[error("the control link has stopped")]
    LinkStopped,
}

#[derive(Debug)]
struct Window {
    pushed: u64,
    acked: watch::Sender<u64>,
}

/// The sending side of the link, shared by every request's task.
#[derive(Debug)]
pub struct Outgoing {
    commands: mpsc::Sender<Command>,
    windows: Mutex<HashMap<String, Window>>,
}

impl Outgoing {
    pub fn new(commands: mpsc::Sender<Command>) -> Self {
        Self { commands, windows: Mutex::new(HashMap::new()) }
    }

    /// Sends `frame` to `client` once its window has room, waiting at most `patience`.
    ///
    /// # Errors
    /// [`NotSent`] when the window stayed full or the link is gone.
    pub async fn send(&self, client: &str, frame: &FromController, patience: Duration) -> Result<(), NotSent> {
        let mut acked = self.reserve_or_watch(client);
        let deadline = tokio::time::Instant::now() + patience;
        while let Some(rx) = acked {
            let mut rx = rx;
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => acked = self.reserve_or_watch(client),
                Ok(Err(_)) => return Err(NotSent::LinkStopped),
                Err(_) => return Err(NotSent::NoRoom(patience)),
            }
        }
        let text = serde_json::to_string(frame).expect("frames serialize");
        let body = Body::parse(&text).expect("serde_json writes JSON");
        self.commands.send(Command::Send { to: client.to_owned(), body }).await.map_err(|_| NotSent::LinkStopped)
    }

    /// Takes a place in the window (`None`), or returns a receiver that changes at the next ack.
    fn reserve_or_watch(&self, client: &str) -> Option<watch::Receiver<u64>> {
        let mut windows = self.windows.lock().expect("never poisoned: no panics under the lock");
        let window =
            windows.entry(client.to_owned()).or_insert_with(|| Window { pushed: 0, acked: watch::channel(0).0 });
        let acked = *window.acked.borrow();
        if window.pushed.saturating_sub(acked) < WINDOW {
            window.pushed += 1;
            None
        } else {
            let mut rx = window.acked.subscribe();
            rx.mark_unchanged();
            Some(rx)
        }
    }

    /// The link's `acked` event: `client` has everything up to `seq`.
    pub fn acked(&self, client: &str, seq: u64) {
        let windows = self.windows.lock().expect("never poisoned: no panics under the lock");
        if let Some(window) = windows.get(client) {
            window.acked.send_if_modified(|acked| {
                let advanced = seq > *acked;
                *acked = (*acked).max(seq);
                advanced
            });
        }
    }

    /// Messages pushed to `client` and not yet acked.
    pub fn unacked(&self, client: &str) -> u64 {
        let windows = self.windows.lock().expect("never poisoned: no panics under the lock");
        windows.get(client).map_or(0, |w| w.pushed.saturating_sub(*w.acked.borrow()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> FromController {
        FromController::Refused { error: "x".into() }
    }

    #[tokio::test]
    async fn a_full_window_waits_for_an_ack_and_gives_up_after_its_patience() {
        let (tx, mut rx) = mpsc::channel(1024);
        let out = std::sync::Arc::new(Outgoing::new(tx));
        for _ in 0..WINDOW {
            out.send("c1", &frame(), Duration::ZERO).await.unwrap();
        }
        assert_eq!(out.unacked("c1"), WINDOW);
        let err = out.send("c1", &frame(), Duration::from_millis(20)).await.unwrap_err();
        assert_eq!(err, NotSent::NoRoom(Duration::from_millis(20)));
        out.send("c2", &frame(), Duration::ZERO).await.expect("other clients have their own window");

        let waiting = tokio::spawn({
            let out = out.clone();
            async move { out.send("c1", &frame(), Duration::from_secs(30)).await }
        });
        out.acked("c1", 1);
        waiting.await.unwrap().expect("an ack makes room");
        assert_eq!(out.unacked("c1"), WINDOW);
        out.acked("c1", 0); // an older ack changes nothing
        assert_eq!(out.unacked("c1"), WINDOW);
        assert_eq!(std::iter::from_fn(|| rx.try_recv().ok()).count() as u64, WINDOW + 2);
        drop(rx);
        out.acked("c1", WINDOW + 1);
        assert_eq!(out.send("c1", &frame(), Duration::ZERO).await, Err(NotSent::LinkStopped));
    }
}
