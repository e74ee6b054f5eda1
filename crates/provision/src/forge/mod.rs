//! The forge adapter: an agent's forge user, its config repository generated from the
//! operator's template, and its API token, through the Forgejo/Gitea v1 REST API.
//!
//! The controller's job graph drives [`Forge`]; [`ForgejoClient`] is the real implementation.
//! Every step the trait offers is a look or a single create, so the caller can make each job
//! idempotent and adopt only what it can prove it made (docs/swarm/provisioning.md, "Forge"):
//!
//! - a **user** is proven the controller's own when [`Forge::password_works`] accepts the
//!   password the controller generated and sealed *before* it asked for the user;
//! - a **repository** is the agent's when its owner is the proven user;
//! - a **token** whose value was lost (a crash after minting) is found by name with
//!   [`Forge::token_names`], deleted with [`Forge::delete_token`] and minted again.
//!
//! Retries belong to the job graph, not here: a create is not idempotent over HTTP (a create
//! whose answer was lost, sent again, meets "already exists"), so only the caller, who can look
//! first, may repeat it. [`ForgeError::is_transient`] (the [`crate::Retryable`] of this adapter)
//! says which failures are worth a retry.
//!
//! # Layout
//! - [`types`]: what the trait takes and returns.
//! - [`error`]: [`ForgeError`]: the call, the HTTP status and the forge's own message.
//! - [`names`]: the formats of user names, repository names, token names, emails and scopes.
//! - `wire`: the JSON bodies of the v1 API (private); [`payload`] reads the objects inside
//!   webhook payloads with them.
//! - [`client`]: [`ForgejoClient`], the trait over HTTP with an admin token.
//! - [`swarm`]: [`SwarmForge`], the swarm-wide objects (organisation, team, labels, webhook) and
//!   the listings of pull requests and issues, also on [`ForgejoClient`].

pub mod client;
pub mod error;
pub mod names;
pub mod payload;
pub mod swarm;
pub mod types;
mod wire;

use async_trait::async_trait;

pub use client::ForgejoClient;
pub use error::ForgeError;
pub use swarm::SwarmForge;
pub use types::{
    ForgeUser, Hook, HookSpec, Issue, Label, LabelScope, NewForgeUser, NewTeam, Org, PullFilter, PullRequest, Repo,
    Team, TeamPermission, TokenCheck, Visibility,
};

use crate::secret::Secret;

/// What provisioning needs from a forge. Names are checked against [`names`] before any
/// request is sent, so a malformed one fails with [`ForgeError::Invalid`] and costs no round trip.
#[async_trait]
pub trait Forge: Send + Sync {
    /// The user called `name`, or `None` when there is none (a name that only redirects to a
    /// renamed user counts as none: the forge lets a new user take it). A wrong admin token is
    /// an error (401), never a quiet anonymous answer.
    async fn user(&self, name: &str) -> Result<Option<ForgeUser>, ForgeError>;

    /// Creates a user who may sign in with `password` at once (no forced password change, no
    /// notification mail). Fails with status 422 when the name or email is taken.
    async fn create_user(&self, user: &NewForgeUser, password: &Secret) -> Result<ForgeUser, ForgeError>;

    /// Deletes the user `name`; a user already gone is success. The forge refuses (422) while
    /// the user still owns repositories.
    async fn delete_user(&self, name: &str) -> Result<(), ForgeError>;

    /// Whether `password` signs `name` in (HTTP basic auth on `GET /user`): `false` for a wrong
    /// password or an unknown user, an error when the forge cannot say (down, or the account is
    /// barred from signing in).
    async fn password_works(&self, name: &str, password: &Secret) -> Result<bool, ForgeError>;

    /// The repository `owner/name`, or `None` when there is none.
    async fn repo(&self, owner: &str, name: &str) -> Result<Option<Repo>, ForgeError>;

    /// Generates `owner/name` from the template repository `template_owner/template` (its git
    /// content). Fails with 409 when `owner/name` exists, 404 when the template does not, 422
    /// when the template repository is not marked as a template.
    async fn generate_repo(
        &self,
        template_owner: &str,
        template: &str,
        owner: &str,
        name: &str,
        private: bool,
    ) -> Result<Repo, ForgeError>;

    /// Mints an API token for `user`, signing in as that user with `password` (the forge takes
    /// token requests only over basic auth). Fails with 400 when the user has a token of that
    /// name already, or a scope is unknown.
    async fn mint_token(
        &self,
        user: &str,
        password: &Secret,
        token_name: &str,
        scopes: &[&str],
    ) -> Result<Secret, ForgeError>;

    /// The names of all of `user`'s tokens (every page).
    async fn token_names(&self, user: &str, password: &Secret) -> Result<Vec<String>, ForgeError>;

    /// Deletes `user`'s token called `token_name`; a token already gone is success.
    async fn delete_token(&self, user: &str, password: &Secret, token_name: &str) -> Result<(), ForgeError>;

    /// Whether `token` still signs someone in, and whom: `Invalid` when the forge answers 401.
    /// Any other refusal is an error, because the forge could not say: 403 when the token
    /// lacks the `read:user` scope or its user is barred from signing in, 503 when it is down.
    async fn check_token(&self, token: &Secret) -> Result<TokenCheck, ForgeError>;
}
