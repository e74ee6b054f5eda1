//! Outbox and inbox together under random sends, acks, lost frames, reconnects, resends and
//! sender restarts: every message reaches its receiver's application exactly once, in order per
//! sender; across a sender's restart nothing is delivered twice (its unacked messages of the
//! life that ended may be lost, as its outbox was).
//!
//! The model: each sender has one connection carrying its `send` frames in order (the relay
//! keeps a connection's order); each receiver has one carrying its acks back. A dying
//! connection loses whatever is in flight on it. A sender resends all its unacked messages
//! after its own reconnect, and a stream's unacked ones when told the receiver is back.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use hyperhive_control_link::inbox::EPOCHS_PER_SENDER;
use hyperhive_control_link::{Inbox, Outbox, Receipt};
use hyperhive_control_proto::link::LinkFrame;
use proptest::prelude::*;
use serde_json::json;

const SENDERS: usize = 2;
const RECEIVERS: usize = 2;

#[derive(Debug, Clone)]
enum Step {
    /// The application of sender `s` sends its next message to receiver `r`.
    Send { s: usize, r: usize },
    /// The oldest send frame in flight from sender `s` reaches its receiver.
    DeliverSend { s: usize },
    /// The oldest ack in flight from receiver `r` reaches its sender.
    DeliverAck { r: usize },
    /// Sender `s`'s connection dies (its copy was killed): frames in flight from it and acks
    /// on their way to it are lost; it reconnects and resends everything unacked.
    SenderReconnects { s: usize },
    /// Receiver `r`'s connection dies: frames on their way to it and its acks are lost.
    ReceiverReconnects { r: usize },
    /// Sender `s` learns receiver `r` is back (presence, an `undeliverable`) and resends to it.
    ResendTo { s: usize, r: usize },
    /// `secs` pass; every sender resends its streams whose acks stalled.
    Tick { secs: u64 },
    /// Sender `s` restarts: a new outbox (a new epoch) on a new connection, its unacked messages
    /// gone with the old outbox, while frames it sent before are still in flight (queued on a
    /// copy) and arrive late, in any order with the new life's ([`Step::DeliverLate`]).
    /// At most `EPOCHS_PER_SENDER - 1` times per sender: the inbox recognises late messages of
    /// that many earlier lives.
    SenderRestarts { s: usize },
    /// The oldest frame still in flight from sender `s`'s earlier lives reaches its receiver.
    DeliverLate { s: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let s = 0..SENDERS;
    let r = 0..RECEIVERS;
    prop_oneof![
        4 => (s.clone(), r.clone()).prop_map(|(s, r)| Step::Send { s, r }),
        6 => s.clone().prop_map(|s| Step::DeliverSend { s }),
        4 => r.clone().prop_map(|r| Step::DeliverAck { r }),
        1 => s.clone().prop_map(|s| Step::SenderReconnects { s }),
        1 => r.clone().prop_map(|r| Step::ReceiverReconnects { r }),
        1 => (s, r).prop_map(|(s, r)| Step::ResendTo { s, r }),
        2 => (1..4u64).prop_map(|secs| Step::Tick { secs }),
        1 => (0..SENDERS).prop_map(|s| Step::SenderRestarts { s }),
        2 => (0..SENDERS).prop_map(|s| Step::DeliverLate { s }),
    ]
}

/// A distinct epoch for each life of each sender.
fn epoch(seed: u64, s: usize, life: usize) -> u64 {
    seed.wrapping_add((s + SENDERS * life) as u64)
}

fn name(kind: &str, i: usize) -> String {
    format!("{kind}{i}")
}

fn index(name: &str) -> usize {
    name[1..].parse().unwrap()
}

struct World {
    outboxes: Vec<Outbox>,
    inboxes: Vec<Inbox>,
    /// Send frames in flight, per sender connection.
    sends: Vec<VecDeque<LinkFrame>>,
    /// Send frames of senders' earlier lives still in flight, per sender.
    late: Vec<VecDeque<LinkFrame>>,
    /// Ack frames in flight, per receiver connection.
    acks: Vec<VecDeque<LinkFrame>>,
    /// What each sender's application sent, per receiver and life of the sender.
    sent: BTreeMap<(usize, usize, usize), Vec<u64>>,
    /// What each receiver's application got, per sender and life.
    delivered: BTreeMap<(usize, usize, usize), Vec<u64>>,
    /// The life of the sender that sent each body.
    life_of: BTreeMap<u64, usize>,
    /// How often each sender restarted: its current life.
    lives: Vec<usize>,
    epoch_seed: u64,
    next_body: u64,
    /// The fake clock.
    now: Instant,
}

impl World {
    fn new(epoch_seed: u64) -> Self {
        Self {
            outboxes: (0..SENDERS).map(|s| Outbox::new(epoch(epoch_seed, s, 0))).collect(),
            inboxes: (0..RECEIVERS).map(|_| Inbox::new()).collect(),
            sends: vec![VecDeque::new(); SENDERS],
            late: vec![VecDeque::new(); SENDERS],
            acks: vec![VecDeque::new(); RECEIVERS],
            sent: BTreeMap::new(),
            delivered: BTreeMap::new(),
            life_of: BTreeMap::new(),
            lives: vec![0; SENDERS],
            epoch_seed,
            next_body: 0,
            now: Instant::now(),
        }
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Send { s, r } => {
                self.next_body += 1;
                let frame = self.outboxes[s].push(&name("r", r), json!(self.next_body).into()).unwrap();
                self.sent.entry((s, r, self.lives[s])).or_default().push(self.next_body);
                self.life_of.insert(self.next_body, self.lives[s]);
                self.sends[s].push_back(frame);
            }
            Step::DeliverSend { s } => {
                let frame = self.sends[s].pop_front();
                self.deliver(s, frame);
            }
            Step::DeliverLate { s } => {
                let frame = self.late[s].pop_front();
                self.deliver(s, frame);
            }
            Step::DeliverAck { r } => {
                let Some(LinkFrame::Ack { to, epoch, seq }) = self.acks[r].pop_front() else {
                    return;
                };
                self.outboxes[index(&to)].acked(&name("r", r), epoch, seq);
            }
            Step::SenderReconnects { s } => {
                self.sends[s].clear();
                let to_sender = name("s", s);
                for acks in &mut self.acks {
                    acks.retain(|ack| !matches!(ack, LinkFrame::Ack { to, .. } if *to == to_sender));
                }
                self.sends[s].extend(self.outboxes[s].resend_all());
            }
            Step::ReceiverReconnects { r } => {
                let to_receiver = name("r", r);
                for sends in &mut self.sends {
                    sends.retain(|send| !matches!(send, LinkFrame::Send { to, .. } if *to == to_receiver));
                }
                self.acks[r].clear();
            }
            Step::ResendTo { s, r } => {
                let frames = self.outboxes[s].resend_to(&name("r", r));
                self.sends[s].extend(frames);
            }
            Step::Tick { secs } => {
                self.now += Duration::from_secs(secs);
                for (outbox, sends) in self.outboxes.iter_mut().zip(&mut self.sends) {
                    sends.extend(outbox.resend_stalled(self.now));
                }
            }
            Step::SenderRestarts { s } => {
                if self.lives[s] + 1 < EPOCHS_PER_SENDER {
                    self.lives[s] += 1;
                    let in_flight: Vec<LinkFrame> = self.sends[s].drain(..).collect();
                    self.late[s].extend(in_flight);
                    self.outboxes[s] = Outbox::new(epoch(self.epoch_seed, s, self.lives[s]));
                }
            }
        }
    }

    /// A send frame from sender `s`, if one was in flight, reaches its receiver.
    fn deliver(&mut self, s: usize, frame: Option<LinkFrame>) {
        let Some(LinkFrame::Send { to, epoch, seq, first_unacked, body }) = frame else {
            return;
        };
        let r = index(&to);
        let (receipt, ack) = self.inboxes[r].receive(&name("s", s), epoch, seq, first_unacked);
        if receipt == Receipt::Deliver {
            let body = body.get().parse::<u64>().unwrap();
            self.delivered.entry((s, r, self.life_of[&body])).or_default().push(body);
        }
        self.acks[r].push_back(ack);
    }

    /// Everything settles: connections stay up, senders resend until all is acked.
    fn settle(&mut self) {
        for _round in 0..4 {
            for s in 0..SENDERS {
                self.apply(&Step::SenderReconnects { s });
            }
            while [&self.sends, &self.late, &self.acks].iter().any(|queues| queues.iter().any(|q| !q.is_empty())) {
                for s in 0..SENDERS {
                    self.apply(&Step::DeliverSend { s });
                    self.apply(&Step::DeliverLate { s });
                }
                for r in 0..RECEIVERS {
                    self.apply(&Step::DeliverAck { r });
                }
            }
            if self.outboxes.iter().all(|o| o.unacked() == 0) {
                return;
            }
        }
        panic!("messages still unacked after settling");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_message_is_delivered_once_in_order(epoch_seed in any::<u64>(), steps in prop::collection::vec(step(), 0..300)) {
        let mut world = World::new(epoch_seed);
        for step in &steps {
            world.apply(step);
            // At every moment: what was delivered is a prefix of what was sent, so nothing
            // was delivered twice or out of order, even before everything settled.
            for (stream, delivered) in &world.delivered {
                let sent = &world.sent[stream];
                prop_assert!(sent.starts_with(delivered), "{stream:?}: sent {sent:?}, delivered {delivered:?}");
            }
        }
        world.settle();
        for (stream, sent) in &world.sent {
            let delivered = world.delivered.get(stream).map_or(&[][..], Vec::as_slice);
            prop_assert!(sent.starts_with(delivered), "{stream:?}: sent {sent:?}, delivered {delivered:?}");
            let (s, _, life) = *stream;
            if life == world.lives[s] {
                prop_assert_eq!(delivered, sent.as_slice(), "stream {:?} of the current life", stream);
            }
        }
    }
}

/// The property test above must be able to fail: an inbox that ignored duplicates would
/// deliver a resent message twice, and this scenario shows the world notices.
#[test]
fn a_resend_after_an_unacked_delivery_is_not_delivered_again() {
    let mut world = World::new(1);
    world.apply(&Step::Send { s: 0, r: 0 });
    world.apply(&Step::DeliverSend { s: 0 });
    world.apply(&Step::SenderReconnects { s: 0 }); // the ack is lost, the message resent
    world.apply(&Step::DeliverSend { s: 0 });
    assert_eq!(world.delivered[&(0, 0, 0)], [1]);
    world.settle();
    assert_eq!(world.delivered[&(0, 0, 0)], [1]);
}

/// The same for a restart: a late resend of the earlier life, arriving after the new life's
/// first message, is not delivered again, nor is the new life's message after it.
#[test]
fn a_late_resend_of_a_senders_earlier_life_is_not_delivered_again() {
    let mut world = World::new(1);
    world.apply(&Step::Send { s: 0, r: 0 });
    world.apply(&Step::DeliverSend { s: 0 });
    world.apply(&Step::SenderReconnects { s: 0 }); // the ack is lost, the message resent...
    world.apply(&Step::SenderRestarts { s: 0 }); // ...and still in flight when the sender restarts
    world.apply(&Step::Send { s: 0, r: 0 });
    world.apply(&Step::DeliverSend { s: 0 }); // the new life's message overtakes the late resend
    world.apply(&Step::DeliverLate { s: 0 });
    world.apply(&Step::SenderReconnects { s: 0 }); // the new life's message is resent
    world.apply(&Step::DeliverSend { s: 0 });
    assert_eq!((&world.delivered[&(0, 0, 0)], &world.delivered[&(0, 0, 1)]), (&vec![1], &vec![2]));
}
