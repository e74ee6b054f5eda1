//! How a hive runs one agent: the part of an agent's definition that is not secret. A declared
//! agent's spec comes from the host's configuration (`HIVE_C0RE_AGENTS_FILE`), a deployed one's
//! from its deploy message.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::AgentName;

/// The most environment variables a spec may set, and the longest value.
pub const MAX_ENV_VARS: usize = 64;
/// The longest environment value or turn command, in bytes.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;

/// How to run one agent's hive-agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// `HIVE_AGENT_TURN_COMMAND`: run through `sh -c` with the todo on stdin.
    pub turn_command: String,
    /// `HIVE_AGENT_SCHEDULE_TICK` (e.g. `10s`); hive-agent's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_tick: Option<String>,
    /// `HIVE_AGENT_TURN_TIMEOUT` (e.g. `1h`); hive-agent's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_timeout: Option<String>,
    /// Further environment for the agent's turns (names `[A-Z_][A-Z0-9_]*`, not `HIVE_*`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// Why a spec is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("agent {agent}: {problem}")]
pub struct SpecError {
    /// The agent.
    pub agent: String,
    /// What is wrong and how to fix it.
    pub problem: String,
}

impl AgentSpec {
    /// Checks what the type cannot: a non-empty turn command, sizes, environment names.
    ///
    /// # Errors
    /// [`SpecError`] saying what is wrong.
    pub fn validate(&self, agent: &AgentName) -> Result<(), SpecError> {
        let refuse = |problem: String| Err(SpecError { agent: agent.to_string(), problem });
        if self.turn_command.trim().is_empty() {
            return refuse("turn_command is empty; give the command each turn runs, e.g. \"claude -p\"".into());
        }
        if self.turn_command.len() > MAX_VALUE_BYTES {
            return refuse(format!("turn_command is longer than {MAX_VALUE_BYTES} bytes"));
        }
        if self.env.len() > MAX_ENV_VARS {
            return refuse(format!("{} environment variables; at most {MAX_ENV_VARS}", self.env.len()));
        }
        for (name, value) in &self.env {
            let well_formed = name.chars().next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
                && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !well_formed {
                return refuse(format!("environment name {name:?} must match [A-Z_][A-Z0-9_]*"));
            }
            if name.starts_with("HIVE_") {
                return refuse(format!("environment name {name} is reserved (HIVE_* is set by hive-c0re)"));
            }
            if value.len() > MAX_VALUE_BYTES || value.contains('\0') {
                return refuse(format!(
                    "environment value of {name} is longer than {MAX_VALUE_BYTES} bytes or holds NUL"
                ));
            }
        }
        Ok(())
    }
}

/// One entry of `HIVE_C0RE_AGENTS_FILE` (a JSON object, agent name -> entry): an agent declared
/// in the host's configuration, whose credential file the host provides:
/// `{"<agent>": {"spec": {"turn_command": ...}, "creds_file": "/abs/path"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredAgent {
    /// How to run it.
    pub spec: AgentSpec,
    /// Its NATS credential (`swarm-controller nats agent-creds`).
    pub creds_file: PathBuf,
    /// An environment file of the host's (systemd `EnvironmentFile=` syntax) with secret
    /// variables for its turns: hive-c0re reads it and writes its variables, under the ones the
    /// swarm sends, to the agent's env file ([`crate::env_secrets`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_file: Option<PathBuf>,
}

/// Why a declared agents file is refused.
#[derive(Debug, thiserror::Error)]
pub enum DeclaredError {
    /// Not JSON of the right shape.
    #[error(
        "{0}; the file is a JSON object mapping agent names to {{\"spec\": {{\"turn_command\": ...}}, \"creds_file\": ...}}"
    )]
    Shape(String),
    /// A key is not an agent name.
    #[error(transparent)]
    Name(#[from] hyperhive_schedule::NameError),
    /// An entry's spec is wrong.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A credential path is relative.
    #[error("agent {0}: creds_file must be an absolute path")]
    RelativeCreds(String),
    /// An environment file's path is relative.
    #[error("agent {0}: environment_file must be an absolute path")]
    RelativeEnvironmentFile(String),
}

/// Parses and checks the content of `HIVE_C0RE_AGENTS_FILE`.
///
/// # Errors
/// [`DeclaredError`] naming the first problem.
pub fn parse_declared(text: &str) -> Result<BTreeMap<AgentName, DeclaredAgent>, DeclaredError> {
    let raw: BTreeMap<String, DeclaredAgent> =
        serde_json::from_str(text).map_err(|e| DeclaredError::Shape(e.to_string()))?;
    let mut out = BTreeMap::new();
    for (name, agent) in raw {
        let name = AgentName::parse(&name)?;
        agent.spec.validate(&name)?;
        if !agent.creds_file.is_absolute() {
            return Err(DeclaredError::RelativeCreds(name.to_string()));
        }
        if agent.environment_file.as_ref().is_some_and(|f| !f.is_absolute()) {
            return Err(DeclaredError::RelativeEnvironmentFile(name.to_string()));
        }
        out.insert(name, agent);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_file_parses() {
        let text = r#"{"a": {"spec": {"turn_command": "cat", "schedule_tick": "1s", "env": {"X_1": "y"}}, "creds_file": "/c/a.creds"}}"#;
        let parsed = parse_declared(text).unwrap();
        let a = &parsed[&AgentName::parse("a").unwrap()];
        assert_eq!(a.spec.turn_command, "cat");
        assert_eq!(a.creds_file, PathBuf::from("/c/a.creds"));
    }

    #[test]
    fn bad_declared_files_say_what_is_wrong() {
        let cases = [
            ("[]", "JSON object"),
            (r#"{"A": {"spec": {"turn_command": "cat"}, "creds_file": "/c"}}"#, "invalid agent name"),
            (r#"{"a": {"spec": {"turn_command": " "}, "creds_file": "/c"}}"#, "turn_command is empty"),
            (r#"{"a": {"spec": {"turn_command": "cat"}, "creds_file": "c"}}"#, "absolute"),
            (
                r#"{"a": {"spec": {"turn_command": "cat"}, "creds_file": "/c", "environment_file": "e"}}"#,
                "environment_file must be an absolute path",
            ),
            (
                r#"{"a": {"spec": {"turn_command": "cat", "env": {"HIVE_AGENT_NAME": "x"}}, "creds_file": "/c"}}"#,
                "reserved",
            ),
            (r#"{"a": {"spec": {"turn_command": "cat", "env": {"a b": "x"}}, "creds_file": "/c"}}"#, "must match"),
            (r#"{"a": {"spec": {"turn_command": "cat"}, "creds_file": "/c", "colour": 1}}"#, "unknown field"),
        ];
        for (text, needle) in cases {
            let err = parse_declared(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
