//! Making codes and sweeping them. Making a code is one conditional create of its
//! pending record; only the hash of the secret is stored, the secret itself is printed once.

use crate::clock::Clock;
use crate::key::ControlKey;
use crate::records::{self, CodeRecord, SCHEMA};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::code::{Code, SECRET_LEN};
use hyperhive_object_store::{Store, StoreError};
use std::time::Duration;

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
        created_at: records::timestamp(now),
        expires_at: records::timestamp(now + request.ttl),
        made_by: request.made_by.clone(),
        write_id: records::write_id(),
    };
    store.create(&records::code_key(&hash), records::encode(&record)).await?;
    tracing::info!(kind = %request.kind, code = %&hash[..12], expires_at = %record.expires_at, "made a code");
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

/// Removes code records that expired, or that were redeemed (their device record exists).
/// Any copy may run this at any time: every removal is a delete-if-version, so a sweep never
/// removes a record someone changed since it was read.
pub async fn sweep(store: &dyn Store, clock: &dyn Clock) -> Result<Sweep, StoreError> {
    let now = clock.now();
    let (mut removed, mut pending) = (0, 0);
    for key in store.list(records::CODES).await? {
        let Some(object) = store.get(&key).await? else {
            continue;
        };
        let record = match records::decode::<CodeRecord>(&key, &object.bytes) {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(%key, %error, "left an unreadable code record in place");
                continue;
            }
        };
        let expired = records::parse_timestamp(&key, &record.expires_at).is_ok_and(|at| at <= now);
        let used = !expired && store.get(&records::device_key(&records::device_id_for(&record.hash))).await?.is_some();
        if !(expired || used) {
            pending += 1;
            continue;
        }
        match store.delete(&key, &object.version).await {
            Ok(()) => removed += 1,
            Err(StoreError::VersionMismatch { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    if removed > 0 {
        tracing::info!(removed, "swept expired and used codes");
    }
    Ok(Sweep { removed, pending })
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
        CodeRequest { kind: DeviceKind::Client, name: None, ttl, made_by: "test".into() }
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

        clock.advance(Duration::from_secs(599));
        assert_eq!(sweep(&store, &clock).await.unwrap(), Sweep { removed: 0, pending: 1 });
        clock.advance(Duration::from_secs(1));
        assert_eq!(sweep(&store, &clock).await.unwrap(), Sweep { removed: 1, pending: 0 });
        assert!(store.list("").await.unwrap().is_empty());
    }
}
