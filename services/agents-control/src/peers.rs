//! Finding the other copies and keeping one link to each (`docs/control-plane/link-protocol.md`):
//! every refresh reads the membership records, and for each live copy this one should dial, a
//! task keeps a [`peer_link::dial`] running, redialing with backoff after a failure. Of two copies that both
//! have a peer URL, the one with the smaller id dials, so each pair has one link.

use crate::control::Control;
use crate::peer_link;
use crate::records::{self, MemberRecord};
use hyperhive_control_link::Backoff;
use hyperhive_object_store::StoreError;
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A membership record that has not changed for this long belongs to a copy that died
/// (heartbeats are written every [`crate::serve::HEARTBEAT_EVERY`]).
pub const MEMBER_STALE_AFTER: Duration = Duration::from_secs(30);

/// A membership record that has not changed for this long is removed (a copy killed without
/// leaving; each start of a copy makes a new id, so they would pile up). The delete is
/// conditional on the version read, so a copy that just beat again keeps its record.
pub const MEMBER_REMOVED_AFTER: Duration = Duration::from_secs(600);

/// A link that stayed up this long resets the redial backoff.
const STEADY_LINK: Duration = Duration::from_secs(10);

/// A membership record as this copy last read it.
#[derive(Debug)]
struct Seen {
    /// The version it was listed at.
    version: String,
    record: MemberRecord,
    /// When this copy first saw this write of it, by this copy's clock. Liveness is judged by
    /// this rather than by the record's `heartbeat_at`, which the writer's clock wrote: copies'
    /// clocks may be minutes apart.
    changed_at: OffsetDateTime,
}

impl Seen {
    fn unchanged_for_over(&self, age: Duration, now: OffsetDateTime) -> bool {
        now - self.changed_at > time::Duration::try_from(age).unwrap_or(time::Duration::MAX)
    }
}

/// The membership records as last read, by key: a record whose listed version is unchanged is
/// not read again (heartbeats change each record only every few refreshes, so most refreshes
/// cost the LIST alone), and each remembers when this copy saw it change.
#[derive(Debug, Default)]
pub struct MemberCache {
    read: Mutex<HashMap<String, Seen>>,
}

impl MemberCache {
    /// The live copies in the store, this one excluded.
    pub async fn live_members(&self, control: &Control) -> Result<Vec<MemberRecord>, StoreError> {
        let store = control.store.as_ref();
        let now = control.clock.now();
        let listed = store.list_versions(records::MEMBERS).await?;
        let mut fresh = HashMap::new();
        for item in listed {
            let known = self.read.lock().expect("members lock").remove(&item.key);
            let seen = match known {
                Some(seen) if !item.version.is_empty() && seen.version == item.version => Some(seen),
                known => read_member(store, &item.key).await?.map(|record| {
                    // A store that lists no versions: the write id tells whether it changed.
                    let changed_at = match known {
                        Some(seen) if seen.record.write_id == record.write_id => seen.changed_at,
                        _ => now,
                    };
                    Seen { version: item.version.clone(), record, changed_at }
                }),
            };
            if let Some(seen) = seen {
                fresh.insert(item.key, seen);
            }
        }
        let long_dead: Vec<(String, String)> = fresh
            .iter()
            .filter(|(_, seen)| seen.unchanged_for_over(MEMBER_REMOVED_AFTER, now))
            .map(|(key, seen)| (key.clone(), seen.version.clone()))
            .collect();
        for (key, version) in long_dead {
            match store.delete(&key, &version).await {
                Ok(()) => {
                    tracing::info!(%key, "removed the membership record of a copy gone for over 10 minutes");
                    fresh.remove(&key);
                }
                Err(error) => tracing::debug!(%key, %error, "left a stale membership record (changed or unreachable)"),
            }
        }
        let live = fresh
            .values()
            .filter(|seen| {
                seen.record.copy_id != control.copy_name && !seen.unchanged_for_over(MEMBER_STALE_AFTER, now)
            })
            .map(|seen| seen.record.clone())
            .collect();
        *self.read.lock().expect("members lock") = fresh;
        Ok(live)
    }
}

/// The membership record at `key`, or `None` when it is gone or this build cannot read it.
async fn read_member(store: &dyn hyperhive_object_store::Store, key: &str) -> Result<Option<MemberRecord>, StoreError> {
    Ok(match store.get(key).await? {
        None => None, // removed since the LIST
        Some(object) => match records::decode::<MemberRecord>(key, &object.bytes) {
            Ok(record) => Some(record),
            Err(error) => {
                tracing::warn!(%error, "skipping a membership record this build cannot read");
                None
            }
        },
    })
}

/// Whether this copy dials `theirs` (rather than waiting for it to dial): the smaller id
/// dials, and a copy that cannot be reached (no peer URL of its own) dials everyone.
pub fn should_dial(mine: &str, theirs: &str, reachable: bool) -> bool {
    mine < theirs || !reachable
}

/// The dialing tasks, by peer copy id.
#[derive(Debug, Default)]
pub struct Dialers {
    running: Mutex<HashMap<String, (String, JoinHandle<()>)>>,
    members: MemberCache,
}

impl Dialers {
    /// Starts a dialer for every live copy this one should dial and stops those whose copy is
    /// gone (or moved). Returns how many dialers run.
    pub async fn refresh(&self, control: &Arc<Control>, reachable: bool) -> Result<usize, StoreError> {
        let live = self.members.live_members(control).await?;
        control.metrics.live_members.store(live.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let wanted: HashMap<String, String> = live
            .into_iter()
            .filter(|m| should_dial(&control.copy_name, &m.copy_id, reachable))
            .filter_map(|m| m.peer_url.map(|url| (m.copy_id, url)))
            .collect();
        let mut running = self.running.lock().expect("dialers lock");
        running.retain(|copy, (url, task)| {
            let keep = wanted.get(copy) == Some(url);
            if !keep {
                tracing::info!(peer = %copy, "the peer left the membership; no longer dialing it");
                task.abort();
            }
            keep
        });
        for (copy, url) in wanted {
            running.entry(copy.clone()).or_insert_with(|| {
                let task = tokio::spawn(dial_forever(control.clone(), copy, url.clone()));
                (url, task)
            });
        }
        Ok(running.len())
    }

    pub fn stop_all(&self) {
        for (_, (_, task)) in self.running.lock().expect("dialers lock").drain() {
            task.abort();
        }
    }
}

async fn dial_forever(control: Arc<Control>, peer: String, url: String) {
    // A Send rng: this task moves between threads (rand::rng() is thread-local).
    let mut backoff = Backoff::new(rand::rngs::StdRng::from_os_rng());
    loop {
        let started = Instant::now();
        match peer_link::dial(control.clone(), &peer, &url).await {
            Ok(()) if started.elapsed() >= STEADY_LINK => backoff.reset(),
            Ok(()) => {}
            Err(error) => tracing::warn!(%peer, %error, "could not link to a peer"),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_of_copies_has_exactly_one_dialer() {
        for (a, b) in [("0a", "0b"), ("ff", "10"), ("abc", "abd")] {
            assert_ne!(should_dial(a, b, true), should_dial(b, a, true), "{a} {b}");
        }
        assert!(should_dial("ff", "00", false), "an unreachable copy must dial");
    }

    /// The names of the live members, sorted.
    async fn live_names(cache: &MemberCache, control: &Control) -> Vec<String> {
        let mut names: Vec<String> = cache.live_members(control).await.unwrap().into_iter().map(|m| m.name).collect();
        names.sort();
        names
    }

    /// Copies whose clocks are minutes off are live while they beat and stale once they stop,
    /// judged by when this copy saw their records change.
    #[tokio::test]
    async fn liveness_holds_whatever_the_writers_clocks_say() {
        use crate::clock::FakeClock;
        use crate::key::ControlKey;
        use crate::membership::Membership;
        use hyperhive_object_store::file::FileStore;

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FileStore::open(dir.path()).unwrap());
        let now = time::macros::datetime!(2026-11-30 06:00 UTC);
        let clock = Arc::new(FakeClock::at(now));
        let control = Control::new(store, ControlKey::from_seed([1; 32]), clock.clone()).with_copy_name("me");
        let behind = (Membership::new("behind".into(), None), FakeClock::at(now - time::Duration::minutes(7)));
        let ahead = (Membership::new("ahead".into(), None), FakeClock::at(now + time::Duration::minutes(7)));
        let members = [behind, ahead];
        let store = control.store.clone();
        let beat = |step: Duration| {
            let (members, store) = (&members, store.clone());
            async move {
                for (member, own_clock) in members {
                    own_clock.advance(step);
                    member.heartbeat(store.as_ref(), own_clock).await.unwrap();
                }
            }
        };
        let cache = MemberCache::default();
        beat(Duration::ZERO).await;
        assert_eq!(live_names(&cache, &control).await, ["ahead", "behind"]);
        for _ in 0..6 {
            clock.advance(Duration::from_secs(10));
            beat(Duration::from_secs(10)).await;
            assert_eq!(live_names(&cache, &control).await, ["ahead", "behind"], "both beat every 10 s");
        }
        // Both stop beating: both go stale after MEMBER_STALE_AFTER, then are removed.
        clock.advance(Duration::from_secs(20));
        assert_eq!(live_names(&cache, &control).await, ["ahead", "behind"]);
        clock.advance(Duration::from_secs(11));
        assert!(live_names(&cache, &control).await.is_empty(), "a stopped copy is stale whatever its clock said");
        clock.advance(MEMBER_REMOVED_AFTER);
        assert!(live_names(&cache, &control).await.is_empty());
        assert!(control.store.list(records::MEMBERS).await.unwrap().is_empty(), "long-dead records are removed");
    }

    #[tokio::test]
    async fn membership_records_are_read_again_only_when_they_change() {
        use crate::clock::FakeClock;
        use crate::control::Control;
        use crate::key::ControlKey;
        use crate::membership::Membership;
        use hyperhive_object_store::file::FileStore;

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FileStore::open(dir.path()).unwrap());
        let clock = Arc::new(FakeClock::at(time::macros::datetime!(2026-11-30 06:00 UTC)));
        let control = Control::new(store, ControlKey::from_seed([1; 32]), clock.clone()).with_copy_name("me");
        let (a, b) = (Membership::new("a".into(), None), Membership::new("b".into(), None));
        for member in [&a, &b] {
            member.heartbeat(control.store.as_ref(), clock.as_ref()).await.unwrap();
        }
        let gets = || control.metrics.store_operations("get");
        let cache = MemberCache::default();
        assert_eq!(cache.live_members(&control).await.unwrap().len(), 2);
        assert_eq!(gets(), 2);
        assert_eq!(cache.live_members(&control).await.unwrap().len(), 2);
        assert_eq!(gets(), 2, "unchanged records are not read again");
        clock.advance(Duration::from_secs(20));
        a.heartbeat(control.store.as_ref(), clock.as_ref()).await.unwrap();
        clock.advance(Duration::from_secs(15));
        let live = cache.live_members(&control).await.unwrap();
        assert_eq!(gets(), 3, "only the changed record is read");
        assert_eq!(live.iter().map(|m| m.copy_id.as_str()).collect::<Vec<_>>(), [a.copy_id()], "b's beat is 35 s old");
        // b is long gone (killed, never left): its record is removed; a beats again and stays.
        clock.advance(MEMBER_REMOVED_AFTER);
        a.heartbeat(control.store.as_ref(), clock.as_ref()).await.unwrap();
        assert_eq!(cache.live_members(&control).await.unwrap().len(), 1);
        assert_eq!(control.store.list(records::MEMBERS).await.unwrap(), [records::member_key(a.copy_id())]);
        a.leave(control.store.as_ref()).await;
        assert!(cache.live_members(&control).await.unwrap().is_empty());
    }
}
