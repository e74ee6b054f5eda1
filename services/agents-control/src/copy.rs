//! Copying the durable records from one store to another (`store copy`): devices and pending
//! codes, never copy membership (it describes running copies of the source). Each record is
//! created at the destination only if absent; an identical record counts as already copied;
//! a different one is a conflict and is left alone.

use crate::records::{self, CodeRecord, DeviceRecord, RecordError};
use hyperhive_object_store::{Store, StoreError};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub copied: usize,
    pub already_there: usize,
    /// Keys that hold a different record at the destination.
    pub conflicts: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}: refusing to copy a record this build cannot read")]
    Record(#[from] RecordError),
}

pub async fn copy_records(from: &dyn Store, to: &dyn Store) -> Result<CopyReport, CopyError> {
    let mut report = CopyReport::default();
    let mut keys = from.list(records::DEVICES).await?;
    keys.extend(from.list(records::CODES).await?);
    for key in keys {
        let Some(object) = from.get(&key).await? else {
            continue; // removed (swept) since the list
        };
        if key.starts_with(records::DEVICES) {
            records::decode::<DeviceRecord>(&key, &object.bytes)?;
        } else {
            records::decode::<CodeRecord>(&key, &object.bytes)?;
        }
        match to.create(&key, object.bytes.clone()).await {
            Ok(_) => report.copied += 1,
            Err(StoreError::AlreadyExists { .. }) => match to.get(&key).await? {
                Some(existing) if existing.bytes == object.bytes => report.already_there += 1,
                _ => report.conflicts.push(key),
            },
            Err(other) => return Err(other.into()),
        }
    }
    Ok(report)
}
