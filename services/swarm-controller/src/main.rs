//! swarm-controller: the swarm-level daemon (DESIGN.md section 4.4).
use clap::Parser;

/// The swarm-level daemon: swarm state in NATS, an HTTP API on a unix socket, schedules.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    Cli::parse();
}
