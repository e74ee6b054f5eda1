//! The pause file (`HIVE_AGENT_PAUSE_FILE`, written by hive-c0re): while it exists the agent
//! takes no todo and fires no slot; a turn already running finishes and is acked as usual.
//! Existence is checked every [`POLL`] and again right before each fetch, so a pause set just
//! before a fetch is honoured.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use crate::turn_file::TurnReporter;

/// How often the file's existence is checked: one `stat` per agent, cheap enough for hundreds of
/// agents, and well under the seconds an operator expects a pause to take.
pub const POLL: Duration = Duration::from_millis(250);

/// Whether the agent is paused, shared by the consumer and the ticker.
#[derive(Debug, Clone)]
pub struct Pause {
    path: Option<PathBuf>,
    paused: watch::Sender<bool>,
    reporter: TurnReporter,
}

impl Pause {
    /// A pause following `path` (never paused without one), reporting changes to `reporter`.
    pub fn new(path: Option<PathBuf>, reporter: TurnReporter) -> Self {
        let pause = Self { path, paused: watch::Sender::new(false), reporter };
        pause.check();
        pause
    }

    /// Reads the file's existence now, records it, and returns it.
    pub fn check(&self) -> bool {
        // An unreadable parent counts as "no pause file": hive-c0re creates the file in a
        // directory the agent can read, and an agent that never runs because of a stat error would
        // be worse than one that runs.
        let paused = self.path.as_ref().is_some_and(|p| p.try_exists().unwrap_or(false));
        self.paused.send_if_modified(|was| std::mem::replace(was, paused) != paused);
        self.reporter.set_paused(paused);
        paused
    }

    /// Polls the file forever (spawned as a task when a pause file is configured).
    pub async fn watch(self) {
        if self.path.is_none() {
            return;
        }
        let mut interval = tokio::time::interval(POLL);
        loop {
            interval.tick().await;
            self.check();
        }
    }

    /// Returns once the file is absent (at once if it is).
    pub async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        if !self.check() {
            return;
        }
        let _ = rx.wait_for(|paused| !*paused).await.map(drop);
    }
}
