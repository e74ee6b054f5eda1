//! Setting a swarm up and checking it, as an operator does with the binaries: `swarm-controller
//! init` makes every key and credential into a directory (modes, the printed public keys, NATS
//! credentials a real nats-server running the written fragment accepts, never overwriting,
//! refusing bad names without writing), and `swarmctl doctor` checks a running swarm (all well,
//! then a hive gone stale, then NATS gone).
//!
//! The doctor tests need `cargo build -p hive-agent -p hive-c0re -p swarmctl`.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use async_nats::ConnectOptions;
use common::one_hive::{OneHive, printing_turn};
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_schedule::format_instant;
use hyperhive_testkit::{Nats, NatsJwt, wait_until};
use serde_json::Value;
use swarm_controller::secrets::SecretsKey;

const CONTROLLER: &str = env!("CARGO_BIN_EXE_swarm-controller");
const SOON: Duration = Duration::from_secs(20);

fn init(out: &Path, args: &[&str]) -> Output {
    Command::new(CONTROLLER).arg("init").arg("--out").arg(out).args(args).output().expect("swarm-controller runs")
}

/// The one line a failed command printed.
fn one_line_failure(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// Every file and directory below `dir`, with its mode and (for a file) its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u32, Option<Vec<u8>>)> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let content = if path.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            None
        } else {
            Some(std::fs::read(&path).unwrap())
        };
        all.insert(path.clone(), (mode(&path), content));
    }
    all
}

async fn connects(url: &str, creds: &Path) -> Result<(), String> {
    let client = ConnectOptions::with_credentials_file(creds)
        .await
        .map_err(|e| e.to_string())?
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    client.flush().await.map_err(|e| e.to_string())
}

#[tokio::test]
async fn init_makes_every_key_privately_says_where_each_goes_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let resolver = tempfile::tempdir().unwrap();
    let out = tmp.path().join("swarm");
    let made =
        init(&out, &["--hive", "h1:alice,bob", "--hive", "h2", "--resolver-dir", resolver.path().to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let printed = String::from_utf8(made.stdout).unwrap();

    // Every file the layout names is there: secrets 0600, their directories 0700.
    let layout: Value = serde_json::from_slice(&std::fs::read(out.join("layout.json")).unwrap()).unwrap();
    for dir in ["", "nats", "controller", "control-plane", "hives", "hives/h1", "hives/h2"] {
        assert_eq!(mode(&out.join(dir)), 0o700, "{dir}");
    }
    let files = layout["files"].as_array().unwrap();
    for file in files {
        let path = out.join(file["path"].as_str().unwrap());
        let expected = match (path.is_dir(), file["secret"].as_bool().unwrap()) {
            (true, _) => 0o700,
            (false, true) => 0o600,
            (false, false) => 0o644,
        };
        assert_eq!(mode(&path), expected, "{}", path.display());
        // What goes where is printed, and so is what the README says.
        let line = format!("-> {}: {}", file["host"].as_str().unwrap(), file["option"].as_str().unwrap());
        assert!(printed.contains(&line), "{line} in {printed}");
    }
    let named: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    for path in [
        "nats/controller.creds",
        "nats/nats-server.conf",
        "controller/swarm-secrets.key",
        "controller/swarm-deploy.key",
        "controller/store-ca.key",
        "controller/store-ca.pem",
        "controller/sso-bridge.token",
        "control-plane/agents-control.key",
        "hives/h1/h1.creds",
        "hives/h1/h1.xk",
        "hives/h1/agent-alice.creds",
        "hives/h1/agent-bob.creds",
        "hives/h2/h2.creds",
        "hives/h2/h2.xk",
    ] {
        assert!(named.contains(&path), "{path} in {named:?}");
    }
    assert_eq!(std::fs::read_to_string(out.join("README.txt")).unwrap(), printed);

    // The printed public keys are the files' own; no secret is printed.
    let deploy = layout["deploy_key"].as_str().unwrap();
    let public =
        Command::new(CONTROLLER).args(["deploy-key", "--public"]).arg(out.join("controller/swarm-deploy.key")).output();
    assert_eq!(String::from_utf8(public.unwrap().stdout).unwrap().trim(), deploy);
    assert!(printed.contains(deploy) && deploy.starts_with('V'));
    for (hive, entry) in [("h1", &layout["hives"][0]), ("h2", &layout["hives"][1])] {
        let seed = std::fs::read_to_string(out.join(format!("hives/{hive}/{hive}.xk"))).unwrap();
        let xkey = nkeys::XKey::from_seed(seed.trim()).unwrap().public_key();
        assert_eq!((entry["hive"].as_str(), entry["xkey"].as_str()), (Some(hive), Some(xkey.as_str())));
        assert!(printed.contains(&format!("services.hyperhive.swarm.hives.{hive}.xkey")));
        assert!(printed.contains(&xkey));
        assert!(!printed.contains(seed.trim()), "a seed was printed");
    }
    for secret in ["controller/swarm-secrets.key", "controller/sso-bridge.token", "nats/operator.seed"] {
        let text = std::fs::read_to_string(out.join(secret)).unwrap();
        assert!(!printed.contains(text.trim()), "{secret} was printed");
    }
    SecretsKey::load(&out.join("controller/swarm-secrets.key")).unwrap();
    // agents-control takes its key as made: it signs a code with it.
    let key = out.join("control-plane/agents-control.key");
    assert_eq!(std::fs::read(&key).unwrap().len(), 32);
    std::fs::create_dir(tmp.path().join("bucket")).unwrap();
    let code = Command::new(hyperhive_testkit::control_plane::agents_control_binary())
        .args(["code", "--host", "--name", "swarm", "--control-url", "https://control.example", "--store"])
        .arg(format!("file://{}", tmp.path().join("bucket").display()))
        .arg("--key-file")
        .arg(&key)
        .env_clear()
        .output()
        .unwrap();
    assert!(code.status.success(), "agents-control code with init's key: {}", String::from_utf8_lossy(&code.stderr));
    assert!(String::from_utf8_lossy(&code.stdout).starts_with("hhcode1"), "{code:?}");
    assert!(printed.contains("agents-control code --host --name swarm"), "how to pair the controller: {printed}");

    // The NATS credentials work on a nats-server running the fragment init wrote.
    let fragment = std::fs::read_to_string(out.join("nats/nats-server.conf")).unwrap();
    let nats = Nats::start_with_config(&fragment).await.unwrap();
    for creds in [
        "nats/controller.creds",
        "hives/h1/h1.creds",
        "hives/h2/h2.creds",
        "hives/h1/agent-alice.creds",
        "hives/h1/agent-bob.creds",
    ] {
        connects(&nats.url(), &out.join(creds)).await.unwrap_or_else(|e| panic!("{creds}: {e}"));
    }
    // The controller's credential is in the swarm account, where the streams live.
    let controller = ConnectOptions::with_credentials_file(out.join("nats/controller.creds"))
        .await
        .unwrap()
        .connect(nats.url())
        .await
        .unwrap();
    async_nats::jetstream::new(controller).query_account().await.expect("the controller's account has JetStream");

    // A second run refuses, naming what exists, and changes nothing.
    let before = snapshot(&out);
    let again = one_line_failure(&init(&out, &["--hive", "h3:carol"]));
    assert!(again.contains("exists") && again.contains(out.to_str().unwrap()), "{again}");
    assert_eq!(snapshot(&out), before);
}

#[test]
fn init_refuses_bad_input_with_one_line_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("fresh");
    for (args, needle) in [
        (vec!["--hive", "Hive1"], "invalid hive name"),
        (vec!["--hive", "h1:Alice"], "invalid agent name"),
        (vec!["--hive", "h1", "--hive", "h1"], "hive h1 is given twice"),
        (vec!["--hive", "h1:a", "--hive", "h2:a"], "agent a is given twice"),
        (vec!["--hive", "h1", "--resolver-dir", "relative/jwt"], "relative/jwt"),
    ] {
        let err = one_line_failure(&init(&fresh, &args));
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!fresh.exists(), "{args:?} left {}", fresh.display());
    }

    // An existing directory holding one of the entries init writes: named, and nothing added.
    let taken = tmp.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("notes"), "mine").unwrap();
    std::fs::create_dir(taken.join("hives")).unwrap();
    let before = snapshot(&taken);
    let err = one_line_failure(&init(&taken, &["--hive", "h1:a"]));
    assert!(err.contains(taken.join("hives").to_str().unwrap()) && err.contains("exists"), "{err}");
    assert_eq!(snapshot(&taken), before);

    // An existing directory with other files only is used, and they are left alone.
    std::fs::remove_dir(taken.join("hives")).unwrap();
    let made = init(&taken, &["--hive", "h1"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    assert_eq!(std::fs::read_to_string(taken.join("notes")).unwrap(), "mine");
    assert!(taken.join("hives/h1/h1.xk").exists());
}

fn doctor(socket: &Path, args: &[&str]) -> Output {
    Command::new(common::swarmctl_binary()).arg("--socket").arg(socket).arg("doctor").args(args).output().unwrap()
}

/// `checks` of `doctor --json`, by name: (outcome, detail).
fn checks(out: &Output) -> BTreeMap<String, (String, String)> {
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let field = |name: &str| c[name].as_str().unwrap().to_owned();
            (field("check"), (field("outcome"), field("detail")))
        })
        .collect()
}

#[tokio::test]
async fn doctor_says_all_is_well_then_names_the_stale_hive_and_fails() {
    let (mut swarm, _keys) = OneHive::start_able_to_create(&["bee"], |turns| printing_turn(turns, 1, "0"), &[]).await;
    wait_until("h1 to report bee", SOON, || async { swarm.actual_in_hive_status("bee").await }).await.unwrap();

    let well = doctor(&swarm.socket, &[]);
    let text = String::from_utf8(well.stdout.clone()).unwrap();
    assert!(well.status.success(), "{text}{}", String::from_utf8_lossy(&well.stderr));
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(text.lines().all(|l| l.starts_with("ok ")), "{text}");
    let json = doctor(&swarm.socket, &["--json"]);
    assert!(json.status.success());
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let names: Vec<&str> = report["checks"].as_array().unwrap().iter().map(|c| c["check"].as_str().unwrap()).collect();
    assert_eq!(names, ["controller", "nats", "hives", "agents", "secret store", "deploy key", "control link"]);
    assert_eq!(report["ok"], true);
    let all = checks(&json);
    assert_eq!(all["hives"].1, "1 reporting");
    assert!(all["agents"].1.starts_with("1 on the roster"), "{:?}", all["agents"]);
    assert!(all["nats"].1.contains("connected"), "{:?}", all["nats"]);

    // The hive stops; its last status is two minutes old.
    swarm.hive.kill();
    let old = format_instant(time::OffsetDateTime::now_utc() - Duration::from_secs(120));
    let status = HiveStatus {
        hive: HiveName::parse("h1").unwrap(),
        version: "test".into(),
        started_at: old.clone(),
        published_at: old,
        load: [0.0; 3],
        agents: BTreeMap::new(),
    };
    common::publish_as_hive(&swarm.nats, &status).await;
    let sick = doctor(&swarm.socket, &["--json"]);
    assert_eq!(sick.status.code(), Some(1), "{}", String::from_utf8_lossy(&sick.stdout));
    let all = checks(&sick);
    let (outcome, detail) = &all["hives"];
    assert_eq!(outcome, "problem");
    assert!(detail.starts_with("h1 is stale (last status 12"), "{detail}");
    let report: Value = serde_json::from_slice(&sick.stdout).unwrap();
    assert_eq!(report["ok"], false);
    for fine in ["controller", "nats", "secret store", "deploy key", "control link"] {
        assert_eq!(all[fine].0, "ok", "{fine}: {:?}", all[fine]);
    }
    let text = doctor(&swarm.socket, &[]);
    let line = String::from_utf8(text.stdout).unwrap().lines().find(|l| l.contains("hives")).unwrap().to_owned();
    assert!(line.starts_with("PROBLEM") && line.contains("h1 is stale"), "{line}");
    assert!(String::from_utf8_lossy(&text.stderr).contains("1 check(s) found a problem"));

    // NATS goes away: the controller still answers, and says so.
    swarm.nats.nats().stop();
    let all = wait_until("doctor to see NATS down", SOON, || async {
        let all = checks(&doctor(&swarm.socket, &["--json"]));
        (all["nats"].0 == "problem").then_some(all)
    })
    .await
    .unwrap();
    assert_eq!(all["controller"].0, "ok");
    assert!(all["nats"].1.contains("NATS connection is"), "{:?}", all["nats"]);
    for unknown in ["hives", "agents", "secret store", "deploy key", "control link"] {
        assert_eq!(all[unknown].0, "skipped", "{unknown}: {:?}", all[unknown]);
    }
}

#[tokio::test]
async fn doctor_names_the_missing_keys() {
    let nats = NatsJwt::start().await.unwrap();
    // OneHive gives the controller a deploy key; no secret store key here.
    let swarm = OneHive::start_on(nats, None, &["bee"], |turns| printing_turn(turns, 1, "0"), &[]).await;
    wait_until("h1 to report bee", SOON, || async { swarm.actual_in_hive_status("bee").await }).await.unwrap();
    let out = doctor(&swarm.socket, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let all = checks(&out);
    assert_eq!(all["secret store"].0, "problem");
    assert!(all["secret store"].1.contains("secretsKeyFile (SWARM_SECRETS_KEY_FILE)"), "{:?}", all["secret store"]);
    assert_eq!(all["deploy key"].0, "ok");
    assert_eq!(all["hives"].0, "ok");
}
