//! Revoking a destroyed agent's NATS credentials (docs/swarm/security.md, "Revocation"), and
//! remembering which agents are done so the reconcile pass retries only the others.
//!
//! [`Accounts::revoke_agent`] writes the agent's account JWT with `revocations: {"*": now}` into
//! the `nats init` directory and gives it to the running server. The server's full resolver stores
//! it in its own directory whether or not the account is loaded, so an agent that has not
//! connected since the server started is refused as surely as a connected one is cut off, and a
//! restart keeps the revocation.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use hyperhive_nats_creds::AgentName;
use tokio::sync::Mutex;

use crate::nats::tenants::{Accounts, AccountsError};

/// Why a revocation did not complete; the recorded wanted state stays and the reconcile pass
/// retries. The text holds no secret.
pub type RevokeError = AccountsError;

/// Revokes agents' credentials and remembers which it has done since the controller started (a
/// restarted controller does each `destroyed` agent once again; both steps are idempotent).
#[derive(Debug)]
pub struct Revoker {
    accounts: Arc<Accounts>,
    done: Mutex<HashSet<AgentName>>,
}

impl Revoker {
    /// Revokes with the keys in `nats_dir` and tells the server at `url`.
    pub fn new(nats_dir: PathBuf, url: String) -> Self {
        Self::with_accounts(Arc::new(Accounts::new(nats_dir, url)))
    }

    /// Revokes through `accounts`, shared with whatever else changes accounts, so every change
    /// reaches the server in the order it was written.
    pub fn with_accounts(accounts: Arc<Accounts>) -> Self {
        Self { accounts, done: Mutex::new(HashSet::new()) }
    }

    /// The accounts it revokes through (to create agents with the same ordering).
    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Whether `agent` was revoked since the controller started.
    pub async fn is_done(&self, agent: &AgentName) -> bool {
        self.done.lock().await.contains(agent)
    }

    /// Revokes `agent` (a no-op when already done since start).
    ///
    /// # Errors
    /// [`RevokeError`]; calling again retries.
    pub async fn revoke(&self, agent: &AgentName) -> Result<(), RevokeError> {
        if self.is_done(agent).await {
            return Ok(());
        }
        let revocation = self.accounts.revoke_agent(agent).await?;
        tracing::info!(%agent, account = %revocation.account.account, "agent's NATS credentials revoked");
        self.done.lock().await.insert(agent.clone());
        Ok(())
    }
}
