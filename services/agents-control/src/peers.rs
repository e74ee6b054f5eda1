//! Finding the other copies and keeping one link to each (DESIGN 3.7): every refresh reads the
//! membership records, and for each live copy this one should dial, a task keeps a
//! [`peer_link::dial`] running, redialing with backoff after a failure. Of two copies that both
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

/// A membership record whose heartbeat is older than this belongs to a copy that died
/// (heartbeats are written every [`crate::serve::HEARTBEAT_EVERY`]).
pub const MEMBER_STALE_AFTER: Duration = Duration::from_secs(30);

/// A link that stayed up this long resets the redial backoff.
const STEADY_LINK: Duration = Duration::from_secs(10);

/// The live copies in the store, this one excluded.
pub async fn live_members(control: &Control) -> Result<Vec<MemberRecord>, StoreError> {
    let store = control.store.as_ref();
    let now = control.clock.now();
    let mut live = Vec::new();
    for key in store.list(records::MEMBERS).await? {
        let Some(object) = store.get(&key).await? else { continue };
        match records::decode::<MemberRecord>(&key, &object.bytes) {
            Ok(member) if member.copy_id != control.copy_name && is_live(&key, &member, now) => live.push(member),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "skipping a membership record this build cannot read"),
        }
    }
    Ok(live)
}

fn is_live(key: &str, member: &MemberRecord, now: OffsetDateTime) -> bool {
    records::parse_timestamp(key, &member.heartbeat_at)
        .is_ok_and(|beat| now - beat <= time::Duration::try_from(MEMBER_STALE_AFTER).unwrap_or(time::Duration::ZERO))
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
}

impl Dialers {
    /// Starts a dialer for every live copy this one should dial and stops those whose copy is
    /// gone (or moved). Returns how many dialers run.
    pub async fn refresh(&self, control: &Arc<Control>, reachable: bool) -> Result<usize, StoreError> {
        let wanted: HashMap<String, String> = live_members(control)
            .await?
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

    #[test]
    fn a_member_is_live_only_while_its_heartbeat_is_recent() {
        let now = OffsetDateTime::now_utc();
        let member = |beat: OffsetDateTime| MemberRecord {
            schema: records::SCHEMA,
            copy_id: "0a".into(),
            name: "cp".into(),
            peer_url: None,
            heartbeat_at: records::timestamp(beat),
            write_id: "w".into(),
        };
        assert!(is_live("k", &member(now - time::Duration::seconds(29)), now));
        assert!(!is_live("k", &member(now - time::Duration::seconds(31)), now));
    }
}
