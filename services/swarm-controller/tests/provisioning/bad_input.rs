//! Bad requests to `POST /api/agents` and bad `swarmctl agent create` flags: each a clear
//! refusal with the right status, and nothing stored or queued.

use hyper::http::{Method, StatusCode};
use serde_json::{Value, json};
use swarmctl::client;

use crate::common::{Controller, Options};
use crate::harness::{HIVE, KEYLESS_HIVE, Swarm, Tuning};

async fn post(swarm: &Swarm, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let request = hyper::Request::builder()
        .method(Method::POST)
        .uri("/api/agents")
        .header("content-type", content_type)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let (status, bytes) = client::send(&swarm.socket, request).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_create_requests_are_refused_clearly_and_store_nothing() {
    let swarm = Swarm::start(Tuning::default()).await;
    let spec = json!({"turn_command": "cat"});
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (json!({"name": "Bad", "hive": HIVE, "spec": spec}), StatusCode::BAD_REQUEST, "Bad"),
        (json!({"name": "a".repeat(40), "hive": HIVE, "spec": spec}), StatusCode::BAD_REQUEST, "32"),
        (json!({"name": "delta", "hive": HIVE}), StatusCode::BAD_REQUEST, "missing field `spec`"),
        (json!({"name": "delta", "hive": HIVE, "spec": spec, "token": "x"}), StatusCode::BAD_REQUEST, "unknown field"),
        (json!({"name": "delta", "hive": HIVE, "spec": {"turn_command": ""}}), StatusCode::BAD_REQUEST, "turn_command"),
        (
            json!({"name": "delta", "hive": HIVE, "spec": {"turn_command": "c", "env": {"bad name": "1"}}}),
            StatusCode::BAD_REQUEST,
            "environment name",
        ),
        (json!({"name": "delta", "hive": "nohive", "spec": spec}), StatusCode::NOT_FOUND, "no hive nohive"),
        (json!({"name": "delta", "hive": KEYLESS_HIVE, "spec": spec}), StatusCode::CONFLICT, "no xkey"),
        (json!(["delta"]), StatusCode::BAD_REQUEST, "malformed request body"),
    ];
    for (body, status, needle) in cases {
        let (got, answer) = post(&swarm, "application/json", body.to_string().into_bytes()).await;
        assert_eq!(got, status, "{body}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{body}: {message}");
    }
    let (got, answer) = post(&swarm, "application/json", b"{not json".to_vec()).await;
    assert_eq!(got, StatusCode::BAD_REQUEST, "{answer}");
    let (got, answer) =
        post(&swarm, "text/plain", json!({"name": "delta", "hive": HIVE, "spec": spec}).to_string().into_bytes()).await;
    assert_eq!(got, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{answer}");
    let (got, answer) = post(&swarm, "application/json", vec![b' '; 9 * 1024 * 1024]).await;
    assert_eq!(got, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");

    // Nothing was stored or queued.
    let agents = swarm.swarmctl_json(&["agents"]);
    assert_eq!(agents, json!([]), "the roster holds nothing");
    let graph = swarm.swarmctl_json(&["jobs"]);
    assert_eq!(graph["nodes"], json!([]), "no job was queued");
    assert_eq!(swarm.forge.counts().users_created, 0);

    // swarmctl refuses bad flags before asking.
    let turn = swarm.turn_command("delta");
    let spec_file = swarm.dir.path().join("spec.json");
    std::fs::write(&spec_file, "[1, 2]").unwrap();
    let spec_file = spec_file.to_str().unwrap();
    for (args, needle) in [
        (vec!["agent", "create", "delta", "--turn-command", turn.as_str()], "--hive"),
        (vec!["agent", "create", "delta", "--hive", HIVE], "--spec-file"),
        (
            vec!["agent", "create", "delta", "--hive", HIVE, "--spec-file", spec_file, "--turn-command", "c"],
            "cannot be used with",
        ),
        (vec!["agent", "create", "delta", "--hive", HIVE, "--spec-file", spec_file], "not a JSON object"),
        (vec!["agent", "create", "delta", "--hive", HIVE, "--spec-file", "/nonexistent/spec.json"], "reading the spec"),
        (vec!["agent", "create", "Delta", "--hive", HIVE, "--turn-command", "c"], "Delta"),
        (
            vec!["agent", "create", "delta", "--hive", HIVE, "--turn-command", "c", "--wait", "--timeout", "0s"],
            "duration",
        ),
    ] {
        let err = swarm.swarmctl(&args).unwrap_err();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(swarm.swarmctl_json(&["agents"]), json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_without_the_secret_store_key_refuses_to_create_and_says_what_to_set() {
    let mut options = Options::new(60);
    options.hives = crate::common::directory(&[HIVE]);
    // A hive without an xkey is refused before the configuration is looked at: give it one.
    let xkey = nkeys::XKey::new().public_key();
    options.hives.values_mut().for_each(|h| h.xkey = Some(xkey.clone()));
    let controller = Controller::start_with(options).await;
    let (status, answer) = controller
        .json(Method::POST, "/api/agents", &json!({"name": "delta", "hive": HIVE, "spec": {"turn_command": "cat"}}))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    let message = answer["error"].as_str().unwrap();
    assert!(message.contains("SWARM_SECRETS_KEY_FILE") && message.contains("SWARM_NATS_DIR"), "{message}");
    let (_, agents) = controller.json(Method::GET, "/api/agents", &Value::Null).await;
    assert_eq!(agents, json!([]));
}
