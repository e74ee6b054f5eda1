//! hive-agent: one agent's harness (DESIGN.md section 4.5).
use clap::Parser;

/// One AI coding agent's harness: its todo queue, its turns and its schedule ticker.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {}

fn main() {
    Cli::parse();
}
