//! The HTTP API against a real nats-server in JWT mode, with the controller in-process.

mod common;

use std::collections::BTreeSet;

use common::{Controller, new_schedule};
use hyper::http::{Method, StatusCode};
use hyperhive_nats_objects::limits::TODO_DUPLICATE_WINDOW;
use hyperhive_nats_objects::{AGENT_SCHEDULES_BUCKET, SCHEDULE_DEFINITIONS_BUCKET, TODO_STREAM};
use serde_json::{Value, json};

fn ids(doc: &hyperhive_schedule::AgentSchedules) -> Vec<&str> {
    doc.schedules.iter().map(|s| s.id.as_str()).collect()
}

#[tokio::test]
async fn start_creates_the_buckets_and_the_todo_stream() {
    let c = Controller::start(60).await;
    let mut todo = c.js.get_stream(TODO_STREAM).await.unwrap();
    let config = todo.info().await.unwrap().config.clone();
    assert_eq!(config.subjects, ["todo.*"]);
    assert_eq!(config.retention, async_nats::jetstream::stream::RetentionPolicy::WorkQueue);
    assert!(config.duplicate_window >= TODO_DUPLICATE_WINDOW);
    assert_eq!(config.max_messages, hyperhive_nats_objects::limits::TODO_MAX_MSGS);
    let mut deploy = c.js.get_stream(hyperhive_nats_objects::DEPLOY_STREAM).await.unwrap();
    assert_eq!(deploy.info().await.unwrap().config.max_messages, hyperhive_nats_objects::limits::DEPLOY_MAX_MSGS);
    let mut agents = c.js.get_stream(format!("KV_{AGENT_SCHEDULES_BUCKET}")).await.unwrap();
    assert!(agents.info().await.unwrap().config.allow_direct);
    let mut definitions = c.js.get_stream(format!("KV_{SCHEDULE_DEFINITIONS_BUCKET}")).await.unwrap();
    assert!(!definitions.info().await.unwrap().config.allow_direct, "definitions are read from the leader");
    let mut roster = c.js.get_stream(format!("KV_{}", hyperhive_nats_objects::AGENTS_BUCKET)).await.unwrap();
    let roster = roster.info().await.unwrap().config.clone();
    assert!(!roster.allow_direct, "no tenant reads the roster");
    assert_eq!(roster.max_bytes, hyperhive_nats_objects::limits::BUCKET_MAX_BYTES, "bounded like the others");
    assert_eq!(roster.max_messages_per_subject, 1, "history 1");
    for bucket in [hyperhive_nats_objects::HIVE_STATUS_BUCKET, hyperhive_nats_objects::AGENT_WANTED_BUCKET] {
        let mut stream = c.js.get_stream(format!("KV_{bucket}")).await.unwrap();
        assert!(stream.info().await.unwrap().config.allow_direct, "{bucket}: hives read their keys by direct get");
    }
}

#[tokio::test]
async fn a_burst_of_listings_leaves_no_consumers_behind() {
    let c = Controller::start(60).await;
    let (status, _) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    assert_eq!(status, StatusCode::CREATED);
    for _ in 0..200 {
        let (status, listed) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        assert_eq!(listed.as_array().unwrap().len(), 1);
    }
    // Each listing reads the bucket with a consumer of its own, deleted when it is done (not left
    // for the server's 30 s inactivity threshold, where a burst would pile them up).
    let mut definitions = c.js.get_stream(format!("KV_{SCHEDULE_DEFINITIONS_BUCKET}")).await.unwrap();
    let consumers = definitions.info().await.unwrap().state.consumer_count;
    assert!(consumers <= 1, "{consumers} consumers left after 200 listings");
}

#[tokio::test]
async fn create_edit_and_delete_keep_every_agents_key_in_step() {
    let c = Controller::start(60).await;
    let (status, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["b", "a"])).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["agents"], json!(["a", "b"]));
    assert!(created["revision"].as_u64().unwrap() > 0);
    for agent in ["a", "b"] {
        let doc = c.agent_key(agent).await.expect("key written");
        assert_eq!(ids(&doc), [id.as_str()]);
        assert_eq!(doc.schedules[0].body, "say hello");
    }

    let (status, list) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (status, one) = c.json(Method::GET, &format!("/api/schedules/{id}"), &Value::Null).await;
    assert_eq!((status, &one), (StatusCode::OK, &created));

    // Agent a removed, c added: a's key goes, c's appears, b keeps its not_before.
    let before_b = c.agent_key("b").await.unwrap();
    let path = format!("/api/schedules/{id}");
    let (status, changed) = c.json(Method::PATCH, &path, &json!({"agents": ["b", "c"], "body": "new"})).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert!(changed["revision"].as_u64() > created["revision"].as_u64());
    assert!(c.agent_key("a").await.is_none(), "an agent left with no schedules has no key");
    let b = c.agent_key("b").await.unwrap();
    assert_eq!(b.schedules[0].body, "new");
    assert_eq!(b.schedules[0].not_before, before_b.schedules[0].not_before, "a body edit keeps not_before");
    assert_eq!(c.agent_key("c").await.unwrap().schedules[0].body, "new");

    let (status, _) = c.json(Method::DELETE, &path, &Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert!(c.agent_key("b").await.is_none());
    assert!(c.agent_key("c").await.is_none());
    let (status, gone) = c.json(Method::GET, &path, &Value::Null).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(gone["error"].as_str().unwrap().contains(&id));
}

#[tokio::test]
async fn an_edit_writes_only_the_keys_whose_bytes_change() {
    let c = Controller::start(60).await;
    let (_, one) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a", "b"])).await;
    c.json(Method::POST, "/api/schedules", &new_schedule(&["c"])).await;
    let path = format!("/api/schedules/{}", one["id"].as_str().unwrap());

    let (_, agents_before) = c.writes_so_far().await;
    let (status, _) = c.json(Method::PATCH, &path, &json!({"body": "edited"})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, agents_after) = c.writes_so_far().await;
    assert_eq!(agents_after - agents_before, 2, "a and b rewritten, c untouched");

    // A patch that changes nothing writes nothing at all.
    let before = c.writes_so_far().await;
    let (status, _) = c.json(Method::PATCH, &path, &json!({"body": "edited"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(c.writes_so_far().await, before);
}

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_stores_nothing() {
    let c = Controller::start(60).await;
    let valid = new_schedule(&["a"]);
    let with = |field: &str, value: Value| {
        let mut v = valid.clone();
        v[field] = value;
        v.to_string()
    };
    let without = |field: &str| {
        let mut v = valid.clone();
        v.as_object_mut().unwrap().remove(field);
        v.to_string()
    };
    let json_ct = ("content-type", "application/json");
    type Case<'a> = (Vec<(&'a str, &'a str)>, String, StatusCode, &'a str);
    let cases: Vec<Case> = vec![
        (vec![json_ct], "{not json".into(), StatusCode::BAD_REQUEST, "malformed request body"),
        (vec![json_ct], "".into(), StatusCode::BAD_REQUEST, "malformed request body"),
        (vec![json_ct], with("extra", json!(1)), StatusCode::BAD_REQUEST, "unknown field `extra`"),
        (vec![json_ct], with("name", json!("")), StatusCode::BAD_REQUEST, "name must be 1 to 100"),
        (vec![json_ct], with("name", json!("n".repeat(101))), StatusCode::BAD_REQUEST, "name must be 1 to 100"),
        (vec![json_ct], without("name"), StatusCode::BAD_REQUEST, "missing field `name`"),
        (vec![json_ct], with("agents", json!([])), StatusCode::BAD_REQUEST, "at least one agent"),
        (vec![json_ct], with("agents", json!(["a", "a"])), StatusCode::BAD_REQUEST, "more than once"),
        (vec![json_ct], with("agents", json!(["a.b"])), StatusCode::BAD_REQUEST, "invalid agent name"),
        (vec![json_ct], with("agents", json!(["x".repeat(33)])), StatusCode::BAD_REQUEST, "invalid agent name"),
        (vec![json_ct], with("body", json!("")), StatusCode::BAD_REQUEST, "body must be 1 byte"),
        (vec![json_ct], with("body", json!("x".repeat(64 * 1024 + 1))), StatusCode::BAD_REQUEST, "body must be 1 byte"),
        (vec![json_ct], with("anchor", json!("next tuesday")), StatusCode::BAD_REQUEST, "RFC 3339"),
        (vec![json_ct], with("interval", json!(0)), StatusCode::BAD_REQUEST, "whole number of seconds"),
        (vec![json_ct], with("interval", json!(2.5)), StatusCode::BAD_REQUEST, "whole number of seconds"),
        (vec![json_ct], without("interval"), StatusCode::BAD_REQUEST, "missing field `interval`"),
        (vec![], valid.to_string(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type: application/json"),
        (
            vec![("content-type", "text/plain")],
            valid.to_string(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            vec![json_ct],
            "x".repeat(600 * 1024),
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than 512 KiB; a schedule's prompt (`body`) is at most 64 KiB",
        ),
    ];
    for (headers, body, status, needle) in cases {
        let (got, answer) = c.call(Method::POST, "/api/schedules", &headers, body.clone()).await.unwrap();
        let shown = body.chars().take(80).collect::<String>();
        assert_eq!(got, status, "{shown}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{shown}: {error}");
    }
    assert_eq!(c.writes_so_far().await, (0, 0), "nothing stored, nothing written to agent-schedules");

    // The same rules on PATCH; the schedule and the agents' keys stay as they were.
    let (_, created) = c.json(Method::POST, "/api/schedules", &valid).await;
    let path = format!("/api/schedules/{}", created["id"].as_str().unwrap());
    let before = c.writes_so_far().await;
    for (patch, needle) in [
        (json!({"agents": []}), "at least one agent"),
        (json!({"interval": -1}), "whole number of seconds"),
        (json!({"id": "other"}), "unknown field `id`"),
        (json!({"paused": "yes"}), "malformed request body"),
    ] {
        let (status, answer) = c.json(Method::PATCH, &path, &patch).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{patch}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(needle), "{patch}: {answer}");
    }
    let (status, answer) =
        c.call(Method::PATCH, &path, &[("content-type", "application/json"), ("if-match", "abc")], "{}").await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("If-Match"));
    assert_eq!(c.writes_so_far().await, before);
}

#[tokio::test]
async fn unknown_routes_methods_and_ids_are_json_errors() {
    let c = Controller::start(60).await;
    for (method, path, status) in [
        (Method::GET, "/nope", StatusCode::NOT_FOUND),
        (Method::GET, "/api/schedules/0123456789abcdef", StatusCode::NOT_FOUND),
        (Method::GET, "/api/schedules/not-an-id", StatusCode::NOT_FOUND),
        (Method::DELETE, "/api/schedules/0123456789abcdef", StatusCode::NOT_FOUND),
        (Method::PUT, "/api/schedules", StatusCode::METHOD_NOT_ALLOWED),
        (Method::POST, "/healthz", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let (got, answer) = c.call(method.clone(), path, &[], "").await.unwrap();
        assert_eq!(got, status, "{method} {path}: {answer}");
        assert!(answer["error"].is_string(), "{method} {path}: {answer}");
    }
    let (status, answer) = c
        .call(Method::PATCH, "/api/schedules/0123456789abcdef", &[("content-type", "application/json")], "{}")
        .await
        .unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
}

/// The raw answer to `HEAD path` on the socket: status line and headers, and whatever followed.
async fn head(c: &Controller, path: &str) -> (String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(&c.socket).await.unwrap();
    stream
        .write_all(format!("HEAD {path} HTTP/1.1\r\nhost: swarm\r\nconnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head") + 4;
    let rest = answer.split_off(end);
    (String::from_utf8(answer).unwrap().to_ascii_lowercase(), rest)
}

#[tokio::test]
async fn head_answers_as_get_does_without_the_body_and_is_not_audited() {
    let c = Controller::start(60).await;
    let page = {
        let request = hyper::Request::builder().uri("/").body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
        swarmctl::client::send(&c.socket, request).await.unwrap().1
    };
    let (answer, body) = head(&c, "/").await;
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(answer.contains("content-type: text/html"), "{answer}");
    assert!(answer.contains(&format!("content-length: {}\r\n", page.len())), "{answer}");
    assert!(body.is_empty(), "HEAD got {} bytes of body", body.len());
    let (answer, body) = head(&c, "/api/agents").await;
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(body.is_empty());
    let (answer, _) = head(&c, "/api/nope").await;
    assert!(answer.starts_with("http/1.1 404"), "{answer}");
    // A write after the HEADs: once the audit shows it, a HEAD entry would show too.
    let (status, _) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    assert_eq!(status, StatusCode::CREATED);
    let audit = hyperhive_testkit::wait_until("the POST in the audit", std::time::Duration::from_secs(10), || async {
        let (_, audit) = c.json(Method::GET, "/api/audit", &Value::Null).await;
        audit.to_string().contains("POST").then_some(audit)
    })
    .await
    .unwrap();
    assert!(!audit.to_string().contains("HEAD"), "a read is not audited: {audit}");
}

#[tokio::test]
async fn two_patches_with_the_same_revision_give_one_200_and_one_409() {
    let c = Controller::start(60).await;
    let (_, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    let path = format!("/api/schedules/{}", created["id"].as_str().unwrap());
    let revision = created["revision"].to_string();
    let patch = |body: &'static str| {
        let (c, path, revision) = (&c, path.clone(), revision.clone());
        async move {
            let headers = [("content-type", "application/json"), ("if-match", revision.as_str())];
            c.call(Method::PATCH, &path, &headers, body).await.unwrap()
        }
    };
    let (first, second) = tokio::join!(patch(r#"{"body":"one"}"#), patch(r#"{"body":"two"}"#));
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT], "{first:?} {second:?}");
    let (winner, loser) = if first.0 == StatusCode::OK { (first.1, second.1) } else { (second.1, first.1) };
    assert_eq!(loser["current"], winner, "the 409 shows the current version");
    assert!(loser["error"].as_str().unwrap().contains("revision"));
}

#[tokio::test]
async fn fifty_concurrent_posts_give_fifty_distinct_schedules() {
    let c = Controller::start(60).await;
    let posts = (0..50).map(|i| {
        let c = &c;
        async move {
            let mut body = new_schedule(&["a"]);
            body["name"] = json!(format!("s{i}"));
            c.json(Method::POST, "/api/schedules", &body).await
        }
    });
    let answers = futures::future::join_all(posts).await;
    let ids: BTreeSet<String> = answers
        .iter()
        .map(|(status, v)| {
            assert_eq!(*status, StatusCode::CREATED, "{v}");
            v["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 50);
    let (_, list) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
    assert_eq!(list.as_array().unwrap().len(), 50);
    let a = c.agent_key("a").await.unwrap();
    assert_eq!(a.schedules.len(), 50, "the agent's key holds every schedule, whatever the order of the writes");
}

#[tokio::test]
async fn a_schedule_that_would_overflow_an_agents_key_is_refused() {
    let c = Controller::start(60).await;
    let mut big = new_schedule(&["a", "b"]);
    big["body"] = json!("x".repeat(64 * 1024));
    let mut accepted = 0;
    let refusal = loop {
        big["name"] = json!(format!("big-{accepted}"));
        let (status, answer) = c.json(Method::POST, "/api/schedules", &big).await;
        if status != StatusCode::CREATED {
            break (status, answer);
        }
        accepted += 1;
        assert!(accepted < 20, "never refused");
    };
    assert_eq!(accepted, 15, "fifteen 64 KiB bodies fit in one message, sixteen do not");
    assert_eq!(refusal.0, StatusCode::BAD_REQUEST, "{}", refusal.1);
    assert!(refusal.1["error"].as_str().unwrap().contains("agent a's schedules would take"));
    let (_, list) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
    assert_eq!(list.as_array().unwrap().len(), 15, "nothing stored");
    assert_eq!(c.agent_key("b").await.unwrap().schedules.len(), 15);
    // An edit that grows another agent's document past the limit is refused too.
    big["agents"] = json!(["c"]);
    big["name"] = json!("big-for-c");
    let (_, for_c) = c.json(Method::POST, "/api/schedules", &big).await;
    let path = format!("/api/schedules/{}", for_c["id"].as_str().unwrap());
    let (status, answer) = c.json(Method::PATCH, &path, &json!({"agents": ["a", "c"]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, _) = c.json(Method::PATCH, &path, &json!({"agents": ["c", "d"]})).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn anchors_outside_the_writable_range_are_a_clear_400_and_the_daemon_keeps_serving() {
    let c = Controller::start(60).await;
    let (_, created) = c.json(Method::POST, "/api/schedules", &new_schedule(&["a"])).await;
    let path = format!("/api/schedules/{}", created["id"].as_str().unwrap());
    let before = c.writes_so_far().await;
    // Local times inside years 0000..9999 whose UTC instant is outside them.
    for anchor in ["9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00+00:01"] {
        let mut new = new_schedule(&["a"]);
        new["anchor"] = json!(anchor);
        for (method, path, body) in
            [(Method::POST, "/api/schedules", new), (Method::PATCH, path.as_str(), json!({ "anchor": anchor }))]
        {
            let (status, answer) = c.json(method.clone(), path, &body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {anchor}: {answer}");
            let error = answer["error"].as_str().unwrap();
            assert!(
                error.contains(anchor)
                    && error.contains("outside the supported range 0000-01-01T00:00:00Z..9999-12-31T23:59:59Z"),
                "{method} {anchor}: {error}"
            );
        }
    }
    assert_eq!(c.writes_so_far().await, before, "nothing stored");
    // Still serving: the edges themselves are accepted, and the schedule reads back unchanged.
    let mut last = new_schedule(&["a"]);
    last["anchor"] = json!("9999-12-31T23:59:59Z");
    let (status, answer) = c.json(Method::POST, "/api/schedules", &last).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["anchor"], "9999-12-31T23:59:59Z");
    let (status, answer) = c.json(Method::PATCH, &path, &json!({"anchor": "0000-01-01T00:01:00+00:01"})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["anchor"], "0000-01-01T00:00:00Z");
    let (status, list) = c.json(Method::GET, "/api/schedules", &Value::Null).await;
    assert_eq!((status, list.as_array().unwrap().len()), (StatusCode::OK, 2));
}
