//! Relays: each agent's terminal and turn header, from the `RELAY` stream to server-sent events
//! (`GET /api/agents/{name}/terminal`, `GET /api/agents/{name}/turn`; docs/swarm/feeds.md).
//!
//! - [`hub`]: one live feed per watched subject (a single NATS consumer, however many watch),
//!   shared through a bounded broadcast channel.
//! - [`watch`]: one watcher: the history it missed (read by direct get from the sequence after
//!   its `Last-Event-ID`), then the live feed, every event once and in order; a watcher that
//!   cannot keep up is dropped (it resumes by id), never buffered without bound.
//! - [`frame`]: what an event carries: terminal bytes as text or base64, a turn header as JSON,
//!   a gap when history it asked for is gone.

pub mod frame;
pub mod hub;
pub mod watch;

pub use frame::{FeedKind, Frame};
pub use hub::FeedHub;
