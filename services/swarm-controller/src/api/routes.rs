//! Every route of the API, as data: [`ROUTES`] drives dispatch ([`find`]), the 405 answer (the
//! methods a path allows) and the 404 answer (the paths that exist), and
//! docs/reference/routes.md is checked against it by scripts/check-docs. A route is written
//! once, here, and in the one `match` arm that calls its handler.

use hyperhive_swarm_api::roles::Role;
use warp::http::Method;

/// Which handler a route reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteId {
    /// The swarm UI's embedded files.
    UiFile,
    /// `GET /healthz`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// `GET /api/schedules`.
    ListSchedules,
    /// `POST /api/schedules`.
    CreateSchedule,
    /// `GET /api/schedules/{id}`.
    GetSchedule,
    /// `GET /api/schedules/{id}/fired`.
    ScheduleFired,
    /// `PATCH /api/schedules/{id}`.
    PatchSchedule,
    /// `DELETE /api/schedules/{id}`.
    DeleteSchedule,
    /// `GET /api/hives`.
    ListHives,
    /// `GET /api/hives/status`.
    HiveStatuses,
    /// `GET /api/hives/{hive}/status`.
    HiveStatus,
    /// `GET /api/agents`.
    ListAgents,
    /// `POST /api/agents`.
    CreateAgent,
    /// `GET /api/agents/status`.
    AgentsStatus,
    /// `GET /api/overview`.
    Overview,
    /// `GET /api/agents/{name}`.
    GetAgent,
    /// `PATCH /api/agents/{name}/labels`.
    PatchLabels,
    /// `PUT /api/hives/{hive}/agents/{agent}/state`.
    SetState,
    /// `GET /api/hives/{hive}/agents/{agent}/linked-accounts`.
    ListLinked,
    /// `PUT /api/hives/{hive}/agents/{agent}/matrix-accounts/{name}`.
    PutMatrixAccount,
    /// `DELETE /api/hives/{hive}/agents/{agent}/matrix-accounts/{name}`.
    DeleteMatrixAccount,
    /// `PUT /api/hives/{hive}/agents/{agent}/forge-accounts/{label}`.
    PutForgeAccount,
    /// `DELETE /api/hives/{hive}/agents/{agent}/forge-accounts/{label}`.
    DeleteForgeAccount,
    /// `PUT /api/hives/{hive}/agents/{agent}/github-account`.
    PutGithubAccount,
    /// `DELETE /api/hives/{hive}/agents/{agent}/github-account`.
    DeleteGithubAccount,
    /// `GET /api/agents/{name}/terminal`.
    Terminal,
    /// `GET /api/agents/{name}/turn`.
    Turn,
    /// `GET /api/agents/{name}/icon`.
    GetIcon,
    /// `PUT /api/agents/{name}/icon`.
    PutIcon,
    /// `DELETE /api/agents/{name}/icon`.
    DeleteIcon,
    /// `GET /api/quick-links`.
    QuickLinks,
    /// `GET /api/jobq/graph`.
    JobGraph,
    /// `POST /api/jobq/jobs/{id}/retry`.
    RetryJob,
    /// `POST /api/forge/webhook`.
    ForgeWebhook,
    /// `GET /api/config-prs`.
    ConfigPrs,
    /// `GET /api/agents/{agent}/config-pr`.
    ConfigPr,
    /// `GET /api/issues`.
    Issues,
    /// `POST /api/agents/{name}/todos`.
    PromptAgent,
    /// `POST /api/todos`.
    PromptAgents,
    /// `GET /api/agents/{name}/todos`.
    ListTodos,
    /// `DELETE /api/agents/{name}/todos/{id}`.
    DeleteTodo,
    /// `POST /api/agents/{name}/turn/cancel`.
    CancelTurn,
    /// `GET /api/agents/{name}/turns`.
    ListTurns,
    /// `GET /api/agents/{name}/turns/{id}`.
    GetTurn,
    /// `GET /api/agents/{name}/turns/{id}/output`.
    TurnOutput,
    /// `GET /api/audit`.
    Audit,
    /// `GET /api/agents/{name}/secrets`.
    ListAgentSecrets,
    /// `PUT /api/agents/{name}/secrets/{var}`.
    PutAgentSecret,
    /// `DELETE /api/agents/{name}/secrets/{var}`.
    DeleteAgentSecret,
    /// `GET /api/secrets`.
    ListSwarmSecrets,
    /// `PUT /api/secrets/{var}`.
    PutSwarmSecret,
    /// `DELETE /api/secrets/{var}`.
    DeleteSwarmSecret,
}

/// One route: a method, a path pattern (`{name}` stands for one path segment) and what it does.
#[derive(Debug, Clone)]
pub struct Route {
    /// The method.
    pub method: Method,
    /// The path pattern.
    pub path: &'static str,
    /// The handler.
    pub id: RouteId,
    /// What it does, as the reference docs say.
    pub summary: &'static str,
}

const fn route(method: Method, path: &'static str, id: RouteId, summary: &'static str) -> Route {
    Route { method, path, id, summary }
}

/// Every route the controller serves, on the socket and through the control plane alike.
pub const ROUTES: &[Route] = &[
    route(Method::GET, "/", RouteId::UiFile, "the swarm UI, embedded in the binary"),
    route(Method::GET, "/index.html", RouteId::UiFile, "the swarm UI's page"),
    route(Method::GET, "/app.js", RouteId::UiFile, "the swarm UI's script"),
    route(Method::GET, "/app.css", RouteId::UiFile, "the swarm UI's style sheet"),
    route(Method::GET, "/favicon.svg", RouteId::UiFile, "the swarm UI's icon"),
    route(Method::GET, "/favicon.ico", RouteId::UiFile, "the swarm UI's icon, for browsers that ask for this name"),
    route(
        Method::GET,
        "/healthz",
        RouteId::Health,
        "200 while NATS is connected, else 503; names the NATS server, the control link's state and which keys \
         the controller was given",
    ),
    route(Method::GET, "/metrics", RouteId::Metrics, "Prometheus text: credential checks, renewals, failures, feeds"),
    route(Method::GET, "/api/schedules", RouteId::ListSchedules, "every schedule with its revision"),
    route(Method::POST, "/api/schedules", RouteId::CreateSchedule, "create a schedule (201)"),
    route(Method::GET, "/api/schedules/{id}", RouteId::GetSchedule, "one schedule"),
    route(
        Method::GET,
        "/api/schedules/{id}/fired",
        RouteId::ScheduleFired,
        "per agent of the schedule, its latest slot the agent's turn history records, with how the turn went",
    ),
    route(
        Method::PATCH,
        "/api/schedules/{id}",
        RouteId::PatchSchedule,
        "partial change; If-Match: <revision> gives 409 on mismatch",
    ),
    route(Method::DELETE, "/api/schedules/{id}", RouteId::DeleteSchedule, "remove a schedule; honours If-Match"),
    route(Method::GET, "/api/hives", RouteId::ListHives, "the hive directory, sorted by name"),
    route(Method::GET, "/api/hives/status", RouteId::HiveStatuses, "every hive's last status, its age, whether stale"),
    route(Method::GET, "/api/hives/{hive}/status", RouteId::HiveStatus, "one hive's last status"),
    route(
        Method::GET,
        "/api/agents",
        RouteId::ListAgents,
        "the roster joined with wanted and actual state, by name; ?limit=&after=&hive= pages",
    ),
    route(Method::POST, "/api/agents", RouteId::CreateAgent, "create an agent: its provisioning jobs are queued (202)"),
    route(
        Method::GET,
        "/api/agents/status",
        RouteId::AgentsStatus,
        "the live part per agent, by name; ?limit=&after=&hive= pages",
    ),
    route(
        Method::GET,
        "/api/overview",
        RouteId::Overview,
        "the swarm in counts: agents by activity and by last turn, the latest failed turns",
    ),
    route(
        Method::GET,
        "/api/agents/{name}",
        RouteId::GetAgent,
        "one agent as the list shows it: its entry, wanted and actual state, last turn",
    ),
    route(
        Method::PATCH,
        "/api/agents/{name}/labels",
        RouteId::PatchLabels,
        "change the agent's labels: a JSON merge patch, a key set to null is removed",
    ),
    route(
        Method::PUT,
        "/api/hives/{hive}/agents/{agent}/state",
        RouteId::SetState,
        "set the wanted state; honours If-Match",
    ),
    route(
        Method::GET,
        "/api/hives/{hive}/agents/{agent}/linked-accounts",
        RouteId::ListLinked,
        "the agent's own matrix account and its linked ones, never a credential",
    ),
    route(
        Method::PUT,
        "/api/hives/{hive}/agents/{agent}/matrix-accounts/{name}",
        RouteId::PutMatrixAccount,
        "link a matrix account (verified with whoami)",
    ),
    route(
        Method::DELETE,
        "/api/hives/{hive}/agents/{agent}/matrix-accounts/{name}",
        RouteId::DeleteMatrixAccount,
        "unlink a matrix account; ?revoke=true logs its token out first",
    ),
    route(
        Method::PUT,
        "/api/hives/{hive}/agents/{agent}/forge-accounts/{label}",
        RouteId::PutForgeAccount,
        "link a forge account (verified with GET /api/v1/user)",
    ),
    route(
        Method::DELETE,
        "/api/hives/{hive}/agents/{agent}/forge-accounts/{label}",
        RouteId::DeleteForgeAccount,
        "unlink a forge account",
    ),
    route(
        Method::PUT,
        "/api/hives/{hive}/agents/{agent}/github-account",
        RouteId::PutGithubAccount,
        "link the agent's GitHub account",
    ),
    route(
        Method::DELETE,
        "/api/hives/{hive}/agents/{agent}/github-account",
        RouteId::DeleteGithubAccount,
        "unlink the agent's GitHub account",
    ),
    route(
        Method::GET,
        "/api/agents/{name}/terminal",
        RouteId::Terminal,
        "the agent's terminal feed as server-sent events: history, then live; Last-Event-ID resumes",
    ),
    route(Method::GET, "/api/agents/{name}/turn", RouteId::Turn, "the agent's turn header as server-sent events"),
    route(
        Method::GET,
        "/api/agents/{name}/icon",
        RouteId::GetIcon,
        "the uploaded PNG, else a generated SVG (ETag, no-cache)",
    ),
    route(Method::PUT, "/api/agents/{name}/icon", RouteId::PutIcon, "upload an icon (image/png, at most 256 KiB)"),
    route(Method::DELETE, "/api/agents/{name}/icon", RouteId::DeleteIcon, "remove the uploaded icon"),
    route(Method::GET, "/api/quick-links", RouteId::QuickLinks, "the configured quick links"),
    route(
        Method::GET,
        "/api/jobq/graph",
        RouteId::JobGraph,
        "the job graph: nodes and edges; ?agent=NAME keeps one agent's",
    ),
    route(Method::POST, "/api/jobq/jobs/{id}/retry", RouteId::RetryJob, "retry a failed job (202)"),
    route(
        Method::POST,
        "/api/forge/webhook",
        RouteId::ForgeWebhook,
        "a forge delivery, signed (X-Forgejo-Signature or X-Gitea-Signature); 401 unsigned",
    ),
    route(Method::GET, "/api/config-prs", RouteId::ConfigPrs, "every agent's config pull request"),
    route(Method::GET, "/api/agents/{agent}/config-pr", RouteId::ConfigPr, "one agent's; 404 when it has none"),
    route(
        Method::GET,
        "/api/issues",
        RouteId::Issues,
        "open issues of the swarm's organisation, by repository and label",
    ),
    route(
        Method::POST,
        "/api/agents/{name}/todos",
        RouteId::PromptAgent,
        "queue a prompt for the agent (202 with the todo's id); 429 when its queue is full",
    ),
    route(Method::POST, "/api/todos", RouteId::PromptAgents, "queue one prompt for several agents (202)"),
    route(
        Method::GET,
        "/api/agents/{name}/todos",
        RouteId::ListTodos,
        "the agent's queue, oldest first: waiting todos and the running one, with source and age",
    ),
    route(
        Method::DELETE,
        "/api/agents/{name}/todos/{id}",
        RouteId::DeleteTodo,
        "remove a waiting todo; 409 for the running one",
    ),
    route(
        Method::POST,
        "/api/agents/{name}/turn/cancel",
        RouteId::CancelTurn,
        "end the running turn (SIGTERM, then SIGKILL); its todo ends cancelled, not retried (202)",
    ),
    route(
        Method::GET,
        "/api/agents/{name}/turns",
        RouteId::ListTurns,
        "the agent's turn history, newest first; ?limit, ?before, ?failed",
    ),
    route(Method::GET, "/api/agents/{name}/turns/{id}", RouteId::GetTurn, "one finished turn, by its todo's id"),
    route(
        Method::GET,
        "/api/agents/{name}/turns/{id}/output",
        RouteId::TurnOutput,
        "a finished turn's whole output (bytes) while the relay's history holds it",
    ),
    route(
        Method::GET,
        "/api/agents/{name}/secrets",
        RouteId::ListAgentSecrets,
        "the agent's secret variables: names, when set, agent or swarm default; never a value",
    ),
    route(
        Method::PUT,
        "/api/agents/{name}/secrets/{var}",
        RouteId::PutAgentSecret,
        "set the agent's secret variable; the raw body is the value (at most 64 KiB)",
    ),
    route(
        Method::DELETE,
        "/api/agents/{name}/secrets/{var}",
        RouteId::DeleteAgentSecret,
        "remove the agent's own value; the swarm default applies again",
    ),
    route(
        Method::GET,
        "/api/secrets",
        RouteId::ListSwarmSecrets,
        "the swarm's default secret variables: names and when set; never a value",
    ),
    route(
        Method::PUT,
        "/api/secrets/{var}",
        RouteId::PutSwarmSecret,
        "set a default secret variable of every agent; the raw body is the value (at most 64 KiB)",
    ),
    route(Method::DELETE, "/api/secrets/{var}", RouteId::DeleteSwarmSecret, "remove a default secret variable"),
    route(
        Method::GET,
        "/api/audit",
        RouteId::Audit,
        "every state-changing request: who, how, with which role, what, its status; newest first",
    ),
];

/// The least role a route needs ([`Role`]'s doc says what each may do). A wanted-state change to
/// `destroyed` needs admin besides (its body decides, so its handler checks).
#[must_use]
pub fn needed(id: RouteId) -> Role {
    use RouteId as R;
    match id {
        // Reading, the terminals, and the forge's webhook (its signature is its authentication;
        // the gateway's own user sends it, see `open_at_gateway`).
        R::UiFile
        | R::Health
        | R::Metrics
        | R::ListSchedules
        | R::GetSchedule
        | R::ScheduleFired
        | R::ListHives
        | R::HiveStatuses
        | R::HiveStatus
        | R::ListAgents
        | R::AgentsStatus
        | R::GetAgent
        | R::Overview
        | R::ListLinked
        | R::Terminal
        | R::Turn
        | R::GetIcon
        | R::QuickLinks
        | R::JobGraph
        | R::ForgeWebhook
        | R::ConfigPrs
        | R::ConfigPr
        | R::Issues
        | R::ListTodos
        | R::ListTurns
        | R::GetTurn
        | R::TurnOutput
        | R::ListAgentSecrets
        | R::ListSwarmSecrets => Role::Viewer,
        // Giving agents work and moving them.
        R::CreateSchedule
        | R::PatchSchedule
        | R::DeleteSchedule
        | R::SetState
        | R::PatchLabels
        | R::PutIcon
        | R::DeleteIcon
        | R::RetryJob
        | R::PromptAgent
        | R::PromptAgents
        | R::DeleteTodo
        | R::CancelTurn => Role::Operator,
        // Making agents and holding their keys, and who did what.
        R::Audit
        | R::CreateAgent
        | R::PutMatrixAccount
        | R::DeleteMatrixAccount
        | R::PutForgeAccount
        | R::DeleteForgeAccount
        | R::PutGithubAccount
        | R::DeleteGithubAccount
        | R::PutAgentSecret
        | R::DeleteAgentSecret
        | R::PutSwarmSecret
        | R::DeleteSwarmSecret => Role::Admin,
    }
}

/// Whether the hive-gateway passes the route without SSO, so its own user, naming no SSO user,
/// may use it: only the forge's webhook, which the forge calls and its signature authenticates.
#[must_use]
pub fn open_at_gateway(id: RouteId) -> bool {
    id == RouteId::ForgeWebhook
}

/// What a request's method and path find in [`ROUTES`].
#[derive(Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// A route: its handler and the values of its `{...}` segments, in order.
    Route(RouteId, Vec<&'a str>),
    /// The path exists, with other methods (listed, comma-separated).
    WrongMethod(String),
    /// No route has this path.
    NoPath,
}

/// The route `method` and `path` reach. A literal segment wins over a `{...}` one, so
/// `/api/agents/status` is its own route and not the agent `status`.
pub fn find<'a>(method: &Method, path: &'a str) -> Found<'a> {
    let segments: Vec<&str> = path.split('/').collect();
    let mut best: Option<(usize, &Route, Vec<&'a str>)> = None;
    let mut allowed: Vec<&str> = Vec::new();
    for route in ROUTES {
        let Some((literals, values)) = matches(route.path, &segments) else { continue };
        if !allowed.contains(&route.method.as_str()) {
            allowed.push(route.method.as_str());
        }
        if route.method == *method && best.as_ref().is_none_or(|(most, ..)| literals > *most) {
            best = Some((literals, route, values));
        }
    }
    match best {
        Some((_, route, values)) => Found::Route(route.id, values),
        None if allowed.is_empty() => Found::NoPath,
        None => Found::WrongMethod(allowed.join(", ")),
    }
}

/// Whether `pattern` matches `segments`: how many of its segments are literal, and the values of
/// its `{...}` segments. A `{...}` segment matches any one non-empty segment.
fn matches<'a>(pattern: &str, segments: &[&'a str]) -> Option<(usize, Vec<&'a str>)> {
    let parts: Vec<&str> = pattern.split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut literals = 0;
    let mut values = Vec::new();
    for (part, segment) in parts.iter().zip(segments) {
        if part.starts_with('{') && part.ends_with('}') {
            if segment.is_empty() {
                return None;
            }
            values.push(*segment);
        } else if part == segment {
            literals += 1;
        } else {
            return None;
        }
    }
    Some((literals, values))
}

/// The paths that exist, for a 404 answer.
pub fn known_paths() -> String {
    let mut paths: Vec<&str> = ROUTES.iter().filter(|r| r.id != RouteId::UiFile).map(|r| r.path).collect();
    paths.dedup();
    paths.join(", ")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn a_literal_segment_wins_over_a_parameter() {
        assert_eq!(find(&Method::GET, "/api/agents/status"), Found::Route(RouteId::AgentsStatus, vec![]));
        assert_eq!(find(&Method::GET, "/api/agents/alpha/turn"), Found::Route(RouteId::Turn, vec!["alpha"]));
        assert_eq!(find(&Method::GET, "/api/hives/status"), Found::Route(RouteId::HiveStatuses, vec![]));
        assert_eq!(find(&Method::GET, "/api/hives/h1/status"), Found::Route(RouteId::HiveStatus, vec!["h1"]));
    }

    #[test]
    fn parameters_come_in_path_order() {
        assert_eq!(
            find(&Method::PUT, "/api/hives/h1/agents/a/matrix-accounts/main"),
            Found::Route(RouteId::PutMatrixAccount, vec!["h1", "a", "main"])
        );
    }

    #[test]
    fn a_known_path_with_another_method_lists_the_allowed_ones() {
        assert_eq!(find(&Method::PUT, "/api/schedules"), Found::WrongMethod("GET, POST".into()));
        assert_eq!(find(&Method::POST, "/api/schedules/abc"), Found::WrongMethod("GET, PATCH, DELETE".into()));
        assert_eq!(find(&Method::POST, "/healthz"), Found::WrongMethod("GET".into()));
    }

    #[test]
    fn unknown_and_empty_segments_find_nothing() {
        for path in ["/nope", "/api/schedules/", "/api/agents//turn", "/api/schedules/a/b", "//api/schedules"] {
            assert_eq!(find(&Method::GET, path), Found::NoPath, "{path}");
        }
    }

    #[test]
    fn every_route_is_reachable_and_written_once() {
        let mut seen = HashSet::new();
        for route in ROUTES {
            assert!(seen.insert((route.method.clone(), route.path)), "{} {} twice", route.method, route.path);
            let example = route
                .path
                .replace("{id}", "x1")
                .replace("{hive}", "h1")
                .replace("{agent}", "a")
                .replace("{name}", "n")
                .replace("{label}", "l")
                .replace("{var}", "V");
            match find(&route.method, &example) {
                Found::Route(id, _) => assert_eq!(id, route.id, "{} {}", route.method, route.path),
                other => panic!("{} {} finds {other:?}", route.method, route.path),
            }
        }
    }
}
