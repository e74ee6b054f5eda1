//! The one interface every backend implements, what it reads and returns, and the rule every key
//! obeys.

use futures::future::BoxFuture;

/// An object and the version it was read at (an S3 ETag, or the file backend's content hash).
/// Versions are opaque: only ever hand them back to [`Store::replace`] or [`Store::delete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub bytes: Vec<u8>,
    pub version: String,
}

/// One key a listing found, with the version its object is at: the same version [`Store::get`]
/// would give, so a caller holding an earlier read can tell, without reading it again, whether
/// the object changed since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub version: String,
}

/// Why a store operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Create-if-absent found an object already there.
    #[error("{key} already exists")]
    AlreadyExists { key: String },
    /// Replace or delete found the object changed (or gone) since it was read.
    #[error("{key} changed since it was read")]
    VersionMismatch { key: String },
    /// The store could not be reached, or its answer left the outcome unknown after every retry.
    #[error("store unavailable ({detail}): check the store is reachable, then try again")]
    Unavailable { detail: String },
    /// The store answered, but refused: wrong credentials, missing bucket, bad endpoint.
    #[error("the store refused the request ({detail}): check the bucket name and its keys")]
    Refused { detail: String },
    /// A key that cannot name an object.
    #[error("invalid store key {key:?}: {reason}")]
    InvalidKey { key: String, reason: String },
}

impl StoreError {
    /// True when the store could not be reached (as opposed to a conflict it reported).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The store interface. Every method is one request to the store as far as callers can tell:
/// backends retry internally (bounded, jittered) and resolve ambiguous outcomes by re-reading,
/// so a caller sees either the write's definite result or [`StoreError::Unavailable`].
///
/// Bodies passed to writes must be unique per write (records carry a write id): that is how a
/// backend tells "my earlier attempt landed" from "someone else wrote" after an ambiguous answer.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Where this store is, for messages (`s3://bucket/prefix` or `file:///path`); no secrets.
    fn describe(&self) -> String;
    /// The object at `key`, or `None` when there is none.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>>;
    /// Writes `key` only if no object is there (`If-None-Match: *`); returns the new version.
    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>>;
    /// Writes `key` only if it is still at `version` (`If-Match`); returns the new version.
    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>>;
    /// Deletes `key` only if it is still at `version` (`If-Match`).
    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>>;
    /// Every key that starts with `prefix` with its object's version, sorted by key. On S3 this
    /// is one LIST request per 1,000 keys, whatever the objects hold.
    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>>;
    /// Every key that starts with `prefix`, sorted: [`Store::list_versions`] without the versions
    /// (a backend for which versions cost extra work overrides this).
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<String>>> {
        Box::pin(async move { Ok(self.list_versions(prefix).await?.into_iter().map(|listed| listed.key).collect()) })
    }
}

/// Keys are `/`-separated segments of `[A-Za-z0-9._-]`, none empty, `.` or `..`, so that the
/// same key is a safe relative path on disk and a plain S3 key.
pub fn check_key(key: &str) -> StoreResult<()> {
    let invalid = |reason: &str| Err(StoreError::InvalidKey { key: key.to_owned(), reason: reason.to_owned() });
    if key.is_empty() || key.len() > 512 {
        return invalid("must be 1 to 512 characters");
    }
    for segment in key.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return invalid("has an empty, `.` or `..` segment");
        }
        if segment.starts_with('.') {
            return invalid("a segment starts with `.` (reserved for the store's own files)");
        }
        if !segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
            return invalid("may hold only letters, digits, `.`, `_`, `-` and `/`");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert!(check_key("devices/dev_1.json").is_ok());
        for bad in ["", "/a", "a//b", "a/../b", "a b", ".lock", "a/.tmp/x", "é"] {
            assert!(check_key(bad).is_err(), "{bad:?} accepted");
        }
    }

    proptest::proptest! {
        #[test]
        fn an_accepted_key_is_a_safe_relative_path(key in "\\PC{0,40}") {
            if check_key(&key).is_ok() {
                let path = std::path::Path::new(&key);
                proptest::prop_assert!(path.is_relative());
                proptest::prop_assert!(path.components().all(|c| matches!(c, std::path::Component::Normal(_))));
            }
        }
    }
}
