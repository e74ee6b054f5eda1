//! The swarm's NATS objects, named in one place: every stream, KV bucket and subject
//! ([`names`]), the limits each must hold to so that one tenant cannot exhaust what all share
//! ([`limits`]), and creating them as the controller does at start ([`ensure`]).
//!
//! The controller, the permissions code (`hyperhive-nats-creds`), hive-c0re, hive-agent and their
//! tests all take their names from here, so a grant, a publish and the object it reaches cannot
//! disagree on a name. docs/architecture.md draws who writes which object.

pub mod ensure;
pub mod limits;
pub mod names;

pub use ensure::{Buckets, SetupError, ensure_objects, ensure_replicated_objects};
pub use names::*;
