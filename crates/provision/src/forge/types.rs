//! What [`super::Forge`] takes and returns: only the fields provisioning reads.

use serde::{Deserialize, Serialize};

/// A forge user as the API describes it (`User` in the v1 document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeUser {
    /// The forge's numeric id; stable across renames.
    pub id: i64,
    /// The user name (`login`).
    pub login: String,
    /// Empty when the forge hides it from the caller.
    pub email: String,
    pub full_name: String,
    pub is_admin: bool,
}

/// Who sees a user's profile (`visibility` of `CreateUserOption`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    /// Signed-in users only.
    Limited,
    /// The user and administrators only.
    Private,
}

/// The user [`super::Forge::create_user`] asks for. Its fields are checked by
/// [`super::names`] before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewForgeUser {
    pub username: String,
    pub email: String,
    /// At most 100 characters; may be empty.
    pub full_name: String,
    pub visibility: Visibility,
}

/// A repository as the API describes it (`Repository` in the v1 document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub id: i64,
    /// The owner's user name (`owner.login`).
    pub owner: String,
    pub name: String,
    /// `owner/name`.
    pub full_name: String,
    pub private: bool,
    /// Whether the repository is marked as a template.
    pub template: bool,
    /// Whether it has no commits yet.
    pub empty: bool,
    pub default_branch: String,
    /// The HTTP(S) URL to clone it from.
    pub clone_url: String,
    pub html_url: String,
}

/// The answer of [`super::Forge::check_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// The token signs `login` in.
    Valid { login: String },
    /// The forge does not know the token (revoked, deleted, or never minted).
    Invalid,
}

/// An organisation (`Organization` in the v1 document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Org {
    pub id: i64,
    /// The organisation's name (`name`, its `username`).
    pub name: String,
    pub visibility: String,
}

/// What a team's members may do on the team's repositories (`permission` of `CreateTeamOption`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TeamPermission {
    Read,
    Write,
}

/// A team of an organisation (`Team`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    pub id: i64,
    pub name: String,
    /// `none`, `read`, `write`, `admin` or `owner`.
    pub permission: String,
    pub includes_all_repositories: bool,
    pub can_create_org_repo: bool,
}

/// The team [`super::SwarmForge::create_team`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTeam {
    pub name: String,
    pub description: String,
    pub permission: TeamPermission,
    /// Whether the team reaches every repository of the organisation, present and future.
    pub includes_all_repositories: bool,
    pub can_create_org_repo: bool,
}

/// Where a label lives: an organisation (seen by all its repositories) or one repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelScope<'a> {
    Org(&'a str),
    Repo { owner: &'a str, name: &'a str },
}

/// A label (`Label`); the colour is six hex digits without `#`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub id: i64,
    pub name: String,
    pub color: String,
    pub description: String,
}

/// An organisation webhook (`Hook`). The forge never shows the secret it signs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub id: i64,
    /// `forgejo`, `gitea`, `slack`...
    pub kind: String,
    /// `config.url`.
    pub url: String,
    /// `config.content_type`: `json` or `form`.
    pub content_type: String,
    pub events: Vec<String>,
    pub active: bool,
}

/// The webhook [`super::SwarmForge::create_org_hook`] and [`super::SwarmForge::edit_org_hook`]
/// set: type `gitea` (both Forgejo and Gitea take it), JSON bodies, signed with `secret`.
#[derive(Debug, Clone)]
pub struct HookSpec {
    pub url: String,
    pub secret: crate::secret::Secret,
    pub events: Vec<String>,
    pub active: bool,
}

/// Which pull requests [`super::SwarmForge::pulls`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullFilter {
    Open,
    All,
}

/// A pull request (`PullRequest`), with the fields the controller keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: i64,
    pub title: String,
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    pub merged: bool,
    /// `None` when the forge has not computed it yet.
    pub mergeable: Option<bool>,
    /// The head commit.
    pub head_sha: String,
    /// The head branch.
    pub head_ref: String,
    /// RFC 3339, as the forge wrote it.
    pub updated_at: String,
}

/// An issue (`Issue`), with the fields the issue report keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub number: i64,
    pub title: String,
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    /// Label names.
    pub labels: Vec<String>,
    /// RFC 3339, as the forge wrote it.
    pub updated_at: String,
}
