//! The agent's matrix account: registered once, proven by logging in, re-checked with `whoami`,
//! revoked with `logout`, and repaired through the admin API when an administrator deactivated
//! or locked it (see docs/swarm/provisioning.md, "Matrix (Synapse)").
//!
//! # Layout
//! - [`Matrix`]: what the controller asks of a homeserver; [`SynapseClient`] implements it.
//! - [`Homeserver`]: any homeserver's `whoami` and `logout`, with no administrator (linked accounts).
//! - `names`: the checks on a localpart, password and display name before anything is sent.
//! - `registration_mac`: the HMAC of Synapse's shared-secret registration.
//! - `error`: [`MatrixError`], and how a Matrix error answer (`errcode`) maps to it.
//!
//! # Idempotency
//! Registering a localpart that exists answers [`MatrixError::AlreadyExists`], never a second
//! account: the controller then logs in with the password it stored when it registered, which
//! succeeds only if the account is the one it made (anyone else's answers
//! [`MatrixError::Forbidden`]).

mod error;
mod homeserver;
mod names;
mod registration_mac;
mod synapse;

use async_trait::async_trait;

pub use error::MatrixError;
pub use homeserver::Homeserver;
pub use synapse::SynapseClient;

use crate::secret::Secret;

/// A logged-in device of an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The full user id, `@localpart:server`.
    pub user_id: String,
    /// The device's access token; it does not expire (no refresh token is asked for).
    pub access_token: Secret,
    /// The device the token belongs to.
    pub device_id: String,
}

/// Registration logs the new account in: its first session.
pub type Registered = Session;

/// What the homeserver says about an access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountCheck {
    /// The token works and belongs to `user_id`.
    Valid {
        /// The full user id the token belongs to.
        user_id: String,
    },
    /// The homeserver does not know the token: logged out, or the account was deactivated
    /// (Synapse deletes every token, and the password, of a deactivated account). Logging in
    /// with the stored password then either works (the token was only revoked) or is
    /// forbidden (the account is lost: deactivated, or its password changed by someone else).
    Invalid,
    /// The homeserver says the token's account is deactivated (`M_USER_DEACTIVATED`). Synapse
    /// never answers this to `whoami`, as it deletes the tokens; other homeservers may.
    Deactivated,
    /// An administrator locked the account: its tokens are refused until it is unlocked.
    Locked,
}

/// What the admin API says about an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAccountState {
    /// No account has the user id: it can be registered.
    NotFound,
    /// The account exists.
    Exists {
        /// An administrator deactivated it: its tokens and password are gone.
        deactivated: bool,
        /// An administrator locked it: its tokens are refused until it is unlocked.
        locked: bool,
    },
}

/// A homeserver the controller makes and checks agents' accounts on.
#[async_trait]
pub trait Matrix: Send + Sync {
    /// Creates the account `localpart` with `password`, and logs it in.
    ///
    /// # Errors
    /// [`MatrixError::AlreadyExists`] when the localpart is taken (see the module doc);
    /// [`MatrixError::SharedSecretRejected`], [`MatrixError::InvalidInput`],
    /// [`MatrixError::RateLimited`], [`MatrixError::Unreachable`] and the server's other answers.
    async fn register(
        &self,
        localpart: &str,
        password: &Secret,
        displayname: Option<&str>,
    ) -> Result<Registered, MatrixError>;

    /// Logs in `localpart` with `password`: a new device and token.
    ///
    /// # Errors
    /// [`MatrixError::Forbidden`] for a wrong password, an unknown account, or (on Synapse) a
    /// deactivated account, whose password Synapse deletes; [`MatrixError::Locked`],
    /// [`MatrixError::Deactivated`] (homeservers that check it before the password),
    /// [`MatrixError::RateLimited`], [`MatrixError::Unreachable`].
    async fn login(&self, localpart: &str, password: &Secret) -> Result<Session, MatrixError>;

    /// Whom `access_token` belongs to, if anyone.
    ///
    /// # Errors
    /// Only when there is no verdict: unreachable, rate limited, an unexpected answer.
    async fn whoami(&self, access_token: &Secret) -> Result<AccountCheck, MatrixError>;

    /// Revokes `access_token`. A token the homeserver no longer knows counts as revoked.
    ///
    /// # Errors
    /// When the homeserver cannot be reached or refuses for another reason: the token may
    /// still work then.
    async fn logout(&self, access_token: &Secret) -> Result<(), MatrixError>;

    /// A session of the server-admin account `localpart`, registering it (as an admin) when the
    /// localpart is free. When it is taken, the account is used only if `password` logs in and
    /// the admin API accepts the session; every such call is a new device, so log it out when
    /// done with it.
    ///
    /// # Errors
    /// [`MatrixError::Forbidden`] when the localpart is taken and the password does not log in,
    /// or the account is not a server admin; the errors of [`Matrix::register`] and
    /// [`Matrix::login`].
    async fn admin_session(&self, localpart: &str, password: &Secret) -> Result<Session, MatrixError>;

    /// What the admin API says about `user_id` (`@localpart:server`); `admin_token` is an admin
    /// session's token.
    ///
    /// # Errors
    /// [`MatrixError::InvalidInput`] for a malformed user id (nothing is sent);
    /// [`MatrixError::Forbidden`] when `admin_token` is not a server admin's;
    /// [`MatrixError::UnknownToken`] when it is not valid; unreachable, rate limited, and the
    /// server's other answers (a user id of another server is a 400).
    async fn account_state(&self, admin_token: &Secret, user_id: &str) -> Result<AdminAccountState, MatrixError>;

    /// Makes `user_id` usable again with `password`: reactivates it if deactivated, unlocks it if
    /// locked, and sets its password (a deactivated account has none). Its remaining devices are
    /// kept. Never creates an account.
    ///
    /// # Errors
    /// [`MatrixError::NotFound`] when there is no such account; the errors of
    /// [`Matrix::account_state`]; [`MatrixError::InvalidInput`] for a bad password.
    async fn reactivate(&self, admin_token: &Secret, user_id: &str, password: &Secret) -> Result<(), MatrixError>;
}
