//! The agent's SSO user, through `swarm-authelia-bridge` (docs/swarm/provisioning.md, "SSO").
//!
//! The controller generates the password and stores it sealed *before* asking for the user, so a
//! crash between the two leaves a password it knows. Afterwards it adopts an existing user only
//! when [`Sso::verify_password`] proves the user holds that password: a user it cannot prove it
//! made is never taken over. The bridge itself never changes a user outside its managed group
//! ([`SsoError::Unmanaged`]).

use std::time::Duration;

use async_trait::async_trait;
use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Serialize};

use crate::Secret;

/// An SSO user as the bridge shows it (never its password hash).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SsoUser {
    /// The user name.
    pub name: String,
    /// The name people see.
    pub displayname: String,
    /// The e-mail address.
    pub email: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// Whether logging in is switched off.
    pub disabled: bool,
    /// Whether it carries the bridge's managed group (only those can be changed or deleted).
    pub managed: bool,
}

/// The user to create or update. The bridge always adds its managed group to `groups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSsoUser {
    /// The user name: `[a-z0-9][a-z0-9._-]{0,63}`.
    pub name: String,
    /// The name people see.
    pub displayname: String,
    /// The e-mail address.
    pub email: String,
    /// Groups besides the managed one.
    pub groups: Vec<String>,
}

/// What [`Sso::create_or_update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The user is new.
    Created,
    /// A managed user of that name was changed to match.
    Updated,
}

/// A failed call. Each names the call and, where the bridge answered, the HTTP status and the
/// bridge's message; none holds the token or a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SsoError {
    /// The user exists but is not managed by the bridge: it was not made by the swarm.
    #[error("SSO bridge: {call}: user {name} is not managed by the bridge (HTTP 409): {message}")]
    Unmanaged {
        /// The call.
        call: String,
        /// The user.
        name: String,
        /// The bridge's message.
        message: String,
    },
    /// No such user (for a password check).
    #[error("SSO bridge: {call}: no user {name} (HTTP 404)")]
    UnknownUser {
        /// The call.
        call: String,
        /// The user.
        name: String,
    },
    /// The bridge refused the request as wrong (a bad name or field, a wrong token): retrying
    /// the same request cannot help.
    #[error("SSO bridge: {call}: refused with HTTP {status}: {message}")]
    Rejected {
        /// The call.
        call: String,
        /// The HTTP status.
        status: u16,
        /// The bridge's message.
        message: String,
    },
    /// The bridge cannot serve now (its users file is unusable, it failed, or it is throttling
    /// with 429): worth retrying.
    #[error("SSO bridge: {call}: unavailable, HTTP {status}: {message}")]
    Unavailable {
        /// The call.
        call: String,
        /// The HTTP status.
        status: u16,
        /// The bridge's message.
        message: String,
    },
    /// The bridge could not be reached or did not answer in time: worth retrying.
    #[error("SSO bridge: {call}: {message}")]
    Transport {
        /// The call.
        call: String,
        /// What failed.
        message: String,
    },
    /// The bridge answered something this client does not understand.
    #[error("SSO bridge: {call}: unexpected answer (HTTP {status}): {message}")]
    Unexpected {
        /// The call.
        call: String,
        /// The HTTP status.
        status: u16,
        /// What was wrong with it.
        message: String,
    },
    /// The client's own settings are wrong.
    #[error("SSO bridge: {0}")]
    Config(String),
}

impl SsoError {
    /// Whether the same call may succeed later: the bridge (or its users file) was unavailable,
    /// overloaded (429) or did not answer. A user that is not the bridge's, a refusal and an
    /// answer this client does not understand are not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Transport { .. })
    }
}

impl crate::Retryable for SsoError {
    fn is_retryable(&self) -> bool {
        SsoError::is_retryable(self)
    }
}

/// The SSO system an agent's user lives in.
#[async_trait]
pub trait Sso: Send + Sync {
    /// The user `name`, or `None` when there is none.
    async fn user(&self, name: &str) -> Result<Option<SsoUser>, SsoError>;

    /// Creates the user with `password`, or changes the managed user of that name to match.
    /// [`SsoError::Unmanaged`] when a user of that name exists outside the managed group.
    async fn create_or_update(&self, user: &NewSsoUser, password: &Secret) -> Result<Created, SsoError>;

    /// Whether the managed user `name` has `password`: the proof that an existing user is the
    /// one this controller made.
    async fn verify_password(&self, name: &str, password: &Secret) -> Result<bool, SsoError>;

    /// Removes the managed user `name`. A user that is already gone is not an error, so a
    /// repeated delete succeeds.
    async fn delete(&self, name: &str) -> Result<(), SsoError>;
}

/// How long connecting to the bridge may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one call may take: a write hashes a password (64 MiB, a second or so on a small
/// host) and may wait behind other writes.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a bridge's error message is kept.
const MAX_MESSAGE_CHARS: usize = 500;

/// [`Sso`] through `swarm-authelia-bridge`'s HTTP API.
#[derive(Debug, Clone)]
pub struct BridgeClient {
    base_url: Url,
    token: Secret,
    http: reqwest::Client,
}

#[derive(Serialize)]
struct PutBody<'a> {
    displayname: &'a str,
    email: &'a str,
    groups: &'a [String],
    password: &'a str,
}

#[derive(Serialize)]
struct VerifyBody<'a> {
    password: &'a str,
}

#[derive(Deserialize)]
struct Matches {
    matches: bool,
}

/// The bridge's error body: a stable `code` and a message for people.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    error: String,
}

/// The bridge's `code` for "no such user" (a 404 without it is a wrong route or another server).
const UNKNOWN_USER: &str = "unknown_user";
/// The bridge's `code` for "the user is not in the managed group".
const UNMANAGED_USER: &str = "unmanaged_user";

impl BridgeClient {
    /// A client of the bridge at `base_url` (e.g. `https://auth.example.com:9092`), sending
    /// `token` as its bearer token.
    ///
    /// # Errors
    /// [`SsoError::Config`] when `base_url` is not an http(s) URL without a query.
    pub fn new(base_url: &str, token: Secret) -> Result<Self, SsoError> {
        let bad = |why: &str| SsoError::Config(format!("base URL {base_url:?} {why}; write it as http(s)://HOST:PORT"));
        let mut url = Url::parse(base_url).map_err(|_| bad("is not a URL"))?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() || url.host().is_none() {
            return Err(bad("is not an http or https URL"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(bad("must not carry a query, fragment or credentials"));
        }
        if token.expose().is_empty() || !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SsoError::Config("the bearer token is empty or not printable text".into()));
        }
        // Path segments are appended below; a base without a trailing slash would lose its last.
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| SsoError::Config(format!("cannot build the HTTP client: {}", e.without_url())))?;
        Ok(Self { base_url: url, token, http })
    }

    /// The bridge's address.
    pub fn base_url(&self) -> &str {
        self.base_url.as_str()
    }

    /// `base/v1/users/<name>[/<tail>]`, the name encoded as one path segment.
    fn user_url(&self, name: &str, tail: Option<&str>) -> Url {
        let mut url = self.base_url.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(["v1", "users", name]);
            if let Some(tail) = tail {
                segments.push(tail);
            }
        }
        url
    }

    async fn send(
        &self,
        call: &str,
        method: Method,
        url: Url,
        body: Option<serde_json::Value>,
    ) -> Result<(StatusCode, String), SsoError> {
        let mut request = self.http.request(method, url).bearer_auth(self.token.expose());
        if let Some(body) = body {
            request = request.json(&body);
        }
        let transport = |e: reqwest::Error| {
            let what = if e.is_timeout() { "timed out" } else { "could not reach the bridge" };
            SsoError::Transport {
                call: call.to_owned(),
                message: format!("{what} at {}: {}", self.base_url, e.without_url()),
            }
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let text = response.text().await.map_err(transport)?;
        Ok((status, text))
    }

    /// The bridge's `code` in an error body, if it is one.
    fn code(text: &str) -> Option<String> {
        serde_json::from_str::<ErrorBody>(text).ok().map(|body| body.code)
    }

    /// Whether an answer is the bridge saying it has no such user.
    fn is_unknown_user(status: StatusCode, text: &str) -> bool {
        status == StatusCode::NOT_FOUND && Self::code(text).as_deref() == Some(UNKNOWN_USER)
    }

    /// Turns an answer that is not one of the call's successes into its error.
    fn failure(call: &str, name: &str, status: StatusCode, text: &str) -> SsoError {
        let (code, message) = match serde_json::from_str::<ErrorBody>(text) {
            Ok(body) => (body.code, body.error),
            Err(_) => (String::new(), text.trim().to_owned()),
        };
        let message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        let call = call.to_owned();
        match status {
            StatusCode::CONFLICT if code == UNMANAGED_USER => {
                SsoError::Unmanaged { call, name: name.to_owned(), message }
            }
            StatusCode::NOT_FOUND if code == UNKNOWN_USER => SsoError::UnknownUser { call, name: name.to_owned() },
            StatusCode::NOT_FOUND => SsoError::Unexpected {
                call,
                status: 404,
                message: format!("no such route ({message}); is the base URL the bridge's?"),
            },
            s if crate::retry::retryable_status(s.as_u16()) => {
                SsoError::Unavailable { call, status: s.as_u16(), message }
            }
            s if s.is_client_error() => SsoError::Rejected { call, status: s.as_u16(), message },
            s => SsoError::Unexpected { call, status: s.as_u16(), message },
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(call: &str, status: StatusCode, text: &str) -> Result<T, SsoError> {
        serde_json::from_str(text).map_err(|e| SsoError::Unexpected {
            call: call.to_owned(),
            status: status.as_u16(),
            message: format!("the body is not the expected JSON: {e}"),
        })
    }
}

#[async_trait]
impl Sso for BridgeClient {
    async fn user(&self, name: &str) -> Result<Option<SsoUser>, SsoError> {
        let call = format!("GET user {name}");
        let (status, text) = self.send(&call, Method::GET, self.user_url(name, None), None).await?;
        match status {
            StatusCode::OK => Self::parse(&call, status, &text).map(Some),
            s if Self::is_unknown_user(s, &text) => Ok(None),
            _ => Err(Self::failure(&call, name, status, &text)),
        }
    }

    async fn create_or_update(&self, user: &NewSsoUser, password: &Secret) -> Result<Created, SsoError> {
        let call = format!("PUT user {}", user.name);
        let body = PutBody {
            displayname: &user.displayname,
            email: &user.email,
            groups: &user.groups,
            password: password.expose(),
        };
        let body = serde_json::to_value(&body).map_err(|e| SsoError::Config(format!("{call}: {e}")))?;
        let (status, text) = self.send(&call, Method::PUT, self.user_url(&user.name, None), Some(body)).await?;
        match status {
            StatusCode::CREATED => Ok(Created::Created),
            StatusCode::OK => Ok(Created::Updated),
            _ => Err(Self::failure(&call, &user.name, status, &text)),
        }
    }

    async fn verify_password(&self, name: &str, password: &Secret) -> Result<bool, SsoError> {
        let call = format!("verify the password of user {name}");
        let body = serde_json::to_value(VerifyBody { password: password.expose() })
            .map_err(|e| SsoError::Config(format!("{call}: {e}")))?;
        let url = self.user_url(name, Some("verify-password"));
        let (status, text) = self.send(&call, Method::POST, url, Some(body)).await?;
        match status {
            StatusCode::OK => Self::parse::<Matches>(&call, status, &text).map(|m| m.matches),
            _ => Err(Self::failure(&call, name, status, &text)),
        }
    }

    async fn delete(&self, name: &str) -> Result<(), SsoError> {
        let call = format!("DELETE user {name}");
        let (status, text) = self.send(&call, Method::DELETE, self.user_url(name, None), None).await?;
        match status {
            StatusCode::NO_CONTENT => Ok(()),
            s if Self::is_unknown_user(s, &text) => Ok(()),
            _ => Err(Self::failure(&call, name, status, &text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_checked_and_debug_hides_the_token() {
        let token = Secret::new("t0ken-t0ken-t0ken-t0ken");
        let client = BridgeClient::new("http://127.0.0.1:9092", token.clone()).unwrap();
        assert_eq!(client.user_url("a.b", None).as_str(), "http://127.0.0.1:9092/v1/users/a.b");
        assert_eq!(
            client.user_url("a/../b", Some("verify-password")).as_str(),
            "http://127.0.0.1:9092/v1/users/a%2F..%2Fb/verify-password"
        );
        let prefixed = BridgeClient::new("https://auth.example.com/bridge", token.clone()).unwrap();
        assert_eq!(prefixed.user_url("x", None).as_str(), "https://auth.example.com/bridge/v1/users/x");
        let shown = format!("{client:?}");
        assert!(!shown.contains("t0ken"), "{shown}");
        for bad in ["", "127.0.0.1:9092", "ftp://x", "http://x/?q=1", "http://u:p@x/", "mailto:a@b"] {
            assert!(matches!(BridgeClient::new(bad, token.clone()), Err(SsoError::Config(_))), "{bad}");
        }
        assert!(BridgeClient::new("http://x", Secret::new("")).is_err());
    }

    #[test]
    fn answers_map_to_errors_that_say_what_failed() {
        let err = BridgeClient::failure(
            "PUT user a",
            "a",
            StatusCode::CONFLICT,
            r#"{"code":"unmanaged_user","error":"not ours"}"#,
        );
        assert_eq!(err.to_string(), "SSO bridge: PUT user a: user a is not managed by the bridge (HTTP 409): not ours");
        let err = BridgeClient::failure("PUT user a", "a", StatusCode::SERVICE_UNAVAILABLE, "plain text");
        assert!(err.is_retryable() && err.to_string().contains("HTTP 503: plain text"), "{err}");
        let err = BridgeClient::failure("GET user a", "a", StatusCode::UNAUTHORIZED, r#"{"error":"token"}"#);
        assert!(!err.is_retryable() && matches!(err, SsoError::Rejected { status: 401, .. }));
        let err = BridgeClient::failure("PUT user a", "a", StatusCode::TOO_MANY_REQUESTS, "slow down");
        assert!(err.is_retryable() && matches!(err, SsoError::Unavailable { status: 429, .. }), "{err}");
        let err = BridgeClient::failure("PUT user a", "a", StatusCode::BAD_REQUEST, r#"{"error":"bad name"}"#);
        assert!(!err.is_retryable() && matches!(err, SsoError::Rejected { status: 400, .. }));
        let err = BridgeClient::failure("GET user a", "a", StatusCode::NOT_FOUND, "<html>404</html>");
        assert!(matches!(err, SsoError::Unexpected { status: 404, .. }), "a 404 from another server is no answer");
        assert!(err.to_string().contains("is the base URL the bridge's?"), "{err}");
        assert!(BridgeClient::is_unknown_user(StatusCode::NOT_FOUND, r#"{"code":"unknown_user","error":"no user a"}"#));
        assert!(!BridgeClient::is_unknown_user(StatusCode::NOT_FOUND, r#"{"code":"no_route","error":"no route"}"#));
        let long = "x".repeat(5000);
        let err = BridgeClient::failure("c", "a", StatusCode::BAD_REQUEST, &long);
        assert!(err.to_string().len() < 700);
    }
}
