//! Roles on the socket, each route against each role: the `swarm-controller` binary with
//! `SWARM_SOCKET_ROLES` giving the group `nogroup` one role at a time, and every route of the
//! route table requested as the user `nobody` (in `nogroup`) with curl. A route the role does not
//! allow is a 403 naming the role it needs; one it allows is anything but a 403. Root is admin
//! whatever the table says; a user in none of its groups has no role at all.
//!
//! Needs scripts/setup (nats-server, curl) and root (to run curl as `nobody`).

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;

use common::as_user::{NOBODY, audit_entries, request};
use hyperhive_swarm_api::roles::Role;
use hyperhive_testkit::{NatsJwt, Tool, tool};
use swarm_controller::api::routes::{ROUTES, needed};

/// A controller with `SWARM_SOCKET_ROLES` = `roles`, its socket reachable by `nobody`.
async fn controller(nats: &NatsJwt, dir: &Path, roles: &str) -> hyperhive_testkit::Process {
    common::as_user::controller(nats, dir, &[("SWARM_SOCKET_ROLES", roles)]).await
}

/// Every test here runs curl as `nobody`, which the Nix build sandbox cannot (nix/packages.nix
/// leaves `needs_root::` out of `cargo-tests`).
mod needs_root {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_role_reaches_exactly_the_routes_it_allows() {
        let nats = NatsJwt::start().await.unwrap();
        for role in Role::ALL {
            let dir = tempfile::tempdir().unwrap();
            let mut daemon = controller(&nats, dir.path(), &format!("nogroup={role}")).await;
            let socket = dir.path().join("run/controller.sock");
            for route in ROUTES {
                let (method, path) = (route.method.as_str(), common::route_example(route.path));
                let (status, body) = request(&socket, NOBODY, method, &path);
                let needs = needed(route.id);
                if role < needs {
                    assert_eq!(status, 403, "{method} {path} as {role}: {body}");
                    assert!(
                        body.contains(&format!("needs the {needs} role; nobody has {role}")),
                        "{method} {path}: {body}"
                    );
                } else {
                    assert_ne!(status, 403, "{method} {path} as {role}: {body}");
                }
            }
            // Destroying is the state route's admin-only value.
            if role == Role::Operator {
                let out = std::process::Command::new(common::swarmctl_binary())
                    .uid(NOBODY)
                    .gid(NOBODY)
                    .arg("--socket")
                    .arg(&socket)
                    .args(["agent", "state", "h1", "a", "destroyed"])
                    .output()
                    .unwrap();
                let refused = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !out.status.success() && refused.contains("destroying an agent needs the admin role"),
                    "{refused}"
                );
            }
            daemon.kill();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn root_is_admin_and_a_user_in_no_listed_group_has_no_role() {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = controller(&nats, dir.path(), "hyperhive-nobody-is-in-this=admin").await;
        let socket = dir.path().join("run/controller.sock");
        let (status, body) = request(&socket, NOBODY, "GET", "/api/agents");
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("nobody has none") && body.contains("SWARM_SOCKET_ROLES"), "{body}");
        let (status, body) = request(&socket, 0, "PUT", "/api/secrets/X");
        assert_ne!(status, 403, "root is admin: {body}");
        daemon.kill();
    }

    /// Every state-changing request is recorded with who sent it, its role and its status, refusals
    /// too, and never its body; reads are not; only admins read the log.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_audit_log_names_who_changed_what_and_holds_no_body() {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = controller(&nats, dir.path(), "nogroup=operator").await;
        let socket = dir.path().join("run/controller.sock");
        assert_eq!(request(&socket, NOBODY, "GET", "/api/agents").0, 200);
        let (status, body) = request(&socket, NOBODY, "PUT", "/api/secrets/TOKEN");
        assert_eq!(status, 403, "{body}");
        let value = "hunter2-never-in-the-log";
        let out = std::process::Command::new(tool(Tool::Curl).unwrap())
            .args(["--silent", "--unix-socket"])
            .arg(&socket)
            .args(["--request", "PUT", "--data-binary", value, "http://swarm/api/secrets/TOKEN"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let (status, body) = request(&socket, NOBODY, "GET", "/api/audit");
        assert_eq!(status, 403, "an operator does not read the log: {body}");

        let entries = audit_entries(&socket, 2).await;
        let seen: Vec<(&str, &str, &str, &str, u64)> = entries
            .iter()
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap_or("-");
                (field("who"), field("role"), field("method"), field("path"), e["status"].as_u64().unwrap())
            })
            .collect();
        // Root's PUT reached the handler (this controller has no secret store: 503).
        assert_eq!(
            seen,
            [
                ("root", "admin", "PUT", "/api/secrets/TOKEN", 503),
                ("nobody", "operator", "PUT", "/api/secrets/TOKEN", 403)
            ],
            "newest first; reads are not recorded"
        );
        let at = time::OffsetDateTime::parse(
            entries[0]["at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        );
        assert!(at.is_ok(), "{entries:?}");
        assert!(entries.iter().all(|e| e["via"] == "socket"), "{entries:?}");
        let js = async_nats::jetstream::new(nats.controller_client().await.unwrap());
        let mut stream = js.get_stream("AUDIT").await.unwrap();
        let last = stream.info().await.unwrap().state.last_sequence;
        for seq in 1..=last {
            let message = stream.direct_get(seq).await.unwrap();
            assert!(!String::from_utf8_lossy(&message.payload).contains(value), "a secret's value in the log");
        }
        let (status, body) = request(&socket, 0, "GET", "/api/audit?since=tomorrow");
        assert_eq!(status, 400, "{body}");
        daemon.kill();
    }
}
