//! The bridge binary on a free port, driven over HTTP: the file it writes, its protections and
//! every refusal.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use hyperhive_testkit::AutheliaBridge;
use reqwest::StatusCode;
use serde_json::{Value as Json, json};
use yaml_serde::Value;

const BIN: &str = env!("CARGO_BIN_EXE_swarm-authelia-bridge");
const MANAGED: &str = "hyperhive-agents";
const PASSWORD: &str = "pw-0123456789-abcdefghij";

/// A users file as people write it: humans with other hash schemes, Authelia's optional
/// attributes, values that look like other types, a comment.
const HUMANS: &str = r#"# users of example.com
users:
  alice:
    disabled: false
    displayname: "Alice 'yes' Liddell"
    password: "$argon2id$v=19$m=65536,t=3,p=2$BpLnfgDsc2WD8F2q$o/vzA4myCqZZ36bUGsDY//8mKUYNZZaR0t4MFFSs+iM"
    email: alice@example.com
    groups:
      - admins
      - "yes"
      - "012"
    given_name: Alice
    extra:
      badge: 7
      nested: { a: [1, 2.5, null, true] }
  bob:
    displayname: Bob
    password: '$6$rounds=50000$saltsalt$hashhash'
    email: bob@example.com
    groups: []
    disabled: true
  carol:
    displayname: |
      Carol
      on two lines
    password: "$2b$12$abcdefghijklmnopqrstuu"
    email: carol@example.com
"#;

/// Authelia's documented schema of one user; unknown fields are refused so a misspelt key the
/// bridge wrote would fail here.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AutheliaUser {
    disabled: bool,
    displayname: String,
    password: String,
    email: String,
    groups: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AutheliaFile {
    users: BTreeMap<String, AutheliaUser>,
}

struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Client {
    fn of(bridge: &AutheliaBridge) -> Self {
        Self { http: reqwest::Client::new(), url: bridge.url(), token: bridge.token().to_owned() }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Json>) -> (StatusCode, Json) {
        let mut request = self.http.request(method, format!("{}{path}", self.url)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the bridge answers");
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, if text.is_empty() { Json::Null } else { serde_json::from_str(&text).expect("JSON answer") })
    }

    async fn put(&self, name: &str, groups: &[&str]) -> (StatusCode, Json) {
        let body = json!({"displayname": format!("Agent {name}"), "email": format!("{name}@agents.example.com"),
                          "groups": groups, "password": PASSWORD});
        self.call(reqwest::Method::PUT, &format!("/v1/users/{name}"), Some(body)).await
    }

    async fn verify(&self, name: &str, password: &str) -> (StatusCode, Json) {
        let body = json!({ "password": password });
        self.call(reqwest::Method::POST, &format!("/v1/users/{name}/verify-password"), Some(body)).await
    }
}

async fn start(users: Option<&str>) -> AutheliaBridge {
    let builder = AutheliaBridge::builder(BIN);
    let builder = match users {
        Some(text) => builder.users(text),
        None => builder,
    };
    builder.start().await.expect("the bridge starts")
}

fn read_yaml(bridge: &AutheliaBridge) -> Value {
    yaml_serde::from_str(&std::fs::read_to_string(bridge.users_file()).unwrap()).unwrap()
}

/// The users file's directory holds the file and nothing else (no temp file left), mode 0600.
fn assert_replaced_cleanly(bridge: &AutheliaBridge) {
    let dir = bridge.users_file().parent().unwrap();
    let names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["users_database.yml"], "temp files left behind");
    let mode = std::fs::metadata(bridge.users_file()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn a_new_user_is_written_in_autheliass_format_with_an_argon2id_hash() {
    let bridge = start(None).await;
    let client = Client::of(&bridge);
    let (status, body) = client.call(reqwest::Method::GET, "/v1/users/agent-alpha", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(!bridge.users_file().exists(), "a read creates no file");

    let (status, body) = client.put("agent-alpha", &["dev", "dev"]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body,
        json!({"name": "agent-alpha", "displayname": "Agent agent-alpha", "email": "agent-alpha@agents.example.com",
               "groups": ["dev", MANAGED], "disabled": false, "managed": true})
    );
    assert_replaced_cleanly(&bridge);

    let text = std::fs::read_to_string(bridge.users_file()).unwrap();
    let file: AutheliaFile = yaml_serde::from_str(&text).expect("the file has Authelia's schema");
    let user = &file.users["agent-alpha"];
    assert!(!user.disabled);
    assert_eq!(user.groups, ["dev", MANAGED]);
    assert_eq!(user.email, "agent-alpha@agents.example.com");
    assert_eq!(user.displayname, "Agent agent-alpha");
    assert!(user.password.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{}", user.password);
    let parsed = PasswordHash::new(&user.password).unwrap();
    assert_eq!(parsed.salt.unwrap().as_str().len(), 22, "a 16-byte salt");
    assert_eq!(parsed.hash.unwrap().len(), 32, "a 32-byte key");
    assert!(argon2::Argon2::default().verify_password(PASSWORD.as_bytes(), &parsed).is_ok());
    assert!(argon2::Argon2::default().verify_password(b"another password", &parsed).is_err());

    let (status, body) = client.call(reqwest::Method::GET, "/v1/users/agent-alpha", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.to_string().contains("argon2"), "the hash is never shown: {body}");
}

#[tokio::test]
async fn other_users_unknown_fields_and_top_level_keys_survive_every_write() {
    let with_more = format!("{HUMANS}other_top_level:\n  kept: [1, two]\n");
    let mut bridge = start(Some(&with_more)).await;
    let client = Client::of(&bridge);
    let before = read_yaml(&bridge);

    assert_eq!(client.put("agent-a", &[]).await.0, StatusCode::CREATED);
    assert_eq!(client.put("agent-b", &[]).await.0, StatusCode::CREATED);
    assert_eq!(client.put("agent-a", &["ops"]).await.0, StatusCode::OK);
    let during = read_yaml(&bridge);
    for human in ["alice", "bob", "carol"] {
        assert_eq!(during["users"][human], before["users"][human], "{human} changed");
    }
    assert_eq!(during["other_top_level"], before["other_top_level"]);
    let names: Vec<&str> = during["users"].as_mapping().unwrap().keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(names, ["alice", "bob", "carol", "agent-a", "agent-b"], "users keep their order");

    let (status, _) = client.call(reqwest::Method::DELETE, "/v1/users/agent-a", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = client.call(reqwest::Method::DELETE, "/v1/users/agent-b", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(read_yaml(&bridge), before, "after removing its users the document means what it meant");
    assert_replaced_cleanly(&bridge);

    let log = bridge.process().log();
    assert!(!log.contains(PASSWORD) && !log.contains(bridge.token()) && !log.contains("$argon2id"), "{log}");
}

#[tokio::test]
async fn users_outside_the_managed_group_are_never_changed() {
    let bridge = start(Some(HUMANS)).await;
    let client = Client::of(&bridge);
    let bytes_before = std::fs::read(bridge.users_file()).unwrap();

    let (status, body) = client.call(reqwest::Method::GET, "/v1/users/alice", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["managed"], json!(false));
    assert_eq!(body["groups"], json!(["admins", "yes", "012"]));

    let (status, body) = client.put("alice", &[MANAGED]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not in the group hyperhive-agents"), "{body}");
    let (status, _) = client.call(reqwest::Method::DELETE, "/v1/users/bob", None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = client.verify("alice", PASSWORD).await;
    assert_eq!(status, StatusCode::CONFLICT, "no password oracle for people's accounts");
    assert_eq!(std::fs::read(bridge.users_file()).unwrap(), bytes_before, "the file was not even rewritten");
}

#[tokio::test]
async fn verify_password_proves_ownership_and_an_update_keeps_disabled() {
    let bridge = start(None).await;
    let client = Client::of(&bridge);
    assert_eq!(client.put("agent-a", &[]).await.0, StatusCode::CREATED);
    assert_eq!(client.verify("agent-a", PASSWORD).await, (StatusCode::OK, json!({"matches": true})));
    assert_eq!(client.verify("agent-a", "pw-0123456789-abcdefghiJ").await, (StatusCode::OK, json!({"matches": false})));
    assert_eq!(client.verify("agent-b", PASSWORD).await.0, StatusCode::NOT_FOUND);

    // The same PUT again (a retried provisioning step) is a 200 that writes nothing.
    let bytes = std::fs::read(bridge.users_file()).unwrap();
    let modified = std::fs::metadata(bridge.users_file()).unwrap().modified().unwrap();
    assert_eq!(client.put("agent-a", &[]).await.0, StatusCode::OK);
    assert_eq!(std::fs::read(bridge.users_file()).unwrap(), bytes);
    assert_eq!(std::fs::metadata(bridge.users_file()).unwrap().modified().unwrap(), modified);

    // An operator disables the agent's user by hand; a repeated PUT changes its fields, not that.
    let text = std::fs::read_to_string(bridge.users_file()).unwrap().replace("disabled: false", "disabled: true");
    std::fs::write(bridge.users_file(), text).unwrap();
    let body =
        json!({"displayname": "Renamed", "email": "new@example.com", "groups": [], "password": "a-new-password-1"});
    let (status, body) = client.call(reqwest::Method::PUT, "/v1/users/agent-a", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["disabled"], json!(true));
    assert_eq!(body["displayname"], json!("Renamed"));
    assert_eq!(body["groups"], json!([MANAGED]));
    assert_eq!(client.verify("agent-a", PASSWORD).await.1, json!({"matches": false}));
    assert_eq!(client.verify("agent-a", "a-new-password-1").await.1, json!({"matches": true}));
}

#[tokio::test]
async fn without_the_right_token_every_route_is_401_and_the_token_is_never_echoed() {
    let mut bridge = start(Some(HUMANS)).await;
    let before = std::fs::read(bridge.users_file()).unwrap();
    let http = reqwest::Client::new();
    let url = bridge.url();
    let routes = [
        (reqwest::Method::GET, "/v1/users/alice"),
        (reqwest::Method::PUT, "/v1/users/agent-a"),
        (reqwest::Method::DELETE, "/v1/users/alice"),
        (reqwest::Method::POST, "/v1/users/alice/verify-password"),
        (reqwest::Method::GET, "/v1/nothing"),
        (reqwest::Method::PATCH, "/v1/users/alice"),
    ];
    let near_miss = format!("{}x", bridge.token());
    let headers: [Option<String>; 5] = [
        None,
        Some(format!("Bearer {near_miss}")),
        Some(format!("Bearer  {}", bridge.token())),
        Some(format!("Basic {}", bridge.token())),
        Some(bridge.token().to_owned()),
    ];
    for (method, path) in &routes {
        for header in &headers {
            let mut request = http.request(method.clone(), format!("{url}{path}")).json(&json!({"password": PASSWORD}));
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{method} {path} with {header:?}");
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
            let text = response.text().await.unwrap();
            assert!(!text.contains(bridge.token()) && text.contains("bearer token"), "{text}");
        }
    }
    let health = http.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK, "health needs no token");
    assert_eq!(std::fs::read(bridge.users_file()).unwrap(), before, "nothing was written");
    let log = bridge.process().log();
    assert!(!log.contains(bridge.token()) && !log.contains(PASSWORD), "{log}");
}

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_changes_nothing() {
    let bridge = start(Some(HUMANS)).await;
    let client = Client::of(&bridge);
    let before = std::fs::read(bridge.users_file()).unwrap();
    let good = json!({"displayname": "A", "email": "a@example.com", "groups": [], "password": PASSWORD});
    let with = |key: &str, value: Json| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let cases: Vec<(&str, Option<Json>, &str)> = vec![
        ("/v1/users/Agent", Some(good.clone()), "user name \"Agent\" is not accepted"),
        ("/v1/users/-a", Some(good.clone()), "is not accepted"),
        ("/v1/users/a%2Fb", Some(good.clone()), "is not accepted"),
        ("/v1/users/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Some(good.clone()), "1 to 64"),
        ("/v1/users/a", Some(with("email", json!("not-an-address"))), "is not an e-mail address"),
        ("/v1/users/a", Some(with("email", json!("a@b c"))), "is not an e-mail address"),
        ("/v1/users/a", Some(with("displayname", json!("two\nlines"))), "control character"),
        ("/v1/users/a", Some(with("displayname", json!(""))), "displayname is empty"),
        ("/v1/users/a", Some(with("groups", json!(["ok", "not ok"]))), "group \"not ok\" is not accepted"),
        ("/v1/users/a", Some(with("groups", json!("admins"))), "the body is not"),
        ("/v1/users/a", Some(with("password", json!("short-pw"))), "shorter than 12"),
        ("/v1/users/a", Some(with("extra", json!(1))), "unknown field `extra`"),
        ("/v1/users/a", Some(json!({"displayname": "A"})), "missing field"),
        (
            "/v1/users/a",
            Some(with("groups", json!((0..40).map(|i| format!("g{i}")).collect::<Vec<_>>()))),
            "more than 32 groups",
        ),
    ];
    for (path, body, expected) in cases {
        let (status, answer) = client.call(reqwest::Method::PUT, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains(expected), "{path}: {message}");
        assert!(!message.contains("short-pw") && !message.contains(PASSWORD), "{message}");
    }
    let (status, answer) = client.verify("alice", "").await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");

    let http = reqwest::Client::new();
    let auth = format!("Bearer {}", bridge.token());
    let raw = |method: reqwest::Method, path: &str| {
        http.request(method, format!("{}{path}", bridge.url())).header("authorization", &auth)
    };
    let response = raw(reqwest::Method::PUT, "/v1/users/a")
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let response = raw(reqwest::Method::PUT, "/v1/users/a")
        .body(good.to_string())
        .header("content-type", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let huge = with("displayname", json!("x".repeat(20_000)));
    let response = raw(reqwest::Method::PUT, "/v1/users/a").json(&huge).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let response = raw(reqwest::Method::POST, "/v1/users/a").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let response = raw(reqwest::Method::GET, "/v1/users/a/verify-password").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let response = raw(reqwest::Method::GET, "/v2/users").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let answer: Json = response.json().await.unwrap();
    assert_eq!(answer["code"], json!("no_route"));
    assert!(answer["error"].as_str().unwrap().contains("no route GET /v2/users"), "{answer}");
    let (status, answer) = client.call(reqwest::Method::DELETE, "/v1/users/nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(answer, json!({"code": "unknown_user", "error": "no user nobody in the users file"}));

    assert_eq!(std::fs::read(bridge.users_file()).unwrap(), before, "nothing was written");
}

#[tokio::test]
async fn an_unusable_file_is_a_503_naming_it_and_is_never_overwritten() {
    let broken = "users:\n  alice: {displayname: [unclosed\n";
    let bridge = start(Some(broken)).await;
    let client = Client::of(&bridge);
    let path = bridge.users_file().display().to_string();
    for (status, body) in [
        client.put("agent-a", &[]).await,
        client.call(reqwest::Method::GET, "/v1/users/alice", None).await,
        client.call(reqwest::Method::DELETE, "/v1/users/alice", None).await,
        client.verify("alice", PASSWORD).await,
    ] {
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let message = body["error"].as_str().unwrap();
        assert!(message.contains(&path) && message.contains("not valid YAML"), "{message}");
    }
    assert_eq!(std::fs::read_to_string(bridge.users_file()).unwrap(), broken, "left as it was");

    // A file of the wrong shape is refused the same way.
    std::fs::write(bridge.users_file(), "users:\n  - alice\n").unwrap();
    let (status, body) = client.put("agent-a", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body["error"].as_str().unwrap().contains("`users` is not a mapping"), "{body}");

    // Fixed by hand, it works again without a restart.
    std::fs::write(bridge.users_file(), HUMANS).unwrap();
    assert_eq!(client.put("agent-a", &[]).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn concurrent_puts_all_land() {
    let bridge = start(Some(HUMANS)).await;
    let client = std::sync::Arc::new(Client::of(&bridge));
    let names: Vec<String> = (0..8).map(|i| format!("agent-{i}")).collect();
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let client = client.clone();
            let name = name.clone();
            tokio::spawn(async move { client.put(&name, &[]).await.0 })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::CREATED);
    }
    let file: Value = read_yaml(&bridge);
    for name in &names {
        assert!(file["users"][name.as_str()].is_mapping(), "{name} lost");
    }
    assert_eq!(file["users"].as_mapping().unwrap().len(), 3 + names.len());
    assert_replaced_cleanly(&bridge);
}

#[tokio::test]
async fn bad_settings_stop_the_bridge_at_start_with_a_line_naming_each() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut process = hyperhive_testkit::Process::builder(BIN)
        .env("AUTHELIA_BRIDGE_LISTEN", "localhost")
        .env("AUTHELIA_BRIDGE_USERS_FILE", "users.yml")
        .env("AUTHELIA_BRIDGE_TOKEN_FILE", &token)
        .env("AUTHELIA_BRIDGE_MANAGED_GROUP", "bad group")
        .start("bridge-bad-settings")
        .unwrap();
    let status = process.wait_exit(Duration::from_secs(20)).await.unwrap();
    assert_eq!(status.code(), Some(1));
    let log = process.log();
    for expected in [
        "AUTHELIA_BRIDGE_LISTEN \"localhost\" is not an address",
        "AUTHELIA_BRIDGE_USERS_FILE \"users.yml\" must be an absolute path",
        "readable by every user",
        "AUTHELIA_BRIDGE_MANAGED_GROUP: group \"bad group\" is not accepted",
    ] {
        assert!(log.contains(expected), "{expected:?} missing from:\n{log}");
    }
    assert!(!log.contains("0123456789abcdef"), "{log}");

    std::fs::write(&token, "").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut process = hyperhive_testkit::Process::builder(BIN)
        .env("AUTHELIA_BRIDGE_USERS_FILE", dir.path().join("missing-dir/users.yml"))
        .env("AUTHELIA_BRIDGE_TOKEN_FILE", &token)
        .start("bridge-empty-token")
        .unwrap();
    assert_eq!(process.wait_exit(Duration::from_secs(20)).await.unwrap().code(), Some(1));
    let log = process.log();
    assert!(log.contains("is empty") && log.contains("its directory does not exist"), "{log}");
}

#[tokio::test]
async fn sigterm_stops_the_bridge_cleanly() {
    let mut bridge = start(None).await;
    bridge.process().signal(hyperhive_testkit::Signal::SIGTERM).unwrap();
    let status = bridge.process().wait_exit(Duration::from_secs(20)).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(bridge.process().log().contains("stopped"));
}
