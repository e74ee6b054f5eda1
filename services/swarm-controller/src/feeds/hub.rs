//! One live feed per watched subject: an ordered push consumer on `RELAY` delivering only new
//! messages, fanned out to every watcher through a bounded broadcast channel. The feed starts
//! with the first watcher and stops (its consumer with it) when the last one leaves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures::StreamExt;
use hyperhive_nats_objects::RELAY_STREAM;
use tokio::sync::{Mutex, broadcast, watch};
use tokio::task::AbortHandle;

/// Events a feed holds for its slowest watcher; one further behind is dropped.
pub const FEED_BUFFER: usize = 1024;

/// One message of the stream.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its stream sequence.
    pub seq: u64,
    /// Its payload.
    pub payload: Bytes,
}

/// A live subject: watchers hold it, and it ends its consumer when the last one drops it.
#[derive(Debug)]
pub struct Feed {
    events: broadcast::Sender<Event>,
    task: AbortHandle,
    metrics: Arc<FeedMetrics>,
}

impl Feed {
    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.task.abort();
        self.metrics.feeds.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counters for `GET /metrics`.
#[derive(Debug, Default)]
pub struct FeedMetrics {
    /// Watchers connected now.
    pub watchers: AtomicU64,
    /// Watchers dropped for not keeping up.
    pub dropped: AtomicU64,
    /// Live feeds (one NATS consumer each).
    pub feeds: AtomicU64,
}

impl FeedMetrics {
    /// Appends the counters in Prometheus text.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let lines = [
            (
                "swarm_feed_watchers",
                "gauge",
                "SSE watchers of terminals and turn headers connected now",
                &self.watchers,
            ),
            ("swarm_feeds_live", "gauge", "live terminal feeds, one NATS consumer each", &self.feeds),
            ("swarm_feed_dropped_total", "counter", "SSE watchers dropped for not keeping up", &self.dropped),
        ];
        for (name, kind, help, value) in lines {
            let _ =
                writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", value.load(Ordering::Relaxed));
        }
    }
}

/// The feeds of every watched subject.
#[derive(Debug)]
pub struct FeedHub {
    pub(crate) js: jetstream::Context,
    feeds: Mutex<HashMap<String, Weak<Feed>>>,
    /// What `GET /metrics` shows.
    pub metrics: Arc<FeedMetrics>,
    /// Raised when the controller stops: every watcher ends, so the server can drain.
    closing: watch::Sender<bool>,
}

impl FeedHub {
    /// Over the controller's JetStream context.
    pub fn new(js: jetstream::Context) -> Self {
        Self { js, feeds: Mutex::default(), metrics: Arc::default(), closing: watch::Sender::new(false) }
    }

    /// Ends every watcher (their connections finish); the controller is stopping.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once [`FeedHub::close`] was called.
    pub(crate) fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut closing = self.closing.subscribe();
        async move {
            let _ = closing.wait_for(|closed| *closed).await;
        }
    }

    /// The live feed of `subject`, started if nobody watches it yet. Once this returns, every
    /// message published later reaches the feed's receivers.
    ///
    /// # Errors
    /// The stream or its consumer could not be opened.
    pub async fn feed(&self, subject: &str) -> Result<Arc<Feed>, String> {
        let mut feeds = self.feeds.lock().await;
        if let Some(feed) = feeds.get(subject).and_then(Weak::upgrade) {
            return Ok(feed);
        }
        let stream =
            self.js.get_stream_no_info(RELAY_STREAM).await.map_err(|e| format!("opening {RELAY_STREAM}: {e}"))?;
        let consumer = stream
            .create_consumer(consumer::push::OrderedConfig {
                deliver_subject: self.js.client().new_inbox(),
                filter_subject: subject.to_owned(),
                deliver_policy: consumer::DeliverPolicy::New,
                ..Default::default()
            })
            .await
            .map_err(|e| format!("following {subject}: {e}"))?;
        let mut messages = consumer.messages().await.map_err(|e| format!("following {subject}: {e}"))?;
        let (events, _) = broadcast::channel(FEED_BUFFER);
        let sender = events.clone();
        let name = subject.to_owned();
        let task = tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                match message {
                    Ok(message) => {
                        let Ok(info) = message.info() else { continue };
                        let event = Event { seq: info.stream_sequence, payload: message.payload.clone() };
                        // No receiver is fine: the last watcher is leaving and drops the feed.
                        let _ = sender.send(event);
                    }
                    // The ordered consumer recreates itself after a gap or a reconnect; an error
                    // here is one it could not recover from.
                    Err(e) => tracing::warn!(subject = %name, "relay feed error: {e}"),
                }
            }
        })
        .abort_handle();
        self.metrics.feeds.fetch_add(1, Ordering::Relaxed);
        let feed = Arc::new(Feed { events, task, metrics: self.metrics.clone() });
        feeds.retain(|_, weak| weak.strong_count() > 0);
        feeds.insert(subject.to_owned(), Arc::downgrade(&feed));
        Ok(feed)
    }
}
