//! Proves, on a probe key, that a store honours conditional create and conditional replace:
//! the check a copy runs at start and `agents-control store check` runs step by step.
//!
//! Steps: list, create, create again (must be refused), replace with a stale version (must be
//! refused), replace, delete with a stale version (must be refused and leave the object), delete. The probe key is `probe/<random>` and is removed afterwards,
//! whatever happened.

use crate::store::{Store, StoreError};

/// One step of the probe, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    List,
    Create,
    CreateAgain,
    ReplaceStale,
    Replace,
    DeleteStale,
    Delete,
}

impl Step {
    pub const ALL: [Step; 7] = [
        Step::List,
        Step::Create,
        Step::CreateAgain,
        Step::ReplaceStale,
        Step::Replace,
        Step::DeleteStale,
        Step::Delete,
    ];

    /// What the step does, for the step-by-step report.
    pub fn describe(self) -> &'static str {
        match self {
            Step::List => "list objects under the prefix",
            Step::Create => "create the probe object (If-None-Match: *)",
            Step::CreateAgain => "create it again, expecting refusal (412)",
            Step::ReplaceStale => "replace it with a stale version, expecting refusal (412)",
            Step::Replace => "replace it with its current version (If-Match)",
            Step::DeleteStale => "delete it with a stale version, expecting refusal (412) and the object kept",
            Step::Delete => "delete it with its current version (If-Match)",
        }
    }
}

/// Why the store failed the probe: the step and a sentence an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step `{}` failed: {reason}", step.describe())]
pub struct ProbeFailure {
    pub step: Step,
    pub reason: String,
}

/// A probe body that is unique to this write (the store's writes need unique bodies).
fn body(run: u64, stage: &str) -> Vec<u8> {
    format!("{{\"probe\":\"{run:016x}\",\"stage\":\"{stage}\"}}").into_bytes()
}

/// Runs every step, calling `report` after each one that passes; cleans up the probe key.
pub async fn run(store: &dyn Store, mut report: impl FnMut(Step)) -> Result<(), ProbeFailure> {
    let run = rand::random::<u64>();
    let key = format!("probe/{run:016x}.json");
    let result = steps(store, &key, run, &mut report).await;
    if result.is_err() {
        clean_up(store, &key).await;
    }
    result
}

async fn steps(store: &dyn Store, key: &str, run: u64, report: &mut impl FnMut(Step)) -> Result<(), ProbeFailure> {
    let fail = |step, reason: String| ProbeFailure { step, reason };
    let unexpected = |step, error: StoreError| fail(step, error.to_string());

    store.list("probe/").await.map_err(|e| unexpected(Step::List, e))?;
    report(Step::List);

    let first = store.create(key, body(run, "created")).await.map_err(|e| unexpected(Step::Create, e))?;
    report(Step::Create);

    match store.create(key, body(run, "created-again")).await {
        Err(StoreError::AlreadyExists { .. }) => report(Step::CreateAgain),
        Ok(_) => {
            return Err(fail(
                Step::CreateAgain,
                "the bucket ignored If-None-Match: it overwrote an existing object, so it cannot be shared by several copies".into(),
            ));
        }
        Err(e) => return Err(unexpected(Step::CreateAgain, e)),
    }

    let stale = "\"00000000000000000000000000000000\"";
    let stale = if first == stale { "\"11111111111111111111111111111111\"" } else { stale };
    match store.replace(key, body(run, "stale"), stale).await {
        Err(StoreError::VersionMismatch { .. }) => report(Step::ReplaceStale),
        Ok(_) => {
            return Err(fail(
                Step::ReplaceStale,
                "the bucket ignored If-Match: it accepted a write based on a stale version, so it cannot be shared by several copies".into(),
            ));
        }
        Err(e) => return Err(unexpected(Step::ReplaceStale, e)),
    }

    let current = match store.get(key).await {
        Ok(Some(object)) => object.version,
        Ok(None) => return Err(fail(Step::Replace, "the probe object vanished".into())),
        Err(e) => return Err(unexpected(Step::Replace, e)),
    };
    let replaced =
        store.replace(key, body(run, "replaced"), &current).await.map_err(|e| unexpected(Step::Replace, e))?;
    match store.get(key).await {
        Ok(Some(object)) if object.bytes == body(run, "replaced") => report(Step::Replace),
        Ok(_) => {
            return Err(fail(Step::Replace, "the replaced object does not read back as written".into()));
        }
        Err(e) => return Err(unexpected(Step::Replace, e)),
    }

    // A sweep or a store copy deletes only what it read: a delete that ignores If-Match could
    // remove a record another copy has just rewritten.
    match store.delete(key, &first).await {
        Err(StoreError::VersionMismatch { .. }) => {}
        Ok(()) => {
            return Err(fail(
                Step::DeleteStale,
                "the bucket ignored If-Match on DELETE: it removed an object changed since it was read, so it cannot be shared by several copies".into(),
            ));
        }
        Err(e) => return Err(unexpected(Step::DeleteStale, e)),
    }
    match store.get(key).await {
        Ok(Some(object)) if object.bytes == body(run, "replaced") => report(Step::DeleteStale),
        Ok(_) => return Err(fail(Step::DeleteStale, "the object changed or vanished after a refused delete".into())),
        Err(e) => return Err(unexpected(Step::DeleteStale, e)),
    }

    store.delete(key, &replaced).await.map_err(|e| unexpected(Step::Delete, e))?;
    match store.get(key).await {
        Ok(None) => report(Step::Delete),
        Ok(Some(_)) => {
            return Err(fail(Step::Delete, "the deleted object is still there".into()));
        }
        Err(e) => return Err(unexpected(Step::Delete, e)),
    }
    Ok(())
}

/// Best effort: remove the probe object whatever its version.
async fn clean_up(store: &dyn Store, key: &str) {
    if let Ok(Some(object)) = store.get(key).await {
        let _ = store.delete(key, &object.version).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::FileStore;

    #[tokio::test]
    async fn a_file_store_passes_every_step_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let mut passed = Vec::new();
        run(&store, |step| passed.push(step)).await.unwrap();
        assert_eq!(passed, Step::ALL);
        assert!(store.list("").await.unwrap().is_empty());
    }
}
