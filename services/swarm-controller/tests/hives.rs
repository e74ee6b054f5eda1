//! Hives, the roster and wanted state through the API, against a real nats-server in JWT mode:
//! hive statuses are written the way hive-c0re writes them, with the hive's own credential.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::ConnectOptions;
use common::{Controller, Options, directory, publish_as_hive};
use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::roster::Origin;
use hyperhive_hive_proto::status::{ActualState, AgentStatus, HiveStatus};
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_objects::{AGENT_WANTED_BUCKET, AGENTS_BUCKET};
use hyperhive_schedule::instant::parse_instant;
use hyperhive_testkit::wait_until;
use serde_json::{Value, json};
use swarm_controller::clock::FakeClock;

const SOON: Duration = Duration::from_secs(10);
const NOW: &str = "2026-11-30T12:00:00Z";

fn agent_status(origin: Origin, actual: ActualState) -> AgentStatus {
    AgentStatus {
        origin,
        wanted: WantedState::Up,
        actual,
        since: "2026-11-30T11:00:00Z".into(),
        restarts: 2,
        last_exit: None,
        log_tail: Vec::new(),
        turn: None,
        revision: None,
        problem: None,
    }
}

fn status(hive: &str, published_at: &str, agents: &[(&str, Origin)]) -> HiveStatus {
    HiveStatus {
        hive: HiveName::parse(hive).unwrap(),
        version: "0.1.0".into(),
        started_at: "2026-11-30T10:00:00Z".into(),
        published_at: published_at.into(),
        load: [0.5, 0.25, 0.125],
        agents: agents
            .iter()
            .map(|(a, origin)| (AgentName::parse(a).unwrap(), agent_status(*origin, ActualState::Running)))
            .collect::<BTreeMap<_, _>>(),
    }
}

async fn get(c: &Controller, path: &str) -> Value {
    let (status, body) = c.json(Method::GET, path, &Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

/// Waits until `GET /api/agents` lists exactly `names`.
async fn wait_for_roster(c: &Controller, names: &[&str]) -> Value {
    let want: Vec<&str> = names.to_vec();
    wait_until("the roster to list the agents", SOON, || async {
        let agents = get(c, "/api/agents").await;
        let listed: Vec<String> =
            agents.as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect();
        (listed == want).then_some(agents)
    })
    .await
    .unwrap()
}

fn options(hives: &[&str]) -> Options {
    Options { hives: directory(hives), ..Options::new(60) }
}

async fn put_state(c: &Controller, path: &str, headers: &[(&str, &str)], body: &str) -> (StatusCode, Value) {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    c.call(Method::PUT, path, &all, body.to_owned()).await.unwrap()
}

#[tokio::test]
async fn the_directory_is_served_sorted_with_its_keys() {
    let mut hives = directory(&["zeta", "alpha"]);
    let xkey = nkeys::XKey::new().public_key();
    hives.get_mut(&HiveName::parse("alpha").unwrap()).unwrap().xkey = Some(xkey.clone());
    hives.get_mut(&HiveName::parse("alpha").unwrap()).unwrap().labels.insert("gpu".into(), "yes".into());
    let c = Controller::start_with(Options { hives, ..Options::new(60) }).await;
    assert_eq!(
        get(&c, "/api/hives").await,
        json!([
            {"name": "alpha", "description": "hive alpha", "labels": {"gpu": "yes"}, "xkey": xkey},
            {"name": "zeta", "description": "hive zeta", "labels": {}, "xkey": null},
        ])
    );
    let empty = Controller::start(60).await;
    assert_eq!(get(&empty, "/api/hives").await, json!([]), "no SWARM_HIVES_FILE: no hives");
}

#[tokio::test]
async fn statuses_carry_their_age_and_turn_stale_after_45_seconds() {
    let clock = Arc::new(FakeClock::new(parse_instant(NOW).unwrap()));
    let c = Controller::start_with(Options { clock: clock.clone(), ..options(&["h1", "h2"]) }).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    // A hive outside the directory may write its own key, but the controller does not show it.
    publish_as_hive(&c.nats, &status("h9", NOW, &[])).await;

    let at = |secs: i64| clock.set(parse_instant(NOW).unwrap() + time::Duration::seconds(secs));
    at(45);
    let all = get(&c, "/api/hives/status").await;
    let hives: Vec<&str> = all.as_array().unwrap().iter().map(|s| s["hive"].as_str().unwrap()).collect();
    assert_eq!(hives, ["h1", "h2"]);
    assert_eq!(all[0]["age_secs"], 45);
    assert_eq!(all[0]["stale"], false);
    assert_eq!(all[0]["status"]["agents"]["a"]["actual"], "running");
    assert_eq!(all[0]["status"]["load"], json!([0.5, 0.25, 0.125]));
    assert_eq!(all[1], json!({"hive": "h2", "status": null, "age_secs": null, "stale": true}), "never published");

    at(46);
    let one = get(&c, "/api/hives/h1/status").await;
    assert_eq!((one["age_secs"].clone(), one["stale"].clone()), (json!(46), json!(true)));
    assert_eq!(one["status"]["agents"]["a"]["actual"], "running", "one hive's status, read by its key");
    let never = json!({"hive": "h2", "status": null, "age_secs": null, "stale": true});
    assert_eq!(get(&c, "/api/hives/h2/status").await, never, "a hive that never published");

    refused(&c, "/api/hives/h9/status", StatusCode::NOT_FOUND, "no hive h9").await;
    refused(&c, "/api/hives/H1/status", StatusCode::BAD_REQUEST, "invalid hive name").await;
}

/// `GET path` is answered `code` with an error saying `says`.
async fn refused(c: &Controller, path: &str, code: StatusCode, says: &str) {
    let (status, body) = c.json(Method::GET, path, &Value::Null).await;
    assert_eq!(status, code, "{path}: {body}");
    assert!(body["error"].as_str().unwrap().contains(says), "{path}: {body}");
}

#[tokio::test]
async fn the_roster_follows_hive_statuses_and_never_moves_an_agent() {
    let c = Controller::start_with(options(&["h1", "h2"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("b", Origin::Created), ("a", Origin::Declared)])).await;
    let agents = wait_for_roster(&c, &["a", "b"]).await;
    let a = &agents[0];
    assert_eq!((a["hive"].clone(), a["origin"].clone()), (json!("h1"), json!("declared")));
    assert_eq!(a["wanted"], json!({"state": "up", "set_at": null, "set_by": null, "revision": null}));
    assert_eq!(a["actual"]["actual"], "running");
    assert_eq!(a["actual"]["restarts"], 2);
    assert_eq!(agents[1]["wanted"]["state"], "paused", "a created agent waits, paused, by default");

    // h9 (not in the directory) reports d; then h2 reports a (already on h1) and c. The watch
    // takes statuses in order, so once c is listed, h9's status was handled.
    publish_as_hive(&c.nats, &status("h9", NOW, &[("d", Origin::Declared)])).await;
    publish_as_hive(&c.nats, &status("h2", NOW, &[("a", Origin::Declared), ("c", Origin::Declared)])).await;
    let agents = wait_for_roster(&c, &["a", "b", "c"]).await;
    assert_eq!(agents[0]["hive"], "h1", "an agent on the roster is never moved to another hive");
    assert_eq!(agents[0]["actual"]["actual"], "running", "actual state comes from the roster's hive");
    assert_eq!(agents[2]["hive"], "h2");

    let live = get(&c, "/api/agents/status").await;
    assert_eq!(
        live[0],
        json!({"name": "a", "hive": "h1", "actual": "running", "since": "2026-11-30T11:00:00Z",
               "restarts": 2, "last_exit": null, "turn": null, "stale": true, "credentials": null})
    );
}

#[tokio::test]
async fn statuses_written_while_the_controller_was_down_reach_the_roster_on_its_first_pass() {
    let mut c = Controller::start_with(options(&["h1"])).await;
    c.stop().await.unwrap();
    // Not seen by any watch: the watch starts with new writes only.
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    c.restart().await;
    wait_for_roster(&c, &["a"]).await;
}

#[tokio::test]
async fn setting_wanted_state_is_a_compare_and_set_that_survives_a_restart() {
    let mut c = Controller::start_with(options(&["h1"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    let path = "/api/hives/h1/agents/a/state";

    let (status, first) = put_state(&c, path, &[("x-set-by", "swarmctl")], r#"{"state": "paused"}"#).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!((first["hive"].clone(), first["agent"].clone()), (json!("h1"), json!("a")));
    assert_eq!(
        (first["state"].clone(), first["set_by"].clone()),
        (json!("paused"), json!(format!("swarmctl@{}", common::this_user())))
    );
    parse_instant(first["set_at"].as_str().unwrap()).unwrap();
    let revision = first["revision"].as_u64().unwrap();

    let stale = (revision + 7).to_string();
    let (status, body) = put_state(&c, path, &[("if-match", &stale)], r#"{"state": "up"}"#).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"].as_str().unwrap().contains(&format!("revision {revision}")), "{body}");

    let current = revision.to_string();
    let (status, second) = put_state(&c, path, &[("if-match", &current)], r#"{"state": "offline"}"#).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["set_by"], format!("api@{}", common::this_user()), "the default program");
    assert!(second["revision"].as_u64().unwrap() > revision);

    c.stop().await.unwrap();
    c.restart().await;
    let agents = get(&c, "/api/agents").await;
    assert_eq!(agents[0]["wanted"]["state"], "offline");
    assert_eq!(agents[0]["wanted"]["revision"], second["revision"]);
    assert_eq!(agents[0]["wanted"]["set_at"], second["set_at"]);
}

#[tokio::test]
async fn bad_state_changes_are_clear_errors_and_store_nothing() {
    let c = Controller::start_with(options(&["h1", "h2"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    let (status, _) = put_state(&c, "/api/hives/h1/agents/a/state", &[], r#"{"state": "up"}"#).await;
    assert_eq!(status, StatusCode::OK);
    let before = c.last_sequence(AGENT_WANTED_BUCKET).await;
    let roster_before = c.last_sequence(AGENTS_BUCKET).await;

    let ok = "/api/hives/h1/agents/a/state";
    let json_ct = ("content-type", "application/json");
    let long_set_by = "x".repeat(65);
    // Well-formed, but padded past the 1 KiB a state change may take.
    let padded = format!(r#"{{"state": "up"{}}}"#, " ".repeat(2048));
    let send = r#"send {"state": "up"|"offline"|"paused"|"destroyed"}"#;
    let not_json = &format!(r#"Content-Type: application/json (got ""); {send}"#);
    let too_large = &format!("larger than 1 KiB; {send}");
    type Case<'a> = (Method, &'a str, Vec<(&'a str, &'a str)>, String, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        (
            Method::PUT,
            "/api/hives/h9/agents/a/state",
            vec![json_ct],
            r#"{"state":"up"}"#.into(),
            StatusCode::NOT_FOUND,
            "no hive h9",
        ),
        (
            Method::PUT,
            "/api/hives/h1/agents/zz/state",
            vec![json_ct],
            r#"{"state":"up"}"#.into(),
            StatusCode::NOT_FOUND,
            "no agent zz",
        ),
        (
            Method::PUT,
            "/api/hives/h2/agents/a/state",
            vec![json_ct],
            r#"{"state":"up"}"#.into(),
            StatusCode::NOT_FOUND,
            "is on hive h1",
        ),
        (
            Method::PUT,
            "/api/hives/H1/agents/a/state",
            vec![json_ct],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid hive name",
        ),
        (
            Method::PUT,
            "/api/hives/h1/agents/a.b/state",
            vec![json_ct],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid agent name",
        ),
        (
            Method::PUT,
            ok,
            vec![json_ct],
            r#"{"state":"running"}"#.into(),
            StatusCode::BAD_REQUEST,
            "up, offline, paused, destroyed",
        ),
        (Method::PUT, ok, vec![json_ct], r#"{"state":"up","why":1}"#.into(), StatusCode::BAD_REQUEST, "unknown field"),
        (Method::PUT, ok, vec![json_ct], r#"{}"#.into(), StatusCode::BAD_REQUEST, "missing field `state`"),
        (Method::PUT, ok, vec![json_ct], "{not json".into(), StatusCode::BAD_REQUEST, "malformed request body"),
        // A body that is not declared as JSON, or larger than any state change, is a 400 saying
        // what to send, like any other malformed body.
        (Method::PUT, ok, vec![], r#"{"state":"up"}"#.into(), StatusCode::BAD_REQUEST, not_json),
        (
            Method::PUT,
            ok,
            vec![("content-type", "text/plain")],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            send,
        ),
        (Method::PUT, ok, vec![json_ct], padded, StatusCode::BAD_REQUEST, too_large),
        (Method::PUT, ok, vec![json_ct], "x".repeat(600 * 1024), StatusCode::BAD_REQUEST, too_large),
        (
            Method::PUT,
            ok,
            vec![json_ct, ("if-match", "soon")],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            "If-Match must be a revision",
        ),
        (
            Method::PUT,
            ok,
            vec![json_ct, ("if-match", "999")],
            r#"{"state":"up"}"#.into(),
            StatusCode::CONFLICT,
            "not 999",
        ),
        (
            Method::PUT,
            ok,
            vec![json_ct, ("x-set-by", "")],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            "X-Set-By",
        ),
        (
            Method::PUT,
            ok,
            vec![json_ct, ("x-set-by", &long_set_by)],
            r#"{"state":"up"}"#.into(),
            StatusCode::BAD_REQUEST,
            "X-Set-By",
        ),
        (Method::PUT, ok, vec![json_ct], r#"{"state":"destroyed"}"#.into(), StatusCode::CONFLICT, "set SWARM_NATS_DIR"),
        (Method::GET, ok, vec![], String::new(), StatusCode::METHOD_NOT_ALLOWED, "use PUT"),
        (Method::DELETE, "/api/agents", vec![], String::new(), StatusCode::METHOD_NOT_ALLOWED, "use GET, POST"),
        (Method::DELETE, "/api/hives", vec![], String::new(), StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::PUT, "/api/hives/status", vec![], String::new(), StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::PATCH, "/api/agents/status", vec![], String::new(), StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (
            Method::GET,
            "/api/hives/h1/agents",
            vec![],
            String::new(),
            StatusCode::NOT_FOUND,
            "/api/hives/{hive}/agents/{agent}/state",
        ),
    ];
    for (method, path, headers, body, code, needle) in cases {
        let (status, answer) = c.call(method.clone(), path, &headers, body.clone()).await.unwrap();
        let shown = &body[..body.len().min(40)];
        assert_eq!(status, code, "{method} {path} {headers:?} {shown}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{method} {path} {headers:?} {shown}: {error}");
    }
    assert_eq!(c.last_sequence(AGENT_WANTED_BUCKET).await, before, "no error stored a wanted state");
    assert_eq!(c.last_sequence(AGENTS_BUCKET).await, roster_before, "nor touched the roster");
}

#[tokio::test]
async fn an_if_match_on_a_state_never_written_is_a_conflict() {
    let c = Controller::start_with(options(&["h1"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    let before = c.last_sequence(AGENT_WANTED_BUCKET).await;
    let (status, body) =
        put_state(&c, "/api/hives/h1/agents/a/state", &[("if-match", "1")], r#"{"state": "up"}"#).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"].as_str().unwrap().contains("without If-Match"), "{body}");
    assert_eq!(c.last_sequence(AGENT_WANTED_BUCKET).await, before);
}

#[tokio::test]
async fn destroying_an_agent_revokes_its_credential_and_is_final() {
    let c = Controller::start_with(Options { nats_dir: true, ..options(&["h1"]) }).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared), ("b", Origin::Declared)])).await;
    wait_for_roster(&c, &["a", "b"]).await;
    let a_creds = c.nats.mint_agent("a").await.unwrap();
    let b_creds = c.nats.mint_agent("b").await.unwrap();
    let connect = |creds: std::path::PathBuf| {
        let url = c.nats.url();
        async move { ConnectOptions::with_credentials_file(creds).await.unwrap().connect(url).await }
    };
    let a = connect(a_creds.clone()).await.expect("a connects before");

    let path = "/api/hives/h1/agents/a/state";
    let (status, body) = put_state(&c, path, &[], r#"{"state": "destroyed"}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "destroyed");
    wait_until("a to be cut off", SOON, || async {
        (a.connection_state() != async_nats::connection::State::Connected).then_some(())
    })
    .await
    .unwrap();
    assert!(connect(a_creds).await.is_err(), "a's credential is refused");
    assert!(connect(b_creds).await.is_ok(), "b is unaffected");

    let before = c.last_sequence(AGENT_WANTED_BUCKET).await;
    for state in ["up", "destroyed"] {
        let (status, body) = put_state(&c, path, &[], &format!(r#"{{"state": "{state}"}}"#)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body["error"].as_str().unwrap().contains("destroyed, which is final"), "{body}");
    }
    assert_eq!(c.last_sequence(AGENT_WANTED_BUCKET).await, before);
    let agents = get(&c, "/api/agents").await;
    assert_eq!(agents[0]["wanted"]["state"], "destroyed");
}

#[tokio::test]
async fn a_failed_revocation_is_a_503_with_the_state_recorded_and_the_pass_retries_it() {
    let c = Controller::start_with(Options { nats_dir: true, reconcile_secs: 1, ..options(&["h1"]) }).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    let a_creds = c.nats.mint_agent("a").await.unwrap();
    // A broken system credential: the running server cannot be told.
    let system = c.nats.creds_dir().join(hyperhive_nats_creds::files::SYSTEM_CREDS);
    std::fs::write(&system, "not a credential").unwrap();

    let (status, body) = put_state(&c, "/api/hives/h1/agents/a/state", &[], r#"{"state": "destroyed"}"#).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("is recorded") && error.contains("retries"), "{error}");
    assert!(!error.contains("not a credential"), "no credential content in errors");
    assert_eq!(get(&c, "/api/agents").await[0]["wanted"]["state"], "destroyed", "the intent is recorded");
    let connect = || {
        let (creds, url) = (a_creds.clone(), c.nats.url());
        async move { ConnectOptions::with_credentials_file(creds).await.unwrap().connect(url).await }
    };
    assert!(connect().await.is_ok(), "not revoked on the running server yet");

    // Repaired (an older directory without it gets one made from system.seed): the pass retries.
    std::fs::remove_file(&system).unwrap();
    wait_until("the reconcile pass to revoke a", SOON, || async { connect().await.is_err().then_some(()) })
        .await
        .unwrap();
}

#[tokio::test]
async fn two_changes_from_the_same_revision_give_one_200_and_one_409() {
    let c = Controller::start_with(options(&["h1"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    let path = "/api/hives/h1/agents/a/state";
    let (_, first) = put_state(&c, path, &[], r#"{"state": "up"}"#).await;
    let revision = first["revision"].as_u64().unwrap().to_string();
    let headers = [("if-match", revision.as_str())];
    let (one, two) = tokio::join!(
        put_state(&c, path, &headers, r#"{"state": "paused"}"#),
        put_state(&c, path, &headers, r#"{"state": "offline"}"#),
    );
    let mut codes = [one.0, two.0];
    codes.sort();
    assert_eq!(codes, [StatusCode::OK, StatusCode::CONFLICT], "{one:?} {two:?}");
    let winner = if one.0 == StatusCode::OK { one.1 } else { two.1 };
    assert_eq!(get(&c, "/api/agents").await[0]["wanted"]["state"], winner["state"], "the winner's state is stored");
}

/// With the signing directory, a hive's status adds only the agents the hive was minted for: a
/// hostile hive cannot fill the roster or squat the name of an agent yet to be created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hive_adds_to_the_roster_only_the_agents_it_was_minted_for() {
    let c = Controller::start_with(Options { nats_dir: true, ..options(&["h1"]) }).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared)])).await;
    wait_for_roster(&c, &["a"]).await;
    // The hive's own credential, minted for `a` only, publishes a status naming more.
    let creds = c.nats.mint_hive("h1", &["a"]).await.unwrap();
    let hive = async_nats::ConnectOptions::with_credentials_file(creds)
        .await
        .unwrap()
        .custom_inbox_prefix(hyperhive_nats_objects::hive_inbox_prefix(&"h1".parse().unwrap()))
        .connect(c.nats.url())
        .await
        .unwrap();
    let mut squatting = status("h1", NOW, &[("a", Origin::Declared), ("b", Origin::Declared)]);
    let one = squatting.agents[&AgentName::parse("a").unwrap()].clone();
    for i in 0..500 {
        squatting.agents.insert(AgentName::parse(&format!("squat-{i}")).unwrap(), one.clone());
    }
    let js = async_nats::jetstream::new(hive);
    let subject = hyperhive_nats_objects::hive_status_subject(&"h1".parse().unwrap());
    js.publish(subject, serde_json::to_vec(&squatting).unwrap().into()).await.unwrap().await.unwrap();
    // The watch takes statuses in order: once a later one naming a new minted agent is in, the
    // squatting one was seen and refused.
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared), ("c", Origin::Declared)])).await;
    let listed = wait_for_roster(&c, &["a", "c"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "b and the squatters stay off: {listed}");
}

async fn patch_labels(c: &Controller, agent: &str, content_type: &str, body: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{agent}/labels");
    c.call(Method::PATCH, &path, &[("content-type", content_type)], body.to_owned()).await.unwrap()
}

/// swarmctl against the in-process controller, off the runtime's threads (the controller answers
/// on them).
fn swarmctl(c: &Controller, args: &[&str]) -> tokio::task::JoinHandle<(bool, String, String)> {
    let socket = c.socket.clone();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::swarmctl_on(&socket, &args);
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    })
}

#[tokio::test]
async fn labels_change_by_merge_patch_outlive_hive_statuses_filter_lists_and_bad_ones_change_nothing() {
    let c = Controller::start_with(options(&["h1"])).await;
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared), ("b", Origin::Declared)])).await;
    wait_for_roster(&c, &["a", "b"]).await;

    let (status_code, answer) = patch_labels(&c, "a", "application/json", r#"{"team": "infra", "tier": "gold"}"#).await;
    assert_eq!(status_code, StatusCode::OK, "{answer}");
    assert_eq!(answer, json!({"agent": "a", "labels": {"team": "infra", "tier": "gold"}}));
    // A merge: tier removed, zone added, team kept.
    let (_, answer) = patch_labels(&c, "a", "application/json", r#"{"tier": null, "zone": "eu"}"#).await;
    assert_eq!(answer["labels"], json!({"team": "infra", "zone": "eu"}));

    // The hive's statuses go on; the labels stay on the roster entry.
    publish_as_hive(&c.nats, &status("h1", NOW, &[("a", Origin::Declared), ("b", Origin::Declared)])).await;
    let agents = get(&c, "/api/agents").await;
    assert_eq!(agents[0]["labels"], json!({"team": "infra", "zone": "eu"}));
    assert_eq!(agents[1].get("labels"), None, "an agent without labels lists none");

    let roster_before = c.last_sequence(AGENTS_BUCKET).await;
    let many: serde_json::Map<String, Value> = (0..33).map(|i| (format!("k{i}"), json!("v"))).collect();
    let many = Value::Object(many).to_string();
    let huge = format!(r#"{{"team": "{}"}}"#, "x".repeat(9000));
    let cases = [
        ("a", "application/json", r#"{"Team": "x"}"#, StatusCode::BAD_REQUEST, "label key \"Team\""),
        ("a", "application/json", r#"{"team": "a\nb"}"#, StatusCode::BAD_REQUEST, "value"),
        ("a", "application/json", r#"{"team": 7}"#, StatusCode::BAD_REQUEST, "malformed request body"),
        ("a", "application/json", r#"["team"]"#, StatusCode::BAD_REQUEST, "send a JSON object"),
        ("a", "application/json", &many, StatusCode::BAD_REQUEST, "at most 32"),
        ("a", "application/json", &huge, StatusCode::PAYLOAD_TOO_LARGE, "at most 32 labels"),
        ("a", "text/plain", r#"{"team": "x"}"#, StatusCode::UNSUPPORTED_MEDIA_TYPE, "application/json"),
        ("zz", "application/json", r#"{"team": "x"}"#, StatusCode::NOT_FOUND, "no agent zz"),
        ("A!", "application/json", r#"{"team": "x"}"#, StatusCode::BAD_REQUEST, "A!"),
    ];
    for (agent, content_type, body, want, says) in cases {
        let (got, answer) = patch_labels(&c, agent, content_type, body).await;
        assert_eq!(got, want, "{agent} {body:.60}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{agent} {body:.60}: {answer}");
    }
    // 31 more labels after a's two: refused as a whole when the merge passes 32.
    let thirty_one: serde_json::Map<String, Value> = (0..31).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (got, answer) = patch_labels(&c, "a", "application/json", &Value::Object(thirty_one).to_string()).await;
    assert_eq!(got, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(c.last_sequence(AGENTS_BUCKET).await, roster_before, "a refused change writes nothing");
    assert_eq!(get(&c, "/api/agents").await[0]["labels"], json!({"team": "infra", "zone": "eu"}));

    // swarmctl: set and remove in one call, then list by label.
    let (ok, out, err) = swarmctl(&c, &["agent", "label", "b", "team=infra", "zone-"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(out, "b: team=infra\n");
    let (ok, out, err) = swarmctl(&c, &["agents", "--label", "zone=eu"]).await.unwrap();
    assert!(ok, "{err}");
    let names: Vec<&str> = out.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["a"], "{out}");
    assert!(out.lines().next().unwrap().ends_with("LABELS") && out.contains("team=infra,zone=eu"), "{out}");
    let (ok, out, _) = swarmctl(&c, &["agents", "--label", "team", "--json"]).await.unwrap();
    assert!(ok);
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.iter().map(|a| a["name"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
    let (ok, _, err) = swarmctl(&c, &["agent", "label", "b", "Team=x"]).await.unwrap();
    assert!(!ok && err.contains("\"Team\""), "{err}");
    let (ok, _, err) = swarmctl(&c, &["agent", "label", "zz", "team=x"]).await.unwrap();
    assert!(!ok && err.contains("no agent zz"), "{err}");
}

fn names_of(agents: &Value) -> Vec<String> {
    agents.as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn agent_lists_page_by_name_keep_to_a_hive_and_refuse_bad_pages() {
    let c = Controller::start_with(options(&["h1", "h2"])).await;
    // 501 agents on h1 (one more than swarmctl asks for at a time), two on h2.
    let many: Vec<String> = (0..501).map(|i| format!("a{i:03}")).collect();
    let on_h1: Vec<(&str, Origin)> = many.iter().map(|n| (n.as_str(), Origin::Declared)).collect();
    publish_as_hive(&c.nats, &status("h1", NOW, &on_h1)).await;
    publish_as_hive(&c.nats, &status("h2", NOW, &[("b1", Origin::Declared), ("b0", Origin::Declared)])).await;
    let mut all = many.clone();
    all.extend(["b0".to_owned(), "b1".to_owned()]);
    wait_until("the roster to list every agent", SOON, || async {
        (get(&c, "/api/agents/status").await.as_array().unwrap().len() == all.len()).then_some(())
    })
    .await
    .unwrap();

    for list in ["/api/agents", "/api/agents/status"] {
        assert_eq!(names_of(&get(&c, list).await), all, "{list}: no limit, every agent by name");
        assert_eq!(names_of(&get(&c, &format!("{list}?limit=2")).await), ["a000", "a001"]);
        assert_eq!(names_of(&get(&c, &format!("{list}?limit=3&after=a499")).await), ["a500", "b0", "b1"]);
        assert_eq!(names_of(&get(&c, &format!("{list}?after=b1")).await), Vec::<String>::new());
        assert_eq!(names_of(&get(&c, &format!("{list}?hive=h2")).await), ["b0", "b1"]);
        assert_eq!(names_of(&get(&c, &format!("{list}?hive=h1&limit=1&after=a499")).await), ["a500"]);
        // Walking the pages gives every agent once, in order.
        let mut walked = Vec::new();
        let mut after = String::new();
        loop {
            let page = names_of(&get(&c, &format!("{list}?limit=200{after}")).await);
            walked.extend(page.iter().cloned());
            match page.last() {
                Some(last) if page.len() == 200 => after = format!("&after={last}"),
                _ => break,
            }
        }
        assert_eq!(walked, all, "{list}: pages");
        for (query, says) in [
            ("limit=0", "limit \"0\" is not a number from 1 to 1000"),
            ("limit=1001", "from 1 to 1000"),
            ("after=B%21", "is not an agent name"),
            ("hive=..", "is not a hive name"),
            ("page=2", "unknown query parameter \"page\""),
        ] {
            let (code, body) = c.json(Method::GET, &format!("{list}?{query}"), &Value::Null).await;
            assert_eq!(code, StatusCode::BAD_REQUEST, "{list}?{query}: {body}");
            let error = body["error"].as_str().unwrap();
            assert!(error.contains(says) && error.contains("?limit=1..1000&after=AGENT&hive=HIVE"), "{query}: {error}");
        }
    }
    // The pages carry what the whole list does.
    let page = get(&c, "/api/agents?limit=1&after=b0").await;
    assert_eq!((page[0]["hive"].clone(), page[0]["actual"]["actual"].clone()), (json!("h2"), json!("running")));

    // swarmctl reads every page without a limit; with one, a page and the command for the next.
    let (ok, out, err) = swarmctl(&c, &["agents", "--json"]).await.unwrap();
    assert!(ok, "{err}");
    assert_eq!(names_of(&serde_json::from_str(&out).unwrap()), all);
    let (ok, out, err) = swarmctl(&c, &["agents", "--limit", "2", "--after", "a499"]).await.unwrap();
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(rows, ["a500", "b0"], "{out}");
    assert!(err.contains("more agents follow: swarmctl agents --limit 2 --after b0"), "{err}");
    let (ok, out, err) = swarmctl(&c, &["agents", "--hive", "h2", "--limit", "5"]).await.unwrap();
    assert!(ok && !err.contains("more agents"), "a short page is the last: {err}");
    assert_eq!(out.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect::<Vec<_>>(), ["b0", "b1"]);
    // The agent verbs find an agent past the first page.
    let (ok, out, err) = swarmctl(&c, &["agent", "state", "b1", "paused"]).await.unwrap();
    assert!(ok && out.starts_with("h2/b1: wanted state paused"), "{out}{err}");
    // A page holding a small share of the roster reads its agents' wanted states and statuses
    // key by key, a whole list reads the buckets whole: both show every agent the same way
    // (b1's wanted state just set, each one's actual state).
    for list in ["/api/agents", "/api/agents/status"] {
        let whole = get(&c, list).await;
        let mut paged = Vec::new();
        let mut after = String::new();
        loop {
            let page = get(&c, &format!("{list}?limit=20{after}")).await.as_array().unwrap().clone();
            paged.extend(page.iter().cloned());
            match page.last() {
                Some(last) if page.len() == 20 => after = format!("&after={}", last["name"].as_str().unwrap()),
                _ => break,
            }
        }
        assert_eq!(Value::Array(paged), whole, "{list}: pages of 20 and the whole list");
    }
    let b1 = get(&c, "/api/agents?limit=1&after=b0").await;
    assert_eq!(
        (b1[0]["wanted"]["state"].clone(), b1[0]["actual"]["actual"].clone()),
        (json!("paused"), json!("running"))
    );
    // One agent's own route shows it as the list does; swarmctl finds an agent's hive by it.
    assert_eq!(get(&c, "/api/agents/b1").await, b1[0]);
    refused(&c, "/api/agents/nobody", StatusCode::NOT_FOUND, "no agent nobody on the roster").await;
    refused(&c, "/api/agents/B%21", StatusCode::BAD_REQUEST, "invalid agent name").await;
    let (ok, _, err) = swarmctl(&c, &["agent", "state", "nobody", "paused"]).await.unwrap();
    assert!(!ok && err.contains("no agent nobody on the roster"), "{err}");
    for bad in [["--limit", "0"], ["--limit", "1001"], ["--after", "B!"]] {
        let (ok, _, err) = swarmctl(&c, &[&["agents"][..], &bad[..]].concat()).await.unwrap();
        assert!(!ok && err.contains(bad[1]), "{bad:?}: {err}");
    }
}

/// Every hive publishes its status every few seconds, and the controller syncs the roster from
/// each: once an agent is known, syncing it again costs no NATS round trip, and an agent reported
/// by a hive other than its own is still counted as a clash.
#[tokio::test]
async fn syncing_known_agents_from_a_status_costs_no_round_trip() {
    use std::sync::atomic::Ordering;
    use swarm_controller::clock::SystemClock;
    use swarm_controller::lifecycle::roster::SyncReport;
    let (_nats, client, agents_bucket, roster) = roster_on_its_own_connection().await;
    let watching = tokio::spawn(roster.clone().keep_index());
    let hives = directory(&["h1", "h2"]);
    let agents: Vec<String> = (0..50).map(|i| format!("a{i:02}")).collect();
    let named: Vec<(&str, Origin)> = agents.iter().map(|a| (a.as_str(), Origin::Declared)).collect();
    let h1 = status("h1", NOW, &named);
    // The index follows the bucket before it is trusted.
    wait_until("the roster's index to follow", SOON, || async {
        roster.sync(&hives, &h1, &SystemClock).await.unwrap();
        let sent = client.statistics().out_messages.load(Ordering::Relaxed);
        roster.sync(&hives, &h1, &SystemClock).await.unwrap();
        (client.statistics().out_messages.load(Ordering::Relaxed) == sent).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(roster.list().await.unwrap().len(), 50);

    // h2 reports a00 (on h1) and a new b00: one clash, one added.
    let h2 = status("h2", NOW, &[("a00", Origin::Declared), ("b00", Origin::Declared)]);
    let report = roster.sync(&hives, &h2, &SystemClock).await.unwrap();
    assert_eq!((report.added, report.clashes), (1, 1), "{report:?}");
    let sent = client.statistics().out_messages.load(Ordering::Relaxed);
    let report = roster.sync(&hives, &h2, &SystemClock).await.unwrap();
    assert_eq!(report, SyncReport { added: 0, clashes: 1, unknown_hives: 0, unminted: 0 });
    assert_eq!(client.statistics().out_messages.load(Ordering::Relaxed), sent, "known agents: no round trip");

    // A key deleted by hand is forgotten, and added again by the next status.
    agents_bucket.delete("a01").await.unwrap();
    wait_until("a01 added again", SOON, || async {
        let report = roster.sync(&hives, &h1, &SystemClock).await.unwrap();
        (report.added == 1).then_some(())
    })
    .await
    .unwrap();
    assert!(roster.get(&AgentName::parse("a01").unwrap()).await.unwrap().is_some());
    watching.abort();
}

/// The roster's index follows the bucket: what was there before it started, the controller's own
/// writes at once, and changes made behind its back once the watch brings them; reading it costs
/// no NATS message, and it answers nothing before it follows or after it stops.
#[tokio::test]
async fn the_roster_index_follows_the_bucket_and_costs_no_round_trip() {
    use std::sync::atomic::Ordering;
    use swarm_controller::clock::SystemClock;
    let (_nats, client, agents_bucket, roster) = roster_on_its_own_connection().await;
    let hives = directory(&["h1", "h2"]);
    let before: Vec<(&str, Origin)> = [("a0", Origin::Declared), ("a1", Origin::Declared)].into();
    roster.sync(&hives, &status("h1", NOW, &before), &SystemClock).await.unwrap();
    let hive_of = |agent: &str| {
        let agent = AgentName::parse(agent).unwrap();
        roster.index().read(|all| all.get(&agent).map(|e| e.hive.to_string()))
    };
    assert_eq!(hive_of("a0"), None, "nothing answered before it follows");

    let following = tokio::spawn(roster.clone().keep_index());
    wait_until("the index to follow", SOON, || async { hive_of("a0").flatten() }).await.unwrap();
    assert_eq!(hive_of("a1"), Some(Some("h1".into())), "the scan brought every entry");

    // The controller's own writes are in at once.
    roster.sync(&hives, &status("h2", NOW, &[("b0", Origin::Declared)]), &SystemClock).await.unwrap();
    assert_eq!(hive_of("b0"), Some(Some("h2".into())), "added by a status");
    let b0 = AgentName::parse("b0").unwrap();
    roster.update(&b0, |e| e.labels = [("team".to_owned(), "infra".to_owned())].into()).await.unwrap();
    let label = roster.index().read(|all| all[&b0].labels.get("team").cloned()).flatten();
    assert_eq!(label.as_deref(), Some("infra"), "a label change");

    // Reading it sends nothing.
    let sent = client.statistics().out_messages.load(Ordering::Relaxed);
    assert_eq!(roster.index().read(|all| all.len()), Some(3));
    assert_eq!(client.statistics().out_messages.load(Ordering::Relaxed), sent, "no round trip");

    // Behind its back: a key deleted by hand, one put by hand.
    agents_bucket.delete("a1").await.unwrap();
    let a0 = agents_bucket.get("a0").await.unwrap().unwrap();
    agents_bucket.put("c0", a0).await.unwrap();
    wait_until("the index to see both", SOON, || async {
        (hive_of("a1") == Some(None) && hive_of("c0") == Some(Some("h1".into()))).then_some(())
    })
    .await
    .unwrap();
    let listed: Vec<AgentName> = roster.list().await.unwrap().into_keys().collect();
    assert_eq!(roster.index().read(|all| all.keys().cloned().collect::<Vec<_>>()), Some(listed), "as the bucket");

    following.abort();
    let _ = following.await;
    assert_eq!(hive_of("a0"), None, "a stopped index answers nothing");
    // Started again, it is filled anew: a delete made while it was stopped is not missed.
    agents_bucket.delete("c0").await.unwrap();
    let following = tokio::spawn(roster.clone().keep_index());
    wait_until("the index, started again, to see the delete", SOON, || async {
        (hive_of("c0") == Some(None)).then_some(())
    })
    .await
    .unwrap();
    following.abort();
}

/// A roster on a NATS server of its own, through a connection of its own (so its messages can be
/// counted), with its `agents` bucket.
async fn roster_on_its_own_connection() -> (
    hyperhive_testkit::NatsJwt,
    async_nats::Client,
    async_nats::jetstream::kv::Store,
    swarm_controller::lifecycle::roster::Roster,
) {
    let nats = hyperhive_testkit::NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let buckets = hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    let roster = swarm_controller::lifecycle::roster::Roster::new(js, buckets.agents.clone());
    (nats, client, buckets.agents, roster)
}
