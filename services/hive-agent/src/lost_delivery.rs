//! A todo the server handed to a pull request this agent no longer reads.
//!
//! A partition leaves the agent's last pull requests in its old connection's send buffer. When
//! the network comes back, TCP delivers them to the server after the agent has dialled again,
//! and the server, which still holds the old connection, hands the next todo to one of them.
//! Nobody reads it, and with one todo in flight the whole queue would wait out the ack wait
//! (60 s). So for a while after each reconnect, before each fetch (when the agent holds no
//! todo), the agent asks its consumer whether a todo is out; if one is, it is the lost one, and
//! the agent hands it back with a NAK on its ack subject (which the consumer's info names), so it
//! comes again at once.

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use hyperhive_nats_objects::{TODO_STREAM, agent_durable_name};
use hyperhive_schedule::AgentName;
use tokio::time::Instant;
use tracing::{debug, warn};

/// How long after a reconnect the agent looks for a lost todo: as long as TCP may take to
/// deliver what the old connection had queued (its retransmissions back off to two minutes).
pub const WATCH_AFTER_RECONNECT: Duration = Duration::from_secs(150);

/// Looks for a lost todo after reconnects.
#[derive(Debug)]
pub struct LostDeliveries {
    agent: AgentName,
    /// The client's connections counted when last looked at.
    connects_seen: u64,
    /// Until when to look, after the latest reconnect.
    watch_until: Option<Instant>,
}

impl LostDeliveries {
    /// Watching `agent`'s consumer on `client`, from its current connection on.
    pub fn new(agent: AgentName, client: &async_nats::Client) -> Self {
        Self { agent, connects_seen: connects(client), watch_until: None }
    }

    /// Called when the agent holds no todo and has no fetch open: after a reconnect (within
    /// [`WATCH_AFTER_RECONNECT`]), hands back the todo the consumer has out, if any.
    pub async fn hand_back(&mut self, client: &async_nats::Client, consumer: &PullConsumer) {
        let now = Instant::now();
        let connected = connects(client);
        if connected != self.connects_seen {
            self.connects_seen = connected;
            self.watch_until = Some(now + WATCH_AFTER_RECONNECT);
        }
        match self.watch_until {
            Some(until) if now < until => {}
            Some(_) => {
                self.watch_until = None;
                return;
            }
            None => return,
        }
        let info = match consumer.get_info().await {
            Ok(info) => info,
            Err(e) => {
                debug!("cannot read the consumer's info to look for a lost todo: {e}");
                return;
            }
        };
        if info.num_ack_pending == 0 {
            return;
        }
        let (stream_seq, consumer_seq) = (info.delivered.stream_sequence, info.delivered.consumer_sequence);
        warn!(
            stream_seq,
            "a todo went to a pull request from before the reconnect, which nobody reads; handing it back so it \
             comes again now rather than after the ack wait"
        );
        if let Err(e) = client.publish(nak_subject(&self.agent, stream_seq, consumer_seq), "-NAK".into()).await {
            debug!("the hand-back was not sent; the todo comes back after the ack wait: {e}");
        }
    }
}

fn connects(client: &async_nats::Client) -> u64 {
    client.statistics().connects.load(std::sync::atomic::Ordering::Relaxed)
}

/// The ack subject of the delivery of stream message `stream_seq` as consumer sequence
/// `consumer_seq` (JetStream's `$JS.ACK.<stream>.<consumer>.<deliveries>.<stream seq>.<consumer
/// seq>.<time>.<pending>`; the server reads the two sequences).
fn nak_subject(agent: &AgentName, stream_seq: u64, consumer_seq: u64) -> String {
    format!("$JS.ACK.{TODO_STREAM}.{}.1.{stream_seq}.{consumer_seq}.0.0", agent_durable_name(agent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_the_consumers_own_ack_subject() {
        let bee = AgentName::parse("bee").unwrap();
        assert_eq!(nak_subject(&bee, 7, 3), "$JS.ACK.TODO.agent-bee.1.7.3.0.0");
    }
}
