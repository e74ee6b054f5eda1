//! swarm-controller: the swarm-level daemon and its command line, swarmctl.
//!
//! # Layout
//! - [`config`]: the environment, read once.
//! - [`socket`]: the unix socket and its directory rule.
//! - [`definition`]: schedule documents, requests and validation (pure).
//! - [`schedules`]: `schedule-definitions`, one compare-and-set per change.
//! - [`reconcile`]: `agent-schedules`, written only when bytes change.
//! - [`nats`]: connecting, creating the buckets and stream, reading a bucket.
//! - [`api`]: the HTTP routes.
//! - [`daemon`]: wires them together ([`daemon::run`]).
//! - [`cli`]: the `swarm-controller` command line; [`swarmctl`]: the `swarmctl` one.
pub mod api;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod definition;
pub mod nats;
pub mod reconcile;
pub mod revoke;
pub mod schedules;
pub mod socket;
pub mod swarmctl;
