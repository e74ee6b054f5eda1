//! This copy's membership record (`members/<copy id>.json`, DESIGN 3.7): written at start,
//! refreshed as a heartbeat, removed on a clean shutdown. The peers issue lists these records
//! to find the other copies; a record whose heartbeat is old belongs to a copy that died.

use crate::clock::Clock;
use crate::records::{self, MemberRecord, SCHEMA};
use hyperhive_object_store::{Store, StoreError};
use std::sync::Mutex;

#[derive(Debug)]
pub struct Membership {
    copy_id: String,
    name: String,
    peer_url: Option<String>,
    /// The version of our record as last written; `None` before joining or after leaving.
    version: Mutex<Option<String>>,
}

impl Membership {
    pub fn new(name: String, peer_url: Option<String>) -> Membership {
        Membership { copy_id: format!("{:016x}", rand::random::<u64>()), name, peer_url, version: Mutex::new(None) }
    }

    pub fn copy_id(&self) -> &str {
        &self.copy_id
    }

    /// Where the other copies reach this one; without it, this copy dials them instead.
    pub fn peer_url(&self) -> Option<&str> {
        self.peer_url.as_deref()
    }

    fn record(&self, clock: &dyn Clock) -> Vec<u8> {
        records::encode(&MemberRecord {
            schema: SCHEMA,
            copy_id: self.copy_id.clone(),
            name: self.name.clone(),
            peer_url: self.peer_url.clone(),
            heartbeat_at: records::timestamp(clock.now()),
            write_id: records::write_id(),
        })
    }

    /// Writes the record: a replace of our last version, or a create when there is none (first
    /// time, or someone removed it).
    pub async fn heartbeat(&self, store: &dyn Store, clock: &dyn Clock) -> Result<(), StoreError> {
        let key = records::member_key(&self.copy_id);
        let last = self.version.lock().expect("membership lock").clone();
        let written = match last {
            Some(version) => match store.replace(&key, self.record(clock), &version).await {
                Err(StoreError::VersionMismatch { .. }) => store.create(&key, self.record(clock)).await,
                other => other,
            },
            None => store.create(&key, self.record(clock)).await,
        }?;
        *self.version.lock().expect("membership lock") = Some(written);
        Ok(())
    }

    /// Removes the record (best effort: a stale record is recognised by its old heartbeat).
    pub async fn leave(&self, store: &dyn Store) {
        let version = self.version.lock().expect("membership lock").take();
        if let Some(version) = version {
            let key = records::member_key(&self.copy_id);
            if let Err(error) = store.delete(&key, &version).await {
                tracing::warn!(%error, "could not remove this copy's membership record");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use hyperhive_object_store::file::FileStore;

    #[tokio::test]
    async fn join_beat_and_leave() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let member = Membership::new("cp1".into(), Some("http://cp1:8791".into()));
        member.heartbeat(&store, &SystemClock).await.unwrap();
        member.heartbeat(&store, &SystemClock).await.unwrap();
        let keys = store.list(records::MEMBERS).await.unwrap();
        assert_eq!(keys, [records::member_key(member.copy_id())]);
        let record: MemberRecord =
            records::decode(&keys[0], &store.get(&keys[0]).await.unwrap().unwrap().bytes).unwrap();
        assert_eq!(record.peer_url.as_deref(), Some("http://cp1:8791"));
        member.leave(&store).await;
        assert!(store.list(records::MEMBERS).await.unwrap().is_empty());
    }
}
