//! The swarm's NATS accounts as the controller changes them while the swarm runs: an agent
//! created (its account, and its hive's account gaining its queue), an agent revoked. Each change
//! is written into the `nats init` directory first (`SWARM_NATS_DIR`), then given to the running
//! server ([`crate::nats::claims::push`]); the fragment, so a server started with it agrees, is
//! rewritten at once for a revocation and a second or more after creations
//! ([`crate::nats::fragment_refresh`]). Nothing needs a reload, so a nats-server on another host
//! takes agents created through the API.
//!
//! The server stores whatever JWT of an account it is given last, not the newest, so two changes
//! of one account must reach it in the order they were written: each change is written and
//! pushed under one lock ([`Accounts`] is shared by everything in the controller that changes
//! accounts). Every push sends the accounts as they now stand rather than only what changed, so
//! repeating a call whose push failed completes it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_nats_creds::{AccountJwt, AgentName, CredsError, HiveName, Revocation, SecretCreds};
use tokio::sync::Mutex;

use crate::nats::claims::{self, PushError};
use crate::nats::fragment_refresh::FragmentRefresh;

/// Why an account change did not complete. Repeating the call retries it; what was written into
/// the directory stays, and reaches the fragment when a repeated call succeeds (or at the
/// controller's next start).
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    /// The `nats init` directory could not be read or written, or refused the change (a revoked
    /// agent).
    #[error("in the NATS directory: {0}")]
    Creds(#[from] CredsError),
    /// The running server was not given the change.
    #[error("telling nats-server: {0}")]
    Push(#[from] PushError),
    /// The blocking file work did not finish.
    #[error("the account task failed: {0}")]
    Task(String),
}

/// An agent's NATS user credential, made by [`Accounts::create_agent`].
#[derive(Debug, Clone)]
pub struct AgentCredential {
    /// The `.creds` text (a secret: its `Debug` is redacted).
    pub creds: SecretCreds,
    /// When it expires (unix seconds).
    pub expires_at: u64,
    /// The accounts the server was given (the agent's and its hive's, public).
    pub accounts: Vec<AccountJwt>,
}

/// Changes accounts in the `nats init` directory and tells the server at one URL.
#[derive(Debug)]
pub struct Accounts {
    nats_dir: PathBuf,
    url: String,
    /// Held while an account change is written and pushed (see the module doc).
    order: Mutex<()>,
    fragment: FragmentRefresh,
}

impl Accounts {
    /// Accounts signed with the keys in `nats_dir`, pushed to the server at `url`.
    pub fn new(nats_dir: PathBuf, url: String) -> Self {
        Self { fragment: FragmentRefresh::new(nats_dir.clone()), nats_dir, url, order: Mutex::new(()) }
    }

    /// The fragment's rewrites after creations.
    pub fn fragment(&self) -> &FragmentRefresh {
        &self.fragment
    }

    /// The `nats init` directory.
    pub fn nats_dir(&self) -> &Path {
        &self.nats_dir
    }

    /// Makes `agent`, run by `hive`, able to connect now: its account (and its hive's account
    /// importing its todo queue) written and given to the running server, and a user credential
    /// valid for `ttl` returned. For an existing agent it renews the credential (and repeats the
    /// push, completing one that failed before).
    ///
    /// # Errors
    /// [`AccountsError::Creds`] (e.g. a revoked agent: [`CredsError::Revoked`]),
    /// [`AccountsError::Push`] when the server was not given the accounts (the credential is not
    /// returned then: it would not work).
    pub async fn create_agent(
        &self,
        hive: &HiveName,
        agent: &AgentName,
        ttl: Duration,
    ) -> Result<AgentCredential, AccountsError> {
        let _order = self.order.lock().await;
        let (dir, hive_name, agent_name) = (self.nats_dir.clone(), hive.clone(), agent.clone());
        let (made, pusher) = blocking(move || {
            let made = hyperhive_nats_creds::mint_agent_of_hive(&dir, &hive_name, &agent_name, ttl)?;
            Ok((made, Pusher::read(&dir)?))
        })
        .await?;
        pusher.push(&self.url, &made.accounts).await?;
        if !made.changed.is_empty() {
            self.fragment.ask();
        }
        let changed: Vec<&str> = made.changed.iter().map(|a| a.name.as_str()).collect();
        tracing::info!(%hive, %agent, ?changed, "agent's NATS account given to the server");
        Ok(AgentCredential { creds: made.creds, expires_at: made.expires_at, accounts: made.accounts })
    }

    /// Revokes every credential of `agent` (see [`hyperhive_nats_creds::revoke_agent`]) and gives
    /// the revoked account to the running server, which closes the agent's connections and refuses
    /// new ones. Repeating it is harmless.
    ///
    /// # Errors
    /// [`AccountsError`].
    pub async fn revoke_agent(&self, agent: &AgentName) -> Result<Revocation, AccountsError> {
        let _order = self.order.lock().await;
        let (dir, name) = (self.nats_dir.clone(), agent.clone());
        let (revocation, pusher) = blocking(move || {
            let revocation = hyperhive_nats_creds::revoke_agent(&dir, &name)?;
            Ok((revocation, Pusher::read(&dir)?))
        })
        .await?;
        pusher.push(&self.url, std::slice::from_ref(&revocation.account)).await?;
        Ok(revocation)
    }

    /// Brings accounts an older build made up to this build's grants and gives the server the
    /// ones rewritten (see [`hyperhive_nats_creds::refresh_grants`]), returning how many.
    ///
    /// # Errors
    /// [`AccountsError`].
    pub async fn refresh_grants(&self) -> Result<usize, AccountsError> {
        let _order = self.order.lock().await;
        let dir = self.nats_dir.clone();
        let (changed, pusher) =
            blocking(move || Ok((hyperhive_nats_creds::refresh_grants(&dir)?, Pusher::read(&dir)?))).await?;
        pusher.push(&self.url, &changed).await?;
        Ok(changed.len())
    }

    /// Gives the server every account the directory holds (after it lost its resolver directory,
    /// or to be sure it has them all), returning how many.
    ///
    /// # Errors
    /// [`AccountsError`].
    pub async fn push_all(&self) -> Result<usize, AccountsError> {
        let _order = self.order.lock().await;
        let dir = self.nats_dir.clone();
        let (accounts, pusher) =
            blocking(move || Ok((hyperhive_nats_creds::all_account_jwts(&dir)?, Pusher::read(&dir)?))).await?;
        pusher.push(&self.url, &accounts).await?;
        Ok(accounts.len())
    }
}

/// What a push needs from the directory: the system user's credential and the operator's key.
struct Pusher {
    system_creds: PathBuf,
    operator: String,
}

impl Pusher {
    fn read(dir: &Path) -> Result<Self, CredsError> {
        Ok(Self {
            system_creds: hyperhive_nats_creds::system_creds(dir)?,
            operator: hyperhive_nats_creds::operator_public_key(dir)?,
        })
    }

    async fn push(&self, url: &str, accounts: &[AccountJwt]) -> Result<(), PushError> {
        claims::push(url, &self.system_creds, &self.operator, accounts).await
    }
}

/// Runs file work (under the directory's file lock) off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CredsError> + Send + 'static,
) -> Result<T, AccountsError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| AccountsError::Task(e.to_string()))?.map_err(Into::into)
}
