//! swarm-controller: parses the command line and the environment, then runs the daemon or a
//! credential helper from the library.
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use swarm_controller::cli::{Cli, Command};
use swarm_controller::clock::SystemClock;
use swarm_controller::config::Config;
use tokio::signal::unix::{SignalKind, signal};

fn main() -> ExitCode {
    let cli = Cli::parse();
    hyperhive_logging::init("info");
    let outcome = match cli.command {
        None | Some(Command::Serve) => serve(),
        Some(Command::Nats(command)) => command.run(),
        Some(Command::SecretsKey { out }) => swarm_controller::cli::write_secrets_key(&out),
        Some(Command::Pair { code, name, identity }) => swarm_controller::cli::pair(&code, &name, identity.as_deref()),
        Some(Command::StoreCa { out_dir, name }) => swarm_controller::cli::write_store_ca(&out_dir, &name),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("swarm-controller: {err}");
            ExitCode::FAILURE
        }
    }
}

fn serve() -> Result<(), String> {
    let config = Config::from_env().map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| format!("starting tokio: {e}"))?;
    runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let shutdown = async move {
            tokio::select! {
                _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
            }
        };
        swarm_controller::daemon::run(config, Arc::new(SystemClock), shutdown).await.map_err(|e| e.to_string())
    })
}
