//! Agents on the wire: the roster as `GET /api/agents` lists it, the body and answer of
//! `PUT /api/hives/{hive}/agents/{agent}/state`, and the body and answer of `POST /api/agents`.

use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::status::AgentStatus;
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use serde::{Deserialize, Serialize};

/// A wanted state as the API shows it: the stored one with its revision, or the default an
/// agent is held in while none was written (`revision`, `set_at`, `set_by` null).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WantedView {
    /// The state.
    pub state: WantedState,
    /// When it was set (RFC 3339).
    pub set_at: Option<String>,
    /// Who set it (`X-Set-By`).
    pub set_by: Option<String>,
    /// Its revision in `agent-wanted`: the `If-Match` value of the next change.
    pub revision: Option<u64>,
}

/// One agent in `GET /api/agents`: its roster entry, wanted state and what its hive reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentView {
    /// The agent.
    pub name: AgentName,
    /// Its roster entry (hive, origin, identities...), flattened beside the name.
    #[serde(flatten)]
    pub entry: RosterEntry,
    /// What the controller declares for it.
    pub wanted: WantedView,
    /// Its part of its hive's last status (its current turn included); null when the hive
    /// never reported it.
    pub actual: Option<AgentStatus>,
    /// Its last finished turn; null before its first (or when its history is unreadable).
    #[serde(default)]
    pub last_turn: Option<crate::work::LastTurn>,
}

/// The body of a wanted state change: `{"state": "up"|"offline"|"paused"|"destroyed"}`.
///
/// The state travels as text so an unknown one is answered with the list of states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateRequest {
    /// The state wanted.
    pub state: String,
}

impl StateRequest {
    /// The body asking for `state`.
    pub fn new(state: WantedState) -> Self {
        Self { state: state.as_str().to_owned() }
    }
}

/// The answer to a state change: the state as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateView {
    /// The hive.
    pub hive: HiveName,
    /// The agent.
    pub agent: AgentName,
    /// The state stored.
    pub state: WantedState,
    /// When (RFC 3339).
    pub set_at: String,
    /// By whom.
    pub set_by: String,
    /// Its revision.
    pub revision: u64,
}

/// The body of `POST /api/agents`: `{"name": ..., "hive": ..., "spec": {...}}`.
///
/// Name and hive travel as text so the controller names what is wrong with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentRequest {
    /// The new agent's name.
    pub name: String,
    /// The hive it will live on.
    pub hive: String,
    /// How it runs.
    pub spec: AgentSpec,
    /// Its labels (`{"team": "infra"}`), to find and group agents.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: hyperhive_hive_proto::labels::Labels,
}

/// The answer to `PATCH /api/agents/{name}/labels`: the agent's labels after the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelsView {
    /// The agent.
    pub agent: AgentName,
    /// Its labels now.
    pub labels: hyperhive_hive_proto::labels::Labels,
}

/// The answer to `POST /api/agents` (202): what to watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCreated {
    /// The agent.
    pub agent: String,
    /// Its hive.
    pub hive: String,
    /// The provisioning jobs, in the order they may run.
    pub jobs: Vec<String>,
    /// Where the graph of this agent's jobs is served.
    pub graph: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_state_change_has_the_field_names_the_controller_reads() {
        let request = StateRequest::new(WantedState::Paused);
        assert_eq!(serde_json::to_value(&request).unwrap(), json!({"state": "paused"}));
        assert_eq!(serde_json::from_value::<StateRequest>(json!({"state": "paused"})).unwrap(), request);
        assert!(serde_json::from_value::<StateRequest>(json!({"state": "up", "x": 1})).is_err());
        let answer = StateView {
            hive: HiveName::parse("h1").unwrap(),
            agent: AgentName::parse("alpha").unwrap(),
            state: WantedState::Up,
            set_at: "2026-11-30T09:00:00Z".into(),
            set_by: "swarmctl".into(),
            revision: 4,
        };
        let wire = json!({
            "hive": "h1", "agent": "alpha", "state": "up", "set_at": "2026-11-30T09:00:00Z",
            "set_by": "swarmctl", "revision": 4,
        });
        assert_eq!(serde_json::to_value(&answer).unwrap(), wire);
        assert_eq!(serde_json::from_value::<StateView>(wire).unwrap(), answer);
    }

    #[test]
    fn an_agent_create_has_the_field_names_the_controller_reads() {
        let wire = json!({"name": "alpha", "hive": "h1", "spec": {"turn_command": "claude -p"}});
        let request: CreateAgentRequest = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!((request.name.as_str(), request.hive.as_str()), ("alpha", "h1"));
        assert_eq!(request.spec.turn_command, "claude -p");
        assert_eq!(serde_json::to_value(&request).unwrap(), wire);
        let err = serde_json::from_value::<CreateAgentRequest>(json!({"name": "a", "hive": "h"})).unwrap_err();
        assert!(err.to_string().contains("missing field `spec`"), "{err}");
        let created = AgentCreated {
            agent: "alpha".into(),
            hive: "h1".into(),
            jobs: vec!["alpha.sso".into()],
            graph: "/api/jobq/graph?agent=alpha".into(),
        };
        let wire =
            json!({"agent": "alpha", "hive": "h1", "jobs": ["alpha.sso"], "graph": "/api/jobq/graph?agent=alpha"});
        assert_eq!(serde_json::to_value(&created).unwrap(), wire);
        assert_eq!(serde_json::from_value::<AgentCreated>(wire).unwrap(), created);
    }

    #[test]
    fn a_listed_agent_is_its_roster_entry_beside_its_name() {
        let wire = json!({
            "name": "alpha", "hive": "h1", "origin": "declared", "created_at": "2026-11-30T09:00:00Z",
            "identities": {},
            "wanted": {"state": "up", "set_at": null, "set_by": null, "revision": null},
            "actual": null,
            "last_turn": {"todo_id": "t1", "source": "operator:swarmctl", "outcome": "failed", "exit_code": 3,
                          "ended_at": "2026-11-30T09:01:00Z"},
        });
        let view: AgentView = serde_json::from_value(wire.clone()).unwrap();
        let last = view.last_turn.as_ref().unwrap();
        assert_eq!((last.outcome, last.exit_code), (hyperhive_hive_proto::turns::TurnOutcome::Failed, Some(3)));
        assert_eq!((view.name.as_str(), view.entry.hive.as_str()), ("alpha", "h1"));
        assert_eq!((view.wanted.state, view.wanted.revision), (WantedState::Up, None));
        assert_eq!(serde_json::to_value(&view).unwrap(), wire);
    }
}
