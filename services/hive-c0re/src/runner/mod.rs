//! How an agent's hive-agent is started, watched and stopped. Two runners behind one trait:
//! [`process::ProcessRunner`] (children of hive-c0re) and [`systemd::SystemdRunner`] (transient
//! units `hive-agent-<name>` with the hardening of modules/hive-agent.nix).
//!
//! On a restart of hive-c0re, [`Runner::recover`] runs for every agent before anything starts:
//! the process runner ends what its previous run left (so no agent runs twice and none is
//! orphaned), the systemd runner adopts a unit that is still active.

pub mod process;
pub mod systemd;
pub mod unit_credentials;

use std::future::Future;
use std::path::PathBuf;

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::agent_files::PAUSE_FILE_VAR;
use hyperhive_hive_proto::env_secrets::{ENV_FILE, ENV_FILE_VAR};
use hyperhive_hive_proto::spec::AgentSpec;

/// Everything needed to start one agent, whatever the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The agent.
    pub agent: AgentName,
    /// The swarm's NATS URL.
    pub nats_url: String,
    /// The agent's `.creds` file on this host.
    pub creds: PathBuf,
    /// Further secret files (deployed agents), by name -> path.
    pub secret_files: Vec<(String, PathBuf)>,
    /// The agent's env file on this host (its secret variables,
    /// [`hyperhive_hive_proto::env_secrets`]), which may not exist yet: hive-agent then runs
    /// its turns without secret variables.
    pub env_file: Option<PathBuf>,
    /// The pause file.
    pub pause_file: PathBuf,
    /// How to run it.
    pub spec: AgentSpec,
}

impl Launch {
    /// The agent's environment, given where the runner puts its credential, its state and its
    /// secrets: the `HIVE_AGENT_*` settings first, then the spec's own variables.
    pub fn env(&self, creds: &str, state_dir: &str, secrets_dir: &str) -> Vec<(String, String)> {
        let mut env = vec![
            ("HIVE_AGENT_NAME".to_owned(), self.agent.to_string()),
            ("HIVE_AGENT_NATS_URL".to_owned(), self.nats_url.clone()),
            ("HIVE_AGENT_CREDS".to_owned(), creds.to_owned()),
            ("HIVE_AGENT_STATE_DIR".to_owned(), state_dir.to_owned()),
            ("HIVE_AGENT_TURN_COMMAND".to_owned(), self.spec.turn_command.clone()),
            (PAUSE_FILE_VAR.to_owned(), self.pause_file.display().to_string()),
        ];
        if let Some(tick) = &self.spec.schedule_tick {
            env.push(("HIVE_AGENT_SCHEDULE_TICK".to_owned(), tick.clone()));
        }
        if let Some(timeout) = &self.spec.turn_timeout {
            env.push(("HIVE_AGENT_TURN_TIMEOUT".to_owned(), timeout.clone()));
        }
        if !self.secret_files.is_empty() {
            env.push(("HIVE_AGENT_SECRETS_DIR".to_owned(), secrets_dir.to_owned()));
        }
        if self.env_file.is_some() {
            env.push((ENV_FILE_VAR.to_owned(), format!("{secrets_dir}/{ENV_FILE}")));
        }
        env.extend(self.spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }
}

/// How an agent's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start agent {agent}: {why}")]
pub struct StartError {
    /// The agent.
    pub agent: AgentName,
    /// Why.
    pub why: String,
}

/// Starts, adopts and inspects agents.
pub trait Runner: Send + Sync + 'static {
    /// One running agent.
    type Running: Running;

    /// Called once per agent before anything starts: ends or adopts what a previous run of
    /// hive-c0re left running.
    fn recover(&self, agent: &AgentName) -> impl Future<Output = Option<Self::Running>> + Send;

    /// Starts the agent.
    fn start(&self, launch: &Launch) -> impl Future<Output = Result<Self::Running, StartError>> + Send;

    /// The agent's state directory (where its `turn.json` is).
    fn agent_state_dir(&self, agent: &AgentName) -> PathBuf;

    /// Removes what the runner keeps of a destroyed agent outside hive-c0re's own `agents/<agent>/`.
    fn remove_agent(&self, agent: &AgentName) -> impl Future<Output = ()> + Send;

    /// The last lines of the agent's log.
    fn log_tail(&self, agent: &AgentName) -> impl Future<Output = Vec<String>> + Send;

    /// Whether hive-c0re stops the agents when it stops: children of the process runner would
    /// otherwise be orphans; systemd units are left to systemd and adopted on the next start.
    const STOP_ON_SHUTDOWN: bool;

    /// Makes the secret files hive-c0re has just rewritten reach the agent in place, without a
    /// restart (which would kill a running turn, and its todo would run again): the process
    /// runner points the agent at those files themselves, so there is nothing to do; the
    /// systemd runner copies them into the unit's state directory ([`unit_credentials`]).
    ///
    /// # Errors
    /// The copy failed; the caller restarts the agent instead.
    fn refresh_secrets(&self, launch: &Launch) -> std::io::Result<()>;
}

/// One running agent.
pub trait Running: Send + 'static {
    /// Resolves when the agent's process ends (cancel-safe: it may be polled again).
    fn exited(&mut self) -> impl Future<Output = Exit> + Send;

    /// Stops it: SIGTERM, a grace, then SIGKILL.
    fn stop(self) -> impl Future<Output = ()> + Send;
}
