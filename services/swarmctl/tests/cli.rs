//! The swarmctl binary on its own, with no controller to talk to: what an operator sees when
//! the controller is not there or the input is wrong, before anything is sent. Driving a
//! controller is tested beside the controller (swarm-controller's `tests/`), which runs this
//! binary.

use std::process::{Command, Output};

const SWARMCTL: &str = env!("CARGO_BIN_EXE_swarmctl");

fn swarmctl(args: &[&str]) -> Output {
    Command::new(SWARMCTL)
        .env_remove("SWARM_CONTROLLER_SOCKET")
        .env_remove("SWARMCTL_VIA")
        .args(args)
        .output()
        .expect("swarmctl runs")
}

/// The one line swarmctl printed on failure.
fn failure(out: &Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[test]
fn a_controller_that_is_not_there_is_named_with_how_to_point_at_another() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("controller.sock");
    let socket = socket.to_str().unwrap();
    for args in [&["schedule", "list"][..], &["hives"], &["agents", "--json"], &["jobs"]] {
        let err = failure(&swarmctl(&[&["--socket", socket], args].concat()));
        assert_eq!(
            err.trim_end(),
            format!("swarmctl: swarm-controller is not running at {socket} (set --socket or SWARM_CONTROLLER_SOCKET)"),
            "{args:?}"
        );
    }
}

#[test]
fn input_that_cannot_make_a_request_is_refused_before_connecting() {
    // The socket does not exist: each refusal below comes before swarmctl tries it.
    let socket = "/nonexistent/controller.sock";
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "t0ken\n").unwrap();
    let token = token.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["schedule", "show", "a\nb"], "is not a schedule name or id"),
        (vec!["schedule", "rm", ""], "is not a schedule name or id"),
        (vec!["schedule", "edit", "abc"], "nothing to change"),
        (
            vec!["schedule", "add", "--name", "n", "--agent", "a", "--body", "b", "--once", "--tz", "UTC"],
            "--tz goes with --cron",
        ),
        (
            vec![
                "accounts",
                "add",
                "h1",
                "alpha",
                "matrix",
                "x/../y",
                "--url",
                "http://hs",
                "--user",
                "@a:hs",
                "--token-file",
                token,
            ],
            "is not an account name",
        ),
        (
            vec!["accounts", "add", "h1", "alpha", "github", "gh", "--user", "octo", "--token-file", token],
            "has no name",
        ),
        (vec!["accounts", "rm", "h1", "alpha", "forge", "work", "--revoke"], "matrix accounts only"),
    ] {
        let err = failure(&swarmctl(&[&["--socket", socket], &args[..]].concat()));
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("not running"), "{args:?} was sent: {err}");
    }
}

#[test]
fn doctor_without_a_controller_names_it_skips_the_rest_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("controller.sock");
    let out = swarmctl(&["--socket", socket.to_str().unwrap(), "doctor"]);
    assert_eq!(failure(&out).trim_end(), "swarmctl: 1 check(s) found a problem");
    let report = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 7, "{report}");
    assert!(lines[0].starts_with("PROBLEM") && lines[0].contains("is not running at"), "{report}");
    assert!(lines[1..].iter().all(|l| l.starts_with("skipped")), "{report}");
    let json = swarmctl(&["--socket", socket.to_str().unwrap(), "doctor", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!((report["ok"].as_bool(), report["checks"][0]["outcome"].as_str()), (Some(false), Some("problem")));
}
