//! `/api/agents` and `PUT /api/hives/{hive}/agents/{agent}/state`: the roster joined with wanted
//! and actual state, and the one writer of wanted state.

use hyperhive_hive_proto::agent_files::TurnState;
use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_hive_proto::status::{ActualState, ExitInfo};
use hyperhive_hive_proto::wanted::{Wanted, WantedState, default_wanted};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_schedule::instant::format_instant;
use hyperhive_swarm_api::agents::{AgentView, StateRequest, StateView, WantedView};
use serde::Serialize;
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use super::hives::{parse_hive, unavailable};
use super::{ApiError, App, json};
use crate::hives::{freshness, read_all};
use crate::provision::health::AgentHealth;
use crate::wanted::{Stored, WriteError};

/// How often a change is retried when another write slipped in between its read and its write
/// (only without `If-Match`; with it, the client decides).
const CAS_ATTEMPTS: usize = 5;
/// The header naming who sets a state, recorded as `set_by`.
const SET_BY_HEADER: &str = "x-set-by";
/// `set_by` when the request does not name itself.
const DEFAULT_SET_BY: &str = "api";
/// The longest `X-Set-By`.
const MAX_SET_BY: usize = 64;
/// What a refused state change body is told to send instead.
pub(super) const SEND_STATE: &str = r#"send {"state": "up"|"offline"|"paused"|"destroyed"}"#;

/// A wanted state as the API shows it: the stored one with its revision, or the default an
/// agent is held in while none was written.
fn wanted_view(stored: Option<&Stored>, entry: &RosterEntry) -> WantedView {
    match stored {
        Some(s) => WantedView {
            state: s.wanted.state,
            set_at: Some(s.wanted.set_at.clone()),
            set_by: Some(s.wanted.set_by.clone()),
            revision: Some(s.revision),
        },
        None => WantedView { state: default_wanted(entry.origin), set_at: None, set_by: None, revision: None },
    }
}

/// One agent in `GET /api/agents/status`: the live part.
#[derive(Debug, Serialize)]
struct LiveView {
    name: AgentName,
    hive: HiveName,
    actual: Option<ActualState>,
    since: Option<String>,
    restarts: Option<u32>,
    last_exit: Option<ExitInfo>,
    turn: Option<TurnState>,
    stale: bool,
    /// Credential health from the last pass (created agents only; `null` before the first).
    credentials: Option<AgentHealth>,
}

impl App {
    pub(super) async fn list_agents(&self) -> Result<Response, ApiError> {
        let roster = self.roster.list().await.map_err(unavailable)?;
        let wanted = self.wanted.list().await.map_err(unavailable)?;
        let mut statuses = read_all(&self.js).await.map_err(unavailable)?;
        let agents: Vec<AgentView> = roster
            .into_iter()
            .map(|(name, entry)| {
                let stored = wanted.get(&(entry.hive.clone(), name.clone()));
                let actual = statuses.get_mut(&entry.hive).and_then(|s| s.agents.remove(&name));
                AgentView { wanted: wanted_view(stored, &entry), actual, entry, name }
            })
            .collect();
        Ok(json(StatusCode::OK, &agents))
    }

    pub(super) async fn agents_status(&self) -> Result<Response, ApiError> {
        let roster = self.roster.list().await.map_err(unavailable)?;
        let mut statuses = read_all(&self.js).await.map_err(unavailable)?;
        let now = self.clock.now();
        let live: Vec<LiveView> = roster
            .into_iter()
            .map(|(name, entry)| {
                let status = statuses.get_mut(&entry.hive);
                let (_, stale) = freshness(status.as_deref(), now);
                let actual = status.and_then(|s| s.agents.remove(&name));
                LiveView {
                    actual: actual.as_ref().map(|a| a.actual),
                    since: actual.as_ref().map(|a| a.since.clone()),
                    restarts: actual.as_ref().map(|a| a.restarts),
                    last_exit: actual.as_ref().and_then(|a| a.last_exit.clone()),
                    turn: actual.and_then(|a| a.turn),
                    stale,
                    credentials: self.provisioner.as_ref().and_then(|p| p.health.get(&name)),
                    hive: entry.hive,
                    name,
                }
            })
            .collect();
        Ok(json(StatusCode::OK, &live))
    }

    /// Checks everything about the request before reading the store, then writes the state with
    /// one compare-and-set; `destroyed` then revokes the agent's credentials.
    pub(super) async fn set_state(
        &self,
        hive: &str,
        agent: &str,
        headers: &HeaderMap,
        if_match: Option<u64>,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let hive = parse_hive(hive)?;
        let agent = AgentName::parse(agent).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let set_by = set_by(headers)?;
        let request: StateRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request body: {e}; {SEND_STATE}")))?;
        let state: WantedState = request
            .state
            .parse()
            .map_err(|e: hyperhive_hive_proto::wanted::UnknownState| ApiError::BadRequest(e.to_string()))?;
        self.check_hive(&hive)?;
        match self.roster.get(&agent).await.map_err(unavailable)? {
            Some(entry) if entry.hive == hive => {}
            Some(entry) => {
                return Err(ApiError::NotFound(format!(
                    "agent {agent} is on hive {}, not on hive {hive}; see GET /api/agents",
                    entry.hive
                )));
            }
            None => {
                return Err(ApiError::NotFound(format!("no agent {agent} on the roster; see GET /api/agents")));
            }
        }
        if state == WantedState::Destroyed && self.revoker.is_none() {
            return Err(conflict(format!(
                "cannot destroy agent {agent}: revoking its NATS credentials needs the directory \
                 `swarm-controller nats init` wrote; set SWARM_NATS_DIR to it and restart the \
                 controller (nothing was stored)"
            )));
        }
        let wanted = Wanted { state, set_at: format_instant(self.clock.now()), set_by };
        let revision = self.write_state(&hive, &agent, &wanted, if_match).await?;
        tracing::info!(%hive, %agent, %state, revision, set_by = %wanted.set_by, "wanted state set");
        if state == WantedState::Destroyed
            && let Some(revoker) = &self.revoker
            && let Err(err) = revoker.revoke(&agent).await
        {
            tracing::warn!(%agent, %err, "revocation failed; the reconcile pass retries it");
            return Err(ApiError::Unavailable(format!(
                "the wanted state destroyed is recorded (revision {revision}), but revoking agent \
                 {agent}'s NATS credentials failed ({err}); the controller retries the revocation \
                 on its reconcile pass"
            )));
        }
        let Wanted { set_at, set_by, .. } = wanted;
        Ok(json(StatusCode::OK, &StateView { hive, agent, state, set_at, set_by, revision }))
    }

    /// One compare-and-set, retried on a lost race unless the client named the revision.
    async fn write_state(
        &self,
        hive: &HiveName,
        agent: &AgentName,
        wanted: &Wanted,
        if_match: Option<u64>,
    ) -> Result<u64, ApiError> {
        for _ in 0..CAS_ATTEMPTS {
            let current = self.wanted.get(hive, agent).await.map_err(unavailable)?;
            check_current(hive, agent, current.as_ref(), if_match)?;
            match self.wanted.put(hive, agent, wanted, current.as_ref().map(|c| c.revision)).await {
                Ok(revision) => return Ok(revision),
                Err(WriteError::Conflict) if if_match.is_none() => continue,
                Err(WriteError::Conflict) => {
                    return Err(conflict(format!(
                        "the wanted state of {agent} on {hive} changed meanwhile; re-read it (GET /api/agents) and try again"
                    )));
                }
                Err(WriteError::Nats(err)) => return Err(unavailable(err)),
            }
        }
        Err(conflict(format!("the wanted state of {agent} on {hive} keeps changing under this request; try again")))
    }
}

/// Refuses a change to a destroyed agent and an `If-Match` that is not the current revision.
fn check_current(
    hive: &HiveName,
    agent: &AgentName,
    current: Option<&Stored>,
    if_match: Option<u64>,
) -> Result<(), ApiError> {
    if let Some(current) = current
        && current.wanted.state == WantedState::Destroyed
    {
        return Err(conflict(format!(
            "agent {agent} on {hive} is destroyed, which is final (set by {} at {}); create a new \
             agent under another name",
            current.wanted.set_by, current.wanted.set_at
        )));
    }
    match (if_match, current) {
        (Some(expected), None) => Err(conflict(format!(
            "If-Match: {expected}, but no wanted state was ever stored for {agent} on {hive} (it \
             holds its default); send the change without If-Match"
        ))),
        (Some(expected), Some(current)) if current.revision != expected => Err(conflict(format!(
            "the wanted state of {agent} on {hive} is at revision {}, not {expected} (If-Match); \
             re-read it (GET /api/agents) and try again",
            current.revision
        ))),
        _ => Ok(()),
    }
}

fn conflict(message: String) -> ApiError {
    ApiError::Conflict { message, current: None }
}

/// `X-Set-By`: 1 to 64 printable ASCII characters; `api` when absent.
fn set_by(headers: &HeaderMap) -> Result<String, ApiError> {
    let Some(value) = headers.get(SET_BY_HEADER) else {
        return Ok(DEFAULT_SET_BY.to_owned());
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_SET_BY || !bytes.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(ApiError::BadRequest(format!(
            "X-Set-By must be 1 to {MAX_SET_BY} printable ASCII characters naming who sets the state, \
             e.g. X-Set-By: swarmctl"
        )));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}
