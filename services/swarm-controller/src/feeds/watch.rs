//! One watcher of one agent's relay: history by direct get, then the live feed.
//!
//! Order matters, so that nothing is missed or repeated: the feed is joined first (from then on
//! every new message reaches this watcher), then the stream's last sequence for the subject is
//! read, the history up to it is sent, and live events at or below it are skipped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::stream::{DirectGetErrorKind, Stream};
use hyperhive_nats_objects::RELAY_STREAM;
use tokio::sync::{broadcast, mpsc};

use super::frame::{FeedKind, Frame};
use super::hub::{Feed, FeedHub};

/// Frames waiting for one watcher's connection.
const WATCHER_QUEUE: usize = 64;

/// A frame in a watcher's queue. Boxed: the queue's room comes in blocks of 32 slots that it keeps
/// while the watcher lives, 256 bytes of pointers rather than 1.5 KiB of frames each.
pub type Queued = Box<Frame>;
/// How long a watcher may leave a frame untaken before it is dropped as stalled.
pub const STALL: Duration = Duration::from_secs(5);

/// Where a watcher starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// After this event id (`Last-Event-ID`): exactly the events it has not seen.
    After(u64),
    /// A new watcher: the history the stream keeps (a terminal) or the current header (a turn).
    Fresh,
}

impl FeedHub {
    /// Starts a watcher of `agent`'s `kind`: the returned channel yields its frames and closes
    /// when the watcher is dropped for being too slow or the controller stops.
    ///
    /// # Errors
    /// The stream could not be read.
    pub async fn watch(
        self: &Arc<Self>,
        kind: FeedKind,
        agent: &str,
        start: Start,
    ) -> Result<mpsc::Receiver<Queued>, String> {
        let subject = kind.subject(agent);
        let feed = self.feed(&subject).await?;
        let live = feed.subscribe();
        let stream =
            self.js.get_stream_no_info(RELAY_STREAM).await.map_err(|e| format!("opening {RELAY_STREAM}: {e}"))?;
        let last = match stream.direct_get_last_for_subject(subject.clone()).await {
            Ok(message) => message.sequence,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => 0,
            Err(e) => return Err(format!("reading {subject}: {e}")),
        };
        let first = match (start, kind) {
            (Start::After(id), _) => id.saturating_add(1),
            (Start::Fresh, FeedKind::Terminal) => 1,
            (Start::Fresh, FeedKind::Turn) => last.max(1),
        };
        let (frames, receiver) = mpsc::channel(WATCHER_QUEUE);
        let watcher = Watcher { kind, subject, frames, hub: self.clone(), _feed: feed };
        tokio::spawn(watcher.run(live, stream, first, last, start));
        Ok(receiver)
    }
}

/// Why a watcher stopped.
enum Stop {
    /// Its connection closed (or the feed ended).
    Left,
    /// It could not keep up.
    Dropped(String),
}

struct Watcher {
    kind: FeedKind,
    subject: String,
    frames: mpsc::Sender<Queued>,
    hub: Arc<FeedHub>,
    /// Held so the feed lives while this watcher does.
    _feed: Arc<Feed>,
}

impl Watcher {
    /// Relays until the watcher leaves, falls behind or the controller stops; `stream` reads the
    /// history and goes with it.
    async fn run(
        self,
        mut live: broadcast::Receiver<super::hub::Event>,
        stream: Stream<()>,
        first: u64,
        last: u64,
        start: Start,
    ) {
        let metrics = self.hub.metrics.clone();
        metrics.watchers.fetch_add(1, Ordering::Relaxed);
        let closed = self.hub.closed();
        let stop = tokio::select! {
            outcome = self.relay_until_stopped(&mut live, stream, first, last, start) => outcome.err().unwrap_or(Stop::Left),
            () = closed => Stop::Left,
        };
        metrics.watchers.fetch_sub(1, Ordering::Relaxed);
        let Stop::Dropped(why) = stop else { return };
        metrics.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::info!(subject = %self.subject, "relay watcher dropped: {why}; it resumes with Last-Event-ID");
    }

    async fn relay_until_stopped(
        &self,
        live: &mut broadcast::Receiver<super::hub::Event>,
        stream: Stream<()>,
        first: u64,
        last: u64,
        start: Start,
    ) -> Result<(), Stop> {
        // Boxed: its direct gets make the largest state of this task, which would otherwise
        // keep that size for as long as the watcher waits for live output; the stream's handle
        // (a NATS client's sender) goes with it.
        let sent = Box::pin(self.send_history(stream, first, last, start)).await?;
        self.relay_live(live, sent).await
    }

    /// Sends the history from `first` up to `last`; returns the last sequence accounted for.
    async fn send_history(&self, stream: Stream<()>, first: u64, last: u64, start: Start) -> Result<u64, Stop> {
        let mut sent = first.saturating_sub(1);
        let mut next = first;
        let mut gap_checked = !matches!(start, Start::After(_));
        while next <= last {
            let message = match stream.direct_get_next_for_subject(self.subject.clone(), Some(next)).await {
                Ok(message) => message,
                Err(e) if e.kind() == DirectGetErrorKind::NotFound => break,
                Err(e) => return Err(Stop::Dropped(format!("reading the history: {e}"))),
            };
            if !gap_checked && message.sequence > first {
                self.send(Frame::Gap { from: first, to: message.sequence - 1 }).await?;
            }
            gap_checked = true;
            if message.sequence > last {
                break;
            }
            if let Some(frame) = Frame::message(self.kind, message.sequence, &message.payload) {
                self.send(frame).await?;
            }
            sent = message.sequence;
            next = message.sequence + 1;
        }
        Ok(sent.max(last))
    }

    /// Sends the live events after `sent` until the watcher leaves or falls behind.
    async fn relay_live(&self, live: &mut broadcast::Receiver<super::hub::Event>, mut sent: u64) -> Result<(), Stop> {
        loop {
            let received = tokio::select! {
                received = live.recv() => received,
                () = self.frames.closed() => return Err(Stop::Left),
            };
            match received {
                Ok(event) if event.seq <= sent => {}
                Ok(event) => {
                    if let Some(frame) = Frame::message(self.kind, event.seq, &event.payload) {
                        self.send(frame).await?;
                    }
                    sent = event.seq;
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    return Err(Stop::Dropped(format!("{missed} events behind the live feed")));
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            }
        }
    }

    async fn send(&self, frame: Frame) -> Result<(), Stop> {
        match self.frames.send_timeout(Box::new(frame), STALL).await {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                Err(Stop::Dropped(format!("took no event for {STALL:?}")))
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(Stop::Left),
        }
    }
}
