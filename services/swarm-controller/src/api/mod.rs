//! The HTTP API served on the unix socket (docs/swarm/schedules.md, "API").
//!
//! One catch-all warp filter hands method, path, headers and body to [`App::handle`], which
//! finds the route in [`routes::ROUTES`]: every outcome, including unknown routes, wrong methods, oversized bodies and
//! wrong content types, then gets the same JSON error shape from [`ApiError`]. A schedule route
//! refuses a body that is not JSON with 415 and one over [`MAX_REQUEST_BYTES`] with 413; the state
//! route answers both with 400, as it does any malformed body.
//!
//! Every route is one row of that table; docs/reference/routes.md lists them.

mod agents;
mod audit;
mod caller;
mod create;
mod error;
mod feeds;
mod forge;
mod hives;
mod jobq;
mod linked;
mod overview;
mod page;
pub mod routes;
mod schedules;
mod secrets;
mod todos;
mod turns;
mod ui;

use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_json_body::BodyError;
use hyperhive_swarm_api::audit::{AuditEntry, Via};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use warp::Filter;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;

pub use caller::Caller;
use caller::set_by;
pub use error::ApiError;
use routes::{Found, RouteId};

use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_jobq::Jobq;

use crate::audit::AuditLog;
use crate::clock::Clock;
use crate::feeds::{FeedHub, FeedKind};
use crate::forge::ForgeHub;
use crate::lifecycle::revoke::Revoker;
use crate::lifecycle::roster::Roster;
use crate::lifecycle::state_change::StateChanger;
use crate::lifecycle::wanted::WantedStore;
use crate::linked::account::Kind;
use crate::provision::Provisioner;
use crate::provision::env_secrets::EnvSecrets;
use crate::provision::linked_accounts::LinkedAccounts;
use crate::schedules::reconcile::Reconciler;
use crate::schedules::store::Definitions;
use crate::ui::icons::IconStore;
use crate::ui::quick_links::QuickLink;
use agents::AgentsApi;
use create::CreationApi;
use feeds::FeedsApi;
use forge::ForgeApi;
use hives::HivesApi;
use jobq::JobsApi;
use linked::LinkedApi;
use overview::OverviewApi;
use schedules::SchedulesApi;
use secrets::SecretsApi;
use todos::TodosApi;
use turns::TurnsApi;
use ui::UiApi;

/// The largest body each route reads, shared with clients ([`hyperhive_swarm_api::limits`]); a
/// schedule's is `MAX_REQUEST_BYTES` here.
pub use hyperhive_swarm_api::limits::{
    MAX_CREATE_REQUEST_BYTES, MAX_LABELS_REQUEST_BYTES, MAX_LINKED_REQUEST_BYTES, MAX_PROMPT_REQUEST_BYTES,
    MAX_SCHEDULE_REQUEST_BYTES as MAX_REQUEST_BYTES, MAX_STATE_REQUEST_BYTES,
};

/// Every route family with the small state it needs; [`App::handle`] dispatches to them.
#[derive(Debug)]
pub struct App {
    /// The NATS connection (for `/healthz`).
    client: async_nats::Client,
    /// Where every state-changing request is recorded, and read back.
    audit: audit::AuditApi,
    schedules: SchedulesApi,
    hives: HivesApi,
    agents: AgentsApi,
    overview: OverviewApi,
    creation: CreationApi,
    feeds: FeedsApi,
    ui: UiApi,
    jobs: JobsApi,
    linked: LinkedApi,
    forge: ForgeApi,
    todos: TodosApi,
    turns: TurnsApi,
    secrets: SecretsApi,
    /// Which of its keys the controller was given, for `/healthz`.
    configured: Configured,
    /// The control link's state, when the controller is a host of a control plane (set once
    /// the link starts, after the app exists).
    pub control_link: std::sync::OnceLock<Arc<dyn LinkReport>>,
}

/// What the daemon hands the API: every part once, shared out to the route families.
#[derive(Debug)]
pub struct AppParts {
    /// The NATS connection (for `/healthz`).
    pub client: async_nats::Client,
    /// `schedule-definitions`.
    pub definitions: Definitions,
    /// The writer of `agent-schedules`.
    pub reconciler: Arc<Reconciler>,
    /// "Now" for `not_before` stamps, `set_at` and the age of hive statuses.
    pub clock: Arc<dyn Clock>,
    /// The controller's JetStream context (reads `hive-status` and `config-prs`).
    pub js: async_nats::jetstream::Context,
    /// The hive directory.
    pub hives: Arc<HiveDirectory>,
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// Every agent's last turn, followed from `TURNS`.
    pub last_turns: crate::work::last_turns::LastTurns,
    /// Revokes a destroyed agent's credentials; `None` without `SWARM_NATS_DIR`.
    pub revoker: Option<Arc<Revoker>>,
    /// The job graph (in memory only).
    pub jobq: Jobq,
    /// Creates agents and keeps their credentials healthy; `None` without the secret store's
    /// key or the NATS directory.
    pub provisioner: Option<Arc<Provisioner>>,
    /// Accounts operators link to created agents; `None` when `provisioner` is.
    pub linked: Option<Arc<LinkedAccounts>>,
    /// The agents' secret variables; `None` when `provisioner` is.
    pub env_secrets: Option<Arc<EnvSecrets>>,
    /// The agents' terminal feeds and turn headers.
    pub feeds: Arc<FeedHub>,
    /// Uploaded agent icons.
    pub icons: IconStore,
    /// The UI's quick links.
    pub quick_links: Arc<Vec<QuickLink>>,
    /// The webhook secret, `config-prs` and the issue report.
    pub forge: Arc<ForgeHub>,
    /// Which of its keys the controller was given.
    pub configured: Configured,
}

/// Which keys the controller was given at start, as `/healthz` reports them (whether, never
/// what): `swarmctl doctor` says which one is missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Configured {
    /// The secret store's key (`SWARM_SECRETS_KEY_FILE`).
    pub secret_store: bool,
    /// The deploy key (`SWARM_DEPLOY_KEY_FILE`).
    pub deploy_key: bool,
    /// The NATS signing directory (`SWARM_NATS_DIR`).
    pub nats_dir: bool,
}

impl App {
    /// The API over `parts`.
    pub fn new(parts: AppParts) -> Self {
        let AppParts {
            client,
            definitions,
            reconciler,
            clock,
            js,
            hives,
            roster,
            wanted,
            last_turns,
            revoker,
            jobq,
            provisioner,
            linked,
            env_secrets,
            feeds,
            icons,
            quick_links,
            forge,
            configured,
        } = parts;
        let state = StateChanger {
            hives: hives.clone(),
            roster: roster.clone(),
            wanted: wanted.clone(),
            revoker,
            clock: clock.clone(),
        };
        Self {
            client: client.clone(),
            todos: TodosApi {
                roster: roster.clone(),
                queues: crate::work::queue::Queues::new(js.clone()),
                js: js.clone(),
                client,
                clock: clock.clone(),
            },
            turns: TurnsApi {
                roster: roster.clone(),
                histories: crate::work::history::Histories::new(js.clone()),
                definitions: definitions.clone(),
                outputs: crate::work::turn_output::TurnOutputs::new(js.clone()),
            },
            schedules: SchedulesApi {
                definitions,
                reconciler,
                clock: clock.clone(),
                roster: roster.clone(),
                wanted: wanted.clone(),
                names: Default::default(),
            },
            hives: HivesApi { directory: hives.clone(), js: js.clone(), clock: clock.clone() },
            overview: OverviewApi {
                roster: roster.clone(),
                js: js.clone(),
                last_turns,
                directory: hives.clone(),
                clock: clock.clone(),
            },
            agents: AgentsApi {
                roster: roster.clone(),
                wanted,
                js: js.clone(),
                clock,
                provisioner: provisioner.clone(),
                state,
                histories: crate::work::history::Histories::new(js.clone()),
            },
            creation: CreationApi { directory: hives, provisioner },
            feeds: FeedsApi { hub: feeds, roster: roster.clone() },
            ui: UiApi { icons, quick_links, roster },
            jobs: JobsApi { jobq },
            linked: LinkedApi { linked },
            forge: ForgeApi { forge, js: js.clone() },
            secrets: SecretsApi { secrets: env_secrets },
            configured,
            control_link: std::sync::OnceLock::new(),
            audit: audit::AuditApi { log: AuditLog::new(js) },
        }
    }
}

/// What `/healthz` says about the control link, from whoever holds the link (the remote module,
/// which is above the API and so is not named here).
pub trait LinkReport: std::fmt::Debug + Send + Sync {
    /// The link's state as JSON.
    fn report(&self) -> serde_json::Value;
}

/// The warp filter serving every route. Each request carries its [`Caller`] as an extension,
/// put there by the server that took it (the socket's accept loop).
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
        .and(warp::ext::get::<Caller>())
        .then(
            move |method: Method,
                  path: warp::path::FullPath,
                  query: String,
                  headers: HeaderMap,
                  body,
                  caller: Caller| {
                let app = app.clone();
                async move {
                    let outcome = app.handle(&caller, &method, path.as_str(), &query, &headers, body).await;
                    outcome.unwrap_or_else(ApiError::into_response)
                }
            },
        )
}

impl App {
    /// The response to one request from `caller`, whether it came through the socket or the
    /// control plane; an error is the JSON error answer ([`ApiError::into_response`]).
    pub(crate) async fn handle<S, B>(
        &self,
        caller: &Caller,
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
        // HEAD is GET without the body: the same route, role and headers.
        let head = *method == Method::HEAD;
        let (route, params) = match routes::find(if head { &Method::GET } else { method }, path) {
            Found::Route(route, params) => (route, params),
            Found::WrongMethod(allowed) => {
                return Err(ApiError::MethodNotAllowed(format!("{method} is not allowed on {path}; use {allowed}")));
            }
            Found::NoPath => {
                return Err(ApiError::NotFound(format!(
                    "no route {method} {path}; the API serves {}",
                    routes::known_paths()
                )));
            }
        };
        let outcome = match caller.may(route, &format!("{method} {path}")) {
            Ok(()) => self.dispatch(route, &params, caller, path, query, headers, body).await,
            Err(refused) => Err(refused),
        };
        if !head && *method != Method::GET {
            let status = outcome.as_ref().map_or_else(ApiError::status, Response::status);
            self.audit.log.record(audit_entry(caller, method, path, status));
        }
        if head {
            return Ok(without_body(outcome.unwrap_or_else(ApiError::into_response)));
        }
        outcome
    }

    /// Runs the handler of `route`, which `caller` may use.
    #[allow(clippy::too_many_arguments)]
    async fn dispatch<S, B>(
        &self,
        route: RouteId,
        params: &[&str],
        caller: &Caller,
        path: &str,
        query: &str,
        headers: &HeaderMap,
        body: S,
    ) -> Result<Response, ApiError>
    where
        S: Stream<Item = Result<B, warp::Error>> + Send,
        B: Buf,
    {
        let param = |i: usize| params[i];
        match route {
            RouteId::UiFile => match crate::ui::assets::asset(path) {
                Some(file) => Ok(ui::asset(file, headers)),
                None => Err(ApiError::NotFound(format!("no file {path} in the swarm UI"))),
            },
            RouteId::Health => Ok(self.health()),
            RouteId::Metrics => Ok(self.metrics()),
            RouteId::ListSchedules => self.schedules.list().await,
            RouteId::CreateSchedule => {
                let body = json_request(headers, body, MAX_REQUEST_BYTES, SCHEDULE_FITS).await?;
                self.schedules.create(&body).await
            }
            RouteId::GetSchedule => self.schedules.get(param(0)).await,
            RouteId::ScheduleFired => self.turns.fired(param(0)).await,
            RouteId::PatchSchedule => {
                let body = json_request(headers, body, MAX_REQUEST_BYTES, SCHEDULE_FITS).await?;
                self.schedules.patch(param(0), if_match(headers)?, &body).await
            }
            RouteId::DeleteSchedule => self.schedules.delete(param(0), if_match(headers)?).await,
            RouteId::ListHives => Ok(self.hives.list_hives()),
            RouteId::HiveStatuses => self.hives.hive_statuses().await,
            RouteId::HiveStatus => self.hives.hive_status(param(0)).await,
            RouteId::ListAgents => self.agents.list_agents(query).await,
            RouteId::CreateAgent => {
                let body = json_request(headers, body, MAX_CREATE_REQUEST_BYTES, CREATE_FITS).await?;
                self.creation.create_agent(&body).await
            }
            RouteId::AgentsStatus => self.agents.agents_status(query).await,
            RouteId::GetAgent => self.agents.get_agent(param(0)).await,
            RouteId::Overview => self.overview.overview().await,
            RouteId::PatchLabels => {
                let body = json_request(headers, body, MAX_LABELS_REQUEST_BYTES, LABELS_FITS).await?;
                self.agents.patch_labels(param(0), &body).await
            }
            RouteId::SetState => {
                let revision = if_match(headers)?;
                let body = state_body(headers, body).await?;
                self.agents.set_state(param(0), param(1), caller, set_by(headers, caller)?, revision, &body).await
            }
            RouteId::ListLinked => self.linked.list_linked(param(0), param(1)).await,
            RouteId::PutMatrixAccount | RouteId::PutForgeAccount | RouteId::PutGithubAccount => {
                let (kind, name) = linked_kind(route, params);
                let body = json_request(headers, body, MAX_LINKED_REQUEST_BYTES, LINKED_FITS).await?;
                self.linked.put_linked(param(0), param(1), kind, name, &body).await
            }
            RouteId::DeleteMatrixAccount | RouteId::DeleteForgeAccount | RouteId::DeleteGithubAccount => {
                let (kind, name) = linked_kind(route, params);
                self.linked.delete_linked(param(0), param(1), kind, name, query).await
            }
            RouteId::Terminal => self.feeds.feed(param(0), FeedKind::Terminal, headers).await,
            RouteId::Turn => self.feeds.feed(param(0), FeedKind::Turn, headers).await,
            RouteId::GetIcon => self.ui.icon(param(0), headers).await,
            RouteId::PutIcon => {
                let png = ui::icon_body(headers, body).await?;
                self.ui.put_icon(param(0), &png).await
            }
            RouteId::DeleteIcon => self.ui.delete_icon(param(0)).await,
            RouteId::QuickLinks => Ok(self.ui.quick_links()),
            RouteId::JobGraph => self.jobs.jobq_graph(query),
            RouteId::RetryJob => self.jobs.jobq_retry(param(0)),
            RouteId::ForgeWebhook => self.forge.forge_webhook(headers, body).await,
            RouteId::ConfigPrs => self.forge.config_prs().await,
            RouteId::ConfigPr => self.forge.config_pr(param(0)).await,
            RouteId::Issues => Ok(self.forge.issues()),
            RouteId::PromptAgent => {
                let body = json_request(headers, body, MAX_PROMPT_REQUEST_BYTES, PROMPT_FITS).await?;
                self.todos.prompt(param(0), set_by(headers, caller)?, &body).await
            }
            RouteId::PromptAgents => {
                let body = json_request(headers, body, MAX_PROMPT_REQUEST_BYTES, PROMPT_FITS).await?;
                self.todos.prompt_many(set_by(headers, caller)?, &body).await
            }
            RouteId::ListTodos => self.todos.list(param(0)).await,
            RouteId::DeleteTodo => self.todos.remove(param(0), param(1)).await,
            RouteId::CancelTurn => {
                let body = small_body(headers, body).await?;
                self.todos.cancel(param(0), &body).await
            }
            RouteId::ListTurns => self.turns.list(param(0), query).await,
            RouteId::GetTurn => self.turns.get(param(0), param(1)).await,
            RouteId::TurnOutput => self.turns.output(param(0), param(1)).await,
            RouteId::Audit => self.audit.page(query).await,
            RouteId::ListAgentSecrets => self.secrets.list(Some(param(0))).await,
            RouteId::PutAgentSecret => self.secrets.put(Some(param(0)), param(1), headers, body).await,
            RouteId::DeleteAgentSecret => self.secrets.delete(Some(param(0)), param(1)).await,
            RouteId::ListSwarmSecrets => self.secrets.list(None).await,
            RouteId::PutSwarmSecret => self.secrets.put(None, param(0), headers, body).await,
            RouteId::DeleteSwarmSecret => self.secrets.delete(None, param(0)).await,
        }
    }

    /// Prometheus text: the credential health counters (empty without provisioning) and the
    /// terminal feeds' watchers, and the live heap bytes in a `heap-stats` build.
    fn metrics(&self) -> Response {
        use warp::Reply;
        let mut text = String::new();
        if let Some(provisioner) = &self.agents.provisioner {
            provisioner.health.metrics.render(&mut text);
        }
        self.feeds.hub.metrics.render(&mut text);
        crate::heap::render(&mut text);
        let reply = warp::reply::with_header(text, "content-type", "text/plain; version=0.0.4");
        reply.into_response()
    }

    fn health(&self) -> Response {
        let state = self.client.connection_state();
        if state == async_nats::connection::State::Connected {
            // The control link is reported, not judged: the swarm works without it.
            let link = self.control_link.get().map(|status| status.report());
            // On a cluster, which node this controller is connected to now.
            let server = self.client.server_info().server_name;
            json(
                StatusCode::OK,
                &serde_json::json!({
                    "status": "ok",
                    "nats_server": server,
                    "control_link": link,
                    "configured": self.configured,
                }),
            )
        } else {
            ApiError::Unavailable(format!("NATS connection is {state}")).into_response()
        }
    }
}

/// A JSON response with `status`.
/// A GET's answer as HEAD gets it: the same status and headers, and the length the body would
/// have had when it is known (an event stream's is not: it is dropped unread).
fn without_body(response: Response) -> Response {
    use warp::hyper::body::Body as _;
    let (mut parts, body) = response.into_parts();
    if let Some(length) = body.size_hint().exact() {
        parts.headers.entry(warp::http::header::CONTENT_LENGTH).or_insert(length.into());
    }
    Response::from_parts(parts, Default::default())
}

/// What the audit log keeps of a request: who, how, with which role, what, and how it ended.
fn audit_entry(caller: &Caller, method: &Method, path: &str, status: StatusCode) -> AuditEntry {
    let via = match caller {
        Caller::Local { .. } => Via::Socket,
        Caller::Sso { .. } | Caller::Gateway { .. } => Via::Gateway,
        Caller::Device { .. } => Via::ControlPlane,
    };
    let now = OffsetDateTime::now_utc();
    let at = now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000).unwrap_or(now);
    AuditEntry {
        at: at.format(&Rfc3339).unwrap_or_default(),
        who: caller.to_string(),
        via,
        role: caller.role(),
        method: method.to_string(),
        path: path.to_owned(),
        status: status.as_u16(),
    }
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    use warp::Reply;
    warp::reply::with_status(warp::reply::json(value), status).into_response()
}

/// A JSON request body: declared as JSON (else 415) and at most `limit` bytes (else 413, with
/// `what_fits` saying what the limit is made for).
async fn json_request<S, B>(headers: &HeaderMap, body: S, limit: usize, what_fits: &str) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, limit).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(e.to_string()),
        BodyError::TooLarge { .. } => ApiError::PayloadTooLarge(format!("{e}; {what_fits}")),
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}

/// What each JSON body's limit is made for, as a 413 says.
const SCHEDULE_FITS: &str = "a schedule's prompt (`body`) is at most 64 KiB";
const CREATE_FITS: &str = "an agent's spec holds at most a 16 KiB turn command and 64 environment values of 16 KiB";
const PROMPT_FITS: &str = "a prompt is at most 64 KiB";
const LINKED_FITS: &str = "a linked account holds URLs, names and a token of at most 4 KiB";
const LABELS_FITS: &str = "an agent has at most 32 labels of 63-byte keys and values";

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

/// An optional small JSON body (a cancel's `{"todo_id": ...}`), at most
/// [`MAX_STATE_REQUEST_BYTES`]; an empty one needs no content type.
async fn small_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let declared = headers.contains_key(warp::http::header::CONTENT_TYPE);
    let read = if declared {
        hyperhive_json_body::json_body(headers, body, MAX_STATE_REQUEST_BYTES).await
    } else {
        hyperhive_json_body::limited_body(headers, body, MAX_STATE_REQUEST_BYTES).await
    };
    let bytes = read.map_err(|e| ApiError::BadRequest(format!("{e}; send nothing, or {{\"todo_id\": \"...\"}}")))?;
    if !declared && !bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::UnsupportedMediaType("a body must be declared as Content-Type: application/json".into()));
    }
    Ok(bytes)
}

/// The kind of a linked-account route, and its name where the kind has several (a matrix
/// account's name, a forge account's label; the GitHub account is one).
fn linked_kind<'a>(route: RouteId, params: &[&'a str]) -> (Kind, Option<&'a str>) {
    match route {
        RouteId::PutMatrixAccount | RouteId::DeleteMatrixAccount => (Kind::Matrix, Some(params[2])),
        RouteId::PutForgeAccount | RouteId::DeleteForgeAccount => (Kind::Forge, Some(params[2])),
        _ => (Kind::Github, None),
    }
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
