//! swarm-controller: the swarm-level daemon. Its command line, swarmctl, is a package of its
//! own; both speak the API through the wire types of `hyperhive-swarm-api`.
//!
//! # Layout
//! Folders by domain, each importing only from the ones listed before it (and from the shared
//! crates), never from one after it:
//! - [`clock`]: the wall clock, behind a trait; [`config`]: the environment, read once;
//!   [`socket`]: the unix socket and its directory rule.
//! - [`nats`]: connecting, what a failed write means, reading a whole bucket; the NATS accounts
//!   changed while the swarm runs ([`nats::tenants`]) and how the running server learns them
//!   ([`nats::claims`]). The streams and buckets themselves are `hyperhive_nats_objects`'.
//! - [`definition`]: schedule documents, requests and validation (pure); [`schedules`]: the
//!   definitions bucket, one compare-and-set per change, and the reconcile pass that keeps
//!   `agent-schedules` equal to it.
//! - [`lifecycle`]: hives and their statuses, the roster, wanted state, deploy messages and the
//!   revocation of destroyed agents.
//! - [`secrets`]: the sealed secret store; [`forge`]: the swarm's forge objects, the webhook,
//!   config pull requests and the issue report; [`provision`]: creating agents through the job
//!   graph and keeping their credentials healthy; [`linked`]: accounts an operator links to one
//!   agent.
//! - [`feeds`]: agents' terminal feeds and turn headers as server-sent events; [`work`]: prompts
//!   queued now, an agent's queue, cancelling its turn, its turn history.
//! - [`ui`]: the swarm UI's files, agent icons and quick links.
//! - [`audit`]: the log of every state-changing request; [`api`]: the HTTP routes; [`remote`]:
//!   the controller as a host of the control plane.
//! - [`heap`]: the live heap bytes a benchmark reads (the `heap-stats` feature).
//! - [`daemon`]: wires them together ([`daemon::run`]); [`cli`]: the `swarm-controller`
//!   command line; [`init`]: every key and credential of a new swarm at once.
pub mod api;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod definition;
pub mod feeds;
pub mod files;
pub mod forge;
pub mod heap;
pub mod init;
pub mod lifecycle;
pub mod linked;
pub mod nats;
pub mod provision;
pub mod remote;
pub mod schedules;
pub mod secrets;
pub mod socket;
pub mod ui;
pub mod work;
