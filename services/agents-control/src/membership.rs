//! This copy's membership record (`members/<copy id>.json`): written at start,
//! refreshed as a heartbeat, removed on a clean shutdown. The other copies list these records
//! to find this one; a copy not linked to them whose record stopped changing died
//! ([`crate::peers::MemberCache`]).

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
        let copy_id = copy_id_at(time::OffsetDateTime::now_utc(), rand::random());
        Membership { copy_id, name, peer_url, version: Mutex::new(None) }
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
    /// time, or someone removed it). When the version we hold is not the stored one (a write
    /// that landed but was reported unavailable), the record is read again and replaced at the
    /// version it is at, so one lost answer costs one beat, not every later one.
    pub async fn heartbeat(&self, store: &dyn Store, clock: &dyn Clock) -> Result<(), StoreError> {
        let key = records::member_key(&self.copy_id);
        let last = self.version.lock().expect("membership lock").clone();
        let written = match last {
            Some(version) => store.replace(&key, self.record(clock), &version).await,
            None => store.create(&key, self.record(clock)).await,
        };
        let written = match written {
            Err(StoreError::VersionMismatch { .. } | StoreError::AlreadyExists { .. }) => {
                self.write_over_stored(store, &key, clock).await
            }
            other => other,
        }?;
        *self.version.lock().expect("membership lock") = Some(written);
        Ok(())
    }

    /// Writes the record over whatever version of it is stored (it is ours: the key holds our
    /// random copy id), or creates it when it is gone.
    async fn write_over_stored(&self, store: &dyn Store, key: &str, clock: &dyn Clock) -> Result<String, StoreError> {
        match store.get(key).await? {
            Some(stored) => store.replace(key, self.record(clock), &stored.version).await,
            None => store.create(key, self.record(clock)).await,
        }
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

/// A copy id for a copy started at `started`: 12 hex digits that count down with the start time
/// in milliseconds, then 8 random ones. The younger of two copies has the smaller id, so it is the
/// one that dials ([`crate::peers::should_dial`]): a starting copy links to every running copy
/// itself, and running copies need not list `members/` often to find it. (Clocks minutes apart
/// can invert the order; the older copy then finds the younger at its next listing,
/// [`crate::peers::MEMBERS_LISTED_EVERY`].)
fn copy_id_at(started: time::OffsetDateTime, random: u32) -> String {
    const MILLIS: i128 = 0xffff_ffff_ffff;
    let millis = (started.unix_timestamp_nanos() / 1_000_000).clamp(0, MILLIS);
    format!("{:012x}{random:08x}", MILLIS - millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use futures::future::BoxFuture;
    use hyperhive_object_store::file::FileStore;
    use hyperhive_object_store::{Listed, Object, StoreResult};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_younger_copy_has_the_smaller_id() {
        let at = time::macros::datetime!(2026-12-05 14:00 UTC);
        let older = copy_id_at(at, u32::MAX);
        let younger = copy_id_at(at + time::Duration::milliseconds(1), 0);
        assert!(younger < older, "{younger} {older}");
        assert_eq!(older.len(), 20);
        assert_ne!(copy_id_at(at, 1), copy_id_at(at, 2), "copies started in one millisecond differ");
    }

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

    /// A file store whose next replace lands but is reported unavailable (a lost answer), and
    /// which counts the writes it is asked for.
    #[derive(Debug)]
    struct LostAnswer {
        inner: FileStore,
        lose_next_replace: AtomicBool,
        writes: AtomicUsize,
    }

    impl Store for LostAnswer {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
            self.inner.get(key)
        }
        fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.inner.create(key, bytes)
        }
        fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let written = self.inner.replace(key, bytes, version).await?;
                if self.lose_next_replace.swap(false, Ordering::SeqCst) {
                    return Err(StoreError::Unavailable { detail: "the answer was lost".into() });
                }
                Ok(written)
            })
        }
        fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
            self.inner.delete(key, version)
        }
        fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
            self.inner.list_versions(prefix)
        }
    }

    #[tokio::test]
    async fn a_beat_whose_answer_was_lost_does_not_stall_the_next_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = LostAnswer {
            inner: FileStore::open(dir.path()).unwrap(),
            lose_next_replace: AtomicBool::new(false),
            writes: AtomicUsize::new(0),
        };
        let member = Membership::new("cp1".into(), None);
        member.heartbeat(&store, &SystemClock).await.unwrap();
        store.lose_next_replace.store(true, Ordering::SeqCst);
        let lost = member.heartbeat(&store, &SystemClock).await.unwrap_err();
        assert!(lost.is_unavailable(), "{lost}");
        let key = records::member_key(member.copy_id());
        let landed = store.get(&key).await.unwrap().unwrap();
        // The next beat finds its version stale, reads the record again and writes over it.
        member.heartbeat(&store, &SystemClock).await.unwrap();
        let after = store.get(&key).await.unwrap().unwrap();
        assert_ne!(after.version, landed.version, "the beat was written");
        // And the one after is a single replace again.
        let writes = store.writes.load(Ordering::SeqCst);
        member.heartbeat(&store, &SystemClock).await.unwrap();
        assert_eq!(store.writes.load(Ordering::SeqCst), writes + 1);
    }
}
