//! The swarm controller's HTTP API as it travels: what swarm-controller reads and answers and
//! what swarmctl sends and reads, in one place so the two cannot drift apart.
//!
//! Wire types only: serde shapes, the paths of the routes, the body limits and the messages of
//! the API through the control plane. What a request must satisfy beyond its shape (a name's
//! length, an agent on the roster) is checked by the controller, which owns those rules.
//!
//! # Layout
//! - [`schedules`]: the schedule document as shown, its view with the revision, the create and
//!   change bodies.
//! - [`hives`]: the hive directory and hive statuses as listed.
//! - [`agents`]: the roster as listed, the wanted state change, the agent create request.
//! - [`linked`]: linked-account bodies and listings.
//! - [`secrets`]: secret variables as listed and the answer to a change.
//! - [`jobs`]: the job graph's snapshot (the job graph's own types).
//! - [`forge`]: config pull requests and the issue report.
//! - [`error`]: the error body every refusal carries.
//! - [`paths`]: the path of each route, its segments percent-encoded.
//! - [`limits`]: the largest body each route reads.
//! - [`remote`]: the API through the control plane, as messages inside the link.
//! - [`work`]: prompts, an agent's queue and its turn history.
//! - [`overview`]: the swarm in counts, for the UI's overview.
//!
//! Every type here is tested against the JSON the API documents (docs/swarm/schedules.md,
//! docs/swarm/remote.md): a field renamed on one side fails a test.

pub mod agents;
pub mod audit;
pub mod error;
pub mod forge;
pub mod hives;
pub mod jobs;
pub mod limits;
pub mod linked;
pub mod overview;
pub mod paths;
pub mod remote;
pub mod roles;
pub mod schedules;
pub mod secrets;
pub mod work;

/// Where the controller serves its API and swarmctl looks for it when neither
/// `SWARM_CONTROLLER_SOCKET` nor `--socket` says otherwise. Fixed: the NixOS module, the docs
/// and operators' scripts name it.
pub const DEFAULT_SOCKET: &str = "/run/swarm-controller/controller.sock";

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_socket_is_pinned() {
        assert_eq!(super::DEFAULT_SOCKET, "/run/swarm-controller/controller.sock");
    }
}
