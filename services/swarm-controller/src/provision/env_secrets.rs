//! Secret variables (docs/swarm/secrets.md): what `PUT|DELETE /api/agents/{name}/secrets/{VAR}`,
//! `PUT|DELETE /api/secrets/{VAR}` and their listings do. Each value is one sealed record of the
//! secret store, `agent.<agent>.env.<var>` for an agent's own and `swarm.env.<var>` for the
//! swarm's default (`<var>` is the name lower-cased: record keys are lower case, names upper
//! case, so nothing is lost). A change queues a `credentials` job per agent it reaches, which
//! sends that agent's variables (the defaults with its own values over them) to its hive, sealed
//! to the hive's key; the hive writes them to the agent's env file and the agent's next turn has
//! them.
//!
//! A value is never logged, listed, returned or put in an error: listings carry the names and
//! the bucket's time of the last write.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::env_secrets::{self, MAX_VARS};
use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_jobq::JobId;
use hyperhive_schedule::instant::format_instant;
use hyperhive_swarm_api::secrets::{SecretChanged, SecretFrom, SecretListed};

use super::Provisioner;
use crate::secrets::{Plaintext, RecordKey, SecretStore, SecretsError};

/// Why a secret-variable request was refused. No variant holds a value.
#[derive(Debug, thiserror::Error)]
pub enum EnvSecretError {
    /// 400: a bad name or value.
    #[error("{0}")]
    BadRequest(String),
    /// 404: no such agent, or no such variable.
    #[error("{0}")]
    NotFound(String),
    /// 409: the agent is destroyed, or has as many variables as it may.
    #[error("{0}")]
    Conflict(String),
    /// 503: the roster or the secret store failed.
    #[error("{0}")]
    Unavailable(String),
}

impl From<SecretsError> for EnvSecretError {
    fn from(err: SecretsError) -> Self {
        EnvSecretError::Unavailable(err.to_string())
    }
}

fn agent_prefix(agent: &AgentName) -> String {
    format!("agent.{agent}.env.")
}

const SWARM_PREFIX: &str = "swarm.env.";

fn record(prefix: &str, name: &str) -> RecordKey {
    RecordKey::new(format!("{prefix}{}", env_secrets::record_token(name)))
        .expect("a checked name and an agent name make a record key")
}

/// The variables under `prefix`: name -> record.
async fn named(store: &SecretStore, prefix: &str) -> Result<BTreeMap<String, RecordKey>, SecretsError> {
    let records = store.records(prefix).await?;
    Ok(records
        .into_iter()
        .filter_map(|r| {
            let token = r.as_str().strip_prefix(prefix)?;
            env_secrets::name_of_token(token).map(|name| (name, r.clone()))
        })
        .collect())
}

async fn values(store: &SecretStore, prefix: &str) -> Result<BTreeMap<String, String>, SecretsError> {
    let mut vars = BTreeMap::new();
    for (name, record) in named(store, prefix).await? {
        if let Some(plain) = store.get(&record).await?
            && let Ok(text) = String::from_utf8(plain.expose().to_vec())
        {
            vars.insert(name, text);
        }
    }
    Ok(vars)
}

/// `agent`'s variables as its hive gets them: the swarm's defaults, then its own over them.
///
/// # Errors
/// The store's error.
pub async fn env_of(store: &SecretStore, agent: &AgentName) -> Result<BTreeMap<String, String>, SecretsError> {
    let mut vars = values(store, SWARM_PREFIX).await?;
    vars.extend(values(store, &agent_prefix(agent)).await?);
    Ok(vars)
}

async fn listed(
    store: &SecretStore,
    prefix: &str,
    from: SecretFrom,
) -> Result<BTreeMap<String, SecretListed>, SecretsError> {
    let mut listing = BTreeMap::new();
    for (name, record) in named(store, prefix).await? {
        if let Some(at) = store.written_at(&record).await? {
            listing.insert(name.clone(), SecretListed { name, set_at: format_instant(at), from });
        }
    }
    Ok(listing)
}

/// The secret variables of every agent and the swarm's defaults.
#[derive(Debug)]
pub struct EnvSecrets {
    provisioner: Arc<Provisioner>,
    /// Numbers the delivery jobs, so each change queues jobs of its own.
    deliveries: AtomicU64,
}

impl EnvSecrets {
    /// Over the provisioner's secret store, roster and job graph.
    pub fn new(provisioner: Arc<Provisioner>) -> Self {
        Self { provisioner, deliveries: AtomicU64::new(0) }
    }

    fn store(&self) -> &SecretStore {
        self.provisioner.vault.store()
    }

    /// `GET /api/agents/{name}/secrets`: every variable the agent's turns get, with where each
    /// comes from.
    ///
    /// # Errors
    /// [`EnvSecretError`].
    pub async fn list_agent(&self, agent: &str) -> Result<Vec<SecretListed>, EnvSecretError> {
        let (agent, _) = self.on_roster(agent).await?;
        let mut listing = listed(self.store(), SWARM_PREFIX, SecretFrom::Swarm).await?;
        listing.extend(listed(self.store(), &agent_prefix(&agent), SecretFrom::Agent).await?);
        Ok(listing.into_values().collect())
    }

    /// `GET /api/secrets`: the swarm's defaults.
    ///
    /// # Errors
    /// [`EnvSecretError`].
    pub async fn list_swarm(&self) -> Result<Vec<SecretListed>, EnvSecretError> {
        Ok(listed(self.store(), SWARM_PREFIX, SecretFrom::Swarm).await?.into_values().collect())
    }

    /// `PUT /api/agents/{name}/secrets/{VAR}`.
    ///
    /// # Errors
    /// [`EnvSecretError`]; nothing is stored then.
    pub async fn set_agent(&self, agent: &str, name: &str, value: &[u8]) -> Result<SecretChanged, EnvSecretError> {
        env_secrets::check_name(name).map_err(EnvSecretError::BadRequest)?;
        let (agent, _) = self.live_agent(agent).await?;
        env_secrets::check_value(value).map_err(EnvSecretError::BadRequest)?;
        let mut names = named(self.store(), SWARM_PREFIX).await?;
        names.extend(named(self.store(), &agent_prefix(&agent)).await?);
        if !names.contains_key(name) && names.len() >= MAX_VARS {
            return Err(EnvSecretError::Conflict(format!(
                "agent {agent} has {MAX_VARS} secret variables (its own and the swarm's), as many as it may; remove one first"
            )));
        }
        self.store().put(&record(&agent_prefix(&agent), name), &Plaintext::new(value.to_vec())).await?;
        tracing::info!(%agent, variable = name, "secret variable set");
        let deliveries = vec![self.deliver(&agent)];
        Ok(SecretChanged { name: name.to_owned(), scope: SecretFrom::Agent, stored: true, deliveries })
    }

    /// `DELETE /api/agents/{name}/secrets/{VAR}`: the agent falls back on the swarm's default,
    /// if there is one.
    ///
    /// # Errors
    /// [`EnvSecretError`]; 404 when the agent has no value of its own for it.
    pub async fn remove_agent(&self, agent: &str, name: &str) -> Result<SecretChanged, EnvSecretError> {
        env_secrets::check_name(name).map_err(EnvSecretError::BadRequest)?;
        let (agent, _) = self.live_agent(agent).await?;
        let record = record(&agent_prefix(&agent), name);
        if self.store().written_at(&record).await?.is_none() {
            return Err(EnvSecretError::NotFound(format!("agent {agent} has no secret variable {name} of its own")));
        }
        self.store().delete(&record).await?;
        tracing::info!(%agent, variable = name, "secret variable removed");
        let deliveries = vec![self.deliver(&agent)];
        Ok(SecretChanged { name: name.to_owned(), scope: SecretFrom::Agent, stored: false, deliveries })
    }

    /// `PUT /api/secrets/{VAR}`: every agent on the roster (not destroyed) gets it, unless it
    /// has a value of its own.
    ///
    /// # Errors
    /// [`EnvSecretError`]; nothing is stored then.
    pub async fn set_swarm(&self, name: &str, value: &[u8]) -> Result<SecretChanged, EnvSecretError> {
        env_secrets::check_name(name).map_err(EnvSecretError::BadRequest)?;
        env_secrets::check_value(value).map_err(EnvSecretError::BadRequest)?;
        let names = named(self.store(), SWARM_PREFIX).await?;
        if !names.contains_key(name) && names.len() >= MAX_VARS {
            return Err(EnvSecretError::Conflict(format!(
                "the swarm has {MAX_VARS} default secret variables, as many as an agent may have; remove one first"
            )));
        }
        self.store().put(&record(SWARM_PREFIX, name), &Plaintext::new(value.to_vec())).await?;
        tracing::info!(variable = name, "swarm secret variable set");
        let deliveries = self.deliver_all().await?;
        Ok(SecretChanged { name: name.to_owned(), scope: SecretFrom::Swarm, stored: true, deliveries })
    }

    /// `DELETE /api/secrets/{VAR}`.
    ///
    /// # Errors
    /// [`EnvSecretError`]; 404 when there is no such default.
    pub async fn remove_swarm(&self, name: &str) -> Result<SecretChanged, EnvSecretError> {
        env_secrets::check_name(name).map_err(EnvSecretError::BadRequest)?;
        let record = record(SWARM_PREFIX, name);
        if self.store().written_at(&record).await?.is_none() {
            return Err(EnvSecretError::NotFound(format!("the swarm has no default secret variable {name}")));
        }
        self.store().delete(&record).await?;
        tracing::info!(variable = name, "swarm secret variable removed");
        let deliveries = self.deliver_all().await?;
        Ok(SecretChanged { name: name.to_owned(), scope: SecretFrom::Swarm, stored: false, deliveries })
    }

    /// The agent the path names, if it is on the roster.
    async fn on_roster(&self, agent: &str) -> Result<(AgentName, RosterEntry), EnvSecretError> {
        let agent = AgentName::parse(agent).map_err(|e| EnvSecretError::BadRequest(e.to_string()))?;
        match self.provisioner.roster.get(&agent).await.map_err(EnvSecretError::Unavailable)? {
            Some(entry) => Ok((agent, entry)),
            None => Err(EnvSecretError::NotFound(format!(
                "no agent {agent} on the roster (see GET /api/agents); a declared agent is on it once its hive reports it"
            ))),
        }
    }

    /// [`EnvSecrets::on_roster`], and not destroyed.
    async fn live_agent(&self, agent: &str) -> Result<(AgentName, RosterEntry), EnvSecretError> {
        let (agent, entry) = self.on_roster(agent).await?;
        if self.destroyed(&agent, &entry).await? {
            return Err(EnvSecretError::Conflict(format!("agent {agent} is destroyed")));
        }
        Ok((agent, entry))
    }

    async fn destroyed(&self, agent: &AgentName, entry: &RosterEntry) -> Result<bool, EnvSecretError> {
        let wanted = self.provisioner.wanted.get(&entry.hive, agent).await.map_err(EnvSecretError::Unavailable)?;
        Ok(wanted.is_some_and(|w| w.wanted.state == WantedState::Destroyed))
    }

    /// Queues a delivery to every agent on the roster that is not destroyed.
    async fn deliver_all(&self) -> Result<Vec<JobId>, EnvSecretError> {
        let roster = self.provisioner.roster.list().await.map_err(|e| EnvSecretError::Unavailable(e.to_string()))?;
        let mut jobs = Vec::new();
        for (agent, entry) in roster {
            if !self.destroyed(&agent, &entry).await? {
                jobs.push(self.deliver(&agent));
            }
        }
        Ok(jobs)
    }

    /// Queues a `credentials` job sending the agent's current secrets to its hive; the job
    /// graph retries it with backoff while the queue or the hive's key is unavailable.
    fn deliver(&self, agent: &AgentName) -> JobId {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let id = JobId::parse(&format!("{agent}.secrets.{n}")).expect("an agent name and a number make a job id");
        self.provisioner.queue_credentials(id.clone(), agent, "secret variables");
        id
    }
}
