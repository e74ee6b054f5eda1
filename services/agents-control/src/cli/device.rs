//! `agents-control device pair|connect`: this machine as a device of a control plane, for
//! scripts and tests. `connect` prints every link event as one JSON line on stdout and reads
//! commands as JSON lines on stdin (docs/control-plane/link-protocol.md has examples).

use super::Failure;
use clap::{Args, Subcommand};
use hyperhive_control_link::connect::{self, Command, Event};
use hyperhive_control_link::{DeviceName, Identity};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio::sync::mpsc;

#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Pair this machine with a code: POST /v1/pair to the code's control URL (TLS with the
    /// code's pin when it has one) and write the device identity (mode 0600) to --identity.
    Pair(PairArgs),
    /// Hold the link with an identity: events as JSON lines on stdout ({"event": "connected"
    /// (with the copy and the control plane's name) |
    /// "presence" | "message" | "acked" | "undeliverable" | "reply" | "request_failed" | "error"
    /// | "reconnecting", ...}); commands as JSON lines on stdin ({"command": "send", "to": ID,
    /// "body": JSON} or {"command": "request", "id": N, "request": {"op": ...}}). Reconnects
    /// until the control plane says not to (forgotten, refused proof); then exits non-zero.
    Connect(ConnectArgs),
}

#[derive(Debug, Args)]
pub struct PairArgs {
    /// The pairing code (hhcode1...), from `agents-control code`.
    code: String,
    /// Where to write the device identity (JSON holding the device key, mode 0600).
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The device's name as others see it. Absent: the name the code suggests (`code --name`),
    /// else this machine's hostname.
    #[arg(long)]
    name: Option<String>,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The device identity written by `device pair`.
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
}

pub async fn run(command: DeviceCommand) -> Result<ExitCode, Failure> {
    match command {
        DeviceCommand::Pair(args) => pair(args).await,
        DeviceCommand::Connect(args) => hold(args).await,
    }
}

async fn pair(args: PairArgs) -> Result<ExitCode, Failure> {
    if args.identity.exists() {
        return Err(Failure(format!(
            "--identity {} exists: it may hold another pairing; remove it or choose another file",
            args.identity.display()
        )));
    }
    let hostname = super::hostname();
    let name = match &args.name {
        Some(name) => DeviceName::Chosen(name),
        None => DeviceName::Default(&hostname),
    };
    let identity = hyperhive_control_link::pair_client::pair(args.code.trim(), name).await?;
    identity.save(&args.identity)?;
    let mut paired = serde_json::json!({"device_id": identity.device_id, "kind": identity.kind, "name": identity.name});
    if let Some(control_name) = &identity.control_name {
        paired["control_name"] = control_name.as_str().into();
    }
    println!("{paired}");
    Ok(ExitCode::SUCCESS)
}

async fn hold(args: ConnectArgs) -> Result<ExitCode, Failure> {
    let identity = Identity::load(&args.identity)?;
    let (command_tx, command_rx) = mpsc::channel(64);
    let (event_tx, mut event_rx) = mpsc::channel(256);
    // A plain thread, not a task: a read blocked on an open stdin must neither keep the
    // printer alive nor hold up the runtime's shutdown once the link has stopped for good.
    std::thread::spawn(move || read_commands(&command_tx));
    let printer = tokio::spawn(async move {
        while let Some(event) = event_rx.recv().await {
            print_line(&event);
        }
    });
    let result = connect::run(&identity, command_rx, event_tx).await;
    let _ = printer.await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(stopped) => Err(Failure(stopped.0)),
    }
}

fn print_line(event: &Event) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", serde_json::to_string(event).unwrap_or_default());
    let _ = stdout.flush();
}

/// Reads JSON-line commands from stdin; a bad line is an `error` event saying what is wrong.
fn read_commands(commands: &mpsc::Sender<Command>) {
    for line in std::io::stdin().lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        match Command::parse(&line) {
            Ok(command) => {
                if commands.blocking_send(command).is_err() {
                    return;
                }
            }
            Err(error) => {
                let message = format!(
                    "bad command ({error}): send {{\"command\": \"send\", \"to\": ID, \"body\": JSON}} or {{\"command\": \"request\", \"id\": N, \"request\": {{\"op\": ...}}}}"
                );
                print_line(&Event::Error { message });
            }
        }
    }
}
