//! Reaching the swarm through the control plane (docs/swarm/remote.md).
//!
//! The controller is a **host** of the control plane: paired once ([`pair`]), it holds a link
//! ([`link`]) and answers clients' requests by running them through the same router and
//! handlers as the socket ([`requests`]). What travels inside the link's messages is in
//! [`frames`] (the API's wire crate, shared with `swarmctl --via`, the other end); [`outgoing`]
//! keeps each client's unacked messages bounded and [`rate`] its request rate.

pub use hyperhive_swarm_api::remote as frames;
pub mod link;
pub mod outgoing;
pub mod pair;
pub mod rate;
pub mod requests;

/// The environment variables of remote reach.
pub mod vars {
    /// The identity file `swarm-controller pair` wrote (default: `control-identity.json` in
    /// `SWARM_STATE_DIR`, when it exists).
    pub const CONTROL_IDENTITY: &str = "SWARM_CONTROL_IDENTITY";
    /// Requests a second each client may send through the control plane (default 20; bursts
    /// of five seconds' worth).
    pub const REMOTE_RATE: &str = "SWARM_REMOTE_RATE";
}

/// [`vars::REMOTE_RATE`] when it is not set.
pub const DEFAULT_RATE: u32 = 20;
