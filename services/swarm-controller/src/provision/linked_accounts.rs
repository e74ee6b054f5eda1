//! What the linked-account routes do, in order: find the agent (created through
//! `POST /api/agents`, on the hive the path names, not destroyed), check the request, verify the
//! credential, store it sealed, then queue a `credentials` job that sends the agent's secrets to
//! its hive. Nothing is stored when any step before the store fails; a removal with
//! `?revoke=true` removes nothing unless the homeserver logged the token out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_jobq::JobId;
use hyperhive_swarm_api::linked::{LinkChanged, LinkedAccount};

use super::Provisioner;
use crate::linked::account::{self, Account, Kind, Slot};
use crate::linked::store;
use crate::linked::verify::{self, VerifyError};

/// Why a linked-account request was refused.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// 400: a malformed name or body, or a credential its server refused.
    #[error("{0}")]
    BadRequest(String),
    /// 404: no such agent on that hive, or no such linked account.
    #[error("{0}")]
    NotFound(String),
    /// 409: the agent cannot take linked accounts, or the token to revoke is already invalid.
    #[error("{0}")]
    Conflict(String),
    /// 502: the account's server could not verify or revoke.
    #[error("{0}")]
    Upstream(String),
    /// 503: the roster or the secret store failed.
    #[error("{0}")]
    Unavailable(String),
}

impl From<VerifyError> for LinkError {
    fn from(err: VerifyError) -> Self {
        match err {
            VerifyError::Rejected(m) => LinkError::BadRequest(m),
            VerifyError::Unreachable(m) => LinkError::Upstream(m),
            VerifyError::AlreadyInvalid(m) => LinkError::Conflict(m),
        }
    }
}

/// The linked accounts of every created agent.
#[derive(Debug)]
pub struct LinkedAccounts {
    provisioner: Arc<Provisioner>,
    /// Numbers the delivery jobs, so each change queues a job of its own.
    deliveries: AtomicU64,
}

impl LinkedAccounts {
    /// Over the provisioner's secret store, roster and job graph.
    pub fn new(provisioner: Arc<Provisioner>) -> Self {
        Self { provisioner, deliveries: AtomicU64::new(0) }
    }

    /// `GET .../linked-accounts`: the agent's own matrix account (`main`), then its linked ones.
    ///
    /// # Errors
    /// [`LinkError`].
    pub async fn list(&self, hive: &str, agent: &str) -> Result<Vec<LinkedAccount>, LinkError> {
        let (agent, entry) = self.created_agent(hive, agent).await?;
        let mut listing: Vec<LinkedAccount> =
            entry.identities.matrix_user.iter().map(|id| account::own_matrix(id)).collect();
        let linked = store::linked(self.provisioner.vault.store(), &agent).await.map_err(LinkError::Unavailable)?;
        listing.extend(linked.iter().map(|(slot, account)| account::listed(slot, account)));
        Ok(listing)
    }

    /// `PUT .../matrix-accounts/{name}`, `.../forge-accounts/{label}`, `.../github-account`.
    ///
    /// # Errors
    /// [`LinkError`]; nothing is stored then.
    pub async fn link(&self, hive: &str, agent: &str, slot: &Slot, body: &[u8]) -> Result<LinkChanged, LinkError> {
        let (agent, _) = self.created_agent(hive, agent).await?;
        let account = account::parse_body(slot.kind, body).map_err(LinkError::BadRequest)?;
        verify::verify(&account).await?;
        store::put(self.provisioner.vault.store(), &agent, slot, &account).await.map_err(LinkError::Unavailable)?;
        tracing::info!(%agent, kind = ?slot.kind, name = %slot.name, account = ?account, "linked account stored");
        let delivery = self.deliver(&agent);
        Ok(LinkChanged { account: Some(account::listed(slot, &account)), revoked: false, delivery })
    }

    /// `DELETE` of one linked account; with `revoke`, a matrix token is logged out first and
    /// the account stays when that fails.
    ///
    /// # Errors
    /// [`LinkError`]; nothing is removed then.
    pub async fn unlink(&self, hive: &str, agent: &str, slot: &Slot, revoke: bool) -> Result<LinkChanged, LinkError> {
        let (agent, _) = self.created_agent(hive, agent).await?;
        let store = self.provisioner.vault.store();
        let Some(account) = store::get(store, &agent, slot).await.map_err(LinkError::Unavailable)? else {
            return Err(LinkError::NotFound(format!(
                "agent {agent} has no linked {:?} account {:?}",
                slot.kind, slot.name
            )));
        };
        if revoke {
            let Account::Matrix { homeserver, access_token, .. } = &account else {
                return Err(LinkError::BadRequest("?revoke=true applies to matrix accounts only".into()));
            };
            verify::revoke_matrix(homeserver, access_token).await?;
            tracing::info!(%agent, name = %slot.name, %homeserver, "linked matrix token logged out");
        }
        store::delete(store, &agent, slot).await.map_err(LinkError::Unavailable)?;
        tracing::info!(%agent, kind = ?slot.kind, name = %slot.name, "linked account removed");
        Ok(LinkChanged { account: None, revoked: revoke, delivery: self.deliver(&agent) })
    }

    /// The agent named in the path, if it was created through `POST /api/agents` on `hive` and
    /// is not destroyed: only such an agent gets secrets through its hive.
    async fn created_agent(&self, hive: &str, agent: &str) -> Result<(AgentName, RosterEntry), LinkError> {
        let hive = HiveName::parse(hive).map_err(|e| LinkError::BadRequest(e.to_string()))?;
        let agent = AgentName::parse(agent).map_err(|e| LinkError::BadRequest(e.to_string()))?;
        let provisioner = &self.provisioner;
        let entry = provisioner.roster.get(&agent).await.map_err(LinkError::Unavailable)?;
        let Some(entry) = entry.filter(|e| e.hive == hive) else {
            return Err(LinkError::NotFound(format!("no agent {agent} on hive {hive} (see GET /api/agents)")));
        };
        if entry.spec.is_none() {
            return Err(LinkError::Conflict(format!(
                "agent {agent} is declared in its host's configuration, not created through POST /api/agents; \
                 linked accounts reach created agents only"
            )));
        }
        let wanted = provisioner.wanted.get(&hive, &agent).await.map_err(LinkError::Unavailable)?;
        if wanted.is_some_and(|w| w.wanted.state == WantedState::Destroyed) {
            return Err(LinkError::Conflict(format!("agent {agent} is destroyed")));
        }
        Ok((agent, entry))
    }

    /// Queues a `credentials` job sending the agent's current secrets to its hive; the job
    /// graph retries it with backoff while the queue or the hive's key is unavailable.
    fn deliver(&self, agent: &AgentName) -> JobId {
        let n = self.deliveries.fetch_add(1, Ordering::Relaxed) + 1;
        let id =
            JobId::parse(&format!("{agent}.linked-accounts.{n}")).expect("an agent name and a number make a job id");
        self.provisioner.queue_credentials(id.clone(), agent, "linked accounts");
        id
    }
}

/// The slot a route names: `matrix-accounts/{name}`, `forge-accounts/{label}` or
/// `github-account`.
///
/// # Errors
/// [`LinkError::BadRequest`] for a malformed name.
pub fn slot(kind: Kind, name: Option<&str>) -> Result<Slot, LinkError> {
    match (kind, name) {
        (Kind::Github, _) => Ok(Slot::github()),
        (kind, Some(name)) => Slot::named(kind, name).map_err(LinkError::BadRequest),
        (_, None) => Err(LinkError::BadRequest("the route names no account".into())),
    }
}
