//! The process runner: each agent a child of hive-c0re, the leader of its own process group,
//! stdout and stderr appended to `agents/<agent>/agent.log`.
//!
//! An agent never outlives its hive-c0re: the runner names itself in
//! `HIVE_AGENT_SUPERVISOR_PID`, and hive-agent asks the kernel for SIGTERM when its parent ends
//! (`PR_SET_PDEATHSIG`; hive-agent sets it on itself, since the workspace forbids the `unsafe`
//! a `pre_exec` here would need). It then stops as on any SIGTERM, and its turn goes with it. In
//! case one is left all the same (it ignored the signal, or hung), each agent's pid and `/proc`
//! start time are recorded in `agents/<agent>/pid`, and [`Runner::recover`] on the next start
//! ends every recorded group that is still the same process (a pid reused by something else has
//! another start time and is left alone) before any agent is started.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use hyperhive_hive_proto::AgentName;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::{Exit, Launch, Runner, Running, StartError};
use crate::files;
use crate::state::StateDir;

/// Between SIGTERM and SIGKILL: hive-agent hands back a running todo and stops within 5 s.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// A log larger than this is moved to `agent.log.1` when the agent starts.
const LOG_ROTATE_BYTES: u64 = 8 << 20;
/// How much of the log's end is read for a tail.
const TAIL_READ_BYTES: u64 = 64 << 10;

/// Starts agents as child processes.
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    /// The hive-agent executable.
    pub bin: PathBuf,
    /// hive-c0re's state directory.
    pub state: StateDir,
}

/// A child agent.
#[derive(Debug)]
pub struct ProcessAgent {
    child: Child,
    group: Pid,
    pid_file: PathBuf,
    exit: Option<Exit>,
}

impl ProcessRunner {
    fn log_path(&self, agent: &AgentName) -> PathBuf {
        self.state.agent_dir(agent).join("agent.log")
    }

    fn pid_path(&self, agent: &AgentName) -> PathBuf {
        self.state.agent_dir(agent).join("pid")
    }
}

impl Runner for ProcessRunner {
    type Running = ProcessAgent;
    const STOP_ON_SHUTDOWN: bool = true;

    fn refresh_secrets(&self, _launch: &Launch) -> std::io::Result<()> {
        Ok(())
    }

    async fn recover(&self, agent: &AgentName) -> Option<ProcessAgent> {
        let pid_file = self.pid_path(agent);
        let recorded = std::fs::read_to_string(&pid_file).ok()?;
        let mut fields = recorded.split_whitespace().map(str::parse::<i64>);
        if let (Some(Ok(pid)), Some(Ok(start))) = (fields.next(), fields.next())
            && let Ok(pid) = i32::try_from(pid)
            && u64::try_from(start).ok() == start_time(pid)
        {
            tracing::warn!(agent = %agent, pid, "ending the agent a previous hive-c0re left running");
            end_group(Pid::from_raw(pid)).await;
        }
        let _ = std::fs::remove_file(&pid_file);
        None
    }

    async fn start(&self, launch: &Launch) -> Result<ProcessAgent, StartError> {
        let agent = &launch.agent;
        let fail = |why: String| StartError { agent: agent.clone(), why };
        let dir = self.state.agent_dir(agent);
        let state_dir = dir.join("state");
        files::make_dir(&state_dir, 0o700).map_err(|e| fail(e.to_string()))?;
        let log_path = self.log_path(agent);
        if std::fs::metadata(&log_path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
            let _ = std::fs::rename(&log_path, log_path.with_extension("log.1"));
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(files::PRIVATE)
            .open(&log_path)
            .map_err(|e| fail(format!("cannot open {}: {e}", log_path.display())))?;
        let log_err = log.try_clone().map_err(|e| fail(e.to_string()))?;
        let secrets = self.state.secrets_dir(agent);
        let mut command = Command::new(&self.bin);
        // hive-c0re's own settings (its credential's path among them) are not the agent's.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("HIVE_") {
                command.env_remove(name);
            }
        }
        command
            .envs(launch.env(
                &launch.creds.display().to_string(),
                &state_dir.display().to_string(),
                &secrets.display().to_string(),
            ))
            .env("NO_COLOR", "1")
            // The kernel signals an agent when the thread that forked it ends: this runs on a
            // runtime worker thread, which lives as long as hive-c0re does.
            .env("HIVE_AGENT_SUPERVISOR_PID", std::process::id().to_string())
            .current_dir(&state_dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        let child = command.spawn().map_err(|e| fail(format!("cannot run {}: {e}", self.bin.display())))?;
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).ok_or_else(|| fail("it exited at once".into()))?;
        let pid_file = self.pid_path(agent);
        let start = start_time(pid).unwrap_or(0);
        files::replace(&pid_file, format!("{pid} {start}\n").as_bytes(), files::PRIVATE)
            .map_err(|e| fail(e.to_string()))?;
        Ok(ProcessAgent { child, group: Pid::from_raw(pid), pid_file, exit: None })
    }

    fn agent_state_dir(&self, agent: &AgentName) -> PathBuf {
        self.state.agent_dir(agent).join("state")
    }

    async fn remove_agent(&self, _agent: &AgentName) {
        // Everything of a process-run agent lies in `agents/<agent>/`, which the supervisor removes.
    }

    async fn log_tail(&self, agent: &AgentName) -> Vec<String> {
        read_tail(&self.log_path(agent))
    }
}

impl Running for ProcessAgent {
    async fn exited(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let exit = match self.child.wait().await {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                Exit { code: status.code(), signal: status.signal() }
            }
            Err(_) => Exit { code: None, signal: None },
        };
        // Whatever the agent left in its group goes with it.
        let _ = killpg(self.group, Signal::SIGKILL);
        let _ = std::fs::remove_file(&self.pid_file);
        self.exit = Some(exit);
        exit
    }

    async fn stop(mut self) {
        if self.exit.is_none() {
            let _ = killpg(self.group, Signal::SIGTERM);
            let _ = tokio::time::timeout(STOP_GRACE, self.child.wait()).await;
            let _ = killpg(self.group, Signal::SIGKILL);
            let _ = self.child.wait().await;
        }
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// A process's start time (clock ticks since boot, field 22 of `/proc/<pid>/stat`), or `None`
/// if it is gone or a zombie.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the fields after it may not.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// SIGTERM to a group that is not our child, a grace, then SIGKILL; returns once its leader is
/// gone (reaped by init) or the grace after SIGKILL passed.
async fn end_group(group: Pid) {
    let gone = |deadline: Instant| async move {
        while Instant::now() < deadline {
            if start_time(group.as_raw()).is_none() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    };
    let _ = killpg(group, Signal::SIGTERM);
    if !gone(Instant::now() + STOP_GRACE).await {
        let _ = killpg(group, Signal::SIGKILL);
        gone(Instant::now() + Duration::from_secs(2)).await;
    }
}

fn read_tail(path: &Path) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    // The agent can write where its log lies: never follow a link or wait on a FIFO there.
    let Ok((mut file, len)) = crate::agent_file::open(path) else { return Vec::new() };
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL_READ_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    hyperhive_hive_proto::status::log_tail(text.lines().filter(|l| !l.trim().is_empty()))
}
