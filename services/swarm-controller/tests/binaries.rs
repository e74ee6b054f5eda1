//! The `swarm-controller` and `swarmctl` binaries as an operator runs them.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::Duration;

use common::swarmctl_on as swarmctl;
use hyperhive_testkit::{Nats, NatsJwt, Signal, wait_until};

const CONTROLLER: &str = env!("CARGO_BIN_EXE_swarm-controller");

/// The uid and gid of `nobody`, present on every system the tests run on.
const NOBODY: u32 = 65534;

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn a_missing_or_bad_setting_stops_the_daemon_with_one_line() {
    // A state directory whose webhook secret others may read.
    let state = tempfile::tempdir().unwrap();
    let secret = state.path().join("webhook-secret");
    std::fs::write(&secret, [7u8; 32]).unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let exposed = state.path().to_str().unwrap();
    for (env, needle) in [
        (vec![], "SWARM_NATS_URL: not set"),
        (vec![("SWARM_NATS_URL", "localhost")], "SWARM_NATS_URL"),
        (vec![("SWARM_NATS_URL", "nats://127.0.0.1:1"), ("SWARM_RECONCILE_SECS", "often")], "SWARM_RECONCILE_SECS"),
        (vec![("SWARM_NATS_URL", "nats://127.0.0.1:1"), ("SWARM_HIVES_FILE", "/nonexistent.json")], "SWARM_HIVES_FILE"),
        (vec![("SWARM_NATS_URL", "nats://127.0.0.1:1"), ("SWARM_NATS_DIR", "/")], "SWARM_NATS_DIR"),
        (vec![("SWARM_NATS_URL", "nats://127.0.0.1:1"), ("SWARM_STATE_DIR", exposed)], "chmod 600"),
        (vec![("SWARM_NATS_URL", "nats://127.0.0.1:1"), ("SWARM_STATE_DIR", "/nonexistent/state")], "SWARM_STATE_DIR"),
    ] {
        let out = Command::new(CONTROLLER)
            .env_remove("SWARM_NATS_URL")
            .env_remove("SWARM_RECONCILE_SECS")
            .env_remove("SWARM_CONTROLLER_SOCKET")
            .env_remove("SWARM_HIVES_FILE")
            .env_remove("SWARM_NATS_DIR")
            .env_remove("SWARM_STATE_DIR")
            .envs(env)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(err.contains(needle), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

#[test]
fn help_explains_every_setting() {
    let help = stdout(&Command::new(CONTROLLER).arg("--help").output().unwrap());
    for var in [
        "SWARM_CONTROLLER_SOCKET",
        "SWARM_NATS_URL",
        "SWARM_NATS_CREDS",
        "SWARM_RECONCILE_SECS",
        "SWARM_HIVES_FILE",
        "SWARM_NATS_DIR",
        "SWARM_STATE_DIR",
    ] {
        assert!(help.contains(var), "{var} missing from --help");
    }
    let help = stdout(&Command::new(common::swarmctl_binary()).args(["schedule", "add", "--help"]).output().unwrap());
    for flag in [
        "--name",
        "--agent",
        "--body",
        "--body-file",
        "--anchor",
        "--every",
        "--once",
        "--cron",
        "--tz",
        "--allow-unknown-agent",
        "--paused",
        "Europe/Berlin",
        "@hourly",
    ] {
        assert!(help.contains(flag), "{flag} missing from swarmctl schedule add --help");
    }
    let help = stdout(&Command::new(common::swarmctl_binary()).args(["schedule", "show", "--help"]).output().unwrap());
    assert!(help.contains("NAME|ID") && help.contains("zone"), "{help}");
    let help = stdout(&Command::new(common::swarmctl_binary()).args(["agent", "state", "--help"]).output().unwrap());
    for word in ["HIVE", "AGENT", "--if-match", "destroyed", "final", "--json"] {
        assert!(help.contains(word), "{word} missing from swarmctl agent state --help");
    }
    // The verb's own options first, the global ones under a heading of their own.
    let (own, global) = help.split_once("Global options").expect("a heading for the global options");
    assert!(own.contains("--if-match") && !own.contains("--socket") && !own.contains("--via"), "{help}");
    assert!(global.contains("--socket") && global.contains("--via") && global.contains("--host"), "{help}");
    let help = stdout(&Command::new(common::swarmctl_binary()).arg("--help").output().unwrap());
    for verb in ["hives", "agents", "agent", "jobs", "config-prs", "issues", "--json"] {
        assert!(help.contains(verb), "{verb} missing from swarmctl --help");
    }
}

#[tokio::test]
async fn nats_init_agent_creds_and_hive_creds_make_credentials_a_server_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nats");
    let resolver = dir.path().join("resolver");
    let init = Command::new(CONTROLLER)
        .args(["nats", "init", "--out"])
        .arg(&out)
        .arg("--resolver-dir")
        .arg(&resolver)
        .output()
        .unwrap();
    assert!(stdout(&init).contains("controller credential"), "{}", stderr(&init));
    // The server starts with the fragment as init wrote it; every account minted later reaches it
    // through `nats push-accounts`, without a reload.
    let fragment = std::fs::read_to_string(out.join("nats-server.conf")).unwrap();
    assert!(fragment.contains(&format!("dir: \"{}\"", resolver.display())), "{fragment}");
    let nats = Nats::start_with_config(&fragment).await.unwrap();
    let mode = std::fs::metadata(out.join("swarm.seed")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let again = Command::new(CONTROLLER).args(["nats", "init", "--out"]).arg(&out).output().unwrap();
    assert!(!stderr(&again).is_empty(), "a second init refuses to overwrite");

    let creds = dir.path().join("a.creds");
    let mint = Command::new(CONTROLLER)
        .args(["nats", "agent-creds", "a", "--ttl", "1h", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(&creds)
        .output()
        .unwrap();
    assert!(stdout(&mint).contains("valid for 1h"));
    assert!(stdout(&mint).contains("nats push-accounts"), "a new account must reach the server: {}", stdout(&mint));
    let again = Command::new(CONTROLLER)
        .args(["nats", "agent-creds", "a", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(&creds)
        .output()
        .unwrap();
    assert!(!stdout(&again).contains("push-accounts"), "rotating a credential changes no account: {}", stdout(&again));
    assert_eq!(std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777, 0o600);
    let bad = Command::new(CONTROLLER)
        .args(["nats", "agent-creds", "A!", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(dir.path().join("x.creds"))
        .output()
        .unwrap();
    assert!(stderr(&bad).contains("invalid agent name"));
    let hive_creds = dir.path().join("h1.creds");
    let hive = Command::new(CONTROLLER)
        .args(["nats", "hive-creds", "h1", "--agent", "a", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(&hive_creds)
        .output()
        .unwrap();
    let said = stdout(&hive);
    assert!(said.contains("hive h1's credential") && said.contains("push-accounts"), "{said}");
    let bad = Command::new(CONTROLLER)
        .args(["nats", "hive-creds", "H1", "--from"])
        .arg(&out)
        .arg("--out")
        .arg(dir.path().join("x.creds"))
        .output()
        .unwrap();
    assert!(stderr(&bad).contains("invalid hive name"), "{}", stderr(&bad));
    let legacy = tempfile::tempdir().unwrap();
    std::fs::write(legacy.path().join("account.seed"), "old").unwrap();
    let refused = Command::new(CONTROLLER)
        .args(["nats", "agent-creds", "a", "--from"])
        .arg(legacy.path())
        .arg("--out")
        .arg(dir.path().join("y.creds"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("older `nats init`"), "{}", stderr(&refused));

    let push = Command::new(CONTROLLER)
        .args(["nats", "push-accounts", "--from"])
        .arg(&out)
        .args(["--url", &nats.url()])
        .output()
        .unwrap();
    assert!(push.status.success() && stdout(&push).contains("all 5 accounts"), "{}{}", stdout(&push), stderr(&push));
    for (file, inbox) in [(creds, "_INBOX_a"), (hive_creds, "_INBOX_hive-h1"), (out.join("controller.creds"), "_INBOX")]
    {
        let client = async_nats::ConnectOptions::with_credentials_file(&file)
            .await
            .unwrap()
            .custom_inbox_prefix(inbox)
            .connect(nats.url())
            .await
            .unwrap();
        client.flush().await.unwrap();
    }
}

#[tokio::test]
async fn swarmctl_drives_the_daemon() {
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/controller.sock");
    let missing = swarmctl(&socket, &["schedule", "list"]);
    assert_eq!(
        stderr(&missing).trim(),
        format!(
            "swarmctl: swarm-controller is not running at {} (set --socket or SWARM_CONTROLLER_SOCKET)",
            socket.display()
        )
    );

    let mut daemon = common::daemon_process(&nats, &socket, &[]).await;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666);

    let added = stdout(&swarmctl(
        &socket,
        &[
            "schedule",
            "add",
            "--allow-unknown-agent",
            "--name",
            "standup",
            "--agent",
            "a",
            "--agent",
            "b",
            "--body",
            "hello",
            "--anchor",
            "2026-11-30T09:00:00Z",
            "--every",
            "30m",
        ],
    ));
    let id = added.lines().next().unwrap().trim_start_matches("id:").trim().to_owned();
    assert!(added.contains("every:     30m") && added.contains("hello"), "{added}");

    let list = stdout(&swarmctl(&socket, &["schedule", "list"]));
    let header = list.lines().next().unwrap();
    for column in ["ID", "NAME", "AGENTS", "EVERY", "PAUSED", "NEXT FIRE"] {
        assert!(header.contains(column), "{list}");
    }
    // Allowed on purpose, and marked as not on the roster.
    assert!(list.contains(&id) && list.contains("a (unknown),b (unknown)") && list.contains("30m"), "{list}");

    let edited = stdout(&swarmctl(&socket, &["schedule", "edit", &id, "--body", "changed", "--once"]));
    assert!(edited.contains("changed") && edited.contains("every:     once"), "{edited}");
    assert!(stdout(&swarmctl(&socket, &["schedule", "pause", &id])).contains("paused"));
    assert!(stdout(&swarmctl(&socket, &["schedule", "list"])).contains("paused"));
    assert!(stdout(&swarmctl(&socket, &["schedule", "resume", &id])).contains("resumed"));
    let shown = stdout(&swarmctl(&socket, &["schedule", "show", &id, "--json"]));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!((shown["paused"].as_bool(), shown["body"].as_str()), (Some(false), Some("changed")));

    let stale = swarmctl(&socket, &["schedule", "edit", &id, "--name", "late", "--revision", "1"]);
    let conflict = stderr(&stale);
    assert!(conflict.contains("conflict") && conflict.contains("the current version is"), "{conflict}");
    assert!(conflict.contains(&format!("id:        {id}")) && conflict.contains("name:      standup"), "{conflict}");

    let nothing = swarmctl(&socket, &["schedule", "edit", &id]);
    assert!(stderr(&nothing).contains("nothing to change"));
    let bad = swarmctl(&socket, &["schedule", "add", "--name", "x", "--agent", "Bad", "--body", "b", "--once"]);
    assert!(stderr(&bad).contains("invalid agent name"), "the API's message is shown");
    let bad_anchor = swarmctl(&socket, &["schedule", "edit", &id, "--anchor", "soon"]);
    assert!(stderr(&bad_anchor).contains("RFC 3339"));

    assert!(stdout(&swarmctl(&socket, &["schedule", "rm", &id])).contains("removed"));
    let gone = swarmctl(&socket, &["schedule", "show", &id]);
    assert!(stderr(&gone).contains("no schedule with id"));

    // kill -9 leaves the socket behind; a new daemon replaces it and serves the same schedules.
    daemon.kill();
    assert!(socket.exists(), "the killed daemon's socket is stale");
    let mut daemon = common::daemon_process(&nats, &socket, &[]).await;
    assert!(stdout(&swarmctl(&socket, &["schedule", "list"])).contains("ID"));

    daemon.signal(Signal::SIGTERM).unwrap();
    let status = daemon.wait_exit(Duration::from_secs(10)).await.unwrap();
    assert!(status.success(), "{status:?}");
    wait_until("the socket is removed", Duration::from_secs(5), || async { (!socket.exists()).then_some(()) })
        .await
        .unwrap();
}

#[tokio::test]
async fn body_file_and_stdin_are_read() {
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/controller.sock");
    let _daemon = common::daemon_process(&nats, &socket, &[]).await;
    let file = dir.path().join("prompt.txt");
    std::fs::write(&file, "from a file\n").unwrap();
    let out = stdout(&swarmctl(
        &socket,
        &[
            "schedule",
            "add",
            "--allow-unknown-agent",
            "--name",
            "f",
            "--agent",
            "a",
            "--body-file",
            file.to_str().unwrap(),
            "--every",
            "1h",
            "--json",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["body"], "from a file\n");

    let mut child = Command::new(common::swarmctl_binary())
        .arg("--socket")
        .arg(&socket)
        .args([
            "schedule",
            "add",
            "--allow-unknown-agent",
            "--name",
            "s",
            "--agent",
            "a",
            "--body-file",
            "-",
            "--once",
            "--json",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"from stdin").unwrap();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((v["body"].as_str(), v["interval"].is_null()), (Some("from stdin"), true));
    let missing =
        swarmctl(&socket, &["schedule", "add", "--name", "m", "--agent", "a", "--body-file", "/nonexistent", "--once"]);
    assert!(stderr(&missing).contains("/nonexistent"));
}

/// An error from swarmctl: one line, non-zero exit.
/// Hive h1's status, fresh, with `load`, running the declared agent `a`.
async fn publish_h1_running_a(nats: &NatsJwt, load: [f64; 3]) {
    let now = hyperhive_schedule::instant::format_instant(time::OffsetDateTime::now_utc());
    let status: hyperhive_hive_proto::status::HiveStatus = serde_json::from_value(serde_json::json!({
        "hive": "h1", "version": "0.1.0", "started_at": now, "published_at": now, "load": load,
        "agents": {"a": {"origin": "declared", "wanted": "up", "actual": "running", "since": now, "restarts": 0}},
    }))
    .unwrap();
    common::publish_as_hive(nats, &status).await;
}

fn one_line_error(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[tokio::test]
async fn swarmctl_shows_hives_and_agents_and_sets_wanted_state() {
    let nats = NatsJwt::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hives = dir.path().join("hives.json");
    std::fs::write(&hives, r#"{"h2": {}, "h1": {"description": "build box", "labels": {"gpu": "yes"}}}"#).unwrap();
    let socket = dir.path().join("run/controller.sock");
    let _daemon = common::daemon_process(&nats, &socket, &[("SWARM_HIVES_FILE", hives.to_str().unwrap())]).await;

    let table = stdout(&swarmctl(&socket, &["hives"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["NAME", "DESCRIPTION", "LABELS", "XKEY"]);
    assert!(lines[1].starts_with("h1") && lines[1].contains("build box") && lines[1].contains("gpu=yes"), "{table}");
    assert!(lines[2].starts_with("h2"), "{table}");
    let raw: serde_json::Value = serde_json::from_str(&stdout(&swarmctl(&socket, &["hives", "--json"]))).unwrap();
    assert_eq!(raw[0]["name"], "h1");

    publish_h1_running_a(&nats, [0.5, 0.25, 0.0]).await;
    let table = stdout(&swarmctl(&socket, &["hives", "status"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["HIVE", "STATE", "AGE", "VERSION", "LOAD", "AGENTS"]);
    assert!(lines[1].starts_with("h1") && lines[1].contains("fresh") && lines[1].contains("0.50 0.25 0.00"), "{table}");
    assert!(lines[2].starts_with("h2") && lines[2].contains("never"), "{table}");
    let one: serde_json::Value =
        serde_json::from_str(&stdout(&swarmctl(&socket, &["hives", "status", "h1", "--json"]))).unwrap();
    assert_eq!((one["hive"].as_str(), one["stale"].as_bool()), (Some("h1"), Some(false)));
    assert!(one_line_error(&swarmctl(&socket, &["hives", "status", "h9"])).contains("no hive h9"));

    let agents = wait_until("the roster to list a", Duration::from_secs(10), || async {
        let table = stdout(&swarmctl(&socket, &["agents"]));
        table.lines().any(|l| l.starts_with("a ")).then_some(table)
    })
    .await
    .unwrap();
    let header: Vec<&str> = agents.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "HIVE", "ORIGIN", "WANTED", "ACTUAL", "RESTARTS", "TURN", "LAST", "LABELS"]);
    let row: Vec<&str> = agents.lines().nth(1).unwrap().split_whitespace().collect();
    // The hive reports no turn for it, it has finished none and has no labels.
    assert_eq!(row, ["a", "h1", "declared", "up", "(default)", "running", "0", "-", "-", "-"]);

    let set = stdout(&swarmctl(&socket, &["agent", "state", "h1", "a", "paused"]));
    assert!(set.starts_with("h1/a: wanted state paused (revision ") && set.contains("set by swarmctl"), "{set}");
    let raw: serde_json::Value = serde_json::from_str(&stdout(&swarmctl(&socket, &["agents", "--json"]))).unwrap();
    assert_eq!(raw[0]["wanted"]["set_by"], format!("swarmctl@{}", common::this_user()));
    let revision = raw[0]["wanted"]["revision"].as_u64().unwrap();
    let moved =
        stdout(&swarmctl(&socket, &["agent", "state", "h1", "a", "up", "--if-match", &revision.to_string(), "--json"]));
    let moved: serde_json::Value = serde_json::from_str(&moved).unwrap();
    assert_eq!(moved["state"], "up");
    // The agent's name alone: its hive is read from the roster.
    let set = stdout(&swarmctl(&socket, &["agent", "state", "a", "paused"]));
    assert!(set.starts_with("h1/a: wanted state paused (revision "), "{set}");
    let unknown = stderr(&swarmctl(&socket, &["agent", "state", "zz", "up"]));
    assert!(unknown.contains("no agent zz on the roster"), "{unknown}");
    let too_many = stderr(&swarmctl(&socket, &["agent", "state", "h1", "a", "up", "now"]));
    assert!(too_many.contains("[HIVE] AGENT STATE"), "{too_many}");

    let stale = one_line_error(&swarmctl(&socket, &["agent", "state", "h1", "a", "offline", "--if-match", "1"]));
    assert!(stale.contains("If-Match"), "{stale}");
    assert!(one_line_error(&swarmctl(&socket, &["agent", "state", "h1", "zz", "up"])).contains("no agent zz"));
    let destroy = one_line_error(&swarmctl(&socket, &["agent", "state", "h1", "a", "destroyed"]));
    assert!(destroy.contains("SWARM_NATS_DIR"), "{destroy}");
    let bad = stderr(&swarmctl(&socket, &["agent", "state", "h1", "a", "running"]));
    assert!(bad.contains("up, offline, paused, destroyed"), "{bad}");
    let bad = stderr(&swarmctl(&socket, &["agent", "state", "H1", "a", "up"]));
    assert!(bad.contains("invalid hive name"), "{bad}");
}

/// Tests the Nix build sandbox cannot run (nix/packages.nix leaves `needs_root::` out of
/// `cargo-tests`): they run a program as another user.
mod needs_root {
    use super::*;

    #[tokio::test]
    async fn swarmctl_run_by_another_user_is_recorded_as_that_user() {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let hives = dir.path().join("hives.json");
        std::fs::write(&hives, r#"{"h1": {}}"#).unwrap();
        let socket = dir.path().join("run/controller.sock");
        let _daemon = common::daemon_process(&nats, &socket, &[("SWARM_HIVES_FILE", hives.to_str().unwrap())]).await;
        publish_h1_running_a(&nats, [0.0, 0.0, 0.0]).await;
        wait_until("the roster to list a", Duration::from_secs(10), || async {
            stdout(&swarmctl(&socket, &["agents"])).lines().any(|l| l.starts_with("a ")).then_some(())
        })
        .await
        .unwrap();

        // The kernel names the socket's peer: nobody is recorded as nobody, whatever it claims.
        for dir in [dir.path().to_owned(), socket.parent().unwrap().to_owned()] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let as_nobody = Command::new(common::swarmctl_binary())
            .uid(NOBODY)
            .gid(NOBODY)
            .arg("--socket")
            .arg(&socket)
            .args(["agent", "state", "h1", "a", "paused", "--json"])
            .output()
            .unwrap();
        let by_nobody: serde_json::Value = serde_json::from_str(&stdout(&as_nobody)).unwrap();
        assert_eq!(by_nobody["set_by"], "swarmctl@nobody");
        assert_eq!(by_nobody["state"], "paused");
    }
}
