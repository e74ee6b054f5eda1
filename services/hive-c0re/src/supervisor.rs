//! One task per agent, converging it to its wanted state:
//!
//! - `up`: running, pause file absent; `paused`: running, pause file present;
//! - `offline`: stopped, everything kept; `destroyed`: stopped, `agents/<agent>/` (its state,
//!   secrets and log) and whatever the runner keeps removed.
//!
//! A crash is restarted after a backoff ([`BACKOFF_START`] doubling to [`BACKOFF_MAX`], reset by
//! a run of at least [`STABLE_RUN`]). [`CRASH_LIMIT`] crashes within [`CRASH_WINDOW`] make the
//! agent `failed`, with its last exit and log tail in the status, and it is not restarted until
//! its wanted state changes (e.g. offline, then up again) or hive-c0re restarts.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::status::{ActualState, ExitInfo};
use hyperhive_hive_proto::wanted::WantedState;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::board::Board;
use crate::runner::{Exit, Launch, Runner, Running};
use crate::state::StateDir;

/// The first restart delay.
pub const BACKOFF_START: Duration = Duration::from_secs(1);
/// The longest restart delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A run at least this long was not a crash loop: the backoff starts over.
pub const STABLE_RUN: Duration = Duration::from_secs(60);
/// This many crashes within [`CRASH_WINDOW`] make the agent `failed`.
pub const CRASH_LIMIT: usize = 5;
/// See [`CRASH_LIMIT`]; with the backoff, five quick crashes take about 15 s.
pub const CRASH_WINDOW: Duration = Duration::from_secs(600);

/// What the agent should be doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// The wanted state.
    pub wanted: WantedState,
    /// How to run it (`None`: it cannot run, e.g. no spec yet).
    pub launch: Option<Launch>,
    /// Bumped when a running agent must restart (a new spec, or secrets it cannot see in place).
    pub generation: u64,
}

/// One agent's supervisor.
#[derive(Debug)]
pub struct Supervisor<R: Runner> {
    /// The agent.
    pub agent: AgentName,
    /// The runner.
    pub runner: Arc<R>,
    /// hive-c0re's state directory.
    pub state: StateDir,
    /// Where its status goes.
    pub board: Board,
    /// What it should be doing.
    pub desired: watch::Receiver<Desired>,
    /// Set once when hive-c0re stops.
    pub shutdown: watch::Receiver<bool>,
}

/// Why the wait between steps ended.
enum Woken {
    Changed,
    Shutdown,
}

/// Why the wait on a running agent ended.
enum Step {
    Changed,
    Shutdown,
    Exited(Exit),
}

impl<R: Runner> Supervisor<R> {
    /// Recovers what a previous hive-c0re left, then converges until shutdown.
    pub async fn run(mut self) {
        let mut running = self.runner.recover(&self.agent).await;
        let mut running_generation = self.desired.borrow().generation;
        let mut started = Instant::now();
        let mut crashes: VecDeque<Instant> = VecDeque::new();
        let mut backoff = BACKOFF_START;
        let mut failed = false;
        let mut last_wanted = None;
        loop {
            let desired = self.desired.borrow_and_update().clone();
            if last_wanted != Some(desired.wanted) {
                // A new wanted state is the operator's way to retry a failed agent.
                (failed, backoff, last_wanted) = (false, BACKOFF_START, Some(desired.wanted));
                crashes.clear();
            }
            self.board.update(&self.agent, |s| s.wanted = desired.wanted);
            self.set_pause_file(desired.wanted == WantedState::Paused);
            let launch = match (&desired.launch, desired.wanted) {
                (Some(launch), WantedState::Up | WantedState::Paused) => launch,
                _ => {
                    if let Some(agent) = running.take() {
                        info!(agent = %self.agent, wanted = %desired.wanted, "stopping");
                        agent.stop().await;
                    }
                    if desired.wanted == WantedState::Destroyed {
                        self.remove_everything().await;
                    }
                    self.board.set_actual(&self.agent, ActualState::Stopped);
                    match self.wait().await {
                        Woken::Changed => continue,
                        Woken::Shutdown => return,
                    }
                }
            };
            if failed {
                match self.wait().await {
                    Woken::Changed => continue,
                    Woken::Shutdown => return,
                }
            }
            if running.is_some() && running_generation != desired.generation {
                info!(agent = %self.agent, "restarting with its new spec or secrets");
                if let Some(agent) = running.take() {
                    agent.stop().await;
                }
            }
            if running.is_none() {
                self.board.set_actual(&self.agent, ActualState::Starting);
                match self.runner.start(launch).await {
                    Ok(agent) => {
                        info!(agent = %self.agent, "started");
                        (running, running_generation, started) = (Some(agent), desired.generation, Instant::now());
                    }
                    Err(e) => {
                        error!("{e}");
                        let exit = Exit { code: None, signal: None };
                        if self.crashed(exit, &mut crashes, &mut backoff, &mut failed, Duration::ZERO).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let actual = if desired.wanted == WantedState::Paused { ActualState::Paused } else { ActualState::Running };
            self.board.set_actual(&self.agent, actual);
            let agent = running.as_mut().expect("started above");
            let woken = tokio::select! {
                biased;
                _ = self.shutdown.wait_for(|s| *s) => Step::Shutdown,
                changed = self.desired.changed() => if changed.is_ok() { Step::Changed } else { Step::Shutdown },
                exit = agent.exited() => Step::Exited(exit),
            };
            match woken {
                Step::Changed => {}
                Step::Shutdown => {
                    if R::STOP_ON_SHUTDOWN
                        && let Some(agent) = running.take()
                    {
                        agent.stop().await;
                    }
                    return;
                }
                Step::Exited(exit) => {
                    running = None;
                    let ran = started.elapsed();
                    if self.crashed(exit, &mut crashes, &mut backoff, &mut failed, ran).await {
                        return;
                    }
                }
            }
        }
    }

    /// Records a crash and waits out the backoff (or marks the agent failed). Returns true on
    /// shutdown.
    async fn crashed(
        &mut self,
        exit: Exit,
        crashes: &mut VecDeque<Instant>,
        backoff: &mut Duration,
        failed: &mut bool,
        ran: Duration,
    ) -> bool {
        let now = Instant::now();
        if ran >= STABLE_RUN {
            *backoff = BACKOFF_START;
            crashes.clear();
        }
        crashes.push_back(now);
        while crashes.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
            crashes.pop_front();
        }
        let last_exit = ExitInfo { code: exit.code, signal: exit.signal, at: crate::now() };
        if crashes.len() >= CRASH_LIMIT {
            *failed = true;
            let tail = self.runner.log_tail(&self.agent).await;
            error!(
                agent = %self.agent,
                code = ?exit.code,
                signal = ?exit.signal,
                "crashed {CRASH_LIMIT} times within {CRASH_WINDOW:?}: failed, not restarting until its \
                 wanted state changes (set it offline, then up) or hive-c0re restarts"
            );
            self.board.update(&self.agent, |s| {
                s.last_exit = Some(last_exit);
                s.log_tail = tail;
            });
            self.board.set_actual(&self.agent, ActualState::Failed);
            return false;
        }
        warn!(agent = %self.agent, code = ?exit.code, signal = ?exit.signal, "exited; restarting in {backoff:?}");
        self.board.update(&self.agent, |s| {
            s.last_exit = Some(last_exit);
            s.restarts += 1;
        });
        self.board.set_actual(&self.agent, ActualState::Starting);
        let delay = *backoff;
        *backoff = (*backoff * 2).min(BACKOFF_MAX);
        tokio::select! {
            biased;
            _ = self.shutdown.wait_for(|s| *s) => true,
            _ = tokio::time::sleep(delay) => false,
            _ = self.desired.changed() => false,
        }
    }

    /// Waits for a new desired state or shutdown.
    async fn wait(&mut self) -> Woken {
        tokio::select! {
            biased;
            _ = self.shutdown.wait_for(|s| *s) => Woken::Shutdown,
            changed = self.desired.changed() => if changed.is_ok() { Woken::Changed } else { Woken::Shutdown },
        }
    }

    fn set_pause_file(&self, paused: bool) {
        let path = self.state.pause_file(&self.agent);
        let result = if paused {
            // World-readable and empty: its existence is the whole message.
            crate::files::replace(&path, b"", 0o644)
        } else {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        };
        if let Err(e) = result {
            error!(agent = %self.agent, "cannot {} the pause file {}: {e}", if paused { "write" } else { "remove" }, path.display());
        }
    }

    async fn remove_everything(&self) {
        let dir = self.state.agent_dir(&self.agent);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => info!(agent = %self.agent, "destroyed: removed {}", dir.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => error!(agent = %self.agent, "cannot remove {}: {e}", dir.display()),
        }
        self.runner.remove_agent(&self.agent).await;
    }
}
