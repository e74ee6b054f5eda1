//! The state machine: jobs, their dependencies and every transition, with no I/O and no
//! clock of its own (each call is given "now"), so every transition is tested directly.
//!
//! ```text
//!             add (deps pending)          add (no deps / all succeeded)
//!                   │                                │
//!                   ▼      last dep succeeded        ▼      a slot is free
//!  retry of  ┌─▶ waiting ───────────────────────▶ ready ──────────────────▶ running
//!  the dep   │      │                              ▲                       │  │  │
//!            │      │ a dep failed/blocked         │ due                   │  │  │ ok
//!            │      ▼                              │           failed,     │  │  ▼
//!            └── blocked ◀── (dependents) ──┐    retrying ◀── attempts ◀───┘  │ succeeded
//!                                           │              left (retryable)   │
//!                                        failed ◀── permanent, or no attempt left
//!                                           │
//!                                           │
//!                                           └── retry ──▶ ready (a fresh set of attempts)
//! ```
//! `cancel` makes any job that has not succeeded `cancelled` (a running one once its attempt
//! ends), and with it every job that depends on it, directly or not.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;

use crate::clock::truncate_to_millis;
use crate::error::AttemptError;
use crate::job::{Done, InvalidName, JobId, JobSpec, JobState, check_label};
use crate::snapshot::{Edge, GraphSnapshot, Node as NodeView};

/// The longest `last_error` kept: a snapshot of thousands of jobs stays small, and a server
/// that answers with a whole HTML page does not fill the graph.
pub const MAX_ERROR_LEN: usize = 1024;

/// "Now" on both clocks: tokio's for scheduling, the wall clock for the snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub instant: Instant,
    pub wall: OffsetDateTime,
}

/// Why a job was not added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddError {
    /// A job with that id is already in the graph.
    #[error("job {0} is already in the graph; job ids are unique")]
    Duplicate(JobId),
    /// A dependency is not in the graph (dependencies are added first, so no cycle can form).
    #[error("job {job} depends on {dependency}, which is not in the graph; add dependencies first")]
    UnknownDependency {
        /// The job being added.
        job: JobId,
        /// The missing dependency.
        dependency: JobId,
    },
    /// A dependency is cancelled, so the job could never run.
    #[error("job {job} depends on {dependency}, which is cancelled; it could never run")]
    DependencyCancelled {
        /// The job being added.
        job: JobId,
        /// The cancelled dependency.
        dependency: JobId,
    },
    /// The kind or the agent breaks the naming rule.
    #[error("job {job}: {source}")]
    InvalidLabel {
        /// The job being added.
        job: JobId,
        /// What is wrong.
        source: InvalidName,
    },
    /// The queue has shut down.
    #[error("the job queue has shut down; job {0} was not added")]
    Stopped(JobId),
}

/// Why a job was not retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryError {
    /// No such job.
    #[error("no job {0} in the graph")]
    UnknownJob(JobId),
    /// Only a failed job can be retried.
    #[error("job {job} is {state}, not failed; only a failed job can be retried")]
    NotFailed {
        /// The job.
        job: JobId,
        /// Its state.
        state: JobState,
    },
    /// The queue has shut down.
    #[error("the job queue has shut down; job {0} was not retried")]
    Stopped(JobId),
}

/// Why a job was not cancelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No such job.
    #[error("no job {0} in the graph")]
    UnknownJob(JobId),
    /// Its work is done (or had nothing to do); there is nothing to cancel.
    #[error("job {0} has succeeded or was skipped; there is nothing to cancel")]
    Succeeded(JobId),
}

/// Why a job was not removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoveError {
    /// No such job.
    #[error("no job {0} in the graph")]
    UnknownJob(JobId),
    /// Only a settled job may go.
    #[error(
        "job {job} is {state}; only a settled job (succeeded, skipped, failed, blocked or cancelled) can be removed"
    )]
    NotSettled {
        /// The job.
        job: JobId,
        /// Its state.
        state: JobState,
    },
    /// Jobs still depend on it; remove them first.
    #[error("jobs still depend on {job} ({}); remove them first", .dependents.iter().map(JobId::as_str).collect::<Vec<_>>().join(", "))]
    HasDependents {
        /// The job.
        job: JobId,
        /// The jobs that depend on it.
        dependents: Vec<JobId>,
    },
}

/// What an attempt's end did to its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Succeeded.
    Succeeded,
    /// Had nothing to do.
    Skipped,
    /// Retrying after this wait.
    Retrying(Duration),
    /// Failed: the error was permanent, or no attempt is left.
    Failed,
    /// Cancelled while the attempt ran.
    Cancelled,
}

#[derive(Debug)]
struct Node<W> {
    /// Order of addition: a topological order.
    seq: u64,
    spec: JobSpec,
    dependents: Vec<JobId>,
    work: W,
    state: JobState,
    attempts: u32,
    last_error: Option<String>,
    /// When `skipped`: why.
    skipped_because: Option<String>,
    /// When `retrying`: when it becomes ready (tokio's clock) and the same on the wall clock.
    due: Option<Instant>,
    next_attempt_at: Option<OffsetDateTime>,
    created_at: OffsetDateTime,
    started_at: Option<OffsetDateTime>,
    finished_at: Option<OffsetDateTime>,
    /// `cancel` came while an attempt ran: the job is cancelled when the attempt ends.
    cancel_requested: bool,
}

/// The jobs; `W` is each job's work (`()` in the tests of this module).
#[derive(Debug)]
pub(crate) struct Graph<W> {
    nodes: HashMap<JobId, Node<W>>,
    next_seq: u64,
    max_attempts: u32,
    /// Ready jobs in the order they became ready, by (seq, id); an entry whose job is no
    /// longer ready (cancelled meanwhile) is skipped when popped.
    ready: VecDeque<(u64, JobId)>,
    /// Retrying jobs by due time.
    timers: BTreeMap<(Instant, u64), JobId>,
    running: usize,
}

impl<W: Clone> Graph<W> {
    pub fn new(max_attempts: u32) -> Self {
        Self {
            nodes: HashMap::new(),
            next_seq: 0,
            max_attempts,
            ready: VecDeque::new(),
            timers: BTreeMap::new(),
            running: 0,
        }
    }

    /// Attempts in flight.
    pub fn running(&self) -> usize {
        self.running
    }

    pub fn state(&self, id: &JobId) -> Option<JobState> {
        self.nodes.get(id).map(|n| n.state)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Adds a job: `ready` when every dependency succeeded (or it has none), `blocked` when one
    /// failed or is blocked, `waiting` otherwise.
    pub fn add(&mut self, mut spec: JobSpec, work: W, now: Now) -> Result<(), AddError> {
        let id = spec.id.clone();
        if self.nodes.contains_key(&id) {
            return Err(AddError::Duplicate(id));
        }
        check_label("kind", &spec.kind).map_err(|source| AddError::InvalidLabel { job: id.clone(), source })?;
        if let Some(agent) = &spec.agent {
            check_label("agent", agent).map_err(|source| AddError::InvalidLabel { job: id.clone(), source })?;
        }
        let mut seen = HashSet::new();
        spec.deps.retain(|d| seen.insert(d.clone()));
        for dep in &spec.deps {
            match self.nodes.get(dep).map(|n| n.state) {
                None => return Err(AddError::UnknownDependency { job: id, dependency: dep.clone() }),
                Some(JobState::Cancelled) => {
                    return Err(AddError::DependencyCancelled { job: id, dependency: dep.clone() });
                }
                Some(_) => {}
            }
        }
        let state = self.state_from_deps(&spec.deps);
        for dep in &spec.deps {
            self.nodes.get_mut(dep).expect("checked above").dependents.push(id.clone());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let finished_at = (state == JobState::Blocked).then_some(now.wall);
        self.nodes.insert(
            id.clone(),
            Node {
                seq,
                spec,
                dependents: Vec::new(),
                work,
                state,
                attempts: 0,
                last_error: None,
                skipped_because: None,
                due: None,
                next_attempt_at: None,
                created_at: now.wall,
                started_at: None,
                finished_at,
                cancel_requested: false,
            },
        );
        if state == JobState::Ready {
            self.ready.push_back((seq, id));
        }
        Ok(())
    }

    /// What a job not yet started should be, given its dependencies (none cancelled).
    fn state_from_deps(&self, deps: &[JobId]) -> JobState {
        let states = deps.iter().map(|d| self.nodes[d].state);
        let mut all_succeeded = true;
        for s in states {
            match s {
                JobState::Failed | JobState::Blocked => return JobState::Blocked,
                JobState::Succeeded | JobState::Skipped => {}
                _ => all_succeeded = false,
            }
        }
        if all_succeeded { JobState::Ready } else { JobState::Waiting }
    }

    /// Retrying jobs whose wait is over become ready; true if any did.
    pub fn promote_due(&mut self, now: Instant) -> bool {
        let mut any = false;
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((due, _), id) = entry.remove_entry();
            let Some(node) = self.nodes.get_mut(&id) else { continue };
            if node.state == JobState::Retrying && node.due == Some(due) {
                node.state = JobState::Ready;
                node.due = None;
                node.next_attempt_at = None;
                self.ready.push_back((node.seq, id));
                any = true;
            }
        }
        any
    }

    /// When the next retrying job becomes ready.
    pub fn next_due(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(due, _)| *due)
    }

    /// Starts the job that has been ready longest: it becomes `running`, one more attempt.
    /// The caller keeps to the concurrency bound.
    pub fn start_next(&mut self, now: Now) -> Option<(JobId, u32, W)> {
        while let Some((seq, id)) = self.ready.pop_front() {
            let Some(node) = self.nodes.get_mut(&id) else { continue };
            if node.seq != seq || node.state != JobState::Ready {
                continue;
            }
            node.state = JobState::Running;
            node.attempts += 1;
            node.started_at = Some(now.wall);
            node.finished_at = None;
            self.running += 1;
            return Some((id, node.attempts, node.work.clone()));
        }
        None
    }

    /// An attempt of `id` ended with `outcome`; `wait` gives the backoff after the attempt
    /// number it is passed. A retryable error retries while attempts are left, a permanent one
    /// fails the job at once. `None` if `id` was not running (nothing changes).
    pub fn finish(
        &mut self,
        id: &JobId,
        outcome: Result<Done, AttemptError>,
        now: Now,
        wait: impl FnOnce(u32) -> Duration,
    ) -> Option<Ended> {
        let max_attempts = self.max_attempts;
        let node = self.nodes.get_mut(id).filter(|n| n.state == JobState::Running)?;
        self.running -= 1;
        if let Err(error) = &outcome {
            node.last_error = Some(truncate(error.message()));
        }
        if node.cancel_requested {
            node.cancel_requested = false;
            node.state = JobState::Cancelled;
            node.finished_at = Some(now.wall);
            self.cancel_dependents(id, now);
            return Some(Ended::Cancelled);
        }
        match outcome {
            Ok(done) => {
                let (state, ended, skipped_because) = match done {
                    Done::Succeeded => (JobState::Succeeded, Ended::Succeeded, None),
                    Done::Skipped(reason) => (JobState::Skipped, Ended::Skipped, Some(truncate(&reason))),
                };
                node.state = state;
                node.skipped_because = skipped_because;
                node.last_error = None;
                node.finished_at = Some(now.wall);
                let dependents = node.dependents.clone();
                for d in dependents {
                    if self.nodes[&d].state == JobState::Waiting
                        && self.state_from_deps(&self.nodes[&d].spec.deps) == JobState::Ready
                    {
                        let node = self.nodes.get_mut(&d).expect("a dependent is in the graph");
                        node.state = JobState::Ready;
                        self.ready.push_back((node.seq, d));
                    }
                }
                Some(ended)
            }
            Err(error) if !error.is_permanent() && node.attempts < max_attempts => {
                let wait = wait(node.attempts);
                let due = now.instant + wait;
                node.state = JobState::Retrying;
                node.due = Some(due);
                node.next_attempt_at = Some(truncate_to_millis(now.wall + wait));
                self.timers.insert((due, node.seq), id.clone());
                Some(Ended::Retrying(wait))
            }
            Err(_) => {
                node.state = JobState::Failed;
                node.finished_at = Some(now.wall);
                self.block_dependents(id, now);
                Some(Ended::Failed)
            }
        }
    }

    /// Every job waiting on `id`, directly or not, becomes `blocked`.
    fn block_dependents(&mut self, id: &JobId, now: Now) {
        let mut stack = self.nodes[id].dependents.clone();
        while let Some(d) = stack.pop() {
            let node = self.nodes.get_mut(&d).expect("a dependent is in the graph");
            // A dependent of a job that has not succeeded is waiting, blocked or cancelled; the
            // last two already passed it on to their own dependents.
            if node.state == JobState::Waiting {
                node.state = JobState::Blocked;
                node.finished_at = Some(now.wall);
                stack.extend(node.dependents.iter().cloned());
            }
        }
    }

    /// Every job that depends on `id`, directly or not, becomes `cancelled` (unless it
    /// succeeded, which cannot happen before `id` did).
    fn cancel_dependents(&mut self, id: &JobId, now: Now) {
        let mut stack = self.nodes[id].dependents.clone();
        while let Some(d) = stack.pop() {
            let node = self.nodes.get_mut(&d).expect("a dependent is in the graph");
            match node.state {
                JobState::Cancelled | JobState::Succeeded | JobState::Skipped => continue,
                JobState::Running => node.cancel_requested = true,
                _ => self.cancel_node(&d, now),
            }
            stack.extend(self.nodes[&d].dependents.iter().cloned());
        }
    }

    /// Makes a job that is not running `cancelled`, dropping its timer.
    fn cancel_node(&mut self, id: &JobId, now: Now) {
        let node = self.nodes.get_mut(id).expect("cancelling a job in the graph");
        if let Some(due) = node.due.take() {
            self.timers.remove(&(due, node.seq));
        }
        node.state = JobState::Cancelled;
        node.next_attempt_at = None;
        node.finished_at = Some(now.wall);
    }

    /// A failed job gets a fresh set of attempts and is ready at once; the jobs it blocked wait
    /// again (those still blocked by another failed job stay blocked).
    pub fn retry(&mut self, id: &JobId) -> Result<(), RetryError> {
        let node = self.nodes.get_mut(id).ok_or_else(|| RetryError::UnknownJob(id.clone()))?;
        if node.state != JobState::Failed {
            return Err(RetryError::NotFailed { job: id.clone(), state: node.state });
        }
        node.state = JobState::Ready;
        node.attempts = 0;
        node.finished_at = None;
        self.ready.push_back((node.seq, id.clone()));
        // Every blocked job downstream, in topological order so each sees its dependencies'
        // new states.
        let mut downstream = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = self.nodes[id].dependents.clone();
        while let Some(d) = stack.pop() {
            if seen.insert(d.clone()) {
                let node = &self.nodes[&d];
                if node.state == JobState::Blocked {
                    downstream.push((node.seq, d.clone()));
                }
                stack.extend(node.dependents.iter().cloned());
            }
        }
        downstream.sort();
        for (_, d) in downstream {
            let state = self.state_from_deps(&self.nodes[&d].spec.deps);
            debug_assert_ne!(state, JobState::Ready, "the retried job has not succeeded yet");
            if state == JobState::Waiting {
                let node = self.nodes.get_mut(&d).expect("a dependent is in the graph");
                node.state = JobState::Waiting;
                node.finished_at = None;
            }
        }
        Ok(())
    }

    /// Cancels `id` and every job depending on it. A running job finishes its attempt first
    /// (and is then cancelled whatever the outcome); a cancelled one stays so.
    pub fn cancel(&mut self, id: &JobId, now: Now) -> Result<(), CancelError> {
        let node = self.nodes.get_mut(id).ok_or_else(|| CancelError::UnknownJob(id.clone()))?;
        match node.state {
            JobState::Succeeded | JobState::Skipped => return Err(CancelError::Succeeded(id.clone())),
            JobState::Cancelled => return Ok(()),
            JobState::Running => node.cancel_requested = true,
            _ => self.cancel_node(id, now),
        }
        self.cancel_dependents(id, now);
        Ok(())
    }

    /// Removes a settled job that nothing depends on any more.
    pub fn remove(&mut self, id: &JobId) -> Result<W, RemoveError> {
        let node = self.nodes.get(id).ok_or_else(|| RemoveError::UnknownJob(id.clone()))?;
        if !node.state.is_settled() {
            return Err(RemoveError::NotSettled { job: id.clone(), state: node.state });
        }
        if !node.dependents.is_empty() {
            return Err(RemoveError::HasDependents { job: id.clone(), dependents: node.dependents.clone() });
        }
        let node = self.nodes.remove(id).expect("checked above");
        for dep in &node.spec.deps {
            if let Some(d) = self.nodes.get_mut(dep) {
                d.dependents.retain(|x| x != id);
            }
        }
        Ok(node.work)
    }

    /// The queue stops: every job not settled is cancelled; attempts in flight are abandoned.
    pub fn stop(&mut self, now: Now) {
        for node in self.nodes.values_mut() {
            if !node.state.is_settled() {
                if node.state == JobState::Running {
                    node.last_error = Some("the job queue shut down during this attempt".into());
                }
                node.state = JobState::Cancelled;
                node.cancel_requested = false;
                node.due = None;
                node.next_attempt_at = None;
                node.finished_at = Some(now.wall);
            }
        }
        self.ready.clear();
        self.timers.clear();
        self.running = 0;
    }

    /// The graph as served, nodes in the order they were added.
    pub fn snapshot(&self, generation: u64) -> GraphSnapshot {
        let mut nodes: Vec<&Node<W>> = self.nodes.values().collect();
        nodes.sort_by_key(|n| n.seq);
        let edges = nodes
            .iter()
            .flat_map(|n| n.spec.deps.iter().map(|d| Edge { from: d.clone(), to: n.spec.id.clone() }))
            .collect();
        let nodes = nodes.into_iter().map(Node::view).collect();
        GraphSnapshot { generation, nodes, edges }
    }

    /// One job as the snapshot shows it.
    pub fn view(&self, id: &JobId) -> Option<NodeView> {
        self.nodes.get(id).map(Node::view)
    }
}

impl<W> Node<W> {
    fn view(&self) -> NodeView {
        NodeView {
            id: self.spec.id.clone(),
            kind: self.spec.kind.clone(),
            agent: self.spec.agent.clone(),
            state: self.state,
            attempts: self.attempts,
            last_error: self.last_error.clone(),
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            skipped_because: self.skipped_because.clone(),
        }
    }
}

/// `error` cut to [`MAX_ERROR_LEN`] bytes at a character boundary, marked when cut.
fn truncate(error: &str) -> String {
    if error.len() <= MAX_ERROR_LEN {
        return error.to_owned();
    }
    let mut end = MAX_ERROR_LEN - 3;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &error[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    use JobState::*;

    fn id(s: &str) -> JobId {
        JobId::parse(s).unwrap()
    }

    fn spec(s: &str, deps: &[&str]) -> JobSpec {
        JobSpec { id: id(s), kind: "k".into(), agent: Some("a".into()), deps: deps.iter().map(|d| id(d)).collect() }
    }

    /// A graph and a clock that moves one second per step.
    struct Fixture {
        g: Graph<()>,
        t0: Instant,
        secs: u64,
    }

    impl Fixture {
        fn new(max_attempts: u32) -> Self {
            Self { g: Graph::new(max_attempts), t0: Instant::now(), secs: 0 }
        }

        fn now(&mut self) -> Now {
            self.secs += 1;
            Now {
                instant: self.t0 + Duration::from_secs(self.secs),
                wall: datetime!(2026-11-30 12:00:00 UTC) + Duration::from_secs(self.secs),
            }
        }

        fn add(&mut self, s: &str, deps: &[&str]) -> Result<(), AddError> {
            let now = self.now();
            self.g.add(spec(s, deps), (), now)
        }

        fn start(&mut self) -> Option<String> {
            let now = self.now();
            self.g.start_next(now).map(|(id, _, ())| id.to_string())
        }

        fn end(&mut self, s: &str, outcome: Result<(), &str>) -> Option<Ended> {
            self.end_with(s, outcome.map_err(AttemptError::retryable))
        }

        fn end_with(&mut self, s: &str, outcome: Result<(), AttemptError>) -> Option<Ended> {
            self.end_done(s, outcome.map(Done::from))
        }

        fn end_done(&mut self, s: &str, outcome: Result<Done, AttemptError>) -> Option<Ended> {
            let now = self.now();
            self.g.finish(&id(s), outcome, now, |n| Duration::from_secs(10 * u64::from(n)))
        }

        fn state(&self, s: &str) -> JobState {
            self.g.state(&id(s)).unwrap()
        }

        fn states(&self, ids: &[&str]) -> Vec<JobState> {
            ids.iter().map(|s| self.state(s)).collect()
        }

        fn view(&self, s: &str) -> NodeView {
            self.g.snapshot(0).node(s).unwrap().clone()
        }
    }

    #[test]
    fn a_job_is_ready_waiting_or_blocked_when_added() {
        let mut f = Fixture::new(1);
        f.add("root", &[]).unwrap();
        f.add("child", &["root"]).unwrap();
        assert_eq!(f.states(&["root", "child"]), [Ready, Waiting]);
        assert_eq!(f.start().as_deref(), Some("root"));
        f.end("root", Ok(()));
        f.add("late", &["root"]).unwrap();
        assert_eq!(f.state("late"), Ready, "every dependency already succeeded");
        f.add("bad", &[]).unwrap();
        // child and late were ready before bad: FIFO.
        assert_eq!([f.start(), f.start(), f.start()], [Some("child".into()), Some("late".into()), Some("bad".into())]);
        f.end("bad", Err("no"));
        assert_eq!(f.state("bad"), Failed);
        f.add("after-bad", &["bad", "root"]).unwrap();
        assert_eq!(f.state("after-bad"), Blocked);
        assert!(f.view("after-bad").finished_at.is_some(), "blocked is settled");
        f.add("after-blocked", &["after-bad"]).unwrap();
        assert_eq!(f.state("after-blocked"), Blocked);
    }

    #[test]
    fn adding_refuses_duplicates_unknown_or_cancelled_dependencies_and_bad_labels() {
        let mut f = Fixture::new(1);
        f.add("a", &[]).unwrap();
        assert_eq!(f.add("a", &[]), Err(AddError::Duplicate(id("a"))));
        assert_eq!(
            f.add("b", &["a", "nope"]),
            Err(AddError::UnknownDependency { job: id("b"), dependency: id("nope") })
        );
        assert_eq!(
            f.add("self", &["self"]),
            Err(AddError::UnknownDependency { job: id("self"), dependency: id("self") })
        );
        let now = f.now();
        f.g.cancel(&id("a"), now).unwrap();
        assert_eq!(f.add("c", &["a"]), Err(AddError::DependencyCancelled { job: id("c"), dependency: id("a") }));
        let now = f.now();
        let bad_kind = JobSpec::new(id("d"), "Forge User");
        let err = f.g.add(bad_kind, (), now).unwrap_err().to_string();
        assert!(err.starts_with("job d: invalid kind \"Forge User\""), "{err}");
        let bad_agent = JobSpec::new(id("d"), "sso").agent("");
        let err = f.g.add(bad_agent, (), now).unwrap_err().to_string();
        assert!(err.contains("invalid agent \"\": it is empty"), "{err}");
        assert_eq!(f.g.len(), 1, "nothing refused was added");
        assert!(f.g.nodes[&id("a")].dependents.is_empty(), "a refused job leaves no edge behind");
    }

    #[test]
    fn a_repeated_dependency_counts_once() {
        let mut f = Fixture::new(1);
        f.add("a", &[]).unwrap();
        f.add("b", &["a", "a"]).unwrap();
        assert_eq!(f.g.snapshot(0).edges, [Edge { from: id("a"), to: id("b") }]);
        f.start();
        f.end("a", Ok(()));
        assert_eq!(f.state("b"), Ready);
        assert_eq!(f.g.ready.len(), 1);
    }

    #[test]
    fn a_skipped_job_lets_its_dependents_run_and_says_why_it_did_nothing() {
        let mut f = Fixture::new(1);
        f.add("forge", &[]).unwrap();
        f.add("deploy", &["forge"]).unwrap();
        f.start();
        let ended = f.end_done("forge", Ok(Done::Skipped("SWARM_FORGE_URL is not set".into())));
        assert_eq!(ended, Some(Ended::Skipped));
        assert_eq!(f.states(&["forge", "deploy"]), [Skipped, Ready], "as good as succeeded for its dependents");
        let view = f.g.view(&id("forge")).unwrap();
        assert_eq!((view.skipped_because.as_deref(), view.last_error), (Some("SWARM_FORGE_URL is not set"), None));
        assert!(view.finished_at.is_some() && Skipped.is_settled());
        let now = f.now();
        assert_eq!(f.g.cancel(&id("forge"), now), Err(CancelError::Succeeded(id("forge"))), "nothing to cancel");
        f.add("later", &["forge"]).unwrap();
        assert_eq!(f.state("later"), Ready, "a job added after a skipped dependency runs at once");
        let shown = serde_json::to_value(f.g.snapshot(0)).unwrap();
        assert_eq!(shown["nodes"][0]["state"], "skipped");
        assert!(shown["nodes"][1].get("skipped_because").is_none(), "only a skipped job says why");
    }

    #[test]
    fn success_readies_a_dependent_once_all_its_dependencies_succeeded() {
        let mut f = Fixture::new(1);
        f.add("x", &[]).unwrap();
        f.add("y", &[]).unwrap();
        f.add("z", &["x", "y"]).unwrap();
        f.start();
        f.start();
        assert_eq!(f.g.running(), 2);
        assert_eq!(f.end("x", Ok(())), Some(Ended::Succeeded));
        assert_eq!(f.states(&["x", "z"]), [Succeeded, Waiting]);
        f.end("y", Ok(()));
        assert_eq!(f.state("z"), Ready);
        assert_eq!(f.g.running(), 0);
        let x = f.view("x");
        assert_eq!((x.attempts, x.last_error), (1, None));
        assert!(x.started_at.unwrap() < x.finished_at.unwrap());
    }

    #[test]
    fn a_failed_attempt_retries_after_its_wait_until_the_attempts_run_out() {
        let mut f = Fixture::new(3);
        f.add("j", &[]).unwrap();
        f.add("dep", &["j"]).unwrap();
        f.add("dep2", &["dep"]).unwrap();
        f.start();
        assert_eq!(f.end("j", Err("forge answered 502")), Some(Ended::Retrying(Duration::from_secs(10))));
        let v = f.view("j");
        assert_eq!((v.state, v.attempts, v.last_error.as_deref()), (Retrying, 1, Some("forge answered 502")));
        assert_eq!(v.next_attempt_at, Some(datetime!(2026-11-30 12:00:15 UTC)), "ended at 12:00:05, waits 10 s");
        assert_eq!(f.start(), None, "not due yet");
        let due = f.g.next_due().unwrap();
        assert!(!f.g.promote_due(due - Duration::from_millis(1)));
        assert!(f.g.promote_due(due));
        assert_eq!((f.state("j"), f.view("j").next_attempt_at), (Ready, None));
        f.start();
        assert_eq!(f.view("j").last_error.as_deref(), Some("forge answered 502"), "kept while the next attempt runs");
        assert_eq!(f.end("j", Err("again")), Some(Ended::Retrying(Duration::from_secs(20))), "the wait grows");
        f.g.promote_due(f.g.next_due().unwrap());
        f.start();
        assert_eq!(f.end("j", Err("still")), Some(Ended::Failed));
        let v = f.view("j");
        assert_eq!((v.state, v.attempts, v.last_error.as_deref()), (Failed, 3, Some("still")));
        assert_eq!(f.states(&["dep", "dep2"]), [Blocked, Blocked], "failure blocks every job downstream");
        assert_eq!(f.g.next_due(), None);
    }

    #[test]
    fn a_permanent_error_fails_the_job_at_once_with_attempts_left_and_blocks_downstream() {
        let mut f = Fixture::new(5);
        f.add("j", &[]).unwrap();
        f.add("dep", &["j"]).unwrap();
        f.add("dep2", &["dep"]).unwrap();
        f.start();
        let refusal = "forge create user j: HTTP 422 Unprocessable Entity: user already exists [name: j]";
        assert_eq!(f.end_with("j", Err(AttemptError::permanent(refusal))), Some(Ended::Failed));
        let v = f.view("j");
        assert_eq!((v.state, v.attempts, v.last_error.as_deref()), (Failed, 1, Some(refusal)));
        assert!(v.finished_at.is_some() && v.next_attempt_at.is_none());
        assert_eq!(f.states(&["dep", "dep2"]), [Blocked, Blocked]);
        assert_eq!((f.g.next_due(), f.start()), (None, None), "no second attempt is scheduled");
    }

    #[test]
    fn a_permanent_error_after_retryable_ones_ends_the_retries_and_a_retry_by_hand_runs_again() {
        let mut f = Fixture::new(5);
        f.add("j", &[]).unwrap();
        f.add("dep", &["j"]).unwrap();
        f.start();
        assert_eq!(f.end("j", Err("forge answered 503")), Some(Ended::Retrying(Duration::from_secs(10))));
        f.g.promote_due(f.g.next_due().unwrap());
        f.start();
        assert_eq!(f.end_with("j", Err(AttemptError::permanent("no"))), Some(Ended::Failed));
        assert_eq!((f.state("j"), f.view("j").attempts, f.state("dep")), (Failed, 2, Blocked));
        // Someone fixed the cause: a retry by hand gives fresh attempts, and a retryable failure
        // retries again.
        f.g.retry(&id("j")).unwrap();
        assert_eq!(f.states(&["j", "dep"]), [Ready, Waiting]);
        f.start();
        assert_eq!(f.end("j", Err("forge answered 503")), Some(Ended::Retrying(Duration::from_secs(10))));
    }

    #[test]
    fn a_permanent_error_of_a_job_cancelled_while_running_still_cancels_it() {
        let mut f = Fixture::new(3);
        f.add("r", &[]).unwrap();
        f.start();
        let now = f.now();
        f.g.cancel(&id("r"), now).unwrap();
        assert_eq!(f.end_with("r", Err(AttemptError::permanent("refused"))), Some(Ended::Cancelled));
        assert_eq!((f.state("r"), f.view("r").last_error.as_deref()), (Cancelled, Some("refused")));
    }

    #[test]
    fn an_attempt_that_succeeds_after_failures_clears_the_error() {
        let mut f = Fixture::new(2);
        f.add("j", &[]).unwrap();
        f.start();
        f.end("j", Err("once"));
        f.g.promote_due(f.g.next_due().unwrap());
        f.start();
        f.end("j", Ok(()));
        let v = f.view("j");
        assert_eq!((v.state, v.attempts, v.last_error), (Succeeded, 2, None));
    }

    #[test]
    fn retry_gives_a_failed_job_fresh_attempts_and_unblocks_what_nothing_else_blocks() {
        let mut f = Fixture::new(1);
        f.add("a", &[]).unwrap();
        f.add("b", &[]).unwrap();
        f.add("after-a", &["a"]).unwrap();
        f.add("after-both", &["a", "b"]).unwrap();
        f.add("last", &["after-a"]).unwrap();
        f.start();
        f.start();
        f.end("a", Err("x"));
        f.end("b", Err("y"));
        assert_eq!(f.states(&["after-a", "after-both", "last"]), [Blocked, Blocked, Blocked]);
        f.g.retry(&id("a")).unwrap();
        assert_eq!(f.states(&["a", "after-a", "after-both", "last"]), [Ready, Waiting, Blocked, Waiting]);
        let a = f.view("a");
        assert_eq!((a.attempts, a.finished_at, a.last_error.as_deref()), (0, None, Some("x")));
        assert_eq!(f.view("last").finished_at, None);
        f.start();
        f.end("a", Ok(()));
        assert_eq!(f.states(&["after-a", "after-both"]), [Ready, Blocked]);
        f.g.retry(&id("b")).unwrap();
        assert_eq!(f.state("after-both"), Waiting);
    }

    #[test]
    fn only_a_failed_job_can_be_retried() {
        let mut f = Fixture::new(2);
        f.add("j", &[]).unwrap();
        assert_eq!(f.g.retry(&id("nope")), Err(RetryError::UnknownJob(id("nope"))));
        assert_eq!(f.g.retry(&id("j")), Err(RetryError::NotFailed { job: id("j"), state: Ready }));
        f.start();
        assert_eq!(f.g.retry(&id("j")), Err(RetryError::NotFailed { job: id("j"), state: Running }));
        f.end("j", Err("x"));
        let err = f.g.retry(&id("j")).unwrap_err();
        assert_eq!(err.to_string(), "job j is retrying, not failed; only a failed job can be retried");
    }

    #[test]
    fn cancel_takes_a_pending_job_and_everything_downstream() {
        let mut f = Fixture::new(3);
        f.add("a", &[]).unwrap();
        f.add("b", &["a"]).unwrap();
        f.add("c", &["b"]).unwrap();
        f.add("other", &[]).unwrap();
        f.start();
        f.end("a", Err("x"));
        assert_eq!(f.state("a"), Retrying);
        let now = f.now();
        f.g.cancel(&id("a"), now).unwrap();
        assert_eq!(f.states(&["a", "b", "c", "other"]), [Cancelled, Cancelled, Cancelled, Ready]);
        assert_eq!(f.g.next_due(), None, "its timer is gone");
        assert!(f.view("a").next_attempt_at.is_none() && f.view("c").finished_at.is_some());
        assert_eq!(f.g.cancel(&id("a"), now), Ok(()), "cancelling again changes nothing");
        assert_eq!(f.start().as_deref(), Some("other"));
        assert_eq!(f.start(), None);
    }

    #[test]
    fn cancel_of_a_ready_waiting_blocked_or_failed_job() {
        let mut f = Fixture::new(1);
        f.add("ready", &[]).unwrap();
        f.add("waiting", &["ready"]).unwrap();
        let now = f.now();
        f.g.cancel(&id("waiting"), now).unwrap();
        assert_eq!(f.states(&["ready", "waiting"]), [Ready, Cancelled], "upstream is untouched");
        f.g.cancel(&id("ready"), now).unwrap();
        assert_eq!(f.start(), None, "a cancelled ready job never starts");
        f.add("fails", &[]).unwrap();
        f.add("blocked", &["fails"]).unwrap();
        f.add("blocked2", &["blocked"]).unwrap();
        f.start();
        f.end("fails", Err("x"));
        let now = f.now();
        f.g.cancel(&id("blocked"), now).unwrap();
        assert_eq!(f.states(&["fails", "blocked", "blocked2"]), [Failed, Cancelled, Cancelled]);
        f.g.cancel(&id("fails"), now).unwrap();
        assert_eq!(f.state("fails"), Cancelled, "giving up on a failed job");
        assert_eq!(f.g.retry(&id("fails")), Err(RetryError::NotFailed { job: id("fails"), state: Cancelled }));
    }

    #[test]
    fn a_running_job_is_cancelled_when_its_attempt_ends_whatever_the_outcome() {
        for outcome in [Ok(()), Err("x")] {
            let mut f = Fixture::new(3);
            f.add("r", &[]).unwrap();
            f.add("d", &["r"]).unwrap();
            f.start();
            let now = f.now();
            f.g.cancel(&id("r"), now).unwrap();
            assert_eq!(f.states(&["r", "d"]), [Running, Cancelled], "the dependent at once");
            assert_eq!(f.g.running(), 1, "the slot is held until the attempt ends");
            assert_eq!(f.end("r", outcome), Some(Ended::Cancelled));
            assert_eq!((f.state("r"), f.g.running()), (Cancelled, 0));
            assert_eq!(f.view("r").last_error.as_deref(), outcome.err());
            assert_eq!(f.start(), None);
        }
    }

    #[test]
    fn a_succeeded_or_unknown_job_cannot_be_cancelled() {
        let mut f = Fixture::new(1);
        f.add("j", &[]).unwrap();
        f.start();
        f.end("j", Ok(()));
        let now = f.now();
        assert_eq!(f.g.cancel(&id("j"), now), Err(CancelError::Succeeded(id("j"))));
        assert_eq!(f.g.cancel(&id("x"), now), Err(CancelError::UnknownJob(id("x"))));
    }

    #[test]
    fn an_end_for_a_job_that_is_not_running_changes_nothing() {
        let mut f = Fixture::new(1);
        f.add("j", &[]).unwrap();
        assert_eq!(f.end("j", Ok(())), None);
        assert_eq!(f.end("nope", Ok(())), None);
        assert_eq!(f.state("j"), Ready);
    }

    #[test]
    fn remove_takes_only_settled_leaves() {
        let mut f = Fixture::new(1);
        f.add("a", &[]).unwrap();
        f.add("b", &["a"]).unwrap();
        assert_eq!(f.g.remove(&id("x")), Err(RemoveError::UnknownJob(id("x"))));
        assert_eq!(f.g.remove(&id("b")), Err(RemoveError::NotSettled { job: id("b"), state: Waiting }));
        f.start();
        f.end("a", Ok(()));
        let err = f.g.remove(&id("a")).unwrap_err();
        assert_eq!(err.to_string(), "jobs still depend on a (b); remove them first");
        f.start();
        f.end("b", Ok(()));
        f.g.remove(&id("b")).unwrap();
        f.g.remove(&id("a")).unwrap();
        assert_eq!(f.g.len(), 0);
        f.add("a", &[]).unwrap();
        assert_eq!(f.state("a"), Ready, "an id can be used again once removed");
    }

    #[test]
    fn stop_cancels_everything_not_settled() {
        let mut f = Fixture::new(2);
        for (s, deps) in [("ok", &[][..]), ("run", &[]), ("retry", &[]), ("ready", &[]), ("wait", &["run"])] {
            f.add(s, deps).unwrap();
        }
        f.start();
        f.end("ok", Ok(()));
        f.start();
        f.start();
        f.end("retry", Err("x"));
        assert_eq!(f.states(&["ok", "run", "retry", "ready", "wait"]), [Succeeded, Running, Retrying, Ready, Waiting]);
        let now = f.now();
        f.g.stop(now);
        assert_eq!(
            f.states(&["ok", "run", "retry", "ready", "wait"]),
            [Succeeded, Cancelled, Cancelled, Cancelled, Cancelled]
        );
        assert_eq!(f.view("run").last_error.as_deref(), Some("the job queue shut down during this attempt"));
        assert_eq!((f.g.running(), f.g.next_due(), f.start()), (0, None, None));
    }

    #[test]
    fn long_errors_are_cut_at_a_character_boundary() {
        let mut f = Fixture::new(1);
        f.add("j", &[]).unwrap();
        f.start();
        let long = "é".repeat(2000);
        let now = f.now();
        f.g.finish(&id("j"), Err(long.into()), now, |_| Duration::ZERO);
        let kept = f.view("j").last_error.unwrap();
        assert!(kept.len() <= MAX_ERROR_LEN && kept.ends_with("...") && kept.starts_with("éé"), "{}", kept.len());
    }

    #[test]
    fn the_snapshot_lists_nodes_in_order_of_addition_and_one_edge_per_dependency() {
        let mut f = Fixture::new(1);
        f.add("z", &[]).unwrap();
        f.add("a", &["z"]).unwrap();
        f.add("m", &["z", "a"]).unwrap();
        let s = f.g.snapshot(5);
        let ids: Vec<&str> = s.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["z", "a", "m"]);
        let edges: Vec<(&str, &str)> = s.edges.iter().map(|e| (e.from.as_str(), e.to.as_str())).collect();
        assert_eq!(edges, [("z", "a"), ("z", "m"), ("a", "m")]);
        assert_eq!(s.generation, 5);
        assert_eq!(s.nodes[0].created_at, datetime!(2026-11-30 12:00:01 UTC));
    }
}
