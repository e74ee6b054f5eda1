//! The registry: every agent this hive knows (declared in the host's configuration, or deployed),
//! its record, and the channel to its supervisor. The wanted-state watcher and the deploy
//! consumer change agents only through it, and it saves each change before returning, so the
//! message that caused it is acked only once it is durable.

use std::collections::BTreeMap;
use std::sync::Arc;

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::deploy::{DeployKind, Payload};
use hyperhive_hive_proto::env_secrets::ENV_FILE;
use hyperhive_hive_proto::roster::Origin;
use hyperhive_hive_proto::spec::DeclaredAgent;
use hyperhive_hive_proto::status::{ActualState, AgentStatus};
use hyperhive_hive_proto::wanted::{Wanted, WantedState, default_wanted};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::board::{Board, Entry};
use crate::runner::{Launch, Runner, Running};
use crate::state::{AgentRecord, CREDS_FILE, Deployed, StateDir};
use crate::supervisor::{Desired, Supervisor};

/// What a deploy message did.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// Applied and saved.
    Changed,
    /// A revision already applied: nothing to do.
    AlreadyApplied,
}

/// Why a deploy message was not applied.
#[derive(Debug, PartialEq, Eq)]
pub enum NotApplied {
    /// Refused for good: the message is terminated.
    Refused(String),
    /// A local failure (a write): the message is handed back to be tried again.
    Failed(String),
}

/// The registry.
#[derive(Debug)]
pub struct Registry<R: Runner> {
    nats_url: String,
    declared: BTreeMap<AgentName, DeclaredAgent>,
    records: BTreeMap<AgentName, AgentRecord>,
    supervisors: BTreeMap<AgentName, watch::Sender<Desired>>,
    tasks: JoinSet<()>,
    runner: Arc<R>,
    state: StateDir,
    board: Board,
    shutdown: watch::Receiver<bool>,
    /// Whether supervisors run yet (see [`Registry::start_all`]).
    started: bool,
}

impl<R: Runner> Registry<R> {
    /// Loads the records; no agent starts until [`Registry::start_all`].
    pub fn new(
        nats_url: String,
        declared: BTreeMap<AgentName, DeclaredAgent>,
        runner: Arc<R>,
        state: StateDir,
        board: Board,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let records = state.records();
        Self {
            nats_url,
            declared,
            records,
            supervisors: BTreeMap::new(),
            tasks: JoinSet::new(),
            runner,
            state,
            board,
            shutdown,
            started: false,
        }
    }

    /// Starts a supervisor for every known agent (once; later calls do nothing). Called once
    /// the wanted states were read from NATS, so an agent whose local record was lost does not
    /// run first on its default and stop a moment later.
    pub fn start_all(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        for agent in self.declared.keys() {
            if let Err(err) = self.write_declared_env(agent) {
                tracing::error!(agent = %agent, %err, "cannot write the agent's secret variables; its turns keep the ones it had");
            }
        }
        let known = self.known();
        for agent in &known {
            self.converge(agent, false);
        }
        // An agent this hive no longer knows (removed from the agents file) may still run from
        // before a crash of hive-c0re: recover it only to stop it.
        for agent in self.state.agent_dirs() {
            if !known.contains(&agent) {
                let runner = self.runner.clone();
                self.tasks.spawn(async move {
                    if let Some(left) = runner.recover(&agent).await {
                        left.stop().await;
                    }
                });
            }
        }
    }

    /// Every agent this hive runs or may run: declared or deployed.
    pub fn known(&self) -> Vec<AgentName> {
        let deployed = self.records.iter().filter(|(_, r)| r.deployed.is_some()).map(|(a, _)| a.clone());
        let mut all: Vec<AgentName> = self.declared.keys().cloned().chain(deployed).collect();
        all.sort();
        all.dedup();
        all
    }

    fn origin(&self, agent: &AgentName) -> Option<Origin> {
        if self.declared.contains_key(agent) {
            Some(Origin::Declared)
        } else if self.records.get(agent).is_some_and(|r| r.deployed.is_some()) {
            Some(Origin::Created)
        } else {
            None
        }
    }

    fn desired(&self, agent: &AgentName, origin: Origin, generation: u64) -> Desired {
        let record = self.records.get(agent).cloned().unwrap_or_default();
        let wanted = record.wanted.as_ref().map_or(default_wanted(origin), |w| w.state);
        let launch = match (self.declared.get(agent), &record.deployed) {
            (Some(declared), _) => Some(Launch {
                agent: agent.clone(),
                nats_url: self.nats_url.clone(),
                creds: declared.creds_file.clone(),
                secret_files: Vec::new(),
                env_file: Some(self.state.env_file(agent)),
                pause_file: self.state.pause_file(agent),
                spec: declared.spec.clone(),
            }),
            (None, Some(deployed)) => {
                let secrets = self.state.secrets_dir(agent);
                let secret_files = std::fs::read_dir(&secrets)
                    .map(|entries| {
                        let mut files: Vec<(String, std::path::PathBuf)> = entries
                            .flatten()
                            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                            .filter(|(name, _)| name != CREDS_FILE && name != ENV_FILE)
                            .collect();
                        files.sort();
                        files
                    })
                    .unwrap_or_default();
                Some(Launch {
                    agent: agent.clone(),
                    nats_url: self.nats_url.clone(),
                    creds: secrets.join(CREDS_FILE),
                    secret_files,
                    env_file: Some(self.state.env_file(agent)),
                    pause_file: self.state.pause_file(agent),
                    spec: deployed.spec.clone(),
                })
            }
            (None, None) => None,
        };
        Desired { wanted, launch, generation }
    }

    /// How `agent` would be started now (`None`: it cannot be).
    fn launch_of(&self, agent: &AgentName) -> Option<Launch> {
        self.origin(agent).and_then(|origin| self.desired(agent, origin, 0).launch)
    }

    /// Tells `agent`'s supervisor (starting one if it has none) what it should be doing now;
    /// `restart` makes a running agent restart (new spec, or secrets it cannot see in place).
    fn converge(&mut self, agent: &AgentName, restart: bool) {
        let Some(origin) = self.origin(agent) else { return };
        if !self.started {
            return;
        }
        if let Some(tx) = self.supervisors.get(agent) {
            let generation = tx.borrow().generation + u64::from(restart);
            let desired = self.desired(agent, origin, generation);
            tx.send_if_modified(|current| {
                let changed = *current != desired;
                *current = desired;
                changed
            });
            self.board.update(agent, |s| {
                s.revision = self.records.get(agent).and_then(|r| r.deployed.as_ref()).map(|d| d.revision)
            });
            return;
        }
        let desired = self.desired(agent, origin, 0);
        self.board.insert(
            agent.clone(),
            Entry {
                status: AgentStatus {
                    origin,
                    wanted: desired.wanted,
                    actual: ActualState::Stopped,
                    since: crate::now(),
                    restarts: 0,
                    last_exit: None,
                    log_tail: Vec::new(),
                    turn: None,
                    revision: self.records.get(agent).and_then(|r| r.deployed.as_ref()).map(|d| d.revision),
                    problem: None,
                },
                turn_file: self.runner.agent_state_dir(agent).join(hyperhive_hive_proto::agent_files::TURN_FILE),
            },
        );
        let (tx, rx) = watch::channel(desired);
        self.supervisors.insert(agent.clone(), tx);
        let supervisor = Supervisor {
            agent: agent.clone(),
            runner: self.runner.clone(),
            state: self.state.clone(),
            board: self.board.clone(),
            desired: rx,
            shutdown: self.shutdown.clone(),
        };
        self.tasks.spawn(supervisor.run());
    }

    /// Records `agent`'s wanted state (`None`: its key was deleted, so the default applies), read
    /// at `revision` of `agent-wanted`, and converges to it. A wanted state for an agent this hive
    /// does not know is kept for when it is deployed. A read a replica answered (`from_replica`:
    /// the direct gets at start) may lag on a cluster: one older than the revision already
    /// applied is ignored. What the hive's consumer delivers comes from the stream's leader, in
    /// order, and is always applied (also after the bucket was recreated and its revisions
    /// started again).
    ///
    /// # Errors
    /// The record could not be saved (the message must then not be acked).
    pub fn set_wanted(
        &mut self,
        agent: &AgentName,
        wanted: Option<Wanted>,
        revision: u64,
        from_replica: bool,
    ) -> std::io::Result<()> {
        let mut record = self.records.get(agent).cloned().unwrap_or_default();
        if from_replica && revision < record.wanted_revision {
            tracing::debug!(agent = %agent, revision, applied = record.wanted_revision, "ignoring an older wanted state from a lagging replica");
            return Ok(());
        }
        if record.wanted.as_ref().is_some_and(|w| w.state == WantedState::Destroyed)
            && wanted.as_ref().is_none_or(|w| w.state != WantedState::Destroyed)
        {
            tracing::warn!(agent = %agent, "ignoring a wanted state after destroyed: destroyed is final");
            return Ok(());
        }
        if record.wanted == wanted && record.wanted_revision == revision {
            return Ok(());
        }
        let changed = record.wanted != wanted;
        record.wanted = wanted;
        record.wanted_revision = revision;
        self.state.save(agent, &record)?;
        self.records.insert(agent.clone(), record);
        if changed {
            self.converge(agent, false);
        }
        Ok(())
    }

    /// Applies an opened deploy message: `deploy` saves the spec and secrets and restarts the
    /// agent if it runs; `credentials` replaces the secrets under the running agent, which
    /// picks up its renewed NATS credential itself (a restart would kill a running turn, and its
    /// todo would run again). Idempotent per revision.
    ///
    /// A `credentials` message still restarts the agent when it changes which secret files
    /// there are (the agent's environment lists them), or when the runner could not bring the
    /// new files to it in place (see [`Runner::refresh_secrets`]).
    ///
    /// # Errors
    /// Why it is not applied (nothing changed), in words that hold no secret.
    pub fn deploy(&mut self, payload: Payload) -> Result<Applied, NotApplied> {
        let agent = payload.agent.clone();
        if self.declared.contains_key(&agent) {
            return self.declared_credentials(payload);
        }
        let mut record = self.records.get(&agent).cloned().unwrap_or_default();
        if record.wanted.as_ref().is_some_and(|w| w.state == WantedState::Destroyed) {
            return Err(NotApplied::Refused(format!("agent {agent} was destroyed on this hive; destroyed is final")));
        }
        if let Some(deployed) = &record.deployed
            && payload.revision <= deployed.revision
        {
            return Ok(Applied::AlreadyApplied);
        }
        let launch_before = self.launch_of(&agent);
        let spec = match (payload.kind, payload.spec, &record.deployed) {
            (DeployKind::Deploy, Some(spec), _) => spec,
            (DeployKind::Credentials, _, Some(deployed)) => deployed.spec.clone(),
            (DeployKind::Credentials, _, None) => {
                return Err(NotApplied::Refused(format!(
                    "credentials for agent {agent}, which was never deployed here"
                )));
            }
            (DeployKind::Deploy, None, _) => {
                return Err(NotApplied::Refused(format!("a deploy of {agent} without a spec")));
            }
        };
        let mut secrets = payload.secrets.files.clone();
        // Always written, so the file the agent's environment names exists from the first start.
        secrets.insert(ENV_FILE.to_owned(), hyperhive_hive_proto::env_secrets::render(&payload.secrets.env));
        if let Some(creds) = &payload.secrets.nats_creds {
            secrets.insert(CREDS_FILE.to_owned(), creds.clone());
        } else if let Ok(existing) = std::fs::read_to_string(self.state.secrets_dir(&agent).join(CREDS_FILE)) {
            // A message without a NATS credential keeps the one the agent has.
            secrets.insert(CREDS_FILE.to_owned(), existing);
        }
        self.state
            .write_secrets(&agent, &secrets)
            .map_err(|e| NotApplied::Failed(format!("cannot write agent {agent}'s secrets: {e}")))?;
        record.deployed = Some(Deployed { spec, revision: payload.revision });
        self.state
            .save(&agent, &record)
            .map_err(|e| NotApplied::Failed(format!("cannot save agent {agent}'s record: {e}")))?;
        self.records.insert(agent.clone(), record);
        let restart = match payload.kind {
            DeployKind::Deploy => true,
            DeployKind::Credentials => match self.launch_of(&agent) {
                launch if launch != launch_before => true,
                None => false,
                Some(launch) => match self.runner.refresh_secrets(&launch) {
                    Ok(()) => false,
                    Err(err) => {
                        tracing::warn!(agent = %agent, %err, "cannot renew the agent's secrets in place; restarting it");
                        true
                    }
                },
            },
        };
        if !restart {
            tracing::info!(agent = %agent, "credentials renewed in place; the agent picks them up without a restart");
        }
        self.converge(&agent, restart);
        Ok(Applied::Changed)
    }

    /// A `credentials` message for an agent declared in this host's configuration: its secret
    /// variables, written to its env file under the running agent (its NATS credential and
    /// files come from the host's configuration, so a message carrying either is refused, as is
    /// a `deploy`). Idempotent per revision.
    fn declared_credentials(&mut self, payload: Payload) -> Result<Applied, NotApplied> {
        let agent = payload.agent.clone();
        if payload.kind == DeployKind::Deploy {
            return Err(NotApplied::Refused(format!(
                "agent {agent} is declared in this host's configuration; it cannot be deployed"
            )));
        }
        if payload.secrets.nats_creds.is_some() || !payload.secrets.files.is_empty() {
            return Err(NotApplied::Refused(format!(
                "credentials for agent {agent} carry a NATS credential or secret files, but it is declared in this \
                 host's configuration, which gives it those"
            )));
        }
        let mut record = self.records.get(&agent).cloned().unwrap_or_default();
        if payload.revision <= record.env_revision {
            return Ok(Applied::AlreadyApplied);
        }
        self.state
            .write_swarm_env(&agent, &payload.secrets.env)
            .and_then(|()| self.write_declared_env(&agent))
            .map_err(|e| NotApplied::Failed(format!("cannot write agent {agent}'s secret variables: {e}")))?;
        record.env_revision = payload.revision;
        self.state
            .save(&agent, &record)
            .map_err(|e| NotApplied::Failed(format!("cannot save agent {agent}'s record: {e}")))?;
        self.records.insert(agent.clone(), record);
        let restart = match self.launch_of(&agent) {
            Some(launch) => match self.runner.refresh_secrets(&launch) {
                Ok(()) => false,
                Err(err) => {
                    tracing::warn!(agent = %agent, %err, "cannot renew the agent's secrets in place; restarting it");
                    true
                }
            },
            None => false,
        };
        tracing::info!(agent = %agent, variables = payload.secrets.env.len(), "secret variables renewed");
        self.converge(&agent, restart);
        Ok(Applied::Changed)
    }

    /// Writes a declared agent's env file: the variables of its `environment_file` (read now, as
    /// root, from the host's configuration), with those the swarm sent over them. An
    /// `environment_file` that cannot be read is logged and left out: the swarm's variables
    /// still reach the agent.
    fn write_declared_env(&self, agent: &AgentName) -> std::io::Result<()> {
        use hyperhive_hive_proto::env_secrets::{check_all, parse_environment_file};
        let Some(declared) = self.declared.get(agent) else { return Ok(()) };
        let mut vars = BTreeMap::new();
        if let Some(file) = &declared.environment_file {
            match std::fs::read_to_string(file) {
                Ok(text) => {
                    let (from_file, problems) = parse_environment_file(&text);
                    for (line, why) in problems {
                        tracing::warn!(agent = %agent, file = %file.display(), line, "a line of the agent's environment file is left out: {why}");
                    }
                    vars = from_file;
                }
                Err(err) => {
                    tracing::error!(agent = %agent, file = %file.display(), %err, "cannot read the agent's environment file; its variables are left out");
                }
            }
        }
        vars.extend(self.state.read_swarm_env(agent)?);
        check_all(&vars).map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidData, why))?;
        self.state.write_env(agent, &vars)
    }

    /// Waits for every supervisor to finish (after shutdown was signalled).
    pub async fn join(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::process::ProcessRunner;

    fn wanted(state: WantedState) -> Option<Wanted> {
        Some(Wanted { state, set_at: "2026-12-01T00:00:00Z".into(), set_by: "test".into() })
    }

    #[test]
    fn a_lagging_replica_never_takes_a_wanted_state_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let runner = Arc::new(ProcessRunner { bin: "/nonexistent/hive-agent".into(), state: state.clone() });
        let (_stop, stop_rx) = watch::channel(false);
        let mut registry =
            Registry::new("nats://x:4222".into(), BTreeMap::new(), runner, state.clone(), Board::default(), stop_rx);
        let bee = AgentName::parse("bee").unwrap();
        let stored = |state: &StateDir| {
            let record = state.records().remove(&bee).unwrap_or_default();
            (record.wanted.map(|w| w.state), record.wanted_revision)
        };

        registry.set_wanted(&bee, wanted(WantedState::Paused), 7, false).unwrap();
        assert_eq!(stored(&state), (Some(WantedState::Paused), 7));
        // At the next start a replica that lags answers revision 5 (up), or has no key yet.
        registry.set_wanted(&bee, wanted(WantedState::Up), 5, true).unwrap();
        registry.set_wanted(&bee, None, 0, true).unwrap();
        assert_eq!(stored(&state), (Some(WantedState::Paused), 7), "older reads from a replica change nothing");
        // The same revision or a newer one from a replica is applied.
        registry.set_wanted(&bee, wanted(WantedState::Up), 9, true).unwrap();
        assert_eq!(stored(&state), (Some(WantedState::Up), 9));
        // The consumer (the leader, in order) is always applied: a recreated bucket starts at 1.
        registry.set_wanted(&bee, wanted(WantedState::Offline), 1, false).unwrap();
        assert_eq!(stored(&state), (Some(WantedState::Offline), 1));
    }

    #[test]
    fn a_declared_agent_takes_only_secret_variables_merged_over_its_environment_file() {
        use hyperhive_hive_proto::HiveName;
        use hyperhive_hive_proto::deploy::Secrets;
        use hyperhive_hive_proto::env_secrets::{ENV_FILE, parse};
        use hyperhive_hive_proto::spec::AgentSpec;
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let environment_file = dir.path().join("bee.env");
        std::fs::write(&environment_file, "FROM_FILE=file\nAPI_TOKEN=file\nPATH=/evil\n").unwrap();
        let bee = AgentName::parse("bee").unwrap();
        let declared = BTreeMap::from([(
            bee.clone(),
            DeclaredAgent {
                spec: AgentSpec {
                    turn_command: "cat".into(),
                    schedule_tick: None,
                    turn_timeout: None,
                    env: BTreeMap::new(),
                },
                creds_file: dir.path().join("bee.creds"),
                environment_file: Some(environment_file),
            },
        )]);
        let runner = Arc::new(ProcessRunner { bin: "/nonexistent/hive-agent".into(), state: state.clone() });
        let (_stop, stop_rx) = watch::channel(false);
        let mut registry =
            Registry::new("nats://x:4222".into(), declared, runner, state.clone(), Board::default(), stop_rx);
        let credentials = |revision: u64, secrets: Secrets| Payload {
            kind: DeployKind::Credentials,
            hive: HiveName::parse("h1").unwrap(),
            agent: bee.clone(),
            revision,
            spec: None,
            secrets,
        };
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let written = || parse(&std::fs::read(state.secrets_dir(&bee).join(ENV_FILE)).unwrap()).unwrap();

        let swarm = Secrets { env: env(&[("API_TOKEN", "swarm")]), ..Default::default() };
        assert_eq!(registry.deploy(credentials(2, swarm.clone())), Ok(Applied::Changed));
        assert_eq!(
            written(),
            env(&[("API_TOKEN", "swarm"), ("FROM_FILE", "file")]),
            "the swarm's over the file's; PATH left out"
        );
        let mode = std::fs::metadata(state.secrets_dir(&bee).join(ENV_FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(registry.deploy(credentials(2, Secrets::default())), Ok(Applied::AlreadyApplied));
        assert_eq!(registry.deploy(credentials(3, Secrets::default())), Ok(Applied::Changed));
        assert_eq!(written(), env(&[("API_TOKEN", "file"), ("FROM_FILE", "file")]), "removed: the file's again");

        let with_creds = Secrets { nats_creds: Some("creds".into()), ..swarm.clone() };
        assert!(matches!(registry.deploy(credentials(4, with_creds)), Err(NotApplied::Refused(_))));
        let mut deploy = credentials(5, swarm);
        deploy.kind = DeployKind::Deploy;
        assert!(matches!(registry.deploy(deploy), Err(NotApplied::Refused(_))));
        assert_eq!(
            written(),
            env(&[("API_TOKEN", "file"), ("FROM_FILE", "file")]),
            "a refused message changes nothing"
        );
    }
}
