//! swarmctl: the command line for swarm-controller's API.
use clap::Parser;

/// Drives swarm-controller over its unix socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    Cli::parse();
}
