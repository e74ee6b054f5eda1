//! The receiver's half of end-to-end delivery (docs/control-plane/link-protocol.md): a message reaches the application
//! once, in order per sender, however often the sender resends it, and across the sender's
//! restarts.
//!
//! A stream is one sender's messages under one epoch (a restarted sender starts a new epoch).
//! Per stream the inbox keeps two numbers (the epoch and the last seq delivered), for the
//! [`EPOCHS_PER_SENDER`] streams of each sender heard from last, so its memory is bounded by the
//! number of paired devices, never by the number of messages. A message is delivered only if it
//! is the next of its stream; an older one is a duplicate, a newer one follows a gap (its
//! predecessor was lost with a dead copy) and is dropped: the sender resends from its oldest
//! unacked message, so the gap is filled in order.
//!
//! Keeping a sender's earlier epochs, not just its latest, is what makes a restart safe both
//! ways: a message of the earlier life that arrives late (a resend that was still queued on a
//! copy) is still known as a duplicate, and the new life's stream is not taken for the old one.

use std::collections::{HashMap, VecDeque};

use hyperhive_control_proto::link::LinkFrame;

/// Streams (epochs) remembered per sender: a late message of any of a sender's last this many
/// lives is still recognised. Late messages of a dead life live only in a copy's queue, seconds
/// at most, so a few lives are plenty.
pub const EPOCHS_PER_SENDER: usize = 8;

/// What to do with a received message. Every receipt comes with the ack to send back
/// ([`Inbox::receive`]), so a sender whose ack was lost stops resending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// New: hand it to the application.
    Deliver,
    /// Seen before: drop it.
    Duplicate,
    /// An earlier message of the stream is missing: drop it, the sender resends both in order.
    AfterGap,
}

#[derive(Debug, Clone, Copy)]
struct StreamState {
    epoch: u64,
    last_delivered: u64,
}

/// The delivery state of every sender this device has heard from: per sender, its streams
/// heard from most recently first.
#[derive(Debug, Default)]
pub struct Inbox {
    senders: HashMap<String, VecDeque<StreamState>>,
}

impl Inbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// Judges message `seq` of stream `epoch` from `from` and returns the receipt and the
    /// cumulative ack to send (covering everything delivered from that stream so far).
    ///
    /// A stream not seen before (a new sender, a restarted sender, or any sender after this
    /// device restarted) starts at `first_unacked`, the oldest message the sender still holds:
    /// everything before it was acked (to a previous life of this device, if it restarted).
    pub fn receive(&mut self, from: &str, epoch: u64, seq: u64, first_unacked: u64) -> (Receipt, LinkFrame) {
        let streams = self.senders.entry(from.to_owned()).or_default();
        let ack = |seq: u64| LinkFrame::Ack { to: from.to_owned(), epoch, seq };
        let Some(at) = streams.iter().position(|s| s.epoch == epoch) else {
            if seq != first_unacked {
                // The stream's first message so far is not the oldest unacked one: wait for the
                // resend that starts there. Nothing is delivered, so the ack covers nothing new.
                if streams.is_empty() {
                    self.senders.remove(from);
                }
                return (Receipt::AfterGap, ack(first_unacked.saturating_sub(1)));
            }
            streams.push_front(StreamState { epoch, last_delivered: seq });
            streams.truncate(EPOCHS_PER_SENDER);
            return (Receipt::Deliver, ack(seq));
        };
        let mut state = streams.remove(at).expect("found above");
        let receipt = if seq <= state.last_delivered {
            Receipt::Duplicate
        } else if Some(seq) == state.last_delivered.checked_add(1) {
            state.last_delivered = seq;
            Receipt::Deliver
        } else {
            Receipt::AfterGap
        };
        streams.push_front(state);
        (receipt, ack(state.last_delivered))
    }

    /// The cumulative ack of every stream heard from: sent after each reconnect, so a sender
    /// whose messages died with a copy hears a repeated ack and resends them at once
    /// ([`crate::Outbox::on_ack`]) instead of waiting for its ack timeout.
    pub fn acks(&self) -> Vec<LinkFrame> {
        self.senders
            .iter()
            .flat_map(|(from, streams)| {
                streams.iter().map(|state| LinkFrame::Ack {
                    to: from.clone(),
                    epoch: state.epoch,
                    seq: state.last_delivered,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack_seq(frame: &LinkFrame) -> u64 {
        match frame {
            LinkFrame::Ack { seq, .. } => *seq,
            other => panic!("not an ack: {other:?}"),
        }
    }

    #[test]
    fn delivers_in_order_drops_duplicates_and_messages_after_a_gap() {
        let mut inbox = Inbox::new();
        assert_eq!(inbox.receive("c1", 5, 1, 1).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c1", 5, 2, 1).0, Receipt::Deliver);
        let (receipt, ack) = inbox.receive("c1", 5, 2, 1);
        assert_eq!((receipt, ack_seq(&ack)), (Receipt::Duplicate, 2), "a duplicate is acked again");
        let (receipt, ack) = inbox.receive("c1", 5, 4, 1);
        assert_eq!((receipt, ack_seq(&ack)), (Receipt::AfterGap, 2));
        assert_eq!(inbox.receive("c1", 5, 3, 1).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c1", 5, 4, 1).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c2", 5, 1, 1).0, Receipt::Deliver, "streams are per sender");
    }

    #[test]
    fn a_new_epoch_starts_a_new_stream() {
        let mut inbox = Inbox::new();
        for seq in 1..=3 {
            inbox.receive("c1", 5, seq, 1);
        }
        assert_eq!(inbox.receive("c1", 6, 1, 1).0, Receipt::Deliver, "the sender restarted");
        assert_eq!(inbox.receive("c1", 6, 1, 1).0, Receipt::Duplicate);
        let (receipt, ack) = inbox.receive("h9", 2, 41, 40);
        assert_eq!((receipt, ack_seq(&ack)), (Receipt::AfterGap, 39), "the stream starts at its oldest unacked");
        let (receipt, ack) = inbox.receive("h9", 2, 40, 40);
        assert_eq!((receipt, ack_seq(&ack)), (Receipt::Deliver, 40), "this device restarted mid-stream");
        assert_eq!(inbox.receive("h9", 2, 41, 40).0, Receipt::Deliver);
    }

    #[test]
    fn a_restarted_senders_old_messages_stay_duplicates_and_its_new_ones_are_delivered() {
        let mut inbox = Inbox::new();
        assert_eq!(inbox.receive("c1", 5, 1, 1).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c1", 5, 2, 1).0, Receipt::Deliver);
        // The sender restarts (epoch 6) while a resend of its old life's seq 2 is still queued
        // on a copy; the old resend arrives after the new life's first message.
        assert_eq!(inbox.receive("c1", 6, 1, 1).0, Receipt::Deliver, "the new life is not dropped");
        let (receipt, ack) = inbox.receive("c1", 5, 2, 2);
        assert_eq!((receipt, ack_seq(&ack)), (Receipt::Duplicate, 2), "the old life's message is not delivered twice");
        assert_eq!(inbox.receive("c1", 5, 1, 1).0, Receipt::Duplicate);
        assert_eq!(inbox.receive("c1", 6, 1, 1).0, Receipt::Duplicate, "nor the new life's, after an old one");
        assert_eq!(inbox.receive("c1", 6, 2, 1).0, Receipt::Deliver);
        // Many restarts later the oldest lives are forgotten, the latest still known.
        for epoch in 7..7 + EPOCHS_PER_SENDER as u64 {
            assert_eq!(inbox.receive("c1", epoch, 1, 1).0, Receipt::Deliver);
        }
        let last = 6 + EPOCHS_PER_SENDER as u64;
        assert_eq!(inbox.receive("c1", last, 1, 1).0, Receipt::Duplicate);
        assert_eq!(inbox.acks().len(), EPOCHS_PER_SENDER, "memory per sender is bounded");
    }

    #[test]
    fn hostile_numbers_do_not_overflow() {
        let mut inbox = Inbox::new();
        assert_eq!(inbox.receive("c1", 1, u64::MAX, u64::MAX).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c1", 1, u64::MAX, 1).0, Receipt::Duplicate);
        assert_eq!(inbox.receive("c1", 1, 0, 0).0, Receipt::Duplicate);
        assert_eq!(inbox.receive("c2", 1, 0, 0).0, Receipt::Deliver);
        assert_eq!(inbox.receive("c3", 1, 5, 0).0, Receipt::AfterGap);
    }

    #[test]
    fn acks_after_a_reconnect_cover_what_was_delivered_per_stream() {
        let mut inbox = Inbox::new();
        inbox.receive("h1", 5, 1, 1);
        inbox.receive("h1", 5, 2, 1);
        inbox.receive("h1", 5, 4, 1); // after a gap: not delivered
        inbox.receive("h2", 7, 3, 3);
        let mut acks: Vec<(String, u64, u64)> = inbox
            .acks()
            .into_iter()
            .map(|f| match f {
                LinkFrame::Ack { to, epoch, seq } => (to, epoch, seq),
                other => panic!("not an ack: {other:?}"),
            })
            .collect();
        acks.sort();
        assert_eq!(acks, [("h1".into(), 5, 2), ("h2".into(), 7, 3)]);
        assert!(Inbox::new().acks().is_empty());
    }
}
