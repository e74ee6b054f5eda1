//! The `swarm-secrets` bucket: values sealed on the way in and opened on the way out, so
//! nothing else in the controller ever handles a sealed value.

use std::fmt;

use async_nats::jetstream::kv;
use bytes::Bytes;

use super::SecretsKey;
use super::seal::{self, OpenError, Plaintext};

/// A record's key: dot-separated tokens of `[a-z0-9_-]`, e.g. `agent.alpha.forge-password`.
/// Kept to what a NATS KV key allows, without the characters (`*`, `>`, spaces) that would make
/// it a wildcard or split it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey(String);

impl RecordKey {
    /// # Errors
    /// What is wrong with `key`.
    pub fn new(key: impl Into<String>) -> Result<RecordKey, String> {
        let key = key.into();
        if key.is_empty() || key.len() > 200 {
            return Err(format!("a secret's record key has 1 to 200 characters, not {}", key.len()));
        }
        let token_ok = |t: &str| {
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        };
        if !key.split('.').all(token_ok) {
            return Err(format!("{key:?} is not a record key: use dot-separated tokens of a-z, 0-9, '-' and '_'"));
        }
        Ok(RecordKey(key))
    }

    /// The record of one secret of one agent, e.g. `agent.<name>.forge-token`.
    ///
    /// # Errors
    /// What is wrong with the name or the kind.
    pub fn agent(agent: &str, kind: &str) -> Result<RecordKey, String> {
        RecordKey::new(format!("agent.{agent}.{kind}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A failed secret-store operation; it names the record, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("the secret {record} did not open: {problem}")]
    Open { record: RecordKey, problem: OpenError },
    #[error("the secret store could not {action} {record}: {reason}")]
    Nats { action: &'static str, record: RecordKey, reason: String },
}

/// The bucket and the key its values are sealed under.
#[derive(Debug, Clone)]
pub struct SecretStore {
    bucket: kv::Store,
    key: SecretsKey,
}

impl SecretStore {
    pub fn new(bucket: kv::Store, key: SecretsKey) -> SecretStore {
        SecretStore { bucket, key }
    }

    /// Seals `value` and stores it under `record`, replacing what was there.
    ///
    /// # Errors
    /// [`SecretsError::Nats`].
    pub async fn put(&self, record: &RecordKey, value: &Plaintext) -> Result<(), SecretsError> {
        let sealed = seal::seal(&self.key, record.as_str(), value.expose());
        self.bucket.put(record.as_str(), Bytes::from(sealed)).await.map(drop).map_err(|e| SecretsError::Nats {
            action: "write",
            record: record.clone(),
            reason: e.to_string(),
        })
    }

    /// The value under `record`, opened; `None` when there is none.
    ///
    /// # Errors
    /// [`SecretsError::Open`] for a value that does not verify (it is never returned), or
    /// [`SecretsError::Nats`].
    pub async fn get(&self, record: &RecordKey) -> Result<Option<Plaintext>, SecretsError> {
        let sealed = self.bucket.get(record.as_str()).await.map_err(|e| SecretsError::Nats {
            action: "read",
            record: record.clone(),
            reason: e.to_string(),
        })?;
        sealed
            .map(|sealed| seal::open(&self.key, record.as_str(), &sealed))
            .transpose()
            .map_err(|problem| SecretsError::Open { record: record.clone(), problem })
    }

    /// The records whose keys start with `prefix` (e.g. `agent.alpha.linked-`), sorted. Reads
    /// only the keys under the prefix's whole tokens (`agent.alpha.`), so listing one agent's
    /// records costs that agent's records, whatever the swarm's size.
    ///
    /// # Errors
    /// [`SecretsError::Nats`].
    pub async fn records(&self, prefix: &str) -> Result<Vec<RecordKey>, SecretsError> {
        let whole_tokens = &prefix[..prefix.rfind('.').map_or(0, |dot| dot + 1)];
        let keys = crate::nats::key_listing::keys_under(&self.bucket, whole_tokens)
            .await
            .map_err(|reason| SecretsError::Nats { action: "list", record: RecordKey(format!("{prefix}*")), reason })?;
        let mut records: Vec<RecordKey> =
            keys.into_iter().filter(|k| k.starts_with(prefix)).filter_map(|k| RecordKey::new(k).ok()).collect();
        records.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(records)
    }

    /// When `record` was last written (the bucket's own time of its last put), `None` when it
    /// holds no value. Opens nothing.
    ///
    /// # Errors
    /// [`SecretsError::Nats`].
    pub async fn written_at(&self, record: &RecordKey) -> Result<Option<time::OffsetDateTime>, SecretsError> {
        let entry = self.bucket.entry(record.as_str()).await.map_err(|e| SecretsError::Nats {
            action: "read",
            record: record.clone(),
            reason: e.to_string(),
        })?;
        Ok(entry.filter(|e| e.operation == kv::Operation::Put).map(|e| e.created))
    }

    /// Removes `record` (absent is fine).
    ///
    /// # Errors
    /// [`SecretsError::Nats`].
    pub async fn delete(&self, record: &RecordKey) -> Result<(), SecretsError> {
        self.bucket.delete(record.as_str()).await.map_err(|e| SecretsError::Nats {
            action: "delete",
            record: record.clone(),
            reason: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_are_plain_dot_separated_tokens() {
        assert_eq!(RecordKey::agent("alpha", "forge-token").unwrap().as_str(), "agent.alpha.forge-token");
        for bad in ["", "agent..a", ".a", "a.", "a.*", "a.>", "A.b", "a b", "a/b", &"x".repeat(201)] {
            assert!(RecordKey::new(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
