//! The device registry: what the store holds about paired devices, listing and forgetting.
//!
//! [`Registry`] is the in-memory copy every copy serves from (refreshed by LIST every few
//! seconds), so known devices keep working while the store is unreachable; the link issue
//! reads it to authenticate devices and to cut forgotten ones.

use crate::clock::Clock;
use crate::records::{self, DeviceRecord, RecordError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::{Store, StoreError};
use std::collections::BTreeMap;
use std::sync::RwLock;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Record(#[from] RecordError),
    #[error("{0:?} is not a device id (ids look like d followed by 32 hex digits; see `agents-control clients`)")]
    BadId(String),
    #[error("no device {0} in the store (see `agents-control clients` and `agents-control hosts`)")]
    NotFound(String),
    #[error("device {0} was already forgotten")]
    AlreadyForgotten(String),
}

/// Every device record in the store, tombstones included, by id.
pub async fn load_all(store: &dyn Store) -> Result<BTreeMap<String, DeviceRecord>, RegistryError> {
    let mut devices = BTreeMap::new();
    for key in store.list(records::DEVICES).await? {
        let Some(object) = store.get(&key).await? else {
            continue; // removed between LIST and GET
        };
        let record: DeviceRecord = records::decode(&key, &object.bytes)?;
        devices.insert(record.id.clone(), record);
    }
    Ok(devices)
}

/// The paired (not forgotten) devices of one kind, sorted by pairing time.
pub async fn list(store: &dyn Store, kind: DeviceKind) -> Result<Vec<DeviceRecord>, RegistryError> {
    let mut devices: Vec<DeviceRecord> =
        load_all(store).await?.into_values().filter(|d| d.kind == kind && d.forgotten_at.is_none()).collect();
    devices.sort_by(|a, b| a.paired_at.cmp(&b.paired_at).then(a.id.cmp(&b.id)));
    Ok(devices)
}

/// Forgets a device: one replace-if-version turning its record into a tombstone. A concurrent
/// change makes it re-read and try again (a bounded number of times).
pub async fn forget(store: &dyn Store, clock: &dyn Clock, id: &str) -> Result<DeviceRecord, RegistryError> {
    if !records::is_device_id(id) {
        return Err(RegistryError::BadId(id.to_owned()));
    }
    let key = records::device_key(id);
    let mut attempts = 0;
    loop {
        let object = store.get(&key).await?.ok_or_else(|| RegistryError::NotFound(id.to_owned()))?;
        let mut record: DeviceRecord = records::decode(&key, &object.bytes)?;
        if record.forgotten_at.is_some() {
            return Err(RegistryError::AlreadyForgotten(id.to_owned()));
        }
        record.forgotten_at = Some(records::timestamp(clock.now()));
        record.write_id = records::write_id();
        match store.replace(&key, records::encode(&record), &object.version).await {
            Ok(_) => {
                tracing::info!(device = %id, kind = %record.kind, "forgot a device");
                return Ok(record);
            }
            Err(StoreError::VersionMismatch { .. }) if attempts < 3 => attempts += 1,
            Err(other) => return Err(other.into()),
        }
    }
}

/// The in-memory registry a serving copy answers from.
#[derive(Debug, Default)]
pub struct Registry {
    devices: RwLock<BTreeMap<String, DeviceRecord>>,
}

impl Registry {
    /// Re-reads every device record; on failure the previous contents stay.
    pub async fn refresh(&self, store: &dyn Store) -> Result<usize, RegistryError> {
        let devices = load_all(store).await?;
        let count = devices.len();
        *self.devices.write().expect("registry lock") = devices;
        Ok(count)
    }

    /// A paired, not forgotten device.
    pub fn active(&self, id: &str) -> Option<DeviceRecord> {
        self.devices.read().expect("registry lock").get(id).filter(|d| d.forgotten_at.is_none()).cloned()
    }

    /// A paired, not forgotten device, read from the store when this copy has not seen it yet.
    ///
    /// A device that just paired (through any copy) connects before the next refresh reaches
    /// this copy; one GET of its record lets it in at once. A device the store does not know,
    /// or a store that cannot be read, leaves the answer to what is in memory.
    pub async fn active_or_fetch(&self, store: &dyn Store, id: &str) -> Option<DeviceRecord> {
        if let Some(record) = self.active(id) {
            return Some(record);
        }
        // The id comes from the device's hello: only a well-formed one becomes a store key.
        if !records::is_device_id(id) {
            return None;
        }
        let object = store.get(&records::device_key(id)).await.ok()??;
        let record: DeviceRecord = records::decode(&records::device_key(id), &object.bytes).ok()?;
        if record.id != id {
            return None;
        }
        self.devices.write().expect("registry lock").insert(record.id.clone(), record.clone());
        record.forgotten_at.is_none().then_some(record)
    }

    /// Records a forget this copy learned of before its next refresh (from a request it served,
    /// or a peer's `revoked`), so the device is refused at once.
    pub fn mark_forgotten(&self, id: &str, at: &str) {
        if let Some(record) = self.devices.write().expect("registry lock").get_mut(id)
            && record.forgotten_at.is_none()
        {
            record.forgotten_at = Some(at.to_owned());
        }
    }

    /// The paired, not forgotten devices of one kind.
    pub fn active_of_kind(&self, kind: DeviceKind) -> Vec<DeviceRecord> {
        let devices = self.devices.read().expect("registry lock");
        devices.values().filter(|d| d.kind == kind && d.forgotten_at.is_none()).cloned().collect()
    }
}
