//! swarm-controller: the swarm-level daemon. Its command line, swarmctl, is a package of its
//! own; both speak the API through the wire types of `hyperhive-swarm-api`.
//!
//! # Layout
//! - [`config`]: the environment, read once.
//! - [`socket`]: the unix socket and its directory rule.
//! - [`definition`]: the rules of schedule documents and requests: validation, changes (pure).
//! - [`schedules`]: `schedule-definitions`, one compare-and-set per change.
//! - [`reconcile`]: `agent-schedules`, written only when bytes change.
//! - [`nats`]: connecting, creating the buckets and stream, reading a bucket.
//! - [`hives`]: hive statuses and their age; [`roster`]: the roster and its sync from statuses;
//!   [`wanted`]: wanted state, one compare-and-set per change; [`revoke`]: revoking a destroyed
//!   agent's credentials; [`deploy`]: sending sealed deploy messages to a hive.
//! - [`accounts`]: NATS accounts changed while the swarm runs (an agent created or revoked),
//!   given to the running server by [`claims`] through the system account.
//! - [`linked`]: accounts an operator links to one agent (matrix, forge, GitHub).
//! - [`provision`]: creating agents through the job graph (`POST /api/agents`) and keeping
//!   their credentials healthy; [`secrets`]: the sealed secret store it keeps them in.
//! - [`forge`]: the swarm's forge objects (organisation, team, labels, webhook), the webhook
//!   secret, config pull requests (`config-prs`) and the issue report.
//! - [`relay`]: agents' terminals and turn headers as server-sent events.
//! - [`ui`]: the swarm UI's files, agent icons and quick links.
//! - [`api`]: the HTTP routes.
//! - [`remote`]: the controller as a host of the control plane: pairing, the link, clients'
//!   requests through the same routes.
//! - [`daemon`]: wires them together ([`daemon::run`]) and holds the job graph (`hive-jobq`).
//! - [`cli`]: the `swarm-controller` command line.
pub mod accounts;
pub mod api;
pub mod claims;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod definition;
pub mod deploy;
pub mod forge;
pub mod hives;
pub mod linked;
pub mod nats;
pub mod provision;
pub mod reconcile;
pub mod relay;
pub mod remote;
pub mod revoke;
pub mod roster;
pub mod schedules;
pub mod secrets;
pub mod socket;
pub mod ui;
pub mod wanted;
