//! Who may do what: three roles, each allowing what the one below it does and more. `viewer`
//! reads everything but the audit log (every other GET, the terminals); `operator` also gives
//! agents work and moves them (prompts, cancels, pause, up, offline, schedules, icons, job
//! retries); `admin` also creates and destroys agents, holds their keys (secrets, linked
//! accounts) and reads the audit log.
//!
//! The type is the control plane's, whose pairing codes carry a client's role.

pub use hyperhive_control_proto::role::{Role, UnknownRole};
