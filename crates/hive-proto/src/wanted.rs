//! Wanted state: what the controller declares for one agent on its hive.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{AgentName, HiveName};

/// The four states the controller may declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WantedState {
    /// Runs and works: takes todos and fires slots.
    Up,
    /// Stopped; its state directory and credentials are kept.
    Offline,
    /// Running, but takes no todos and fires no slots. On `up` again it behaves as after
    /// downtime: waiting todos run in order, the latest missed slot of each schedule fires once.
    Paused,
    /// Stopped, its state directory removed, its credential revoked. Final.
    Destroyed,
}

impl WantedState {
    /// Every state, in the order documentation lists them.
    pub const ALL: [WantedState; 4] =
        [WantedState::Up, WantedState::Offline, WantedState::Paused, WantedState::Destroyed];

    /// The state as written in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            WantedState::Up => "up",
            WantedState::Offline => "offline",
            WantedState::Paused => "paused",
            WantedState::Destroyed => "destroyed",
        }
    }
}

impl fmt::Display for WantedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the four states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {0:?}; the state is one of up, offline, paused, destroyed")]
pub struct UnknownState(pub String);

impl FromStr for WantedState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WantedState::ALL.into_iter().find(|w| w.as_str() == s).ok_or_else(|| UnknownState(s.chars().take(64).collect()))
    }
}

/// The value of `agent-wanted` key `<hive>.<agent>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wanted {
    /// The declared state.
    pub state: WantedState,
    /// When it was declared (RFC 3339, UTC).
    pub set_at: String,
    /// Who declared it (free text the controller records, e.g. `swarmctl`, `api`).
    pub set_by: String,
}

/// `<hive>.<agent>`: the agent's key in `agent-wanted`.
pub fn wanted_key(hive: &HiveName, agent: &AgentName) -> String {
    format!("{hive}.{agent}")
}

/// Splits a key of `agent-wanted` into its hive and agent; `None` for anything else.
pub fn parse_wanted_key(key: &str) -> Option<(HiveName, AgentName)> {
    let (hive, agent) = key.split_once('.')?;
    Some((HiveName::parse(hive).ok()?, AgentName::parse(agent).ok()?))
}

/// The state an agent is held in while no wanted state was ever written for it: an agent
/// declared in a host's configuration runs; one deployed through the swarm waits, paused, until
/// the controller says otherwise.
pub fn default_wanted(origin: crate::roster::Origin) -> WantedState {
    match origin {
        crate::roster::Origin::Declared => WantedState::Up,
        crate::roster::Origin::Created => WantedState::Paused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_refuse_the_rest() {
        for state in WantedState::ALL {
            assert_eq!(state.as_str().parse::<WantedState>(), Ok(state));
            assert_eq!(serde_json::to_string(&state).unwrap(), format!("\"{state}\""));
        }
        for bad in ["", "UP", "running", "stopped", "up "] {
            let err = bad.parse::<WantedState>().unwrap_err().to_string();
            assert!(err.contains("up, offline, paused, destroyed"), "{err}");
        }
    }

    #[test]
    fn keys_split_back_into_hive_and_agent() {
        let (h, a) = (HiveName::parse("h-1").unwrap(), AgentName::parse("a").unwrap());
        assert_eq!(wanted_key(&h, &a), "h-1.a");
        assert_eq!(parse_wanted_key("h-1.a"), Some((h, a)));
        for bad in ["h", "h.", ".a", "h.a.b", "H.a", "h.A"] {
            assert_eq!(parse_wanted_key(bad), None, "{bad}");
        }
    }
}
