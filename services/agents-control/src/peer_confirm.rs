//! Waiting until the linked copies have handled what this copy told them. Each link's frames
//! are handled in the order they were queued, so a `ping` queued behind them is answered
//! (`pong`, same number) only once the peer has handled everything before it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::oneshot;

use crate::sessions::Sessions;

/// Where the numbers of these pings start: a link's own heartbeat pings count from 1, one every
/// [`hyperhive_control_proto::link::PING_INTERVAL`], and never get here, so no heartbeat's pong
/// passes for a confirmation.
const FIRST_NUMBER: u64 = 1 << 63;

/// Confirmations awaited now, by peer and ping number.
#[derive(Debug, Default)]
pub struct PeerConfirmations {
    last: AtomicU64,
    waiting: Mutex<HashMap<(String, u64), oneshot::Sender<()>>>,
}

impl PeerConfirmations {
    /// A peer answered ping `t` (a number no one waits for is ignored: a late answer).
    pub fn answered(&self, peer: &str, t: u64) {
        if let Some(waiter) = self.lock().remove(&(peer.to_owned(), t)) {
            let _ = waiter.send(());
        }
    }

    /// Pings every linked peer behind the frames already queued to it and waits until each
    /// answered, or `within` passed; returns how many answered and how many were linked.
    pub async fn confirm(&self, sessions: &Sessions, within: Duration) -> (usize, usize) {
        let t = FIRST_NUMBER | (self.last.fetch_add(1, Ordering::Relaxed) + 1);
        let peers: Vec<String> = sessions.linked_peers().into_keys().collect();
        // Registered before the pings go out: an answer may come back before this task runs on.
        let mut answers: FuturesUnordered<oneshot::Receiver<()>> = {
            let mut waiting = self.lock();
            peers
                .iter()
                .map(|peer| {
                    let (sender, receiver) = oneshot::channel();
                    waiting.insert((peer.clone(), t), sender);
                    receiver
                })
                .collect()
        };
        let pinged = sessions.ping_peers(&peers, t);
        let mut answered = 0;
        let _ = tokio::time::timeout(within, async {
            while answered < pinged {
                match answers.next().await {
                    Some(Ok(())) => answered += 1,
                    // Not an answer: the waiters are held until below, so this does not happen
                    // while the loop runs. A peer not pinged (its link just ended, or its queue
                    // is full) simply never answers, and `pinged` does not count it.
                    Some(Err(_)) => {}
                    None => break,
                }
            }
        })
        .await;
        self.lock().retain(|(_, number), _| *number != t);
        (answered, peers.len())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), oneshot::Sender<()>>> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::Outgoing;
    use hyperhive_control_proto::link::PeerFrame;
    use time::OffsetDateTime;
    use tokio::sync::mpsc;

    /// The next frame queued to a peer, waited for.
    async fn next_frame(receiver: &mut mpsc::Receiver<Outgoing<PeerFrame>>) -> PeerFrame {
        match tokio::time::timeout(Duration::from_secs(5), receiver.recv()).await {
            Ok(Some(Outgoing::Frame(frame))) => frame,
            other => panic!("no frame queued: {:?}", other.map(|o| o.map(|_| ()))),
        }
    }

    #[tokio::test]
    async fn each_linked_peer_is_pinged_behind_what_it_was_told_and_its_answer_counts() {
        let (sessions, confirmations) = (Sessions::default(), PeerConfirmations::default());
        let (_, mut a) = sessions.attach_peer("a", OffsetDateTime::now_utc());
        let (_, mut b) = sessions.attach_peer("b", OffsetDateTime::now_utc());
        sessions.broadcast(&PeerFrame::Revoked { device_id: "d1".into() });
        let started = std::time::Instant::now();
        let (answers, confirm) = tokio::join!(
            async {
                for (name, receiver) in [("a", &mut a), ("b", &mut b)] {
                    assert!(matches!(next_frame(receiver).await, PeerFrame::Revoked { .. }), "{name}: revoked first");
                    let PeerFrame::Ping { t } = next_frame(receiver).await else { panic!("{name}: then a ping") };
                    confirmations.answered(name, t);
                }
            },
            confirmations.confirm(&sessions, Duration::from_secs(10))
        );
        let () = answers;
        assert_eq!(confirm, (2, 2));
        assert!(started.elapsed() < Duration::from_secs(5), "waited for its bound: {:?}", started.elapsed());
        assert!(confirmations.lock().is_empty());
    }

    #[tokio::test]
    async fn silent_peers_are_waited_for_no_longer_than_the_bound_and_wrong_answers_do_not_count() {
        let (sessions, confirmations) = (Sessions::default(), PeerConfirmations::default());
        let (_, mut a) = sessions.attach_peer("a", OffsetDateTime::now_utc());
        let (_, _silent) = sessions.attach_peer("b", OffsetDateTime::now_utc());
        let within = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let ((), confirm) = tokio::join!(
            async {
                let PeerFrame::Ping { t } = next_frame(&mut a).await else { panic!("a ping") };
                // A heartbeat's pong (the link's own count from 1), an answer to another ping,
                // and an answer from another peer are no confirmation of a's.
                confirmations.answered("a", 1);
                confirmations.answered("a", t + 1);
                confirmations.answered("c", t);
            },
            confirmations.confirm(&sessions, within)
        );
        assert_eq!(confirm, (0, 2));
        assert!(started.elapsed() >= within, "returned before its bound: {:?}", started.elapsed());
        // Nothing is left waiting, and b's late answer is ignored.
        assert!(confirmations.lock().is_empty());
        confirmations.answered("b", FIRST_NUMBER | 1);
        assert_eq!(confirmations.confirm(&Sessions::default(), within).await, (0, 0));
    }
}
