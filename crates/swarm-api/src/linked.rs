//! Linked accounts on the wire: the bodies of the three `PUT` routes under
//! `/api/hives/{hive}/agents/{agent}/` (`matrix-accounts/{name}`, `forge-accounts/{label}`,
//! `github-account`), a listing line of `GET .../linked-accounts`, and the answer to a change.
//!
//! A body carries a credential: its `Debug` names the account, never the token.

use std::fmt;

use hyperhive_jobq::JobId;
use serde::{Deserialize, Serialize};

/// The three kinds of account an operator may link to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountKind {
    /// A matrix account on any homeserver, by the operator's name for it.
    Matrix,
    /// A forge account on any Forgejo/Gitea, by a label.
    Forge,
    /// The agent's one GitHub account.
    Github,
}

impl AccountKind {
    /// The kind as written in JSON, paths and record keys.
    pub fn as_str(self) -> &'static str {
        match self {
            AccountKind::Matrix => "matrix",
            AccountKind::Forge => "forge",
            AccountKind::Github => "github",
        }
    }
}

/// The body of `PUT .../matrix-accounts/{name}`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixAccountBody {
    /// The homeserver's client-server API URL.
    pub homeserver: String,
    /// `@localpart:server`.
    pub user_id: String,
    /// The access token.
    pub access_token: String,
    /// The token's device, when the operator knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// The body of `PUT .../forge-accounts/{label}`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeAccountBody {
    /// The forge's URL.
    pub url: String,
    /// The account's login.
    pub username: String,
    /// An API token of that account.
    pub token: String,
}

/// The body of `PUT .../github-account`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubAccountBody {
    /// The account's login.
    pub login: String,
    /// A token of that account.
    pub token: String,
}

impl fmt::Debug for MatrixAccountBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "matrix {} at {}", self.user_id, self.homeserver)
    }
}

impl fmt::Debug for ForgeAccountBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "forge {} at {}", self.username, self.url)
    }
}

impl fmt::Debug for GithubAccountBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "github {}", self.login)
    }
}

/// One line of `GET .../linked-accounts`: what the account is, never its credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedAccount {
    /// matrix, forge or github.
    pub kind: AccountKind,
    /// The account name, label, `github`, or `main` for the agent's own matrix account.
    pub name: String,
    /// Where it lives.
    pub host: String,
    /// The login or user id.
    pub user: String,
    /// `true` for the agent's own, swarm-made account; `false` for a linked one.
    pub own: bool,
}

/// The answer to a `PUT` or `DELETE`: the account as listed (for a `PUT`) and the job
/// delivering the change to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkChanged {
    /// The account as `GET .../linked-accounts` shows it; absent after a removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<LinkedAccount>,
    /// Whether the token was logged out at its homeserver first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
    /// The `credentials` job that sends the agent's secrets to its hive.
    pub delivery: JobId,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_body_has_the_field_names_the_controller_reads() {
        let matrix = MatrixAccountBody {
            homeserver: "https://hs".into(),
            user_id: "@bot:hs".into(),
            access_token: "tok3n".into(),
            device_id: Some("DEV".into()),
        };
        let wire =
            json!({"homeserver": "https://hs", "user_id": "@bot:hs", "access_token": "tok3n", "device_id": "DEV"});
        assert_eq!(serde_json::to_value(&matrix).unwrap(), wire);
        assert_eq!(serde_json::from_value::<MatrixAccountBody>(wire).unwrap(), matrix);
        let no_device = MatrixAccountBody { device_id: None, ..matrix.clone() };
        assert!(serde_json::to_value(&no_device).unwrap().get("device_id").is_none());

        let forge = ForgeAccountBody { url: "https://f".into(), username: "bot".into(), token: "tok3n".into() };
        let wire = json!({"url": "https://f", "username": "bot", "token": "tok3n"});
        assert_eq!(serde_json::to_value(&forge).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ForgeAccountBody>(wire).unwrap(), forge);

        let github = GithubAccountBody { login: "octo-bot".into(), token: "tok3n".into() };
        let wire = json!({"login": "octo-bot", "token": "tok3n"});
        assert_eq!(serde_json::to_value(&github).unwrap(), wire);
        assert_eq!(serde_json::from_value::<GithubAccountBody>(wire).unwrap(), github);

        let shown = format!("{matrix:?} {forge:?} {github:?}");
        assert!(!shown.contains("tok3n"), "{shown}");
    }

    #[test]
    fn listings_and_changes_have_the_listed_field_names() {
        let listed = LinkedAccount {
            kind: AccountKind::Forge,
            name: "work".into(),
            host: "forge.example".into(),
            user: "bot".into(),
            own: false,
        };
        let wire = json!({"kind": "forge", "name": "work", "host": "forge.example", "user": "bot", "own": false});
        assert_eq!(serde_json::to_value(&listed).unwrap(), wire);
        assert_eq!(serde_json::from_value::<LinkedAccount>(wire.clone()).unwrap(), listed);
        let delivery = JobId::parse("alpha.credentials-1").unwrap();
        let put = LinkChanged { account: Some(listed), revoked: false, delivery: delivery.clone() };
        let put_wire = json!({"account": wire, "delivery": "alpha.credentials-1"});
        assert_eq!(serde_json::to_value(&put).unwrap(), put_wire);
        assert_eq!(serde_json::from_value::<LinkChanged>(put_wire).unwrap(), put);
        let removed = LinkChanged { account: None, revoked: true, delivery };
        let removed_wire = json!({"revoked": true, "delivery": "alpha.credentials-1"});
        assert_eq!(serde_json::to_value(&removed).unwrap(), removed_wire);
        assert_eq!(serde_json::from_value::<LinkChanged>(removed_wire).unwrap(), removed);
        assert_eq!(AccountKind::Github.as_str(), "github");
    }
}
