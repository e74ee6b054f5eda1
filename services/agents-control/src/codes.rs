//! Making codes and sweeping them. Making a code is one conditional create of its
//! pending record; only the hash of the secret is stored, the secret itself is printed once.

use crate::clock::Clock;
use crate::key::ControlKey;
use crate::records::{self, CodeRecord, SCHEMA};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::code::{Code, SECRET_LEN};
use hyperhive_object_store::{Store, StoreError};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;

/// The default life of a code.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10 * 60);

/// What a code carries about the control plane it belongs to.
#[derive(Debug, Clone)]
pub struct Issuer {
    pub key: ControlKey,
    pub control_url: String,
    pub pin: Option<String>,
}

/// A code to make.
#[derive(Debug, Clone)]
pub struct CodeRequest {
    pub kind: DeviceKind,
    pub name: Option<String>,
    /// A client's role (none for a host).
    pub role: Option<hyperhive_control_proto::role::Role>,
    pub ttl: Duration,
    pub made_by: String,
}

/// Writes the pending record and returns the code (print its token once; it is not kept).
pub async fn make_code(
    store: &dyn Store,
    clock: &dyn Clock,
    issuer: &Issuer,
    request: &CodeRequest,
) -> Result<Code, StoreError> {
    let secret: [u8; SECRET_LEN] = rand::random();
    let hash = records::code_hash(&secret);
    let now = clock.now();
    let record = CodeRecord {
        schema: SCHEMA,
        hash: hash.clone(),
        kind: request.kind,
        name: request.name.clone(),
        role: request.role,
        created_at: records::timestamp(now),
        expires_at: records::timestamp(now + request.ttl),
        made_by: request.made_by.clone(),
        write_id: records::write_id(),
    };
    store.create(&records::code_key(&hash), records::encode(&record)).await?;
    let role = request.role.map_or("-", |r| r.as_str());
    tracing::info!(kind = %request.kind, role, code = %&hash[..12], expires_at = %record.expires_at, "made a code");
    Ok(Code {
        control_url: issuer.control_url.clone(),
        control_public_key: issuer.key.public_key(),
        pin: issuer.pin.clone(),
        kind: request.kind,
        secret,
    })
}

/// What one sweep did and saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// Expired or redeemed code records removed.
    pub removed: usize,
    /// Codes left waiting to be redeemed: the codes made (by any process) and not yet used or
    /// expired, which is what a copy can know of "codes made" (`agents-control code` runs in its
    /// own process and writes to the store directly).
    pub pending: usize,
}

/// Why a client's code was not made.
#[derive(Debug, thiserror::Error)]
pub enum NotMade {
    #[error(
        "this client already has {0} codes waiting to be redeemed, the most a client may hold: \
         pair a device with one, or let one expire, then make another"
    )]
    TooMany(usize),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What a code record says that sweeping and counting need; it never changes (a code record is
/// created, then deleted, never rewritten), so each is read once.
#[derive(Debug, Clone)]
struct Pending {
    version: String,
    /// `None`: the record cannot be read; it is left in place and not read again.
    code: Option<(String, OffsetDateTime, String)>,
}

/// The pending codes this copy knows of. Sweeping and counting a client's codes LIST the codes
/// and GET only the records not seen before: with thousands of codes pending, a sweep costs its
/// LIST requests, its deletes, and nothing per waiting code. Whether a code was redeemed is
/// judged from the registry (its device record), not by a GET per code.
#[derive(Debug, Default)]
pub struct CodeIndex {
    held: tokio::sync::Mutex<HashMap<String, Pending>>,
}

impl CodeIndex {
    /// Brings `held` up to the store's listing.
    async fn refresh(held: &mut HashMap<String, Pending>, store: &dyn Store) -> Result<(), StoreError> {
        let listed: HashSet<String> = store.list(records::CODES).await?.into_iter().collect();
        held.retain(|key, _| listed.contains(key));
        for key in listed {
            if held.contains_key(&key) {
                continue;
            }
            let Some(object) = store.get(&key).await? else { continue };
            let code = match records::decode::<CodeRecord>(&key, &object.bytes).and_then(|record| {
                let expires = records::parse_timestamp(&key, &record.expires_at)?;
                Ok((record.hash, expires, record.made_by))
            }) {
                Ok(code) => Some(code),
                Err(error) => {
                    tracing::warn!(%key, %error, "left an unreadable code record in place");
                    None
                }
            };
            held.insert(key, Pending { version: object.version, code });
        }
        Ok(())
    }

    /// Removes code records that expired, or that were redeemed (`paired` says whether a device
    /// id is in the registry, tombstones included). Any copy may run this at any time: every
    /// removal is a delete-if-version, so a sweep never removes a record someone changed.
    pub async fn sweep(
        &self,
        store: &dyn Store,
        clock: &dyn Clock,
        paired: impl Fn(&str) -> bool,
    ) -> Result<Sweep, StoreError> {
        let now = clock.now();
        let (mut done, mut pending) = (Vec::new(), 0);
        {
            let mut held = self.held.lock().await;
            Self::refresh(&mut held, store).await?;
            for (key, entry) in held.iter() {
                match &entry.code {
                    Some((hash, expires, _)) if *expires <= now || paired(&records::device_id_for(hash)) => {
                        done.push((key.clone(), entry.version.clone()));
                    }
                    Some(_) => pending += 1,
                    None => {}
                }
            }
        }
        // The deletes run without the index held, so making codes never waits for them.
        let mut removed = 0;
        for (key, version) in &done {
            match store.delete(key, version).await {
                Ok(()) => removed += 1,
                Err(StoreError::VersionMismatch { .. }) => {}
                Err(other) => return Err(other),
            }
            self.held.lock().await.remove(key);
        }
        if removed > 0 {
            tracing::info!(removed, "swept expired and used codes");
        }
        Ok(Sweep { removed, pending })
    }

    /// Makes a code unless `request.made_by` already has `max` codes waiting (made through any
    /// copy; two copies making codes for one client at the same instant may each let one more
    /// through).
    pub async fn make_bounded(
        &self,
        store: &dyn Store,
        clock: &dyn Clock,
        issuer: &Issuer,
        request: &CodeRequest,
        max: usize,
        paired: impl Fn(&str) -> bool,
    ) -> Result<Code, NotMade> {
        let mut held = self.held.lock().await;
        Self::refresh(&mut held, store).await?;
        let now = clock.now();
        let waiting = held
            .values()
            .filter_map(|entry| entry.code.as_ref())
            .filter(|(hash, expires, by)| {
                *by == request.made_by && *expires > now && !paired(&records::device_id_for(hash))
            })
            .count();
        if waiting >= max {
            return Err(NotMade::TooMany(max));
        }
        Ok(make_code(store, clock, issuer, request).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use hyperhive_object_store::file::FileStore;
    use time::macros::datetime;

    fn issuer() -> Issuer {
        Issuer { key: ControlKey::from_seed([1; 32]), control_url: "https://agents.example.com".into(), pin: None }
    }

    fn request(ttl: Duration) -> CodeRequest {
        CodeRequest { kind: DeviceKind::Client, name: None, role: None, ttl, made_by: "test".into() }
    }

    #[tokio::test]
    async fn a_code_stores_only_the_hash_and_expires_after_its_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let clock = FakeClock::at(datetime!(2026-11-30 03:00 UTC));
        let code = make_code(&store, &clock, &issuer(), &request(DEFAULT_TTL)).await.unwrap();
        let keys = store.list("").await.unwrap();
        assert_eq!(keys, [records::code_key(&records::code_hash(&code.secret))]);
        let stored = store.get(&keys[0]).await.unwrap().unwrap().bytes;
        let secret_text = hyperhive_control_proto::encoding::encode(&code.secret);
        assert!(!String::from_utf8_lossy(&stored).contains(&secret_text));
        let record: CodeRecord = records::decode(&keys[0], &stored).unwrap();
        assert_eq!(record.expires_at, "2026-11-30T03:10:00Z");

        let index = CodeIndex::default();
        clock.advance(Duration::from_secs(599));
        assert_eq!(index.sweep(&store, &clock, |_| false).await.unwrap(), Sweep { removed: 0, pending: 1 });
        clock.advance(Duration::from_secs(1));
        assert_eq!(index.sweep(&store, &clock, |_| false).await.unwrap(), Sweep { removed: 1, pending: 0 });
        assert!(store.list("").await.unwrap().is_empty());
    }

    /// A sweep reads each code record once, then costs its LIST alone; a redeemed code is
    /// judged from the registry, with no GET.
    #[tokio::test]
    async fn sweeps_read_each_code_once_and_judge_use_from_the_registry() {
        use crate::metrics::{MeteredStore, Metrics};
        let dir = tempfile::tempdir().unwrap();
        let metrics = std::sync::Arc::new(Metrics::default());
        let store = MeteredStore::wrap(std::sync::Arc::new(FileStore::open(dir.path()).unwrap()), metrics.clone());
        let clock = FakeClock::at(datetime!(2026-11-30 03:00 UTC));
        let mut hashes = Vec::new();
        for _ in 0..50 {
            let code = make_code(store.as_ref(), &clock, &issuer(), &request(DEFAULT_TTL)).await.unwrap();
            hashes.push(records::code_hash(&code.secret));
        }
        let index = CodeIndex::default();
        let gets = || metrics.store_operations("get");
        assert_eq!(index.sweep(store.as_ref(), &clock, |_| false).await.unwrap().pending, 50);
        assert_eq!(gets(), 50);
        assert_eq!(index.sweep(store.as_ref(), &clock, |_| false).await.unwrap().pending, 50);
        assert_eq!(gets(), 50, "a second sweep read code records again");
        let redeemed = records::device_id_for(&hashes[7]);
        let swept = index.sweep(store.as_ref(), &clock, |id| id == redeemed).await.unwrap();
        assert_eq!((swept, gets()), (Sweep { removed: 1, pending: 49 }, 50));
    }

    #[tokio::test]
    async fn a_client_may_hold_only_so_many_waiting_codes() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let clock = FakeClock::at(datetime!(2026-11-30 03:00 UTC));
        let index = CodeIndex::default();
        let mine = CodeRequest { made_by: "dclient".into(), ..request(DEFAULT_TTL) };
        for _ in 0..3 {
            index.make_bounded(&store, &clock, &issuer(), &mine, 3, |_| false).await.unwrap();
        }
        let refused = index.make_bounded(&store, &clock, &issuer(), &mine, 3, |_| false).await.unwrap_err();
        assert!(refused.to_string().contains("already has 3 codes waiting"), "{refused}");
        // Others are not held to this client's count; expired codes no longer count.
        index.make_bounded(&store, &clock, &issuer(), &request(DEFAULT_TTL), 3, |_| false).await.unwrap();
        clock.advance(DEFAULT_TTL);
        index.make_bounded(&store, &clock, &issuer(), &mine, 3, |_| false).await.unwrap();
    }
}
