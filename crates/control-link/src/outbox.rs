//! The sender's half of end-to-end delivery: every message sent keeps its place
//! here until the receiver acks it, so a copy that dies with messages in flight loses nothing:
//! the sender sends the unacked ones again over its next link.
//!
//! Messages are numbered per stream (this outbox's messages to one receiver), from 1, under a
//! random epoch chosen when the outbox is made; receivers drop what they have already seen
//! ([`crate::Inbox`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use hyperhive_control_proto::link::{Body, LinkFrame, MAX_BODY_BYTES};

/// Unacked messages one stream may hold before [`Outbox::push`] refuses more: the application
/// must wait for acks (a receiver that is away for long is reported by `undeliverable`).
pub const MAX_UNACKED_PER_STREAM: usize = 10_000;

/// A stream whose oldest unacked message has not moved for this long is sent again
/// ([`Outbox::resend_stalled`]): its receiver's copy may have died with the messages, and the
/// receiver, back on another copy, has no way to ask for them. Acks normally take milliseconds.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// After an `undeliverable`, a stream is sent again after this delay, doubled at each further
/// `undeliverable` up to [`ACK_TIMEOUT`]: a target that is back within a moment (its copy died,
/// or its queue was full) gets its messages at once, one that is away is not flooded.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);

/// A repeated ack (one that covers nothing new while messages wait) asks for a resend: the
/// receiver reconnected and re-acked what it has, or it dropped a message after a gap. At most
/// one such resend per stream in this long, so a burst of repeated acks costs one resend.
pub const FAST_RESEND_GAP: Duration = Duration::from_millis(250);

/// Why [`Outbox::push`] took no message; nothing was numbered or sent, and the link goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPushed {
    /// The stream to `to` holds [`MAX_UNACKED_PER_STREAM`] unacked messages.
    #[error("{unacked} messages to {to} are not acked yet: wait until it acks before sending more")]
    Full { to: String, unacked: usize },
    /// The body is over [`MAX_BODY_BYTES`]: no copy would relay it (each answers
    /// `undeliverable` with `too_large`), so it is refused here, before it takes a place in the
    /// stream that nothing could ever fill.
    #[error(
        "the message to {to} is {len} bytes of JSON, over the limit of {max}: it was not sent; send it in smaller parts"
    )]
    TooLarge { to: String, len: usize, max: usize },
}

#[derive(Debug, Default)]
struct Stream {
    /// The seq of the next message pushed.
    next_seq: u64,
    /// Unacked messages, oldest first, as (seq, body).
    unacked: VecDeque<(u64, Body)>,
    /// When [`Outbox::resend_stalled`] last saw the stream's oldest unacked seq change (or
    /// resent it), and that seq.
    progress: Option<(Instant, u64)>,
    /// When to resend after an `undeliverable`.
    retry_at: Option<Instant>,
    /// The delay that set the last retry (doubled by the next `undeliverable`); cleared by
    /// an ack that covers something.
    retry_delay: Option<Duration>,
    /// When a repeated ack last caused a resend.
    fast_resent: Option<Instant>,
}

impl Stream {
    /// The seq of the oldest unacked message (the next one pushed when all are acked).
    fn first_unacked(&self) -> u64 {
        self.unacked.front().map_or(self.next_seq, |(seq, _)| *seq)
    }
}

/// Unacked messages by receiver.
#[derive(Debug)]
pub struct Outbox {
    epoch: u64,
    /// Ordered by receiver so a resend is deterministic.
    streams: BTreeMap<String, Stream>,
}

impl Outbox {
    /// An empty outbox; `epoch` must be random (`rand::random()`), so a restarted sender's
    /// messages are not mistaken for duplicates of its previous life's.
    pub fn new(epoch: u64) -> Self {
        Self { epoch, streams: BTreeMap::new() }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Numbers `body` as the next message to `to`, keeps it until acked and returns the frame to
    /// send now.
    ///
    /// # Errors
    /// [`NotPushed::TooLarge`] when the body is over [`MAX_BODY_BYTES`]; [`NotPushed::Full`]
    /// when the stream already holds [`MAX_UNACKED_PER_STREAM`] unacked messages.
    pub fn push(&mut self, to: &str, body: Body) -> Result<LinkFrame, NotPushed> {
        let len = body.get().len();
        if len > MAX_BODY_BYTES {
            return Err(NotPushed::TooLarge { to: to.to_owned(), len, max: MAX_BODY_BYTES });
        }
        let stream = self.streams.entry(to.to_owned()).or_insert_with(|| Stream { next_seq: 1, ..Stream::default() });
        if stream.unacked.len() >= MAX_UNACKED_PER_STREAM {
            return Err(NotPushed::Full { to: to.to_owned(), unacked: stream.unacked.len() });
        }
        let seq = stream.next_seq;
        stream.next_seq += 1;
        stream.unacked.push_back((seq, body.clone()));
        let first_unacked = stream.first_unacked();
        Ok(LinkFrame::Send { to: to.to_owned(), epoch: self.epoch, seq, first_unacked, body })
    }

    /// Drops the messages to `from` that its ack covers (every seq up to `seq`); returns how
    /// many. An ack of another epoch (for a previous life of this sender) changes nothing.
    pub fn acked(&mut self, from: &str, epoch: u64, seq: u64) -> usize {
        let Some(stream) = self.streams.get_mut(from).filter(|_| epoch == self.epoch) else {
            return 0;
        };
        let covered = stream.unacked.iter().take_while(|(s, _)| *s <= seq).count();
        stream.unacked.drain(..covered);
        if covered > 0 {
            stream.retry_at = None;
            stream.retry_delay = None;
        }
        covered
    }

    /// [`Outbox::acked`], and the messages to send again when the ack covered nothing new
    /// while messages wait (at most once per [`FAST_RESEND_GAP`] per stream).
    pub fn on_ack(&mut self, from: &str, epoch: u64, seq: u64, now: Instant) -> Vec<LinkFrame> {
        if self.acked(from, epoch, seq) > 0 || epoch != self.epoch {
            return vec![];
        }
        let Some(stream) = self.streams.get_mut(from).filter(|s| !s.unacked.is_empty()) else {
            return vec![];
        };
        if stream.fast_resent.is_some_and(|at| now.saturating_duration_since(at) < FAST_RESEND_GAP) {
            return vec![];
        }
        stream.fast_resent = Some(now);
        self.resend_to(from)
    }

    /// The relay could not deliver to `to` now: send its stream again after a short, growing
    /// delay ([`FIRST_RETRY`] doubling up to [`ACK_TIMEOUT`]; see [`Outbox::resend_stalled`]).
    pub fn undeliverable(&mut self, to: &str, now: Instant) {
        let Some(stream) = self.streams.get_mut(to).filter(|s| !s.unacked.is_empty()) else {
            return;
        };
        if stream.retry_at.is_some() {
            return; // a retry is already set; the rest of this burst is the same news
        }
        let delay = stream.retry_delay.map_or(FIRST_RETRY, |last| (last * 2).min(ACK_TIMEOUT));
        stream.retry_delay = Some(delay);
        stream.retry_at = Some(now + delay);
    }

    /// The relay answered that `to` does not exist (never paired, or forgotten): a final
    /// answer, read from the store, so the stream's messages are dropped rather than resent for
    /// ever. The stream keeps its numbering, so nothing sent later repeats a seq the receiver
    /// may have seen. Returns how many were dropped.
    pub fn unknown(&mut self, to: &str) -> usize {
        let Some(stream) = self.streams.get_mut(to) else { return 0 };
        let dropped = stream.unacked.len();
        stream.unacked.clear();
        (stream.progress, stream.retry_at, stream.retry_delay) = (None, None, None);
        dropped
    }

    /// Every unacked message, oldest first within each stream: send them all after a reconnect.
    pub fn resend_all(&self) -> Vec<LinkFrame> {
        self.streams.keys().flat_map(|to| self.resend_to(to)).collect()
    }

    /// The unacked messages to `to`, oldest first: send them again when `to` is back (after an
    /// `undeliverable`, or when acks stop coming).
    pub fn resend_to(&self, to: &str) -> Vec<LinkFrame> {
        self.streams
            .get(to)
            .into_iter()
            .flat_map(|stream| {
                let first_unacked = stream.first_unacked();
                stream.unacked.iter().map(move |(seq, body)| LinkFrame::Send {
                    to: to.to_owned(),
                    epoch: self.epoch,
                    seq: *seq,
                    first_unacked,
                    body: body.clone(),
                })
            })
            .collect()
    }

    /// The unacked messages of every stream whose oldest unacked message has not changed for
    /// [`ACK_TIMEOUT`], or whose retry after an `undeliverable` is due, oldest first: call this
    /// every [`FIRST_RETRY`] or so. `now` is the caller's clock, so tests drive it without waiting.
    pub fn resend_stalled(&mut self, now: Instant) -> Vec<LinkFrame> {
        let mut stalled = vec![];
        for (to, stream) in &mut self.streams {
            if stream.unacked.is_empty() {
                stream.progress = None;
                stream.retry_at = None;
                continue;
            }
            if stream.retry_at.is_some_and(|at| at <= now) {
                stream.retry_at = None;
                stalled.push(to.clone());
                stream.progress = Some((now, stream.first_unacked()));
                continue;
            }
            let oldest = stream.first_unacked();
            match stream.progress {
                Some((since, seq)) if seq == oldest && now.saturating_duration_since(since) >= ACK_TIMEOUT => {
                    stalled.push(to.clone());
                    stream.progress = Some((now, oldest));
                }
                Some((_, seq)) if seq == oldest => {}
                _ => stream.progress = Some((now, oldest)),
            }
        }
        stalled.iter().flat_map(|to| self.resend_to(to)).collect()
    }

    /// How many messages wait for an ack, over all streams.
    pub fn unacked(&self) -> usize {
        self.streams.values().map(|s| s.unacked.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn push(outbox: &mut Outbox, to: &str, body: serde_json::Value) -> LinkFrame {
        outbox.push(to, body.into()).unwrap()
    }

    fn seqs(frames: &[LinkFrame]) -> Vec<(String, u64)> {
        frames
            .iter()
            .map(|f| match f {
                LinkFrame::Send { to, seq, .. } => (to.clone(), *seq),
                other => panic!("not a send: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn numbers_each_stream_from_one_and_resends_until_acked() {
        let mut outbox = Outbox::new(9);
        for n in 0..3 {
            push(&mut outbox, "h1", json!(n));
        }
        let frame = push(&mut outbox, "h2", json!("x"));
        assert_eq!(
            frame,
            LinkFrame::Send { to: "h2".into(), epoch: 9, seq: 1, first_unacked: 1, body: json!("x").into() }
        );
        assert_eq!(
            seqs(&outbox.resend_all()),
            [("h1".into(), 1), ("h1".into(), 2), ("h1".into(), 3), ("h2".into(), 1)]
        );

        assert_eq!(outbox.acked("h1", 9, 2), 2);
        assert_eq!(outbox.acked("h1", 9, 2), 0, "a repeated ack changes nothing");
        assert_eq!(outbox.acked("h2", 8, 1), 0, "an ack of another epoch changes nothing");
        assert_eq!(outbox.acked("h3", 9, 1), 0);
        assert_eq!(seqs(&outbox.resend_all()), [("h1".into(), 3), ("h2".into(), 1)]);
        assert_eq!(seqs(&outbox.resend_to("h1")), [("h1".into(), 3)]);
        assert_eq!(outbox.unacked(), 2);
    }

    #[test]
    fn a_repeated_ack_while_messages_wait_asks_for_one_resend() {
        let start = Instant::now();
        let mut outbox = Outbox::new(9);
        for n in 0..3 {
            push(&mut outbox, "c1", json!(n));
        }
        assert!(outbox.on_ack("c1", 9, 1, start).is_empty(), "an ack that covers something is just an ack");
        // The receiver reconnected and re-acked seq 1: 2 and 3 died with its copy.
        assert_eq!(seqs(&outbox.on_ack("c1", 9, 1, start)), [("c1".into(), 2), ("c1".into(), 3)]);
        assert!(outbox.on_ack("c1", 9, 1, start + FAST_RESEND_GAP / 2).is_empty(), "one resend per burst");
        assert_eq!(outbox.on_ack("c1", 9, 1, start + FAST_RESEND_GAP).len(), 2);
        assert!(outbox.on_ack("c1", 8, 1, start + FAST_RESEND_GAP * 4).is_empty(), "another epoch asks nothing");
        assert_eq!(outbox.acked("c1", 9, 3), 2);
        assert!(outbox.on_ack("c1", 9, 3, start + FAST_RESEND_GAP * 8).is_empty(), "nothing waits");
    }

    #[test]
    fn a_stream_to_an_unknown_device_is_dropped_and_never_resent() {
        let start = Instant::now();
        let mut outbox = Outbox::new(7);
        push(&mut outbox, "gone", json!(1));
        push(&mut outbox, "gone", json!(2));
        push(&mut outbox, "h2", json!(3));
        assert_eq!(outbox.unknown("gone"), 2);
        assert!(outbox.resend_to("gone").is_empty());
        let later = outbox.resend_stalled(start + ACK_TIMEOUT * 3);
        assert!(later.iter().all(|frame| matches!(frame, LinkFrame::Send { to, .. } if to == "h2")), "{later:?}");
        assert_eq!(outbox.resend_all().len(), 1);
        assert_eq!(outbox.unknown("gone"), 0);
        let LinkFrame::Send { seq, .. } = push(&mut outbox, "gone", json!(4)) else { panic!("a send") };
        assert_eq!(seq, 3, "the stream's numbering goes on");
    }

    #[test]
    fn an_undeliverable_stream_is_retried_soon_then_less_often() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut outbox = Outbox::new(9);
        push(&mut outbox, "h1", json!(1));
        push(&mut outbox, "h1", json!(2));
        outbox.undeliverable("h1", at(0));
        outbox.undeliverable("h1", at(10)); // the same burst
        assert!(outbox.resend_stalled(at(249)).is_empty());
        assert_eq!(seqs(&outbox.resend_stalled(at(250))), [("h1".into(), 1), ("h1".into(), 2)]);
        assert!(outbox.resend_stalled(at(251)).is_empty(), "a retry fires once");
        outbox.undeliverable("h1", at(300));
        assert!(outbox.resend_stalled(at(799)).is_empty(), "the second delay is doubled");
        assert_eq!(outbox.resend_stalled(at(800)).len(), 2);
        // Progress resets the delay.
        assert_eq!(outbox.acked("h1", 9, 1), 1);
        outbox.undeliverable("h1", at(1000));
        assert_eq!(outbox.resend_stalled(at(1250)).len(), 1);
        outbox.undeliverable("nobody", at(0)); // no stream: nothing to retry, no panic
    }

    #[test]
    fn a_stream_without_ack_progress_is_resent_after_the_timeout() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut outbox = Outbox::new(1);
        push(&mut outbox, "h1", json!(1));
        push(&mut outbox, "h2", json!(2));
        assert!(outbox.resend_stalled(at(0)).is_empty(), "the first look only notes the time");
        assert!(outbox.resend_stalled(at(4)).is_empty(), "not stalled yet");
        push(&mut outbox, "h2", json!(3));
        outbox.acked("h2", 1, 1); // h2 progresses, h1 does not
        assert_eq!(seqs(&outbox.resend_stalled(at(5))), [("h1".into(), 1)]);
        assert!(outbox.resend_stalled(at(6)).is_empty(), "the resend restarts the timeout");
        assert_eq!(seqs(&outbox.resend_stalled(at(10))), [("h1".into(), 1), ("h2".into(), 2)]);
        outbox.acked("h1", 1, 1);
        outbox.acked("h2", 1, 2);
        assert!(outbox.resend_stalled(at(60)).is_empty(), "nothing unacked, nothing resent");
    }

    #[test]
    fn a_full_stream_refuses_more_and_says_why() {
        let mut outbox = Outbox::new(1);
        for n in 0..MAX_UNACKED_PER_STREAM {
            push(&mut outbox, "h1", json!(n));
        }
        let err = outbox.push("h1", json!("one too many").into()).unwrap_err();
        assert_eq!(err, NotPushed::Full { to: "h1".into(), unacked: MAX_UNACKED_PER_STREAM });
        assert!(err.to_string().contains("wait until it acks"), "{err}");
        push(&mut outbox, "h2", json!("other streams still flow"));
        outbox.acked("h1", 1, 1);
        push(&mut outbox, "h1", json!("room again"));
    }

    #[test]
    fn a_body_over_the_limit_is_refused_at_once_and_takes_no_place_in_the_stream() {
        let mut outbox = Outbox::new(1);
        // 12,000 numbers written `1e5`: 48 KB as written, 108 KB if re-encoded as `100000.0`.
        let numbers = Body::parse(&format!("[{}]", vec!["1e5"; 12_000].join(","))).unwrap();
        let frame = outbox.push("h1", numbers.clone()).unwrap();
        assert!(matches!(frame, LinkFrame::Send { body, .. } if body == numbers), "kept as written");
        let too_large = Body::parse(&format!("\"{}\"", "x".repeat(MAX_BODY_BYTES - 1))).unwrap();
        let err = outbox.push("h1", too_large).unwrap_err();
        assert_eq!(err, NotPushed::TooLarge { to: "h1".into(), len: MAX_BODY_BYTES + 1, max: MAX_BODY_BYTES });
        assert!(err.to_string().contains("smaller parts"), "{err}");
        assert_eq!(outbox.unacked(), 1, "nothing was kept");
        assert_eq!(seqs(&[push(&mut outbox, "h1", json!(2))]), [("h1".into(), 2)], "no seq was used");
    }
}
