//! The swarm's NATS objects, named in one place: every stream, KV bucket and subject
//! ([`names`]), the limits each must hold to so that one tenant cannot exhaust what all share
//! ([`limits`]), creating them as the controller does at start ([`ensure`]), and the tenants'
//! durable consumers, which the controller makes and the tenants only bind to ([`consumers`]).
//!
//! The controller, the permissions code (`hyperhive-nats-creds`), hive-c0re, hive-agent and their
//! tests all take their names from here, so a grant, a publish and the object it reaches cannot
//! disagree on a name. docs/architecture.md draws who writes which object.

pub mod consumers;
pub mod ensure;
pub mod limits;
pub mod names;

pub use consumers::{
    BindError, DurableConsumer, Ensured, agent_consumer, hive_consumers, hive_deploy_consumer, hive_wanted_consumer,
};
pub use ensure::{Buckets, SetupError, ensure_objects, ensure_replicated_objects};
pub use names::*;
