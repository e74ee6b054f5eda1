//! swarm-authelia-bridge: parses the settings and wires (see the library's docs).

use std::process::ExitCode;

use clap::Parser;
use swarm_authelia_bridge::config::{Config, Settings};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> ExitCode {
    let settings = Settings::parse();
    hyperhive_logging::init("info");
    let config = match Config::from_settings(settings) {
        Ok(config) => config,
        Err(problems) => {
            for problem in problems {
                eprintln!("swarm-authelia-bridge: {problem}");
            }
            return ExitCode::FAILURE;
        }
    };
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(e) => {
            eprintln!("swarm-authelia-bridge cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupt"),
        }
    };
    match swarm_authelia_bridge::daemon::run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("swarm-authelia-bridge: {e:#}");
            ExitCode::FAILURE
        }
    }
}
