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
    /// Whether the last check could not tell (logged once when that starts).
    unsure: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Pause {
    /// A pause following `path` (never paused without one), reporting changes to `reporter`.
    pub fn new(path: Option<PathBuf>, reporter: TurnReporter) -> Self {
        let pause = Self { path, paused: watch::Sender::new(false), reporter, unsure: Default::default() };
        pause.check();
        pause
    }

    /// Reads the file's existence now, records it, and returns it. When the agent cannot tell
    /// (its directory unreadable, a path through a file), it counts as paused and says so once:
    /// an agent that works while its operator paused it is worse than one that waits, visibly.
    pub fn check(&self) -> bool {
        use std::sync::atomic::Ordering;
        let paused = match self.path.as_ref().map(|p| (p, p.try_exists())) {
            None => false,
            Some((_, Ok(exists))) => {
                self.unsure.store(false, Ordering::Relaxed);
                exists
            }
            Some((path, Err(e))) => {
                if !self.unsure.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        path = %path.display(),
                        "cannot tell whether the pause file (HIVE_AGENT_PAUSE_FILE) exists: {e}; taking no todo until it can"
                    );
                }
                true
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::Feed;

    #[tokio::test]
    async fn a_pause_file_that_cannot_be_checked_counts_as_paused_until_it_can() {
        let dir = tempfile::tempdir().unwrap();
        let reporter = TurnReporter::new(dir.path(), Feed::capture().0);
        // A path through a regular file: stat fails with "not a directory", not "not found".
        let blocker = dir.path().join("pause");
        std::fs::write(&blocker, "").unwrap();
        let pause = Pause::new(Some(blocker.join("paused")), reporter.clone());
        assert!(pause.check(), "an unknown pause state is a pause");
        std::fs::remove_file(&blocker).unwrap();
        assert!(!pause.check(), "once it can tell, the file's absence unpauses");
        std::fs::create_dir(&blocker).unwrap();
        std::fs::write(blocker.join("paused"), "").unwrap();
        assert!(pause.check());
        assert!(!Pause::new(None, reporter).check(), "without a pause file it is never paused");
    }
}
