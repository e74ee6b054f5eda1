//! The feed: the turn command's output on `term.<agent>` and the turn header on
//! `turn.<agent>`, for whoever watches the agent (the controller's SSE routes).
//!
//! Nothing here may slow a turn down. The turn's readers hand chunks to a bounded queue with
//! `try_send` and never wait; one task publishes from it. While NATS is slow or away the queue
//! fills and further chunks are dropped (counted, and said once per turn in the log): the
//! terminal is a view, and the turn's own output still reaches the agent's log in full.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hyperhive_daemon::tasks::Tasks;
use hyperhive_hive_proto::feed::TurnHeader;
use hyperhive_nats_objects::limits::TERM_CHUNK_MAX;
use hyperhive_nats_objects::{agent_terminal_subject, agent_turn_subject};
use hyperhive_schedule::AgentName;
use tokio::sync::mpsc;

/// Chunks and headers waiting to be published: about 4 MiB of output at most.
const QUEUE: usize = 256;

enum Outgoing {
    Term(Bytes),
    Turn(Bytes),
}

/// Where the turn's output and headers go. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Feed {
    queue: mpsc::Sender<Outgoing>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outgoing::Term(b) => write!(f, "term ({} bytes)", b.len()),
            Outgoing::Turn(b) => write!(f, "turn ({} bytes)", b.len()),
        }
    }
}

impl Feed {
    /// Starts the publishing task (on `tasks`) on `client`.
    pub fn start(client: async_nats::Client, agent: &AgentName, tasks: &Tasks) -> Feed {
        let (queue, mut outgoing) = mpsc::channel(QUEUE);
        let (term, turn) = (agent_terminal_subject(agent), agent_turn_subject(agent));
        tasks.spawn(async move {
            while let Some(message) = outgoing.recv().await {
                let (subject, payload) = match message {
                    Outgoing::Term(chunk) => (term.clone(), chunk),
                    Outgoing::Turn(header) => (turn.clone(), header),
                };
                // Core publish: the stream stores it; no ack is awaited, so a slow server only
                // fills the queue above.
                if let Err(e) = client.publish(subject, payload).await {
                    tracing::debug!("feed publish failed: {e}");
                }
            }
        });
        Feed { queue, dropped: Arc::default() }
    }

    /// A feed that publishes nothing (tests of the turn alone).
    #[cfg(test)]
    pub(crate) fn disabled() -> Feed {
        let (queue, _) = mpsc::channel(1);
        Feed { queue, dropped: Arc::default() }
    }

    /// Queues output of the running turn, split into chunks of at most [`TERM_CHUNK_MAX`].
    pub fn terminal(&self, bytes: &[u8]) {
        for chunk in bytes.chunks(TERM_CHUNK_MAX) {
            self.offer(Outgoing::Term(Bytes::copy_from_slice(chunk)));
        }
    }

    /// Queues a turn header.
    pub fn turn(&self, header: &TurnHeader) {
        self.offer(Outgoing::Turn(Bytes::from(serde_json::to_vec(header).expect("a header serializes"))));
    }

    /// A feed whose queue the caller reads: `(true, chunk)` for terminal output, `(false,
    /// header JSON)` for a turn header (tests).
    #[cfg(test)]
    pub(crate) fn capture() -> (Feed, mpsc::Receiver<(bool, Bytes)>) {
        let (queue, mut outgoing) = mpsc::channel::<Outgoing>(QUEUE);
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(async move {
            while let Some(message) = outgoing.recv().await {
                let item = match message {
                    Outgoing::Term(b) => (true, b),
                    Outgoing::Turn(b) => (false, b),
                };
                if tx.send(item).await.is_err() {
                    return;
                }
            }
        });
        (Feed { queue, dropped: Arc::default() }, rx)
    }

    /// Chunks dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn offer(&self, message: Outgoing) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(message) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Cuts a byte stream into chunks that never split a UTF-8 sequence: an incomplete sequence at
/// the end of a read waits (at most 3 bytes) for the next read. Bytes that are not UTF-8 at all
/// pass through as they are, so nothing is lost either way.
#[derive(Debug, Default)]
pub struct Utf8Chunker {
    carry: Vec<u8>,
}

impl Utf8Chunker {
    /// The bytes of `read` (after what was carried) that can go out now.
    pub fn push(&mut self, read: &[u8]) -> Vec<u8> {
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(read);
        let keep = incomplete_tail(&bytes);
        self.carry = bytes.split_off(bytes.len() - keep);
        bytes
    }

    /// What is left at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 sequence that is not complete yet (0 when
/// the end is complete, or is not UTF-8 in a way more bytes cannot fix).
fn incomplete_tail(bytes: &[u8]) -> usize {
    // A sequence is at most 4 bytes, so only the last 3 can be an unfinished one.
    for back in 1..=bytes.len().min(3) {
        let lead = bytes[bytes.len() - back];
        let needed = match lead {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            0b1000_0000..=0b1011_1111 => continue,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_split_sequence_waits_for_its_end() {
        let text = "héllo ✓ 🐝".as_bytes();
        let mut chunker = Utf8Chunker::default();
        let mut out = Vec::new();
        for byte in text {
            let chunk = chunker.push(&[*byte]);
            assert!(std::str::from_utf8(&chunk).is_ok(), "{chunk:?}");
            out.extend(chunk);
        }
        out.extend(chunker.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        let mut chunker = Utf8Chunker::default();
        assert_eq!(chunker.push(&[0xff, b'a', 0xfe]), [0xff, b'a', 0xfe]);
        // A lone lead byte at the very end waits; the stream's end lets it out.
        assert_eq!(chunker.push(&[b'x', 0xe2]), [b'x']);
        assert_eq!(chunker.finish(), [0xe2]);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (queue, _outgoing) = mpsc::channel(2);
        let feed = Feed { queue, dropped: Arc::default() };
        feed.terminal(&vec![b'x'; TERM_CHUNK_MAX * 5]);
        assert_eq!(feed.dropped(), 3, "two chunks queued, three dropped");
    }

    proptest! {
        #[test]
        fn chunks_lose_nothing_and_valid_text_stays_valid_in_every_chunk(
            text in ".{0,200}",
            noise in prop::collection::vec(any::<u8>(), 0..50),
            cuts in prop::collection::vec(1usize..20, 1..40),
            with_noise in any::<bool>(),
        ) {
            let mut input = text.into_bytes();
            if with_noise {
                input.extend(&noise);
            }
            let mut chunker = Utf8Chunker::default();
            let mut out = Vec::new();
            let mut rest = input.as_slice();
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (read, tail) = rest.split_at((*cut).min(rest.len()));
                rest = tail;
                let chunk = chunker.push(read);
                if !with_noise {
                    prop_assert!(std::str::from_utf8(&chunk).is_ok());
                }
                out.extend(chunk);
            }
            out.extend(chunker.finish());
            prop_assert_eq!(out, input);
        }
    }
}
