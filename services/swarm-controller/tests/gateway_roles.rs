//! Roles behind the hive-gateway: the real nginx, configured as modules/hive-gateway.nix writes it
//! with SSO (`Nginx::behind_sso`) and run as `nobody`, in front of the `swarm-controller` binary
//! with `SWARM_GATEWAY_USER=nobody` and `SWARM_GATEWAY_ROLES` mapping SSO groups to roles. The SSO
//! endpoint is a stand-in answering `auth_request` as Authelia does: 200 with `Remote-User` and
//! `Remote-Groups` for a session cookie naming one of its users, 401 otherwise.
//!
//! `SWARM_SOCKET_ROLES` is unset, so any other socket user is admin: the gateway's user being
//! refused what its SSO user may not do shows the role is the SSO user's, not nginx's.
//!
//! Needs scripts/setup (nats-server, nginx, curl) and root (to run nginx and curl as `nobody`).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::as_user::{NOBODY, audit_entries, request_with};
use hyperhive_swarm_api::roles::Role;
use hyperhive_testkit::{NatsJwt, Nginx, Process};
use swarm_controller::api::routes::{ROUTES, RouteId, needed, open_at_gateway};
use warp::Filter;

/// The SSO groups' roles the controller is given.
const GATEWAY_ROLES: &str = "watchers=viewer,ops=operator,admins=admin";
/// The SSO stand-in's users and their groups.
const USERS: &[(&str, &str)] =
    &[("vera", "users,watchers"), ("otto", "watchers, ops"), ("ada", "admins"), ("eve", "users,guests")];

/// An `auth_request` endpoint as Authelia's: a `session=<user>` cookie naming one of [`USERS`]
/// is let in with its user and groups; anything else is 401. Stopped on drop.
struct SsoStandIn {
    url: String,
    server: tokio::task::JoinHandle<()>,
}

impl SsoStandIn {
    async fn start() -> SsoStandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/authz/auth-request", listener.local_addr().unwrap());
        let route = warp::header::optional::<String>("cookie").map(|cookie: Option<String>| {
            let session = cookie.as_deref().and_then(|c| c.split(';').find_map(|c| c.trim().strip_prefix("session=")));
            let builder = warp::http::Response::builder();
            match USERS.iter().find(|(user, _)| Some(*user) == session) {
                Some((user, groups)) => builder
                    .status(200)
                    .header("Remote-User", *user)
                    .header("Remote-Groups", *groups)
                    .body(String::new()),
                None => builder.status(401).body(String::new()),
            }
            .unwrap()
        });
        let server = tokio::spawn(warp::serve(route).incoming(listener).run());
        SsoStandIn { url, server }
    }
}

impl Drop for SsoStandIn {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// NATS, the controller, the SSO stand-in and nginx in front of them (stopped in that order
/// backwards: fields drop in order).
struct Gateway {
    http: reqwest::Client,
    nginx: Nginx,
    _sso: SsoStandIn,
    _daemon: Process,
    dir: tempfile::TempDir,
    _nats: NatsJwt,
}

impl Gateway {
    async fn start() -> Gateway {
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let env = [("SWARM_GATEWAY_USER", "nobody"), ("SWARM_GATEWAY_ROLES", GATEWAY_ROLES)];
        let daemon = common::as_user::controller(&nats, dir.path(), &env).await;
        let sso = SsoStandIn::start().await;
        let socket = dir.path().join("run/controller.sock");
        let nginx = Nginx::behind_sso(&socket, &sso.url, NOBODY, NOBODY).await.unwrap();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
        Gateway { _nats: nats, dir, _daemon: daemon, nginx, _sso: sso, http }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("run/controller.sock")
    }

    /// `method path` through nginx as `session`'s user (none: no session), with `headers`
    /// besides; the status, and the body unless the route answered (a feed may stream on).
    async fn send(&self, session: Option<&str>, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let method = warp::http::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.nginx.url()));
        if let Some(user) = session {
            request = request.header("Cookie", format!("session={user}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = if matches!(status, 401 | 403) { response.text().await.unwrap() } else { String::new() };
        (status, body)
    }
}

/// Every test here runs nginx and curl as `nobody`, which the Nix build sandbox cannot
/// (nix/packages.nix leaves `needs_root::` out of `cargo-tests`).
mod needs_root {
    use super::*;

    /// Each SSO user requests every route of the table through the gateway: a 403 naming the role
    /// needed and the user's exactly when its role is below the route's; a user in no mapped
    /// group is refused everything but the forge's webhook, which the gateway passes without SSO.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_sso_role_reaches_exactly_the_routes_it_allows() {
        let gateway = Gateway::start().await;
        let sso_users =
            [("vera", Some(Role::Viewer)), ("otto", Some(Role::Operator)), ("ada", Some(Role::Admin)), ("eve", None)];
        for (user, role) in sso_users {
            for route in ROUTES {
                let (method, path) = (route.method.as_str(), common::route_example(route.path));
                let (status, body) = gateway.send(Some(user), method, &path, &[]).await;
                let needs = needed(route.id);
                let what = format!("{method} {path} as {user} ({role:?})");
                if route.id == RouteId::ForgeWebhook {
                    // Unsigned: refused by the webhook itself, whoever sends it.
                    assert!(open_at_gateway(route.id));
                    assert_ne!(status, 403, "{what}: {body}");
                    continue;
                }
                assert_ne!(status, 401, "{what}: {body}");
                match role {
                    Some(role) if role >= needs => assert_ne!(status, 403, "{what}: {body}"),
                    Some(role) => {
                        assert_eq!(status, 403, "{what}: {body}");
                        assert!(
                            body.contains(&format!("needs the {needs} role; sso:{user} has {role}")),
                            "{what}: {body}"
                        );
                    }
                    None => {
                        assert_eq!(status, 403, "{what}: {body}");
                        assert!(
                            body.contains(&format!("needs the {needs} role; sso:{user} has none"))
                                && body.contains("SWARM_GATEWAY_ROLES"),
                            "{what}: {body}"
                        );
                    }
                }
            }
        }
        // Without a session nginx's auth_request refuses it; the controller never sees it.
        assert_eq!(gateway.send(None, "GET", "/api/agents", &[]).await.0, 401);
    }

    /// `Remote-User` and `Remote-Groups` a client sends are dropped by nginx (only its
    /// `auth_request` sets them) and ignored by the controller from anyone but the gateway's
    /// user; the gateway's user naming no SSO user is refused; the audit log names the SSO user.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_gateways_sso_user_is_honoured_and_the_audit_log_names_it() {
        let gateway = Gateway::start().await;
        let socket = gateway.socket();
        let forged = [("Remote-User", "ada"), ("Remote-Groups", "admins")];

        // A viewer claiming to be an admin stays the viewer.
        let (status, body) = gateway.send(Some("vera"), "PUT", "/api/secrets/TOKEN", &forged).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("needs the admin role; sso:vera has viewer"), "{body}");
        // Without a session the claim does not get past SSO.
        assert_eq!(gateway.send(None, "PUT", "/api/secrets/TOKEN", &forged).await.0, 401);
        // The webhook's location passes no SSO user: the claim reaches the controller as the
        // gateway itself, which the route serves (and refuses the unsigned delivery itself).
        let (webhook, body) = gateway.send(None, "POST", "/api/forge/webhook", &forged).await;
        assert!(webhook != 403 && !body.contains("came through the gateway"), "{webhook}: {body}");
        // An operator's change, allowed (the route answers whatever it does of a missing schedule).
        let (operated, body) = gateway.send(Some("otto"), "DELETE", "/api/schedules/nope", &[]).await;
        assert!(!matches!(operated, 401 | 403), "{operated}: {body}");

        // On the socket: the gateway's own user naming nobody is refused, naming why.
        let (status, body) = request_with(&socket, NOBODY, "PUT", "/api/secrets/TOKEN", &[]);
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("came through the gateway (nobody) with no Remote-User header"), "{body}");
        // Anyone else's headers are ignored: root stays root (admin; no secret store here: 503).
        let (status, body) = request_with(&socket, 0, "PUT", "/api/secrets/TOKEN", &["Remote-User: eve"]);
        assert_eq!(status, 503, "{body}");

        let entries = audit_entries(&socket, 5).await;
        let mut seen: Vec<(&str, &str, &str, &str, &str, u64)> = entries
            .iter()
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap_or("-");
                (
                    field("who"),
                    field("via"),
                    field("role"),
                    field("method"),
                    field("path"),
                    e["status"].as_u64().unwrap(),
                )
            })
            .collect();
        let webhook = u64::from(webhook);
        // Entries are published beside the answers, so requests a moment apart may be stored in
        // either order: compared as a set.
        seen.sort_unstable();
        let mut expected = vec![
            ("root", "socket", "admin", "PUT", "/api/secrets/TOKEN", 503),
            ("nobody", "gateway", "-", "PUT", "/api/secrets/TOKEN", 401),
            ("sso:otto", "gateway", "operator", "DELETE", "/api/schedules/nope", u64::from(operated)),
            ("nobody", "gateway", "-", "POST", "/api/forge/webhook", webhook),
            ("sso:vera", "gateway", "viewer", "PUT", "/api/secrets/TOKEN", 403),
        ];
        expected.sort_unstable();
        assert_eq!(seen, expected, "the request SSO refused never reached the controller");
    }
}
