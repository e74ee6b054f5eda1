//! Hive status: KV `hive-status`, key `<hive>`, written by that hive's hive-c0re every
//! [`PUBLISH_EVERY`] and at once on a change.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::roster::Origin;
use crate::wanted::WantedState;
use crate::{AgentName, HiveName};

/// How often a hive publishes its status when nothing changes.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(15);
/// A status older than this is shown as stale: its hive-c0re (or its link to NATS) is down.
pub const STALE_AFTER: Duration = Duration::from_secs(45);
/// At most this many lines of a failed agent's log are kept in its status.
pub const LOG_TAIL_LINES: usize = 20;
/// ...and at most this many bytes of them.
pub const LOG_TAIL_BYTES: usize = 2048;

/// What an agent is actually doing on its hive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActualState {
    /// Being started (or restarted after a crash, waiting out its backoff).
    Starting,
    /// Running and working.
    Running,
    /// Running, taking no todos and firing no slots.
    Paused,
    /// Not running (wanted `offline` or `destroyed`, or not deployed yet).
    Stopped,
    /// Crashed repeatedly; hive-c0re gave up until the wanted state changes or it restarts.
    Failed,
}

impl ActualState {
    /// The state as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ActualState::Starting => "starting",
            ActualState::Running => "running",
            ActualState::Paused => "paused",
            ActualState::Stopped => "stopped",
            ActualState::Failed => "failed",
        }
    }
}

/// How an agent's process last ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal, when it was killed by one.
    pub signal: Option<i32>,
    /// When (RFC 3339).
    pub at: String,
}

/// One agent's part of its hive's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentStatus {
    /// Declared on the hive, or deployed to it.
    pub origin: Origin,
    /// The wanted state the hive is converging to.
    pub wanted: WantedState,
    /// What the agent is doing.
    pub actual: ActualState,
    /// Since when it is in `actual` (RFC 3339).
    pub since: String,
    /// Restarts after a crash since hive-c0re started.
    pub restarts: u32,
    /// How its process last ended, if it ever did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<ExitInfo>,
    /// The last lines of its log, kept for a `failed` agent (at most [`LOG_TAIL_LINES`] lines and
    /// [`LOG_TAIL_BYTES`] bytes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
    /// The agent's turn state as it last wrote it, if running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<crate::agent_files::TurnState>,
    /// The last deploy revision applied, for a deployed agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// What hive-c0re could not read of the files the agent writes (its turn file of the wrong
    /// type, too large or unreadable): the agent's problem, reported here, not the hive's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The value of `hive-status` key `<hive>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiveStatus {
    /// The hive (equal to the key).
    pub hive: HiveName,
    /// hive-c0re's version.
    pub version: String,
    /// When this hive-c0re started (RFC 3339).
    pub started_at: String,
    /// When this status was published (RFC 3339).
    pub published_at: String,
    /// The host's load averages over 1, 5 and 15 minutes.
    pub load: [f64; 3],
    /// Every agent of the hive.
    pub agents: BTreeMap<AgentName, AgentStatus>,
}

/// Trims a log to what a status keeps: the last [`LOG_TAIL_LINES`] lines, then as many of those
/// (from the end) as fit in [`LOG_TAIL_BYTES`]; a single longer line is cut at a char boundary.
pub fn log_tail<'a>(lines: impl DoubleEndedIterator<Item = &'a str>) -> Vec<String> {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for line in lines.rev().take(LOG_TAIL_LINES) {
        let room = LOG_TAIL_BYTES - bytes;
        if room == 0 {
            break;
        }
        let mut cut = line.len().min(room);
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        bytes += cut;
        kept.push(line[..cut].to_owned());
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn short_logs_are_kept_whole() {
        assert_eq!(log_tail(["a", "b"].into_iter()), ["a", "b"]);
        assert!(log_tail(std::iter::empty()).is_empty());
    }

    proptest! {
        #[test]
        fn a_tail_is_bounded_and_ends_with_the_last_line(lines in proptest::collection::vec(".{0,300}", 0..60)) {
            let tail = log_tail(lines.iter().map(String::as_str));
            prop_assert!(tail.len() <= LOG_TAIL_LINES);
            prop_assert!(tail.iter().map(String::len).sum::<usize>() <= LOG_TAIL_BYTES);
            if let (Some(last), Some(kept)) = (lines.last(), tail.last()) {
                prop_assert!(last.starts_with(kept.as_str()));
            }
        }
    }
}
