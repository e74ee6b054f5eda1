//! swarm-authelia-bridge: a small HTTP service on the Authelia host that manages the swarm's
//! agent users in Authelia's file user database, behind a bearer token. The swarm controller
//! creates each agent's SSO user through it (docs/swarm/provisioning.md).
//!
//! # Layout
//! - [`config`]: settings from flags or the environment, checked at start.
//! - [`token`]: the bearer token, read from a file and compared in constant time.
//! - [`input`]: the rules for user names, groups, e-mail addresses, display names, passwords.
//! - [`database`]: the users file's document: reading users, creating, changing and removing
//!   managed ones, keeping everything else.
//! - [`users_file`]: reading the file and replacing it atomically, one writer at a time.
//! - [`password`]: argon2id hashes with Authelia's parameters.
//! - [`api`]: the HTTP routes.
//! - [`daemon`]: wiring and shutdown.

pub mod api;
pub mod config;
pub mod daemon;
pub mod database;
pub mod input;
pub mod password;
pub mod token;
pub mod users_file;
