//! Scheduled prompts on the controller's side: the `schedule-definitions` bucket, one
//! compare-and-set per change ([`store`]), and the pass that keeps every agent's key of
//! `agent-schedules` equal to what the definitions say ([`reconcile`]). The documents and their
//! validation are [`crate::definition`]'s.

pub mod reconcile;
pub mod store;
