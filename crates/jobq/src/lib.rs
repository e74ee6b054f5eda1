//! `hyperhive-jobq`: the swarm's job graph. An in-memory DAG of jobs, each with a kind, the agent it
//! works for, its dependencies, a state, its attempts, its last error and its timings. Jobs run
//! once every dependency has succeeded (or was skipped: its work had nothing to do here, see
//! [`Done`]), at most `max_concurrency` attempts at once. An attempt fails with an [`AttemptError`] that says whether a retry can help: a retryable failure is
//! retried after a jittered exponential backoff until `max_attempts` have failed; a permanent one
//! fails the job at once.
//! The graph lives in memory only: its owner rebuilds it after a restart, which is why every
//! job's work must be idempotent.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use hyperhive_jobq::{AttemptError, Done, JobId, JobSpec, Jobq, JobqConfig, work};
//!
//! let jobq = Jobq::new(JobqConfig::default())?;
//! let sso = JobId::parse("alpha.sso")?;
//! let forge = JobId::parse("alpha.forge-user")?;
//! jobq.add(JobSpec::new(sso.clone(), "sso").agent("alpha"), work(|| async { Ok(()) }))?;
//! jobq.add(JobSpec::new(forge.clone(), "forge-user").agent("alpha").after(sso), work(|| async {
//!     Err::<Done, _>(AttemptError::retryable("forge answered 502"))
//! }))?;
//! let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
//! let states = jobq.wait_settled(&[forge], deadline).await?;
//! println!("{}", serde_json::to_string(&jobq.snapshot())?);
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`job`]: ids, specs, states and the work type; [`error`]: what a failed attempt says.
//! - [`graph`]: the state machine, every transition, no I/O (each call is given "now").
//! - `executor`: the task that starts ready jobs under the concurrency bound, wakes retrying
//!   ones and records each attempt's end; [`queue`]: [`Jobq`], the handle.
//! - [`backoff`]: the wait before a retry; [`config`]: the settings and their checks.
//! - [`snapshot`]: the graph as JSON; [`clock`]: wall-clock timestamps, injectable.
//!
//! States, transitions and the JSON shape are described in `docs/swarm/jobq.md`.
//!
//! # Time
//! Scheduling uses tokio's clock (`tokio::time::Instant` and sleeps), so tests run on a paused
//! runtime (`#[tokio::test(start_paused = true)]`) and a minute of backoff takes no time. The
//! snapshot's timestamps come from a [`Clock`] (the system clock unless one is given).

pub mod backoff;
pub mod clock;
pub mod config;
pub mod error;
mod executor;
pub mod graph;
pub mod job;
pub mod queue;
pub mod snapshot;

pub use clock::{Clock, SystemClock};
pub use config::{ConfigError, Jitter, JobqConfig, MAX_ATTEMPTS, MAX_CONCURRENCY};
pub use error::{AttemptError, ErrorKind};
pub use graph::{AddError, CancelError, MAX_ERROR_LEN, RemoveError, RetryError};
pub use job::{Attempt, Done, InvalidName, JobId, JobSpec, JobState, Work, work};
pub use queue::{Builder, Jobq, WaitError};
pub use snapshot::{Edge, GraphSnapshot, Node};
