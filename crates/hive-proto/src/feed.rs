//! What hive-agent relays to whoever watches it, through the `RELAY` stream: its terminal (the
//! turn command's output, as raw chunks on `term.<agent>`) and its turn header (this document, as
//! JSON on `turn.<agent>`, published on every change).

use serde::{Deserialize, Serialize};

/// What the agent is doing, as its watchers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayState {
    /// Waiting for a todo; its last turn, if any, succeeded.
    Idle,
    /// Running a turn.
    Working,
    /// Its pause file exists: taking nothing.
    Paused,
    /// Waiting for a todo; its last turn failed (non-zero exit, killed, timed out).
    Failed,
}

/// The header on `turn.<agent>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnHeader {
    /// What it is doing.
    pub state: RelayState,
    /// The todo being worked on (working), or of the last turn (idle, failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo_id: Option<String>,
    /// That todo's source (`schedule:<id>`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When that turn started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When this header was published (RFC 3339).
    pub at: String,
}
