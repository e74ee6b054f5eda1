//! Two `serve` processes sharing a real S3 server from the test kit: one code redeemed through
//! both at once (on SeaweedFS, whose conditional writes are atomic), the bucket going away and
//! coming back (on SeaweedFS and moto), SIGTERM, and the key never leaking.

mod http_client;

use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::key::ControlKey;
use ed25519_dalek::SigningKey;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::encoding;
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::process::http_status;
use hyperhive_testkit::{Process, S3, S3Server, Signal, free_port, wait_until};
use std::net::SocketAddr;
use std::time::Duration;

const SEED: [u8; 32] = [0x3c; 32];
const PREFIX: &str = "control";
const START: Duration = Duration::from_secs(30);

fn common_env() -> Vec<(String, String)> {
    vec![
        ("AGENTS_CONTROL_KEY".to_string(), encoding::encode(&SEED)),
        ("AGENTS_CONTROL_URL".to_string(), "https://agents.example.com".to_string()),
        ("RUST_LOG".to_string(), "info".to_string()),
        // The race below pairs 400 times in seconds from one address, far past what the lookup
        // budget lets an unproven address do (that budget is tested in unproven_load.rs).
        ("AGENTS_CONTROL_LOOKUP_RATE".to_string(), "100000".to_string()),
        ("AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS".to_string(), "100000".to_string()),
    ]
}

fn env(s3: &S3) -> Vec<(String, String)> {
    let mut env = s3.env();
    env.push(("AGENTS_STORE".to_string(), s3.store_url(PREFIX)));
    env.extend(common_env());
    env
}

fn file_env(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut env = vec![("AGENTS_STORE".to_string(), format!("file://{}", dir.display()))];
    env.extend(common_env());
    env
}

async fn start_copy(env: &[(String, String)], name: &str) -> (Process, SocketAddr) {
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut copy = Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &addr.to_string(), "--drain", "1s"])
        .envs(env.iter().cloned())
        .start(name)
        .unwrap();
    copy.wait_for_http_ok(addr, "/readyz", START).await.unwrap();
    (copy, addr)
}

fn issuer() -> Issuer {
    Issuer { key: ControlKey::from_seed(SEED), control_url: "https://agents.example.com".into(), pin: None }
}

async fn make_code(store: &dyn Store) -> String {
    let request = CodeRequest {
        kind: DeviceKind::Client,
        name: None,
        role: None,
        ttl: codes::DEFAULT_TTL,
        made_by: "test".into(),
    };
    codes::make_code(store, &SystemClock, &issuer(), &request).await.unwrap().to_token()
}

fn pair_body(token: &str, seed: u8) -> Vec<u8> {
    let device = SigningKey::from_bytes(&[seed; 32]);
    serde_json::to_vec(&PairRequest::sign(token, &device, "racer")).unwrap()
}

/// Runs the binary with the copies' environment; returns (success, stdout, stderr).
async fn run_cli(env: &[(String, String)], args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agents-control"))
        .args(args)
        .envs(env.iter().cloned())
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Redeems 200 codes, each through both copies at once: exactly one wins every round.
async fn race_two_copies(store: &dyn Store, env: &[(String, String)]) {
    let (_a, addr_a) = start_copy(env, "copy-a").await;
    let (_b, addr_b) = start_copy(env, "copy-b").await;
    for round in 0..200u32 {
        let token = make_code(store).await;
        let (first, second) = tokio::join!(
            http_client::post_json(addr_a, "/v1/pair", pair_body(&token, 1)),
            http_client::post_json(addr_b, "/v1/pair", pair_body(&token, 2)),
        );
        let mut statuses = [first.0, second.0];
        statuses.sort();
        assert_eq!(statuses, [200, 409], "round {round}: {first:?} {second:?}");
        let loser = if first.0 == 409 { &first.1 } else { &second.1 };
        assert!(loser["error"].as_str().unwrap().contains("already used"), "round {round}: {loser}");
    }
    let (ok, stdout, _) = run_cli(env, &["clients", "--json"]).await;
    assert!(ok);
    let clients: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!(clients.len(), 200);
}

/// On SeaweedFS, with no retry: moto's conditional create is not atomic under load (see
/// docs/testing.md), so a race there proves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_code_redeemed_through_two_copies_at_once_pairs_exactly_once_on_seaweedfs() {
    let s3 = S3::start(S3Server::SeaweedFs).await.unwrap();
    let store = S3Store::from_client(&s3.client(), s3.bucket(), PREFIX);
    race_two_copies(&store, &env(&s3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_code_redeemed_through_two_copies_at_once_pairs_exactly_once_on_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    race_two_copies(&store, &file_env(dir.path())).await;
}

/// A way to take the store away and bring it back.
trait Outage {
    fn begin(&mut self);
    fn end(&mut self);
}

/// The S3 server frozen (SIGSTOP) and thawed, its data kept (moto's is only in memory).
impl Outage for S3 {
    fn begin(&mut self) {
        self.pause().unwrap();
    }
    fn end(&mut self) {
        self.resume().unwrap();
    }
}

/// The store directory moved away and back: what an unmounted volume looks like.
struct MovedAway {
    root: std::path::PathBuf,
    aside: std::path::PathBuf,
}

impl Outage for MovedAway {
    fn begin(&mut self) {
        std::fs::rename(&self.root, &self.aside).unwrap();
    }
    fn end(&mut self) {
        std::fs::rename(&self.aside, &self.root).unwrap();
    }
}

/// While the store is away: making a code, pairing and forgetting are refused with "store
/// unavailable" and /readyz fails; once it is back they all work, including the code refused
/// meanwhile. Returns the copy, for its log.
async fn refused_while_away_then_working(
    env: &[(String, String)],
    store: &dyn Store,
    outage: &mut dyn Outage,
) -> Process {
    let (copy, addr) = start_copy(env, "copy").await;
    let token = make_code(store).await;
    let spare = make_code(store).await;
    let (status, paired) = http_client::post_json(addr, "/v1/pair", pair_body(&spare, 9)).await;
    assert_eq!(status, 200, "{paired}");
    let device_id = paired["device_id"].as_str().unwrap().to_owned();

    outage.begin();
    let (ok, stdout, stderr) = run_cli(env, &["code", "--client"]).await;
    assert!(!ok && stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("store unavailable") && stderr.contains("try again"), "{stderr}");
    let (status, body) = http_client::post_json(addr, "/v1/pair", pair_body(&token, 3)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("store unavailable"), "{body}");
    let (ok, _, stderr) = run_cli(env, &["forget", &device_id]).await;
    assert!(!ok && stderr.contains("store unavailable"), "{stderr}");
    wait_until("/readyz fails", Duration::from_secs(30), || async {
        (http_status(addr, "/readyz").await.ok() == Some(503)).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(http_status(addr, "/healthz").await.unwrap(), 200);

    outage.end();
    wait_until("/readyz recovers", Duration::from_secs(30), || async {
        (http_status(addr, "/readyz").await.ok() == Some(200)).then_some(())
    })
    .await
    .unwrap();
    let (ok, stdout, stderr) = run_cli(env, &["code", "--host"]).await;
    assert!(ok, "{stderr}");
    let (status, body) = http_client::post_json(addr, "/v1/pair", pair_body(stdout.trim(), 4)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_client::post_json(addr, "/v1/pair", pair_body(&token, 3)).await;
    assert_eq!(status, 200, "the code refused during the outage still works: {body}");
    let (ok, _, stderr) = run_cli(env, &["forget", &device_id]).await;
    assert!(ok, "{stderr}");
    copy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_the_directory_is_away_changes_are_refused_and_readyz_fails_then_all_works_again() {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let store = FileStore::open(&root).unwrap();
    let mut outage = MovedAway { root: root.clone(), aside: parent.path().join("aside") };
    refused_while_away_then_working(&file_env(&root), &store, &mut outage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_the_seaweedfs_bucket_is_away_changes_are_refused_and_readyz_fails_then_all_works_again() {
    bucket_away_then_back(S3Server::SeaweedFs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn while_the_moto_bucket_is_away_changes_are_refused_and_readyz_fails_then_all_works_again() {
    bucket_away_then_back(S3Server::Moto).await;
}

async fn bucket_away_then_back(server: S3Server) {
    let mut s3 = S3::start(server).await.unwrap();
    let store = S3Store::from_client(&s3.client(), s3.bucket(), PREFIX);
    let env = env(&s3);
    let copy = refused_while_away_then_working(&env, &store, &mut s3).await;

    // The key is in no object and no log line, in any of its forms.
    let forms: Vec<Vec<u8>> = vec![
        SEED.to_vec(),
        encoding::encode(&SEED).into_bytes(),
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, SEED).into_bytes(),
    ];
    let client = s3.client();
    let listed = client.list_objects_v2().bucket(s3.bucket()).send().await.unwrap();
    assert!(!listed.contents().is_empty());
    for object in listed.contents() {
        let key = object.key().unwrap();
        let body = client.get_object().bucket(s3.bucket()).key(key).send().await.unwrap();
        let bytes = body.body.collect().await.unwrap().into_bytes();
        for form in &forms {
            assert!(!bytes.windows(form.len()).any(|w| w == &form[..]), "the key is in {key}");
        }
    }
    let log = copy.log();
    assert!(log.contains("paired a device"), "{log}");
    for form in &forms {
        assert!(!log.as_bytes().windows(form.len()).any(|w| w == &form[..]), "the key is in the log");
    }
    let _ = copy.signal(Signal::SIGTERM);
}

#[tokio::test]
async fn on_sigterm_readyz_fails_first_then_the_copy_exits_cleanly() {
    let s3 = S3::start(S3Server::Moto).await.unwrap();
    let (mut copy, addr) = start_copy(&env(&s3), "copy").await;
    let store = S3Store::from_client(&s3.client(), s3.bucket(), PREFIX);
    assert_eq!(store.list("members/").await.unwrap().len(), 1, "the copy joined");
    copy.signal(Signal::SIGTERM).unwrap();
    wait_until("/readyz fails after SIGTERM", Duration::from_secs(5), || async {
        (http_status(addr, "/readyz").await.ok() == Some(503)).then_some(())
    })
    .await
    .unwrap();
    let status = copy.wait_exit(Duration::from_secs(10)).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(copy.log().contains("stopped"));
    assert!(store.list("members/").await.unwrap().is_empty(), "the copy left");
}

#[tokio::test]
async fn a_copy_refuses_to_start_on_a_store_it_cannot_use() {
    let s3 = S3::start(S3Server::Moto).await.unwrap();
    let mut env = env(&s3);
    env.retain(|(k, _)| k != "AGENTS_STORE");
    env.push(("AGENTS_STORE".into(), "s3://no-such-bucket/x".into()));
    let mut copy = Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .envs(env)
        .start("copy")
        .unwrap();
    let status = copy.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert!(!status.success());
    assert!(copy.log().contains("failed the conditional-write check"), "{}", copy.log());
}
