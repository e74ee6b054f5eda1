//! Proving a linked credential works before it is stored, and revoking a matrix token.
//!
//! A matrix token is checked with `whoami` on its homeserver and must belong to the user id
//! given; a forge token with `GET /api/v1/user` and must sign in the login given. A GitHub token
//! is only checked for form: the controller may have no route to github.com, and no stand-in
//! for it runs in the tests, so its first use is the agent's.

use hyperhive_provision::Secret;
use hyperhive_provision::forge::{Forge, ForgeError, ForgejoClient, TokenCheck};
use hyperhive_provision::matrix::{AccountCheck, Homeserver, MatrixError};

use super::account::Account;

/// Why a credential was not accepted or not revoked.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The server answered, and the credential is not what the body says (400).
    #[error("{0}")]
    Rejected(String),
    /// The server could not be asked (502): nothing is stored or removed.
    #[error("{0}")]
    Unreachable(String),
    /// A matrix token the homeserver no longer knows cannot be revoked (409).
    #[error("{0}")]
    AlreadyInvalid(String),
}

/// Checks `account` against its server, where there is one to ask.
///
/// # Errors
/// [`VerifyError::Rejected`] or [`VerifyError::Unreachable`], naming the server, never the
/// credential.
pub async fn verify(account: &Account) -> Result<(), VerifyError> {
    match account {
        Account::Matrix { homeserver, user_id, access_token, .. } => {
            let client = Homeserver::new(homeserver).map_err(|e| VerifyError::Rejected(e.to_string()))?;
            let token = Secret::new(access_token.clone());
            match client.whoami(&token).await {
                Ok(AccountCheck::Valid { user_id: owner }) if &owner == user_id => Ok(()),
                Ok(AccountCheck::Valid { user_id: owner }) => Err(VerifyError::Rejected(format!(
                    "the access token belongs to {owner}, not {user_id}, on {homeserver}"
                ))),
                Ok(AccountCheck::Invalid) => {
                    Err(VerifyError::Rejected(format!("{homeserver} does not know this access token")))
                }
                Ok(AccountCheck::Deactivated) => {
                    Err(VerifyError::Rejected(format!("{user_id} is deactivated on {homeserver}")))
                }
                Ok(AccountCheck::Locked) => Err(VerifyError::Rejected(format!("{user_id} is locked on {homeserver}"))),
                Err(err) => Err(matrix_unreachable(homeserver, &err)),
            }
        }
        Account::Forge { url, username, token } => {
            let token = Secret::new(token.clone());
            let client =
                ForgejoClient::as_user(url, token.clone()).map_err(|e| VerifyError::Rejected(e.to_string()))?;
            match client.check_token(&token).await {
                Ok(TokenCheck::Valid { login }) if login.eq_ignore_ascii_case(username) => Ok(()),
                Ok(TokenCheck::Valid { login }) => {
                    Err(VerifyError::Rejected(format!("the token signs in {login}, not {username}, on {url}")))
                }
                Ok(TokenCheck::Invalid) => Err(VerifyError::Rejected(format!("{url} does not know this token"))),
                Err(err) if err.is_transient() || matches!(err, ForgeError::BadAnswer { .. }) => {
                    Err(VerifyError::Unreachable(format!("cannot verify the token: {err}")))
                }
                Err(err) => Err(VerifyError::Rejected(format!("the forge refused the token: {err}"))),
            }
        }
        Account::Github { .. } => Ok(()),
    }
}

/// Logs a linked matrix account's token out at its homeserver.
///
/// # Errors
/// [`VerifyError::Unreachable`] (homeserver down or failing) or [`VerifyError::AlreadyInvalid`]
/// (the homeserver does not know the token); the caller then keeps the account.
pub async fn revoke_matrix(homeserver: &str, access_token: &str) -> Result<(), VerifyError> {
    let client = Homeserver::new(homeserver).map_err(|e| VerifyError::Rejected(e.to_string()))?;
    match client.logout_known(&Secret::new(access_token.to_owned())).await {
        Ok(()) => Ok(()),
        Err(MatrixError::UnknownToken) => Err(VerifyError::AlreadyInvalid(format!(
            "{homeserver} says the stored token is already invalid, so it cannot be revoked; the account is kept \
             (DELETE without ?revoke=true removes it)"
        ))),
        Err(err) => Err(matrix_unreachable(homeserver, &err)),
    }
}

fn matrix_unreachable(homeserver: &str, err: &MatrixError) -> VerifyError {
    match err {
        MatrixError::Unreachable { .. } => VerifyError::Unreachable(format!("no answer from {homeserver}: {err}")),
        _ => VerifyError::Unreachable(format!("{homeserver} answered with an error: {err}")),
    }
}
