//! Every agent's last finished turn in the controller's memory, for the overview's counts: one
//! ordered consumer of `TURNS` delivers each agent's latest record, then every new one as turns
//! end, so counting the swarm's last turns reads nothing per agent.
//!
//! Records arrive in the stream's order, so a later one replaces an earlier one. Nothing is
//! answered until the consumer has delivered every agent's latest record, nor while it is being
//! made again after a failure (it then starts over from each agent's latest).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::turns::{TurnRecord, truncate_to};
use hyperhive_nats_objects::TURNS_STREAM;
use hyperhive_swarm_api::work::LastTurn;

/// How long to wait before following again after the consumer failed.
const REFOLLOW_AFTER: Duration = Duration::from_secs(1);

/// The longest todo id or source kept: an agent writes its own records, and one that writes
/// long ones must not make the controller hold them.
const LONGEST_FIELD: usize = 256;

/// An agent's last turn and the stream sequence that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// Where `TURNS` stored it: later turns have larger ones.
    pub sequence: u64,
    /// The turn.
    pub turn: LastTurn,
}

/// Every agent's last turn, while it follows `TURNS`. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct LastTurns {
    inner: Arc<Mutex<Known>>,
}

#[derive(Debug, Default)]
struct Known {
    /// Whether every agent's latest record is in and new ones are followed.
    following: bool,
    latest: HashMap<AgentName, Latest>,
}

impl LastTurns {
    /// `read` of every agent's last turn, or `None` while this does not follow `TURNS`.
    pub fn read<R>(&self, read: impl FnOnce(&HashMap<AgentName, Latest>) -> R) -> Option<R> {
        let known = self.known();
        known.following.then(|| read(&known.latest))
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn forget(&self) {
        let mut known = self.known();
        known.following = false;
        known.latest.clear();
    }

    /// Follows `TURNS` for as long as it runs, starting over after a failure. Nothing is
    /// answered meanwhile, nor once it is dropped.
    pub async fn follow(self, js: jetstream::Context) {
        let _forgotten_when_dropped = Forgotten(&self);
        loop {
            self.forget();
            if let Err(err) = self.consume(&js).await {
                tracing::warn!(%err, "cannot follow the agents' last turns; following again");
            }
            tokio::time::sleep(REFOLLOW_AFTER).await;
        }
    }

    /// Every agent's latest record, then each new one, until the consumer fails.
    async fn consume(&self, js: &jetstream::Context) -> Result<(), String> {
        let stream = js.get_stream_no_info(TURNS_STREAM).await.map_err(|e| e.to_string())?;
        let consumer = stream
            .create_consumer(consumer::push::OrderedConfig {
                deliver_subject: js.client().new_inbox(),
                filter_subject: "turns.*".into(),
                deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                replay_policy: consumer::ReplayPolicy::Instant,
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        if consumer.cached_info().num_pending == 0 {
            self.known().following = true;
        }
        let mut records = consumer.messages().await.map_err(|e| e.to_string())?;
        while let Some(message) = records.next().await {
            let message = message.map_err(|e| e.to_string())?;
            let info = message.info().map_err(|e| e.to_string())?;
            let (sequence, caught_up) = (info.stream_sequence, info.pending == 0);
            self.recorded(&message.subject, sequence, &message.payload);
            if caught_up {
                self.known().following = true;
            }
        }
        Err("the consumer ended".into())
    }

    /// `turns.<agent>` recorded `payload` at `sequence`. A record that does not parse (only a
    /// hostile agent writes one) leaves its agent without a last turn, as a direct read of it
    /// would.
    fn recorded(&self, subject: &str, sequence: u64, payload: &[u8]) {
        let Some(agent) = subject.strip_prefix("turns.").and_then(|name| AgentName::parse(name).ok()) else {
            return;
        };
        let mut known = self.known();
        match serde_json::from_slice::<TurnRecord>(payload) {
            Ok(record) => {
                let mut turn = LastTurn::from(&record);
                turn.todo_id = truncate_to(&turn.todo_id, LONGEST_FIELD).0;
                turn.source = truncate_to(&turn.source, LONGEST_FIELD).0;
                turn.ended_at = truncate_to(&turn.ended_at, LONGEST_FIELD).0;
                known.latest.insert(agent, Latest { sequence, turn });
            }
            Err(_) => {
                known.latest.remove(&agent);
            }
        }
    }
}

/// Forgets everything when [`LastTurns::follow`] ends, so a frozen picture is never answered.
struct Forgotten<'a>(&'a LastTurns);

impl Drop for Forgotten<'_> {
    fn drop(&mut self) {
        self.0.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_hive_proto::turns::TurnOutcome;

    fn record(todo_id: &str, outcome: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "todo_id": todo_id, "source": "operator:ann", "prompt": "p", "started_at": "2026-12-01T00:00:00Z",
            "ended_at": "2026-12-01T00:00:01Z", "duration_ms": 1000, "outcome": outcome, "output": "",
        }))
        .unwrap()
    }

    #[test]
    fn the_latest_record_of_an_agent_is_its_last_turn_and_an_unreadable_one_clears_it() {
        let turns = LastTurns::default();
        turns.recorded("turns.bee", 3, &record("t1", "failed"));
        assert_eq!(turns.read(|l| l.len()), None, "nothing is answered before it follows");
        turns.known().following = true;
        turns.recorded("turns.bee", 4, &record("t2", "succeeded"));
        turns.recorded("turns.ant", 5, &record(&"x".repeat(10_000), "timed_out"));
        turns.recorded("turns.Not-A-Name!", 6, &record("t3", "failed"));
        let bee = AgentName::parse("bee").unwrap();
        let ant = AgentName::parse("ant").unwrap();
        let seen = turns.read(|l| (l.get(&bee).cloned(), l.get(&ant).cloned(), l.len())).unwrap();
        let (bee_last, ant_last, count) = seen;
        assert_eq!(
            bee_last.map(|l| (l.sequence, l.turn.todo_id, l.turn.outcome)),
            Some((4, "t2".into(), TurnOutcome::Succeeded))
        );
        assert_eq!(ant_last.map(|l| l.turn.todo_id.len()), Some(LONGEST_FIELD), "a long todo id is cut");
        assert_eq!(count, 2, "a subject that is no agent's name is left out");
        turns.recorded("turns.bee", 7, b"not json");
        assert_eq!(turns.read(|l| l.contains_key(&bee)), Some(false));
        turns.forget();
        assert_eq!(turns.read(|l| l.len()), None);
    }
}
