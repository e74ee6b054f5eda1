//! The HTTP API served on the unix socket (docs/swarm/schedules.md, "API").
//!
//! One catch-all warp filter hands method, path, headers and body to [`App::handle`], which
//! routes by hand: every outcome, including unknown routes, wrong methods, oversized bodies and
//! wrong content types, then gets the same JSON error shape from [`ApiError`]. A schedule route
//! refuses a body that is not JSON with 415 and one over [`MAX_REQUEST_BYTES`] with 413; the state
//! route answers both with 400, as it does any malformed body.
//!
//! | route | does |
//! |---|---|
//! | `GET /`, `/app.js`, `/app.css` | the swarm UI, embedded in the binary |
//! | `GET /healthz` | 200 while NATS is connected, else 503; names the NATS server it is connected to and says whether the control link is up |
//! | `GET /api/schedules` | every schedule with its revision |
//! | `POST /api/schedules` | create (201) |
//! | `GET /api/schedules/{id}` | one schedule |
//! | `PATCH /api/schedules/{id}` | partial change; `If-Match: <revision>` gives 409 on mismatch |
//! | `DELETE /api/schedules/{id}` | remove; honours `If-Match` too |
//! | `GET /api/hives` | the hive directory, sorted by name |
//! | `GET /api/hives/status` | every hive's last status, its age and whether it is stale |
//! | `GET /api/hives/{hive}/status` | one hive's |
//! | `GET /api/agents` | the roster joined with wanted and actual state |
//! | `POST /api/agents` | create an agent: its provisioning jobs are queued (202) |
//! | `GET /api/agents/status` | the live part per agent |
//! | `PUT /api/hives/{hive}/agents/{agent}/state` | set the wanted state; honours `If-Match` |
//! | `GET /api/hives/{hive}/agents/{agent}/linked-accounts` | the agent's own matrix account and its linked ones, never a credential |
//! | `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/matrix-accounts/{name}` | link (verified with `whoami`) or unlink a matrix account; `?revoke=true` logs its token out first |
//! | `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/forge-accounts/{label}` | link (verified with `GET /api/v1/user`) or unlink a forge account |
//! | `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/github-account` | link or unlink the agent's GitHub account |
//! | `GET /api/agents/{name}/terminal` | the agent's turn output as server-sent events: history, then live; `Last-Event-ID` resumes |
//! | `GET /api/agents/{name}/turn` | the agent's turn header as server-sent events, the same way |
//! | `GET`, `PUT`, `DELETE /api/agents/{name}/icon` | the uploaded PNG, else a generated SVG (ETag, `no-cache`); upload (`image/png`, 256 KiB); remove |
//! | `GET /api/quick-links` | the configured quick links |
//! | `GET /api/jobq/graph` | the job graph: nodes and edges; `?agent=NAME` keeps one agent's |
//! | `POST /api/jobq/jobs/{id}/retry` | retry a failed job (202) |
//! | `POST /api/forge/webhook` | a forge delivery, signed (`X-Forgejo-Signature`/`X-Gitea-Signature`); 401 unsigned |
//! | `GET /api/config-prs` | every agent's config pull request |
//! | `GET /api/agents/{agent}/config-pr` | one agent's; 404 when it has none |
//! | `GET /api/issues` | open issues of the swarm's organisation, by repository and label |
//! | `GET /metrics` | Prometheus text: credential checks, renewals, failures |

mod agents;
mod create;
mod error;
mod forge;
mod hives;
mod jobq;
mod linked;
mod relay;
mod schedules;
mod ui;

use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_json_body::BodyError;
use warp::Filter;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;

pub use error::ApiError;

use hive_jobq::Jobq;
use hyperhive_hive_proto::directory::HiveDirectory;

use crate::clock::Clock;
use crate::forge::ForgeHub;
use crate::linked::account::Kind;
use crate::linked::service::LinkedAccounts;
use crate::provision::Provisioner;
use crate::reconcile::Reconciler;
use crate::relay::{RelayHub, RelayKind};
use crate::revoke::Revoker;
use crate::roster::Roster;
use crate::schedules::Definitions;
use crate::ui::icons::IconStore;
use crate::ui::quick_links::QuickLink;
use crate::wanted::WantedStore;

/// The largest body each route reads, shared with clients ([`hyperhive_swarm_api::limits`]); a
/// schedule's is `MAX_REQUEST_BYTES` here.
pub use hyperhive_swarm_api::limits::{
    MAX_CREATE_REQUEST_BYTES, MAX_LINKED_REQUEST_BYTES, MAX_SCHEDULE_REQUEST_BYTES as MAX_REQUEST_BYTES,
    MAX_STATE_REQUEST_BYTES,
};

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct App {
    /// The NATS connection (for `/healthz`).
    pub client: async_nats::Client,
    /// `schedule-definitions`.
    pub definitions: Definitions,
    /// The writer of `agent-schedules`.
    pub reconciler: Arc<Reconciler>,
    /// "Now" for `not_before` stamps, `set_at` and the age of hive statuses.
    pub clock: Arc<dyn Clock>,
    /// The controller's JetStream context (reads `hive-status`).
    pub js: async_nats::jetstream::Context,
    /// The hive directory.
    pub hives: Arc<HiveDirectory>,
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// Revokes a destroyed agent's credentials; `None` without `SWARM_NATS_DIR`.
    pub revoker: Option<Arc<Revoker>>,
    /// The job graph (in memory only).
    pub jobq: Jobq,
    /// Creates agents and keeps their credentials healthy; `None` without the secret store's
    /// key or the NATS directory.
    pub provisioner: Option<Arc<Provisioner>>,
    /// Accounts operators link to created agents; `None` when `provisioner` is.
    pub linked: Option<Arc<LinkedAccounts>>,
    /// The agents' terminals and turn headers.
    pub relay: Arc<RelayHub>,
    /// Uploaded agent icons.
    pub icons: IconStore,
    /// The UI's quick links.
    pub quick_links: Arc<Vec<QuickLink>>,
    /// The webhook secret, `config-prs` and the issue report.
    pub forge: Arc<ForgeHub>,
    /// The control link's state, when the controller is a host of a control plane (set once
    /// the link starts, after the app exists).
    pub control_link: std::sync::OnceLock<Arc<crate::remote::link::LinkStatus>>,
}

/// The warp filter serving every route.
pub fn routes(
    app: Arc<App>,
) -> impl Filter<Extract = (Response,), Error = warp::Rejection> + Clone + Send + Sync + 'static {
    // The query string, or "" when there is none (`query::raw` rejects a request without one).
    let query = warp::query::raw().or(warp::any().map(String::new)).unify();
    warp::method()
        .and(warp::path::full())
        .and(query)
        .and(warp::header::headers_cloned())
        .and(warp::body::stream())
        .then(move |method: Method, path: warp::path::FullPath, query: String, headers: HeaderMap, body| {
            let app = app.clone();
            async move {
                let outcome = app.handle(&method, path.as_str(), &query, &headers, body).await;
                outcome.unwrap_or_else(ApiError::into_response)
            }
        })
}

impl App {
    /// The response to one request, whether it came through the socket or the control plane;
    /// an error is the JSON error answer ([`ApiError::into_response`]).
    pub(crate) async fn handle<S, B>(
        &self,
        method: &Method,
        path: &str,
        query: &str,
        headers: &HeaderMap,
        body: S,
    ) -> Result<Response, ApiError>
    where
        S: Stream<Item = Result<B, warp::Error>> + Send,
        B: Buf,
    {
        if method == Method::GET
            && let Some(file) = crate::ui::assets::asset(path)
        {
            return Ok(ui::asset(file, headers));
        }
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (segments.as_slice(), method) {
            (["healthz"], &Method::GET) => Ok(self.health()),
            (["api", "schedules"], &Method::GET) => self.list().await,
            (["api", "schedules"], &Method::POST) => {
                let body = schedule_body(headers, body).await?;
                self.create(&body).await
            }
            (["api", "schedules", id], &Method::GET) => self.get(id).await,
            (["api", "schedules", id], &Method::PATCH) => {
                let body = schedule_body(headers, body).await?;
                self.patch(id, if_match(headers)?, &body).await
            }
            (["api", "schedules", id], &Method::DELETE) => self.delete(id, if_match(headers)?).await,
            (["api", "hives"], &Method::GET) => Ok(self.list_hives()),
            (["api", "hives", "status"], &Method::GET) => self.hive_statuses().await,
            (["api", "hives", hive, "status"], &Method::GET) => self.hive_status(hive).await,
            (["api", "agents"], &Method::GET) => self.list_agents().await,
            (["api", "agents"], &Method::POST) => {
                let body = create_body(headers, body).await?;
                self.create_agent(&body).await
            }
            (["metrics"], &Method::GET) => Ok(self.metrics()),
            (["api", "agents", name, "terminal"], &Method::GET) => self.relay(name, RelayKind::Terminal, headers).await,
            (["api", "agents", name, "turn"], &Method::GET) => self.relay(name, RelayKind::Turn, headers).await,
            (["api", "agents", name, "icon"], &Method::GET) => self.icon(name, headers).await,
            (["api", "agents", name, "icon"], &Method::PUT) => {
                let png = ui::icon_body(headers, body).await?;
                self.put_icon(name, &png).await
            }
            (["api", "agents", name, "icon"], &Method::DELETE) => self.delete_icon(name).await,
            (["api", "quick-links"], &Method::GET) => Ok(self.quick_links()),
            (["api", "agents", "status"], &Method::GET) => self.agents_status().await,
            (["api", "hives", hive, "agents", agent, "state"], &Method::PUT) => {
                let revision = if_match(headers)?;
                let body = state_body(headers, body).await?;
                self.set_state(hive, agent, headers, revision, &body).await
            }
            (["api", "hives", hive, "agents", agent, "linked-accounts"], &Method::GET) => {
                self.list_linked(hive, agent).await
            }
            (["api", "hives", hive, "agents", agent, rest @ ..], &Method::PUT) if linked_route(rest).is_some() => {
                let (kind, name) = linked_route(rest).expect("matched by the guard");
                let body = linked_body(headers, body).await?;
                self.put_linked(hive, agent, kind, name, &body).await
            }
            (["api", "hives", hive, "agents", agent, rest @ ..], &Method::DELETE) if linked_route(rest).is_some() => {
                let (kind, name) = linked_route(rest).expect("matched by the guard");
                self.delete_linked(hive, agent, kind, name, query).await
            }
            (["api", "jobq", "graph"], &Method::GET) => self.jobq_graph(query),
            (["api", "jobq", "jobs", id, "retry"], &Method::POST) => self.jobq_retry(id),
            (["api", "forge", "webhook"], &Method::POST) => self.forge_webhook(headers, body).await,
            (["api", "config-prs"], &Method::GET) => self.config_prs().await,
            (["api", "agents", agent, "config-pr"], &Method::GET) => self.config_pr(agent).await,
            (["api", "issues"], &Method::GET) => Ok(self.issues()),
            (["healthz"] | ["metrics"], _) => Err(not_allowed(method, path, "GET")),
            (["api", "agents"], _) => Err(not_allowed(method, path, "GET, POST")),
            (["api", "schedules"], _) => Err(not_allowed(method, path, "GET, POST")),
            (["api", "schedules", _], _) => Err(not_allowed(method, path, "GET, PATCH, DELETE")),
            (["api", "hives"] | ["api", "hives", "status"] | ["api", "hives", _, "status"], _)
            | (["api", "agents", "status"], _) => Err(not_allowed(method, path, "GET")),
            (["api", "hives", _, "agents", _, "state"], _) => Err(not_allowed(method, path, "PUT")),
            (["api", "hives", _, "agents", _, "linked-accounts"], _)
            | (["api", "agents", _, "terminal" | "turn"], _)
            | (["api", "quick-links"], _) => Err(not_allowed(method, path, "GET")),
            (["api", "agents", _, "icon"], _) => Err(not_allowed(method, path, "GET, PUT, DELETE")),
            (["api", "hives", _, "agents", _, rest @ ..], _) if linked_route(rest).is_some() => {
                Err(not_allowed(method, path, "PUT, DELETE"))
            }
            (["api", "jobq", "graph"], _) => Err(not_allowed(method, path, "GET")),
            (["api", "jobq", "jobs", _, "retry"], _) => Err(not_allowed(method, path, "POST")),
            (["api", "forge", "webhook"], _) => Err(not_allowed(method, path, "POST")),
            (["api", "config-prs"] | ["api", "agents", _, "config-pr"] | ["api", "issues"], _) => {
                Err(not_allowed(method, path, "GET"))
            }
            _ => Err(ApiError::NotFound(format!(
                "no route {method} {path}; the API serves /healthz, /metrics, /api/schedules[/{{id}}], \
                 /api/hives, /api/hives/status, /api/hives/{{hive}}/status, /api/agents, \
                 /api/agents/status, /api/agents/{{name}}/terminal, /api/agents/{{name}}/turn, \
                 /api/agents/{{name}}/icon, /api/quick-links, \
                 /api/hives/{{hive}}/agents/{{agent}}/state, \
                 /api/hives/{{hive}}/agents/{{agent}}/linked-accounts, .../matrix-accounts/{{name}}, \
                 .../forge-accounts/{{label}}, .../github-account, /api/jobq/graph, \
                 /api/jobq/jobs/{{id}}/retry, /api/forge/webhook, /api/config-prs, \
                 /api/agents/{{agent}}/config-pr and /api/issues"
            ))),
        }
    }

    fn health(&self) -> Response {
        let state = self.client.connection_state();
        if state == async_nats::connection::State::Connected {
            // The control link is reported, not judged: the swarm works without it.
            let link = self.control_link.get().map(|status| status.view());
            // On a cluster, which node this controller is connected to now.
            let server = self.client.server_info().server_name;
            json(StatusCode::OK, &serde_json::json!({"status": "ok", "nats_server": server, "control_link": link}))
        } else {
            ApiError::Unavailable(format!("NATS connection is {state}")).into_response()
        }
    }
}

fn not_allowed(method: &Method, path: &str, allowed: &str) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not allowed on {path}; use {allowed}"))
}

/// A JSON response with `status`.
fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    use warp::Reply;
    warp::reply::with_status(warp::reply::json(value), status).into_response()
}

/// A schedule's request body (create or change), provided it is declared as JSON (else 415) and
/// no larger than [`MAX_REQUEST_BYTES`] (else 413).
async fn schedule_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_REQUEST_BYTES).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(e.to_string()),
        BodyError::TooLarge { .. } => {
            ApiError::PayloadTooLarge(format!("{e}; a schedule's prompt (`body`) is at most 64 KiB"))
        }
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}

/// An agent create's body, provided it is declared as JSON and no larger than
/// [`MAX_CREATE_REQUEST_BYTES`].
async fn create_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_CREATE_REQUEST_BYTES).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(e.to_string()),
        BodyError::TooLarge { .. } => ApiError::PayloadTooLarge(format!(
            "{e}; an agent's spec holds at most a 16 KiB turn command and 64 environment values of 16 KiB"
        )),
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}

/// A state change's body, provided it is declared as JSON and no larger than
/// [`MAX_STATE_REQUEST_BYTES`]; any other is a 400 saying what to send, like a malformed one.
async fn state_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_STATE_REQUEST_BYTES)
        .await
        .map_err(|e| ApiError::BadRequest(format!("{e}; {}", agents::SEND_STATE)))
}

/// The kind and name of a linked-account route's tail: `matrix-accounts/{name}`,
/// `forge-accounts/{label}` or `github-account`.
fn linked_route<'a>(tail: &[&'a str]) -> Option<(Kind, Option<&'a str>)> {
    match tail {
        ["matrix-accounts", name] => Some((Kind::Matrix, Some(*name))),
        ["forge-accounts", label] => Some((Kind::Forge, Some(*label))),
        ["github-account"] => Some((Kind::Github, None)),
        _ => None,
    }
}

/// A linked account's body, declared as JSON (else 415) and at most
/// [`MAX_LINKED_REQUEST_BYTES`] (else 413).
async fn linked_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_LINKED_REQUEST_BYTES).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(e.to_string()),
        BodyError::TooLarge { .. } => {
            ApiError::PayloadTooLarge(format!("{e}; a linked account holds URLs, names and a token of at most 4 KiB"))
        }
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}

/// The optional `If-Match: <revision>` header (a bare or quoted number).
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(warp::http::header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    let unquoted = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    unquoted.parse::<u64>().map(Some).map_err(|_| {
        ApiError::BadRequest(format!("If-Match must be a revision number, e.g. If-Match: 12 (got {text:?})"))
    })
}
