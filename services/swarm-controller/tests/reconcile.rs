//! The reconcile pass against a real nats-server: writes nothing when nothing changed, repairs
//! keys changed behind the controller's back, removes keys of agents with no schedules.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Controller, config, new_schedule};
use futures::StreamExt;
use hyper::http::{Method, StatusCode};
use hyperhive_nats_objects::{AGENT_SCHEDULES_BUCKET, AGENT_WANTED_BUCKET, DEPLOY_STREAM};
use hyperhive_testkit::{NatsJwt, wait_until};
use swarm_controller::clock::SystemClock;
use swarm_controller::definition::{DefinitionRules, SchedulePatch};
use swarm_controller::nats;
use swarm_controller::schedules::reconcile::Reconciler;
use swarm_controller::schedules::store::Definitions;

/// A second reconciler on the controller's buckets, driven by the test rather than a timer.
async fn reconciler(c: &Controller) -> Reconciler {
    let buckets = hyperhive_nats_objects::ensure_objects(&c.js).await.unwrap();
    let definitions = Definitions::new(c.js.clone(), buckets.definitions);
    Reconciler::new(c.js.clone(), definitions, buckets.agent_schedules)
}

#[tokio::test]
async fn a_pass_with_nothing_changed_writes_nothing_and_repairs_what_was_changed_behind_its_back() {
    let c = Controller::start(3600).await;
    for agents in [&["a", "b"][..], &["b", "c"]] {
        let (status, _) = c.json(Method::POST, "/api/schedules", &new_schedule(agents)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let r = reconciler(&c).await;
    let before = c.writes_so_far().await;
    let report = r.pass().await.unwrap();
    assert_eq!((report.written, report.removed, report.failed), (0, 0, 0), "{report:?}");
    assert_eq!(report.compared, 3);
    assert_eq!(c.writes_so_far().await, before);

    let kv = c.js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap();
    let good_b = kv.get("b").await.unwrap().unwrap();
    kv.delete("a").await.unwrap();
    kv.put("b", "{\"version\":1,\"schedules\":[]}".into()).await.unwrap();
    kv.put("stray", "{}".into()).await.unwrap();
    let report = r.pass().await.unwrap();
    assert_eq!((report.written, report.removed), (2, 1), "{report:?}");
    assert_eq!(c.agent_key("a").await.unwrap().schedules.len(), 1);
    assert_eq!(kv.get("b").await.unwrap().unwrap(), good_b);
    assert!(kv.get("stray").await.unwrap().is_none());
    assert_eq!(r.pass().await.unwrap().written, 0, "repaired keys are not written again");
}

/// A pass reads the buckets without the lock the API's checks take: a read waiting on NATS (as
/// during an election, for seconds) holds up no name check or size check.
#[tokio::test]
async fn the_api_checks_answer_while_a_pass_waits_on_its_reading() {
    let c = Controller::start(3600).await;
    let schedule = new_schedule(&["a"]);
    let (_, created) = c.json(Method::POST, "/api/schedules", &schedule).await;
    let r = reconciler(&c).await;
    r.pass().await.unwrap();
    let pass = r.pass();
    tokio::pin!(pass);
    assert!(futures::poll!(&mut pass).is_pending(), "the pass waits on NATS at its first step");
    let name = schedule["name"].as_str().unwrap();
    let named = tokio::time::timeout(Duration::from_secs(2), r.named(name, ""))
        .await
        .expect("the name check waited for the pass's reading");
    assert_eq!(named.as_deref(), created["id"].as_str());
    assert_eq!(pass.await.unwrap().written, 0);
}

/// A change applied while a pass was reading makes the pass read again before it writes: it
/// never goes back to the definitions it read before the change (which the next change of one
/// of the same agents would write to their keys).
#[tokio::test]
async fn a_change_during_a_passs_reading_is_not_undone_by_the_pass() {
    let c = Controller::start(3600).await;
    let (_, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    let id = created["id"].as_str().unwrap();
    let r = reconciler(&c).await;
    r.pass().await.unwrap();
    let read = r.read().await.unwrap();

    let buckets = hyperhive_nats_objects::ensure_objects(&c.js).await.unwrap();
    let definitions = Definitions::new(c.js.clone(), buckets.definitions);
    let current = definitions.get(id).await.unwrap().unwrap();
    let patch = SchedulePatch::from_json(br#"{"name":"renamed","body":"changed while the pass read"}"#).unwrap();
    let changed = current.definition.patched(patch, time::OffsetDateTime::now_utc()).unwrap();
    definitions.update(&changed, current.revision).await.unwrap();
    r.schedule_changed(id).await.unwrap();
    assert_eq!(c.agent_key("a").await.unwrap().schedules[0].body, "changed while the pass read");

    let report = r.apply(read).await.unwrap();
    assert_eq!((report.written, report.removed), (0, 0), "{report:?}");
    assert_eq!(r.named("renamed", "").await.as_deref(), Some(id), "the pass went back to the old name");
    assert_eq!(c.agent_key("a").await.unwrap().schedules[0].body, "changed while the pass read");
}

#[tokio::test]
async fn the_periodic_pass_repairs_a_key_deleted_behind_the_controllers_back() {
    let c = Controller::start(1).await;
    let (_, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    let kv = c.js.get_key_value(AGENT_SCHEDULES_BUCKET).await.unwrap();
    kv.delete("a").await.unwrap();
    let repaired =
        wait_until("the pass rewrites a's key", Duration::from_secs(10), || async { c.agent_key("a").await })
            .await
            .unwrap();
    assert_eq!(repaired.schedules[0].id, created["id"].as_str().unwrap());
}

#[tokio::test]
async fn start_refuses_a_socket_directory_holding_anything_else() {
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("leftover.txt"), "x").unwrap();
    let socket = dir.path().join("controller.sock");
    let err =
        swarm_controller::daemon::run(config(&nats, socket.clone(), 60), Arc::new(SystemClock), std::future::pending())
            .await
            .unwrap_err()
            .to_string();
    assert!(err.contains("refusing to start") && err.contains("leftover.txt"), "{err}");
    assert!(!socket.exists());
}

#[tokio::test]
async fn shutdown_removes_the_socket() {
    let mut c = Controller::start(60).await;
    assert!(c.socket.exists());
    c.stop().await.unwrap();
    assert!(!c.socket.exists());
}

#[tokio::test]
async fn the_controller_carries_on_after_a_nats_restart() {
    let mut c = Controller::start(1).await;
    let (_, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    c.nats.nats().stop();
    let answer = wait_until("/healthz reports NATS down", Duration::from_secs(10), || async {
        let (status, v) = c.json(Method::GET, "/healthz", &serde_json::Value::Null).await;
        (status == StatusCode::SERVICE_UNAVAILABLE).then_some(v)
    })
    .await
    .unwrap();
    assert!(answer["error"].as_str().unwrap().contains("NATS connection"), "{answer}");
    c.nats.nats().start_again().await.unwrap();
    let path = format!("/api/schedules/{}", created["id"].as_str().unwrap());
    let edited = wait_until("a PATCH succeeds after the restart", Duration::from_secs(20), || async {
        let (status, v) = c.json(Method::PATCH, &path, &serde_json::json!({"body": "after"})).await;
        (status == StatusCode::OK).then_some(v)
    })
    .await
    .unwrap();
    assert_eq!(edited["body"], "after");
    let a = wait_until("a's key holds the edit", Duration::from_secs(10), || async {
        c.agent_key("a").await.filter(|d| d.schedules[0].body == "after")
    })
    .await
    .unwrap();
    assert_eq!(a.schedules.len(), 1);
}

#[tokio::test]
async fn start_refuses_a_todo_stream_that_is_not_a_work_queue() {
    let nats = NatsJwt::start().await.unwrap();
    let client = nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    async_nats::jetstream::new(client)
        .create_stream(async_nats::jetstream::stream::Config {
            name: "TODO".into(),
            subjects: vec!["todo.*".into()],
            max_bytes: 1 << 20,
            ..Default::default()
        })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = swarm_controller::daemon::run(
        config(&nats, dir.path().join("controller.sock"), 60),
        Arc::new(SystemClock),
        std::future::pending(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("stream TODO exists") && err.contains("work queue"), "{err}");
}

#[tokio::test]
async fn start_refuses_replicas_a_single_server_cannot_keep() {
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let started = tokio::time::Instant::now();
    let mut config = config(&nats, dir.path().join("controller.sock"), 60);
    config.settings.nats_replicas = 3;
    let err = swarm_controller::daemon::run(config, Arc::new(SystemClock), std::future::pending())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("SWARM_NATS_REPLICAS is 3") && err.contains("not part of a cluster"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "refused at once, not retried: {:?}", started.elapsed());
}

#[tokio::test]
async fn start_sets_the_limits_on_streams_and_buckets_that_exist_already() {
    use async_nats::jetstream::{kv, stream};
    use hyperhive_nats_objects::limits;
    let nats = NatsJwt::start().await.unwrap();
    let client = nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = async_nats::jetstream::new(client);
    // As an older controller (or an operator) left them: the right kind, looser limits.
    for (name, subjects) in [("TODO", "todo.*"), (DEPLOY_STREAM, "deploy.*")] {
        js.create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subjects.into()],
            retention: stream::RetentionPolicy::WorkQueue,
            duplicate_window: hyperhive_nats_objects::limits::TODO_DUPLICATE_WINDOW,
            max_bytes: 1 << 20,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    js.create_key_value(kv::Config {
        bucket: AGENT_WANTED_BUCKET.into(),
        history: 5,
        max_bytes: 1 << 20,
        max_value_size: 1024,
        ..Default::default()
    })
    .await
    .unwrap();

    hyperhive_nats_objects::ensure_objects(&js).await.unwrap();

    for (name, max_messages, per_subject) in [
        ("TODO", limits::TODO_MAX_MSGS, limits::TODO_MAX_MSGS_PER_AGENT),
        (DEPLOY_STREAM, limits::DEPLOY_MAX_MSGS, limits::DEPLOY_MAX_MSGS_PER_HIVE),
    ] {
        let config = js.get_stream(name).await.unwrap().info().await.unwrap().config.clone();
        assert_eq!(config.max_messages, max_messages, "{name}: a cap on messages across all subjects");
        assert_eq!(config.max_messages_per_subject, per_subject, "{name}");
        assert!(config.max_bytes > 1 << 20, "{name}");
    }
    for stream in ["TODO", DEPLOY_STREAM, "RELAY", "TURNS", "AUDIT", &format!("KV_{AGENT_WANTED_BUCKET}"), "KV_agents"]
    {
        let config = js.get_stream(stream).await.unwrap().info().await.unwrap().config.clone();
        assert_eq!(config.max_consumers, limits::STREAM_MAX_CONSUMERS, "{stream}: not the server's default of 1,000");
    }
    let config = js.get_stream(format!("KV_{AGENT_WANTED_BUCKET}")).await.unwrap().info().await.unwrap().config.clone();
    assert_eq!(config.max_messages_per_subject, limits::BUCKET_HISTORY, "history 1");
    assert_eq!((config.max_bytes, config.max_message_size), (limits::BUCKET_MAX_BYTES, limits::BUCKET_MAX_VALUE_SIZE));
    let store = js.get_key_value(AGENT_WANTED_BUCKET).await.unwrap();
    store.put("h1.a", "first".into()).await.unwrap();
    store.put("h1.a", "second".into()).await.unwrap();
    let mut history = store.history("h1.a").await.unwrap();
    let mut kept = Vec::new();
    while let Some(entry) = futures::StreamExt::next(&mut history).await {
        kept.push(entry.unwrap().value);
    }
    assert_eq!(kept, ["second"], "only the current value is kept");
}

/// nats-server 2.15 caps a stream at 1,000 consumers unless it sets its own limit; `TODO` holds
/// one durable consumer per agent, so the swarm's streams set theirs.
#[tokio::test]
async fn more_than_a_thousand_agents_each_get_their_todo_consumer() {
    let nats = NatsJwt::start().await.unwrap();
    let client = nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = async_nats::jetstream::new(client);
    hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    let agents: Vec<_> =
        (0..1_050).map(|i| hyperhive_hive_proto::AgentName::parse(&format!("a{i:04}")).unwrap()).collect();
    let made = futures::stream::iter(agents.iter().map(|agent| {
        let js = js.clone();
        async move { swarm_controller::nats::consumers::ensure_agent(&js, agent).await }
    }))
    .buffer_unordered(16)
    .collect::<Vec<_>>()
    .await;
    let refused: Vec<String> = made.into_iter().filter_map(|r| r.err().map(|e| e.to_string())).collect();
    assert_eq!(refused.len(), 0, "{} refused, e.g. {:?}", refused.len(), refused.first());
    let info = js.get_stream("TODO").await.unwrap().info().await.unwrap().clone();
    assert_eq!(info.state.consumer_count, 1_050);
}

/// Every change of a definition is a compare-and-set, and losing one is a conflict (never a
/// NATS error): creating under a used id (live or deleted), and changing or deleting from a
/// revision that is no longer current.
#[tokio::test]
async fn a_used_id_or_a_stale_revision_is_a_conflict() {
    use swarm_controller::definition::{DefinitionRules, NewSchedule, ScheduleDefinition};
    use swarm_controller::schedules::store::{StoreError, new_id};

    let c = Controller::start(3600).await;
    let buckets = hyperhive_nats_objects::ensure_objects(&c.js).await.unwrap();
    let definitions = Definitions::new(c.js.clone(), buckets.definitions);
    let new = NewSchedule::from_json(new_schedule(&["a"]).to_string().as_bytes()).unwrap();
    let first = ScheduleDefinition::create(new_id(), new, time::OffsetDateTime::now_utc());
    let revision = definitions.create(&first).await.unwrap();
    let conflict = |r: Result<_, StoreError>| matches!(r, Err(StoreError::Conflict { .. }));
    assert!(conflict(definitions.create(&first).await.map(|_| ())), "a live id");
    let changed = definitions.update(&first, revision).await.unwrap();
    assert!(conflict(definitions.update(&first, revision).await.map(|_| ())), "a stale update");
    assert!(conflict(definitions.delete(&first.id, revision).await), "a stale delete");
    definitions.delete(&first.id, changed).await.unwrap();
    assert!(definitions.get(&first.id).await.unwrap().is_none());
    assert!(conflict(definitions.create(&first).await.map(|_| ())), "a deleted id");
}
