//! hive-agent: one agent's harness (services/hive-agent/README.md). Parses configuration and wires.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use hive_agent::Agent;
use hive_agent::clock::SystemClock;
use hive_agent::config::Config;
use tokio::signal::unix::{SignalKind, signal};

/// One AI coding agent's harness: its todo queue, its turns and its schedule ticker.
///
/// Every setting is read from the environment (HIVE_AGENT_*) or the matching flag.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    config: Option<Config>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent (the default).
    Run(Config),
}

#[tokio::main]
async fn main() -> ExitCode {
    // async-nats reports through the event callback, which `connect` logs once in words an
    // operator can act on; its own lines would repeat them per attempt.
    hyperhive_logging::init("info,async_nats=off");
    let cli = Cli::parse();
    let config = match (cli.command, cli.config) {
        (Some(Command::Run(config)), _) | (None, Some(config)) => config,
        (None, None) => unreachable!("clap requires the settings when there is no subcommand"),
    };
    let agent = match Agent::start(config, Arc::new(SystemClock)).await {
        Ok(agent) => agent,
        Err(e) => {
            // One clear line, not a backtrace: this is what an operator reads in the journal.
            eprintln!("hive-agent cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut terminate = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: stopping"),
    }
    agent.stop().await;
    ExitCode::SUCCESS
}
