//! Property tests: random DAGs whose jobs succeed, fail (retryably or permanently), panic or hang
//! past the attempt timeout at random on each attempt, with random concurrency bounds and attempt limits, on a paused
//! tokio clock (so every case is deterministic and takes no real time).
//!
//! Every run is recorded as a log of attempt starts and ends, and checked against:
//! - a job never starts before every one of its dependencies has succeeded;
//! - two attempts of one job never overlap;
//! - no more than `max_concurrency` attempts run at once;
//! - every job ends succeeded, failed, blocked or cancelled, and exactly as a model of the
//!   scripted outcomes predicts (so a failed job's dependents are blocked and never run);
//! - a permanent error never gets a second attempt (until someone retries the job by hand);
//! - retrying the failed jobs once the work is healthy lets every job finish;
//! - after `cancel`, neither the job nor anything downstream of it starts again, and everything
//!   downstream ends cancelled.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use common::{TokioClock, far, id};
use hyperhive_jobq::{AttemptError, Jitter, JobId, JobSpec, JobState, Jobq, JobqConfig, Work, work};
use proptest::prelude::*;
use proptest::sample::Index;
use tokio::time::sleep;

/// What one attempt does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Fail,
    /// A permanent error: no retry can help.
    Refuse,
    Panic,
}

/// Attempts that sleep this long outlive the timeout and count as failed.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The most attempts a case allows; each job has a script this long.
const MAX_ATTEMPTS: u32 = 4;
/// The marker in the panics these tests cause, so the panic hook can keep them quiet.
const PANIC_MARKER: &str = "jobq property test panic";

#[derive(Debug, Clone)]
struct Job {
    deps: Vec<usize>,
    /// Attempt n (1-based) does `script[n - 1]`, sleeping first; later attempts succeed at once.
    script: Vec<(Outcome, Duration)>,
}

#[derive(Debug, Clone)]
struct Case {
    jobs: Vec<Job>,
    max_concurrency: usize,
    max_attempts: u32,
    seed: u64,
    /// (after this long, cancel job i % n)
    cancels: Vec<(Duration, Index)>,
}

fn outcome() -> impl Strategy<Value = (Outcome, Duration)> {
    let what = prop_oneof![
        4 => Just(Outcome::Ok),
        3 => Just(Outcome::Fail),
        1 => Just(Outcome::Refuse),
        1 => Just(Outcome::Panic)
    ];
    // 3 s is past the timeout; none lands exactly on it, so no tie between a sleep and the timeout.
    let how_long = prop_oneof![Just(0u64), Just(100), Just(1000), Just(3000)].prop_map(Duration::from_millis);
    (what, how_long)
}

fn job() -> impl Strategy<Value = (Vec<Index>, Vec<(Outcome, Duration)>)> {
    (prop::collection::vec(any::<Index>(), 0..4), prop::collection::vec(outcome(), MAX_ATTEMPTS as usize))
}

fn case(with_cancels: bool) -> impl Strategy<Value = Case> {
    let cancels = if with_cancels { 1..4usize } else { 0..1usize };
    (
        prop::collection::vec(job(), 1..16),
        1usize..5,
        1u32..=MAX_ATTEMPTS,
        any::<u64>(),
        prop::collection::vec((0u64..8000, any::<Index>()), cancels),
    )
        .prop_map(|(raw, max_concurrency, max_attempts, seed, cancels)| Case {
            jobs: raw
                .into_iter()
                .enumerate()
                .map(|(i, (deps, script))| {
                    let mut deps: Vec<usize> = if i == 0 { vec![] } else { deps.iter().map(|d| d.index(i)).collect() };
                    deps.sort_unstable();
                    deps.dedup();
                    Job { deps, script }
                })
                .collect(),
            max_concurrency,
            max_attempts,
            seed,
            cancels: cancels.into_iter().map(|(ms, i)| (Duration::from_millis(ms), i)).collect(),
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Start(usize),
    /// An attempt ended; true if it returned success.
    End(usize, bool),
    /// `cancel` of this job was accepted.
    Cancel(usize),
    /// An attempt of this job is returning a permanent error.
    Refused(usize),
    /// This job was retried by hand.
    Retried(usize),
}

/// Ends an attempt in the log when dropped, so an attempt stopped by its timeout (its future
/// dropped) ends too.
struct Attempt {
    log: Arc<Mutex<Vec<Event>>>,
    job: usize,
    succeeded: bool,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.log.lock().unwrap().push(Event::End(self.job, self.succeeded));
    }
}

fn name(i: usize) -> JobId {
    id(&format!("j{i}"))
}

fn job_work(i: usize, script: Vec<(Outcome, Duration)>, log: Arc<Mutex<Vec<Event>>>, healthy: Arc<AtomicBool>) -> Work {
    let calls = Arc::new(AtomicUsize::new(0));
    work(move || {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let (outcome, how_long) = if healthy.load(Ordering::SeqCst) {
            (Outcome::Ok, Duration::ZERO)
        } else {
            script.get(n).copied().unwrap_or((Outcome::Ok, Duration::ZERO))
        };
        let log = log.clone();
        async move {
            log.lock().unwrap().push(Event::Start(i));
            let mut attempt = Attempt { log, job: i, succeeded: false };
            sleep(how_long).await;
            match outcome {
                Outcome::Ok => {
                    attempt.succeeded = true;
                    Ok(())
                }
                Outcome::Fail => Err(AttemptError::retryable(format!("attempt {} of j{i} failed", n + 1))),
                Outcome::Refuse => {
                    attempt.log.lock().unwrap().push(Event::Refused(i));
                    Err(AttemptError::permanent(format!("attempt {} of j{i} was refused", n + 1)))
                }
                Outcome::Panic => panic!("{PANIC_MARKER}"),
            }
        }
    })
}

/// Keeps this file's deliberate panics out of the test output; any other panic is printed.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or("");
            if message != PANIC_MARKER {
                default(info);
            }
        }));
    });
}

/// What the scripts predict: each job's final state and attempts, without cancels.
fn model(case: &Case) -> Vec<(JobState, u32)> {
    let mut out: Vec<(JobState, u32)> = Vec::new();
    for job in &case.jobs {
        let predicted = if job.deps.iter().any(|d| out[*d].0 != JobState::Succeeded) {
            (JobState::Blocked, 0)
        } else {
            // An attempt past the timeout fails retryably, whatever it would have returned.
            let last = job.script[..case.max_attempts as usize].iter().enumerate().find(|(_, (outcome, how_long))| {
                matches!(outcome, Outcome::Ok | Outcome::Refuse) && *how_long < TIMEOUT
            });
            match last {
                Some((k, (Outcome::Ok, _))) => (JobState::Succeeded, k as u32 + 1),
                Some((k, _)) => (JobState::Failed, k as u32 + 1),
                None => (JobState::Failed, case.max_attempts),
            }
        };
        out.push(predicted);
    }
    out
}

/// Checks ordering, overlap and the concurrency bound over the whole log.
fn check_log(case: &Case, log: &[Event]) -> Result<(), TestCaseError> {
    let n = case.jobs.len();
    let mut open = vec![0usize; n];
    let mut succeeded = vec![false; n];
    let mut refused = vec![false; n];
    let mut running = 0usize;
    for (at, event) in log.iter().enumerate() {
        match *event {
            Event::Start(i) => {
                for &d in &case.jobs[i].deps {
                    prop_assert!(succeeded[d], "j{i} started (event {at}) before its dependency j{d} succeeded");
                }
                prop_assert_eq!(open[i], 0, "two attempts of j{} at once (event {})", i, at);
                prop_assert!(!refused[i], "j{i} started again (event {at}) after a permanent error");
                open[i] += 1;
                running += 1;
                prop_assert!(running <= case.max_concurrency, "{running} attempts at once (event {at})");
            }
            Event::End(i, ok) => {
                prop_assert_eq!(open[i], 1, "j{} ended without running (event {})", i, at);
                open[i] -= 1;
                running -= 1;
                succeeded[i] |= ok;
            }
            Event::Refused(i) => refused[i] = true,
            Event::Retried(i) => refused[i] = false,
            Event::Cancel(_) => {}
        }
    }
    Ok(())
}

fn config(case: &Case) -> JobqConfig {
    JobqConfig {
        max_concurrency: case.max_concurrency,
        max_attempts: case.max_attempts,
        backoff_base: Duration::from_millis(500),
        backoff_max: Duration::from_secs(4),
        jitter: Jitter::Full,
        attempt_timeout: TIMEOUT,
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
}

/// Adds every job of `case` to a new queue; returns it with its log and health switch.
fn start(case: &Case) -> (Jobq, Arc<Mutex<Vec<Event>>>, Arc<AtomicBool>) {
    let q = Jobq::builder(config(case)).clock(Arc::new(TokioClock::new())).seed(case.seed).start().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let healthy = Arc::new(AtomicBool::new(false));
    for (i, job) in case.jobs.iter().enumerate() {
        let spec =
            JobSpec { id: name(i), kind: "k".into(), agent: None, deps: job.deps.iter().map(|d| name(*d)).collect() };
        q.add(spec, job_work(i, job.script.clone(), log.clone(), healthy.clone())).unwrap();
    }
    (q, log, healthy)
}

fn all_ids(case: &Case) -> Vec<JobId> {
    (0..case.jobs.len()).map(name).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_keep_every_invariant_and_retry_finishes_them(case in case(false)) {
        quiet_panics();
        paused_runtime().block_on(async {
            let (q, log, healthy) = start(&case);
            let ids = all_ids(&case);
            let states = q.wait_settled(&ids, far()).await.unwrap();
            let snapshot = q.snapshot();
            check_log(&case, &log.lock().unwrap())?;

            let expected = model(&case);
            for (i, (state, attempts)) in expected.iter().enumerate() {
                let node = snapshot.node(name(i).as_str()).unwrap();
                prop_assert_eq!(states[&name(i)], *state, "j{}", i);
                prop_assert_eq!((node.state, node.attempts), (*state, *attempts), "j{}", i);
                prop_assert_eq!(node.last_error.is_some(), *state == JobState::Failed, "j{}", i);
                prop_assert!(node.finished_at.is_some(), "j{} settled without a time", i);
            }
            let started: HashSet<usize> =
                log.lock().unwrap().iter().filter_map(|e| if let Event::Start(i) = e { Some(*i) } else { None }).collect();
            for (i, (state, _)) in expected.iter().enumerate() {
                if *state == JobState::Blocked {
                    prop_assert!(!started.contains(&i), "blocked j{} ran", i);
                }
            }

            healthy.store(true, Ordering::SeqCst);
            for (i, (state, _)) in expected.iter().enumerate() {
                if *state == JobState::Failed {
                    q.retry(&name(i)).unwrap();
                    log.lock().unwrap().push(Event::Retried(i));
                }
            }
            let states = q.wait_settled(&ids, far()).await.unwrap();
            prop_assert!(states.values().all(|s| *s == JobState::Succeeded), "{:?}", states);
            check_log(&case, &log.lock().unwrap())?;
            Ok(())
        })?;
    }

    #[test]
    fn after_cancel_nothing_downstream_starts_and_everything_downstream_ends_cancelled(case in case(true)) {
        quiet_panics();
        paused_runtime().block_on(async {
            let (q, log, _healthy) = start(&case);
            let n = case.jobs.len();
            let mut cancels = case.cancels.clone();
            cancels.sort_by_key(|(after, _)| *after);
            let t0 = tokio::time::Instant::now();
            for (after, which) in &cancels {
                tokio::time::sleep_until(t0 + *after).await;
                let i = which.index(n);
                // Holding the log's lock while cancelling orders the cancel among the attempts.
                let mut events = log.lock().unwrap();
                if q.cancel(&name(i)).is_ok() {
                    events.push(Event::Cancel(i));
                }
            }
            let states = q.wait_settled(&all_ids(&case), far()).await.unwrap();
            let log = log.lock().unwrap().clone();
            check_log(&case, &log)?;

            // Everything downstream of each accepted cancel, the job itself included.
            let mut downstream: BTreeMap<usize, HashSet<usize>> = BTreeMap::new();
            for event in &log {
                if let Event::Cancel(i) = *event {
                    let mut set = HashSet::from([i]);
                    for (j, job) in case.jobs.iter().enumerate().skip(i + 1) {
                        if job.deps.iter().any(|d| set.contains(d)) {
                            set.insert(j);
                        }
                    }
                    downstream.insert(i, set);
                }
            }
            for (i, set) in &downstream {
                let cancelled_at = log.iter().position(|e| *e == Event::Cancel(*i)).unwrap();
                for j in set {
                    prop_assert_eq!(states[&name(*j)], JobState::Cancelled, "j{} is downstream of cancelled j{}", j, i);
                    let started_after = log[cancelled_at..].contains(&Event::Start(*j));
                    prop_assert!(!started_after, "j{} started after j{} was cancelled", j, i);
                }
            }
            for (job, state) in &states {
                prop_assert!(state.is_settled(), "{} ended {}", job, state);
            }
            Ok(())
        })?;
    }
}
