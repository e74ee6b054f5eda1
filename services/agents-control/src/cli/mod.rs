//! The command line: one binary, `serve` by default. Each subcommand is a module;
//! this one only declares them and dispatches.

mod code;
mod device;
mod registry;
mod serve;
mod store;

use crate::config::StoreArgs;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use hyperhive_object_store::Store;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The hyperhive control plane: pairing, the device registry in a shared bucket, and (next) the
/// WebSocket relay between clients and hosts. Run two or more copies behind a TLS load balancer,
/// all with the same store and control key. Every flag can be set by the environment variable
/// shown with it; see docs/control-plane/README.md.
#[derive(Debug, Parser)]
#[command(version, about, long_about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// With no subcommand, `serve` runs with these settings.
    #[command(flatten)]
    serve: serve::ServeArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a copy: HTTP on AGENTS_CONTROL_LISTEN with /healthz, /readyz, /metrics, /v1/pair.
    Serve(serve::ServeArgs),
    /// Make a one-time pairing code and print it (one line on stdout).
    Code(code::CodeArgs),
    /// List the paired clients (windows and phones).
    Clients(registry::ListArgs),
    /// List the paired hosts.
    Hosts(registry::ListArgs),
    /// Forget a client or host: one conditional write turns its record into a tombstone, so it
    /// is no longer listed and its code can never pair again.
    Forget(registry::ForgetArgs),
    /// Check or move a store.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// This machine as a device: pair with a code, or hold the link (JSON lines).
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Print the pin of a PEM certificate (base64url SHA-256 of its public key info), for
    /// AGENTS_CONTROL_PIN.
    Pin {
        /// The certificate file (PEM); the first certificate in it is used.
        #[arg(long, value_name = "FILE")]
        cert: PathBuf,
    },
}

/// A failure the binary reports as one line on stderr and a non-zero exit.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure(error.to_string())
    }
}

impl Cli {
    /// Parses the command line and the environment, exiting with clap's message on an error.
    /// An environment variable that is set but empty (`AGENTS_CONTROL_KEY_FILE=` in an env
    /// file) counts as unset, as in a shell's `${VAR:-}`: clap would take it for the flag given
    /// an empty value, and its error would name the flag, which the user never typed.
    pub fn parse_env_and_args() -> Cli {
        let matches = without_empty_env(Cli::command()).get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
    }

    /// Runs the chosen command; `Err` is the line to print before exiting non-zero.
    pub async fn run(self) -> Result<ExitCode, Failure> {
        match self.command {
            None => serve::run(self.serve).await,
            Some(Command::Serve(args)) => serve::run(args).await,
            Some(Command::Code(args)) => code::run(args).await,
            Some(Command::Clients(args)) => registry::list(args, hyperhive_control_proto::DeviceKind::Client).await,
            Some(Command::Hosts(args)) => registry::list(args, hyperhive_control_proto::DeviceKind::Host).await,
            Some(Command::Forget(args)) => registry::forget(args).await,
            Some(Command::Store(command)) => store::run(command).await,
            Some(Command::Device(command)) => device::run(command).await,
            Some(Command::Pin { cert }) => {
                let pem = std::fs::read(&cert).map_err(|e| Failure(format!("--cert {}: {e}", cert.display())))?;
                let pin =
                    crate::pin::pin_of_pem(&pem).map_err(|e| Failure(format!("--cert {}: {e}", cert.display())))?;
                println!("{pin}");
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// `command` with every flag whose environment variable is set but empty reading no variable.
fn without_empty_env(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            let empty = arg.get_env().and_then(std::env::var_os).is_some_and(|value| value.is_empty());
            if empty { arg.env(None) } else { arg }
        })
        .mut_subcommands(without_empty_env)
}

/// This machine's name, for records that say who made them.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Opens the store the arguments name.
async fn open_store(args: &StoreArgs) -> Result<Arc<dyn Store>, Failure> {
    let url = args.url()?;
    let settings = args.s3.settings()?;
    Ok(hyperhive_object_store::open(&url, &settings).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
