//! One way to stop: a daemon's background tasks share one cancellation token and one task
//! tracker.
//!
//! Every task is spawned with [`Tasks::spawn`], which races it against the token, so no task is
//! left running by an exit path that forgot to abort it (the model is mini-redis's shutdown
//! broadcast with its drop guard, in the form iroh gives it). [`Tasks::stop`] cancels and then
//! waits, within a bound, for the tracker to drain, so a daemon's `run` returns only once its
//! tasks are gone; [`Tasks::stop_after`] first gives tasks told to stop some other way (a
//! message) a grace to finish their step.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use tokio_util::sync::DropGuard;

/// How long a daemon waits for its tasks after cancelling them: long enough for a task to finish
/// the step it is in (a NATS request, a file write), well within systemd's stop timeout (90 s).
pub const STOP_WITHIN: Duration = Duration::from_secs(10);

/// A daemon's background tasks.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Tasks {
    /// No task yet, not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `task` until it ends or the token is cancelled, whichever comes first (it is dropped
    /// at its next await point then).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                () = token.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Whether the tasks were told to stop.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Tells every task to stop, then waits at most `within` for all of them to finish.
    /// Returns whether they did; the ones that did not are named by count in a warning (they
    /// end with the runtime).
    pub async fn stop(&self, within: Duration) -> bool {
        self.token.cancel();
        self.tracker.close();
        if tokio::time::timeout(within, self.tracker.wait()).await.is_ok() {
            return true;
        }
        tracing::warn!(running = self.tracker.len(), ?within, "background tasks did not stop in time");
        false
    }

    /// Waits at most `grace` for the tasks to end on their own (they were told to stop some
    /// other way, and finish a step first), then stops them as [`Tasks::stop`] does. Returns
    /// whether they ended within `grace`.
    pub async fn stop_after(&self, grace: Duration, within: Duration) -> bool {
        self.tracker.close();
        let ended = tokio::time::timeout(grace, self.tracker.wait()).await.is_ok();
        if !ended {
            tracing::warn!(running = self.tracker.len(), ?grace, "tasks did not end in their grace; stopping them");
        }
        self.stop(within).await;
        ended
    }

    /// Cancels the tasks when the guard is dropped: for an owner whose drop must stop them.
    pub fn cancel_on_drop(&self) -> DropGuard {
        self.token.clone().drop_guard()
    }

    /// How many tasks are still running.
    pub fn running(&self) -> usize {
        self.tracker.len()
    }

    /// Whether [`Tasks::stop`] was called and every task has finished.
    pub fn is_stopped(&self) -> bool {
        self.tracker.is_closed() && self.tracker.is_empty()
    }
}

/// Resolves at the first SIGTERM or SIGINT (logging which): the shutdown every daemon's `main`
/// hands its `run`.
///
/// # Errors
/// The SIGTERM handler cannot be installed; a daemon should not start then, since it could not be
/// stopped cleanly.
pub fn signals() -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_ends_every_task() {
        let tasks = Tasks::new();
        tasks.spawn(std::future::pending());
        tasks.spawn(std::future::pending());
        assert_eq!(tasks.running(), 2);
        assert!(!tasks.is_stopped());
        assert!(tasks.stop(Duration::from_secs(5)).await);
        assert!(tasks.is_stopped() && tasks.is_cancelled());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_is_bounded_by_a_task_stuck_outside_an_await() {
        let tasks = Tasks::new();
        let (entered, started) = std::sync::mpsc::channel::<()>();
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        // A task blocking its thread never reaches an await where the token could end it.
        tasks.spawn(async move {
            let _ = entered.send(());
            let _ = stuck.recv();
        });
        let _ = tokio::task::spawn_blocking(move || started.recv()).await;
        assert!(!tasks.stop(Duration::from_millis(50)).await);
        assert_eq!(tasks.running(), 1);
        assert!(!tasks.is_stopped());
        let _ = release.send(());
        assert!(tasks.stop(Duration::from_secs(5)).await, "it ends once released");
    }

    #[tokio::test]
    async fn a_task_that_ends_by_itself_leaves_the_tracker() {
        let tasks = Tasks::new();
        tasks.spawn(async {});
        assert!(tasks.stop(Duration::from_secs(5)).await);
        assert_eq!(tasks.running(), 0);
    }

    #[tokio::test]
    async fn stop_after_gives_a_grace_then_cancels() {
        let tasks = Tasks::new();
        let (done, told) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(async move {
            let _ = told.await;
        });
        let _ = done.send(());
        assert!(tasks.stop_after(Duration::from_secs(5), Duration::from_secs(5)).await, "it ended on its own");

        let stuck = Tasks::new();
        stuck.spawn(std::future::pending());
        assert!(!stuck.stop_after(Duration::from_millis(20), Duration::from_secs(5)).await);
        assert!(stuck.is_stopped(), "cancelled once the grace was over");
    }

    #[tokio::test]
    async fn a_dropped_guard_cancels() {
        let tasks = Tasks::new();
        drop(tasks.cancel_on_drop());
        assert!(tasks.is_cancelled());
    }
}
