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

/// Which store an error comes from: the two may be at different providers with different keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Destination,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Source => "the source (--from)",
            Side::Destination => "the destination (--to)",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{side} {store}: {error}")]
    Store { side: Side, store: String, error: StoreError },
    #[error("{0}: refusing to copy a record this build cannot read")]
    Record(#[from] RecordError),
}

pub async fn copy_records(from: &dyn Store, to: &dyn Store) -> Result<CopyReport, CopyError> {
    let source = |error| CopyError::Store { side: Side::Source, store: from.describe(), error };
    let destination = |error| CopyError::Store { side: Side::Destination, store: to.describe(), error };
    // Reach the destination before anything else, so wrong keys or a wrong endpoint there are
    // reported as such even when the source holds nothing.
    to.list(records::DEVICES).await.map_err(destination)?;
    let mut report = CopyReport::default();
    let mut keys = from.list(records::DEVICES).await.map_err(source)?;
    keys.extend(from.list(records::CODES).await.map_err(source)?);
    for key in keys {
        let Some(object) = from.get(&key).await.map_err(source)? else {
            continue; // removed (swept) since the list
        };
        if key.starts_with(records::DEVICES) {
            records::decode::<DeviceRecord>(&key, &object.bytes)?;
        } else {
            records::decode::<CodeRecord>(&key, &object.bytes)?;
        }
        match to.create(&key, object.bytes.clone()).await {
            Ok(_) => report.copied += 1,
            Err(StoreError::AlreadyExists { .. }) => match to.get(&key).await.map_err(destination)? {
                Some(existing) if existing.bytes == object.bytes => report.already_there += 1,
                _ => report.conflicts.push(key),
            },
            Err(other) => return Err(destination(other)),
        }
    }
    Ok(report)
}
