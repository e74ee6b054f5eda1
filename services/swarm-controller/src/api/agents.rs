//! `/api/agents` and `PUT /api/hives/{hive}/agents/{agent}/state`: the roster joined with wanted
//! and actual state, and the one writer of wanted state.

use hyperhive_hive_proto::agent_files::TurnState;
use hyperhive_hive_proto::labels::merge;
use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_hive_proto::status::{ActualState, ExitInfo, HiveStatus};
use hyperhive_hive_proto::wanted::{WantedState, default_wanted};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_swarm_api::agents::{AgentView, LabelsView, StateRequest, StateView, WantedView};
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use super::hives::{parse_hive, unavailable};
use hyperhive_swarm_api::roles::Role;
use hyperhive_swarm_api::work::LastTurn;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::page::AgentsQuery;
use super::{ApiError, json};
use crate::clock::Clock;
use crate::lifecycle::hives::{freshness, read_all, read_of};
use crate::lifecycle::roster::Roster;
use crate::lifecycle::state_change::{StateChangeError, StateChanger};
use crate::lifecycle::wanted::Stored;
use crate::lifecycle::wanted::WantedStore;
use crate::provision::Provisioner;
use crate::provision::health::AgentHealth;
use crate::work::history::Histories;

/// What a refused state change body is told to send instead.
pub(super) const SEND_STATE: &str = r#"send {"state": "up"|"offline"|"paused"|"destroyed"}"#;

/// A wanted state as the API shows it: the stored one with its revision, or the default an
/// agent is held in while none was written (`revision`, `set_at`, `set_by` null).
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

/// What the agent routes need.
#[derive(Debug, Clone)]
pub struct AgentsApi {
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// Reads `hive-status`.
    pub js: async_nats::jetstream::Context,
    /// The age of hive statuses.
    pub clock: Arc<dyn Clock>,
    /// Credential health, when provisioning is configured.
    pub provisioner: Option<Arc<Provisioner>>,
    /// The one writer of wanted state.
    pub state: StateChanger,
    /// The agents' turn histories, for each one's last turn.
    pub histories: Histories,
}

/// Last-turn reads in flight at once while listing agents.
const LAST_TURN_READS: usize = 32;

/// Wanted-state and status reads in flight at once for a page read key by key.
const KEY_READS_IN_FLIGHT: usize = 32;

/// A page holding less than this share of the roster (1/N) reads its agents' wanted states and
/// hive statuses key by key; a larger one reads the whole buckets, which then costs fewer round
/// trips. With the roster read from memory, a page's cost follows its size, not the swarm's.
const KEY_READS_BELOW_SHARE: usize = 4;

/// Whether a page of `page` agents of a roster of `agents` reads their states key by key.
fn reads_by_key(page: usize, agents: usize) -> bool {
    page.saturating_mul(KEY_READS_BELOW_SHARE) < agents
}

impl AgentsApi {
    /// `GET /api/agents[?limit=&after=&hive=]`: the page's agents with their wanted and actual
    /// state and last turn (read for the page's agents only).
    pub(super) async fn list_agents(&self, query: &str) -> Result<Response, ApiError> {
        let query = AgentsQuery::parse(query)?;
        let (roster, by_key) = self.page(&query).await?;
        Ok(json(StatusCode::OK, &self.views(roster, by_key).await?))
    }

    /// `GET /api/agents/{name}`: one agent as the list shows it, read by its own keys.
    pub(super) async fn get_agent(&self, agent: &str) -> Result<Response, ApiError> {
        let agent = AgentName::parse(agent).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let Some(entry) = self.roster.get(&agent).await.map_err(unavailable)? else {
            return Err(ApiError::NotFound(format!("no agent {agent} on the roster; GET /api/agents lists them")));
        };
        let mut views = self.views(vec![(agent, entry)], true).await?;
        Ok(json(StatusCode::OK, &views.pop()))
    }

    /// `roster`'s agents with their wanted and actual state and last turn, their states read
    /// key by key or from the whole buckets.
    async fn views(&self, roster: Vec<(AgentName, RosterEntry)>, by_key: bool) -> Result<Vec<AgentView>, ApiError> {
        let wanted = self.wanted_of(&roster, by_key).await?;
        let mut statuses = self.statuses_of(&roster, by_key).await?;
        let last_turns = self.last_turns(roster.iter().map(|(name, _)| name.clone()).collect()).await;
        Ok(roster
            .into_iter()
            .map(|(name, entry)| {
                let stored = wanted.get(&(entry.hive.clone(), name.clone()));
                let actual = statuses.get_mut(&entry.hive).and_then(|s| s.agents.remove(&name));
                let last_turn = last_turns.get(&name).cloned();
                AgentView { wanted: wanted_view(stored, &entry), actual, entry, name, last_turn }
            })
            .collect())
    }

    /// The roster's entries `query` asks for, from the roster's index (the bucket when the index
    /// does not follow it), and whether their states are read key by key.
    async fn page(&self, query: &AgentsQuery) -> Result<(Vec<(AgentName, RosterEntry)>, bool), ApiError> {
        let paged = |all: &BTreeMap<AgentName, RosterEntry>| {
            let page = query.page(all, |e| &e.hive);
            let by_key = reads_by_key(page.len(), all.len());
            (page, by_key)
        };
        match self.roster.index().read(paged) {
            Some(page) => Ok(page),
            None => Ok(paged(&self.roster.list().await.map_err(unavailable)?)),
        }
    }

    /// The wanted states of `page`'s agents: a key read each, or one read of the whole bucket.
    async fn wanted_of(
        &self,
        page: &[(AgentName, RosterEntry)],
        by_key: bool,
    ) -> Result<BTreeMap<(HiveName, AgentName), Stored>, ApiError> {
        use futures::StreamExt;
        if !by_key {
            return self.wanted.list().await.map_err(unavailable);
        }
        let keys: Vec<(HiveName, AgentName)> =
            page.iter().map(|(name, entry)| (entry.hive.clone(), name.clone())).collect();
        let reads = keys.into_iter().map(|(hive, name)| async move {
            let stored = self.wanted.get(&hive, &name).await;
            ((hive, name), stored)
        });
        let mut reads = futures::stream::iter(reads).buffer_unordered(KEY_READS_IN_FLIGHT);
        let mut found = BTreeMap::new();
        while let Some((key, stored)) = reads.next().await {
            if let Some(stored) = stored.map_err(unavailable)? {
                found.insert(key, stored);
            }
        }
        Ok(found)
    }

    /// The statuses of the hives of `page`'s agents: a key read each, or one read of every
    /// hive's.
    async fn statuses_of(
        &self,
        page: &[(AgentName, RosterEntry)],
        by_key: bool,
    ) -> Result<BTreeMap<HiveName, HiveStatus>, ApiError> {
        if by_key {
            let hives: BTreeSet<HiveName> = page.iter().map(|(_, entry)| entry.hive.clone()).collect();
            read_of(&self.js, hives).await.map_err(unavailable)
        } else {
            read_all(&self.js).await.map_err(unavailable)
        }
    }

    /// Each agent's last finished turn, read a few at a time; an agent whose history cannot be
    /// read is shown without one (the list is still answered).
    async fn last_turns(&self, agents: Vec<AgentName>) -> HashMap<AgentName, LastTurn> {
        use futures::StreamExt;
        let reads = agents.into_iter().map(|agent| async move {
            let last = self.histories.last(&agent).await;
            (agent, last)
        });
        let mut found = HashMap::new();
        let mut reads = futures::stream::iter(reads).buffer_unordered(LAST_TURN_READS);
        while let Some((agent, last)) = reads.next().await {
            match last {
                Ok(Some((_, record))) => {
                    found.insert(agent, LastTurn::from(&record));
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(%agent, "agent listed without its last turn: {e}"),
            }
        }
        found
    }

    /// `GET /api/agents/status[?limit=&after=&hive=]`: the live part of the page's agents.
    pub(super) async fn agents_status(&self, query: &str) -> Result<Response, ApiError> {
        let query = AgentsQuery::parse(query)?;
        let (roster, by_key) = self.page(&query).await?;
        let mut statuses = self.statuses_of(&roster, by_key).await?;
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

    /// Changes the agent's labels by a JSON merge patch (`{"team": "infra", "old": null}`), as a
    /// compare-and-set on its roster entry: a concurrent change of another label is kept.
    pub(super) async fn patch_labels(&self, agent: &str, body: &[u8]) -> Result<Response, ApiError> {
        const SEND: &str = r#"send a JSON object of label keys to strings (set) or null (remove), e.g. {"team": "infra", "old": null}"#;
        let agent = AgentName::parse(agent).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let patch: BTreeMap<String, Option<String>> = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request body: {e}; {SEND}")))?;
        if !self.roster.contains(&agent).await.map_err(unavailable)? {
            return Err(ApiError::NotFound(format!("no agent {agent} on the roster")));
        }
        let entry = self
            .roster
            .try_update(&agent, |entry| merge(&entry.labels, &patch).map(|labels| entry.labels = labels))
            .await
            .map_err(unavailable)?
            .map_err(|refused| ApiError::BadRequest(refused.to_string()))?;
        Ok(json(StatusCode::OK, &LabelsView { agent, labels: entry.labels }))
    }

    /// Parses the request, then hands it to the one writer of wanted state
    /// ([`StateChanger::set`]).
    pub(super) async fn set_state(
        &self,
        hive: &str,
        agent: &str,
        caller: &super::Caller,
        set_by: String,
        if_match: Option<u64>,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let hive = parse_hive(hive)?;
        let agent = AgentName::parse(agent).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let request: StateRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request body: {e}; {SEND_STATE}")))?;
        let state: WantedState = request
            .state
            .parse()
            .map_err(|e: hyperhive_hive_proto::wanted::UnknownState| ApiError::BadRequest(e.to_string()))?;
        if state == WantedState::Destroyed {
            caller.allows(Role::Admin, "destroying an agent")?;
        }
        let changed = self.state.set(&hive, &agent, state, set_by, if_match).await?;
        let revision = changed.revision;
        let (set_at, set_by) = (changed.wanted.set_at, changed.wanted.set_by);
        Ok(json(StatusCode::OK, &StateView { hive, agent, state, set_at, set_by, revision }))
    }
}

impl From<StateChangeError> for ApiError {
    fn from(err: StateChangeError) -> Self {
        let message = err.to_string();
        match err {
            StateChangeError::UnknownHive(_)
            | StateChangeError::OnAnotherHive { .. }
            | StateChangeError::NotOnRoster(_) => ApiError::NotFound(message),
            StateChangeError::Conflict(_) => ApiError::Conflict { message, current: None },
            StateChangeError::Unavailable(_) | StateChangeError::RevocationPending { .. } => {
                ApiError::Unavailable(message)
            }
        }
    }
}
