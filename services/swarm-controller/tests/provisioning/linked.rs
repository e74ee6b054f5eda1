//! Linked accounts against a real Synapse and the forge stand-in: linked, listed without a
//! credential, delivered to the agent's secrets directory on its hive, revoked at the
//! homeserver, kept when revoking fails; and every bad request refused with nothing stored.

use hyper::http::{Method, StatusCode};
use hyperhive_provision::Secret;
use hyperhive_provision::matrix::{AccountCheck, Homeserver, Matrix, SynapseClient};
use hyperhive_testkit::wait_until;
use serde_json::{Value, json};
use swarm_controller::nats::scan_bucket;
use swarmctl::client;

use crate::harness::{HIVE, PATIENCE, Swarm, Tuning};

const AGENT: &str = "lima";

/// Method, path, content type, body, the status expected and a phrase of its error.
type BadCase = (Method, String, &'static str, Vec<u8>, StatusCode, &'static str);

async fn call(swarm: &Swarm, method: Method, path: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let (status, bytes) = client::send(&swarm.socket, request).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// `PUT .../forge-accounts/{label}` with `body`.
async fn put_forge(swarm: &Swarm, label: &str, body: &Value) -> (StatusCode, Value) {
    let path = format!("{}/forge-accounts/{label}", base(AGENT));
    call(swarm, Method::PUT, &path, "application/json", body.to_string().into_bytes()).await
}

fn base(agent: &str) -> String {
    format!("/api/hives/{HIVE}/agents/{agent}")
}

/// A fresh matrix account on the test's Synapse, logged in: its user id and token.
async fn matrix_account(swarm: &Swarm, localpart: &str) -> (String, String) {
    let synapse =
        SynapseClient::new(&swarm.synapse.base_url(), Secret::new(swarm.synapse.shared_secret().to_owned())).unwrap();
    let session = synapse.register(localpart, &Secret::new("a-long-password-1".to_owned()), None).await.unwrap();
    (session.user_id, session.access_token.expose().to_owned())
}

/// Registers `localpart` on the test's Synapse and links it to the agent as matrix account
/// `name` with `swarmctl accounts add` (the token from a file): its user id and token.
async fn link_new_matrix(swarm: &Swarm, name: &str, localpart: &str) -> (String, String) {
    let (user_id, token) = matrix_account(swarm, localpart).await;
    let file = token_file(swarm, &format!("{name}.token"), &token);
    let homeserver = swarm.synapse.base_url();
    let args = [
        "accounts",
        "add",
        HIVE,
        AGENT,
        "matrix",
        name,
        "--url",
        &homeserver,
        "--user",
        &user_id,
        "--token-file",
        &file,
        "--json",
    ];
    let answer = swarm.swarmctl(&args).unwrap();
    assert!(!answer.contains(&token), "the token in swarmctl's answer: {answer}");
    (user_id, token)
}

fn token_file(swarm: &Swarm, name: &str, token: &str) -> String {
    let path = swarm.dir.path().join(name);
    std::fs::write(&path, token).unwrap();
    path.to_str().unwrap().to_owned()
}

async fn wait_file(swarm: &Swarm, file: &str, present: bool) -> Option<String> {
    wait_until(&format!("{file} present={present} in {AGENT}'s secrets"), PATIENCE, || async {
        let found = swarm.agent_secret(AGENT, file);
        (found.is_some() == present).then_some(found)
    })
    .await
    .unwrap()
}

fn listing(swarm: &Swarm) -> Value {
    swarm.swarmctl_json(&["accounts", "list", HIVE, AGENT])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_accounts_are_verified_delivered_listed_without_credentials_and_revoked() {
    let mut swarm = Swarm::start(Tuning::default()).await;
    swarm.create(AGENT).unwrap();
    swarm.wait_provisioned(AGENT).await;
    let homeserver = swarm.synapse.base_url();

    // Matrix: linked with swarmctl (the token from a file), verified with whoami.
    let (ops_id, ops_token) = link_new_matrix(&swarm, "ops", "ops-bot").await;
    let delivered = wait_file(&swarm, "linked-matrix-ops.json", true).await.unwrap();
    let delivered: Value = serde_json::from_str(&delivered).unwrap();
    assert_eq!(
        (delivered["user_id"].as_str(), delivered["access_token"].as_str()),
        (Some(ops_id.as_str()), Some(ops_token.as_str()))
    );

    // Forge: verified against the stand-in with GET /api/v1/user.
    swarm.forge.add_user("ext-bot", "a-long-password-2", false);
    swarm.forge.set_must_change_password("ext-bot", false);
    let forge_token = swarm.forge.add_token("ext-bot", "linked", &["read:user"]);
    let forge_body =
        |username: &str, token: &str| json!({"url": swarm.forge.url(), "username": username, "token": token});
    let (status, answer) = put_forge(&swarm, "work", &forge_body("ext-bot", &forge_token)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["account"]["user"], "ext-bot");
    // GitHub: form only.
    let github = token_file(&swarm, "gh.token", "ghp_exampletoken0123456789");
    swarm.swarmctl(&["accounts", "add", HIVE, AGENT, "github", "--user", "octo-bot", "--token-file", &github]).unwrap();
    wait_file(&swarm, "linked-github.json", true).await;
    wait_file(&swarm, "linked-forge-work.json", true).await;

    // The listing: the agent's own matrix account, then the linked ones; no credential.
    let listed = listing(&swarm);
    let rows: Vec<(String, String, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap().to_owned(),
                a["name"].as_str().unwrap().to_owned(),
                a["own"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("matrix".into(), "main".into(), true),
            ("matrix".into(), "ops".into(), false),
            ("forge".into(), "work".into(), false),
            ("github".into(), "github".into(), false)
        ]
    );
    let text = listed.to_string();
    for secret in [&ops_token, &forge_token, "ghp_exampletoken0123456789"] {
        assert!(!text.contains(secret), "a credential in the listing");
    }

    // Revoke: the token is logged out at the homeserver, the account and its file are gone.
    let client = Homeserver::new(&homeserver).unwrap();
    assert!(matches!(client.whoami(&Secret::new(ops_token.clone())).await.unwrap(), AccountCheck::Valid { .. }));
    // The agent's name alone: its hive is read from the roster, and lists the same.
    assert_eq!(swarm.swarmctl_json(&["accounts", "list", AGENT]), listing(&swarm));
    swarm.swarmctl(&["accounts", "rm", AGENT, "matrix", "ops", "--revoke"]).unwrap();
    assert_eq!(client.whoami(&Secret::new(ops_token.clone())).await.unwrap(), AccountCheck::Invalid);
    wait_file(&swarm, "linked-matrix-ops.json", false).await;
    assert!(!listing(&swarm).to_string().contains("\"ops\""));

    // A token already logged out elsewhere: revoking says so, and the account stays.
    let (_, spare_token) = link_new_matrix(&swarm, "spare", "spare-bot").await;
    client.logout(&Secret::new(spare_token.clone())).await.unwrap();
    let err = swarm.swarmctl(&["accounts", "rm", HIVE, AGENT, "matrix", "spare", "--revoke"]).unwrap_err();
    assert!(err.contains("already invalid"), "{err}");
    assert!(listing(&swarm).to_string().contains("\"spare\""), "kept after a failed revoke");

    // A forge token revoked at the forge, a wrong username, the forge down: refused, not stored.
    let cases = [(forge_body("someone-else", &forge_token), StatusCode::BAD_REQUEST, "not someone-else")];
    for (body, status, needle) in cases {
        let (got, answer) = put_forge(&swarm, "other", &body).await;
        assert_eq!(got, status, "{answer}");
        assert!(answer["error"].as_str().unwrap().contains(needle), "{answer}");
    }
    swarm.forge.set_down(true);
    let (got, answer) = put_forge(&swarm, "other", &forge_body("ext-bot", &forge_token)).await;
    assert_eq!(got, StatusCode::BAD_GATEWAY, "{answer}");
    swarm.forge.set_down(false);
    assert!(swarm.forge.revoke_token("ext-bot", "linked"));
    let (got, answer) = put_forge(&swarm, "other", &forge_body("ext-bot", &forge_token)).await;
    assert_eq!(got, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("does not know this token"), "{answer}");
    assert!(!listing(&swarm).to_string().contains("\"other\""), "nothing stored for refused links");

    // Revoking with the homeserver stopped: an error, and the account stays.
    let (_, last_token) = link_new_matrix(&swarm, "last", "last-bot").await;
    swarm.synapse.process().kill();
    let (got, answer) = call(
        &swarm,
        Method::DELETE,
        &format!("{}/matrix-accounts/last?revoke=true", base(AGENT)),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(got, StatusCode::BAD_GATEWAY, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("no answer from"), "{answer}");
    assert!(listing(&swarm).to_string().contains("\"last\""), "kept when the homeserver is down");

    // No credential in the controller's log, any KV value in the clear, or hive-c0re's log.
    let secrets = [&ops_token, &spare_token, &last_token, &forge_token, &"ghp_exampletoken0123456789".to_owned()];
    let log = swarm.controller_log();
    let hive_log = swarm.hive.as_ref().unwrap().log();
    for secret in secrets {
        assert!(!log.contains(secret.as_str()) && !hive_log.contains(secret.as_str()), "a credential in a log");
        for bucket in ["agents", "agent-wanted", "swarm-secrets"] {
            for kv in scan_bucket(&swarm.js, bucket).await.unwrap() {
                assert!(!String::from_utf8_lossy(&kv.value).contains(secret.as_str()), "a credential in {bucket}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_linked_account_requests_are_refused_and_store_nothing() {
    let swarm = Swarm::start(Tuning::default()).await;
    swarm.create(AGENT).unwrap();
    swarm.wait_provisioned(AGENT).await;
    let good = json!({"login": "octo-bot", "token": "ghp_x"}).to_string().into_bytes();
    let cases: Vec<BadCase> = vec![
        (
            Method::PUT,
            format!("{}/matrix-accounts/Ops", base(AGENT)),
            "application/json",
            good.clone(),
            StatusCode::BAD_REQUEST,
            "lowercase",
        ),
        (
            Method::PUT,
            format!("{}/matrix-accounts/main", base(AGENT)),
            "application/json",
            good.clone(),
            StatusCode::BAD_REQUEST,
            "own matrix account",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base("nobody")),
            "application/json",
            good.clone(),
            StatusCode::NOT_FOUND,
            "no agent nobody",
        ),
        (
            Method::PUT,
            format!("/api/hives/hive9/agents/{AGENT}/github-account"),
            "application/json",
            good.clone(),
            StatusCode::NOT_FOUND,
            "no agent",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base("Bad")),
            "application/json",
            good.clone(),
            StatusCode::BAD_REQUEST,
            "Bad",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base(AGENT)),
            "text/plain",
            good.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "JSON",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base(AGENT)),
            "application/json",
            vec![b' '; 70 * 1024],
            StatusCode::PAYLOAD_TOO_LARGE,
            "4 KiB",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base(AGENT)),
            "application/json",
            b"{\"login\": 1".to_vec(),
            StatusCode::BAD_REQUEST,
            "malformed github account",
        ),
        (
            Method::PUT,
            format!("{}/github-account", base(AGENT)),
            "application/json",
            br#"{"login": "-x", "token": "t"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "GitHub login",
        ),
        (
            Method::PUT,
            format!("{}/matrix-accounts/ops", base(AGENT)),
            "application/json",
            br#"{"homeserver": "http://127.0.0.1:9", "user_id": "@a:b", "access_token": "t"}"#.to_vec(),
            StatusCode::BAD_GATEWAY,
            "no answer from",
        ),
        (
            Method::DELETE,
            format!("{}/forge-accounts/work", base(AGENT)),
            "application/json",
            Vec::new(),
            StatusCode::NOT_FOUND,
            "no linked",
        ),
        (
            Method::DELETE,
            format!("{}/forge-accounts/work?revoke=true", base(AGENT)),
            "application/json",
            Vec::new(),
            StatusCode::BAD_REQUEST,
            "matrix accounts only",
        ),
        (
            Method::DELETE,
            format!("{}/matrix-accounts/ops?force=1", base(AGENT)),
            "application/json",
            Vec::new(),
            StatusCode::BAD_REQUEST,
            "unknown query",
        ),
        (
            Method::POST,
            format!("{}/github-account", base(AGENT)),
            "application/json",
            good.clone(),
            StatusCode::METHOD_NOT_ALLOWED,
            "PUT, DELETE",
        ),
        (
            Method::DELETE,
            format!("{}/linked-accounts", base(AGENT)),
            "application/json",
            Vec::new(),
            StatusCode::METHOD_NOT_ALLOWED,
            "GET",
        ),
    ];
    for (method, path, content_type, body, status, needle) in cases {
        let (got, answer) = call(&swarm, method.clone(), &path, content_type, body).await;
        assert_eq!(got, status, "{method} {path}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{method} {path}: {message}");
    }
    // A token given on the command line is not an option; a missing token file is a clear error.
    let err =
        swarm.swarmctl(&["accounts", "add", HIVE, AGENT, "github", "--user", "octo-bot", "--token", "x"]).unwrap_err();
    assert!(err.contains("--token"), "{err}");
    let err = swarm
        .swarmctl(&[
            "accounts",
            "add",
            HIVE,
            AGENT,
            "github",
            "--user",
            "octo-bot",
            "--token-file",
            "/nonexistent/token",
        ])
        .unwrap_err();
    assert!(err.contains("reading the token from /nonexistent/token"), "{err}");
    let err = swarm.swarmctl(&["accounts", "rm", HIVE, AGENT, "forge", "work", "--revoke"]).unwrap_err();
    assert!(err.contains("matrix accounts only"), "{err}");

    let listed = swarm.swarmctl_json(&["accounts", "list", HIVE, AGENT]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "only the agent's own account: {listed}");
    let records = scan_bucket(&swarm.js, "swarm-secrets").await.unwrap();
    assert!(records.iter().all(|kv| !kv.key.contains("linked")), "a refused link stored something");
}
