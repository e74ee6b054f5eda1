//! agents-control: the control plane (docs/control-plane/README.md; how it fits with the rest:
//! docs/architecture.md).
//!
//! # Layout
//! - [`config`]: every setting, checked; [`key`]: the control key.
//! - [`records`]: the JSON records and their keys in the store; [`clock`]: time, injectable.
//! - [`codes`]: making and sweeping codes; [`pairing`]: redeeming them (`POST /v1/pair`).
//! - [`registry`]: listing and forgetting devices, and the in-memory copy a serving copy uses.
//! - [`copy`]: `store copy`; [`pin`]: certificate pins.
//! - [`limits`]: what unproven parties may cost a copy (connections, store lookups).
//! - [`control`], [`server`], [`http`], [`metrics`], [`membership`], [`serve`]: a running copy;
//!   [`cadence`]: how often it refreshes, beats and sweeps.
//! - [`link`]: the device link `GET /v1/link`; [`sessions`]: the devices connected here;
//!   [`requests`]: what clients ask over their link.
//! - [`peers`]: finding the other copies; [`peer_link`]: the link between two copies `GET /v1/peer`;
//!   [`peer_confirm`]: waiting until the linked copies handled what this one told them.
//! - [`cli`]: the command line; `main.rs` only calls it.

pub mod cadence;
pub mod cli;
pub mod clock;
pub mod codes;
pub mod config;
pub mod control;
pub mod copy;
pub mod http;
pub mod key;
pub mod limits;
pub mod link;
pub mod membership;
pub mod metrics;
pub mod pairing;
pub mod peer_confirm;
pub mod peer_crypto;
pub mod peer_link;
pub mod peers;
pub mod pin;
pub mod records;
pub mod registry;
pub mod requests;
pub mod serve;
pub mod server;
pub mod sessions;
pub mod wire;
