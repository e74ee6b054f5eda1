//! hive-c0re: runs a hive's agents (services/hive-c0re/README.md). Parses the command and wires.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hive_c0re::config::Config;
use tokio::signal::unix::{SignalKind, signal};

/// Runs this hive's agents, converging each to its wanted state.
///
/// Settings are read from the environment (HIVE_C0RE_*); see the README.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon (the default).
    Run,
    /// Write a new xkey seed (0600; never over an existing file) and print its public key for
    /// the swarm's hive directory.
    Keygen {
        /// Where to write the seed.
        #[arg(long)]
        out: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Some(Command::Keygen { out }) => match hive_c0re::keygen::keygen(&out) {
            Ok(public) => {
                println!("{public}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hive-c0re keygen: {e}");
                ExitCode::FAILURE
            }
        },
        None | Some(Command::Run) => run().await,
    }
}

async fn run() -> ExitCode {
    hyperhive_logging::init("info,async_nats=off");
    let config = match Config::from_env(|name| std::env::var(name).ok()) {
        Ok(config) => config,
        Err(problems) => {
            for problem in problems {
                eprintln!("hive-c0re: {problem}");
            }
            return ExitCode::FAILURE;
        }
    };
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(e) => {
            eprintln!("hive-c0re cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupt"),
        }
    };
    match hive_c0re::daemon::run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hive-c0re: {e:#}");
            ExitCode::FAILURE
        }
    }
}
