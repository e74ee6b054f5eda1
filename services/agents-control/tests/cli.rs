//! The command line, run as the real binary on `file://` stores (and a stand-in S3 endpoint for
//! the `store check` failure).

mod http_client;
mod standin_s3;

use agents_control::clock::SystemClock;
use agents_control::key::ControlKey;
use agents_control::{pairing, records};
use ed25519_dalek::SigningKey;
use hyperhive_control_proto::code::Code;
use hyperhive_control_proto::encoding;
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use std::path::Path;
use std::process::{Command, Output};

const SEED: [u8; 32] = [0x5a; 32];

fn agents_control(store: &Path, args: &[&str]) -> Output {
    agents_control_with(
        args,
        &[
            ("AGENTS_STORE", format!("file://{}", store.display())),
            ("AGENTS_CONTROL_KEY", encoding::encode(&SEED)),
            ("AGENTS_CONTROL_URL", "https://agents.example.com".into()),
        ],
    )
}

fn agents_control_with(args: &[&str], env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agents-control"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("running agents-control")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the key never shows, in any encoding, in the output.
fn assert_no_key(output: &Output) {
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    for form in [encoding::encode(&SEED), base64::Engine::encode(&base64::engine::general_purpose::STANDARD, SEED)] {
        assert!(!all.contains(&form), "the key leaked: {all}");
    }
    assert!(!output.stdout.windows(32).any(|w| w == SEED) && !output.stderr.windows(32).any(|w| w == SEED));
}

#[test]
fn code_prints_exactly_one_line_holding_a_code() {
    let dir = tempfile::tempdir().unwrap();
    let pin = encoding::encode(&[0x77; 32]);
    let output = agents_control(dir.path(), &["code", "--host", "--name", "build-box", "--ttl", "1h", "--pin", &pin]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    let code = Code::parse(&stdout).unwrap();
    assert_eq!(code.kind, hyperhive_control_proto::DeviceKind::Host);
    assert_eq!(code.control_url, "https://agents.example.com");
    assert_eq!(code.pin.as_deref(), Some(pin.as_str()));
    assert_eq!(code.control_public_key, ControlKey::from_seed(SEED).public_key());
    let keys = std::fs::read_dir(dir.path().join("codes")).unwrap().count();
    assert_eq!(keys, 1);
    assert_no_key(&output);
}

#[test]
fn bad_code_flags_and_settings_are_named_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (&["code", "--client", "--ttl", "25h"][..], "--ttl"),
        (&["code", "--client", "--ttl", "0s"][..], "more than zero"),
        (&["code", "--client", "--ttl", "soon"][..], "not a duration"),
        (&["code", "--client", "--host"][..], "cannot be used with"),
        (&["code"][..], "required"),
        (&["code", "--client", "--name", ""][..], "--name is empty"),
        (&["forget", "not-an-id"][..], "not a device id"),
        (&["code", "--client", "--pin", "nope"][..], "AGENTS_CONTROL_PIN"),
        (&["code", "--client", "--control-url", "ftp://x"][..], "AGENTS_CONTROL_URL"),
        (&["clients", "--store-path-style", "maybe"][..], "AGENTS_STORE_PATH_STYLE"),
    ] {
        let output = agents_control(dir.path(), args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty() || !text(&output.stdout).contains("hhcode"));
        assert_no_key(&output);
    }
    assert!(!dir.path().join("codes").exists(), "a refused command stored something");
}

#[test]
fn a_missing_store_or_a_bad_key_stops_with_one_clear_line() {
    let key = ("AGENTS_CONTROL_KEY", encoding::encode(&SEED));
    let url = ("AGENTS_CONTROL_URL", "https://a.example".to_string());
    let output = agents_control_with(&["code", "--client"], &[key.clone(), url.clone()]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("AGENTS_STORE") && stderr.contains("s3://bucket/prefix") && stderr.contains("file:///"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let store = ("AGENTS_STORE", format!("file://{}", dir.path().display()));
    let key_file = dir.path().join("short-key");
    std::fs::write(&key_file, &SEED[..31]).unwrap();
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    for (env, needle) in [
        (vec![store.clone(), url.clone()], "no control key"),
        (vec![store.clone(), url.clone(), ("AGENTS_CONTROL_KEY", "abc".into())], "AGENTS_CONTROL_KEY"),
        (vec![store.clone(), url.clone(), ("AGENTS_CONTROL_KEY", encoding::encode(&SEED[..31]))], "31 bytes"),
        (
            vec![store.clone(), url.clone(), ("AGENTS_CONTROL_KEY_FILE", key_file.display().to_string())],
            "holds 31 bytes",
        ),
        (
            vec![store.clone(), url.clone(), key.clone(), ("AGENTS_CONTROL_KEY_FILE", key_file.display().to_string())],
            "both",
        ),
        (vec![("AGENTS_STORE", "s3://".into()), url.clone(), key.clone()], "bucket name"),
        (vec![store.clone(), key.clone()], "AGENTS_CONTROL_URL"),
    ] {
        let output = agents_control_with(&["code", "--client"], &env);
        let stderr = text(&output.stderr);
        assert!(!output.status.success() && stderr.contains(needle), "{needle}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert_no_key(&output);
    }
    // A key file others can read works, with a warning that says how to fix it.
    let shared_key = dir.path().join("shared-key");
    std::fs::write(&shared_key, SEED).unwrap();
    std::fs::set_permissions(&shared_key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let output = agents_control_with(
        &["code", "--client"],
        &[store.clone(), url.clone(), ("AGENTS_CONTROL_KEY_FILE", shared_key.display().to_string())],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("chmod 600"), "{}", text(&output.stderr));
    assert_no_key(&output);
    for (flags, needle) in [
        (&["--listen", "nowhere"][..], "AGENTS_CONTROL_LISTEN"),
        (&["--name", "a\u{1}b"][..], "AGENTS_CONTROL_NAME"),
        (&["--peer-url", "cp2:8791"][..], "AGENTS_CONTROL_PEER_URL"),
        (&["--drain", "later"][..], "--drain"),
    ] {
        let args: Vec<&str> = ["serve"].iter().chain(flags).copied().collect();
        let output = agents_control_with(&args, &[store.clone(), url.clone(), key.clone()]);
        let stderr = text(&output.stderr);
        assert!(!output.status.success() && stderr.contains(needle), "{flags:?}: {stderr}");
    }
}

/// `AGENTS_CONTROL_NAME` reaches devices: a copy started with it names itself in every pair
/// response (and in every `welcome`, which `device_cli.rs` checks through `device connect`).
#[tokio::test]
async fn a_copy_tells_devices_the_name_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], hyperhive_testkit::free_port()));
    let env = [
        ("AGENTS_STORE", format!("file://{}", dir.path().display())),
        ("AGENTS_CONTROL_KEY", encoding::encode(&SEED)),
        ("AGENTS_CONTROL_URL", "https://agents.example.com".into()),
        ("AGENTS_CONTROL_NAME", "home hive".into()),
    ];
    let mut copy = hyperhive_testkit::Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &addr.to_string()])
        .envs(env.iter().cloned())
        .start("copy")
        .unwrap();
    copy.wait_for_http_ok(addr, "/readyz", std::time::Duration::from_secs(30)).await.unwrap();
    let token = text(&agents_control_with(&["code", "--host"], &env).stdout);
    let request = PairRequest::sign(token.trim(), &SigningKey::from_bytes(&[9; 32]), "box");
    let (status, paired) = http_client::post_json(addr, "/v1/pair", serde_json::to_vec(&request).unwrap()).await;
    assert_eq!((status, &paired["control_name"]), (200, &serde_json::json!("home hive")), "{paired}");
}

/// An env file line such as `AGENTS_CONTROL_KEY_FILE=` sets a variable to nothing: that is
/// "not set", never the flag given an empty value (whose error would name a flag nobody typed).
#[test]
fn an_empty_environment_variable_counts_as_unset() {
    let dir = tempfile::tempdir().unwrap();
    let store = ("AGENTS_STORE", format!("file://{}", dir.path().display()));
    let url = ("AGENTS_CONTROL_URL", "https://agents.example.com".to_string());
    let key = ("AGENTS_CONTROL_KEY", encoding::encode(&SEED));
    let empty = |name: &'static str| (name, String::new());
    let output = agents_control_with(
        &["code", "--client"],
        &[store.clone(), url.clone(), key.clone(), empty("AGENTS_CONTROL_KEY_FILE"), empty("AGENTS_CONTROL_PIN")],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(Code::parse(text(&output.stdout).trim()).unwrap().pin.is_none());
    // With only the empty variable, the error is the one for no key at all.
    let output = agents_control_with(&["code", "--client"], &[store, url, empty("AGENTS_CONTROL_KEY_FILE")]);
    let stderr = text(&output.stderr);
    assert!(!output.status.success() && stderr.contains("no control key"), "{stderr}");
    assert!(!stderr.contains("--key-file"), "{stderr}");
}

#[tokio::test]
async fn clients_hosts_and_forget_show_what_the_store_holds() {
    let dir = tempfile::tempdir().unwrap();
    let token = text(&agents_control(dir.path(), &["code", "--client"]).stdout);
    let store = FileStore::open(dir.path()).unwrap();
    let device = SigningKey::from_bytes(&[8; 32]);
    let paired = pairing::redeem(
        &store,
        &SystemClock,
        &ControlKey::from_seed(SEED),
        &PairRequest::sign(&token, &device, "my phone"),
    )
    .await
    .unwrap()
    .response;

    let table = text(&agents_control(dir.path(), &["clients"]).stdout);
    assert!(table.starts_with("ID") && table.contains("PAIRED AT"), "{table}");
    assert!(table.contains(&paired.device_id) && table.contains("my phone"), "{table}");
    let hosts: serde_json::Value =
        serde_json::from_slice(&agents_control(dir.path(), &["hosts", "--json"]).stdout).unwrap();
    assert_eq!(hosts, serde_json::json!([]));
    let clients: serde_json::Value =
        serde_json::from_slice(&agents_control(dir.path(), &["clients", "--json"]).stdout).unwrap();
    assert_eq!(clients[0]["id"], paired.device_id.as_str());

    let output = agents_control(dir.path(), &["forget", &paired.device_id]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let clients: serde_json::Value =
        serde_json::from_slice(&agents_control(dir.path(), &["clients", "--json"]).stdout).unwrap();
    assert_eq!(clients, serde_json::json!([]));
    let again = agents_control(dir.path(), &["forget", &paired.device_id]);
    assert!(!again.status.success() && text(&again.stderr).contains("already forgotten"));
}

#[test]
fn store_check_passes_on_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let output = agents_control_with(&["store", "check", "--store", &url], &[]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok ")).count(), 7, "{stdout}");
    assert!(stdout.contains("ok    delete it with a stale version, expecting refusal (412)"), "{stdout}");
    assert!(!dir.path().join("probe").exists() || std::fs::read_dir(dir.path().join("probe")).unwrap().count() == 0);
}

/// Runs `store check` against a stand-in bucket that misbehaves as `behaviour` says; the check
/// must fail. Returns the stand-in and the output.
async fn store_check_against(behaviour: standin_s3::Behaviour) -> (standin_s3::StandIn, String, String) {
    let standin = standin_s3::StandIn::start(behaviour).await;
    let env = [
        ("AGENTS_STORE_ENDPOINT", standin.endpoint()),
        ("AGENTS_STORE_PATH_STYLE", "1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
    ];
    let output = tokio::task::spawn_blocking(move || {
        agents_control_with(&["store", "check", "--store", "s3://standin/control"], &env)
    })
    .await
    .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{stdout}");
    (standin, stdout, stderr)
}

#[tokio::test]
async fn store_check_names_a_bucket_that_ignores_conditional_writes() {
    let (standin, stdout, stderr) = store_check_against(standin_s3::Behaviour::IgnoresConditions).await;
    assert!(stdout.contains("ok    create the probe object"), "{stdout}");
    assert!(stdout.contains("FAIL  create it again"), "{stdout}");
    assert!(
        stderr.contains("the bucket ignored If-None-Match") && stderr.contains("cannot be shared by several copies"),
        "{stderr}"
    );
    assert!(standin.objects().is_empty(), "the probe object was not cleaned up");
}

/// A bucket that honours If-Match on writes but not on DELETE would let a sweep or a copy remove
/// a record another copy has just rewritten.
#[tokio::test]
async fn store_check_names_a_bucket_whose_delete_ignores_if_match() {
    let (standin, stdout, stderr) = store_check_against(standin_s3::Behaviour::IgnoresDeleteConditions).await;
    assert!(stdout.contains("ok    replace it with its current version"), "{stdout}");
    assert!(stdout.contains("FAIL  delete it with a stale version"), "{stdout}");
    assert!(stderr.contains("the bucket ignored If-Match on DELETE"), "{stderr}");
    assert!(standin.objects().is_empty(), "the probe object was not cleaned up");
}

#[tokio::test]
async fn serve_refuses_to_start_on_a_bucket_that_ignores_conditional_writes() {
    // The start-up probe is the same as `store check`: a copy must not serve on a bucket that
    // cannot arbitrate between copies.
    let standin = standin_s3::StandIn::start(standin_s3::Behaviour::IgnoresConditions).await;
    let mut copy = hyperhive_testkit::Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", hyperhive_testkit::free_port())])
        .envs(standin_env(&standin))
        .env("AGENTS_CONTROL_PEER_URL", "http://127.0.0.1:1")
        .start("copy")
        .unwrap();
    let status = copy.wait_exit(std::time::Duration::from_secs(30)).await.unwrap();
    let log = copy.log();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("the bucket ignored If-None-Match") && log.contains("cannot be shared by several copies"),
        "{log}"
    );
    assert!(standin.objects().is_empty(), "the probe object was not cleaned up: {:?}", standin.objects());
}

/// A copy's settings for the store `s3://standin/control` on `standin`.
fn standin_env(standin: &standin_s3::StandIn) -> [(&'static str, String); 7] {
    [
        ("AGENTS_STORE", "s3://standin/control".to_string()),
        ("AGENTS_STORE_ENDPOINT", standin.endpoint()),
        ("AGENTS_STORE_PATH_STYLE", "1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AGENTS_CONTROL_KEY", encoding::encode(&SEED)),
        ("AGENTS_CONTROL_URL", "https://agents.example.com".into()),
    ]
}

/// Makes a code through a stand-in with the given misbehaviour; it must be made exactly once.
async fn code_is_made_once_despite(behaviour: standin_s3::Behaviour) {
    let standin = standin_s3::StandIn::start(behaviour).await;
    let env = standin_env(&standin);
    let output = tokio::task::spawn_blocking(move || agents_control_with(&["code", "--client"], &env)).await.unwrap();
    assert!(output.status.success(), "{behaviour:?}: {}", text(&output.stderr));
    let code = Code::parse(&text(&output.stdout)).unwrap();
    let objects = standin.objects();
    assert_eq!(objects.len(), 1, "{objects:?}");
    let key = format!("standin/control/{}", records::code_key(&records::code_hash(&code.secret)));
    assert!(objects.contains_key(&key), "{objects:?}");
}

#[tokio::test]
async fn a_write_that_landed_but_was_answered_with_an_error_counts_as_won() {
    // The first PUT is stored but answered 503 and the re-read fails too, so the retry meets a
    // 412 for its own write: the code must still be made, exactly once.
    code_is_made_once_despite(standin_s3::Behaviour::FirstPutLandsThenFails).await;
}

#[tokio::test]
async fn a_409_conditional_request_conflict_is_re_read_and_retried() {
    code_is_made_once_despite(standin_s3::Behaviour::FirstPutConflicts).await;
}

#[tokio::test]
async fn store_copy_is_idempotent_and_never_overwrites() {
    let (from, to) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for kind in ["--client", "--host"] {
        assert!(agents_control(from.path(), &["code", kind]).status.success());
    }
    let token = text(&agents_control(from.path(), &["code", "--client"]).stdout);
    let source = FileStore::open(from.path()).unwrap();
    pairing::redeem(
        &source,
        &SystemClock,
        &ControlKey::from_seed(SEED),
        &PairRequest::sign(&token, &SigningKey::from_bytes(&[1; 32]), "d"),
    )
    .await
    .unwrap();
    source.create("members/copy1.json", b"{}".to_vec()).await.unwrap();
    let (from_url, to_url) = (format!("file://{}", from.path().display()), format!("file://{}", to.path().display()));
    let copy = || agents_control_with(&["store", "copy", "--from", &from_url, "--to", &to_url], &[]);

    let first = copy();
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert_eq!(text(&first.stdout).trim(), "copied 3, already there 0, conflicting 0");
    let second = copy();
    assert_eq!(text(&second.stdout).trim(), "copied 0, already there 3, conflicting 0");
    let destination = FileStore::open(to.path()).unwrap();
    assert!(destination.list("members/").await.unwrap().is_empty(), "membership must not be copied");

    // A different record at the destination is reported, left alone, and fails the command.
    let key = destination.list("devices/").await.unwrap().remove(0);
    let object = destination.get(&key).await.unwrap().unwrap();
    let mut record: records::DeviceRecord = records::decode(&key, &object.bytes).unwrap();
    record.name = "renamed".into();
    destination.replace(&key, records::encode(&record), &object.version).await.unwrap();
    let third = copy();
    assert!(!third.status.success());
    assert!(text(&third.stderr).contains(&key), "{}", text(&third.stderr));
    let kept: records::DeviceRecord =
        records::decode(&key, &destination.get(&key).await.unwrap().unwrap().bytes).unwrap();
    assert_eq!(kept.name, "renamed");
    let bad = agents_control_with(&["store", "copy", "--from", "nope", "--to", &to_url], &[]);
    assert!(text(&bad.stderr).contains("--from"), "{}", text(&bad.stderr));
}

#[test]
fn pin_matches_openssl_and_refuses_non_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(hyperhive_testkit::tool(hyperhive_testkit::Tool::Openssl).unwrap())
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=test",
            "-days",
            "1",
        ])
        .arg("-keyout")
        .arg(dir.path().join("key.pem"))
        .arg("-out")
        .arg(dir.path().join("cert.pem"))
        .output()
        .expect("openssl is needed to make a test certificate");
    assert!(status.status.success(), "{}", text(&status.stderr));
    let expected = Command::new("sh")
        .arg("-c")
        .arg("openssl x509 -pubkey -noout -in \"$1\" | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=\\n'")
        .arg("sh")
        .arg(dir.path().join("cert.pem"))
        .output()
        .unwrap();
    let output = agents_control_with(&["pin", "--cert", dir.path().join("cert.pem").to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), text(&expected.stdout).trim());

    let not_pem = agents_control_with(&["pin", "--cert", dir.path().join("key.pem").to_str().unwrap()], &[]);
    assert!(!not_pem.status.success());
    assert!(
        text(&not_pem.stderr).contains("not a CERTIFICATE") || text(&not_pem.stderr).contains("no PEM certificate"),
        "{}",
        text(&not_pem.stderr)
    );
    let missing = agents_control_with(&["pin", "--cert", "/nonexistent.pem"], &[]);
    assert!(text(&missing.stderr).contains("--cert /nonexistent.pem"));
}
