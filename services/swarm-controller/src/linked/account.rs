//! What a linked account is: its kind and name, the body that links it, the sealed record it is
//! kept as, the file the agent gets, and the line a listing shows (never the credential). The
//! kind, the bodies and the listing line are the API's wire types (`hyperhive-swarm-api`).

use std::fmt;

use hyperhive_swarm_api::linked::{ForgeAccountBody, GithubAccountBody, LinkedAccount, MatrixAccountBody};
use serde::{Deserialize, Serialize};

/// The three kinds of account an operator may link to an agent.
pub use hyperhive_swarm_api::linked::AccountKind as Kind;

/// The name a matrix account of the agent's own has in listings; an operator cannot link
/// another under it.
pub const MAIN: &str = "main";

/// The longest account name or label.
const MAX_NAME: usize = 32;

/// One linked account of one agent: its kind and name (`github` for the one GitHub account).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    /// The kind.
    pub kind: Kind,
    /// The account name (matrix), label (forge) or `github`.
    pub name: String,
}

impl Slot {
    /// A matrix account or forge label named `name`, checked: 1 to 32 of `[a-z0-9_-]`, starting
    /// with a letter or digit (it becomes part of a record key and a file name), and not `main`
    /// for matrix (the agent's own account).
    ///
    /// # Errors
    /// What is wrong with the name, and what a good one looks like.
    pub fn named(kind: Kind, name: &str) -> Result<Slot, String> {
        let what = match kind {
            Kind::Matrix => "a matrix account name",
            Kind::Forge | Kind::Github => "a forge account label",
        };
        let first_ok = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !first_ok || !rest_ok || name.len() > MAX_NAME {
            return Err(format!(
                "{name:?} is not {what}: use 1 to {MAX_NAME} lowercase letters, digits, '-' or '_', \
                 starting with a letter or digit, e.g. ops-bot"
            ));
        }
        if kind == Kind::Matrix && name == MAIN {
            return Err(format!("{MAIN:?} is the agent's own matrix account; link another under a different name"));
        }
        Ok(Slot { kind, name: name.to_owned() })
    }

    /// The agent's GitHub account.
    pub fn github() -> Slot {
        Slot { kind: Kind::Github, name: Kind::Github.as_str().to_owned() }
    }

    /// The last part of its secret-store record, `agent.<agent>.<this>`: `linked-matrix.<name>`,
    /// `linked-forge.<label>` or `linked-github`.
    pub fn record_suffix(&self) -> String {
        match self.kind {
            Kind::Github => "linked-github".to_owned(),
            kind => format!("linked-{}.{}", kind.as_str(), self.name),
        }
    }

    /// The slot a record suffix names (the inverse of [`Slot::record_suffix`]).
    pub fn from_record_suffix(suffix: &str) -> Option<Slot> {
        if suffix == "linked-github" {
            return Some(Slot::github());
        }
        let (kind, name) = suffix.strip_prefix("linked-")?.split_once('.')?;
        let kind = match kind {
            "matrix" => Kind::Matrix,
            "forge" => Kind::Forge,
            _ => return None,
        };
        Slot::named(kind, name).ok()
    }

    /// The file the agent finds it in, in its secrets directory: `linked-matrix-<name>.json`,
    /// `linked-forge-<label>.json`, `linked-github.json`.
    pub fn agent_file(&self) -> String {
        match self.kind {
            Kind::Github => "linked-github.json".to_owned(),
            kind => format!("linked-{}-{}.json", kind.as_str(), self.name),
        }
    }
}

/// A linked account as it is sealed in the secret store and handed to the agent (as JSON).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Account {
    /// `PUT .../matrix-accounts/{account}`.
    Matrix {
        /// The homeserver's client-server API URL.
        homeserver: String,
        /// `@localpart:server`.
        user_id: String,
        /// The access token.
        access_token: String,
        /// The token's device, when the operator knows it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_id: Option<String>,
    },
    /// `PUT .../forge-accounts/{label}`.
    Forge {
        /// The forge's URL.
        url: String,
        /// The account's login.
        username: String,
        /// An API token of that account.
        token: String,
    },
    /// `PUT .../github-account`.
    Github {
        /// The account's login.
        login: String,
        /// A token of that account.
        token: String,
    },
}

impl fmt::Debug for Account {
    /// Names the account, never its credential.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Account::Matrix { homeserver, user_id, .. } => write!(f, "matrix {user_id} at {homeserver}"),
            Account::Forge { url, username, .. } => write!(f, "forge {username} at {url}"),
            Account::Github { login, .. } => write!(f, "github {login}"),
        }
    }
}

/// What each kind's body looks like, for error messages.
pub fn expected_body(kind: Kind) -> &'static str {
    match kind {
        Kind::Matrix => {
            r#"{"homeserver": "https://matrix.example", "user_id": "@bot:example", "access_token": "...", "device_id": "optional"}"#
        }
        Kind::Forge => r#"{"url": "https://forge.example", "username": "bot", "token": "..."}"#,
        Kind::Github => r#"{"login": "octo-bot", "token": "..."}"#,
    }
}

/// Parses and checks a `PUT` body of `kind`. Checks the form only; whether the credential works
/// is for [`super::verify`].
///
/// # Errors
/// What is wrong, with the shape to send; never the credential.
pub fn parse_body(kind: Kind, body: &[u8]) -> Result<Account, String> {
    let malformed = |e: serde_json::Error| {
        // serde quotes a value of the wrong type ("invalid type: integer `123`"), which may be a
        // credential: only its messages that name fields are passed on.
        let text = e.to_string();
        let why = if ["missing field", "unknown field", "duplicate field"].iter().any(|p| text.starts_with(p)) {
            text
        } else {
            format!("not a JSON object of strings (at line {} column {})", e.line(), e.column())
        };
        format!("malformed {} account: {why}; send {}", kind.as_str(), expected_body(kind))
    };
    let account = match kind {
        Kind::Matrix => {
            let b: MatrixAccountBody = serde_json::from_slice(body).map_err(malformed)?;
            check_url("homeserver", &b.homeserver)?;
            check_user_id(&b.user_id)?;
            check_token("access_token", &b.access_token)?;
            if let Some(device) = &b.device_id {
                check_plain("device_id", device, 255)?;
            }
            Account::Matrix {
                homeserver: b.homeserver,
                user_id: b.user_id,
                access_token: b.access_token,
                device_id: b.device_id,
            }
        }
        Kind::Forge => {
            let b: ForgeAccountBody = serde_json::from_slice(body).map_err(malformed)?;
            check_url("url", &b.url)?;
            check_plain("username", &b.username, 40)?;
            check_token("token", &b.token)?;
            Account::Forge { url: b.url, username: b.username, token: b.token }
        }
        Kind::Github => {
            let b: GithubAccountBody = serde_json::from_slice(body).map_err(malformed)?;
            check_github_login(&b.login)?;
            check_token("token", &b.token)?;
            Account::Github { login: b.login, token: b.token }
        }
    };
    Ok(account)
}

impl Account {
    /// Where it lives, for listings: the homeserver's or forge's host, or `github.com`.
    pub fn host(&self) -> String {
        match self {
            Account::Matrix { homeserver: url, .. } | Account::Forge { url, .. } => host_of(url),
            Account::Github { .. } => "github.com".to_owned(),
        }
    }
}

/// The host (and port, when not the scheme's) of `url`, or the text itself if it is not a URL.
fn host_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => url.to_owned(),
        },
        Err(_) => url.to_owned(),
    }
}

/// The listing line of a linked account.
pub fn listed(slot: &Slot, account: &Account) -> LinkedAccount {
    let user = match account {
        Account::Matrix { user_id, .. } => user_id.clone(),
        Account::Forge { username, .. } => username.clone(),
        Account::Github { login, .. } => login.clone(),
    };
    LinkedAccount { kind: slot.kind, name: slot.name.clone(), host: account.host(), user, own: false }
}

/// The listing line of the agent's own matrix account, `@localpart:server`.
pub fn own_matrix(user_id: &str) -> LinkedAccount {
    let host = user_id.split_once(':').map_or_else(String::new, |(_, server)| server.to_owned());
    LinkedAccount { kind: Kind::Matrix, name: MAIN.to_owned(), host, user: user_id.to_owned(), own: true }
}

fn check_url(field: &str, value: &str) -> Result<(), String> {
    let parsed = url::Url::parse(value).map_err(|e| format!("{field} {value:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!("{field} {value:?} must be an http:// or https:// URL with a host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.query().is_some() {
        return Err(format!("{field} must not hold credentials or a query; put the token in its own field"));
    }
    Ok(())
}

fn check_user_id(value: &str) -> Result<(), String> {
    let well_formed = value.len() <= 255
        && value.strip_prefix('@').and_then(|rest| rest.split_once(':')).is_some_and(|(local, server)| {
            !local.is_empty() && !server.is_empty() && !value.chars().any(char::is_whitespace)
        });
    if well_formed { Ok(()) } else { Err(format!("user_id {value:?} is not a matrix user id like @bot:example.org")) }
}

fn check_github_login(value: &str) -> Result<(), String> {
    let ok = (1..=39).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!("login {value:?} is not a GitHub login (1 to 39 letters, digits or inner '-')"))
    }
}

/// Printable ASCII without spaces, 1 to `max` bytes: names and ids.
fn check_plain(field: &str, value: &str, max: usize) -> Result<(), String> {
    if value.is_empty() || value.len() > max || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{field} {value:?} must be 1 to {max} printable characters without spaces"));
    }
    Ok(())
}

/// A credential: printable ASCII without spaces, at most 4 KiB. The message never quotes it.
fn check_token(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 4096 || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{field} must be 1 to 4096 printable ASCII characters without spaces"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_record_keys_and_file_names_and_back() {
        for slot in
            [Slot::named(Kind::Matrix, "ops").unwrap(), Slot::named(Kind::Forge, "gh_2").unwrap(), Slot::github()]
        {
            assert_eq!(Slot::from_record_suffix(&slot.record_suffix()), Some(slot.clone()));
            let file = slot.agent_file();
            assert!(
                file.len() <= 64
                    && file.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            );
        }
        assert_eq!(Slot::named(Kind::Matrix, "ops").unwrap().record_suffix(), "linked-matrix.ops");
        assert_eq!(Slot::from_record_suffix("forge-token"), None);
    }

    #[test]
    fn bad_names_are_refused_with_the_rule() {
        for bad in ["", "Ops", "-x", "a.b", "a/b", "x y", &"a".repeat(33)] {
            let err = Slot::named(Kind::Forge, bad).unwrap_err();
            assert!(err.contains("lowercase letters"), "{bad}: {err}");
        }
        assert!(Slot::named(Kind::Matrix, MAIN).unwrap_err().contains("own matrix account"));
        assert!(Slot::named(Kind::Forge, MAIN).is_ok(), "main is reserved for matrix only");
    }

    #[test]
    fn bodies_are_checked_and_errors_never_quote_the_token() {
        let token = "s3cr3t-t0ken";
        let ok =
            format!(r#"{{"homeserver": "http://127.0.0.1:8008", "user_id": "@bot:hs", "access_token": "{token}"}}"#);
        assert!(matches!(parse_body(Kind::Matrix, ok.as_bytes()), Ok(Account::Matrix { .. })));
        let cases = [
            (
                Kind::Matrix,
                format!(r#"{{"homeserver": "ftp://x", "user_id": "@bot:hs", "access_token": "{token}"}}"#),
                "http",
            ),
            (
                Kind::Matrix,
                format!(r#"{{"homeserver": "http://hs", "user_id": "bot", "access_token": "{token}"}}"#),
                "user id",
            ),
            (
                Kind::Matrix,
                r#"{"homeserver": "http://hs", "user_id": "@b:hs", "access_token": "a b"}"#.to_owned(),
                "access_token",
            ),
            (
                Kind::Matrix,
                format!(r#"{{"homeserver": "http://u:{token}@hs", "user_id": "@b:hs", "access_token": "x"}}"#),
                "credentials",
            ),
            (Kind::Forge, format!(r#"{{"url": "http://forge", "token": "{token}"}}"#), "missing field `username`"),
            (
                Kind::Forge,
                format!(r#"{{"url": "http://f", "username": "u", "token": "{token}", "x": 1}}"#),
                "unknown field",
            ),
            (Kind::Github, format!(r#"{{"login": "-bad", "token": "{token}"}}"#), "GitHub login"),
            (Kind::Github, r#"{"login": "ok", "token": ""}"#.to_owned(), "token"),
            (Kind::Github, format!(r#"["{token}"]"#), "malformed"),
            (Kind::Github, r#"{"login": "ok", "token": 123456789}"#.to_owned(), "not a JSON object of strings"),
        ];
        for (kind, body, needle) in cases {
            let err = parse_body(kind, body.as_bytes()).unwrap_err();
            assert!(err.contains(needle), "{body}: {err}");
            assert!(!err.contains(token), "the token leaked into {err}");
        }
    }

    #[test]
    fn listings_and_debug_never_show_the_credential() {
        let account =
            Account::Forge { url: "https://forge.example:3000/".into(), username: "bot".into(), token: "tok3n".into() };
        let listed = listed(&Slot::named(Kind::Forge, "work").unwrap(), &account);
        let text = format!("{} {account:?}", serde_json::to_string(&listed).unwrap());
        assert!(!text.contains("tok3n"), "{text}");
        assert_eq!(listed.host, "forge.example:3000");
        assert_eq!(own_matrix("@alpha:hs.example").host, "hs.example");
    }
}
