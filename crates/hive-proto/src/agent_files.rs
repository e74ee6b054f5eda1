//! The two files between hive-c0re and one running hive-agent. Files, not a socket: they work
//! the same under the process runner and under systemd's DynamicUser, survive a restart of either
//! side, and need no grant on NATS.
//!
//! - The **pause file** (`HIVE_AGENT_PAUSE_FILE`, written by hive-c0re): while it exists the
//!   agent takes no todo and fires no slot; a turn already running finishes.
//! - The **turn file** (`turn.json` in the agent's state directory, written by hive-agent,
//!   replaced atomically): what the agent is doing now, which hive-c0re reports in the hive's
//!   status.

use serde::{Deserialize, Serialize};

/// The environment variable naming the agent's pause file.
pub const PAUSE_FILE_VAR: &str = "HIVE_AGENT_PAUSE_FILE";
/// The turn file's name inside the agent's state directory.
pub const TURN_FILE: &str = "turn.json";
/// The largest turn file hive-c0re reads: what hive-agent writes is under 300 bytes, and every
/// agent's turn goes into one status of at most 1 MiB.
pub const MAX_TURN_FILE_BYTES: u64 = 4096;

/// What the agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Turn {
    /// Waiting for a todo.
    Idle,
    /// Running a turn.
    Working,
    /// Its pause file exists: taking nothing.
    Paused,
}

/// The content of the turn file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnState {
    /// What it is doing.
    pub turn: Turn,
    /// The todo being worked on, when working.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo_id: Option<String>,
    /// Since when (RFC 3339).
    pub since: String,
}
