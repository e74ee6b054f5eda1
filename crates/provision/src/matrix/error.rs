//! What can go wrong talking to a homeserver, and how its error answers map to it.
//!
//! A Matrix error answer is `{"errcode": "M_...", "error": "text"}` (plus `retry_after_ms` when
//! throttled). The `errcode` decides the variant; the text is kept, shortened, for people.
//! Nothing here ever holds a password, token or the shared secret.

use std::time::Duration;

use serde::Deserialize;

/// The longest piece of a server's text kept in an error: enough to read, bounded for logs.
const MAX_SERVER_TEXT: usize = 300;

/// A failed call to the homeserver.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatrixError {
    /// Refused before sending: the input breaks a rule the homeserver would enforce.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// Which input (`localpart`, `password`, `display name`, `base URL`).
        what: &'static str,
        /// The rule it breaks.
        reason: String,
    },
    /// The localpart is taken (`M_USER_IN_USE`).
    #[error("the matrix account {localpart:?} already exists")]
    AlreadyExists {
        /// The localpart asked for.
        localpart: String,
    },
    /// The admin API does not know the account (404 `M_NOT_FOUND`).
    #[error("the homeserver has no account {user_id:?}")]
    NotFound {
        /// The user id asked about.
        user_id: String,
    },
    /// Shared-secret registration was refused: the secret is not the homeserver's.
    #[error(
        "the homeserver refused the registration's MAC: the shared secret is not its \
         registration_shared_secret"
    )]
    SharedSecretRejected,
    /// `M_FORBIDDEN`: a wrong password, an unknown account, or an action not allowed (on the
    /// admin API: the token is not a server admin's).
    #[error("forbidden by the homeserver: {message}")]
    Forbidden {
        /// The server's text.
        message: String,
    },
    /// `M_USER_DEACTIVATED`: the account is deactivated. Synapse checks the password first and
    /// deletes a deactivated account's password, so a password login answers
    /// [`MatrixError::Forbidden`] there instead.
    #[error("the matrix account is deactivated")]
    Deactivated,
    /// `M_USER_LOCKED`: an administrator locked the account.
    #[error("the matrix account is locked by an administrator")]
    Locked,
    /// `M_UNKNOWN_TOKEN`: the access token is not (or no longer) valid.
    #[error("the homeserver does not know the access token (logged out, or the account was deactivated)")]
    UnknownToken,
    /// `M_LIMIT_EXCEEDED`: throttled; `retry_after` when the server said how long to wait.
    #[error("rate limited by the homeserver{}", retry_after.map(|d| format!("; retry after {} ms", d.as_millis())).unwrap_or_default())]
    RateLimited {
        /// How long the server asked to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// No answer: refused connection, DNS, TLS, timeout.
    #[error("the homeserver at {base_url} is unreachable")]
    Unreachable {
        /// Where it was looked for.
        base_url: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The HTTP client could not be built (its TLS set-up failed).
    #[error("building the HTTP client failed")]
    HttpClient(#[source] reqwest::Error),
    /// Any other error answer.
    #[error("the homeserver answered {what} with {status} {errcode}: {message}")]
    Server {
        /// The call (`register`, `login`...).
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// The Matrix `errcode`, or `-` when there was none.
        errcode: String,
        /// The server's text.
        message: String,
    },
    /// An answer that is not what the Matrix API documents (not JSON, missing fields, too big).
    #[error("unexpected answer from the homeserver to {what} (HTTP {status}): {detail}")]
    UnexpectedResponse {
        /// The call (`register`, `login`...).
        what: &'static str,
        /// The HTTP status.
        status: u16,
        /// What was wrong with it.
        detail: String,
    },
}

/// Retryable: no answer, throttling, and a 5xx or 429 the homeserver (or a proxy in front of
/// it) answered. Everything else is a refusal or an answer no retry changes: a taken localpart,
/// a wrong password or shared secret, a deactivated or locked account, an unknown token, bad
/// input.
impl crate::Retryable for MatrixError {
    fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::RateLimited { .. } => true,
            Self::Server { status, .. } | Self::UnexpectedResponse { status, .. } => {
                crate::retry::retryable_status(*status)
            }
            Self::InvalidInput { .. }
            | Self::AlreadyExists { .. }
            | Self::NotFound { .. }
            | Self::SharedSecretRejected
            | Self::Forbidden { .. }
            | Self::Deactivated
            | Self::Locked
            | Self::UnknownToken
            | Self::HttpClient(_) => false,
        }
    }
}

/// The body of a Matrix error answer; every field optional, as proxies answer too.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default)]
    pub(super) errcode: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
    #[serde(default)]
    pub(super) retry_after_ms: Option<u64>,
}

impl ErrorBody {
    /// Reads an error answer; a body that is not a Matrix error gives an empty one, and its text
    /// (shortened) becomes the message.
    pub(super) fn parse(body: &[u8]) -> Self {
        serde_json::from_slice(body)
            .unwrap_or_else(|_| Self { error: Some(String::from_utf8_lossy(body).into_owned()), ..Self::default() })
    }

    pub(super) fn errcode(&self) -> &str {
        self.errcode.as_deref().unwrap_or("-")
    }

    pub(super) fn message(&self) -> String {
        shorten(self.error.as_deref().unwrap_or(""))
    }
}

/// The error for an error answer to `what`, by its `errcode`; `retry_after_header` is the
/// `Retry-After` header in seconds, used when the body does not say how long to wait.
pub(super) fn from_answer(
    what: &'static str,
    status: u16,
    body: &ErrorBody,
    retry_after_header: Option<u64>,
) -> MatrixError {
    match body.errcode() {
        "M_USER_DEACTIVATED" => MatrixError::Deactivated,
        "M_USER_LOCKED" => MatrixError::Locked,
        "M_UNKNOWN_TOKEN" | "M_MISSING_TOKEN" => MatrixError::UnknownToken,
        "M_FORBIDDEN" => MatrixError::Forbidden { message: body.message() },
        "M_LIMIT_EXCEEDED" => rate_limited(body, retry_after_header),
        _ if status == 429 => rate_limited(body, retry_after_header),
        errcode => MatrixError::Server { what, status, errcode: errcode.to_owned(), message: body.message() },
    }
}

fn rate_limited(body: &ErrorBody, retry_after_header: Option<u64>) -> MatrixError {
    let retry_after =
        body.retry_after_ms.map(Duration::from_millis).or_else(|| retry_after_header.map(Duration::from_secs));
    MatrixError::RateLimited { retry_after }
}

/// At most [`MAX_SERVER_TEXT`] characters of `text`, on one line.
pub(super) fn shorten(text: &str) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if one_line.chars().count() <= MAX_SERVER_TEXT {
        return one_line;
    }
    let mut short: String = one_line.chars().take(MAX_SERVER_TEXT).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, json: &str, header: Option<u64>) -> MatrixError {
        from_answer("test", status, &ErrorBody::parse(json.as_bytes()), header)
    }

    #[test]
    fn errcodes_map_to_their_variants() {
        assert!(matches!(
            answer(403, r#"{"errcode":"M_USER_DEACTIVATED","error":"x"}"#, None),
            MatrixError::Deactivated
        ));
        assert!(matches!(answer(401, r#"{"errcode":"M_USER_LOCKED"}"#, None), MatrixError::Locked));
        assert!(matches!(answer(401, r#"{"errcode":"M_UNKNOWN_TOKEN"}"#, None), MatrixError::UnknownToken));
        assert!(matches!(
            answer(403, r#"{"errcode":"M_FORBIDDEN","error":"Invalid username or password"}"#, None),
            MatrixError::Forbidden { message } if message == "Invalid username or password"
        ));
        assert!(matches!(
            answer(400, r#"{"errcode":"M_UNKNOWN","error":"nope"}"#, None),
            MatrixError::Server { status: 400, errcode, .. } if errcode == "M_UNKNOWN"
        ));
    }

    #[test]
    fn rate_limits_take_the_body_then_the_header() {
        let wait = |err| match err {
            MatrixError::RateLimited { retry_after } => retry_after,
            other => panic!("not rate limited: {other:?}"),
        };
        let body = r#"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1500}"#;
        assert_eq!(wait(answer(429, body, Some(9))), Some(Duration::from_millis(1500)));
        assert_eq!(wait(answer(429, r#"{"errcode":"M_LIMIT_EXCEEDED"}"#, Some(2))), Some(Duration::from_secs(2)));
        assert_eq!(wait(answer(429, "<html>slow down</html>", None)), None);
        let text = answer(429, body, None).to_string();
        assert!(text.contains("retry after 1500 ms"), "{text}");
    }

    #[test]
    fn throttling_and_server_failures_are_retryable_refusals_are_not() {
        use crate::Retryable;
        assert!(answer(429, r#"{"errcode":"M_LIMIT_EXCEEDED"}"#, None).is_retryable());
        assert!(answer(502, "<html>bad gateway</html>", None).is_retryable());
        assert!(answer(500, r#"{"errcode":"M_UNKNOWN","error":"db"}"#, None).is_retryable());
        for refusal in [
            answer(400, r#"{"errcode":"M_USER_IN_USE","error":"taken"}"#, None),
            answer(403, r#"{"errcode":"M_FORBIDDEN","error":"Invalid username or password"}"#, None),
            answer(401, r#"{"errcode":"M_UNKNOWN_TOKEN"}"#, None),
            answer(401, r#"{"errcode":"M_USER_LOCKED"}"#, None),
            answer(400, r#"{"errcode":"M_INVALID_USERNAME","error":"bad"}"#, None),
        ] {
            assert!(!refusal.is_retryable(), "{refusal}");
        }
        assert!(!MatrixError::AlreadyExists { localpart: "a".into() }.is_retryable());
        assert!(!MatrixError::SharedSecretRejected.is_retryable());
    }

    #[test]
    fn a_body_that_is_not_json_is_kept_short() {
        let long = "x".repeat(5000);
        let MatrixError::Server { errcode, message, .. } = answer(502, &long, None) else { panic!("not Server") };
        assert_eq!(errcode, "-");
        assert_eq!(message.chars().count(), MAX_SERVER_TEXT + 1);
        assert_eq!(shorten("a\nb"), "a b");
    }
}
