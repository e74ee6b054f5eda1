//! The queue with its executor, on a paused tokio clock: order, backoff timing, permanent
//! failures, concurrency, panics, timeouts, cancel, retry, waiting and shutdown.

mod common;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TokioClock, at, far, id};
use hyperhive_jobq::{
    AddError, AttemptError, Jitter, JobSpec, JobState, Jobq, JobqConfig, RetryError, WaitError, Work, work,
};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep};

use JobState::*;

fn config(max_concurrency: usize, max_attempts: u32) -> JobqConfig {
    JobqConfig {
        max_concurrency,
        max_attempts,
        backoff_base: Duration::from_secs(1),
        backoff_max: Duration::from_secs(4),
        jitter: Jitter::None,
        attempt_timeout: Duration::from_secs(60),
    }
}

fn queue(config: JobqConfig) -> Jobq {
    Jobq::builder(config).clock(Arc::new(TokioClock::new())).seed(1).start().unwrap()
}

fn ok() -> Work {
    work(|| async { Ok(()) })
}

fn failing(message: &'static str) -> Work {
    work(move || async move { Err::<(), _>(AttemptError::retryable(message)) })
}

/// Work whose every attempt succeeds once `gate` is notified.
fn until_notified(gate: &Arc<Notify>) -> Work {
    let gate = gate.clone();
    work(move || {
        let gate = gate.clone();
        async move {
            gate.notified().await;
            Ok(())
        }
    })
}

/// Work whose attempts never end; `dropped` is notified when an attempt is dropped.
fn never_ending(dropped: &Arc<Notify>) -> Work {
    let dropped = dropped.clone();
    work(move || {
        let guard = DropNotify(dropped.clone());
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(())
        }
    })
}

/// Work that records when each attempt starts (seconds since `t0`) and sleeps `secs`.
fn timed(log: &Arc<Mutex<Vec<(String, f64)>>>, name: &str, secs: u64, t0: Instant) -> Work {
    let log = log.clone();
    let name = name.to_owned();
    work(move || {
        let log = log.clone();
        let name = name.clone();
        async move {
            log.lock().unwrap().push((name, t0.elapsed().as_secs_f64()));
            sleep(Duration::from_secs(secs)).await;
            Ok(())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn jobs_run_after_their_dependencies_with_their_timings() {
    let q = queue(config(8, 1));
    let log = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    q.add(JobSpec::new(id("a.sso"), "sso").agent("a"), timed(&log, "sso", 2, t0)).unwrap();
    q.add(JobSpec::new(id("a.forge"), "forge-user").agent("a").after(id("a.sso")), timed(&log, "forge", 1, t0))
        .unwrap();
    q.add(
        JobSpec::new(id("a.repo"), "config-repo").agent("a").after(id("a.forge")).after(id("a.sso")),
        timed(&log, "repo", 1, t0),
    )
    .unwrap();
    q.add(JobSpec::new(id("other"), "x"), timed(&log, "other", 0, t0)).unwrap();
    let states = q.wait_settled(&[id("a.repo"), id("other")], far()).await.unwrap();
    assert!(states.values().all(|s| *s == Succeeded), "{states:?}");
    let log = log.lock().unwrap().clone();
    assert_eq!(log, [("sso".into(), 0.0), ("other".into(), 0.0), ("forge".into(), 2.0), ("repo".into(), 3.0)]);

    let snapshot = q.snapshot();
    let repo = snapshot.node("a.repo").unwrap();
    assert_eq!((repo.created_at, repo.started_at, repo.finished_at), (at(0.0), Some(at(3.0)), Some(at(4.0))));
    assert_eq!((repo.attempts, repo.last_error.as_deref(), repo.next_attempt_at), (1, None, None));
    let edges: Vec<(&str, &str)> = snapshot.edges.iter().map(|e| (e.from.as_str(), e.to.as_str())).collect();
    assert_eq!(edges, [("a.sso", "a.forge"), ("a.forge", "a.repo"), ("a.sso", "a.repo")]);
}

#[tokio::test(start_paused = true)]
async fn failed_attempts_back_off_exponentially_to_the_maximum_then_fail() {
    let q = queue(config(8, 5));
    let t0 = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let recorded = starts.clone();
    q.add(
        JobSpec::new(id("flaky"), "k"),
        work(move || {
            recorded.lock().unwrap().push(t0.elapsed().as_secs());
            async { Err::<(), _>(AttemptError::retryable("forge answered 502")) }
        }),
    )
    .unwrap();
    q.add(JobSpec::new(id("after"), "k").after(id("flaky")), ok()).unwrap();

    sleep(Duration::from_millis(1500)).await;
    let node = q.snapshot().node("flaky").unwrap().clone();
    assert_eq!((node.state, node.attempts), (Retrying, 2));
    assert_eq!(node.next_attempt_at, Some(at(3.0)), "second attempt at 1 s, then a 2 s wait");
    assert_eq!(node.last_error.as_deref(), Some("forge answered 502"));

    let states = q.wait_settled(&[id("flaky"), id("after")], far()).await.unwrap();
    assert_eq!(states.into_values().collect::<Vec<_>>(), [Blocked, Failed]);
    // Waits of 1, 2, 4, then the 4 s maximum.
    assert_eq!(*starts.lock().unwrap(), [0, 1, 3, 7, 11]);
    let node = q.snapshot().node("flaky").unwrap().clone();
    assert_eq!((node.attempts, node.next_attempt_at, node.finished_at), (5, None, Some(at(11.0))));
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_fails_the_job_after_one_attempt_and_blocks_its_dependents() {
    let q = queue(config(8, 5));
    let attempts = Arc::new(AtomicU32::new(0));
    let counted = attempts.clone();
    let refusal = "forge create user a: HTTP 422 Unprocessable Entity: user already exists [name: a]";
    q.add(
        JobSpec::new(id("a.forge-user"), "forge-user"),
        work(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { Err::<(), _>(AttemptError::permanent(refusal)) }
        }),
    )
    .unwrap();
    q.add(JobSpec::new(id("a.config-repo"), "config-repo").after(id("a.forge-user")), ok()).unwrap();
    let states = q.wait_settled(&[id("a.forge-user"), id("a.config-repo")], far()).await.unwrap();
    assert_eq!(states.into_values().collect::<Vec<_>>(), [Blocked, Failed]);
    let node = q.snapshot().node("a.forge-user").unwrap().clone();
    assert_eq!((node.attempts, node.last_error.as_deref(), node.next_attempt_at), (1, Some(refusal), None));
    assert_eq!(node.finished_at, Some(at(0.0)), "failed at once, with no backoff");
    // Long past every backoff the job would have had: still one attempt.
    sleep(Duration::from_secs(600)).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(q.snapshot().node("a.forge-user").unwrap().attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_retryable_error_is_retried_with_backoff_until_the_work_succeeds() {
    let q = queue(config(8, 5));
    let t0 = Instant::now();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let recorded = starts.clone();
    q.add(
        JobSpec::new(id("a.forge-user"), "forge-user"),
        work(move || {
            let mut starts = recorded.lock().unwrap();
            starts.push(t0.elapsed().as_secs());
            let attempt = starts.len();
            async move {
                if attempt < 3 { Err(AttemptError::retryable("forge: no answer: connection refused")) } else { Ok(()) }
            }
        }),
    )
    .unwrap();
    sleep(Duration::from_millis(1500)).await;
    let node = q.snapshot().node("a.forge-user").unwrap().clone();
    assert_eq!((node.state, node.attempts), (Retrying, 2));
    assert_eq!(node.last_error.as_deref(), Some("forge: no answer: connection refused"));
    let states = q.wait_settled(&[id("a.forge-user")], far()).await.unwrap();
    assert_eq!(states.into_values().collect::<Vec<_>>(), [Succeeded]);
    assert_eq!(*starts.lock().unwrap(), [0, 1, 3], "waits of 1 and 2 s");
    let node = q.snapshot().node("a.forge-user").unwrap().clone();
    assert_eq!((node.attempts, node.last_error), (3, None));
}

#[tokio::test(start_paused = true)]
async fn no_more_than_max_concurrency_attempts_run_at_once_and_the_rest_wait_ready() {
    let q = queue(config(3, 1));
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let ids: Vec<_> = (0..10).map(|i| id(&format!("j{i}"))).collect();
    for job in &ids {
        let (running, peak) = (running.clone(), peak.clone());
        q.add(
            JobSpec::new(job.clone(), "k"),
            work(move || {
                let (running, peak) = (running.clone(), peak.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    sleep(Duration::from_secs(1)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                }
            }),
        )
        .unwrap();
    }
    sleep(Duration::from_millis(500)).await;
    let states: Vec<JobState> = q.snapshot().nodes.iter().map(|n| n.state).collect();
    assert_eq!(states.iter().filter(|s| **s == Running).count(), 3);
    assert_eq!(states.iter().filter(|s| **s == Ready).count(), 7);
    let t0 = Instant::now();
    q.wait_settled(&ids, far()).await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert_eq!(t0.elapsed(), Duration::from_millis(3500), "four rounds of one second");
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_the_work_or_in_making_its_future_is_a_failed_attempt() {
    let q = queue(config(8, 2));
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    q.add(
        JobSpec::new(id("in-future"), "k"),
        work(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { panic!("jobq test: a panic inside the attempt") as Result<(), AttemptError> }
        }),
    )
    .unwrap();
    let maker: Work = Arc::new(|| panic!("jobq test: a panic making the attempt"));
    q.add(JobSpec::new(id("in-call"), "k"), maker).unwrap();
    q.add(JobSpec::new(id("fine"), "k"), ok()).unwrap();
    let states = q.wait_settled(&[id("in-future"), id("in-call"), id("fine")], far()).await.unwrap();
    assert_eq!(states.into_values().collect::<Vec<_>>(), [Succeeded, Failed, Failed]);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried like any failure");
    let error = q.snapshot().node("in-call").unwrap().last_error.clone().unwrap();
    assert_eq!(error, "the attempt panicked; the log has its message");
    assert!(!error.contains("jobq test"), "the panic message stays out of the graph");
}

#[tokio::test(start_paused = true)]
async fn an_attempt_longer_than_the_timeout_is_stopped_and_counts_as_failed() {
    let q = queue(JobqConfig { attempt_timeout: Duration::from_secs(30), ..config(8, 1) });
    let dropped = Arc::new(Notify::new());
    q.add(JobSpec::new(id("hangs"), "k"), never_ending(&dropped)).unwrap();
    let t0 = Instant::now();
    let states = q.wait_settled(&[id("hangs")], far()).await.unwrap();
    assert_eq!(states[&id("hangs")], Failed);
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    assert_eq!(
        q.snapshot().node("hangs").unwrap().last_error.as_deref(),
        Some("the attempt took longer than 30 s and was stopped")
    );
    tokio::time::timeout(Duration::from_secs(1), dropped.notified()).await.expect("the attempt's future was dropped");
}

/// Notifies when dropped.
struct DropNotify(Arc<Notify>);

impl Drop for DropNotify {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[tokio::test(start_paused = true)]
async fn a_running_job_finishes_its_attempt_then_is_cancelled_with_its_dependents() {
    let q = queue(config(8, 3));
    let release = Arc::new(Notify::new());
    q.add(JobSpec::new(id("slow"), "k"), until_notified(&release)).unwrap();
    q.add(JobSpec::new(id("next"), "k").after(id("slow")), ok()).unwrap();
    q.add(JobSpec::new(id("last"), "k").after(id("next")), ok()).unwrap();
    sleep(Duration::from_millis(10)).await;
    assert_eq!(q.state(&id("slow")), Some(Running));
    q.cancel(&id("slow")).unwrap();
    assert_eq!(
        [q.state(&id("slow")), q.state(&id("next")), q.state(&id("last"))],
        [Some(Running), Some(Cancelled), Some(Cancelled)]
    );
    release.notify_one();
    let states = q.wait_settled(&[id("slow")], far()).await.unwrap();
    assert_eq!(states[&id("slow")], Cancelled, "cancelled even though the attempt succeeded");
    assert!(matches!(
        q.add(JobSpec::new(id("x"), "k").after(id("slow")), ok()),
        Err(AddError::DependencyCancelled { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn retry_after_failure_lets_the_chain_finish() {
    let q = queue(config(8, 2));
    let healthy = Arc::new(AtomicU32::new(0));
    let h = healthy.clone();
    q.add(
        JobSpec::new(id("forge"), "k"),
        work(move || {
            let ok = h.load(Ordering::SeqCst) == 1;
            async move { if ok { Ok(()) } else { Err(AttemptError::retryable("forge is down")) } }
        }),
    )
    .unwrap();
    q.add(JobSpec::new(id("token"), "k").after(id("forge")), ok()).unwrap();
    q.add(JobSpec::new(id("deploy"), "k").after(id("token")), ok()).unwrap();
    let all = [id("forge"), id("token"), id("deploy")];
    let states = q.wait_settled(&all, far()).await.unwrap();
    assert_eq!(states.into_values().collect::<Vec<_>>(), [Blocked, Failed, Blocked]);
    assert_eq!(q.retry(&id("token")), Err(RetryError::NotFailed { job: id("token"), state: Blocked }));

    healthy.store(1, Ordering::SeqCst);
    q.retry(&id("forge")).unwrap();
    assert_eq!([q.state(&id("token")), q.state(&id("deploy"))], [Some(Waiting), Some(Waiting)]);
    let states = q.wait_settled(&all, far()).await.unwrap();
    assert!(states.values().all(|s| *s == Succeeded), "{states:?}");
    let forge = q.node(&id("forge")).unwrap();
    assert_eq!((forge.attempts, forge.last_error), (1, None), "a fresh set of attempts");
    assert_eq!(q.retry(&id("nope")), Err(RetryError::UnknownJob(id("nope"))));
    assert_eq!(q.node(&id("nope")), None);
    let shown = format!("{q:?}");
    assert!(shown.contains("jobs: 3") && shown.contains("max_attempts: 2"), "{shown}");
}

#[tokio::test(start_paused = true)]
async fn waiting_names_unknown_jobs_and_times_out_with_what_is_pending() {
    let q = queue(config(8, 1));
    let never = Arc::new(Notify::new());
    q.add(JobSpec::new(id("stuck"), "k"), until_notified(&never)).unwrap();
    q.add(JobSpec::new(id("behind"), "k").after(id("stuck")), ok()).unwrap();
    assert_eq!(q.wait_settled(&[id("stuck"), id("ghost")], far()).await, Err(WaitError::UnknownJob(id("ghost"))));
    let err = q.wait_settled(&[id("stuck"), id("behind")], Instant::now() + Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.to_string(), "jobs still not settled at the deadline: behind (waiting), stuck (running)");
    assert_eq!(q.wait_settled(&[], far()).await, Ok(Default::default()));
}

#[tokio::test(start_paused = true)]
async fn every_change_moves_the_generation() {
    let q = queue(config(8, 1));
    let mut changes = q.subscribe();
    let first = *changes.borrow_and_update();
    q.add(JobSpec::new(id("a"), "k"), ok()).unwrap();
    changes.changed().await.unwrap();
    let after_add = *changes.borrow_and_update();
    assert!(after_add > first);
    q.wait_settled(&[id("a")], far()).await.unwrap();
    let snapshot = q.snapshot();
    assert!(snapshot.generation >= after_add + 2, "started, then succeeded");
    assert_eq!(snapshot.generation, *q.subscribe().borrow(), "a snapshot carries the generation it shows");
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_what_is_pending_and_refuses_new_work() {
    let q = queue(config(1, 3));
    let gate = Arc::new(Notify::new());
    q.add(JobSpec::new(id("running"), "k"), until_notified(&gate)).unwrap();
    q.add(JobSpec::new(id("queued"), "k"), ok()).unwrap();
    q.add(JobSpec::new(id("fails"), "k").after(id("queued")), failing("x")).unwrap();
    sleep(Duration::from_millis(10)).await;
    q.shutdown().await;
    assert!(q.is_stopped());
    let states: Vec<JobState> = q.snapshot().nodes.iter().map(|n| n.state).collect();
    assert_eq!(states, [Cancelled, Cancelled, Cancelled]);
    assert_eq!(
        q.snapshot().node("running").unwrap().last_error.as_deref(),
        Some("the job queue shut down during this attempt")
    );
    assert_eq!(q.add(JobSpec::new(id("late"), "k"), ok()), Err(AddError::Stopped(id("late"))));
    q.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_handle_stops_the_executor_and_drops_the_attempts() {
    let q = queue(config(8, 1));
    let dropped = Arc::new(Notify::new());
    q.add(JobSpec::new(id("forever"), "k"), never_ending(&dropped)).unwrap();
    let clone = q.clone();
    sleep(Duration::from_millis(10)).await;
    drop(q);
    sleep(Duration::from_millis(10)).await;
    assert!(!clone.is_stopped(), "a clone keeps it running");
    drop(clone);
    tokio::time::timeout(Duration::from_secs(1), dropped.notified()).await.expect("the attempt was abandoned");
}

#[tokio::test(start_paused = true)]
async fn a_bad_config_is_refused() {
    let err = Jobq::new(JobqConfig { max_concurrency: 0, ..JobqConfig::default() }).unwrap_err();
    assert!(err.to_string().contains("max_concurrency is 0"), "{err}");
}
