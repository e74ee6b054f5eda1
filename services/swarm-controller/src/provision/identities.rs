//! The steps that make an agent's identities in external systems: the SSO user, the forge user, its
//! config repository and token, the matrix account.
//!
//! Every account is created with a password the secret store holds before the account exists.
//! An account of the agent's name that is there already is adopted only when that password works
//! for it (the bridge's verify-password, forge basic auth, a matrix login): that proves this
//! swarm made it, perhaps in a run that stopped before recording it. Any other such account
//! belongs to someone else, and the step fails saying so instead of taking it over: at once, as
//! no retry changes whose account it is (see [`super::error`] for what is retried).

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::roster::Identities;
use hyperhive_provision::forge::{NewForgeUser, Org, SwarmForge, TokenCheck, Visibility};
use hyperhive_provision::matrix::{AccountCheck, AdminAccountState, MatrixError};
use hyperhive_provision::sso::NewSsoUser;

use super::error::StepError;
use super::settings::vars;
use super::vault::Kind;
use super::{IdentityChange, Outcome, Provisioner, not_configured};

/// The mail domain of agents' accounts: `.invalid` is reserved (RFC 2606), so no mail is ever
/// sent on an agent's behalf to a real mailbox.
pub const AGENT_EMAIL_DOMAIN: &str = "agents.hyperhive.invalid";
/// The suffix of an agent's config repository, `<agent>-config` in the swarm's organisation.
pub const CONFIG_REPO_SUFFIX: &str = "-config";

/// The name of `agent`'s config repository in the swarm's organisation. The suffix keeps the
/// mapping one to one (no agent's repository is named like another's) and [`config_repo_agent`]
/// reverses it.
pub fn config_repo_name(agent: &AgentName) -> String {
    format!("{agent}{CONFIG_REPO_SUFFIX}")
}

/// The agent whose config repository is called `repo`, if the name has that form.
pub fn config_repo_agent(repo: &str) -> Option<AgentName> {
    repo.strip_suffix(CONFIG_REPO_SUFFIX).and_then(|name| AgentName::parse(name).ok())
}
/// The name of the agent's forge token (one per agent; a lost one is deleted and minted again).
pub const FORGE_TOKEN_NAME: &str = "hyperhive";
/// What the agent's forge token may do: read its user (which the health check needs), work on
/// repositories and issues.
pub const FORGE_TOKEN_SCOPES: &[&str] = &["read:user", "write:repository", "write:issue"];
/// The controller's own admin account on the homeserver, made when it first repairs an agent's
/// account (its password sealed in the secret store as `swarm.matrix-admin-password`).
pub const MATRIX_ADMIN_LOCALPART: &str = "hyperhive-controller";

fn email(agent: &AgentName) -> String {
    format!("{agent}@{AGENT_EMAIL_DOMAIN}")
}

/// An account of the agent's name that the stored password does not sign in to: someone else's.
/// Permanent: no retry changes whose it is.
fn foreign(system: &str, agent: &AgentName) -> StepError {
    StepError::permanent(format!(
        "{system} has an account named {agent} that this swarm did not make (its stored password does \
         not sign it in); remove that account or create the agent under another name"
    ))
}

fn identities(fill: impl FnOnce(&mut Identities)) -> Outcome {
    let mut identities = Identities::default();
    fill(&mut identities);
    Outcome::Done(IdentityChange(identities))
}

impl Provisioner {
    pub(super) async fn sso_user(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let Some(sso) = &self.adapters.sso else { return Ok(not_configured(vars::SSO_BRIDGE_URL)) };
        let password = self.vault.password(agent, Kind::SsoPassword).await?;
        let name = agent.as_str();
        match sso.user(name).await? {
            None => {
                let user = NewSsoUser {
                    name: name.to_owned(),
                    displayname: format!("agent {agent}"),
                    email: email(agent),
                    groups: Vec::new(),
                };
                sso.create_or_update(&user, &password).await?;
            }
            Some(existing) => {
                let ours = existing.managed && sso.verify_password(name, &password).await?;
                if !ours {
                    return Err(foreign("the SSO user database", agent));
                }
            }
        }
        Ok(identities(|i| i.sso_user = Some(name.to_owned())))
    }

    /// The agent's forge user. A name the forge calls taken when asked to create it (the user
    /// appeared since the look-up) is treated like one the look-up found: the agent's only if the
    /// stored password signs in to it. Otherwise the step fails at once: no retry frees a name
    /// someone else holds.
    pub(super) async fn forge_user(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let Some(forge) = &self.adapters.forge else { return Ok(not_configured(vars::FORGE_URL)) };
        let password = self.vault.password(agent, Kind::ForgePassword).await?;
        let name = agent.as_str();
        let refusal = match forge.user(name).await.map_err(StepError::forge_admin)? {
            Some(_) => None,
            None => {
                let user = NewForgeUser {
                    username: name.to_owned(),
                    email: email(agent),
                    full_name: format!("agent {agent}"),
                    visibility: Visibility::Private,
                };
                match forge.create_user(&user, &password).await {
                    Ok(_) => return Ok(identities(|i| i.forge_user = Some(name.to_owned()))),
                    Err(err) if err.is_already_exists() => Some(err),
                    Err(err) => return Err(StepError::forge_admin(err)),
                }
            }
        };
        if !forge.password_works(name, &password).await? {
            let foreign = foreign("the forge", agent);
            return Err(match refusal {
                Some(refusal) => StepError::permanent(format!("{refusal}; {foreign}")),
                None => foreign,
            });
        }
        Ok(identities(|i| i.forge_user = Some(name.to_owned())))
    }

    /// The agent's config repository, `<org>/<agent>-config`, generated from the template in
    /// the swarm's organisation (whose webhook then covers it), the agent its only collaborator
    /// (write on this repository alone: agents never get a team with write on the organisation's
    /// repositories). A repository of that name already in the organisation is adopted: only the
    /// controller's admin token and the organisation's owners can make repositories there (the
    /// agents' team cannot), so it was made by this swarm, perhaps by a run that stopped before
    /// recording it.
    pub(super) async fn config_repo(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let (Some(forge), Some(swarm), Some(settings)) =
            (&self.adapters.forge, &self.adapters.swarm_forge, &self.settings.forge)
        else {
            return Ok(not_configured(vars::FORGE_URL));
        };
        ensure_org(swarm.as_ref(), &settings.org).await.map_err(StepError::retryable)?;
        let name = config_repo_name(agent);
        let repo = match forge.repo(&settings.org, &name).await.map_err(StepError::forge_admin)? {
            Some(repo) => repo,
            None => forge
                .generate_repo(&settings.template_owner, &settings.template_name, &settings.org, &name, true)
                .await
                .map_err(StepError::forge_admin)?,
        };
        swarm.add_collaborator(&repo.owner, &repo.name, agent.as_str()).await.map_err(StepError::forge_admin)?;
        Ok(identities(|i| i.config_repo = Some(repo.full_name)))
    }

    pub(super) async fn forge_token(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let Some(forge) = &self.adapters.forge else { return Ok(not_configured(vars::FORGE_URL)) };
        if let Some(token) = self.vault.get(agent, Kind::ForgeToken).await?
            && forge.check_token(&token).await? == (TokenCheck::Valid { login: agent.to_string() })
        {
            return Ok(Outcome::Done(IdentityChange::none()));
        }
        self.mint_forge_token(agent).await?;
        Ok(Outcome::Done(IdentityChange::none()))
    }

    /// Mints the agent's token afresh: a token of that name whose value the store does not hold
    /// (minted by a run that stopped before storing it, or revoked) is deleted first.
    pub(super) async fn mint_forge_token(&self, agent: &AgentName) -> Result<(), StepError> {
        let forge = self.adapters.forge.as_ref().ok_or_else(|| StepError::permanent("the forge is not configured"))?;
        let password = self.vault.get(agent, Kind::ForgePassword).await?.ok_or_else(|| {
            StepError::permanent(format!(
                "agent {agent} has no forge password stored; its forge-user step must run first"
            ))
        })?;
        let name = agent.as_str();
        let existing = forge.token_names(name, &password).await?;
        if existing.iter().any(|t| t == FORGE_TOKEN_NAME) {
            forge.delete_token(name, &password, FORGE_TOKEN_NAME).await?;
        }
        let token = forge.mint_token(name, &password, FORGE_TOKEN_NAME, FORGE_TOKEN_SCOPES).await?;
        self.vault.put(agent, Kind::ForgeToken, &token).await
    }

    pub(super) async fn matrix_account(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let Some(matrix) = &self.adapters.matrix else { return Ok(not_configured(vars::MATRIX_URL)) };
        if let Some(token) = self.vault.get(agent, Kind::MatrixToken).await?
            && let AccountCheck::Valid { user_id } = matrix.whoami(&token).await?
        {
            return Ok(identities(|i| i.matrix_user = Some(user_id)));
        }
        let user_id = self.matrix_session(agent).await?;
        Ok(identities(|i| i.matrix_user = Some(user_id)))
    }

    /// Registers the agent's matrix account, or logs in to it when it exists (proving it is
    /// ours), and stores the new session's token; returns the user id.
    pub(super) async fn matrix_session(&self, agent: &AgentName) -> Result<String, StepError> {
        let matrix = self.adapters.matrix.as_ref().ok_or_else(|| StepError::permanent("matrix is not configured"))?;
        let password = self.vault.password(agent, Kind::MatrixPassword).await?;
        let name = agent.as_str();
        let displayname = format!("agent {agent}");
        let session = match matrix.register(name, &password, Some(&displayname)).await {
            Ok(session) => session,
            Err(MatrixError::AlreadyExists { .. }) => match matrix.login(name, &password).await {
                Ok(session) => session,
                Err(MatrixError::Forbidden { .. }) => return Err(foreign("the matrix homeserver", agent)),
                Err(err) => return Err(err.into()),
            },
            Err(err) => return Err(err.into()),
        };
        self.vault.put(agent, Kind::MatrixToken, &session.access_token).await?;
        Ok(session.user_id)
    }

    /// Repairs the agent's matrix account after its token stopped working: a new login with the
    /// stored password; when the homeserver refuses it (the account was deactivated, which
    /// deletes its password, or locked), the controller's admin session reactivates the account
    /// with the same password first. Each admin session is logged out after use.
    pub(super) async fn repair_matrix(&self, agent: &AgentName) -> Result<(), StepError> {
        let matrix = self.adapters.matrix.as_ref().ok_or_else(|| StepError::permanent("matrix is not configured"))?;
        let password = self.vault.get(agent, Kind::MatrixPassword).await?.ok_or_else(|| {
            StepError::permanent(format!("agent {agent} has no matrix password stored; its matrix step must run first"))
        })?;
        match matrix.login(agent.as_str(), &password).await {
            Ok(session) => return self.vault.put(agent, Kind::MatrixToken, &session.access_token).await,
            Err(MatrixError::Forbidden { .. } | MatrixError::Deactivated | MatrixError::Locked) => {}
            Err(err) => return Err(err.into()),
        }
        let entry = self.roster_entry(agent).await?;
        let user_id = entry
            .identities
            .matrix_user
            .ok_or_else(|| StepError::permanent(format!("agent {agent} has no matrix user recorded")))?;
        let admin_password = self.vault.swarm_password("matrix-admin-password").await?;
        let admin = matrix.admin_session(MATRIX_ADMIN_LOCALPART, &admin_password).await?;
        let reactivated = match matrix.account_state(&admin.access_token, &user_id).await {
            Ok(AdminAccountState::NotFound) => Err(StepError::permanent(format!(
                "the matrix account {user_id} no longer exists on the homeserver; it cannot be repaired"
            ))),
            Ok(AdminAccountState::Exists { .. }) => {
                matrix.reactivate(&admin.access_token, &user_id, &password).await.map_err(StepError::from)
            }
            Err(err) => Err(err.into()),
        };
        if let Err(err) = matrix.logout(&admin.access_token).await {
            tracing::warn!(%err, "logging the controller's matrix admin session out failed");
        }
        reactivated?;
        tracing::info!(%agent, %user_id, "matrix account reactivated");
        let session = matrix.login(agent.as_str(), &password).await?;
        self.vault.put(agent, Kind::MatrixToken, &session.access_token).await
    }
}

/// The organisation `name`, made (private) when absent: before an agent's config repository,
/// and by the forge pass that keeps the organisation's objects.
///
/// # Errors
/// A forge error as text, e.g. when a user has the name.
pub async fn ensure_org(forge: &dyn SwarmForge, name: &str) -> Result<Org, String> {
    if let Some(org) = forge.org(name).await.map_err(|e| e.to_string())? {
        return Ok(org);
    }
    forge.create_org(name, "hyperhive swarm").await.map_err(|e| {
        if e.is_already_exists() {
            format!("{e}; a user has that name: set SWARM_FORGE_ORG to another, or rename the user")
        } else {
            e.to_string()
        }
    })
}
