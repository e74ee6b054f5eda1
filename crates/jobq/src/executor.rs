//! The one task that runs attempts: it starts ready jobs while fewer than `max_concurrency`
//! attempts are in flight, wakes retrying jobs when their wait is over, and records each
//! attempt's end. Handles change the graph under the same lock and wake it.
//!
//! Each attempt runs in its own tokio task, so a panic in a job's work (even in the call that
//! makes its future) ends that attempt as a failure and nothing else; a timeout ends it the same
//! way. Both are retryable: a hung server may answer next time, and a panic is not the work
//! saying that retrying cannot help.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rand::rngs::StdRng;
use tokio::sync::{Notify, watch};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use crate::backoff;
use crate::clock::Clock;
use crate::config::JobqConfig;
use crate::error::AttemptError;
use crate::graph::{Ended, Graph, Now};
use crate::job::{Done, JobId, Work};

/// What handles and the executor share.
pub(crate) struct Shared {
    pub inner: Mutex<Inner>,
    /// Wakes the executor after a handle changed the graph or asked it to stop.
    pub wake: Notify,
    /// The generation: bumped after every change.
    pub generation: watch::Sender<u64>,
    pub config: JobqConfig,
    pub clock: Arc<dyn Clock>,
}

pub(crate) struct Inner {
    pub graph: Graph<Work>,
    /// A stop was asked for; the executor stops at its next turn.
    pub stopping: bool,
    /// The executor has stopped; nothing runs any more.
    pub stopped: bool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Shared");
        // `try_lock`: formatting while this thread holds the lock must not deadlock.
        if let Ok(inner) = self.inner.try_lock() {
            out.field("jobs", &inner.graph.len())
                .field("running", &inner.graph.running())
                .field("stopping", &inner.stopping);
        }
        out.field("generation", &*self.generation.borrow()).field("config", &self.config).finish_non_exhaustive()
    }
}

impl Shared {
    /// The graph. The lock is held only for in-memory changes, never across an await; a
    /// panic while holding it (a bug) must not stop every later caller, hence `into_inner`.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn now(&self) -> Now {
        Now { instant: Instant::now(), wall: self.clock.now() }
    }

    /// Tells watchers the graph changed; called with the graph's lock held, so a snapshot's
    /// generation always matches its graph.
    pub fn bump(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// Asks the executor to stop (idempotent).
    pub fn request_stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_one();
    }
}

/// Runs until a stop is asked for; then cancels every job not settled and abandons the attempts
/// in flight.
pub(crate) async fn run(shared: Arc<Shared>, mut rng: StdRng) {
    let mut attempts: JoinSet<Result<Done, AttemptError>> = JoinSet::new();
    let mut in_flight: HashMap<Id, (JobId, u32)> = HashMap::new();
    loop {
        let next_due = {
            let now = shared.now();
            let mut inner = shared.lock();
            if inner.stopping {
                inner.graph.stop(now);
                inner.stopped = true;
                shared.bump();
                break;
            }
            let mut changed = inner.graph.promote_due(now.instant);
            while inner.graph.running() < shared.config.max_concurrency {
                let Some((id, attempt, work)) = inner.graph.start_next(now) else { break };
                tracing::debug!(job = %id, attempt, "job attempt starting");
                let handle = attempts.spawn(run_attempt(work, shared.config.attempt_timeout));
                in_flight.insert(handle.id(), (id, attempt));
                changed = true;
            }
            if changed {
                shared.bump();
            }
            inner.graph.next_due()
        };
        tokio::select! {
            () = shared.wake.notified() => {}
            () = sleep_until(next_due) => {}
            Some(joined) = attempts.join_next_with_id() => {
                let (task, outcome) = match joined {
                    Ok((task, outcome)) => (task, outcome),
                    Err(err) => (err.id(), Err(describe(&err))),
                };
                let (id, attempt) = in_flight.remove(&task).expect("every attempt task is recorded");
                finish(&shared, &id, attempt, outcome, &mut rng);
            }
        }
    }
    attempts.shutdown().await;
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// One attempt, stopped after `timeout`. The work is called inside the task, so a panic while
/// making the future is caught too.
async fn run_attempt(work: Work, timeout: std::time::Duration) -> Result<Done, AttemptError> {
    match tokio::time::timeout(timeout, async move { work().await }).await {
        Ok(outcome) => outcome,
        Err(_) => Err(AttemptError::retryable(format!(
            "the attempt took longer than {} s and was stopped",
            timeout.as_secs_f64()
        ))),
    }
}

/// A panicked (or, at shutdown, aborted) attempt. The panic's message may hold anything, so it
/// stays in the log (the panic hook printed it) and out of the graph.
fn describe(err: &JoinError) -> AttemptError {
    AttemptError::retryable(if err.is_panic() {
        "the attempt panicked; the log has its message"
    } else {
        "the attempt was aborted"
    })
}

fn finish(shared: &Shared, id: &JobId, attempt: u32, outcome: Result<Done, AttemptError>, rng: &mut StdRng) {
    let now = shared.now();
    let error = outcome.as_ref().err().cloned();
    let permanent = error.as_ref().is_some_and(AttemptError::is_permanent);
    let ended = {
        let mut inner = shared.lock();
        let ended = inner.graph.finish(id, outcome, now, |n| backoff::delay(&shared.config, n, rng));
        shared.bump();
        ended
    };
    let error = error.as_ref().map_or("", AttemptError::message);
    match ended {
        Some(Ended::Succeeded) => tracing::info!(job = %id, attempt, "job succeeded"),
        Some(Ended::Skipped) => tracing::info!(job = %id, attempt, "job skipped: nothing to do here"),
        Some(Ended::Retrying(wait)) => {
            tracing::warn!(job = %id, attempt, error, retry_in = ?wait, "job attempt failed; retrying");
        }
        Some(Ended::Failed) if permanent => {
            tracing::warn!(job = %id, attempt, error, "job failed: a retry cannot help (fix the cause, then retry it by hand)");
        }
        Some(Ended::Failed) => {
            tracing::warn!(job = %id, attempt, error, "job failed: no attempt left (retry it by hand)");
        }
        Some(Ended::Cancelled) => tracing::info!(job = %id, attempt, error, "job cancelled after its attempt"),
        None => {}
    }
}
