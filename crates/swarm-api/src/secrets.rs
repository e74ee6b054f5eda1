//! Secret variables on the wire (docs/swarm/secrets.md): a listing line of
//! `GET /api/agents/{name}/secrets` and `GET /api/secrets`, and the answer to a change. A value
//! is sent as the raw body of a `PUT` and never comes back: nothing here holds one.

use hyperhive_jobq::JobId;
use serde::{Deserialize, Serialize};

/// Where an agent's variable comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretFrom {
    /// Set for this agent (`PUT /api/agents/{name}/secrets/{VAR}`).
    Agent,
    /// The swarm's default (`PUT /api/secrets/{VAR}`), which the agent has no value of its own for.
    Swarm,
}

/// One variable as listed: its name, when it was set, and (in an agent's listing) where its
/// value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretListed {
    /// The variable's name.
    pub name: String,
    /// When its value was last set, RFC 3339.
    pub set_at: String,
    /// `agent` or `swarm`.
    pub from: SecretFrom,
}

/// The answer to a `PUT` or `DELETE` of a variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretChanged {
    /// The variable's name.
    pub name: String,
    /// `agent` or `swarm`: which value was set or removed.
    pub scope: SecretFrom,
    /// Whether a value is stored now (`false` after a `DELETE`).
    pub stored: bool,
    /// The `credentials` jobs sending the change to the agents' hives, one per agent (see
    /// `GET /api/jobq/graph`).
    pub deliveries: Vec<JobId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_line_reads_as_documented() {
        let line: SecretListed =
            serde_json::from_str(r#"{"name":"API_TOKEN","set_at":"2026-12-01T00:00:00Z","from":"swarm"}"#).unwrap();
        assert_eq!(line.from, SecretFrom::Swarm);
        let changed = SecretChanged {
            name: "API_TOKEN".into(),
            scope: SecretFrom::Agent,
            stored: true,
            deliveries: vec![JobId::parse("a.secrets.1").unwrap()],
        };
        let json = serde_json::to_value(&changed).unwrap();
        assert_eq!(json["scope"], "agent");
        assert_eq!(json["deliveries"][0], "a.secrets.1");
    }
}
