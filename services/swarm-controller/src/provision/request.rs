//! The body of `POST /api/agents` and everything checked before anything is stored.

use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::labels::{Labels, check_labels};
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::{AgentName, HiveName};

/// `{"name": ..., "hive": ..., "spec": {...}}`: the API's wire type, shared with swarmctl.
pub use hyperhive_swarm_api::agents::CreateAgentRequest as CreateRequest;

/// A request that passed every check.
#[derive(Debug, Clone)]
pub struct ValidRequest {
    /// The agent.
    pub name: AgentName,
    /// Its hive, in the directory with an xkey.
    pub hive: HiveName,
    /// Its spec, valid.
    pub spec: AgentSpec,
    /// Its labels, valid.
    pub labels: Labels,
}

/// Why an agent is not created; nothing is stored or queued.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The request is malformed or breaks a rule (400).
    #[error("{0}")]
    Invalid(String),
    /// No such hive in the directory (404).
    #[error("no hive {0} in the hive directory; see GET /api/hives")]
    UnknownHive(String),
    /// The hive cannot take deploys: it has no xkey (409).
    #[error(
        "hive {0} has no xkey in the hive directory, so no deploy can be sealed to it; add its public \
         key (from `hive-c0re keygen`) to SWARM_HIVES_FILE"
    )]
    HiveWithoutXkey(String),
    /// The name is on the roster already (409).
    #[error("an agent named {0} exists already (see GET /api/agents); names are never reused, choose another")]
    Taken(String),
    /// Provisioning is not configured on this controller (503).
    #[error("{0}")]
    NotConfigured(String),
    /// The roster could not be written (503).
    #[error("the roster could not be written: {0}")]
    Store(String),
}

/// What the controller checks of a create request before anything is stored (a trait: the
/// request is a wire type of another crate).
pub trait CreateChecks: Sized {
    /// Parses a body.
    ///
    /// # Errors
    /// [`CreateError::Invalid`] saying what is wrong and what to send.
    fn parse(body: &[u8]) -> Result<Self, CreateError>;

    /// Checks the name, the spec and the hive.
    ///
    /// # Errors
    /// [`CreateError`].
    fn validate(self, hives: &HiveDirectory) -> Result<ValidRequest, CreateError>;
}

impl CreateChecks for CreateRequest {
    fn parse(body: &[u8]) -> Result<Self, CreateError> {
        serde_json::from_slice(body).map_err(|e| {
            CreateError::Invalid(format!(
                "malformed request body: {e}; send {{\"name\": \"alpha\", \"hive\": \"h1\", \"spec\": \
                 {{\"turn_command\": \"claude -p\"}}}}"
            ))
        })
    }

    fn validate(self, hives: &HiveDirectory) -> Result<ValidRequest, CreateError> {
        let name = AgentName::parse(&self.name).map_err(|e| CreateError::Invalid(e.to_string()))?;
        let hive = HiveName::parse(&self.hive).map_err(|e| CreateError::Invalid(e.to_string()))?;
        self.spec.validate(&name).map_err(|e| CreateError::Invalid(e.to_string()))?;
        check_labels(&self.labels).map_err(|e| CreateError::Invalid(e.to_string()))?;
        let entry = hives.get(&hive).ok_or_else(|| CreateError::UnknownHive(hive.to_string()))?;
        if entry.xkey.is_none() {
            return Err(CreateError::HiveWithoutXkey(hive.to_string()));
        }
        Ok(ValidRequest { name, hive, spec: self.spec, labels: self.labels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_hive_proto::directory::parse_directory;

    fn hives() -> HiveDirectory {
        let xkey = nkeys::XKey::new().public_key();
        parse_directory(&format!(r#"{{"h1": {{"xkey": "{xkey}"}}, "h2": {{}}}}"#)).unwrap()
    }

    fn check(body: &str) -> Result<ValidRequest, CreateError> {
        CreateRequest::parse(body.as_bytes())?.validate(&hives())
    }

    #[test]
    fn a_good_request_passes() {
        let valid =
            check(r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": "cat"}, "labels": {"team": "infra"}}"#)
                .unwrap();
        assert_eq!((valid.name.as_str(), valid.hive.as_str()), ("alpha", "h1"));
        assert_eq!(valid.labels.get("team").map(String::as_str), Some("infra"));
    }

    #[test]
    fn each_bad_request_says_what_is_wrong() {
        let cases = [
            ("", "malformed request body"),
            ("[]", "malformed request body"),
            (r#"{"name": "alpha", "hive": "h1"}"#, "missing field `spec`"),
            (r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": "cat"}, "x": 1}"#, "unknown field `x`"),
            (r#"{"name": "Alpha", "hive": "h1", "spec": {"turn_command": "cat"}}"#, "Alpha"),
            (r#"{"name": "alpha", "hive": "H!", "spec": {"turn_command": "cat"}}"#, "H!"),
            (r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": " "}}"#, "turn_command is empty"),
            (r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": "c", "env": {"HIVE_X": "1"}}}"#, "reserved"),
            (
                r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": "c"}, "labels": {"Team": "x"}}"#,
                "label key \"Team\"",
            ),
            (
                r#"{"name": "alpha", "hive": "h1", "spec": {"turn_command": "c"}, "labels": {"team": 1}}"#,
                "invalid type",
            ),
        ];
        for (body, needle) in cases {
            let err = check(body).unwrap_err();
            assert!(matches!(err, CreateError::Invalid(_)), "{body}: {err:?}");
            assert!(err.to_string().contains(needle), "{body}: {err}");
        }
        let unknown = check(r#"{"name": "alpha", "hive": "h9", "spec": {"turn_command": "cat"}}"#).unwrap_err();
        assert!(matches!(unknown, CreateError::UnknownHive(ref h) if h == "h9"), "{unknown:?}");
        let keyless = check(r#"{"name": "alpha", "hive": "h2", "spec": {"turn_command": "cat"}}"#).unwrap_err();
        assert!(matches!(keyless, CreateError::HiveWithoutXkey(_)), "{keyless:?}");
    }
}
