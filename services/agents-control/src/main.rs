//! agents-control: the control plane (DESIGN.md section 3).
use clap::Parser;

/// The hyperhive control plane: pairing, the device registry in a shared bucket, and the
/// WebSocket relay between clients and hosts. Run two or more copies behind a TLS load balancer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    Cli::parse();
}
