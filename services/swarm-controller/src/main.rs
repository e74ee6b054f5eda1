//! swarm-controller: parses the command line and the environment, then runs the daemon or a
//! credential helper from the library.
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use swarm_controller::cli::{Cli, Command};
use swarm_controller::clock::SystemClock;
use swarm_controller::daemon::Config;

fn main() -> ExitCode {
    let cli = Cli::parse();
    hyperhive_logging::init("info");
    let outcome = match cli.command {
        None | Some(Command::Serve) => serve(),
        Some(Command::Init { out, hives, resolver_dir, ttl, ca_name }) => {
            swarm_controller::cli::init(out, &hives, resolver_dir, ttl, ca_name).map_err(|e| vec![e])
        }
        Some(Command::Nats(command)) => command.run().map_err(|e| vec![e]),
        Some(Command::SecretsKey { out }) => swarm_controller::cli::write_secrets_key(&out).map_err(|e| vec![e]),
        Some(Command::DeployKey { out, public }) => {
            swarm_controller::cli::deploy_key(out.as_deref(), public.as_deref()).map_err(|e| vec![e])
        }
        Some(Command::Pair { code, name, identity }) => {
            swarm_controller::cli::pair(&code, name.as_deref(), identity.as_deref()).map_err(|e| vec![e])
        }
        Some(Command::StoreCa { out_dir, name }) => {
            swarm_controller::cli::write_store_ca(&out_dir, &name).map_err(|e| vec![e])
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(lines) => {
            for line in lines {
                eprintln!("swarm-controller: {line}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Runs the daemon; every bad setting is one line of the error.
fn serve() -> Result<(), Vec<String>> {
    let config = Config::from_env().map_err(|problems| problems.lines())?.log_warnings();
    let runtime = tokio::runtime::Runtime::new().map_err(|e| vec![format!("starting tokio: {e}")])?;
    runtime.block_on(async {
        let shutdown = hyperhive_daemon::tasks::signals().map_err(|e| vec![format!("handling SIGTERM: {e}")])?;
        swarm_controller::daemon::run(config, Arc::new(SystemClock), shutdown).await.map_err(|e| vec![e.to_string()])
    })
}
