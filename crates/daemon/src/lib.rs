//! What every hyperhive daemon does the same way: read its settings, stop, and own its socket.
//!
//! - [`settings`]: settings are text by variable name (from the environment, or clap arguments
//!   that mirror it); a [`settings::Check`] collects every problem so an operator sees them all
//!   at once, one line each naming the variable and what to write; durations are humantime
//!   (`30s`, `5m`); a renamed variable is still read for one release, with a warning.
//! - [`tasks`]: every background task runs on one [`tasks::Tasks`] (a cancellation token and a
//!   task tracker); SIGTERM and SIGINT cancel it, and the daemon waits, within a bound, for its
//!   tasks to finish.
//! - [`socket`]: a unix socket's file is removed when its [`socket::SocketFile`] is dropped, so
//!   no exit path (an early start error included) leaves it behind.

pub mod settings;
pub mod socket;
pub mod tasks;
