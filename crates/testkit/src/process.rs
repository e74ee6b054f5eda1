//! A child process for tests: its output goes to a log file, readiness is waited for, and it is
//! killed and reaped on drop.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::wait::wait_until;

/// How many log lines a failing test prints for each of its processes.
const LOG_TAIL_LINES: usize = 40;
/// How long killing a process group may take until none of it is alive.
const GROUP_GONE_WITHIN: Duration = Duration::from_secs(10);

/// What to start: a program, its arguments, environment and working directory.
#[derive(Debug)]
pub struct ProcessBuilder {
    command: Command,
    own_group: bool,
}

impl ProcessBuilder {
    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Sets one environment variable (the child inherits the test's environment otherwise).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Sets several environment variables.
    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    /// Removes one inherited environment variable.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(key);
        self
    }

    /// Runs the child as `uid` and `gid` (with no supplementary groups); the test must be root.
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        use std::os::unix::process::CommandExt;
        self.command.uid(uid).gid(gid);
        self
    }

    /// Starts the child in a process group of its own, whose id is its pid: every process it
    /// starts stays in that group unless it makes one of its own, whoever its parent is later
    /// (an orphan too), so [`Process::kill`] and the drop kill the whole group and return only
    /// once none of it is alive ([`group_members`]).
    pub fn own_process_group(mut self) -> Self {
        use std::os::unix::process::CommandExt;
        self.command.process_group(0);
        self.own_group = true;
        self
    }

    /// Runs the child in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Starts the process; `name` labels its log (and the tail printed when a test fails).
    ///
    /// # Errors
    /// When the log file cannot be made or the program cannot be started.
    pub fn start(mut self, name: &str) -> anyhow::Result<Process> {
        let log_dir = tempfile::Builder::new()
            .prefix(&format!("hyperhive-{name}-log-"))
            .tempdir()
            .context("creating a temp dir for a process log")?;
        let log_path = log_dir.path().join(format!("{name}.log"));
        let log = File::create(&log_path).context("creating a process log file")?;
        let program: OsString = self.command.get_program().to_owned();
        let child = self
            .command
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log file handle")?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {name} ({})", Path::new(&program).display()))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            own_group: self.own_group,
            log_path,
            _log_dir: log_dir,
            reaped: None,
        })
    }
}

/// A running child process. Dropping it kills (SIGKILL) and reaps it.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    /// Started as the leader of a process group of its own ([`ProcessBuilder::own_process_group`]).
    own_group: bool,
    log_path: PathBuf,
    /// Removed on drop; kept apart from any data dir so a log survives a data-dir wipe.
    _log_dir: TempDir,
    /// The exit status once the process has been reaped.
    reaped: Option<ExitStatus>,
}

impl Process {
    /// A builder for `program`.
    pub fn builder(program: impl AsRef<OsStr>) -> ProcessBuilder {
        ProcessBuilder { command: Command::new(program), own_group: false }
    }

    /// The label given at start.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its stdout and stderr go.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything it has written to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read(&self.log_path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` (TERM to stop, KILL to crash, STOP/CONT to freeze and thaw).
    ///
    /// # Errors
    /// When the process has already been reaped, or the signal cannot be delivered.
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        anyhow::ensure!(self.reaped.is_none(), "{} has already exited", self.name);
        let pid = Pid::from_raw(i32::try_from(self.child.id()).context("pid out of range")?);
        kill(pid, signal).with_context(|| format!("sending {signal} to {}", self.name))
    }

    /// Kills it (SIGKILL) and reaps it; a no-op when it has already been reaped. Started in a
    /// process group of its own, every live process of the group is killed too, also after the
    /// leader has exited, and this returns once none is alive (bounded by [`GROUP_GONE_WITHIN`]):
    /// a killed process runs on for a moment, and one still writing into a directory the test
    /// removes next would make it again.
    pub fn kill(&mut self) {
        if self.reaped.is_none() {
            let _ = self.child.kill();
            self.reaped = self.child.wait().ok();
        }
        if self.own_group {
            let group = self.child.id();
            let deadline = std::time::Instant::now() + GROUP_GONE_WITHIN;
            while !group_members(group).is_empty() && std::time::Instant::now() < deadline {
                let _ = nix::sys::signal::killpg(Pid::from_raw(group as i32), Signal::SIGKILL);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Whether it has exited (reaping it if so).
    pub fn has_exited(&mut self) -> bool {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().ok().flatten();
        }
        self.reaped.is_some()
    }

    /// Waits for it to exit by itself.
    ///
    /// # Errors
    /// When it is still running after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let what = format!("{} to exit", self.name);
        wait_until(&what, timeout, || {
            let exited = self.has_exited();
            let status = self.reaped;
            async move { exited.then_some(status).flatten() }
        })
        .await
        .map_err(|err| self.with_log(err))
    }

    /// Waits until its log contains `needle`.
    ///
    /// # Errors
    /// When it exits first, or `timeout` passes; the error carries the log's tail.
    pub async fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<()> {
        let what = format!("{} to log {needle:?}", self.name);
        self.wait_alive(&what, timeout, |process| process.log().contains(needle)).await
    }

    /// Waits until something accepts TCP connections on 127.0.0.1:`port`.
    ///
    /// # Errors
    /// When it exits first, or `timeout` passes.
    pub async fn wait_for_port(&mut self, port: u16, timeout: Duration) -> anyhow::Result<()> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let what = format!("{} to listen on {addr}", self.name);
        self.wait_alive(&what, timeout, |_| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()).await
    }

    /// Waits until `GET path` on `addr` answers 200.
    ///
    /// # Errors
    /// When it exits first, or `timeout` passes.
    pub async fn wait_for_http_ok(&mut self, addr: SocketAddr, path: &str, timeout: Duration) -> anyhow::Result<()> {
        let what = format!("{} to answer 200 on http://{addr}{path}", self.name);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            anyhow::ensure!(
                !self.has_exited(),
                self.with_log(anyhow::anyhow!("{} exited while waiting for {what}", self.name))
            );
            if http_status(addr, path).await.ok() == Some(200) {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(self.with_log(anyhow::anyhow!("timed out after {timeout:?} waiting for {what}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_alive(
        &mut self,
        what: &str,
        timeout: Duration,
        mut ready: impl FnMut(&Self) -> bool,
    ) -> anyhow::Result<()> {
        let result = wait_until(what, timeout, || {
            let outcome = if ready(self) {
                Some(Ok(()))
            } else if self.has_exited() {
                Some(Err(anyhow::anyhow!("{} exited ({:?}) while waiting for {what}", self.name, self.reaped)))
            } else {
                None
            };
            async move { outcome }
        })
        .await
        .and_then(|outcome| outcome);
        result.map_err(|err| self.with_log(err))
    }

    fn with_log(&self, err: anyhow::Error) -> anyhow::Error {
        err.context(format!("last lines of {}'s log:\n{}", self.name, self.log_tail(LOG_TAIL_LINES)))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {} ({}) ---\n{}\n---",
                self.name,
                self.log_path.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
        self.kill();
    }
}

/// The live processes (not yet exited: a zombie is not one) of process group `group`.
pub fn group_members(group: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let member = fields.nth(1)?.parse::<u32>().ok()? == group;
            (member && state != "Z" && state != "X").then_some(pid)
        })
        .collect()
}

/// The status code of a plain `GET path` over HTTP/1.1 on `addr`.
///
/// # Errors
/// When the connection fails or the answer is not an HTTP status line.
pub async fn http_status(addr: SocketAddr, path: &str) -> anyhow::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = [0u8; 64];
    let mut filled = 0;
    while filled < 12 {
        let n = stream.read(&mut head[filled..]).await?;
        anyhow::ensure!(n > 0, "connection closed before a status line");
        filled += n;
    }
    let line = String::from_utf8_lossy(&head[..filled]);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP status line: {line:?}"))
}

/// The body of a plain `GET path` over HTTP/1.1 on `addr` when it answers 200, else `None`.
pub async fn http_get_ok(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_group_leader_takes_its_orphans_with_it() {
        // `sh` leaves a `sleep` behind that is not its last command: killing `sh` alone would
        // orphan it, still in the group.
        let mut process = Process::builder("sh")
            .args(["-c", "sleep 300 & exec sleep 300"])
            .own_process_group()
            .start("group")
            .unwrap();
        let group = process.pid();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group_members(group).len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the group never had two members: {:?}",
                group_members(group)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        process.kill();
        let survivors = group_members(group);
        let _ = nix::sys::signal::killpg(Pid::from_raw(group as i32), Signal::SIGKILL);
        assert_eq!(survivors, Vec::<i32>::new(), "a process of the group outlived the kill");
    }
}
