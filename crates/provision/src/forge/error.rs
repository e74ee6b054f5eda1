//! [`ForgeError`]: every failure names the call it happened in; a refusal carries the HTTP
//! status and the forge's own `message`. No variant ever holds a token or a password: the
//! client scrubs the secrets of a call from whatever the forge or the HTTP stack says.

use reqwest::StatusCode;

use crate::retry::{Retryable, retryable_status};

/// Why a forge call failed. `call` is a short description such as `"create user bob"`.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The caller's input is malformed; nothing was sent.
    #[error("forge {call}: {reason}")]
    Invalid { call: String, reason: String },

    /// No HTTP answer: the server could not be reached, or did not answer in time.
    #[error("forge {call}: no answer from the server: {reason}")]
    Unreachable { call: String, reason: String },

    /// The forge answered with an error status; `message` is its own explanation.
    #[error("forge {call}: HTTP {status} {}: {message}", reason_phrase(*status))]
    Refused { call: String, status: u16, message: String },

    /// The forge answered with success, but not with the body the API documents.
    #[error("forge {call}: unexpected answer: {reason}")]
    BadAnswer { call: String, reason: String },
}

fn reason_phrase(status: u16) -> &'static str {
    StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("")
}

impl ForgeError {
    /// The HTTP status the forge answered with, for [`ForgeError::Refused`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether trying again later may succeed: no answer, or the forge (or a proxy in front of
    /// it) failed or said it is overloaded (a 5xx or a 429). A refusal (409 or 422 for a taken
    /// name, 401 or 403 for a token it does not accept, 400 for bad input), malformed input and
    /// an answer that is not the API's are not.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Refused { status, .. } => retryable_status(*status),
            Self::Invalid { .. } | Self::BadAnswer { .. } => false,
        }
    }

    /// Whether the forge refused because the thing exists already: 409 for a repository, 422
    /// for a user or email (the API's "validation error"), 400 for a token name.
    pub fn is_already_exists(&self) -> bool {
        match self {
            Self::Refused { status: 409, .. } => true,
            Self::Refused { status: 400 | 422, message, .. } => {
                let message = message.to_ascii_lowercase();
                message.contains("already") || message.contains("has been used")
            }
            _ => false,
        }
    }
}

impl Retryable for ForgeError {
    fn is_retryable(&self) -> bool {
        self.is_transient()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(status: u16, message: &str) -> ForgeError {
        ForgeError::Refused { call: "create user bob".into(), status, message: message.into() }
    }

    #[test]
    fn display_names_the_call_the_status_and_the_message() {
        assert_eq!(
            refused(422, "user already exists [name: bob]").to_string(),
            "forge create user bob: HTTP 422 Unprocessable Entity: user already exists [name: bob]"
        );
        assert_eq!(refused(599, "odd").to_string(), "forge create user bob: HTTP 599 : odd");
    }

    #[test]
    fn transient_and_exists_are_told_apart() {
        assert!(refused(503, "Service Unavailable").is_transient());
        assert!(!refused(422, "user already exists [name: bob]").is_transient());
        assert!(refused(422, "user already exists [name: bob]").is_already_exists());
        assert!(refused(422, "e-mail already in use [email: b@x.org]").is_already_exists());
        assert!(refused(400, "access token name has been used already").is_already_exists());
        assert!(refused(409, "The repository with the same name already exists.").is_already_exists());
        assert!(!refused(422, "name is reserved [name: admin]").is_already_exists());
        assert!(!refused(403, "user should be the site admin").is_already_exists());
    }

    #[test]
    fn server_failures_and_throttling_are_retryable_refusals_are_not() {
        for status in [429, 500, 502, 503, 504] {
            assert!(refused(status, "busy").is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 409, 422] {
            assert!(!refused(status, "no").is_retryable(), "{status}");
        }
        let unreachable = ForgeError::Unreachable { call: "get user bob".into(), reason: "connection refused".into() };
        assert!(unreachable.is_retryable());
        assert!(!ForgeError::BadAnswer { call: "get user bob".into(), reason: "not JSON".into() }.is_retryable());
        assert!(!ForgeError::Invalid { call: "create user Bob".into(), reason: "bad name".into() }.is_retryable());
    }
}
