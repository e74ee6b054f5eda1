//! The roster: KV `agents`, key `<agent>`, one document per agent the swarm knows. Public facts
//! only: a credential, a token or a key never appears here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::HiveName;
use crate::spec::AgentSpec;

/// How the agent came to exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Declared in a hive host's configuration (`services.hyperhive.agents.<name>`); the
    /// controller learns of it from the hive's status.
    Declared,
    /// Created through the swarm's API and deployed to its hive.
    Created,
}

/// Where one provisioning step stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum StepProgress {
    /// Not started yet.
    Pending,
    /// Running now.
    Running {
        /// Since when (RFC 3339).
        since: String,
    },
    /// Finished.
    Done {
        /// When (RFC 3339).
        at: String,
    },
    /// Not needed: the system the step provisions in is not configured for this swarm.
    Skipped {
        /// When (RFC 3339).
        at: String,
        /// Which setting would enable it.
        reason: String,
    },
    /// Failed; the text says why and what to do.
    Failed {
        /// When (RFC 3339).
        at: String,
        /// Why.
        error: String,
    },
}

/// The public parts of an agent's identities; each is absent until provisioned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identities {
    /// SSO user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sso_user: Option<String>,
    /// Forge user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge_user: Option<String>,
    /// The agent's config repository on the forge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_repo: Option<String>,
    /// Matrix user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_user: Option<String>,
    /// Serial of the agent's store certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_cert_serial: Option<String>,
    /// When the store certificate expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_cert_expires_at: Option<String>,
    /// When the agent's queue (NATS) credential expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_creds_expires_at: Option<String>,
}

/// The value of `agents` key `<agent>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterEntry {
    /// The hive the agent lives on.
    pub hive: HiveName,
    /// Declared on the hive, or created through the API.
    pub origin: Origin,
    /// When the swarm first knew of it (RFC 3339).
    pub created_at: String,
    /// Provisioning progress per step name (empty for a declared agent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provisioning: BTreeMap<String, StepProgress>,
    /// Public parts of its identities.
    #[serde(default)]
    pub identities: Identities,
    /// How the agent runs, for a created agent (what its deploy message carries; not secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<AgentSpec>,
    /// The last revision of a deploy or credentials message sent to its hive (0: none yet).
    /// Raised before each send, so no two messages about the agent share a revision.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: u64,
    /// The operator's labels (`team=infra`), to find and group agents.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StepProgress {
    /// Whether the step needs no more work (done, or skipped as not configured).
    pub fn is_finished(&self) -> bool {
        matches!(self, StepProgress::Done { .. } | StepProgress::Skipped { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_unknown_fields_are_refused() {
        let entry = RosterEntry {
            hive: HiveName::parse("h").unwrap(),
            origin: Origin::Created,
            created_at: "2026-01-01T00:00:00Z".into(),
            provisioning: BTreeMap::from([(
                "forge-user".into(),
                StepProgress::Done { at: "2026-01-01T00:00:01Z".into() },
            )]),
            identities: Identities { forge_user: Some("a".into()), ..Identities::default() },
            spec: None,
            revision: 2,
            labels: BTreeMap::from([("team".into(), "infra".into())]),
        };
        let text = serde_json::to_string(&entry).unwrap();
        assert_eq!(serde_json::from_str::<RosterEntry>(&text).unwrap(), entry);
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["token"] = "secret".into();
        assert!(serde_json::from_value::<RosterEntry>(value).is_err());
    }
}
