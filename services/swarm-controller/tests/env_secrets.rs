//! Secret variables end to end (docs/swarm/secrets.md, "Secret variables"): the swarm-controller
//! binary with its secret store, hive `h1` run by the hive-c0re binary (process runner) with real
//! hive-agents `alpha` and `beta`, on a JWT-mode nats-server. A variable set through the socket
//! is in the next turn's environment, a rotation reaches the next turn of the running agent, an
//! agent's own value wins over the swarm's default and removing it falls back on the default; no
//! value shows in a log, an API answer, the raw bucket, a process's arguments, another agent's
//! turn or a file another user can read; neither another hive's nor an agent's credential reaches
//! one; and bad input is refused with nothing stored.
//! Needs `cargo build -p hive-agent -p hive-c0re -p swarmctl`.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use common::one_hive::OneHive;
use futures::StreamExt;
use http_body_util::Full;
use hyper::Request;
use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::deploy::{DeployError, open};
use hyperhive_hive_proto::env_secrets;
use hyperhive_hive_proto::signing::PinnedKeys;
use hyperhive_testkit::{NatsJwt, wait_until};
use nkeys::XKey;
use serde_json::Value;
use swarm_controller::secrets::SecretsKey;
use swarmctl::client;
use tokio::io::AsyncWriteExt;

const SOON: Duration = Duration::from_secs(30);
const BUCKET: &str = "swarm-secrets";

/// Appends `<todo body> <$API_TOKEN>` (and ` <$FROM_FILE>` when set) to the agent's turns file.
fn env_turn(turns: &Path) -> String {
    format!(
        "body=$(cat); printf '%s %s%s\\n' \"$body\" \"${{API_TOKEN:-unset}}\" \"${{FROM_FILE:+ $FROM_FILE}}\" >> {}",
        turns.display()
    )
}

/// A value no other text of the run holds by chance.
fn value(label: &str) -> String {
    format!("{label}-{}", XKey::new().public_key().to_lowercase())
}

struct Stack {
    hive: OneHive,
    _key_dir: tempfile::TempDir,
    /// Every answer the API gave, for the leak check.
    answers: Vec<String>,
}

impl Stack {
    /// The stack with `agents`, `environment_file` (written here, mode 0600) declared for the
    /// first of them when given.
    async fn start(agents: &[&str], environment_file: Option<&str>) -> Stack {
        let nats = NatsJwt::start().await.unwrap();
        let key_dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        if let Some(text) = environment_file {
            let path = key_dir.path().join("first.env");
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            files.push((agents[0], path));
        }
        let key = key_dir.path().join("secrets.key");
        SecretsKey::generate().write_new(&key).unwrap();
        let nats_dir = nats.creds_dir().display().to_string();
        let key = key.display().to_string();
        let env = [("SWARM_SECRETS_KEY_FILE", key.as_str()), ("SWARM_NATS_DIR", nats_dir.as_str())];
        let hive = OneHive::start_with_environment_files(nats, None, agents, env_turn, &env, &files).await;
        let mut stack = Stack { hive, _key_dir: key_dir, answers: Vec::new() };
        for agent in agents {
            let path = format!("/api/agents/{agent}/secrets");
            wait_until(&format!("{agent} on the roster"), SOON, || async {
                let (status, _) = stack.call_quiet(Method::GET, &path, Vec::new()).await;
                (status == StatusCode::OK).then_some(())
            })
            .await
            .unwrap();
            wait_until(&format!("{agent} running"), SOON, || async {
                (stack.hive.actual_in_hive_status(agent).await.as_deref() == Some("running")).then_some(())
            })
            .await
            .unwrap();
        }
        stack.answers.clear();
        stack
    }

    async fn call_quiet(&self, method: Method, path: &str, body: Vec<u8>) -> (StatusCode, String) {
        let request = Request::builder().method(method).uri(path).body(Full::new(Bytes::from(body))).unwrap();
        let (status, bytes) = client::send(&self.hive.socket, request).await.unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One request through the socket; its answer is kept for the leak check.
    async fn call(&mut self, method: Method, path: &str, body: &[u8]) -> (StatusCode, String) {
        let answer = self.call_quiet(method, path, body.to_vec()).await;
        self.answers.push(answer.1.clone());
        answer
    }

    async fn put(&mut self, path: &str, value: &str) {
        let (status, body) = self.call(Method::PUT, path, value.as_bytes()).await;
        assert_eq!(status, StatusCode::OK, "PUT {path}: {body}");
    }

    /// `swarmctl ARGS` with `stdin` on its standard input: (success, stdout, stderr).
    async fn swarmctl(&mut self, args: &[&str], stdin: &[u8]) -> (bool, String, String) {
        let mut child = tokio::process::Command::new(common::swarmctl_binary())
            .arg("--socket")
            .arg(&self.hive.socket)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin).await.unwrap();
        drop(input);
        let out = child.wait_with_output().await.unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        self.answers.push(text(&out.stdout));
        self.answers.push(text(&out.stderr));
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }

    fn agent_dir(&self, agent: &str) -> PathBuf {
        self.hive.path("h1.state").join("agents").join(agent)
    }

    fn env_file(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("secrets").join(env_secrets::ENV_FILE)
    }

    /// Waits until `agent`'s env file on the hive gives API_TOKEN `expected` (`None`: unset).
    async fn wait_env(&self, agent: &str, expected: Option<&str>) {
        let file = self.env_file(agent);
        wait_until(&format!("{agent}'s env file updated"), SOON, || async {
            let vars = env_secrets::parse(&std::fs::read(&file).ok()?).ok()?;
            (vars.get("API_TOKEN").map(String::as_str) == expected).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Gives `agent` the todo `id` and waits for its turn's line: `<id> <API_TOKEN>`.
    async fn turn_sees(&self, agent: &str, id: &str) -> String {
        let todo = serde_json::json!({"id": id, "source": "test", "body": id}).to_string();
        self.hive.js.publish(format!("todo.{agent}"), todo.into()).await.unwrap().await.unwrap();
        wait_until(&format!("{agent}'s turn {id}"), SOON, || async {
            let turns = self.hive.turns(agent);
            turns.lines().find_map(|l| l.strip_prefix(&format!("{id} ")).map(str::to_owned))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
    }

    fn agent_pid(&self, agent: &str) -> String {
        std::fs::read_to_string(self.agent_dir(agent).join("pid")).unwrap()
    }

    /// Every stored message of `swarm-secrets`, raw, as the stream holds it.
    async fn raw_bucket(&self) -> Vec<Vec<u8>> {
        let mut stream = self.hive.js.get_stream(format!("KV_{BUCKET}")).await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        let mut raw = Vec::new();
        for seq in 1..=last {
            if let Ok(message) = stream.get_raw_message(seq).await {
                raw.push(message.payload.to_vec());
            }
        }
        raw
    }
}

fn assert_absent_bytes(secrets: &[String], what: &str, bytes: &[u8]) {
    for secret in secrets {
        let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
        assert!(!found, "a secret ({} characters) appears in {what}", secret.len());
    }
}

/// Every process's arguments on this machine.
fn all_cmdlines() -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| {
            Some((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path().join("cmdline")).ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_reaches_the_next_turn_and_nowhere_else() {
    // alpha is declared with an environment file of the host's (systemd syntax); a line naming
    // a variable processes depend on is left out.
    let (file_token, file_only) = (value("file-token"), value("file-only"));
    let file = format!("# the host's\nAPI_TOKEN={file_token}\nFROM_FILE=\"{file_only}\"\nLD_PRELOAD=/tmp/evil.so\n");
    let mut s = Stack::start(&["alpha", "beta"], Some(&file)).await;
    let (default, own_1, own_2) = (value("default"), value("alpha-one"), value("alpha-two"));
    let secrets = [default.clone(), own_1.clone(), own_2.clone(), file_token.clone(), file_only.clone()];

    // Before anything is set through the API: the environment file's variables, and nothing for
    // beta.
    assert_eq!(s.turn_sees("alpha", "t0").await, format!("{file_token} {file_only}"));
    assert_eq!(s.turn_sees("beta", "t0").await, "unset");
    let hive_log = s.hive.hive.log();
    assert!(
        hive_log.contains("environment file is left out") && hive_log.contains("LD_PRELOAD"),
        "the refused line is named: {}",
        s.hive.hive.log_tail(20)
    );

    // A default for every agent through swarmctl (value on stdin, with the newline echo adds),
    // an own value for alpha through the socket.
    let (ok, out, err) = s.swarmctl(&["secret", "set", "API_TOKEN"], format!("{default}\n").as_bytes()).await;
    assert!(ok, "swarmctl secret set: {err}");
    assert!(out.contains("API_TOKEN set"), "{out}");
    s.put("/api/agents/alpha/secrets/API_TOKEN", &own_1).await;
    s.wait_env("alpha", Some(&own_1)).await;
    s.wait_env("beta", Some(&default)).await;
    let pid = s.agent_pid("alpha");
    assert_eq!(
        s.turn_sees("alpha", "t1").await,
        format!("{own_1} {file_only}"),
        "the agent's own value wins over the default and the environment file; the file's other variable stays"
    );
    assert_eq!(s.turn_sees("beta", "t1").await, default, "beta gets the default, never alpha's value");

    let (status, listing) = s.call(Method::GET, "/api/agents/alpha/secrets", b"").await;
    assert_eq!(status, StatusCode::OK, "{listing}");
    let listing: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(listing.as_array().unwrap().len(), 1, "{listing}");
    assert_eq!((listing[0]["name"].as_str(), listing[0]["from"].as_str()), (Some("API_TOKEN"), Some("agent")));
    assert!(listing[0]["set_at"].as_str().unwrap().ends_with('Z'), "{listing}");
    let (ok, table, err) = s.swarmctl(&["secret", "list", "--agent", "beta"], b"").await;
    assert!(ok && table.contains("API_TOKEN") && table.contains("swarm"), "{table}{err}");

    // Rotation reaches the next turn of the running agent: no restart, so nothing is lost.
    s.put("/api/agents/alpha/secrets/API_TOKEN", &own_2).await;
    s.wait_env("alpha", Some(&own_2)).await;
    assert_eq!(s.turn_sees("alpha", "t2").await, format!("{own_2} {file_only}"));
    assert_eq!(s.agent_pid("alpha"), pid, "the agent was not restarted");

    // Removing alpha's own value falls back on the default.
    let (ok, _, err) = s.swarmctl(&["secret", "rm", "--agent", "alpha", "API_TOKEN"], b"").await;
    assert!(ok, "swarmctl secret rm: {err}");
    s.wait_env("alpha", Some(&default)).await;
    assert_eq!(s.turn_sees("alpha", "t3").await, format!("{default} {file_only}"));
    let (_, listing) = s.call(Method::GET, "/api/agents/alpha/secrets", b"").await;
    assert!(listing.contains("\"from\":\"swarm\""), "{listing}");
    assert_eq!(s.agent_pid("alpha"), pid, "the agent was not restarted");

    // The env file is the agent's user's alone (here every agent runs as the test's user; under
    // systemd each has its own), in a directory no one else can enter.
    let uid = std::fs::metadata(s.hive.path("h1.state")).unwrap().uid();
    for agent in ["alpha", "beta"] {
        let file = std::fs::symlink_metadata(s.env_file(agent)).unwrap();
        assert!(file.file_type().is_file(), "a regular file");
        assert_eq!(file.permissions().mode() & 0o777, 0o600, "{agent}'s env file mode");
        assert_eq!(file.uid(), uid);
        let dir = std::fs::metadata(s.env_file(agent).parent().unwrap()).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700, "{agent}'s secrets directory mode");
    }

    // Another hive's credential reaches neither the deploy messages of h1 nor their content, and
    // only h1's key opens them.
    let h2 = async_nats::ConnectOptions::with_credentials_file(s.hive.nats.mint_hive("h2", &[]).await.unwrap())
        .await
        .unwrap()
        .custom_inbox_prefix(hyperhive_nats_objects::hive_inbox_prefix(&HiveName::parse("h2").unwrap()))
        .request_timeout(Some(Duration::from_secs(2)))
        .connect(s.hive.nats.url())
        .await
        .unwrap();
    let mut h2_sees = h2.subscribe("deploy.h1").await.unwrap();
    let h2_js = async_nats::jetstream::new(h2.clone());
    let h2_consumer = h2_js
        .create_consumer_on_stream(
            async_nats::jetstream::consumer::pull::Config {
                durable_name: Some("hive-h2-sneak".into()),
                filter_subject: "deploy.h1".into(),
                ..Default::default()
            },
            "DEPLOY",
        )
        .await;
    assert!(h2_consumer.is_err(), "hive h2 made a consumer on deploy.h1");
    let controller = s.hive.nats.controller_client().await.unwrap();
    let mut on_the_wire = controller.subscribe("deploy.h1").await.unwrap();
    controller.flush().await.unwrap();
    h2.flush().await.unwrap();
    let own_3 = value("alpha-three");
    s.put("/api/agents/alpha/secrets/API_TOKEN", &own_3).await;
    let h1 = HiveName::parse("h1").unwrap();
    let h1_key = XKey::from_seed(std::fs::read_to_string(s.hive.path("h1.xkey")).unwrap().trim()).unwrap();
    let deploy_key = swarm_controller::lifecycle::deploy_key::load(&s.hive.path("deploy.key")).unwrap();
    let pinned = PinnedKeys::parse(&deploy_key.public_key()).unwrap();
    let all = [secrets.as_slice(), std::slice::from_ref(&own_3)].concat();
    let deadline = tokio::time::Instant::now() + SOON;
    let carried = loop {
        let envelope = tokio::time::timeout_at(deadline, on_the_wire.next())
            .await
            .expect("the credentials message carrying the new value within 30 s")
            .unwrap();
        assert_absent_bytes(&all, "a deploy message on the wire", &envelope.payload);
        assert_eq!(
            open(&envelope.payload, &h1, &XKey::new(), &pinned),
            Err(DeployError::BadSeal),
            "another key opens it"
        );
        let opened = open(&envelope.payload, &h1, &h1_key, &pinned).expect("h1's key opens it");
        if opened.agent.as_str() == "alpha" && opened.secrets.env.get("API_TOKEN") == Some(&own_3) {
            break opened;
        }
    };
    assert_eq!(carried.secrets.nats_creds, None, "a declared agent's credential is its host's, never sent");
    assert!(
        tokio::time::timeout(Duration::from_secs(1), h2_sees.next()).await.is_err(),
        "hive h2 received a message for h1"
    );
    s.wait_env("alpha", Some(&own_3)).await;
    let secrets = all;

    // Neither an agent's nor a hive's credential reads or watches the secret store.
    let tenants = [
        (s.hive.nats.creds_dir().join("agent-beta.creds"), "_INBOX_beta.".to_owned()),
        (s.hive.nats.creds_dir().join("hive-h1.creds"), hyperhive_nats_objects::hive_inbox_prefix(&h1)),
    ];
    for (creds, inbox) in tenants {
        let tenant = async_nats::ConnectOptions::with_credentials_file(creds)
            .await
            .unwrap()
            .custom_inbox_prefix(inbox)
            .request_timeout(Some(Duration::from_secs(2)))
            .connect(s.hive.nats.url())
            .await
            .unwrap();
        let direct = format!("$JS.API.DIRECT.GET.KV_{BUCKET}.$KV.{BUCKET}.agent.alpha.env.api_token");
        let answer = tenant.request_with_headers(direct, async_nats::HeaderMap::new(), "".into()).await;
        assert!(answer.is_err(), "a tenant's direct get of {BUCKET} was answered");
        let mut watch = tenant.subscribe(format!("$KV.{BUCKET}.>")).await.unwrap();
        tenant.flush().await.unwrap();
        s.put("/api/agents/alpha/secrets/OTHER_TOKEN", &own_3).await;
        let seen = tokio::time::timeout(Duration::from_millis(500), watch.next()).await;
        assert!(seen.is_err(), "a tenant saw a write to {BUCKET}");
    }

    // No value anywhere it must not be.
    for (what, log) in [("the controller's log", s.hive.controller.log()), ("hive-c0re's log", s.hive.hive.log())] {
        assert!(!log.is_empty(), "{what} was captured");
        common::assert_absent(&secrets, what, &log);
    }
    for agent in ["alpha", "beta"] {
        let log = std::fs::read_to_string(s.agent_dir(agent).join("agent.log")).unwrap();
        assert!(log.contains("turn finished"), "{agent}'s log was captured");
        common::assert_absent(&secrets, &format!("{agent}'s log"), &log);
        let pid = s.agent_pid(agent);
        let pid = pid.split_whitespace().next().unwrap();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert_absent_bytes(&secrets, &format!("{agent}'s hive-agent's own environment"), &environ);
    }
    for answer in &s.answers {
        common::assert_absent(&secrets, "an API answer or swarmctl's output", answer);
    }
    let raw = s.raw_bucket().await;
    assert!(raw.len() >= 3, "the bucket holds the sealed values ({} messages)", raw.len());
    for message in &raw {
        assert_absent_bytes(&secrets, "a raw message of swarm-secrets", message);
    }
    for (pid, cmdline) in all_cmdlines() {
        assert_absent_bytes(&secrets, &format!("the arguments of process {pid}"), &cmdline);
    }
    assert_eq!(s.turn_sees("beta", "t4").await, default, "beta still has only the default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_values_and_agents_are_refused_and_nothing_is_stored() {
    let mut s = Stack::start(&["alpha"], None).await;
    let refused = value("refused");
    let long_name = "A".repeat(env_secrets::MAX_NAME_LEN + 1);
    for name in [
        "lower",
        "1A",
        "A-B",
        "HIVE_AGENT_CREDS",
        "HIVE_X",
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "HOME",
        "USER",
        "SHELL",
        long_name.as_str(),
    ] {
        for path in [format!("/api/secrets/{name}"), format!("/api/agents/alpha/secrets/{name}")] {
            let (status, body) = s.call(Method::PUT, &path, refused.as_bytes()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "PUT {path}: {body}");
            let error: Value = serde_json::from_str(&body).unwrap();
            assert!(!error["error"].as_str().unwrap().is_empty(), "{body}");
        }
    }
    let (status, body) = s.call(Method::PUT, "/api/secrets/PATH", refused.as_bytes()).await;
    assert!(status == StatusCode::BAD_REQUEST && body.contains("processes depend on"), "{body}");
    let (status, body) = s.call(Method::PUT, "/api/secrets/HIVE_X", refused.as_bytes()).await;
    assert!(status == StatusCode::BAD_REQUEST && body.contains("HIVE_"), "{body}");

    let too_big = vec![b'x'; env_secrets::MAX_VALUE_BYTES + 1];
    let (status, body) = s.call(Method::PUT, "/api/agents/alpha/secrets/TOKEN", &too_big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, body) = s.call(Method::PUT, "/api/secrets/TOKEN", b"").await;
    assert!(status == StatusCode::BAD_REQUEST && body.contains("empty"), "{body}");
    let (status, body) = s.call(Method::PUT, "/api/secrets/TOKEN", b"with\0nul").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, body) = s.call(Method::PUT, "/api/agents/ghost/secrets/TOKEN", refused.as_bytes()).await;
    assert!(status == StatusCode::NOT_FOUND && body.contains("no agent ghost on the roster"), "{body}");
    let (status, body) = s.call(Method::GET, "/api/agents/ghost/secrets", b"").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = s.call(Method::DELETE, "/api/agents/alpha/secrets/TOKEN", b"").await;
    assert!(status == StatusCode::NOT_FOUND && body.contains("no secret variable TOKEN"), "{body}");

    // swarmctl refuses a value on its command line before sending anything, and an empty one.
    for args in [&["secret", "set", "TOKEN", refused.as_str()][..], &["secret", "set", &format!("TOKEN={refused}")]] {
        let (ok, _, err) = s.swarmctl(args, b"").await;
        assert!(!ok && err.contains("never takes a secret's value on its command line"), "{err}");
    }
    let (ok, _, err) = s.swarmctl(&["secret", "set", "--agent", "alpha", "TOKEN"], b"\n").await;
    assert!(!ok && err.contains("empty"), "{err}");
    let (ok, _, err) = s.swarmctl(&["secret", "set", "--agent", "ghost", "TOKEN"], refused.as_bytes()).await;
    assert!(!ok && err.contains("no agent ghost"), "{err}");
    let (ok, _, err) = s.swarmctl(&["secret", "set", "PATH"], refused.as_bytes()).await;
    assert!(!ok && err.contains("PATH"), "{err}");
    let (ok, help, _) = s.swarmctl(&["secret", "set", "--help"], b"").await;
    assert!(ok && help.contains("standard input"), "{help}");

    // Nothing was stored, and nothing of the refused value shows.
    for path in ["/api/secrets", "/api/agents/alpha/secrets"] {
        let (status, body) = s.call(Method::GET, path, b"").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "[]"), "GET {path}");
    }
    assert!(s.raw_bucket().await.is_empty(), "nothing was written to {BUCKET}");
    let refused = [refused];
    for answer in &s.answers {
        common::assert_absent(&refused, "an API answer or swarmctl's output", answer);
    }
    common::assert_absent(&refused, "the controller's log", &s.hive.controller.log());
}
