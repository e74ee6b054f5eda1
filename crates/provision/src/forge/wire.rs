//! The JSON bodies of the v1 API this adapter sends and reads, with the document's field
//! names (`CreateUserOption`, `GenerateRepoOption`, `CreateAccessTokenOption`, `User`,
//! `Repository`, `AccessToken`, `APIError`). Fields the adapter does not read are left out;
//! fields it reads but the forge may omit default to empty.

use serde::{Deserialize, Serialize};

use super::types::{ForgeUser, Hook, Issue, Label, Org, PullRequest, Repo, Team, TeamPermission, Visibility};

/// `POST /admin/users`.
#[derive(Serialize)]
pub(super) struct CreateUserOption<'a> {
    pub username: &'a str,
    pub email: &'a str,
    pub full_name: &'a str,
    pub password: &'a str,
    /// The forge defaults this to `true` when absent, which would make every API call of the
    /// user (basic auth included) answer 403 until someone changes the password in a browser.
    pub must_change_password: bool,
    pub send_notify: bool,
    pub visibility: Visibility,
}

/// `POST /repos/{template_owner}/{template_repo}/generate`.
#[derive(Serialize)]
pub(super) struct GenerateRepoOption<'a> {
    pub owner: &'a str,
    pub name: &'a str,
    pub private: bool,
    /// The forge refuses (422) a generation that copies no item of the template.
    pub git_content: bool,
}

/// `POST /users/{username}/tokens`.
#[derive(Serialize)]
pub(super) struct CreateAccessTokenOption<'a> {
    pub name: &'a str,
    pub scopes: &'a [&'a str],
}

/// `User`.
#[derive(Deserialize)]
pub(super) struct User {
    pub id: i64,
    pub login: String,
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub full_name: String,
    #[serde(default)]
    pub is_admin: bool,
}

impl From<User> for ForgeUser {
    fn from(user: User) -> Self {
        Self { id: user.id, login: user.login, email: user.email, full_name: user.full_name, is_admin: user.is_admin }
    }
}

/// `Repository`.
#[derive(Deserialize)]
pub(super) struct Repository {
    pub id: i64,
    pub owner: User,
    pub name: String,
    #[serde(default)]
    pub full_name: String,
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub template: bool,
    #[serde(default)]
    pub empty: bool,
    #[serde(default)]
    pub default_branch: String,
    #[serde(default)]
    pub clone_url: String,
    #[serde(default)]
    pub html_url: String,
}

impl From<Repository> for Repo {
    fn from(repo: Repository) -> Self {
        Self {
            id: repo.id,
            owner: repo.owner.login,
            name: repo.name,
            full_name: repo.full_name,
            private: repo.private,
            template: repo.template,
            empty: repo.empty,
            default_branch: repo.default_branch,
            clone_url: repo.clone_url,
            html_url: repo.html_url,
        }
    }
}

/// `AccessToken`. The token's value (`sha1`) is filled only in the answer to its creation.
#[derive(Deserialize)]
pub(super) struct AccessToken {
    pub name: String,
    #[serde(default)]
    pub sha1: String,
}

/// The error body: `APIError` (`message`, `url`); one answer of the generate route (an unknown
/// owner) carries `error` instead.
#[derive(Deserialize)]
pub(super) struct ApiError {
    pub message: Option<String>,
    pub error: Option<String>,
}

/// `Organization`. Gitea names it `name` (and `username`, deprecated); older versions only
/// `username`.
#[derive(Deserialize)]
pub(super) struct Organization {
    pub id: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub visibility: String,
}

impl From<Organization> for Org {
    fn from(org: Organization) -> Self {
        let name = if org.name.is_empty() { org.username } else { org.name };
        Self { id: org.id, name, visibility: org.visibility }
    }
}

/// `POST /orgs` (`CreateOrgOption`).
#[derive(Serialize)]
pub(super) struct CreateOrgOption<'a> {
    pub username: &'a str,
    pub full_name: &'a str,
    pub visibility: &'a str,
    pub repo_admin_change_team_access: bool,
}

/// `Team`.
#[derive(Deserialize)]
pub(super) struct WireTeam {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub permission: String,
    #[serde(default)]
    pub includes_all_repositories: bool,
    #[serde(default)]
    pub can_create_org_repo: bool,
}

impl From<WireTeam> for Team {
    fn from(t: WireTeam) -> Self {
        Self {
            id: t.id,
            name: t.name,
            permission: t.permission,
            includes_all_repositories: t.includes_all_repositories,
            can_create_org_repo: t.can_create_org_repo,
        }
    }
}

/// `POST /orgs/{org}/teams` (`CreateTeamOption`). `units` is what members reach in the team's
/// repositories.
#[derive(Serialize)]
pub(super) struct CreateTeamOption<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub permission: TeamPermission,
    pub includes_all_repositories: bool,
    pub can_create_org_repo: bool,
    pub units: &'a [&'a str],
}

/// `Label`.
#[derive(Deserialize)]
pub(super) struct WireLabel {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub color: String,
    #[serde(default)]
    pub description: String,
}

impl From<WireLabel> for Label {
    fn from(l: WireLabel) -> Self {
        Self { id: l.id, name: l.name, color: l.color.trim_start_matches('#').to_owned(), description: l.description }
    }
}

/// `CreateLabelOption`.
#[derive(Serialize)]
pub(super) struct CreateLabelOption<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub description: &'a str,
}

/// `Hook`; `config` holds `url` and `content_type` (never the secret).
#[derive(Deserialize)]
pub(super) struct WireHook {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub config: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub active: bool,
}

impl From<WireHook> for Hook {
    fn from(mut h: WireHook) -> Self {
        Self {
            id: h.id,
            kind: h.kind,
            url: h.config.remove("url").unwrap_or_default(),
            content_type: h.config.remove("content_type").unwrap_or_default(),
            events: h.events,
            active: h.active,
        }
    }
}

/// `config` of `CreateHookOption` and `EditHookOption` (`CreateHookOptionConfig`, a map of
/// strings).
#[derive(Serialize)]
pub(super) struct HookConfig<'a> {
    pub url: &'a str,
    pub content_type: &'a str,
    pub secret: &'a str,
}

/// `POST /orgs/{org}/hooks` (`CreateHookOption`).
#[derive(Serialize)]
pub(super) struct CreateHookOption<'a> {
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub config: HookConfig<'a>,
    pub events: &'a [String],
    pub active: bool,
}

/// `PATCH /orgs/{org}/hooks/{id}` (`EditHookOption`).
#[derive(Serialize)]
pub(super) struct EditHookOption<'a> {
    pub config: HookConfig<'a>,
    pub events: &'a [String],
    pub active: bool,
}

/// `PullRequest`: `head` is a `PRBranchInfo`.
#[derive(Deserialize)]
pub(super) struct WirePull {
    pub number: i64,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub mergeable: Option<bool>,
    pub head: Option<BranchInfo>,
    #[serde(default)]
    pub updated_at: String,
}

/// `PRBranchInfo`.
#[derive(Deserialize)]
pub(super) struct BranchInfo {
    #[serde(rename = "ref", default)]
    pub reference: String,
    #[serde(default)]
    pub sha: String,
}

impl From<WirePull> for PullRequest {
    fn from(p: WirePull) -> Self {
        let head = p.head.unwrap_or(BranchInfo { reference: String::new(), sha: String::new() });
        Self {
            number: p.number,
            title: p.title,
            html_url: p.html_url,
            state: p.state,
            merged: p.merged,
            mergeable: p.mergeable,
            head_sha: head.sha,
            head_ref: head.reference,
            updated_at: p.updated_at,
        }
    }
}

/// `Issue`; `pull_request` is set when the issue is a pull request.
#[derive(Deserialize)]
pub(super) struct WireIssue {
    pub number: i64,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub labels: Vec<WireLabel>,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

impl From<WireIssue> for Issue {
    fn from(i: WireIssue) -> Self {
        Self {
            number: i.number,
            title: i.title,
            html_url: i.html_url,
            state: i.state,
            labels: i.labels.into_iter().map(|l| l.name).collect(),
            updated_at: i.updated_at,
        }
    }
}

/// `AddCollaboratorOption`.
#[derive(Serialize)]
pub(super) struct AddCollaboratorOption<'a> {
    pub permission: &'a str,
}
