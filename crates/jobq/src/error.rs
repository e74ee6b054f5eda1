//! What a failed attempt says: why it failed (shown as the job's `last_error`) and whether
//! another attempt can help, which decides between a retry after a backoff and failing at once.

use std::fmt;

/// Whether trying again can succeed where an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The failure may pass by itself (a server down, slow or overloaded; a store unavailable):
    /// the job is retried after its backoff while it has attempts left.
    Retryable,
    /// Every attempt will fail the same way until someone changes something (a refusal, a name
    /// held by someone else, input the other side rejects): the job fails at once and the jobs
    /// after it are blocked. A retry by hand, after the fix, runs it again.
    Permanent,
}

impl ErrorKind {
    /// The word used in logs: `retryable` or `permanent`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retryable => "retryable",
            Self::Permanent => "permanent",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an attempt failed, and whether a retry can help. Its `Display` is the message alone: it
/// becomes the job's `last_error`, so it must already be fit to show (never a secret) and say
/// what failed and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AttemptError {
    kind: ErrorKind,
    message: String,
}

impl AttemptError {
    /// A failure of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// A failure that may pass: the job is retried after its backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retryable, message)
    }

    /// A failure no retry can mend: the job fails at once.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permanent, message)
    }

    /// Whether a retry can help.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether no retry can help.
    pub fn is_permanent(&self) -> bool {
        self.kind == ErrorKind::Permanent
    }

    /// The reason, as shown in `last_error`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A bare message is retryable: work that cannot tell whether a failure passes loses only a
/// bounded number of attempts by trying again, while failing at once would need a person for
/// something that mends itself.
impl From<String> for AttemptError {
    fn from(message: String) -> Self {
        Self::retryable(message)
    }
}

impl From<&str> for AttemptError {
    fn from(message: &str) -> Self {
        Self::retryable(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_display_and_the_kind_is_kept() {
        let permanent = AttemptError::permanent("forge create user a: HTTP 422: user already exists");
        assert_eq!(permanent.to_string(), "forge create user a: HTTP 422: user already exists");
        assert!(permanent.is_permanent());
        assert_eq!(permanent.kind(), ErrorKind::Permanent);
        let retryable = AttemptError::retryable("forge answered 502");
        assert!(!retryable.is_permanent());
        assert_eq!(retryable.message(), "forge answered 502");
        assert_eq!(AttemptError::from("x".to_owned()), AttemptError::retryable("x"), "a bare message is retryable");
        assert_eq!(AttemptError::from("x").kind().to_string(), "retryable");
    }
}
