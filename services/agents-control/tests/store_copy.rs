//! `store copy` across providers, as the real binary: moto -> directory -> SeaweedFS, and moto ->
//! SeaweedFS directly, each side with its own endpoint and keys (SeaweedFS refuses moto's keys,
//! so a side using the other's settings fails).

use agents_control::clock::SystemClock;
use agents_control::key::ControlKey;
use agents_control::{pairing, records};
use ed25519_dalek::SigningKey;
use hyperhive_control_proto::encoding;
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_object_store::Store;
use hyperhive_object_store::s3::S3Store;
use hyperhive_testkit::{S3, S3Server};
use std::process::Output;

const SEED: [u8; 32] = [0x6b; 32];

/// A child process's environment.
type Env = Vec<(String, String)>;
const PREFIX: &str = "control";

/// Runs the binary with exactly `env` (nothing inherited but PATH, so no shared AWS_* keys).
async fn agents_control(args: &[&str], env: &[(String, String)]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_agents-control"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().cloned())
        .output()
        .await
        .expect("running agents-control")
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The environment naming `s3` as one side (`FROM` or `TO`) of a copy: its own endpoint and keys.
fn side_env(side: &str, s3: &S3) -> Vec<(String, String)> {
    vec![
        (format!("AGENTS_STORE_{side}"), s3.store_url(PREFIX)),
        (format!("AGENTS_STORE_{side}_ENDPOINT"), s3.endpoint()),
        (format!("AGENTS_STORE_{side}_PATH_STYLE"), "1".into()),
        (format!("AGENTS_STORE_{side}_ACCESS_KEY_ID"), s3.access_key().into()),
        (format!("AGENTS_STORE_{side}_SECRET_ACCESS_KEY"), s3.secret_key().into()),
    ]
}

fn dir_env(side: &str, dir: &std::path::Path) -> Vec<(String, String)> {
    vec![(format!("AGENTS_STORE_{side}"), format!("file://{}", dir.display()))]
}

fn store_of(s3: &S3) -> S3Store {
    S3Store::from_client(&s3.client(), s3.bucket(), PREFIX)
}

/// Two pending codes and one paired client in `s3`, made by the binary and the pairing code.
async fn fill(s3: &S3) {
    let mut env = s3.env();
    env.extend([
        ("AGENTS_STORE".into(), s3.store_url(PREFIX)),
        ("AGENTS_CONTROL_KEY".into(), encoding::encode(&SEED)),
        ("AGENTS_CONTROL_URL".into(), "https://agents.example.com".into()),
    ]);
    let mut tokens = Vec::new();
    for kind in ["--client", "--host", "--client"] {
        let output = agents_control(&["code", kind], &env).await;
        assert!(output.status.success(), "{:?}", text(&output));
        tokens.push(text(&output).0.trim().to_owned());
    }
    let request = PairRequest::sign(&tokens[0], &SigningKey::from_bytes(&[9; 32]), "mover");
    pairing::redeem(&store_of(s3), &SystemClock, &ControlKey::from_seed(SEED), &request).await.unwrap();
    store_of(s3).create("members/copy1.json", b"{}".to_vec()).await.unwrap();
}

/// Every device and code record with its bytes.
async fn records_in(store: &dyn Store) -> Vec<(String, Vec<u8>)> {
    let mut keys = store.list(records::DEVICES).await.unwrap();
    keys.extend(store.list(records::CODES).await.unwrap());
    let mut all = Vec::new();
    for key in keys {
        let bytes = store.get(&key).await.unwrap().unwrap().bytes;
        all.push((key, bytes));
    }
    all
}

async fn copy(env: &[(String, String)]) -> Output {
    agents_control(&["store", "copy"], env).await
}

fn assert_no_secret(output: &Output, secrets: &[&str]) {
    let (stdout, stderr) = text(output);
    for secret in secrets {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "a secret key leaked: {stdout}{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_move_from_moto_through_a_directory_to_seaweedfs_each_side_with_its_own_keys() {
    let (moto, seaweed) =
        tokio::try_join!(S3::start(S3Server::Moto), S3::start(S3Server::SeaweedFs)).expect("start both servers");
    fill(&moto).await;
    let originals = records_in(&store_of(&moto)).await;
    assert_eq!(originals.len(), 3, "one device and two pending codes");
    let dir = tempfile::tempdir().unwrap();

    let to_dir = [side_env("FROM", &moto), dir_env("TO", dir.path())].concat();
    let first = copy(&to_dir).await;
    assert!(first.status.success(), "{:?}", text(&first));
    assert_eq!(text(&first).0.trim(), "copied 3, already there 0, conflicting 0");

    let to_seaweed = [dir_env("FROM", dir.path()), side_env("TO", &seaweed)].concat();
    let second = copy(&to_seaweed).await;
    assert!(second.status.success(), "{:?}", text(&second));
    assert_eq!(text(&second).0.trim(), "copied 3, already there 0, conflicting 0");
    assert_eq!(records_in(&store_of(&seaweed)).await, originals, "the records arrive byte for byte");
    assert!(store_of(&seaweed).list("members/").await.unwrap().is_empty(), "membership is not copied");

    // Straight across providers, again: nothing to do, nothing changed.
    let across = [side_env("FROM", &moto), side_env("TO", &seaweed)].concat();
    let again = copy(&across).await;
    assert!(again.status.success(), "{:?}", text(&again));
    assert_eq!(text(&again).0.trim(), "copied 0, already there 3, conflicting 0");
    assert_no_secret(&again, &[moto.secret_key(), seaweed.secret_key()]);

    // A different record at the destination is reported and left alone.
    let destination = store_of(&seaweed);
    let key = destination.list(records::DEVICES).await.unwrap().remove(0);
    let object = destination.get(&key).await.unwrap().unwrap();
    let mut record: records::DeviceRecord = records::decode(&key, &object.bytes).unwrap();
    record.name = "renamed at the destination".into();
    destination.replace(&key, records::encode(&record), &object.version).await.unwrap();
    let conflicted = copy(&across).await;
    assert!(!conflicted.status.success());
    assert!(text(&conflicted).1.contains(&key), "{:?}", text(&conflicted));
    let kept: records::DeviceRecord =
        records::decode(&key, &destination.get(&key).await.unwrap().unwrap().bytes).unwrap();
    assert_eq!(kept.name, "renamed at the destination");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_with_wrong_or_half_given_settings_is_named_in_the_error() {
    let (moto, seaweed) =
        tokio::try_join!(S3::start(S3Server::Moto), S3::start(S3Server::SeaweedFs)).expect("start both servers");
    fill(&moto).await;
    let across = [side_env("FROM", &moto), side_env("TO", &seaweed)].concat();
    let with = |changes: &[(&str, Option<&str>)]| {
        let mut env = across.clone();
        for (key, value) in changes {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push(((*key).to_owned(), (*value).to_owned()));
            }
        }
        env
    };
    let cases: Vec<(Env, &[&str])> = vec![
        // moto's keys at SeaweedFS: refused there, and the message says which side.
        (
            with(&[
                ("AGENTS_STORE_TO_ACCESS_KEY_ID", Some(moto.access_key())),
                ("AGENTS_STORE_TO_SECRET_ACCESS_KEY", Some(moto.secret_key())),
            ]),
            &["the destination (--to)", "s3://"],
        ),
        (
            with(&[("AGENTS_STORE_TO_SECRET_ACCESS_KEY", None)]),
            &["the destination (--to)", "AGENTS_STORE_TO_SECRET_ACCESS_KEY", "give both or neither"],
        ),
        (
            with(&[("AGENTS_STORE_FROM_ACCESS_KEY_ID", None)]),
            &["the source (--from)", "AGENTS_STORE_FROM_ACCESS_KEY_ID", "give both or neither"],
        ),
        (
            with(&[("AGENTS_STORE_FROM_ENDPOINT", Some("127.0.0.1:9000"))]),
            &["the source (--from)", "AGENTS_STORE_FROM_ENDPOINT", "http://"],
        ),
        (
            with(&[("AGENTS_STORE_TO_PATH_STYLE", Some("yes"))]),
            &["the destination (--to)", "AGENTS_STORE_TO_PATH_STYLE"],
        ),
        (with(&[("AGENTS_STORE_TO", Some("s3://x"))]), &["the destination (--to)", "bucket name"]),
    ];
    for (env, needles) in cases {
        let output = copy(&env).await;
        let (stdout, stderr) = text(&output);
        assert!(!output.status.success(), "{needles:?}: {stdout}");
        for needle in needles {
            assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
        }
        assert_no_secret(&output, &[moto.secret_key(), seaweed.secret_key()]);
    }
    assert!(records_in(&store_of(&seaweed)).await.is_empty(), "nothing was written by a failed copy");
}
