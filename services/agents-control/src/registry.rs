//! The device registry: what the store holds about paired devices, listing and forgetting.
//!
//! [`Registry`] is the in-memory copy every copy serves from (refreshed by LIST every few
//! seconds), so known devices keep working while the store is unreachable; [`crate::link`]
//! reads it to authenticate devices, and [`crate::sessions`] to cut forgotten ones.

use crate::clock::Clock;
use crate::records::{self, DeviceRecord, RecordError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::{Store, StoreError};
use std::collections::{BTreeMap, HashMap};
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

/// What a copy holds about a device id ([`Registry::known`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// A paired, not forgotten device.
    Active(DeviceRecord),
    /// Forgotten, or not a device id at all.
    Refused,
    /// Not read yet: the store may hold it (paired since the last refresh).
    Unseen,
}

/// The in-memory registry a serving copy answers from.
///
/// Each record is held with the store version it was read at, so a refresh GETs only the
/// records whose listed version differs: an idle copy's refresh costs its LIST requests (one per
/// 1,000 devices) and nothing per device.
#[derive(Debug, Default)]
pub struct Registry {
    devices: RwLock<Held>,
}

#[derive(Debug, Default)]
struct Held {
    by_id: BTreeMap<String, Entry>,
    /// Counts reads of the store into the registry: a LIST or GET numbered after a listing
    /// started is at least as fresh as that listing.
    reads: u64,
    /// Records this build could not read at the last refresh, key -> version: skipped (their
    /// device is refused here) and not read again until they change.
    unreadable: HashMap<String, String>,
}

#[derive(Debug)]
struct Entry {
    key: String,
    version: String,
    record: DeviceRecord,
    /// The `reads` number when this entry was read.
    read: u64,
}

impl Held {
    fn next_read(&mut self) -> u64 {
        self.reads += 1;
        self.reads
    }
}

impl Registry {
    /// Brings the registry up to the store: one LIST, then a GET of each record that is new or
    /// whose version changed; records no longer listed are dropped. A record this build cannot
    /// read (garbage, or a newer schema written during a rolling upgrade) is skipped and
    /// reported, never a reason to stop: the other records, forgets above all, still apply, and
    /// the unreadable record's device is refused here. On a store failure the previous contents
    /// stay. Returns how many records (tombstones included) it holds.
    pub async fn refresh(&self, store: &dyn Store) -> Result<usize, RegistryError> {
        let (listing, known) = {
            let mut held = self.devices.write().expect("registry lock");
            let mut known: HashMap<String, String> =
                held.by_id.values().map(|entry| (entry.key.clone(), entry.version.clone())).collect();
            known.extend(held.unreadable.iter().map(|(key, version)| (key.clone(), version.clone())));
            (held.next_read(), known)
        };
        let listed = store.list_versions(records::DEVICES).await?;
        let (mut fetched, mut unreadable) = (Vec::new(), HashMap::new());
        for item in &listed {
            // A store that lists no version says nothing about change: read the record.
            if !item.version.is_empty() && known.get(&item.key) == Some(&item.version) {
                continue;
            }
            let Some(object) = store.get(&item.key).await? else {
                continue; // removed between LIST and GET
            };
            match records::decode::<DeviceRecord>(&item.key, &object.bytes) {
                Ok(record) => fetched.push((item.key.clone(), object.version, record)),
                Err(error) => {
                    tracing::warn!(%error, "skipped a device record this build cannot read; its device is refused by this copy");
                    unreadable.insert(item.key.clone(), object.version);
                }
            }
        }

        let versions: HashMap<&str, &str> =
            listed.iter().map(|item| (item.key.as_str(), item.version.as_str())).collect();
        let mut held = self.devices.write().expect("registry lock");
        // Keep what the listing shows unchanged, and anything read after the listing began (a
        // device that paired meanwhile and was let in by `active_or_fetch` must not be dropped
        // and have its new session closed as forgotten).
        held.by_id
            .retain(|_, entry| entry.read > listing || versions.get(entry.key.as_str()) == Some(&&*entry.version));
        held.unreadable.retain(|key, version| versions.get(key.as_str()) == Some(&version.as_str()));
        held.unreadable.extend(unreadable);
        for (key, version, record) in fetched {
            let read = held.next_read();
            held.unreadable.remove(&key);
            held.by_id.insert(record.id.clone(), Entry { key, version, record, read });
        }
        Ok(held.by_id.len())
    }

    /// How many device records the last refresh could not read (see [`Registry::refresh`]).
    pub fn unreadable(&self) -> usize {
        self.devices.read().expect("registry lock").unreadable.len()
    }

    /// The kind of a paired, not forgotten device, without copying its record (asked for
    /// every relayed frame and every session at each refresh).
    pub fn active_kind(&self, id: &str) -> Option<DeviceKind> {
        let held = self.devices.read().expect("registry lock");
        held.by_id.get(id).map(|entry| &entry.record).filter(|d| d.forgotten_at.is_none()).map(|d| d.kind)
    }

    /// Whether this copy holds a record of the device, forgotten or not.
    pub fn holds(&self, id: &str) -> bool {
        self.devices.read().expect("registry lock").by_id.contains_key(id)
    }

    /// A paired, not forgotten device.
    pub fn active(&self, id: &str) -> Option<DeviceRecord> {
        let held = self.devices.read().expect("registry lock");
        held.by_id.get(id).map(|entry| &entry.record).filter(|d| d.forgotten_at.is_none()).cloned()
    }

    /// What this copy holds about a device id, without asking the store.
    pub fn known(&self, id: &str) -> Known {
        // The id may come from a hello: only a well-formed one can ever be a paired device.
        if !records::is_device_id(id) {
            return Known::Refused;
        }
        let held = self.devices.read().expect("registry lock");
        match held.by_id.get(id) {
            Some(entry) if entry.record.forgotten_at.is_none() => Known::Active(entry.record.clone()),
            // Forgetting is for good: a held tombstone needs no second look.
            Some(_) => Known::Refused,
            None => Known::Unseen,
        }
    }

    /// A paired, not forgotten device, read from the store when this copy has not seen it yet.
    ///
    /// A device that just paired (through any copy) connects before the next refresh reaches
    /// this copy; one GET of its record lets it in at once. `Ok(None)`: not a paired device.
    ///
    /// # Errors
    /// The store could not be read, so this copy cannot tell (the device may well be paired:
    /// say "try again", not "unknown").
    pub async fn active_or_fetch(&self, store: &dyn Store, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        match self.known(id) {
            Known::Active(record) => Ok(Some(record)),
            Known::Refused => Ok(None),
            Known::Unseen => self.fetch(store, id).await,
        }
    }

    /// One GET of a device this copy has not seen (see [`Registry::known`]), kept once read.
    pub async fn fetch(&self, store: &dyn Store, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        if !records::is_device_id(id) {
            return Ok(None);
        }
        let key = records::device_key(id);
        let Some(object) = store.get(&key).await? else { return Ok(None) };
        let Some(record) = records::decode::<DeviceRecord>(&key, &object.bytes).ok().filter(|r| r.id == id) else {
            return Ok(None);
        };
        let mut held = self.devices.write().expect("registry lock");
        let read = held.next_read();
        held.by_id.insert(id.to_owned(), Entry { key, version: object.version, record: record.clone(), read });
        Ok(record.forgotten_at.is_none().then_some(record))
    }

    /// Holds a record this copy just wrote, or a peer did (`paired`), as if it had been read
    /// from the store at `version`: the device is known here at once, not at the next refresh.
    /// A forget held here is never undone. Returns whether the device was not known as paired
    /// before.
    pub fn hold(&self, record: DeviceRecord, version: String) -> bool {
        let mut held = self.devices.write().expect("registry lock");
        if held.by_id.get(&record.id).is_some_and(|entry| entry.record.forgotten_at.is_some()) {
            return false;
        }
        let read = held.next_read();
        let key = records::device_key(&record.id);
        let entry = Entry { key, version, record: record.clone(), read };
        held.by_id.insert(record.id, entry).is_none_or(|before| before.record.forgotten_at.is_some())
    }

    /// Records a forget this copy learned of before its next refresh (from a request it served,
    /// or a peer's `revoked`), so the device is refused at once.
    pub fn mark_forgotten(&self, id: &str, at: &str) {
        // The entry keeps the version it was read at: the forget's write has a new one, which
        // the next refresh reads, so the store's tombstone replaces this mark.
        if let Some(entry) = self.devices.write().expect("registry lock").by_id.get_mut(id)
            && entry.record.forgotten_at.is_none()
        {
            entry.record.forgotten_at = Some(at.to_owned());
        }
    }

    /// The paired, not forgotten devices of one kind.
    pub fn active_of_kind(&self, kind: DeviceKind) -> Vec<DeviceRecord> {
        let held = self.devices.read().expect("registry lock");
        held.by_id
            .values()
            .map(|entry| &entry.record)
            .filter(|d| d.kind == kind && d.forgotten_at.is_none())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::metrics::{MeteredStore, Metrics};
    use futures::future::BoxFuture;
    use hyperhive_object_store::file::FileStore;
    use hyperhive_object_store::s3::S3Store;
    use hyperhive_object_store::{Listed, Object, StoreResult};
    use std::sync::Arc;

    fn device(n: usize) -> DeviceRecord {
        let code = format!("{n:064x}");
        DeviceRecord {
            schema: records::SCHEMA,
            id: records::device_id_for(&code),
            kind: if n.is_multiple_of(2) { DeviceKind::Client } else { DeviceKind::Host },
            name: format!("device {n}"),
            public_key: "AAAA".into(),
            paired_at: "2026-01-01T00:00:00Z".into(),
            code,
            forgotten_at: None,
            role: None,
            write_id: records::write_id(),
        }
    }

    async fn pair(store: &dyn Store, n: usize) -> DeviceRecord {
        let record = device(n);
        store.create(&records::device_key(&record.id), records::encode(&record)).await.unwrap();
        record
    }

    /// Store requests since the last call, as (LISTs, GETs).
    struct Requests {
        metrics: Arc<Metrics>,
        seen: (u64, u64),
    }

    impl Requests {
        fn since_last(&mut self) -> (u64, u64) {
            let now = (self.metrics.store_operations("list"), self.metrics.store_operations("get"));
            let delta = (now.0 - self.seen.0, now.1 - self.seen.1);
            self.seen = now;
            delta
        }
    }

    /// What a refresh costs, and that it sees every kind of change: run on each backend.
    async fn refresh_reads_only_what_changed(backend: Arc<dyn Store>) {
        const N: usize = 30;
        let metrics = Arc::new(Metrics::default());
        let store = MeteredStore::wrap(backend.clone(), metrics.clone());
        let mut requests = Requests { metrics, seen: (0, 0) };
        let mut devices = Vec::new();
        for n in 0..N {
            devices.push(pair(backend.as_ref(), n).await);
        }
        let registry = Registry::default();

        assert_eq!(registry.refresh(store.as_ref()).await.unwrap(), N);
        assert_eq!(requests.since_last(), (1, N as u64), "the first refresh reads every record");
        for _ in 0..3 {
            assert_eq!(registry.refresh(store.as_ref()).await.unwrap(), N);
            assert_eq!(requests.since_last(), (1, 0), "nothing changed: the LIST alone");
        }

        let forgotten = &devices[3].id;
        forget(backend.as_ref(), &SystemClock, forgotten).await.unwrap();
        assert!(registry.active(forgotten).is_some());
        registry.refresh(store.as_ref()).await.unwrap();
        assert_eq!(requests.since_last(), (1, 1), "the tombstone alone is read");
        assert!(registry.active(forgotten).is_none(), "a forget is picked up");
        assert_eq!(registry.active_of_kind(DeviceKind::Host).len(), N / 2 - 1);

        let removed = &devices[4].id;
        let key = records::device_key(removed);
        let version = backend.get(&key).await.unwrap().unwrap().version;
        backend.delete(&key, &version).await.unwrap();
        let added = pair(backend.as_ref(), N).await;
        assert_eq!(registry.refresh(store.as_ref()).await.unwrap(), N);
        assert_eq!(requests.since_last(), (1, 1), "only the new record is read");
        assert!(registry.active(removed).is_none(), "a removed record is dropped");
        assert_eq!(registry.active(&added.id), Some(added));

        // A record this build cannot read (a newer schema, or garbage) is skipped, read once,
        // and the change beside it (a forget) is still enforced.
        let newer = device(N + 1);
        let mut future = serde_json::to_value(&newer).unwrap();
        future["schema"] = 99.into();
        backend.create(&records::device_key(&newer.id), serde_json::to_vec(&future).unwrap()).await.unwrap();
        backend.create(&records::device_key(&device(N + 2).id), b"not json".to_vec()).await.unwrap();
        let also_forgotten = &devices[5].id;
        forget(backend.as_ref(), &SystemClock, also_forgotten).await.unwrap();
        assert!(registry.active(also_forgotten).is_some());
        assert_eq!(registry.refresh(store.as_ref()).await.unwrap(), N);
        assert_eq!(requests.since_last(), (1, 3), "the two unreadable records and the tombstone");
        assert!(registry.active(also_forgotten).is_none(), "the forget beside unreadable records was not enforced");
        assert_eq!(registry.unreadable(), 2);
        assert!(registry.active(&newer.id).is_none(), "a device whose record cannot be read is refused");
        assert!(registry.active(&devices[0].id).is_some() && registry.active(forgotten).is_none());
        registry.refresh(store.as_ref()).await.unwrap();
        assert_eq!(requests.since_last(), (1, 0), "an unchanged unreadable record is not read again");
        assert_eq!(
            registry.active_of_kind(DeviceKind::Client).len() + registry.active_of_kind(DeviceKind::Host).len(),
            N - 2
        );
    }

    #[tokio::test]
    async fn a_refresh_on_the_file_store_reads_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        refresh_reads_only_what_changed(Arc::new(FileStore::open(dir.path()).unwrap())).await;
    }

    #[tokio::test]
    async fn a_refresh_on_s3_reads_only_what_changed() {
        let s3 = hyperhive_testkit::S3::start(hyperhive_testkit::S3Server::Moto).await.unwrap();
        refresh_reads_only_what_changed(Arc::new(S3Store::from_client(&s3.client(), s3.bucket(), "registry"))).await;
    }

    /// Random runs of pairing, forgetting, rewriting and removing records, refreshed now and then:
    /// after each refresh the registry holds exactly what the store does, and the refresh read
    /// exactly the records that are new or changed since the one before.
    #[tokio::test]
    async fn random_changes_are_read_once_each() {
        use rand::{Rng, SeedableRng};
        for seed in 0..12 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let dir = tempfile::tempdir().unwrap();
            let backend: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
            let metrics = Arc::new(Metrics::default());
            let store = MeteredStore::wrap(backend.clone(), metrics.clone());
            let mut requests = Requests { metrics, seen: (0, 0) };
            let registry = Registry::default();
            let (mut paired, mut last_listing) = (0, Vec::new());
            for step in 0..40 {
                let keys = backend.list(records::DEVICES).await.unwrap();
                let some_key = (!keys.is_empty()).then(|| keys[rng.random_range(0..keys.len())].clone());
                match (rng.random_range(0..5), some_key) {
                    (0, _) | (_, None) => {
                        pair(backend.as_ref(), paired).await;
                        paired += 1;
                    }
                    (1, Some(key)) => {
                        let object = backend.get(&key).await.unwrap().unwrap();
                        let mut record: DeviceRecord = records::decode(&key, &object.bytes).unwrap();
                        record.forgotten_at.get_or_insert_with(|| "2026-01-02T00:00:00Z".into());
                        record.write_id = records::write_id();
                        backend.replace(&key, records::encode(&record), &object.version).await.unwrap();
                    }
                    (2, Some(key)) => {
                        let version = backend.get(&key).await.unwrap().unwrap().version;
                        backend.delete(&key, &version).await.unwrap();
                    }
                    _ => {} // nothing changes
                }
                if rng.random_bool(0.5) {
                    continue;
                }
                let listing = backend.list_versions(records::DEVICES).await.unwrap();
                let changed = listing.iter().filter(|item| !last_listing.contains(*item)).count() as u64;
                let held = registry.refresh(store.as_ref()).await.unwrap();
                assert_eq!(requests.since_last(), (1, changed), "seed {seed} step {step}");
                let all = load_all(backend.as_ref()).await.unwrap();
                assert_eq!(held, all.len(), "seed {seed} step {step}");
                let mut active: Vec<DeviceRecord> = registry.active_of_kind(DeviceKind::Client);
                active.extend(registry.active_of_kind(DeviceKind::Host));
                active.sort_by(|a, b| a.id.cmp(&b.id));
                let expected: Vec<DeviceRecord> = all.into_values().filter(|d| d.forgotten_at.is_none()).collect();
                assert_eq!(active, expected, "seed {seed} step {step}");
                last_listing = listing;
            }
        }
    }

    /// A file store whose listing misbehaves in one of two ways the registry must survive.
    #[derive(Debug)]
    struct OddListing {
        inner: FileStore,
        odd: Odd,
    }

    #[derive(Debug)]
    enum Odd {
        /// A device pairs (through another copy) and connects to this one while this copy's
        /// refresh is between its LIST and applying it.
        PairsDuringList { registry: Arc<Registry>, device: DeviceRecord },
        /// Neither reads nor listings carry versions (as from an S3 look-alike without ETags).
        NoVersions,
    }

    impl Store for OddListing {
        fn describe(&self) -> String {
            self.inner.describe()
        }
        fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
            Box::pin(async move {
                let mut found = self.inner.get(key).await?;
                if let (Some(object), Odd::NoVersions) = (&mut found, &self.odd) {
                    object.version.clear();
                }
                Ok(found)
            })
        }
        fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
            self.inner.create(key, bytes)
        }
        fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
            self.inner.replace(key, bytes, version)
        }
        fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
            self.inner.delete(key, version)
        }
        fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
            Box::pin(async move {
                let mut listed = self.inner.list_versions(prefix).await?;
                match &self.odd {
                    Odd::PairsDuringList { registry, device } => {
                        self.inner.create(&records::device_key(&device.id), records::encode(device)).await?;
                        assert!(registry.active_or_fetch(&self.inner, &device.id).await.unwrap().is_some());
                    }
                    Odd::NoVersions => listed.iter_mut().for_each(|item| item.version.clear()),
                }
                Ok(listed)
            })
        }
    }

    #[tokio::test]
    async fn a_device_let_in_during_a_refresh_stays_in() {
        let dir = tempfile::tempdir().unwrap();
        let inner = FileStore::open(dir.path()).unwrap();
        let old = pair(&inner, 0).await;
        let registry = Arc::new(Registry::default());
        let device = device(1);
        let odd = Odd::PairsDuringList { registry: registry.clone(), device: device.clone() };
        assert_eq!(registry.refresh(&OddListing { inner, odd }).await.unwrap(), 2);
        assert!(registry.active(&old.id).is_some());
        assert!(registry.active(&device.id).is_some(), "the device paired during the refresh was dropped");
    }

    #[tokio::test]
    async fn a_listing_without_versions_reads_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let inner = FileStore::open(dir.path()).unwrap();
        let record = pair(&inner, 0).await;
        let store = OddListing { inner, odd: Odd::NoVersions };
        let registry = Registry::default();
        registry.refresh(&store).await.unwrap();
        forget(&store.inner, &SystemClock, &record.id).await.unwrap();
        registry.refresh(&store).await.unwrap();
        assert!(registry.active(&record.id).is_none(), "a change missed for want of a version");
    }

    /// A record held as written (a pairing here or a peer's `paired`) is known at once, is not
    /// read again by the next refresh (its version is the store's), and never revives a forget.
    #[tokio::test]
    async fn a_held_record_is_known_at_once_costs_no_read_and_revives_no_forget() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::default());
        let store = MeteredStore::wrap(Arc::new(FileStore::open(dir.path()).unwrap()), metrics.clone());
        let registry = Registry::default();
        registry.refresh(store.as_ref()).await.unwrap();
        let record = device(1);
        let version = store.create(&records::device_key(&record.id), records::encode(&record)).await.unwrap();
        assert!(registry.hold(record.clone(), version.clone()), "a new device");
        assert!(!registry.hold(record.clone(), version.clone()), "known already");
        assert_eq!(registry.active(&record.id).as_ref(), Some(&record));
        let mut requests = Requests { metrics, seen: (0, 0) };
        requests.since_last();
        registry.refresh(store.as_ref()).await.unwrap();
        assert_eq!(requests.since_last(), (1, 0), "the held record is not read again");
        registry.mark_forgotten(&record.id, "2026-01-01T00:00:00Z");
        assert!(!registry.hold(record.clone(), version));
        assert!(registry.active(&record.id).is_none(), "a forget held here stays");
    }

    #[tokio::test]
    async fn a_forget_marked_before_the_refresh_stays_until_the_tombstone_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let record = pair(&store, 0).await;
        let registry = Registry::default();
        registry.refresh(&store).await.unwrap();
        registry.mark_forgotten(&record.id, "2026-01-01T00:00:00Z");
        registry.refresh(&store).await.unwrap();
        assert!(registry.active(&record.id).is_none(), "an unchanged listing must not undo the mark");
        forget(&store, &SystemClock, &record.id).await.unwrap();
        registry.refresh(&store).await.unwrap();
        assert!(registry.active(&record.id).is_none());
    }
}
