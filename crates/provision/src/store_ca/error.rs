//! What can go wrong loading the store CA or issuing with it. No variant ever holds key material.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// A failure of the store CA.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreCaError {
    /// A file could not be read or written.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done (`reading the key file`...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The key file may be read (or written) by its group or by others.
    #[error(
        "the key file {} has mode {mode:04o}: its group and others must have no access (chmod 600 it)",
        path.display()
    )]
    KeyFileTooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A file that must be written new exists already (a CA is never overwritten).
    #[error("{} already exists: the store CA is never overwritten", path.display())]
    AlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The CA key is not a PEM PKCS#8 private key of a kind this CA signs with.
    #[error("the store CA key is not a usable PEM private key (PKCS#8, \"BEGIN PRIVATE KEY\"): {reason}")]
    InvalidKey {
        /// Why (never the key).
        reason: String,
    },
    /// The CA certificate cannot be used.
    #[error("the store CA certificate cannot be used: {reason}")]
    InvalidCertificate {
        /// Why.
        reason: String,
    },
    /// The key and the certificate do not belong together.
    #[error("the store CA key is not the key of the store CA certificate")]
    KeyMismatch,
    /// A certificate would outlive the CA that signs it, or the CA has expired.
    #[error("the store CA certificate is valid until {ca_not_after}, before the asked-for {wanted_not_after}")]
    CaExpiresFirst {
        /// The CA's last valid instant (RFC 3339).
        ca_not_after: String,
        /// The end asked for (RFC 3339).
        wanted_not_after: String,
    },
    /// A lifetime out of range.
    #[error("a store certificate's lifetime must be between {min:?} and {max:?}, not {given:?}")]
    InvalidLifetime {
        /// What was asked.
        given: Duration,
        /// The shortest allowed.
        min: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// An instant that X.509 cannot carry (before 1970 or after 9999).
    #[error("{0:?} cannot be written in a certificate")]
    InvalidTime(SystemTime),
    /// A CA common name that is empty, too long or has control characters.
    #[error("invalid store CA common name: {reason}")]
    InvalidCommonName {
        /// Why.
        reason: String,
    },
    /// Making the certificate failed.
    #[error("making the certificate failed: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The system's random generator failed.
    #[error("the system random generator failed")]
    Random,
}

/// Retryable: a file that could not be read or written (a disk or mount that may come back) and
/// the system's random generator. Everything else is the CA's key, certificate or an asked-for
/// lifetime that no retry changes.
impl crate::Retryable for StoreCaError {
    fn is_retryable(&self) -> bool {
        matches!(self, Self::Io { .. } | Self::Random)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Retryable;

    #[test]
    fn only_io_and_randomness_are_worth_a_retry() {
        let io = StoreCaError::Io {
            action: "reading the key file",
            path: "/x".into(),
            source: std::io::Error::other("gone"),
        };
        assert!(io.is_retryable() && StoreCaError::Random.is_retryable());
        assert!(!StoreCaError::KeyMismatch.is_retryable());
        let expired = StoreCaError::CaExpiresFirst { ca_not_after: "a".into(), wanted_not_after: "b".into() };
        assert!(!expired.is_retryable());
    }
}
