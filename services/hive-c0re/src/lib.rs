//! hive-c0re: one per hive host. It runs the hive's agents (hive-agent processes), converges each
//! to the wanted state the controller declares, applies deploy messages sealed to the hive's
//! xkey, and publishes the hive's status. See services/hive-c0re/README.md.
//!
//! # Layout
//! - [`config`]: settings from the environment, all checked at start.
//! - [`keygen`]: `hive-c0re keygen`, the hive's sealing key.
//! - [`state`]: the state directory's layout and the agents' records.
//! - [`files`]: durable, atomic file writes (0600 for secrets).
//! - [`runner`]: starting agents as child processes or as systemd units.
//! - [`supervisor`]: one task per agent: convergence, backoff, crash loops.
//! - [`registry`]: the agents this hive knows; where wanted states and deploys are applied.
//! - [`board`]: each agent's status, shared with the publisher.
//! - [`nats`]: the connection with the hive's credential.
//! - [`wanted`]: the wanted-state consumer and the direct gets at start.
//! - [`deploy`]: the deploy consumer.
//! - [`status`]: the status publisher.
//! - [`daemon`]: wiring and shutdown.

pub mod agent_file;
pub mod board;
pub mod config;
pub mod daemon;
pub mod deploy;
pub mod files;
pub mod keygen;
pub mod nats;
pub mod registry;
pub mod runner;
pub mod state;
pub mod status;
pub mod supervisor;
pub mod wanted;

/// Now, as RFC 3339 (UTC, whole seconds).
pub fn now() -> String {
    hyperhive_schedule::format_instant(hyperhive_schedule::whole_seconds_utc(time::OffsetDateTime::now_utc()))
}
