//! Provisioning agents through the job graph (docs/swarm/provisioning.md).
//!
//! `POST /api/agents` puts a roster entry for the new agent (create-if-absent, so a name is
//! provisioned once) with every step `pending`, then adds one job per [`Step`] to the graph.
//! Each job looks at what the roster and the secret store already hold before it creates
//! anything, adopts only what it can prove it made (an account whose stored password works),
//! and records its outcome in the roster. At start the controller adds the jobs of every created
//! agent whose steps are not all finished, so provisioning resumes where a stopped controller
//! left it; a step already finished succeeds at once.
//!
//! - [`settings`]: the environment.
//! - [`request`]: the `POST /api/agents` body and its validation.
//! - [`steps`]: the nine steps and their order.
//! - [`vault`]: the agent's secrets in the secret store.
//! - [`identities`]: the SSO user, the forge user, config repo and token, the matrix account,
//!   and the swarm's forge organisation they live in.
//! - [`keys`]: the store certificate and the NATS credential.
//! - [`handoff`]: declaring the agent `paused` and sending the deploy or credentials message.
//! - [`health`]: the credential health pass: re-checks, renewals and repair jobs.
//! - [`linked_accounts`]: what the linked-account routes do, in order, and the `credentials` job
//!   that delivers them to the hive.
//! - [`env_secrets`]: what the secret-variable routes do, and the `credentials` jobs that
//!   deliver them to the agents' hives.
//! - [`error`]: [`StepError`], a step's failure and whether the job graph retries it.

pub mod env_secrets;
pub mod error;
pub mod handoff;
pub mod health;
pub mod identities;
pub mod keys;
pub mod linked_accounts;
pub mod request;
pub mod settings;
pub mod steps;
pub mod vault;

use std::sync::Arc;

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::roster::{Identities, Origin, RosterEntry, StepProgress};
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_jobq::{AddError, Done, JobId, JobSpec, Jobq, work};
use hyperhive_provision::forge::{Forge, SwarmForge};
use hyperhive_provision::matrix::Matrix;
use hyperhive_provision::sso::Sso;
use hyperhive_schedule::instant::format_instant;

pub use error::StepError;
pub use request::{CreateError, CreateRequest, ValidRequest};
pub use settings::ProvisionSettings;
pub use steps::Step;

use crate::clock::Clock;
use crate::lifecycle::roster::Roster;
use crate::lifecycle::wanted::WantedStore;
use crate::nats::tenants::Accounts;
use health::HealthBoard;
use vault::Vault;

/// The external systems, each absent when the swarm does not use it.
#[derive(Clone, Default)]
pub struct Adapters {
    /// The SSO bridge.
    pub sso: Option<Arc<dyn Sso>>,
    /// The forge.
    pub forge: Option<Arc<dyn Forge>>,
    /// The same forge's swarm-wide objects (its organisation, teams, collaborators).
    pub swarm_forge: Option<Arc<dyn SwarmForge>>,
    /// The matrix homeserver.
    pub matrix: Option<Arc<dyn Matrix>>,
}

impl std::fmt::Debug for Adapters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapters")
            .field("sso", &self.sso.is_some())
            .field("forge", &self.forge.is_some())
            .field("matrix", &self.matrix.is_some())
            .finish()
    }
}

impl Adapters {
    /// The real clients for what `settings` configures.
    ///
    /// # Errors
    /// A client that cannot be built (a URL the client refuses), as text without secrets.
    pub fn from_settings(settings: &ProvisionSettings) -> Result<Self, String> {
        use hyperhive_provision::forge::ForgejoClient;
        use hyperhive_provision::matrix::SynapseClient;
        use hyperhive_provision::sso::BridgeClient;
        let sso: Option<Arc<dyn Sso>> = match &settings.sso {
            None => None,
            Some(s) => Some(Arc::new(BridgeClient::new(&s.url, s.token.clone()).map_err(|e| e.to_string())?)),
        };
        let client = match &settings.forge {
            None => None,
            Some(f) => Some(Arc::new(ForgejoClient::new(&f.url, f.admin_token.clone()).map_err(|e| e.to_string())?)),
        };
        let forge = client.clone().map(|c| c as Arc<dyn Forge>);
        let swarm_forge = client.map(|c| c as Arc<dyn SwarmForge>);
        let matrix: Option<Arc<dyn Matrix>> = match &settings.matrix {
            None => None,
            Some(m) => Some(Arc::new(SynapseClient::new(&m.url, m.shared_secret.clone()).map_err(|e| e.to_string())?)),
        };
        Ok(Self { sso, forge, swarm_forge, matrix })
    }
}

/// What the steps share.
#[derive(Debug)]
pub struct Provisioner {
    /// The settings (lifetimes, the template repository, the store CA).
    pub settings: ProvisionSettings,
    /// The external systems.
    pub adapters: Adapters,
    /// The agents' secrets.
    pub vault: Vault,
    /// NATS accounts (shared with the revoker, so account changes reach the server in order).
    pub accounts: Arc<Accounts>,
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// For sending deploy messages.
    pub js: async_nats::jetstream::Context,
    /// The hive directory (each hive's xkey).
    pub hives: Arc<HiveDirectory>,
    /// Signs deploy messages; hives pin its public key.
    pub deploy_key: Arc<DeploySigner>,
    /// The job graph.
    pub jobq: Jobq,
    /// "Now".
    pub clock: Arc<dyn Clock>,
    /// Each agent's credential health, from the last pass.
    pub health: HealthBoard,
}

impl Provisioner {
    /// Puts the agent of a validated request on the roster and queues its steps; returns their
    /// job ids. Nothing is stored or queued when it fails.
    ///
    /// # Errors
    /// [`CreateError::Taken`] or [`CreateError::Store`].
    pub async fn create(self: &Arc<Self>, valid: ValidRequest) -> Result<Vec<JobId>, CreateError> {
        let entry = RosterEntry {
            hive: valid.hive.clone(),
            origin: Origin::Created,
            created_at: format_instant(self.clock.now()),
            provisioning: Step::ALL.iter().map(|s| (s.name().to_owned(), StepProgress::Pending)).collect(),
            identities: Identities::default(),
            spec: Some(valid.spec),
            revision: 0,
            labels: valid.labels,
        };
        if !self.roster.create(&valid.name, &entry).await.map_err(CreateError::Store)? {
            return Err(CreateError::Taken(valid.name.to_string()));
        }
        tracing::info!(agent = %valid.name, hive = %valid.hive, "agent created; provisioning queued");
        Ok(self.enqueue(&valid.name))
    }

    /// Adds the steps of `agent` to the graph (those already there are left as they are).
    pub fn enqueue(self: &Arc<Self>, agent: &AgentName) -> Vec<JobId> {
        let mut ids = Vec::new();
        for step in Step::ALL {
            let id = step.job_id(agent);
            let mut spec = JobSpec::new(id.clone(), step.name()).agent(agent.as_str());
            for dep in step.after() {
                spec = spec.after(dep.job_id(agent));
            }
            let (me, name) = (self.clone(), agent.clone());
            match self.jobq.add(
                spec,
                work(move || {
                    let (me, name) = (me.clone(), name.clone());
                    async move { Ok(me.run(&name, step).await?) }
                }),
            ) {
                Ok(()) | Err(AddError::Duplicate(_)) => ids.push(id),
                Err(err) => {
                    tracing::error!(agent = %agent, step = step.name(), %err, "cannot queue a provisioning step")
                }
            }
        }
        ids
    }

    /// Queues the unfinished steps of every created agent on the roster (at start).
    ///
    /// # Errors
    /// The roster could not be read.
    pub async fn resume(self: &Arc<Self>) -> Result<usize, StepError> {
        let roster = self.roster.list().await.map_err(|e| StepError::retryable(e.to_string()))?;
        let mut resumed = 0;
        for (agent, entry) in roster {
            let unfinished = entry.origin == Origin::Created
                && Step::ALL.iter().any(|s| !entry.provisioning.get(s.name()).is_some_and(StepProgress::is_finished));
            if unfinished {
                tracing::info!(%agent, "resuming provisioning where it stopped");
                self.enqueue(&agent);
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// The agent's roster entry. An agent no longer on the roster is a permanent failure:
    /// nothing is left to provision, and retrying cannot bring it back.
    async fn roster_entry(&self, agent: &AgentName) -> Result<RosterEntry, StepError> {
        self.roster
            .get(agent)
            .await
            .map_err(StepError::retryable)?
            .ok_or_else(|| StepError::permanent(format!("agent {agent} is no longer on the roster")))
    }

    /// Runs one step: nothing when the roster says it is finished (the job ends as the step
    /// did: done or skipped), else the step, whose outcome (or failure) is recorded in the
    /// roster. A step whose system is not configured ends its job `skipped`, not `succeeded`:
    /// nobody is to believe its work was done. An agent no longer on the roster fails the step
    /// at once: nothing is left to provision.
    async fn run(&self, agent: &AgentName, step: Step) -> Result<Done, StepError> {
        let entry = self.roster_entry(agent).await?;
        match entry.provisioning.get(step.name()) {
            Some(StepProgress::Skipped { reason, .. }) => return Ok(Done::Skipped(reason.clone())),
            Some(progress) if progress.is_finished() => return Ok(Done::Succeeded),
            _ => {}
        }
        let since = format_instant(self.clock.now());
        self.roster
            .update(agent, |e| {
                e.provisioning.insert(step.name().to_owned(), StepProgress::Running { since: since.clone() });
            })
            .await
            .map_err(StepError::retryable)?;
        let outcome = match step {
            Step::Sso => self.sso_user(agent).await,
            Step::ForgeUser => self.forge_user(agent).await,
            Step::ConfigRepo => self.config_repo(agent).await,
            Step::ForgeToken => self.forge_token(agent).await,
            Step::Matrix => self.matrix_account(agent).await,
            Step::StoreIdentity => self.store_identity(agent, &entry).await,
            Step::QueueCredential => self.queue_credential(agent, &entry).await,
            Step::DeclarePaused => self.declare_paused(agent, &entry.hive).await,
            Step::Deploy => self.deploy(agent).await,
        };
        let at = format_instant(self.clock.now());
        let (progress, change, result) = match outcome {
            Ok(Outcome::Done(identities)) => {
                tracing::info!(%agent, step = step.name(), "provisioning step done");
                (StepProgress::Done { at }, identities, Ok(Done::Succeeded))
            }
            Ok(Outcome::Skipped(reason)) => {
                tracing::info!(%agent, step = step.name(), %reason, "provisioning step skipped");
                (
                    StepProgress::Skipped { at, reason: reason.clone() },
                    IdentityChange::none(),
                    Ok(Done::Skipped(reason)),
                )
            }
            Err(error) => {
                let permanent = error.is_permanent();
                tracing::warn!(%agent, step = step.name(), %error, permanent, "provisioning step failed");
                (StepProgress::Failed { at, error: error.to_string() }, IdentityChange::none(), Err(error))
            }
        };
        self.roster
            .update(agent, |e| {
                e.provisioning.insert(step.name().to_owned(), progress.clone());
                change.apply(&mut e.identities);
            })
            .await
            .map_err(StepError::retryable)?;
        result
    }
}

/// What a step did.
#[derive(Debug)]
pub enum Outcome {
    /// Done; the public identities it recorded.
    Done(IdentityChange),
    /// Not needed: its system is not configured (the reason names the setting).
    Skipped(String),
}

/// The public identity fields a step sets (each `None` leaves the field as it is).
#[derive(Debug, Clone, Default)]
pub struct IdentityChange(pub Identities);

impl IdentityChange {
    /// Changes nothing.
    pub fn none() -> Self {
        Self::default()
    }

    fn apply(&self, identities: &mut Identities) {
        let new = &self.0;
        let set = |field: &mut Option<String>, value: &Option<String>| {
            if value.is_some() {
                field.clone_from(value);
            }
        };
        set(&mut identities.sso_user, &new.sso_user);
        set(&mut identities.forge_user, &new.forge_user);
        set(&mut identities.config_repo, &new.config_repo);
        set(&mut identities.matrix_user, &new.matrix_user);
        set(&mut identities.store_cert_serial, &new.store_cert_serial);
        set(&mut identities.store_cert_expires_at, &new.store_cert_expires_at);
        set(&mut identities.queue_creds_expires_at, &new.queue_creds_expires_at);
    }
}

/// A step skipped because `variable` is not set.
fn not_configured(variable: &str) -> Outcome {
    Outcome::Skipped(format!("{variable} is not set"))
}
