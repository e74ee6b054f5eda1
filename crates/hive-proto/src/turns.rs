//! The turn history: one record per finished turn, published by hive-agent on its own
//! `turns.<agent>` into the `TURNS` stream (limits per subject, so one chatty agent ages out only
//! its own history), read by the controller for `GET /api/agents/{name}/turns`.
//!
//! A record is bounded whatever the turn did: the prompt is kept up to [`MAX_PROMPT_BYTES`], the
//! output's last [`MAX_OUTPUT_BYTES`] (the whole of it is in the agent's log, and recently in
//! the relay's terminal history), so a record always fits the stream's message size.

use serde::{Deserialize, Serialize};

/// The longest prompt a record keeps, in bytes (cut on a character boundary).
pub const MAX_PROMPT_BYTES: usize = 4 * 1024;
/// The most output a record keeps: the last bytes the turn wrote, stdout and stderr together.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The command exited 0.
    Succeeded,
    /// It exited non-zero or was killed by a signal it did not get from the agent.
    Failed,
    /// An operator cancelled it (`POST /api/agents/{name}/turn/cancel`); not retried.
    Cancelled,
    /// It ran past `HIVE_AGENT_TURN_TIMEOUT` and was killed; not retried.
    TimedOut,
    /// `sh` could not be started.
    NotStarted,
}

impl TurnOutcome {
    /// As written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Succeeded => "succeeded",
            TurnOutcome::Failed => "failed",
            TurnOutcome::Cancelled => "cancelled",
            TurnOutcome::TimedOut => "timed_out",
            TurnOutcome::NotStarted => "not_started",
        }
    }
}

/// One finished turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The todo's id (unique per agent; the record's id in the API).
    pub todo_id: String,
    /// Who asked: `schedule:<id>`, `operator:<who>`, ...
    pub source: String,
    /// The prompt, at most [`MAX_PROMPT_BYTES`].
    pub prompt: String,
    /// Whether the prompt was longer than what is kept.
    #[serde(default)]
    pub prompt_truncated: bool,
    /// When the turn started (RFC 3339, UTC).
    pub started_at: String,
    /// When it ended.
    pub ended_at: String,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: TurnOutcome,
    /// The command's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended `sh`, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The last [`MAX_OUTPUT_BYTES`] of what it wrote (invalid UTF-8 replaced).
    pub output: String,
    /// Bytes of output written before what is kept.
    #[serde(default)]
    pub output_dropped: u64,
}

/// The body of a cancel request on `cancel.<agent>` (the controller publishes, the agent
/// follows): the todo whose turn is to end. Naming the todo means a request sent just as a turn
/// ends cannot cancel the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// The running turn's todo.
    pub todo_id: String,
}

/// `s` cut to at most `max` bytes on a character boundary, and whether anything was cut.
pub fn truncate_to(s: &str, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s.to_owned(), false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_owned(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_the_documented_json() {
        let record = TurnRecord {
            todo_id: "t1".into(),
            source: "operator:swarmctl".into(),
            prompt: "hi".into(),
            prompt_truncated: false,
            started_at: "2026-12-02T09:00:00Z".into(),
            ended_at: "2026-12-02T09:00:01Z".into(),
            duration_ms: 1000,
            outcome: TurnOutcome::TimedOut,
            exit_code: None,
            signal: Some(9),
            output: "out".into(),
            output_dropped: 0,
        };
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(
            text,
            r#"{"todo_id":"t1","source":"operator:swarmctl","prompt":"hi","prompt_truncated":false,"started_at":"2026-12-02T09:00:00Z","ended_at":"2026-12-02T09:00:01Z","duration_ms":1000,"outcome":"timed_out","signal":9,"output":"out","output_dropped":0}"#
        );
        assert_eq!(serde_json::from_str::<TurnRecord>(&text).unwrap(), record);
        assert_eq!(TurnOutcome::TimedOut.as_str(), "timed_out");
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate_to("héllo", 2), ("h".to_owned(), true));
        assert_eq!(truncate_to("héllo", 3), ("hé".to_owned(), true));
        assert_eq!(truncate_to("hi", 2), ("hi".to_owned(), false));
    }
}
