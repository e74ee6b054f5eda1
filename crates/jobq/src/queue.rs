//! [`Jobq`]: the handle everyone holds. Cheap to clone; the executor task stops when the last
//! handle is dropped or on [`Jobq::shutdown`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::clock::{Clock, SystemClock};
use crate::config::{ConfigError, JobqConfig};
use crate::executor::{self, Inner, Shared};
use crate::graph::{AddError, CancelError, Graph, RemoveError, RetryError};
use crate::job::{JobId, JobSpec, JobState, Work};
use crate::snapshot::{GraphSnapshot, Node};

/// The job graph and its executor. Clones share one graph.
#[derive(Debug, Clone)]
pub struct Jobq {
    shared: Arc<Shared>,
    /// Dropped with the last handle: stops the executor (which holds only `shared`).
    _owner: Arc<Owner>,
}

#[derive(Debug)]
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.request_stop();
    }
}

/// Sets up a [`Jobq`] with a clock or a seed other than the defaults.
#[derive(Debug)]
pub struct Builder {
    config: JobqConfig,
    clock: Arc<dyn Clock>,
    seed: Option<u64>,
}

impl Builder {
    /// Timestamps from `clock` instead of the system clock.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Jitter drawn from a generator seeded with `seed` instead of the OS's randomness.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks the configuration and spawns the executor on the current tokio runtime.
    ///
    /// # Errors
    /// [`ConfigError`] naming a field out of range.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(self) -> Result<Jobq, ConfigError> {
        self.config.validate()?;
        let rng = match self.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner { graph: Graph::new(self.config.max_attempts), stopping: false, stopped: false }),
            wake: Notify::new(),
            generation: watch::Sender::new(0),
            config: self.config,
            clock: self.clock,
        });
        tokio::spawn(executor::run(shared.clone(), rng));
        Ok(Jobq { _owner: Arc::new(Owner(shared.clone())), shared })
    }
}

/// Why [`Jobq::wait_settled`] returned without every job settled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// A job asked about is not in the graph.
    #[error("no job {0} in the graph")]
    UnknownJob(JobId),
    /// The deadline passed first.
    #[error("jobs still not settled at the deadline: {}", describe(.pending))]
    Timeout {
        /// Every job not settled, with its state.
        pending: BTreeMap<JobId, JobState>,
    },
}

fn describe(pending: &BTreeMap<JobId, JobState>) -> String {
    pending.iter().map(|(id, s)| format!("{id} ({s})")).collect::<Vec<_>>().join(", ")
}

impl Jobq {
    /// A queue with `config`, the system clock and OS randomness; see [`Jobq::builder`].
    ///
    /// # Errors
    /// [`ConfigError`] naming a field out of range.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(config: JobqConfig) -> Result<Self, ConfigError> {
        Self::builder(config).start()
    }

    /// A builder for a queue with another clock or a fixed seed.
    pub fn builder(config: JobqConfig) -> Builder {
        Builder { config, clock: Arc::new(SystemClock), seed: None }
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &JobqConfig {
        &self.shared.config
    }

    /// Adds a job; it runs once every dependency has succeeded.
    ///
    /// # Errors
    /// [`AddError`]: a duplicate id, an unknown or cancelled dependency, a bad kind or agent,
    /// or a queue that has shut down. Nothing is added then.
    pub fn add(&self, spec: JobSpec, work: Work) -> Result<(), AddError> {
        let now = self.shared.now();
        {
            let mut inner = self.shared.lock();
            if inner.stopping {
                return Err(AddError::Stopped(spec.id));
            }
            inner.graph.add(spec, work, now)?;
            self.shared.bump();
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Gives a failed job a fresh set of attempts; the jobs it blocked wait for it again.
    ///
    /// # Errors
    /// [`RetryError`]: no such job, a job that is not failed, or a queue that has shut down.
    pub fn retry(&self, id: &JobId) -> Result<(), RetryError> {
        {
            let mut inner = self.shared.lock();
            if inner.stopping {
                return Err(RetryError::Stopped(id.clone()));
            }
            inner.graph.retry(id)?;
            self.shared.bump();
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Cancels a job and every job that depends on it, directly or not. A running job finishes
    /// its attempt first and is then cancelled, whatever the attempt's outcome (its work may
    /// have been done: work is idempotent). Cancelling a cancelled job does nothing.
    ///
    /// # Errors
    /// [`CancelError`]: no such job, or one that already succeeded.
    pub fn cancel(&self, id: &JobId) -> Result<(), CancelError> {
        let now = self.shared.now();
        {
            let mut inner = self.shared.lock();
            inner.graph.cancel(id, now)?;
            self.shared.bump();
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Removes a settled job that no job depends on any more (to keep a long-running graph
    /// small: remove an agent's jobs from the last to the first).
    ///
    /// # Errors
    /// [`RemoveError`]: no such job, a job not settled, or one that others depend on.
    pub fn remove(&self, id: &JobId) -> Result<(), RemoveError> {
        let work = {
            let mut inner = self.shared.lock();
            let work = inner.graph.remove(id)?;
            self.shared.bump();
            work
        };
        // Dropped outside the lock: whatever the work holds goes with it.
        drop(work);
        Ok(())
    }

    /// The job's state, if it is in the graph.
    pub fn state(&self, id: &JobId) -> Option<JobState> {
        self.shared.lock().graph.state(id)
    }

    /// One job as the snapshot shows it, if it is in the graph.
    pub fn node(&self, id: &JobId) -> Option<Node> {
        self.shared.lock().graph.view(id)
    }

    /// Every job and dependency, as one consistent picture.
    pub fn snapshot(&self) -> GraphSnapshot {
        let inner = self.shared.lock();
        // Read under the graph's lock, so the generation matches the graph.
        let generation = *self.shared.generation.borrow();
        inner.graph.snapshot(generation)
    }

    /// The generation counter: it changes after every change to the graph (jobs added,
    /// attempts started and ended, retries, cancels). Wait with `changed()`, then take a
    /// [`Jobq::snapshot`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// Waits until every job in `ids` is settled (succeeded, failed, blocked or cancelled) and
    /// returns their states.
    ///
    /// # Errors
    /// [`WaitError::UnknownJob`] at once for a job not in the graph; [`WaitError::Timeout`]
    /// with the jobs still pending once `deadline` (tokio's clock) has passed.
    pub async fn wait_settled(&self, ids: &[JobId], deadline: Instant) -> Result<BTreeMap<JobId, JobState>, WaitError> {
        let mut changes = self.subscribe();
        loop {
            changes.borrow_and_update();
            let states = self.states(ids)?;
            if states.values().all(|s| s.is_settled()) {
                return Ok(states);
            }
            // The sender lives in `shared`, which this handle holds: `changed` cannot fail.
            if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
                let states = self.states(ids)?;
                if states.values().all(|s| s.is_settled()) {
                    return Ok(states);
                }
                let pending = states.into_iter().filter(|(_, s)| !s.is_settled()).collect();
                return Err(WaitError::Timeout { pending });
            }
        }
    }

    fn states(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, WaitError> {
        let inner = self.shared.lock();
        ids.iter()
            .map(|id| inner.graph.state(id).map(|s| (id.clone(), s)).ok_or_else(|| WaitError::UnknownJob(id.clone())))
            .collect()
    }

    /// Stops the executor: every job not settled is cancelled, attempts in flight are
    /// abandoned, and later `add` and `retry` calls are refused. Returns once it has stopped.
    pub async fn shutdown(&self) {
        let mut changes = self.subscribe();
        self.shared.request_stop();
        while !self.shared.lock().stopped {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether the queue has stopped.
    pub fn is_stopped(&self) -> bool {
        self.shared.lock().stopped
    }
}
