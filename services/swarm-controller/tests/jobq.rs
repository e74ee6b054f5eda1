//! The job graph through the real daemon (against the test kit's nats-server in JWT mode):
//! `GET /api/jobq/graph`, `POST /api/jobq/jobs/{id}/retry` and `swarmctl jobs`.
//!
//! Each test builds the graph itself, adds jobs whose work it controls (rather than through
//! agent creation, whose work is the provisioning systems'), and has the daemon serve that graph
//! (`daemon::run_with_jobq`, the same seam as the injected clock).

mod common;

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Controller, Options};
use hyper::http::{Method, StatusCode};
use hyperhive_jobq::{AttemptError, Jitter, JobId, JobSpec, JobState, Jobq, JobqConfig, Work, work};
use hyperhive_schedule::instant::parse_instant;
use hyperhive_testkit::{Process, Signal, wait_until};
use serde_json::{Value, json};
use swarm_controller::clock::{Clock, FakeClock, JobqClock};
use tokio::sync::Notify;

const SOON: Duration = Duration::from_secs(10);
const NOW: &str = "2026-11-30T12:00:00Z";

fn id(s: &str) -> JobId {
    JobId::parse(s).unwrap()
}

fn clock() -> Arc<FakeClock> {
    Arc::new(FakeClock::new(parse_instant(NOW).unwrap()))
}

fn graph(clock: &Arc<FakeClock>, max_concurrency: usize, max_attempts: u32) -> Jobq {
    let config = JobqConfig {
        max_concurrency,
        max_attempts,
        backoff_base: Duration::from_secs(3600),
        backoff_max: Duration::from_secs(3600),
        jitter: Jitter::None,
        ..JobqConfig::default()
    };
    let clock: Arc<dyn Clock> = clock.clone();
    Jobq::builder(config).clock(Arc::new(JobqClock(clock))).start().unwrap()
}

fn spec(job: &str, kind: &str, deps: &[&str]) -> JobSpec {
    let agent = job.split('.').next().unwrap();
    JobSpec { id: id(job), kind: kind.into(), agent: Some(agent.into()), deps: deps.iter().map(|d| id(d)).collect() }
}

fn ok() -> Work {
    work(|| async { Ok(()) })
}

/// Work that fails until `healthy` is set.
fn until(healthy: &Arc<AtomicBool>) -> Work {
    let healthy = healthy.clone();
    work(move || {
        let healthy = healthy.load(Ordering::SeqCst);
        async move { if healthy { Ok(()) } else { Err(AttemptError::retryable("forge answered 502 Bad Gateway")) } }
    })
}

/// Work that runs until `gate` is notified.
fn held(gate: &Arc<Notify>) -> Work {
    let gate = gate.clone();
    work(move || {
        let gate = gate.clone();
        async move {
            gate.notified().await;
            Ok(())
        }
    })
}

async fn get(c: &Controller, path: &str) -> Value {
    let (status, body) = c.json(Method::GET, path, &Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

fn states(graph: &Value) -> Vec<(String, String)> {
    common::job_states(graph)
}

async fn swarmctl(socket: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(common::swarmctl_binary())
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .await
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// A graph with a job in each state but `retrying` (which needs more than one attempt), two
/// slots: alpha: sso succeeded -> forge-user failed -> config-repo blocked; matrix running ->
/// deploy waiting; store-identity cancelled. beta: sso running -> forge-user waiting;
/// queue-credential ready (both slots are taken).
struct Fixture {
    jobq: Jobq,
    forge_healthy: Arc<AtomicBool>,
    alpha_matrix: Arc<Notify>,
    beta_sso: Arc<Notify>,
}

async fn fixture(clock: &Arc<FakeClock>) -> Fixture {
    let jobq = graph(clock, 2, 1);
    let forge_healthy = Arc::new(AtomicBool::new(false));
    let (alpha_matrix, beta_sso) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    jobq.add(spec("alpha.sso", "sso", &[]), ok()).unwrap();
    jobq.add(spec("alpha.forge-user", "forge-user", &["alpha.sso"]), until(&forge_healthy)).unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    jobq.wait_settled(&[id("alpha.forge-user")], deadline).await.unwrap();
    jobq.add(spec("alpha.config-repo", "config-repo", &["alpha.forge-user"]), ok()).unwrap();
    jobq.add(spec("alpha.matrix", "matrix", &[]), held(&alpha_matrix)).unwrap();
    jobq.add(spec("beta.sso", "sso", &[]), held(&beta_sso)).unwrap();
    jobq.add(spec("beta.forge-user", "forge-user", &["beta.sso"]), ok()).unwrap();
    jobq.add(spec("alpha.deploy", "deploy", &["alpha.matrix", "alpha.sso"]), ok()).unwrap();
    jobq.add(spec("alpha.store-identity", "store-identity", &[]), ok()).unwrap();
    jobq.cancel(&id("alpha.store-identity")).unwrap();
    jobq.add(spec("beta.queue-credential", "queue-credential", &[]), ok()).unwrap();
    wait_until("both slots to be taken", SOON, || async {
        let s = jobq.snapshot();
        (s.nodes.iter().filter(|n| n.state == JobState::Running).count() == 2).then_some(())
    })
    .await
    .unwrap();
    Fixture { jobq, forge_healthy, alpha_matrix, beta_sso }
}

#[tokio::test]
async fn the_graph_route_serves_every_job_and_dependency_and_filters_by_agent() {
    let clock = clock();
    let f = fixture(&clock).await;
    let c =
        Controller::start_with(Options { jobq: Some(f.jobq.clone()), clock: clock.clone(), ..Options::new(60) }).await;

    let graph = get(&c, "/api/jobq/graph").await;
    let expected: Vec<(String, String)> = [
        ("alpha.sso", "succeeded"),
        ("alpha.forge-user", "failed"),
        ("alpha.config-repo", "blocked"),
        ("alpha.matrix", "running"),
        ("beta.sso", "running"),
        ("beta.forge-user", "waiting"),
        ("alpha.deploy", "waiting"),
        ("alpha.store-identity", "cancelled"),
        ("beta.queue-credential", "ready"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(states(&graph), expected, "in the order they were added");
    assert_eq!(
        graph["nodes"][1],
        json!({
            "id": "alpha.forge-user", "kind": "forge-user", "agent": "alpha", "state": "failed",
            "attempts": 1, "last_error": "forge answered 502 Bad Gateway", "next_attempt_at": null,
            "created_at": NOW, "started_at": NOW, "finished_at": NOW
        })
    );
    assert_eq!(graph["nodes"][3]["finished_at"], Value::Null, "running");
    assert_eq!(graph["nodes"][8]["started_at"], Value::Null, "never started");
    assert_eq!(
        graph["edges"],
        json!([
            {"from": "alpha.sso", "to": "alpha.forge-user"},
            {"from": "alpha.forge-user", "to": "alpha.config-repo"},
            {"from": "beta.sso", "to": "beta.forge-user"},
            {"from": "alpha.matrix", "to": "alpha.deploy"},
            {"from": "alpha.sso", "to": "alpha.deploy"},
        ])
    );
    assert!(graph["generation"].as_u64().unwrap() > 0);

    let beta = get(&c, "/api/jobq/graph?agent=beta").await;
    let ids: Vec<String> = states(&beta).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["beta.sso", "beta.forge-user", "beta.queue-credential"]);
    assert_eq!(beta["edges"], json!([{"from": "beta.sso", "to": "beta.forge-user"}]));
    let nobody = get(&c, "/api/jobq/graph?agent=nobody").await;
    assert_eq!((nobody["nodes"].clone(), nobody["edges"].clone()), (json!([]), json!([])), "no jobs yet: not an error");

    // Jobs settle while the graph is served: the route shows the graph as it is now.
    f.alpha_matrix.notify_one();
    f.beta_sso.notify_one();
    let all: Vec<JobId> = f.jobq.snapshot().nodes.iter().map(|n| n.id.clone()).collect();
    f.jobq.wait_settled(&all, tokio::time::Instant::now() + SOON).await.unwrap();
    let graph = get(&c, "/api/jobq/graph").await;
    let now: Vec<String> = states(&graph).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        now,
        [
            "succeeded",
            "failed",
            "blocked",
            "succeeded",
            "succeeded",
            "succeeded",
            "succeeded",
            "cancelled",
            "succeeded"
        ]
    );
}

#[tokio::test]
async fn bad_input_on_both_routes_is_a_clear_4xx() {
    let clock = clock();
    let f = fixture(&clock).await;
    let c = Controller::start_with(Options { jobq: Some(f.jobq.clone()), clock, ..Options::new(60) }).await;
    let before = f.jobq.snapshot();
    for (method, path, code, needle) in [
        (Method::GET, "/api/jobq/graph?agent=Alpha", StatusCode::BAD_REQUEST, "invalid agent name \"Alpha\""),
        (Method::GET, "/api/jobq/graph?agent=", StatusCode::BAD_REQUEST, "it is empty"),
        (Method::GET, "/api/jobq/graph?agent=a&agent=b", StatusCode::BAD_REQUEST, "at most once"),
        (Method::GET, "/api/jobq/graph?agnet=alpha", StatusCode::BAD_REQUEST, "unknown query parameter \"agnet\""),
        (Method::POST, "/api/jobq/graph", StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::POST, "/api/jobq/jobs/Alpha.SSO/retry", StatusCode::BAD_REQUEST, "invalid job id \"Alpha.SSO\""),
        (Method::POST, "/api/jobq/jobs/alpha.nope/retry", StatusCode::NOT_FOUND, "no job alpha.nope in the job graph"),
        (
            Method::POST,
            "/api/jobq/jobs/alpha.sso/retry",
            StatusCode::CONFLICT,
            "job alpha.sso is succeeded, not failed",
        ),
        (Method::POST, "/api/jobq/jobs/alpha.matrix/retry", StatusCode::CONFLICT, "is running, not failed"),
        (Method::POST, "/api/jobq/jobs/alpha.config-repo/retry", StatusCode::CONFLICT, "is blocked, not failed"),
        (Method::GET, "/api/jobq/jobs/alpha.forge-user/retry", StatusCode::METHOD_NOT_ALLOWED, "use POST"),
        (Method::POST, "/api/jobq/jobs/alpha.forge-user", StatusCode::NOT_FOUND, "/api/jobq/jobs/{id}/retry"),
    ] {
        let (status, body) = c.call(method.clone(), path, &[], "").await.unwrap();
        assert_eq!(status, code, "{method} {path}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(needle), "{method} {path}: {error}");
    }
    assert_eq!(f.jobq.snapshot(), before, "no refused request changed the graph");
}

#[tokio::test]
async fn retry_through_the_api_reruns_a_failed_job_and_unblocks_its_dependents() {
    let clock = clock();
    let f = fixture(&clock).await;
    let c = Controller::start_with(Options { jobq: Some(f.jobq.clone()), clock, ..Options::new(60) }).await;
    // Free both slots, or the retried job would wait, ready, behind the running ones.
    f.alpha_matrix.notify_one();
    f.beta_sso.notify_one();
    f.forge_healthy.store(true, Ordering::SeqCst);
    let (status, body) = c.call(Method::POST, "/api/jobq/jobs/alpha.forge-user/retry", &[], "").await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["id"], "alpha.forge-user");
    assert!(["ready", "running", "succeeded"].contains(&body["state"].as_str().unwrap()), "{body}");
    assert!(body["attempts"].as_u64().unwrap() <= 1, "a fresh set of attempts: {body}");
    let chain = [id("alpha.forge-user"), id("alpha.config-repo")];
    let settled = f.jobq.wait_settled(&chain, tokio::time::Instant::now() + SOON).await.unwrap();
    assert!(settled.values().all(|s| *s == JobState::Succeeded), "{settled:?}");
    let graph = get(&c, "/api/jobq/graph?agent=alpha").await;
    assert_eq!(graph["nodes"][1]["last_error"], Value::Null, "cleared by the successful attempt");
    let (status, body) = c.call(Method::POST, "/api/jobq/jobs/alpha.forge-user/retry", &[], "").await.unwrap();
    assert_eq!(status, StatusCode::CONFLICT, "a retry once it succeeded: {body}");
}

#[tokio::test]
async fn a_retrying_job_shows_when_it_runs_next_and_a_restarted_daemon_serves_the_graph_it_is_given() {
    let clock = clock();
    let first = graph(&clock, 8, 6);
    first.add(spec("alpha.sso", "sso", &[]), ok()).unwrap();
    let mut c = Controller::start_with(Options { jobq: Some(first), clock: clock.clone(), ..Options::new(60) }).await;
    wait_until("alpha.sso to succeed", SOON, || async {
        let graph = get(&c, "/api/jobq/graph").await;
        (graph["nodes"][0]["state"] == "succeeded").then_some(())
    })
    .await
    .unwrap();

    c.stop().await.unwrap();
    let second = graph(&clock, 8, 6);
    second.add(spec("beta.forge-user", "forge-user", &[]), until(&Arc::new(AtomicBool::new(false)))).unwrap();
    c.options.jobq = Some(second);
    c.restart().await;
    let node = wait_until("beta.forge-user to wait for its second attempt", SOON, || async {
        let graph = get(&c, "/api/jobq/graph").await;
        (graph["nodes"][0]["state"] == "retrying").then_some(graph)
    })
    .await
    .unwrap();
    assert_eq!(node["nodes"].as_array().unwrap().len(), 1, "the graph lives in memory: only what the new one holds");
    let job = &node["nodes"][0];
    assert_eq!((job["attempts"].clone(), job["next_attempt_at"].clone()), (json!(1), json!("2026-11-30T13:00:00Z")));
    assert_eq!(job["finished_at"], Value::Null, "not settled");

    let out = stdout(&swarmctl(&c.socket, &["jobs"]).await);
    assert!(out.lines().nth(1).unwrap().contains("retrying in "), "{out}");

    c.stop().await.unwrap();
    c.options.jobq = None;
    c.restart().await;
    let empty = get(&c, "/api/jobq/graph").await;
    assert_eq!(
        (empty["nodes"].clone(), empty["edges"].clone()),
        (json!([]), json!([])),
        "a daemon's own graph starts empty"
    );
}

#[tokio::test]
async fn swarmctl_jobs_prints_the_table_the_json_and_retries() {
    let clock = clock();
    let f = fixture(&clock).await;
    let c = Controller::start_with(Options { jobq: Some(f.jobq.clone()), clock, ..Options::new(60) }).await;

    let table = stdout(&swarmctl(&c.socket, &["jobs"]).await);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split("  ").filter(|c| !c.is_empty()).map(str::trim).collect();
    assert_eq!(header, ["ID", "KIND", "AGENT", "STATE", "ATTEMPTS", "LAST ERROR", "AGE"]);
    assert_eq!(lines.len(), 10, "{table}");
    let forge: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&forge[..4], ["alpha.forge-user", "forge-user", "alpha", "failed"], "{table}");
    assert_eq!(forge[4], "1");
    assert!(lines[2].contains("forge answered 502 Bad Gateway"), "{table}");
    assert!(forge.last().unwrap().ends_with(['s', 'm', 'h', 'd']), "the age: {table}");
    assert!(lines[3].contains("blocked") && lines[8].contains("cancelled") && lines[9].contains("ready"), "{table}");

    let beta = stdout(&swarmctl(&c.socket, &["jobs", "--agent", "beta"]).await);
    let ids: Vec<&str> = beta.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(ids, ["beta.sso", "beta.forge-user", "beta.queue-credential"]);

    let as_json: Value = serde_json::from_str(&stdout(&swarmctl(&c.socket, &["jobs", "--json"]).await)).unwrap();
    assert_eq!(as_json["nodes"], get(&c, "/api/jobq/graph").await["nodes"]);

    let refused = stderr(&swarmctl(&c.socket, &["jobs", "retry", "alpha.sso"]).await);
    assert_eq!(refused, "swarmctl: job alpha.sso is succeeded, not failed; only a failed job can be retried\n");
    let unknown = stderr(&swarmctl(&c.socket, &["jobs", "retry", "alpha.nope"]).await);
    assert!(unknown.contains("no job alpha.nope in the job graph"), "{unknown}");
    let bad = stderr(&swarmctl(&c.socket, &["jobs", "retry", "Alpha!"]).await);
    assert!(bad.contains("invalid job id \"Alpha!\""), "{bad}");
    let bad = stderr(&swarmctl(&c.socket, &["jobs", "--agent", "Beta"]).await);
    assert!(bad.contains("invalid agent name \"Beta\""), "{bad}");
    let both = stderr(&swarmctl(&c.socket, &["jobs", "--agent", "beta", "retry", "alpha.sso"]).await);
    assert!(both.contains("cannot be used with"), "{both}");

    f.alpha_matrix.notify_one();
    f.beta_sso.notify_one();
    f.forge_healthy.store(true, Ordering::SeqCst);
    let retried = stdout(&swarmctl(&c.socket, &["jobs", "retry", "alpha.forge-user"]).await);
    assert!(retried.starts_with("retrying job alpha.forge-user: "), "{retried}");
    let chain = [id("alpha.forge-user"), id("alpha.config-repo")];
    let settled = f.jobq.wait_settled(&chain, tokio::time::Instant::now() + SOON).await.unwrap();
    assert!(settled.values().all(|s| *s == JobState::Succeeded), "{settled:?}");
}

#[tokio::test]
async fn swarmctl_jobs_watch_prints_a_frame_per_change_until_interrupted() {
    let clock = clock();
    let f = fixture(&clock).await;
    let c = Controller::start_with(Options { jobq: Some(f.jobq.clone()), clock, ..Options::new(60) }).await;
    let mut watch = Process::builder(common::swarmctl_binary())
        .arg("--socket")
        .arg(&c.socket)
        .args(["jobs", "--agent", "alpha", "--watch"])
        .start("swarmctl-watch")
        .unwrap();
    watch.wait_for_log("alpha.matrix", SOON).await.unwrap();
    // Nothing changes for two polls: no new frame.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(watch.log().matches("ID ").count(), 1, "{}", watch.log());

    f.alpha_matrix.notify_one();
    let deadline = tokio::time::Instant::now() + SOON;
    f.jobq.wait_settled(&[id("alpha.deploy")], deadline).await.unwrap();
    wait_until("a frame with alpha.deploy succeeded", SOON, || async {
        let log = watch.log();
        let last = log.rsplit("\n\n").next().unwrap_or_default().to_owned();
        last.lines().any(|l| l.starts_with("alpha.deploy") && l.contains("succeeded")).then_some(())
    })
    .await
    .unwrap();
    let log = watch.log();
    let frames: Vec<&str> = log.split("\n\n").map(str::trim_end).collect();
    assert!(frames.len() >= 2, "{log}");
    assert!(frames.windows(2).all(|w| w[0] != w[1]), "a frame only on a change: {log}");
    assert!(frames.iter().all(|f| f.starts_with("ID ") && !f.contains("beta.")), "{log}");
    assert!(!log.contains('\x1b'), "no terminal codes when the output is not a terminal");

    watch.signal(Signal::SIGINT).unwrap();
    let status = watch.wait_exit(SOON).await.unwrap();
    assert!(status.success(), "Ctrl-C ends the watch cleanly: {status:?}");
}
