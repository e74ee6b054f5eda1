//! Linked accounts: matrix, forge and GitHub accounts an operator gives one agent, beside the
//! accounts the swarm made for it (docs/swarm/linked-accounts.md).
//!
//! Each is checked against its server where there is one to ask ([`verify`]), sealed into the
//! secret store ([`store`]) and handed to the agent as a file in its secrets directory, through
//! a `credentials` message to its hive queued in the job graph. A listing names accounts, never
//! their credentials.
//!
//! # Layout
//! - [`account`]: kinds, names, the `PUT` bodies and their checks, listing lines.
//! - [`verify`]: `whoami` / `GET /api/v1/user` before storing; `logout` for `?revoke=true`.
//! - [`store`]: the records in the secret store.
//!
//! What the routes do with them, in order, and the delivery to the hive, is provisioning's
//! ([`crate::provision::linked_accounts`]): it queues jobs in the provisioning job graph.

pub mod account;
pub mod store;
pub mod verify;
