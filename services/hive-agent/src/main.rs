//! hive-agent: one agent's harness (services/hive-agent/README.md). Parses configuration and wires.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use hive_agent::Agent;
use hive_agent::clock::SystemClock;
use hive_agent::config::Settings;

/// One AI coding agent's harness: its todo queue, its turns and its schedule ticker.
///
/// Every setting is read from the environment (HIVE_AGENT_*) or the matching flag; durations
/// are written like 10s or 1h. Every bad setting is reported at start, one line each.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent (the default).
    Run(Settings),
}

// One thread: an agent's work is one turn at a time and a few NATS messages, which one thread
// serves as fast as several (the prompts benchmark measured no difference); a runtime per core
// would give a hive of hundreds of agents hundreds of threads per core.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // async-nats reports through the event callback, which `connect` logs once in words an
    // operator can act on; its own lines would repeat them per attempt.
    hyperhive_logging::init("info,async_nats=off");
    let cli = Cli::parse();
    let settings = match cli.command {
        Some(Command::Run(settings)) => settings,
        None => cli.settings,
    };
    let config = match settings.check() {
        Ok(loaded) => loaded.log_warnings(),
        Err(problems) => {
            for problem in problems.lines() {
                eprintln!("hive-agent: {problem}");
            }
            return ExitCode::FAILURE;
        }
    };
    if let Some(supervisor) = config.supervisor_pid
        && let Err(e) = hive_agent::supervisor::end_with(supervisor)
    {
        eprintln!("hive-agent: {e}");
        return ExitCode::FAILURE;
    }
    let shutdown = match hyperhive_daemon::tasks::signals() {
        Ok(shutdown) => shutdown,
        Err(e) => {
            eprintln!("hive-agent cannot handle SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    let agent = match Agent::start(config, Arc::new(SystemClock)).await {
        Ok(agent) => agent,
        Err(e) => {
            // One clear line, not a backtrace: this is what an operator reads in the journal.
            eprintln!("hive-agent cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    shutdown.await;
    agent.stop().await;
    ExitCode::SUCCESS
}
