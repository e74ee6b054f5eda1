//! How often a serving copy does its background work: the registry refresh, the membership
//! heartbeat and the code sweep. The copy's other parts size their own waits from these (a peer
//! is stale after missed heartbeats, a store check must answer within a refresh).

use std::time::Duration;

/// How often the registry is re-read (and the store's reachability checked).
pub const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// How often codes are swept (on a task of their own: however many codes wait, a sweep never
/// holds up the refresh, the heartbeat or the enforcement of forgets).
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// The membership heartbeat is written every this many refreshes.
pub const HEARTBEAT_EVERY_REFRESHES: u32 = 5;
/// How often the membership heartbeat is written.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(2 * HEARTBEAT_EVERY_REFRESHES as u64);
