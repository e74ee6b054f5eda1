//! [`StepError`]: why a provisioning step (or a credential renewal, repair or delivery) failed,
//! and whether the job graph should try it again. Each failure is classified where it arises:
//!
//! - **retryable**: a server that did not answer, failed (5xx) or throttled (429); NATS (the
//!   roster, the wanted states, the secret store, the deploy stream) unavailable; the NATS
//!   signing directory unreadable. The job backs off and tries again.
//! - **permanent**: a refusal (any other 4xx: a name taken, an admin token the server does not
//!   accept, input it rejects), an account of the agent's name this swarm cannot prove it made,
//!   a spec or setting that is missing or wrong, a secret that does not open. The job fails at
//!   once, with the reason as its `last_error`, and the steps after it are blocked until someone
//!   fixes the cause and retries it (`swarmctl jobs retry`).
//!
//! The message is what the roster records and the graph shows, so it says what failed and what to
//! do, and never holds a secret (no adapter error does).

use hyperhive_jobq::{AttemptError, ErrorKind};
use hyperhive_nats_creds::CredsError;
use hyperhive_provision::Retryable;
use hyperhive_provision::forge::ForgeError;
use hyperhive_provision::matrix::MatrixError;
use hyperhive_provision::sso::SsoError;
use hyperhive_provision::store_ca::StoreCaError;

use crate::lifecycle::deploy::SendError;
use crate::nats::tenants::AccountsError;
use crate::secrets::SecretsError;

/// A step's failure: its reason and whether a retry can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct StepError(AttemptError);

impl StepError {
    /// A failure that may pass by itself: the job is retried after its backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self(AttemptError::retryable(message))
    }

    /// A failure no retry can mend until someone acts: the job fails at once.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self(AttemptError::permanent(message))
    }

    /// Whether no retry can help.
    pub fn is_permanent(&self) -> bool {
        self.0.is_permanent()
    }

    /// An adapter's error, classified by the adapter.
    fn adapter(err: &impl Retryable) -> Self {
        let kind = if err.is_retryable() { ErrorKind::Retryable } else { ErrorKind::Permanent };
        Self(AttemptError::new(kind, err.to_string()))
    }
}

impl From<StepError> for AttemptError {
    fn from(err: StepError) -> Self {
        err.0
    }
}

impl From<SsoError> for StepError {
    fn from(err: SsoError) -> Self {
        Self::adapter(&err)
    }
}

impl From<ForgeError> for StepError {
    fn from(err: ForgeError) -> Self {
        Self::adapter(&err)
    }
}

impl StepError {
    /// A forge call made with the controller's admin token: a 401 or 403 means the forge does
    /// not take that token, so the message says which setting to check.
    pub fn forge_admin(err: ForgeError) -> Self {
        match err.status() {
            Some(401 | 403) => Self::permanent(format!(
                "{err}; check that {} holds a token of a site administrator with scope all",
                super::settings::vars::FORGE_ADMIN_TOKEN_FILE
            )),
            _ => err.into(),
        }
    }
}

impl From<MatrixError> for StepError {
    fn from(err: MatrixError) -> Self {
        Self::adapter(&err)
    }
}

impl From<StoreCaError> for StepError {
    fn from(err: StoreCaError) -> Self {
        Self::adapter(&err)
    }
}

/// A value that does not open was sealed under another key or changed: no retry opens it. NATS
/// failing may pass.
impl From<SecretsError> for StepError {
    fn from(err: SecretsError) -> Self {
        match err {
            SecretsError::Open { .. } => Self::permanent(err.to_string()),
            SecretsError::Nats { .. } => Self::retryable(err.to_string()),
        }
    }
}

/// The hive directory is read once at start, so a hive missing from it, or without an xkey,
/// stays so until the file is fixed and the controller restarted; a payload the hive would
/// refuse stays refused. Only the publish itself may pass.
impl From<SendError> for StepError {
    fn from(err: SendError) -> Self {
        match err {
            SendError::Publish { .. } => Self::retryable(err.to_string()),
            SendError::UnknownHive(_) | SendError::NoXkey(_) | SendError::Payload(_) => {
                Self::permanent(err.to_string())
            }
        }
    }
}

/// Telling nats-server and reading the signing directory may pass; a credential the directory
/// refuses to mint (a revoked agent, a bad seed) does not.
impl From<AccountsError> for StepError {
    fn from(err: AccountsError) -> Self {
        match &err {
            AccountsError::Creds(CredsError::Io { .. }) | AccountsError::Push(_) | AccountsError::Task(_) => {
                Self::retryable(err.to_string())
            }
            AccountsError::Creds(_) => Self::permanent(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, call: &str, message: &str) -> StepError {
        ForgeError::Refused { call: call.into(), status, message: message.into() }.into()
    }

    #[test]
    fn forge_refusals_are_permanent_and_its_outages_retryable() {
        let taken = refused(422, "create user \"alpha\"", "user already exists [name: alpha]");
        assert!(taken.is_permanent());
        assert_eq!(
            taken.to_string(),
            "forge create user \"alpha\": HTTP 422 Unprocessable Entity: user already exists [name: alpha]"
        );
        assert!(!refused(503, "get user \"alpha\"", "Service Unavailable").is_permanent());
        assert!(!refused(429, "get user \"alpha\"", "slow down").is_permanent());
        let unreachable = ForgeError::Unreachable { call: "get user \"alpha\"".into(), reason: "refused".into() };
        assert!(!StepError::from(unreachable).is_permanent());
    }

    #[test]
    fn an_admin_token_the_forge_refuses_says_which_setting_to_check() {
        let forge = |status: u16| ForgeError::Refused {
            call: "create user \"alpha\"".into(),
            status,
            message: "user should be the site admin".into(),
        };
        let err = StepError::forge_admin(forge(403));
        assert!(err.is_permanent());
        assert!(err.to_string().contains("SWARM_FORGE_ADMIN_TOKEN_FILE"), "{err}");
        assert!(!StepError::forge_admin(forge(503)).to_string().contains("SWARM_FORGE_ADMIN_TOKEN_FILE"));
        let err = refused(401, "list tokens of \"alpha\"", "invalid username, password or token");
        assert!(err.is_permanent() && !err.to_string().contains("SWARM_FORGE_ADMIN_TOKEN_FILE"), "{err}");
    }

    #[test]
    fn the_kind_reaches_the_job_graph_with_the_message() {
        let attempt = AttemptError::from(StepError::permanent("the forge has an account named alpha"));
        assert!(attempt.is_permanent());
        assert_eq!(attempt.message(), "the forge has an account named alpha");
        assert!(!AttemptError::from(StepError::retryable("NATS: timed out")).is_permanent());
    }
}
