//! hive-c0re: runs a hive's agents (services/hive-c0re/README.md). Parses the command and wires.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hive_c0re::config::Config;

/// Runs this hive's agents, converging each to its wanted state.
///
/// Settings are read from the environment (HIVE_C0RE_*; durations like 15s); every bad one is
/// reported at start, one line each. See the README for each setting.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "`run` (the default) is configured only by the environment:\n  \
HIVE_C0RE_HIVE          this hive's name, as in the swarm's hive directory (required)\n  \
HIVE_C0RE_NATS_URL      the swarm's NATS server, e.g. nats://nats:4222 (required)\n  \
HIVE_C0RE_NATS_CREDS    the hive's .creds file (required)\n  \
HIVE_C0RE_XKEY_FILE     the hive's xkey seed from `keygen` (without it deploys are not read)\n  \
HIVE_C0RE_CONTROLLER_KEYS  the controller's public deploy key (`swarm-controller deploy-key`),\n                          \
or two, comma-separated, while it is replaced: only deploys they\n                          \
signed are applied (required with HIVE_C0RE_XKEY_FILE)\n  \
HIVE_C0RE_STATE_DIR     the state directory (default /var/lib/hive-c0re)\n  \
HIVE_C0RE_RUNNER        systemd (default: each agent a unit of its own user) or process\n                          (children of hive-c0re, as its user: for tests and demos)\n  \
HIVE_C0RE_AGENTS_FILE   the agents the host declares, JSON (optional)\n  \
HIVE_C0RE_AGENT_BIN     the hive-agent executable (default: beside hive-c0re)\n  \
HIVE_C0RE_STATUS_EVERY  time between status reports, 1s to 30s (default 15s); the old\n                          \
HIVE_C0RE_STATUS_SECS (whole seconds) is read, with a warning, for this release\n  \
RUST_LOG                log filter (default info)"
)]
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
        Ok(loaded) => loaded.log_warnings(),
        Err(problems) => {
            for problem in problems.lines() {
                eprintln!("hive-c0re: {problem}");
            }
            return ExitCode::FAILURE;
        }
    };
    let shutdown = match hyperhive_daemon::tasks::signals() {
        Ok(shutdown) => shutdown,
        Err(e) => {
            eprintln!("hive-c0re cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
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
