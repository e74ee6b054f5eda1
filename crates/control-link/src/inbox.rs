//! The receiver's half of end-to-end delivery (DESIGN 3.6): a message reaches the application
//! once, in order per sender, however often the sender resends it.
//!
//! Per sender the inbox keeps two numbers (the sender's epoch and the last seq delivered), so
//! its memory is bounded by the number of paired devices, never by the number of messages. A
//! message is delivered only if it is the next of its stream; an older one is a duplicate, a
//! newer one follows a gap (its predecessor was lost with a dead copy) and is dropped: the
//! sender resends from its oldest unacked message, so the gap is filled in order.

use std::collections::HashMap;

use hyperhive_control_proto::link::LinkFrame;

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

/// The delivery state of every sender this device has heard from.
#[derive(Debug, Default)]
pub struct Inbox {
    streams: HashMap<String, StreamState>,
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
        let receipt = match self.streams.get_mut(from) {
            Some(state) if state.epoch == epoch => {
                if seq <= state.last_delivered {
                    Receipt::Duplicate
                } else if Some(seq) == state.last_delivered.checked_add(1) {
                    state.last_delivered = seq;
                    Receipt::Deliver
                } else {
                    Receipt::AfterGap
                }
            }
            _ if seq == first_unacked => {
                self.streams.insert(from.to_owned(), StreamState { epoch, last_delivered: seq });
                Receipt::Deliver
            }
            // The stream's first message so far is not the oldest unacked one: wait for the
            // resend that starts there. Nothing is delivered, so the ack covers nothing new.
            _ => {
                return (
                    Receipt::AfterGap,
                    LinkFrame::Ack { to: from.to_owned(), epoch, seq: first_unacked.saturating_sub(1) },
                );
            }
        };
        let last_delivered = self.streams[from].last_delivered;
        (receipt, LinkFrame::Ack { to: from.to_owned(), epoch, seq: last_delivered })
    }

    /// The cumulative ack of every stream heard from: sent after each reconnect, so a sender
    /// whose messages died with a copy hears a repeated ack and resends them at once
    /// ([`crate::Outbox::on_ack`]) instead of waiting for its ack timeout.
    pub fn acks(&self) -> Vec<LinkFrame> {
        self.streams
            .iter()
            .map(|(from, state)| LinkFrame::Ack { to: from.clone(), epoch: state.epoch, seq: state.last_delivered })
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
    }
}
