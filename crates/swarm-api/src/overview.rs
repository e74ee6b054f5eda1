//! `GET /api/overview`: the swarm in counts, what the UI's overview shows of its agents and hives. Its body stays the
//! same size whatever the number of agents, unlike the list it replaces for that page.

use std::collections::BTreeMap;

use hyperhive_hive_proto::agent_files::Turn;
use hyperhive_hive_proto::status::{ActualState, AgentStatus};
use hyperhive_hive_proto::turns::TurnOutcome;
use hyperhive_hive_proto::{AgentName, HiveName};
use serde::{Deserialize, Serialize};

use crate::work::LastTurn;

/// At most this many failed turns are listed.
pub const FAILED_TURNS_LISTED: usize = 10;

/// What an agent is doing, as its hive last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activity {
    /// Running a turn.
    Working,
    /// Running, waiting for a todo.
    Idle,
    /// Paused by its wanted state or its pause file.
    Paused,
    /// Crashed repeatedly; its hive gave up.
    Failed,
    /// Being started.
    Starting,
    /// Not running.
    Stopped,
    /// Its hive never reported it.
    Unknown,
}

impl Activity {
    /// What an agent whose hive reports `status` is doing (`None`: not reported).
    #[must_use]
    pub fn of(status: Option<&AgentStatus>) -> Self {
        let Some(status) = status else { return Activity::Unknown };
        let turn = status.turn.as_ref().map(|t| t.turn);
        match status.actual {
            ActualState::Failed => Activity::Failed,
            ActualState::Paused => Activity::Paused,
            _ if turn == Some(Turn::Paused) => Activity::Paused,
            ActualState::Starting => Activity::Starting,
            ActualState::Stopped => Activity::Stopped,
            ActualState::Running if turn == Some(Turn::Working) => Activity::Working,
            ActualState::Running => Activity::Idle,
        }
    }
}

/// Whether a turn that ended so is listed among the failed ones: it did not do its work, for a
/// reason other than an operator's cancel.
#[must_use]
pub fn is_failure(outcome: TurnOutcome) -> bool {
    matches!(outcome, TurnOutcome::Failed | TurnOutcome::TimedOut | TurnOutcome::NotStarted)
}

/// The body of `GET /api/overview`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overview {
    /// Agents on the roster.
    pub agents: u64,
    /// Agents by what they do; every agent counted once.
    pub activity: BTreeMap<Activity, u64>,
    /// Agents by how their last turn ended; those without one are in `no_turn_yet`.
    pub last_turns: BTreeMap<TurnOutcome, u64>,
    /// Agents without a finished turn.
    pub no_turn_yet: u64,
    /// The agents whose last turn failed ([`is_failure`]), the latest recorded first; at most
    /// [`FAILED_TURNS_LISTED`].
    pub failed_turns: Vec<FailedTurn>,
    /// Hives of the directory whose last status is fresh.
    pub hives_fresh: u64,
    /// Hives of the directory whose last status is older than 45 s, or that never reported.
    pub hives_stale: Vec<HiveName>,
}

/// An agent whose last turn failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedTurn {
    /// The agent.
    pub agent: AgentName,
    /// Its last turn.
    #[serde(flatten)]
    pub turn: LastTurn,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_hive_proto::agent_files::TurnState;
    use hyperhive_hive_proto::roster::Origin;
    use hyperhive_hive_proto::wanted::WantedState;

    fn status(actual: ActualState, turn: Option<Turn>) -> AgentStatus {
        AgentStatus {
            origin: Origin::Declared,
            wanted: WantedState::Up,
            actual,
            since: "2026-12-01T00:00:00Z".into(),
            restarts: 0,
            last_exit: None,
            log_tail: Vec::new(),
            turn: turn.map(|turn| TurnState { turn, todo_id: None, since: "2026-12-01T00:00:00Z".into() }),
            revision: None,
            problem: None,
        }
    }

    #[test]
    fn an_agent_is_doing_what_its_process_and_its_turn_say() {
        use ActualState as A;
        let cases = [
            (A::Running, Some(Turn::Working), Activity::Working),
            (A::Running, Some(Turn::Idle), Activity::Idle),
            (A::Running, None, Activity::Idle),
            (A::Running, Some(Turn::Paused), Activity::Paused),
            (A::Paused, Some(Turn::Working), Activity::Paused),
            (A::Failed, Some(Turn::Working), Activity::Failed),
            (A::Starting, None, Activity::Starting),
            (A::Stopped, None, Activity::Stopped),
        ];
        for (actual, turn, expected) in cases {
            assert_eq!(Activity::of(Some(&status(actual, turn))), expected, "{actual:?} with {turn:?}");
        }
        assert_eq!(Activity::of(None), Activity::Unknown);
    }

    #[test]
    fn counts_are_keyed_by_the_names_the_api_writes() {
        let overview = Overview {
            agents: 2,
            activity: BTreeMap::from([(Activity::Idle, 1), (Activity::Unknown, 1)]),
            last_turns: BTreeMap::from([(TurnOutcome::TimedOut, 1)]),
            no_turn_yet: 1,
            failed_turns: Vec::new(),
            hives_fresh: 1,
            hives_stale: vec![HiveName::parse("h2").unwrap()],
        };
        let json = serde_json::to_value(&overview).unwrap();
        assert_eq!(json["activity"], serde_json::json!({"idle": 1, "unknown": 1}));
        assert_eq!(json["last_turns"], serde_json::json!({"timed_out": 1}));
        assert_eq!(json["hives_stale"], serde_json::json!(["h2"]));
        assert_eq!(serde_json::from_value::<Overview>(json).unwrap(), overview);
    }
}
