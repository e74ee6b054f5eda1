//! The external systems an agent is provisioned in, one trait each with a real implementation,
//! so the controller's job graph drives them without knowing their wire formats (see
//! docs/swarm/provisioning.md).
//!
//! # Layout
//! - [`sso`]: the agent's SSO user, through `swarm-authelia-bridge`.
//! - [`forge`]: the forge user, config repo and token (Forgejo/Gitea v1 REST API).
//! - [`matrix`]: the agent's matrix account (Synapse).
//! - [`store_ca`]: the agent's short-lived X.509 client certificate from the swarm's store CA.
//! - [`secret`]: [`Secret`], a string that never shows in logs, errors or `Debug`.
//! - [`retry`]: [`Retryable`], which of each adapter's errors are worth a retry.

pub mod forge;
pub mod matrix;
pub mod retry;
pub mod secret;
pub mod sso;
pub mod store_ca;

pub use retry::Retryable;
pub use secret::Secret;
