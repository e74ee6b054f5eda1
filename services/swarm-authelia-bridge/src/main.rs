//! swarm-authelia-bridge: parses the settings and wires (see the library's docs).

use std::process::ExitCode;

use clap::Parser;
use swarm_authelia_bridge::config::{Config, Settings};

#[tokio::main]
async fn main() -> ExitCode {
    let settings = Settings::parse();
    hyperhive_logging::init("info");
    let config = match Config::from_settings(settings) {
        Ok(loaded) => loaded.log_warnings(),
        Err(problems) => {
            for problem in problems.lines() {
                eprintln!("swarm-authelia-bridge: {problem}");
            }
            return ExitCode::FAILURE;
        }
    };
    let shutdown = match hyperhive_daemon::tasks::signals() {
        Ok(shutdown) => shutdown,
        Err(e) => {
            eprintln!("swarm-authelia-bridge cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
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
