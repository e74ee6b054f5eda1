//! One way every hyperhive binary sets up its logs, so they look and filter alike.
//!
//! Logs go to stderr (stdout is for a command's answer: `agents-control code` prints only the code,
//! `swarmctl --json` only JSON). Colours only when stderr is a terminal: under systemd, in a
//! container or in a test's log file, escape codes would only garble the text.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `RUST_LOG` wins when set and valid; otherwise
/// `default_directives` (e.g. `"info"` or `"info,async_nats=off"`).
pub fn init(default_directives: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_directives));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
