//! `swarmctl hives`, `hives status`, `agents` and `agent state`: the hive directory, hive status,
//! the roster and wanted state. Tables by default, the API's JSON with `--json`.

use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::roster::Origin;
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_swarm_api::agents::{AgentView, StateRequest, StateView};
use hyperhive_swarm_api::hives::{HiveStatusView, HiveView};
use hyperhive_swarm_api::paths;
use serde::Deserialize;
use serde_json::Value;

use super::client::{self, Api, CtlError};
use super::format::{self, grid, or_dash, pretty, pretty_answer};

/// `swarmctl hives`: NAME, DESCRIPTION, LABELS, XKEY.
pub async fn list(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::GET, paths::HIVES, None, None).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let hives: Vec<HiveView> = client::answer(&bytes)?;
    let table = hives.iter().map(|h| {
        let labels: Vec<String> = h.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        [
            h.name.to_string(),
            or_dash(&h.description),
            if labels.is_empty() { "-".into() } else { labels.join(",") },
            or_dash(h.xkey.as_deref().unwrap_or_default()),
        ]
    });
    Ok(grid(["NAME", "DESCRIPTION", "LABELS", "XKEY"], table))
}

/// `swarmctl hives status [HIVE]`: HIVE, STATE (fresh, stale, never), AGE, VERSION, LOAD, AGENTS.
pub async fn status(api: &Api, hive: Option<&HiveName>, as_json: bool) -> Result<String, CtlError> {
    let path = match hive {
        Some(hive) => paths::hive_status(hive),
        None => paths::HIVE_STATUSES.into(),
    };
    let bytes = client::request(api, Method::GET, &path, None, None).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let all: Vec<HiveStatusView> = if hive.is_some() {
        client::answer::<Option<HiveStatusView>>(&bytes)?.into_iter().collect()
    } else {
        client::answer(&bytes)?
    };
    let table = all.iter().map(|s| {
        let state = match (&s.status, s.stale) {
            (None, _) => "never",
            (Some(_), false) => "fresh",
            (Some(_), true) => "stale",
        };
        let age = s.age_secs.map_or("-".into(), |a| format!("{a}s"));
        let (version, load, agents) = match &s.status {
            Some(status) => (
                or_dash(&status.version),
                status.load.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" "),
                status.agents.len().to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        [s.hive.to_string(), state.into(), age, version, load, agents]
    });
    Ok(grid(["HIVE", "STATE", "AGE", "VERSION", "LOAD", "AGENTS"], table))
}

/// Agents asked for in one request when every one is listed.
const PAGE: usize = 500;

/// Which agents `swarmctl agents` lists.
#[derive(Debug, Default)]
pub struct Listing {
    /// Only this hive's.
    pub hive: Option<HiveName>,
    /// One page of at most this many; every agent, a page at a time, when none.
    pub limit: Option<usize>,
    /// Those after this name.
    pub after: Option<AgentName>,
}

/// The agents of `list` ([`paths::AGENTS`] or [`paths::AGENTS_STATUS`]) `listing` asks for, as
/// the API wrote them, and whether a page was cut short by `--limit` (more follow).
pub(crate) async fn agent_pages(api: &Api, list: &str, listing: &Listing) -> Result<(Vec<Value>, bool), CtlError> {
    let limit = listing.limit.unwrap_or(PAGE);
    let mut after = listing.after.clone();
    let mut all = Vec::new();
    loop {
        let path = paths::agents_page(list, limit, after.as_ref(), listing.hive.as_ref());
        let page: Vec<Value> = client::answer(&client::request(api, Method::GET, &path, None, None).await?)?;
        let full = page.len() == limit;
        let last = page.last().and_then(|a| a["name"].as_str()).map(AgentName::parse);
        all.extend(page);
        match last {
            Some(Ok(last)) if full && listing.limit.is_none() => after = Some(last),
            _ => return Ok((all, full && listing.limit.is_some())),
        }
    }
}

/// `swarmctl agents [--hive H] [--limit N] [--after AGENT] [--label KEY[=VALUE]]...`: NAME,
/// HIVE, ORIGIN, WANTED, ACTUAL, RESTARTS, TURN (working on which todo, or idle/paused), LAST
/// (how its last turn ended), LABELS; only the agents every selector matches.
pub async fn agents(
    api: &Api,
    listing: &Listing,
    selectors: &[crate::labels::Selector],
    as_json: bool,
) -> Result<String, CtlError> {
    let (raw, more) = agent_pages(api, paths::AGENTS, listing).await?;
    if more && let Some(last) = raw.last().and_then(|a| a["name"].as_str()) {
        let limit = listing.limit.unwrap_or(PAGE);
        let hive = listing.hive.as_ref().map_or(String::new(), |h| format!(" --hive {h}"));
        eprintln!("swarmctl: more agents follow: swarmctl agents{hive} --limit {limit} --after {last}");
    }
    let agents = raw
        .iter()
        .map(AgentView::deserialize)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CtlError::Protocol(format!("unexpected answer from swarm-controller: {e}")))?;
    // The JSON printed is the API's as it came, less the agents left out.
    let (raw, agents): (Vec<Value>, Vec<AgentView>) =
        raw.into_iter().zip(agents).filter(|(_, a)| selectors.iter().all(|s| s.matches(&a.entry.labels))).unzip();
    if as_json {
        return Ok(pretty(&Value::Array(raw)));
    }
    let table = agents.iter().map(|a| {
        let wanted = match a.wanted.revision {
            Some(revision) => format!("{} (rev {revision})", a.wanted.state),
            None => format!("{} (default)", a.wanted.state),
        };
        let origin = match a.entry.origin {
            Origin::Declared => "declared",
            Origin::Created => "created",
        };
        [
            a.name.to_string(),
            a.entry.hive.to_string(),
            origin.to_owned(),
            wanted,
            a.actual.as_ref().map_or("-".into(), |s| s.actual.as_str().to_owned()),
            a.actual.as_ref().map_or("-".into(), |s| s.restarts.to_string()),
            current_turn(a),
            last_turn(a),
            crate::untrusted::cell(&crate::labels::shown(&a.entry.labels)).into_owned(),
        ]
    });
    Ok(grid(["NAME", "HIVE", "ORIGIN", "WANTED", "ACTUAL", "RESTARTS", "TURN", "LAST", "LABELS"], table))
}

/// What the agent is doing, by its hive's last status.
fn current_turn(a: &AgentView) -> String {
    use hyperhive_hive_proto::agent_files::Turn;
    match a.actual.as_ref().and_then(|s| s.turn.as_ref()) {
        None => "-".into(),
        Some(t) if t.turn == Turn::Working => {
            format!("working {}", crate::untrusted::cell(t.todo_id.as_deref().unwrap_or("?")))
        }
        Some(t) if t.turn == Turn::Paused => "paused".into(),
        Some(_) => "idle".into(),
    }
}

/// How its last finished turn ended.
fn last_turn(a: &AgentView) -> String {
    a.last_turn.as_ref().map_or_else(|| "-".into(), format::turn_result)
}

/// `[HIVE] AGENT` as the agent verbs take them, each checked.
///
/// # Errors
/// [`CtlError::Usage`] saying which word is wrong.
pub(crate) fn agent_of(words: &[String]) -> Result<(Option<HiveName>, AgentName), CtlError> {
    let usage = |e: String| CtlError::Usage(format!("{e}; name the agent as [HIVE] AGENT"));
    let (hive, agent) = match words {
        [agent] => (None, agent),
        [hive, agent] => (Some(HiveName::parse(hive).map_err(|e| usage(e.to_string()))?), agent),
        _ => return Err(usage(format!("{} words", words.len()))),
    };
    Ok((hive, AgentName::parse(agent).map_err(|e| usage(e.to_string()))?))
}

/// The hive given, else the one `agent` is on by the roster (`GET /api/agents/status`, a page
/// at a time): names are unique in the swarm.
///
/// # Errors
/// The API's, or [`CtlError::Usage`] for an agent the roster does not name.
pub(crate) async fn hive_of(api: &Api, given: Option<HiveName>, agent: &AgentName) -> Result<HiveName, CtlError> {
    if let Some(hive) = given {
        return Ok(hive);
    }
    let not_on_roster = || {
        CtlError::Usage(format!("no agent {agent} on the roster (`swarmctl agents` lists them); nothing was changed"))
    };
    let bytes = match client::request(api, Method::GET, &paths::agent(agent), None, None).await {
        Err(CtlError::Api { status: StatusCode::NOT_FOUND, .. }) => return Err(not_on_roster()),
        answer => answer?,
    };
    let view: AgentView = client::answer(&bytes)?;
    Ok(view.entry.hive)
}

/// `swarmctl agent state [HIVE] AGENT STATE [--if-match REV]`.
pub async fn set_state(
    api: &Api,
    hive: &HiveName,
    agent: &AgentName,
    state: WantedState,
    if_match: Option<u64>,
    as_json: bool,
) -> Result<String, CtlError> {
    let path = paths::agent_state(hive, agent);
    let body = client::body(&StateRequest::new(state));
    let bytes = client::request(api, Method::PUT, &path, if_match, Some(body)).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let answer: StateView = client::answer(&bytes)?;
    Ok(format!(
        "{hive}/{agent}: wanted state {} (revision {}, set by {} at {})\n",
        answer.state,
        answer.revision,
        or_dash(&answer.set_by),
        or_dash(&answer.set_at)
    ))
}
