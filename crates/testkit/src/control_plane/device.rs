//! Devices as the real binary: `device pair` writes an identity, `device connect` holds the link
//! and speaks JSON lines. Every event is read as soon as it is printed and kept with the moment
//! it arrived, so tests can measure how long a move took after the fact.

use super::agents_control_binary;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long any single expected event may take.
pub const EVENT_WITHIN: Duration = Duration::from_secs(15);

/// A paired device: its identity file.
#[derive(Debug)]
pub struct Device {
    pub id: String,
    pub name: String,
    pub identity: PathBuf,
}

fn command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(agents_control_binary());
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    command
}

impl Device {
    /// Runs `device pair CODE --identity DIR/NAME.json --name NAME`; `Err` holds its stderr.
    pub async fn pair(code: &str, name: &str, dir: &Path) -> Result<Device, String> {
        let identity = dir.join(format!("{name}.json"));
        let output = command(&["device", "pair", code, "--name", name]).arg("--identity").arg(&identity).output().await;
        let output = output.unwrap();
        if !output.status.success() {
            assert!(!identity.exists(), "a refused pairing must not leave an identity file");
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        let id = answer["device_id"].as_str().expect("pair prints the device id").to_owned();
        Ok(Device { id, name: name.to_owned(), identity })
    }

    /// A copy of this identity, changed by `edit`, saved beside it as NAME-SUFFIX.json.
    pub fn altered(&self, suffix: &str, edit: impl FnOnce(&mut hyperhive_control_link::Identity)) -> Device {
        let mut identity = hyperhive_control_link::Identity::load(&self.identity).unwrap();
        edit(&mut identity);
        let name = format!("{}-{suffix}", self.name);
        let path = self.identity.with_file_name(format!("{name}.json"));
        identity.save(&path).unwrap();
        Device { id: self.id.clone(), name, identity: path }
    }
}

/// Whether the test keeps the device's stdin open to send commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Commands,
    Closed,
}

/// One event and when the test read it.
pub type Timed = (Instant, Value);

/// A running `device connect`.
#[derive(Debug)]
pub struct Linked {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::UnboundedReceiver<Timed>,
    /// Every event read so far by [`Linked::event`] and friends, in order.
    pub seen: Vec<Timed>,
    stderr: Stderr,
}

/// The process's stderr: read to its end, which comes when the process exits.
#[derive(Debug)]
enum Stderr {
    Reading(tokio::task::JoinHandle<String>),
    Read(String),
}

impl Linked {
    /// Starts `device connect`; with [`Input::Closed`] its stdin is closed at once (a device
    /// that only listens).
    pub fn start(identity: &Path, input: Input) -> Linked {
        let stdin = match input {
            Input::Commands => Stdio::piped(),
            Input::Closed => Stdio::null(),
        };
        let mut child = command(&["device", "connect"]).arg("--identity").arg(identity).stdin(stdin).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let (sender, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if sender.send((Instant::now(), event)).is_err() {
                    return;
                }
            }
        });
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text).await;
            text
        });
        let stdin = child.stdin.take();
        Linked { child, stdin, events, seen: Vec::new(), stderr: Stderr::Reading(stderr) }
    }

    /// The next event, or `None` when the process's output ended or `within` passed.
    pub async fn next(&mut self, within: Duration) -> Option<Timed> {
        let event = tokio::time::timeout(within, self.events.recv()).await.ok().flatten()?;
        self.seen.push(event.clone());
        Some(event)
    }

    /// The next event named `kind`, with when it came; panics with every event seen otherwise.
    pub async fn event(&mut self, kind: &str) -> Timed {
        let deadline = Instant::now() + EVENT_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Some(event) if event.1["event"] == kind => return event,
                Some(_) => {}
                None => {
                    // Its output ends when it exits: give the exit a moment to be seen.
                    let how = match tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await {
                        Ok(Ok(status)) => format!("it exited ({status}) first"),
                        _ => format!("none within {EVENT_WITHIN:?}"),
                    };
                    self.read_stderr().await;
                    panic!("no {kind} event: {how}; seen: {:?}; stderr: {}", self.lines(), self.stderr());
                }
            }
        }
    }

    /// Waits for `connected`; returns the copy's name.
    pub async fn connected(&mut self) -> String {
        let (_, event) = self.event("connected").await;
        event["copy"].as_str().expect("connected names the copy").to_owned()
    }

    pub async fn command(&mut self, command: Value) {
        let stdin = self.stdin.as_mut().expect("stdin was handed to send_paced");
        stdin.write_all(format!("{command}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Writes `commands` to stdin from a task of its own, `batch` at a time every `every`, so a
    /// device that stops reading (while it reconnects) never blocks the test. Takes stdin.
    pub fn send_paced(&mut self, commands: Vec<Value>, batch: usize, every: Duration) -> tokio::task::JoinHandle<()> {
        let mut stdin = self.stdin.take().expect("stdin was already handed out");
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            for chunk in commands.chunks(batch) {
                ticks.tick().await;
                let text: String = chunk.iter().map(|command| format!("{command}\n")).collect();
                stdin.write_all(text.as_bytes()).await.unwrap();
                stdin.flush().await.unwrap();
            }
            // Keep stdin open: closing it stops the device's commands, not its link, but an open
            // stdin is what a running application looks like.
            std::future::pending::<()>().await;
        })
    }

    /// Waits for the process to exit by itself; panics after `within`.
    pub async fn exit(&mut self, within: Duration) -> (Instant, ExitStatus) {
        let status = tokio::time::timeout(within, self.child.wait()).await;
        let status = status.unwrap_or_else(|_| panic!("still running after {within:?}; seen: {:?}", self.lines()));
        let exited = Instant::now();
        self.read_stderr().await;
        (exited, status.unwrap())
    }

    /// Reads stderr to its end, which comes once the process has exited.
    async fn read_stderr(&mut self) {
        if let Stderr::Reading(task) = &mut self.stderr {
            let text = tokio::time::timeout(EVENT_WITHIN, task).await.ok().and_then(Result::ok).unwrap_or_default();
            self.stderr = Stderr::Read(text);
        }
    }

    /// What it wrote to stderr, once it has exited ([`Linked::exit`]); empty before.
    pub fn stderr(&self) -> &str {
        match &self.stderr {
            Stderr::Read(text) => text,
            Stderr::Reading(_) => "",
        }
    }

    /// Every event seen so far, as text, for failure messages.
    pub fn lines(&self) -> Vec<String> {
        self.seen.iter().map(|(_, event)| event.to_string()).collect()
    }

    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}
