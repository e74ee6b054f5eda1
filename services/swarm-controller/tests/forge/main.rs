//! The swarm's forge objects, the signed webhook, `config-prs` and the issue report, end to
//! end: the swarm-controller binary against a JWT-mode nats-server and the forge stand-in,
//! which delivers its webhooks over HTTP through a real Caddy in front of the controller's
//! unix socket (see `harness`).

mod bad_input;
#[path = "../common/mod.rs"]
mod common;
mod harness;
mod healing;
mod objects;
mod secrets;
mod swarmctl;
mod webhooks;
