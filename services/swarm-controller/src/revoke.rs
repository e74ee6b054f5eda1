//! Revoking a destroyed agent's NATS credentials (docs/swarm/security.md, "Revocation").
//!
//! Two steps. [`hyperhive_nats_creds::revoke_agent`] writes the agent's account JWT with
//! `revocations: {"*": now}` into the `nats init` directory and the server's config fragment, so
//! a restarted or reloaded server refuses every credential of the agent. Then [`push`] hands the
//! new JWT to the running server as a system-account user.
//!
//! The server runs `resolver: MEMORY`, and with it nats-server applies a claims update only to an
//! account it has loaded ("jwt update skipped" otherwise); an account it has not loaded yet would
//! later be loaded from the preload it read at start, i.e. the JWT without the revocation. No
//! system request loads an account (`$SYS.REQ.ACCOUNT.<acc>.INFO` answers "does not exist"), but
//! a client connecting as a user of the account does, whether it is then accepted or refused. So
//! [`push`] first connects once as a one-off user of the account (issued at the revocation time,
//! so the revocation covers it), then sends the update, and checks that the server answered
//! "jwt updated".

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_nats_creds::{AgentName, CredsError, Revocation};
use serde_json::Value;
use tokio::sync::Mutex;

/// How long one system request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a revocation did not complete; the recorded wanted state stays and the reconcile pass
/// retries. The text holds no secret (a JWT is not shown).
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    /// The `nats init` directory could not be read or written.
    #[error("writing the revocation into the NATS directory: {0}")]
    Creds(#[from] CredsError),
    /// The running server could not be told.
    #[error("telling nats-server about the revocation: {0}")]
    Push(String),
}

/// Sends `revocation` to the server at `url` with the system user credential `system_creds`.
///
/// # Errors
/// [`RevokeError::Push`] when the server cannot be reached, refuses the system user, does not
/// load the account, or does not answer "jwt updated".
pub async fn push(url: &str, system_creds: &Path, revocation: &Revocation) -> Result<(), RevokeError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| RevokeError::Push(format!("{what}: {e}"));
    let client = async_nats::ConnectOptions::with_credentials_file(system_creds)
        .await
        .map_err(|e| failed(&format!("reading {}", system_creds.display()), &e))?
        .name("swarm-controller-system")
        .connection_timeout(REQUEST_TIMEOUT)
        .request_timeout(Some(REQUEST_TIMEOUT))
        .connect(url)
        .await
        .map_err(|e| failed(&format!("connecting to {url} as the system user"), &e))?;
    let account = &revocation.account;
    // Accepted (the server has the account without the revocation yet) or refused (it already has
    // the revocation): either way the account is loaded now. Kept open until the update is sent.
    let _loader = load_account(url, revocation).await;
    let update = client
        .request(format!("$SYS.REQ.ACCOUNT.{account}.CLAIMS.UPDATE"), revocation.jwt.clone().into())
        .await
        .map_err(|e| failed("sending the account JWT", &e))?;
    let update: Value = serde_json::from_slice(&update.payload).map_err(|e| failed("the update answer", &e))?;
    let message = update["data"]["message"].as_str().unwrap_or_default();
    if message != "jwt updated" {
        let said = update.get("error").unwrap_or(&update["data"]);
        return Err(RevokeError::Push(format!("the server did not apply the revocation of {account}: {said}")));
    }
    // Flushed so the connection closes only after the server has everything.
    client.flush().await.map_err(|e| failed("flushing", &e))?;
    Ok(())
}

/// Connects as the revocation's one-off user, which makes the server load the account.
async fn load_account(url: &str, revocation: &Revocation) -> Option<async_nats::Client> {
    let options = async_nats::ConnectOptions::with_credentials(&revocation.loader_creds).ok()?;
    match options.name("swarm-controller-revocation").connection_timeout(REQUEST_TIMEOUT).connect(url).await {
        Ok(client) => Some(client),
        Err(err) => {
            tracing::debug!(account = %revocation.account, %err, "the loader was refused (already revoked)");
            None
        }
    }
}

/// Revokes agents' credentials and remembers which it has done since the controller started (a
/// restarted controller does each `destroyed` agent once again; both steps are idempotent).
#[derive(Debug)]
pub struct Revoker {
    nats_dir: PathBuf,
    url: String,
    done: Mutex<HashSet<AgentName>>,
}

impl Revoker {
    /// Revokes with the keys in `nats_dir` and tells the server at `url`.
    pub fn new(nats_dir: PathBuf, url: String) -> Self {
        Self { nats_dir, url, done: Mutex::new(HashSet::new()) }
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
        let (dir, name) = (self.nats_dir.clone(), agent.clone());
        // File writes under a file lock: kept off the async workers.
        let (revocation, system_creds) = tokio::task::spawn_blocking(move || {
            let revocation = hyperhive_nats_creds::revoke_agent(&dir, &name)?;
            Ok::<_, CredsError>((revocation, hyperhive_nats_creds::system_creds(&dir)?))
        })
        .await
        .map_err(|e| RevokeError::Push(format!("the revocation task failed: {e}")))??;
        push(&self.url, &system_creds, &revocation).await?;
        tracing::info!(%agent, account = %revocation.account, "agent's NATS credentials revoked");
        self.done.lock().await.insert(agent.clone());
        Ok(())
    }
}
