//! The `schedule-definitions` bucket: one document per schedule, every change a single
//! compare-and-set (create-if-absent, update-if-revision, delete-if-revision), so a schedule
//! exists for all of its agents or for none.

use async_nats::jetstream::{self, kv};
use hyperhive_nats_objects::SCHEDULE_DEFINITIONS_BUCKET;
use rand::Rng;

use crate::definition::{DefinitionRules, ScheduleDefinition, StoredError};
use crate::nats::{NatsError, scan_bucket};

/// A definition with the revision it was read at (the `If-Match` value for its next change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revisioned {
    /// The document.
    pub definition: ScheduleDefinition,
    /// Its revision in `schedule-definitions`.
    pub revision: u64,
}

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Someone changed the schedule since the given revision.
    #[error("schedule {id} changed since revision {expected}")]
    Conflict {
        /// The schedule.
        id: String,
        /// The revision the change was based on.
        expected: u64,
    },
    /// NATS could not be reached or refused.
    #[error("NATS: {0}")]
    Nats(String),
    /// A stored document cannot be read.
    #[error("schedule {id}: {source}")]
    Unreadable {
        /// The schedule.
        id: String,
        /// Why.
        #[source]
        source: StoredError,
    },
}

impl From<NatsError> for StoreError {
    fn from(err: NatsError) -> Self {
        Self::Nats(err.to_string())
    }
}

/// A failed write, named as one: async-nats prints "failed getting entry" before the cause of
/// every write error it does not single out (its text for reads), which would send the reader
/// looking for a read.
fn write_failed(err: &kv::UpdateError) -> StoreError {
    let cause = std::error::Error::source(err).map_or_else(|| err.to_string(), ToString::to_string);
    StoreError::Nats(format!("writing a schedule definition: {cause}"))
}

/// Schedule ids: 16 lowercase hex digits (64 random bits), a valid KV key and subject token.
pub fn new_id() -> String {
    format!("{:016x}", rand::rng().random::<u64>())
}

/// Whether `id` has the shape [`new_id`] makes (anything else cannot exist).
pub fn is_schedule_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The definitions bucket.
#[derive(Debug, Clone)]
pub struct Definitions {
    js: jetstream::Context,
    kv: kv::Store,
}

impl Definitions {
    /// Wraps the bucket made by [`hyperhive_nats_objects::ensure_objects`].
    pub fn new(js: jetstream::Context, kv: kv::Store) -> Self {
        Self { js, kv }
    }

    /// Stores a new definition under its id, only if that id is unused.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the id exists (the caller picks another), else NATS errors.
    pub async fn create(&self, definition: &ScheduleDefinition) -> Result<u64, StoreError> {
        // An update expecting no message under the key, rather than `kv::Store::create`: that
        // one reads the key after any failed write (to take over a deleted key), and during an
        // election the read waits out a second timeout and hides why the write failed. A deleted
        // id is as used as a live one here: the caller draws another.
        self.kv.update(&definition.id, definition.to_bytes().into(), 0).await.map_err(|e| match e.kind() {
            kv::UpdateErrorKind::WrongLastRevision => StoreError::Conflict { id: definition.id.clone(), expected: 0 },
            _ => write_failed(&e),
        })
    }

    /// The definition under `id`, if any.
    ///
    /// # Errors
    /// NATS errors, or [`StoreError::Unreadable`].
    pub async fn get(&self, id: &str) -> Result<Option<Revisioned>, StoreError> {
        if !is_schedule_id(id) {
            return Ok(None);
        }
        let Some(entry) = self.kv.entry(id).await.map_err(|e| StoreError::Nats(e.to_string()))? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let definition = ScheduleDefinition::from_bytes(&entry.value)
            .map_err(|source| StoreError::Unreadable { id: id.to_owned(), source })?;
        Ok(Some(Revisioned { definition, revision: entry.revision }))
    }

    /// Replaces the definition only if it is still at `revision`.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when it is not, else NATS errors.
    pub async fn update(&self, definition: &ScheduleDefinition, revision: u64) -> Result<u64, StoreError> {
        self.kv.update(&definition.id, definition.to_bytes().into(), revision).await.map_err(|e| match e.kind() {
            kv::UpdateErrorKind::WrongLastRevision => {
                StoreError::Conflict { id: definition.id.clone(), expected: revision }
            }
            _ => write_failed(&e),
        })
    }

    /// Deletes the definition only if it is still at `revision`.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when it is not, else NATS errors.
    pub async fn delete(&self, id: &str, revision: u64) -> Result<(), StoreError> {
        // A failed delete is not followed by a read: during an election the read would wait out
        // a timeout and answer with that instead of why the delete failed.
        self.kv.delete_expect_revision(id, Some(revision)).await.map_err(|e| match e.kind() {
            kv::DeleteErrorKind::WrongLastRevision => StoreError::Conflict { id: id.to_owned(), expected: revision },
            _ => write_failed(&e),
        })
    }

    /// Every definition, sorted by id. An unreadable document is logged and left out, so one
    /// bad record cannot take the API or the reconcile pass down.
    ///
    /// # Errors
    /// NATS errors.
    pub async fn list(&self) -> Result<Vec<Revisioned>, StoreError> {
        let mut out: Vec<Revisioned> = scan_bucket(&self.js, SCHEDULE_DEFINITIONS_BUCKET)
            .await?
            .into_iter()
            .filter_map(|kv| match ScheduleDefinition::from_bytes(&kv.value) {
                Ok(definition) => Some(Revisioned { definition, revision: kv.revision }),
                Err(err) => {
                    tracing::error!(key = %kv.key, %err, "skipping an unreadable schedule definition");
                    None
                }
            })
            .collect();
        out.sort_by(|a, b| a.definition.id.cmp(&b.definition.id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_have_the_checked_shape() {
        for _ in 0..100 {
            assert!(is_schedule_id(&new_id()));
        }
        for bad in ["", "abc", "0123456789abcdeF", "0123456789abcde.", "0123456789abcdef0"] {
            assert!(!is_schedule_id(bad), "{bad}");
        }
    }
}
