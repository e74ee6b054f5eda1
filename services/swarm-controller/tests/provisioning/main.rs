//! Agent creation end to end: `swarmctl agent create` against a controller provisioning in real
//! servers (see `harness`), the agent deployed to a hive-c0re, and what can go wrong on the way.

mod bad_input;
#[path = "../common/mod.rs"]
mod common;
mod create;
mod expiry;
mod faults;
mod harness;
mod linked;
mod refusals;
mod secrets;
