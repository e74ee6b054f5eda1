//! [`SwarmForge`]: the swarm-wide forge objects (its organisation, the agents' team, labels, the
//! organisation webhook) and what the controller reads across the organisation (pull requests,
//! open issues), implemented for [`ForgejoClient`] with the admin token.
//!
//! Like [`super::Forge`], every call is one look or one change; the controller's reconcile pass
//! looks first and changes only what differs. Names are checked before a request is sent, and
//! no error ever holds the webhook secret (it is scrubbed like the admin token).
//!
//! The forge never shows a webhook's secret (`GET` answers `config` without it), so a secret
//! changed by hand cannot be seen; [`SwarmForge::edit_org_hook`] sets the whole config again,
//! which is how the controller repairs it (docs/swarm/forge.md).

use async_trait::async_trait;
use reqwest::{Method, StatusCode};

use super::client::Auth;
use super::types::{Hook, HookSpec, Issue, Label, LabelScope, NewTeam, Org, PullFilter, PullRequest, Repo, Team};
use super::{ForgeError, ForgejoClient, names, wire};

/// The units a team of the swarm reaches in the repositories it is given.
const TEAM_UNITS: &[&str] = &["repo.code", "repo.issues", "repo.pulls"];
/// The webhook type set: Forgejo takes `forgejo` and `gitea`, Gitea only `gitea`.
pub const HOOK_TYPE: &str = "gitea";

/// The swarm-wide objects of a forge.
#[async_trait]
pub trait SwarmForge: Send + Sync {
    /// The organisation `name`, or `None` (also when `name` is a user, not an organisation).
    async fn org(&self, name: &str) -> Result<Option<Org>, ForgeError>;

    /// Creates the private organisation `name`, the admin token's user its owner. 422 when the
    /// name is taken by a user or organisation.
    async fn create_org(&self, name: &str, full_name: &str) -> Result<Org, ForgeError>;

    /// The team of `org` called `name` (case-insensitive, as the forge), or `None`.
    async fn team(&self, org: &str, name: &str) -> Result<Option<Team>, ForgeError>;

    /// Creates a team in `org`. 422 when the name is taken.
    async fn create_team(&self, org: &str, team: &NewTeam) -> Result<Team, ForgeError>;

    /// The logins of the team's members.
    async fn team_members(&self, team_id: i64) -> Result<Vec<String>, ForgeError>;

    /// Adds `user` to the team (a member already is success).
    async fn add_team_member(&self, team_id: i64, user: &str) -> Result<(), ForgeError>;

    /// Every label of an organisation or a repository.
    async fn labels(&self, scope: LabelScope<'_>) -> Result<Vec<Label>, ForgeError>;

    /// Creates a label; the forge allows two of one name, so look first.
    async fn create_label(
        &self,
        scope: LabelScope<'_>,
        name: &str,
        color: &str,
        description: &str,
    ) -> Result<Label, ForgeError>;

    /// Every webhook of `org`.
    async fn org_hooks(&self, org: &str) -> Result<Vec<Hook>, ForgeError>;

    /// Creates a webhook of `org` ([`HOOK_TYPE`], JSON bodies).
    async fn create_org_hook(&self, org: &str, hook: &HookSpec) -> Result<Hook, ForgeError>;

    /// Sets the whole config (URL, content type, secret), events and `active` of a webhook.
    async fn edit_org_hook(&self, org: &str, id: i64, hook: &HookSpec) -> Result<Hook, ForgeError>;

    /// Deletes a webhook of `org`; one already gone is success.
    async fn delete_org_hook(&self, org: &str, id: i64) -> Result<(), ForgeError>;

    /// The repositories of `org`.
    async fn org_repos(&self, org: &str) -> Result<Vec<Repo>, ForgeError>;

    /// The pull requests of `owner/repo`, newest first as the forge lists them.
    async fn pulls(&self, owner: &str, repo: &str, filter: PullFilter) -> Result<Vec<PullRequest>, ForgeError>;

    /// The open issues (not pull requests) of `owner/repo`.
    async fn open_issues(&self, owner: &str, repo: &str) -> Result<Vec<Issue>, ForgeError>;

    /// Gives `user` `write` on `owner/repo` and nothing else (a collaborator already is success;
    /// the permission is set again).
    async fn add_collaborator(&self, owner: &str, repo: &str, user: &str) -> Result<(), ForgeError>;
}

fn check_scope(scope: LabelScope<'_>) -> Result<(), String> {
    match scope {
        LabelScope::Org(org) => names::check_user_name(org),
        LabelScope::Repo { owner, name } => names::check_user_name(owner).and_then(|()| names::check_repo_name(name)),
    }
}

fn scope_segments(scope: LabelScope<'_>) -> Vec<&str> {
    match scope {
        LabelScope::Org(org) => vec!["orgs", org, "labels"],
        LabelScope::Repo { owner, name } => vec!["repos", owner, name, "labels"],
    }
}

fn scope_name(scope: LabelScope<'_>) -> String {
    match scope {
        LabelScope::Org(org) => format!("organisation {org}"),
        LabelScope::Repo { owner, name } => format!("repository {owner}/{name}"),
    }
}

#[async_trait]
impl SwarmForge for ForgejoClient {
    async fn org(&self, name: &str) -> Result<Option<Org>, ForgeError> {
        let call = self.call(format!("look up organisation {name:?}"), &[]);
        call.check(names::check_user_name(name))?;
        let answer = self.get(&call, &["orgs", name], Auth::Admin).await?;
        match answer.status {
            StatusCode::OK => {
                let org: wire::Organization = call.decode(&answer)?;
                let org = Org::from(org);
                Ok(org.name.eq_ignore_ascii_case(name).then_some(org))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn create_org(&self, name: &str, full_name: &str) -> Result<Org, ForgeError> {
        let call = self.call(format!("create organisation {name:?}"), &[]);
        call.check(names::check_user_name(name))?;
        call.check(names::check_full_name(full_name))?;
        let body = wire::CreateOrgOption {
            username: name,
            full_name,
            visibility: "private",
            repo_admin_change_team_access: false,
        };
        let answer = self.send(&call, Method::POST, &["orgs"], &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        let org = Org::from(call.decode::<wire::Organization>(&answer)?);
        if !org.name.eq_ignore_ascii_case(name) {
            return Err(call.bad_answer(format!("the forge created {:?}", org.name)));
        }
        Ok(org)
    }

    async fn team(&self, org: &str, name: &str) -> Result<Option<Team>, ForgeError> {
        let call = self.call(format!("look up team {name:?} of {org:?}"), &[]);
        call.check(names::check_user_name(org))?;
        call.check(names::check_team_name(name))?;
        let teams: Vec<wire::WireTeam> = self.list_all(&call, &["orgs", org, "teams"], &[], || Auth::Admin).await?;
        Ok(teams.into_iter().find(|t| t.name.eq_ignore_ascii_case(name)).map(Team::from))
    }

    async fn create_team(&self, org: &str, team: &NewTeam) -> Result<Team, ForgeError> {
        let call = self.call(format!("create team {:?} of {org:?}", team.name), &[]);
        call.check(names::check_user_name(org))?;
        call.check(names::check_team_name(&team.name))?;
        let body = wire::CreateTeamOption {
            name: &team.name,
            description: &team.description,
            permission: team.permission,
            includes_all_repositories: team.includes_all_repositories,
            can_create_org_repo: team.can_create_org_repo,
            units: TEAM_UNITS,
        };
        let answer = self.send(&call, Method::POST, &["orgs", org, "teams"], &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        Ok(call.decode::<wire::WireTeam>(&answer)?.into())
    }

    async fn team_members(&self, team_id: i64) -> Result<Vec<String>, ForgeError> {
        let call = self.call(format!("list the members of team {team_id}"), &[]);
        let id = team_id.to_string();
        let users: Vec<wire::User> = self.list_all(&call, &["teams", &id, "members"], &[], || Auth::Admin).await?;
        Ok(users.into_iter().map(|u| u.login).collect())
    }

    async fn add_team_member(&self, team_id: i64, user: &str) -> Result<(), ForgeError> {
        let call = self.call(format!("add {user:?} to team {team_id}"), &[]);
        call.check(names::check_user_name(user))?;
        let id = team_id.to_string();
        let answer =
            self.send::<()>(&call, Method::PUT, &["teams", &id, "members", user], &[], Auth::Admin, None).await?;
        match answer.status {
            StatusCode::NO_CONTENT => Ok(()),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn labels(&self, scope: LabelScope<'_>) -> Result<Vec<Label>, ForgeError> {
        let call = self.call(format!("list the labels of {}", scope_name(scope)), &[]);
        call.check(check_scope(scope))?;
        let labels: Vec<wire::WireLabel> = self.list_all(&call, &scope_segments(scope), &[], || Auth::Admin).await?;
        Ok(labels.into_iter().map(Label::from).collect())
    }

    async fn create_label(
        &self,
        scope: LabelScope<'_>,
        name: &str,
        color: &str,
        description: &str,
    ) -> Result<Label, ForgeError> {
        let call = self.call(format!("create label {name:?} of {}", scope_name(scope)), &[]);
        call.check(check_scope(scope))?;
        call.check(names::check_label(name, color))?;
        let body = wire::CreateLabelOption { name, color: color.trim_start_matches('#'), description };
        let answer = self.send(&call, Method::POST, &scope_segments(scope), &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        Ok(call.decode::<wire::WireLabel>(&answer)?.into())
    }

    async fn org_hooks(&self, org: &str) -> Result<Vec<Hook>, ForgeError> {
        let call = self.call(format!("list the webhooks of {org:?}"), &[]);
        call.check(names::check_user_name(org))?;
        let hooks: Vec<wire::WireHook> = self.list_all(&call, &["orgs", org, "hooks"], &[], || Auth::Admin).await?;
        Ok(hooks.into_iter().map(Hook::from).collect())
    }

    async fn create_org_hook(&self, org: &str, hook: &HookSpec) -> Result<Hook, ForgeError> {
        let call = self.call(format!("create a webhook of {org:?}"), &[&hook.secret]);
        call.check(names::check_user_name(org))?;
        call.check(names::check_hook_url(&hook.url))?;
        let body = wire::CreateHookOption {
            kind: HOOK_TYPE,
            config: wire::HookConfig { url: &hook.url, content_type: "json", secret: hook.secret.expose() },
            events: &hook.events,
            active: hook.active,
        };
        let answer = self.send(&call, Method::POST, &["orgs", org, "hooks"], &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        Ok(call.decode::<wire::WireHook>(&answer)?.into())
    }

    async fn edit_org_hook(&self, org: &str, id: i64, hook: &HookSpec) -> Result<Hook, ForgeError> {
        let call = self.call(format!("edit webhook {id} of {org:?}"), &[&hook.secret]);
        call.check(names::check_user_name(org))?;
        call.check(names::check_hook_url(&hook.url))?;
        let body = wire::EditHookOption {
            config: wire::HookConfig { url: &hook.url, content_type: "json", secret: hook.secret.expose() },
            events: &hook.events,
            active: hook.active,
        };
        let id_text = id.to_string();
        let answer =
            self.send(&call, Method::PATCH, &["orgs", org, "hooks", &id_text], &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::OK {
            return Err(call.refused(&answer));
        }
        Ok(call.decode::<wire::WireHook>(&answer)?.into())
    }

    async fn delete_org_hook(&self, org: &str, id: i64) -> Result<(), ForgeError> {
        let call = self.call(format!("delete webhook {id} of {org:?}"), &[]);
        call.check(names::check_user_name(org))?;
        let id_text = id.to_string();
        let answer =
            self.send::<()>(&call, Method::DELETE, &["orgs", org, "hooks", &id_text], &[], Auth::Admin, None).await?;
        match answer.status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn org_repos(&self, org: &str) -> Result<Vec<Repo>, ForgeError> {
        let call = self.call(format!("list the repositories of {org:?}"), &[]);
        call.check(names::check_user_name(org))?;
        let repos: Vec<wire::Repository> = self.list_all(&call, &["orgs", org, "repos"], &[], || Auth::Admin).await?;
        Ok(repos.into_iter().map(Repo::from).collect())
    }

    async fn pulls(&self, owner: &str, repo: &str, filter: PullFilter) -> Result<Vec<PullRequest>, ForgeError> {
        let call = self.call(format!("list the pull requests of {owner}/{repo}"), &[]);
        call.check(names::check_user_name(owner))?;
        call.check(names::check_repo_name(repo))?;
        let state = match filter {
            PullFilter::Open => "open",
            PullFilter::All => "all",
        };
        let query = [("state", state.to_owned())];
        let pulls: Vec<wire::WirePull> =
            self.list_all(&call, &["repos", owner, repo, "pulls"], &query, || Auth::Admin).await?;
        Ok(pulls.into_iter().map(PullRequest::from).collect())
    }

    async fn open_issues(&self, owner: &str, repo: &str) -> Result<Vec<Issue>, ForgeError> {
        let call = self.call(format!("list the open issues of {owner}/{repo}"), &[]);
        call.check(names::check_user_name(owner))?;
        call.check(names::check_repo_name(repo))?;
        let query = [("state", "open".to_owned()), ("type", "issues".to_owned())];
        let issues: Vec<wire::WireIssue> =
            self.list_all(&call, &["repos", owner, repo, "issues"], &query, || Auth::Admin).await?;
        // `type=issues` is honoured by current forges; older ones list pull requests too.
        Ok(issues.into_iter().filter(|i| i.pull_request.is_none()).map(Issue::from).collect())
    }

    async fn add_collaborator(&self, owner: &str, repo: &str, user: &str) -> Result<(), ForgeError> {
        let call = self.call(format!("give {user:?} write on {owner}/{repo}"), &[]);
        call.check(names::check_user_name(owner))?;
        call.check(names::check_repo_name(repo))?;
        call.check(names::check_user_name(user))?;
        let body = wire::AddCollaboratorOption { permission: "write" };
        let segments = ["repos", owner, repo, "collaborators", user];
        let answer = self.send(&call, Method::PUT, &segments, &[], Auth::Admin, Some(&body)).await?;
        match answer.status {
            StatusCode::NO_CONTENT => Ok(()),
            _ => Err(call.refused(&answer)),
        }
    }
}
