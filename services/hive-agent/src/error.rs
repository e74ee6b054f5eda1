//! Why the agent cannot start ([`AgentError`]: it exits saying what to fix), and why one pass of
//! the ticker or the consumer failed ([`LoopError`]: logged, and the loop retries, so each says
//! which step failed).

use hyperhive_schedule::DocError;

use crate::state::StateError;

/// Why the agent cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The credential file is missing, malformed or expired.
    #[error("credential: {0}")]
    Creds(String),
    /// The NATS connection could not be set up.
    #[error("NATS: {0}")]
    Nats(String),
    /// The state db could not be opened.
    #[error(transparent)]
    State(#[from] StateError),
}

/// A failed tick or consumer pass.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The state db.
    #[error(transparent)]
    State(#[from] StateError),
    /// The agent's key in `agent-schedules` holds something the agent cannot read.
    #[error("its agent-schedules key: {0}")]
    Doc(#[from] DocError),
    /// A NATS request or publish failed (a refused one shows up as a timeout).
    #[error("NATS, {action}: {source}")]
    Nats {
        /// The step ("reading its schedules", "publishing a todo", ...).
        action: &'static str,
        /// The client's error.
        #[source]
        source: async_nats::Error,
    },
}

/// Maps a NATS client error to [`LoopError::Nats`] naming the step.
pub fn nats<E: Into<async_nats::Error>>(action: &'static str) -> impl FnOnce(E) -> LoopError {
    move |e| LoopError::Nats { action, source: e.into() }
}
