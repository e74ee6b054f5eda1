//! The JSON bodies of the v1 API this adapter sends and reads, with the document's field
//! names (`CreateUserOption`, `GenerateRepoOption`, `CreateAccessTokenOption`, `User`,
//! `Repository`, `AccessToken`, `APIError`). Fields the adapter does not read are left out;
//! fields it reads but the forge may omit default to empty.

use serde::{Deserialize, Serialize};

use super::types::{ForgeUser, Repo, Visibility};

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
