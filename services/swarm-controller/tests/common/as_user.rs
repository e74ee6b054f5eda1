//! Requests on the controller's socket as another unix user (curl run as that uid), and a
//! controller binary whose socket every user may reach: what the role tests (tests/roles.rs,
//! tests/gateway_roles.rs) need to be seen by the controller as someone other than root.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use hyperhive_testkit::{NatsJwt, Process, Tool, tool, wait_until};

/// The uid and gid of `nobody` and `nogroup`, present on every system the tests run on.
pub const NOBODY: u32 = 65534;

/// `method path` sent as `uid` with an empty body and `headers` (`Name: value`); the status and
/// the body.
pub fn request_with(socket: &Path, uid: u32, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut curl = std::process::Command::new(tool(Tool::Curl).unwrap());
    curl.uid(uid).gid(uid).args(["--silent", "--max-time", "10", "--unix-socket"]).arg(socket);
    for header in headers {
        curl.args(["--header", header]);
    }
    let out = curl
        .args(["--request", method, "--write-out", "\n%{http_code}"])
        .arg(format!("http://swarm{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or_else(|_| panic!("{method} {path}: no status from curl: {out:?}")), body.into())
}

/// `method path` sent as `uid` with an empty body; the status and the body.
pub fn request(socket: &Path, uid: u32, method: &str, path: &str) -> (u16, String) {
    request_with(socket, uid, method, path, &[])
}

/// The controller binary on `dir/run/controller.sock`, with `env` besides, its socket's
/// directory open to every user (as the socket itself is).
pub async fn controller(nats: &NatsJwt, dir: &Path, env: &[(&str, &str)]) -> Process {
    let socket = dir.join("run/controller.sock");
    let daemon = super::daemon_process(nats, &socket, env).await;
    for d in [dir, socket.parent().unwrap()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    daemon
}

/// The audit page as root, once it holds `n` entries (they are written beside the answers).
pub async fn audit_entries(socket: &Path, n: usize) -> Vec<serde_json::Value> {
    wait_until(&format!("{n} audit entries"), Duration::from_secs(10), || async {
        let (status, body) = request(socket, 0, "GET", "/api/audit?limit=50");
        assert_eq!(status, 200, "{body}");
        let page: serde_json::Value = serde_json::from_str(&body).unwrap();
        let entries = page["entries"].as_array().unwrap().clone();
        (entries.len() >= n).then_some(entries)
    })
    .await
    .unwrap()
}
