//! Helpers of the control-plane benchmark: copies as processes, paired devices, a raw link for
//! timing single frames, the WebSocket echo baseline, and percentiles.

pub mod cluster;
pub mod devices;
pub mod echo;
pub mod raw_link;
pub mod stats;
