//! swarmctl: parses the command line and runs it against swarm-controller's socket.
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use hyperhive_jobq::SystemClock;
use swarmctl::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("swarmctl: starting tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli, &SystemClock)) {
        Ok(out) => {
            // A closed stdout (`swarmctl ... | head`) is not worth a panic.
            let _ = std::io::stdout().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Err(swarmctl::CtlError::TurnFailed { code, message }) => {
            eprintln!("swarmctl: {message}");
            ExitCode::from(code)
        }
        Err(swarmctl::CtlError::Unhealthy { report, problems }) => {
            let _ = std::io::stdout().write_all(report.as_bytes());
            eprintln!("swarmctl: {problems} check(s) found a problem");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("swarmctl: {err}");
            ExitCode::FAILURE
        }
    }
}
