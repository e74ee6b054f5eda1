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
