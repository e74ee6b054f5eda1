//! Giving agents work now and reading what they did, on a whole small swarm of processes (the
//! controller binary, hive-c0re with the process runner, real hive-agents, NATS in JWT mode):
//! a prompt queued through the socket runs after what waits and its turn is recorded with its
//! exit code and output, its whole output read from the relay while it holds it;
//! `swarmctl prompt --wait` exits with the turn's code; the queue is listed
//! oldest first, a waiting todo is removed and the running one is cancelled (its processes gone,
//! its todo not retried); a restart of hive-c0re loses no queued prompt and reruns no finished
//! one; every bad request is refused and queues nothing; the overview counts every agent by what
//! it does and by its last turn, the controller following every agent's last turn in `TURNS`.
//! Needs `cargo build -p hive-agent -p hive-c0re -p swarmctl`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::one_hive::OneHive;
use hyper::http::{Method, StatusCode};
use hyperhive_testkit::{Tool, tool, wait_until};
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(30);

/// A turn that appends its prompt to `turns`, prints two lines, and then: exits 3 for a prompt
/// holding "fail", for one holding "long" writes its pid and its background child's pid to
/// `turns.pids` and sleeps for a minute, for one holding "many" prints the numbers 1 to 8000.
fn turn(turns: &Path) -> String {
    format!(
        r#"body=$(cat); printf '%s\n' "$body" >> {turns}; echo "working on $HIVE_TODO_ID"; echo "second line";
case "$body" in
  *fail*) exit 3 ;;
  *long*) sleep 60 & echo "$$ $!" > {turns}.pids; wait ;;
  *many*) seq 1 8000 ;;
esac"#,
        turns = turns.display()
    )
}

async fn call(swarm: &OneHive, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = hyper::Request::builder().method(method).uri(path).header("x-set-by", "tester");
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(http_body_util::Full::new(bytes::Bytes::from(body.map(|b| b.to_string()).unwrap_or_default())))
        .unwrap();
    let (status, bytes) = swarmctl::client::send(&swarm.socket, request).await.unwrap();
    let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    (status, value)
}

/// The swarm with agent `bee` consuming its queue.
async fn started() -> OneHive {
    let swarm = OneHive::start(&["bee"], turn, &[]).await;
    wait_until("bee consuming", SOON, || async {
        let (status, agents) = call(&swarm, Method::GET, "/api/agents", None).await;
        (status == StatusCode::OK && agents[0]["actual"]["actual"] == "running").then_some(())
    })
    .await
    .unwrap();
    swarm
}

async fn prompt(swarm: &OneHive, body: &str, id: &str) -> Value {
    prompt_to(swarm, "bee", body, id).await
}

async fn prompt_to(swarm: &OneHive, agent: &str, body: &str, id: &str) -> Value {
    let path = format!("/api/agents/{agent}/todos");
    let (status, answer) = call(swarm, Method::POST, &path, Some(json!({"body": body, "id": id}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    answer
}

/// The finished turn of todo `id`, once it is in the history.
async fn finished(swarm: &OneHive, id: &str) -> Value {
    wait_until(&format!("the turn of {id}"), SOON, || async {
        let (status, turn) = call(swarm, Method::GET, &format!("/api/agents/bee/turns/{id}"), None).await;
        (status == StatusCode::OK).then_some(turn)
    })
    .await
    .unwrap()
}

async fn queue(swarm: &OneHive) -> Vec<(String, String)> {
    let (status, queue) = call(swarm, Method::GET, "/api/agents/bee/todos", None).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    queue
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap().into(), t["state"].as_str().unwrap().into()))
        .collect()
}

/// A GET answered with bytes.
async fn get_bytes(swarm: &OneHive, path: &str) -> (StatusCode, bytes::Bytes) {
    let request = hyper::Request::get(path).body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
    swarmctl::client::send(&swarm.socket, request).await.unwrap()
}

fn swarmctl(swarm: &OneHive, args: &[&str]) -> std::process::Output {
    common::swarmctl_on(&swarm.socket, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_runs_now_and_its_turn_is_recorded_with_its_exit_code_and_output() {
    let swarm = started().await;
    let accepted = prompt(&swarm, "first", "p1").await;
    let source = format!("operator:tester@{}", common::this_user());
    assert_eq!(accepted, json!({"agent": "bee", "id": "p1", "source": source, "duplicate": false}));
    let turn = finished(&swarm, "p1").await;
    assert_eq!(turn["outcome"], "succeeded", "{turn}");
    assert_eq!(turn["exit_code"], 0);
    assert_eq!(turn["prompt"], "first");
    assert_eq!(turn["source"], source);
    assert_eq!(turn["output"], "working on p1\nsecond line\n");
    // The same id again queues nothing new: one turn, the first one's.
    assert_eq!(prompt(&swarm, "first", "p1").await["duplicate"], true);

    let ok = swarmctl(&swarm, &["prompt", "bee", "--body", "second", "--wait"]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("succeeded"), "{ok:?}");
    let failed = swarmctl(&swarm, &["prompt", "bee", "--body", "please fail", "--id", "p3", "--wait"]);
    assert_eq!(failed.status.code(), Some(3), "--wait exits with the turn's code: {failed:?}");

    let (_, page) = call(&swarm, Method::GET, "/api/agents/bee/turns", None).await;
    let turns = page["turns"].as_array().unwrap();
    let prompts: Vec<&str> = turns.iter().map(|t| t["prompt"].as_str().unwrap()).collect();
    assert_eq!(prompts, ["please fail", "second", "first"], "newest first: {page}");
    assert_eq!(swarm.turns("bee"), "first\nsecond\nplease fail\n", "each prompt ran once");
    let (_, failed_only) = call(&swarm, Method::GET, "/api/agents/bee/turns?failed=true", None).await;
    assert_eq!(failed_only["turns"].as_array().unwrap().len(), 1, "{failed_only}");
    assert_eq!(failed_only["turns"][0]["exit_code"], 3);
    let (_, one) = call(&swarm, Method::GET, "/api/agents/bee/turns?limit=1", None).await;
    let before = one["next_before"].as_u64().expect("there are older turns");
    let (_, older) = call(&swarm, Method::GET, &format!("/api/agents/bee/turns?limit=5&before={before}"), None).await;
    assert_eq!(older["turns"].as_array().unwrap().len(), 2, "{older}");
    assert_eq!(older["next_before"], Value::Null);

    // The roster shows the failed last turn.
    let (_, agents) = call(&swarm, Method::GET, "/api/agents", None).await;
    assert_eq!(agents[0]["last_turn"]["outcome"], "failed", "{agents}");
    assert_eq!(agents[0]["last_turn"]["exit_code"], 3);
    let listed = swarmctl(&swarm, &["agents"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("failed (exit 3)"), "{listed:?}");
    let shown = swarmctl(&swarm, &["turn", "bee", "p3"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("please fail") && shown.contains("working on p3") && shown.contains("exit 3"), "{shown}");
}

/// The record keeps the output's last 16 KiB; the rest is read from the relay's history while it
/// holds the turn, and when it no longer does the record stays and says where to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_whole_output_is_read_from_the_relay_while_it_holds_it() {
    let swarm = started().await;
    prompt(&swarm, "many numbers", "big").await;
    let turn = finished(&swarm, "big").await;
    let numbers: String = (1..=8000).map(|i| format!("{i}\n")).collect();
    let printed = format!("working on big\nsecond line\n{numbers}");
    let tail = turn["output"].as_str().unwrap();
    assert_eq!(tail.len(), 16 * 1024, "the record keeps the last 16 KiB");
    assert!(
        printed.ends_with(tail) && turn["output_dropped"] == printed.len() - tail.len(),
        "{}",
        turn["output_dropped"]
    );
    assert_eq!(turn["relay_output"], "/api/agents/bee/turns/big/output");
    // The record is written beside the relay's feed, so the last chunks may still be on their way.
    wait_until("the whole output in the relay", SOON, || async {
        let (status, whole) = get_bytes(&swarm, "/api/agents/bee/turns/big/output").await;
        assert_eq!(status, StatusCode::OK);
        (whole == printed.as_bytes()).then_some(())
    })
    .await
    .unwrap();
    let shown = swarmctl(&swarm, &["turn", "bee", "big"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("bytes before; --full for all of it)"), "{shown:?}");
    let full = swarmctl(&swarm, &["turn", "bee", "big", "--full"]);
    let full = String::from_utf8(full.stdout).unwrap();
    assert!(
        full.contains("output (all of it, from the relay's history):\nworking on big\nsecond line\n1\n2\n"),
        "{full}"
    );
    assert!(full.ends_with("7999\n8000\n"), "{full}");

    // The relay's limits drop the turn's headers (here: purged): the record stays, without the
    // link, and the output route says where the tail is.
    let js = async_nats::jetstream::new(swarm.nats.controller_client().await.unwrap());
    js.get_stream("RELAY").await.unwrap().purge().filter("turn.bee").await.unwrap();
    let (status, turn) = call(&swarm, Method::GET, "/api/agents/bee/turns/big", None).await;
    assert_eq!((status, turn.get("relay_output")), (StatusCode::OK, None), "{turn}");
    let (status, gone) = call(&swarm, Method::GET, "/api/agents/bee/turns/big/output", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(gone["error"].as_str().unwrap().contains("no longer holds the output"), "{gone}");
    let (status, never) = call(&swarm, Method::GET, "/api/agents/bee/turns/nope/output", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{never}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_waits_behind_a_running_turn_a_waiting_one_is_removed_and_the_running_one_cancelled() {
    let swarm = started().await;
    let mut waiting = tokio::process::Command::new(common::swarmctl_binary())
        .arg("--socket")
        .arg(&swarm.socket)
        .args(["prompt", "bee", "--body", "a long one", "--id", "long", "--wait"])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pids_file = swarm.path("bee.turns.pids");
    let pids: Vec<i32> = wait_until("the long turn's processes", SOON, || async {
        let text = std::fs::read_to_string(&pids_file).ok()?;
        let pids: Vec<i32> = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        (pids.len() == 2).then_some(pids)
    })
    .await
    .unwrap();
    prompt(&swarm, "next one", "next-1").await;
    prompt(&swarm, "never run", "next-2").await;
    let expected = [("long", "running"), ("next-1", "waiting"), ("next-2", "waiting")];
    assert_eq!(queue(&swarm).await, expected.map(|(a, b)| (a.to_owned(), b.to_owned())), "oldest first");

    let (status, refused) = call(&swarm, Method::DELETE, "/api/agents/bee/todos/long", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("turn/cancel"), "{refused}");
    let (status, _) = call(&swarm, Method::DELETE, "/api/agents/bee/todos/next-2", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&swarm, Method::DELETE, "/api/agents/bee/todos/next-2", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "removed once");

    let (status, wrong) =
        call(&swarm, Method::POST, "/api/agents/bee/turn/cancel", Some(json!({"todo_id": "next-1"}))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{wrong}");
    let cancelled = swarmctl(&swarm, &["cancel", "bee"]);
    assert!(cancelled.status.success(), "{cancelled:?}");
    let turn = finished(&swarm, "long").await;
    assert_eq!(turn["outcome"], "cancelled", "{turn}");
    let pids: Vec<nix::unistd::Pid> = pids.into_iter().map(nix::unistd::Pid::from_raw).collect();
    hyperhive_testkit::wait_until_none_running(&pids, SOON).await.unwrap();
    let waited = tokio::time::timeout(SOON, waiting.wait()).await.unwrap().unwrap();
    assert_eq!(waited.code(), Some(130), "--wait on a cancelled turn");

    finished(&swarm, "next-1").await;
    assert_eq!(
        swarm.turns("bee"),
        "a long one\nnext one\n",
        "the cancelled todo is not retried, the removed one never runs"
    );
    assert!(queue(&swarm).await.is_empty());
    let (status, idle) = call(&swarm, Method::POST, "/api/agents/bee/turn/cancel", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "nothing runs: {idle}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hive_restart_loses_no_queued_prompt_and_reruns_no_finished_one() {
    let mut swarm = started().await;
    prompt(&swarm, "done before", "before").await;
    finished(&swarm, "before").await;
    // Paused, so the prompts wait in the queue while hive-c0re is away.
    set_state(&swarm, "paused").await;
    wait_until("bee paused", SOON, || async {
        let (_, agents) = call(&swarm, Method::GET, "/api/agents", None).await;
        (agents[0]["actual"]["turn"]["turn"] == "paused").then_some(())
    })
    .await
    .unwrap();
    for i in 0..3 {
        prompt(&swarm, &format!("queued {i}"), &format!("queued-{i}")).await;
    }
    // hive-c0re dies hard: its agent goes with it (its supervisor is gone).
    swarm.hive.kill();
    wait_until("no agent of this swarm", SOON, || async {
        let pgrep = std::process::Command::new(tool(Tool::Pgrep).ok()?).args(["-f", "hive-agent"]).output().ok()?;
        (!String::from_utf8_lossy(&pgrep.stdout).lines().any(|pid| agent_of_this_swarm(pid, &swarm))).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(queue(&swarm).await.len(), 3, "the queue is the stream's, not the hive's");
    swarm.hive = swarm.start_hive_again();
    set_state(&swarm, "up").await;
    for i in 0..3 {
        finished(&swarm, &format!("queued-{i}")).await;
    }
    let ran = swarm.turns("bee");
    assert_eq!(ran, "done before\nqueued 0\nqueued 1\nqueued 2\n", "each prompt ran once, in order");
}

async fn set_state(swarm: &OneHive, state: &str) {
    let (status, answer) =
        call(swarm, Method::PUT, "/api/hives/h1/agents/bee/state", Some(json!({ "state": state }))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// Whether process `pid` is an agent of `swarm` (its environment names the swarm's directory).
fn agent_of_this_swarm(pid: &str, swarm: &OneHive) -> bool {
    let environ = std::fs::read(format!("/proc/{}/environ", pid.trim())).unwrap_or_default();
    String::from_utf8_lossy(&environ).contains(swarm.dir.path().to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_prompts_and_queries_are_refused_and_queue_nothing() {
    let swarm = started().await;
    let cases: Vec<(Method, &str, Option<Value>, StatusCode, &str)> = vec![
        (Method::POST, "/api/agents/bee/todos", Some(json!({"body": ""})), StatusCode::BAD_REQUEST, "empty"),
        (Method::POST, "/api/agents/bee/todos", Some(json!({"body": "  \n"})), StatusCode::BAD_REQUEST, "empty"),
        (
            Method::POST,
            "/api/agents/bee/todos",
            Some(json!({"body": "x".repeat(65 * 1024)})),
            StatusCode::PAYLOAD_TOO_LARGE,
            "at most",
        ),
        (
            Method::POST,
            "/api/agents/bee/todos",
            Some(json!({"prompt": "x"})),
            StatusCode::BAD_REQUEST,
            "send {\"body\"",
        ),
        (
            Method::POST,
            "/api/agents/bee/todos",
            Some(json!({"body": "x", "id": "a b"})),
            StatusCode::BAD_REQUEST,
            "todo id",
        ),
        (Method::POST, "/api/agents/wasp/todos", Some(json!({"body": "x"})), StatusCode::NOT_FOUND, "no agent wasp"),
        (
            Method::POST,
            "/api/agents/Bee/todos",
            Some(json!({"body": "x"})),
            StatusCode::BAD_REQUEST,
            "invalid agent name",
        ),
        (Method::POST, "/api/todos", Some(json!({"agents": [], "body": "x"})), StatusCode::BAD_REQUEST, "1 to"),
        (
            Method::POST,
            "/api/todos",
            Some(json!({"agents": ["bee", "bee"], "body": "x"})),
            StatusCode::BAD_REQUEST,
            "twice",
        ),
        (
            Method::POST,
            "/api/todos",
            Some(json!({"agents": ["bee", "wasp"], "body": "x"})),
            StatusCode::NOT_FOUND,
            "no agent wasp",
        ),
        (Method::GET, "/api/agents/bee/turns?limit=0", None, StatusCode::BAD_REQUEST, "limit"),
        (Method::GET, "/api/agents/bee/turns?page=2", None, StatusCode::BAD_REQUEST, "unknown query parameter"),
        (Method::GET, "/api/agents/wasp/turns", None, StatusCode::NOT_FOUND, "no agent wasp"),
        (Method::GET, "/api/agents/bee/turns/nope", None, StatusCode::NOT_FOUND, "no finished turn"),
        (Method::DELETE, "/api/agents/bee/todos/nope", None, StatusCode::NOT_FOUND, "no todo"),
        (Method::POST, "/api/agents/bee/turn/cancel", Some(json!({"todo": "x"})), StatusCode::BAD_REQUEST, "todo_id"),
        (Method::POST, "/api/agents/bee/turn/cancel", None, StatusCode::CONFLICT, "not running a turn"),
    ];
    for (method, path, body, expected, says) in cases {
        let shown = format!("{method} {path} {body:?}");
        let (status, answer) = call(&swarm, method, path, body).await;
        assert_eq!(status, expected, "{shown}: {answer}");
        assert!(answer["error"].as_str().unwrap_or("").contains(says), "{shown}: {answer}");
    }
    let not_json = hyper::Request::builder()
        .method(Method::POST)
        .uri("/api/agents/bee/todos")
        .header("content-type", "text/plain")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"hello")))
        .unwrap();
    let (status, _) = swarmctl::client::send(&swarm.socket, not_json).await.unwrap();
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let none = swarmctl(&swarm, &["prompt", "bee"]);
    assert!(!none.status.success() && String::from_utf8_lossy(&none.stderr).contains("--body"), "{none:?}");
    let two = swarmctl(&swarm, &["prompt", "bee", "bee2", "--body", "x", "--follow"]);
    assert!(!two.status.success() && String::from_utf8_lossy(&two.stderr).contains("one agent"), "{two:?}");
    assert!(queue(&swarm).await.is_empty(), "nothing was queued");
    assert_eq!(swarm.turns("bee"), "", "nothing ran");

    // The controller remembers the agents it found; an entry deleted by hand is forgotten as
    // soon as the controller sees the delete, though a prompt found it before.
    let roster = swarm.js.get_key_value(hyperhive_nats_objects::AGENTS_BUCKET).await.unwrap();
    roster.put("moth", roster.get("bee").await.unwrap().unwrap()).await.unwrap();
    let to_moth = || call(&swarm, Method::POST, "/api/agents/moth/todos", Some(json!({"body": "x", "id": "m"})));
    assert_eq!(to_moth().await.0, StatusCode::ACCEPTED);
    assert_eq!(to_moth().await.0, StatusCode::ACCEPTED, "remembered");
    roster.delete("moth").await.unwrap();
    wait_until("moth unknown once its delete is seen", SOON, || async {
        (to_moth().await.0 == StatusCode::NOT_FOUND).then_some(())
    })
    .await
    .unwrap();
}

/// A turn record of todo `id` as a hive-agent publishes it on `turns.<agent>`.
fn turn_record(id: &str, outcome: &str) -> String {
    json!({
        "todo_id": id, "source": "operator:ann", "prompt": "p", "started_at": "2026-12-01T00:00:00Z",
        "ended_at": "2026-12-01T00:00:01Z", "duration_ms": 1000, "outcome": outcome, "output": "",
    })
    .to_string()
}

/// The overview as turns end: every agent counted by what it does and by how its last turn
/// ended, the latest failures first, and a record on the subject of no agent on the roster not
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_counts_agents_by_activity_and_last_turn_and_lists_the_latest_failures() {
    let swarm = OneHive::start(&["ant", "bee"], turn, &[]).await;
    let overview_when = |what: &'static str, holds: fn(&Value) -> bool| {
        let swarm = &swarm;
        async move {
            wait_until(what, SOON, || async {
                let (status, overview) = call(swarm, Method::GET, "/api/overview", None).await;
                (status == StatusCode::OK && holds(&overview)).then_some(overview)
            })
            .await
            .unwrap()
        }
    };
    let idle = overview_when("both agents idle", |o| o["activity"] == json!({"idle": 2})).await;
    assert_eq!((idle["agents"].as_u64(), idle["no_turn_yet"].as_u64()), (Some(2), Some(2)), "{idle}");
    assert_eq!((&idle["last_turns"], &idle["failed_turns"]), (&json!({}), &json!([])), "{idle}");
    assert_eq!((&idle["hives_fresh"], &idle["hives_stale"]), (&json!(1), &json!([])), "{idle}");

    prompt_to(&swarm, "bee", "please fail", "b1").await;
    overview_when("bee's failure", |o| o["last_turns"] == json!({"failed": 1})).await;
    prompt_to(&swarm, "ant", "please fail too", "a1").await;
    let failed = overview_when("both failures", |o| o["last_turns"] == json!({"failed": 2})).await;
    let listed: Vec<(&str, &str)> = failed["failed_turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["agent"].as_str().unwrap(), t["todo_id"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("ant", "a1"), ("bee", "b1")], "the latest first: {failed}");
    assert_eq!(failed["failed_turns"][0]["exit_code"], 3);
    assert_eq!(failed["no_turn_yet"], 0);

    // A failed turn recorded for a name not on the roster, then bee's success after it.
    swarm.js.publish("turns.ghost", turn_record("g1", "failed").into()).await.unwrap().await.unwrap();
    prompt_to(&swarm, "bee", "fine", "b2").await;
    let mended = overview_when("bee's success", |o| o["last_turns"] == json!({"failed": 1, "succeeded": 1})).await;
    assert_eq!(mended["failed_turns"].as_array().unwrap().len(), 1, "neither bee nor the ghost: {mended}");
    assert_eq!(mended["failed_turns"][0]["agent"], "ant");
    assert_eq!(mended["agents"], 2);

    prompt_to(&swarm, "bee", "a long one", "b3").await;
    overview_when("bee working", |o| o["activity"] == json!({"idle": 1, "working": 1})).await;
    let (status, answer) = call(&swarm, Method::POST, "/api/agents/bee/turn/cancel", None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    overview_when("bee's cancelled turn", |o| o["last_turns"] == json!({"cancelled": 1, "failed": 1})).await;
}

/// The controller's memory of every agent's last turn: filled from what `TURNS` held before it
/// started, kept as records come, and answered only while it follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agents_last_turn_is_followed_from_what_turns_held_before() {
    use swarm_controller::work::last_turns::LastTurns;
    let nats = hyperhive_testkit::NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = async_nats::jetstream::new(client);
    hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    let publish = |agent: &'static str, id: &str, outcome: &str| {
        let (js, payload) = (js.clone(), turn_record(id, outcome));
        async move { js.publish(format!("turns.{agent}"), payload.into()).await.unwrap().await.unwrap().sequence }
    };
    for i in 0..50 {
        publish("bee", &format!("b{i}"), if i % 2 == 0 { "succeeded" } else { "failed" }).await;
    }
    let ant_last = publish("ant", "a0", "timed_out").await;

    let last_turns = LastTurns::default();
    let last_of = |agent: &str| {
        let agent = hyperhive_hive_proto::AgentName::parse(agent).unwrap();
        last_turns.read(|all| all.get(&agent).map(|l| (l.sequence, l.turn.todo_id.clone())))
    };
    assert_eq!(last_of("bee"), None, "nothing answered before it follows");
    let following = tokio::spawn(last_turns.clone().follow(js.clone()));
    let bee = wait_until("the index to follow", SOON, || async { last_of("bee").flatten() }).await.unwrap();
    assert_eq!(bee.1, "b49", "each agent's latest of the records before it started");
    assert_eq!(last_of("ant"), Some(Some((ant_last, "a0".into()))));
    assert_eq!(last_turns.read(|all| all.len()), Some(2));

    let newer = publish("ant", "a1", "succeeded").await;
    wait_until("a new record", SOON, || async { (last_of("ant") == Some(Some((newer, "a1".into())))).then_some(()) })
        .await
        .unwrap();

    following.abort();
    let _ = following.await;
    assert_eq!(last_of("ant"), None, "not answered once it no longer follows");
}
