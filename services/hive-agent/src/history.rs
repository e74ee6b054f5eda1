//! The turn history: when a turn ends, its record goes to the agent's own `turns.<agent>` in
//! `TURNS` (the only history subject its credential may publish to), with a message id per todo
//! so a record published again after a crash or a lost ack is stored once. It is published beside
//! the queue, never holding the next todo; a record still being retried when the agent stops is
//! lost (the agent's log has the turn).

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream;
use hyperhive_hive_proto::turns::{MAX_PROMPT_BYTES, TurnOutcome, TurnRecord, truncate_to};
use hyperhive_nats_objects::agent_turns_subject;
use hyperhive_schedule::{AgentName, Todo, format_instant};
use time::OffsetDateTime;
use tracing::warn;

use crate::output_tail::OutputTail;
use crate::turn::TurnEnd;

/// Publishes tried before the record is given up (the turn's todo is acked either way: the record
/// is what an operator reads, the todo's outcome is already in the state db).
const PUBLISH_ATTEMPTS: u32 = 5;
/// The pause between two attempts.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How a turn went, for its record.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// When it started.
    pub started: OffsetDateTime,
    /// When it ended.
    pub ended: OffsetDateTime,
    /// How (`Err`: `sh` could not be started or waited for).
    pub end: Result<TurnEnd, ()>,
}

/// The record of `todo`'s turn.
pub fn record_of(todo: &Todo, ended: Ended, tail: &OutputTail) -> TurnRecord {
    use std::os::unix::process::ExitStatusExt;
    let (outcome, exit_code, signal) = match ended.end {
        Ok(TurnEnd::Exited(status)) if status.success() => (TurnOutcome::Succeeded, status.code(), None),
        Ok(TurnEnd::Exited(status)) => (TurnOutcome::Failed, status.code(), status.signal()),
        Ok(TurnEnd::TimedOut) => (TurnOutcome::TimedOut, None, None),
        Ok(TurnEnd::Cancelled) => (TurnOutcome::Cancelled, None, None),
        Err(()) => (TurnOutcome::NotStarted, None, None),
    };
    let (prompt, prompt_truncated) = truncate_to(&todo.body, MAX_PROMPT_BYTES);
    let (output, output_dropped) = tail.text();
    let duration = (ended.ended - ended.started).whole_milliseconds().max(0);
    TurnRecord {
        todo_id: todo.id.clone(),
        source: todo.source.clone(),
        prompt,
        prompt_truncated,
        started_at: format_instant(ended.started),
        ended_at: format_instant(ended.ended),
        duration_ms: u64::try_from(duration).unwrap_or(u64::MAX),
        outcome,
        exit_code,
        signal,
        output,
        output_dropped,
    }
}

/// Where this agent's records go.
#[derive(Debug, Clone)]
pub struct History {
    js: jetstream::Context,
    subject: String,
    agent: AgentName,
}

impl History {
    /// The history of `agent`.
    pub fn new(js: jetstream::Context, agent: &AgentName) -> Self {
        Self { js, subject: agent_turns_subject(agent), agent: agent.clone() }
    }

    /// Stores `record`, retrying across a reconnect; says in the log when it could not.
    pub async fn record(&self, record: &TurnRecord) {
        let payload: bytes::Bytes = serde_json::to_vec(record).expect("a record serializes").into();
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("turn:{}:{}", self.agent, record.todo_id).as_str());
        for attempt in 1..=PUBLISH_ATTEMPTS {
            let stored =
                match self.js.publish_with_headers(self.subject.clone(), headers.clone(), payload.clone()).await {
                    Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
            match stored {
                Ok(()) => return,
                Err(e) if attempt < PUBLISH_ATTEMPTS => {
                    warn!(todo = %record.todo_id, attempt, "turn record not stored yet, retrying: {e}");
                    tokio::time::sleep(RETRY_DELAY).await;
                }
                Err(e) => {
                    warn!(todo = %record.todo_id, "turn record not stored; its turn is missing from the history: {e}")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_how_the_turn_ended() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        use time::macros::datetime;
        let todo = Todo { id: "t".into(), source: "operator:me".into(), body: "é".repeat(MAX_PROMPT_BYTES) };
        let at = datetime!(2026-12-02 09:00:00 UTC);
        let ended = |end| Ended { started: at, ended: at + time::Duration::milliseconds(1500), end };
        let tail = OutputTail::default();
        let cases = [
            (Ok(TurnEnd::Exited(ExitStatus::from_raw(0))), TurnOutcome::Succeeded, Some(0), None),
            (Ok(TurnEnd::Exited(ExitStatus::from_raw(3 << 8))), TurnOutcome::Failed, Some(3), None),
            (Ok(TurnEnd::Exited(ExitStatus::from_raw(9))), TurnOutcome::Failed, None, Some(9)),
            (Ok(TurnEnd::TimedOut), TurnOutcome::TimedOut, None, None),
            (Ok(TurnEnd::Cancelled), TurnOutcome::Cancelled, None, None),
            (Err(()), TurnOutcome::NotStarted, None, None),
        ];
        for (end, outcome, code, signal) in cases {
            let record = record_of(&todo, ended(end), &tail);
            assert_eq!((record.outcome, record.exit_code, record.signal), (outcome, code, signal), "{end:?}");
            assert_eq!(record.duration_ms, 1500);
            assert!(record.prompt_truncated && record.prompt.len() <= MAX_PROMPT_BYTES);
            assert_eq!(record.started_at, "2026-12-02T09:00:00Z");
        }
    }
}
