//! The roster in the controller's memory, by name: what the agent lists read, so that a page of
//! agents costs its own size rather than a read of the whole bucket, and what answers whether an
//! agent exists and which hive it is on without a request.
//!
//! It is filled by one scan of `agents` and kept by the bucket's changes from the sequence the
//! scan started at: the watch is made before the scan, so no change falls between them, and a
//! change the scan saw already comes again harmlessly, because each name keeps the revision it
//! was last set at and only a later one replaces it (a delete included, so a late put cannot
//! bring a deleted agent back). The controller's own writes are applied at once, so an agent it
//! just added is on the next page. While the watch is being remade the index says it does not
//! follow the bucket, and the lists read the bucket instead.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::roster::RosterEntry;
use hyperhive_nats_objects::{AGENTS_BUCKET, kv_stream};

use crate::nats::scan_bucket;

/// How long to wait before following again after the watch failed.
const REFOLLOW_AFTER: Duration = Duration::from_secs(1);

/// The roster by name, while it follows the bucket. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RosterIndex {
    inner: Arc<Mutex<Index>>,
}

#[derive(Debug, Default)]
struct Index {
    /// Whether the scan is in and the watch runs; nothing is answered otherwise.
    following: bool,
    entries: BTreeMap<AgentName, RosterEntry>,
    /// The revision each name was last set or removed at.
    revisions: HashMap<AgentName, u64>,
}

impl Index {
    /// Sets `agent` to `entry` (`None`: removed) as of `revision`, unless a later revision is in.
    fn apply(&mut self, agent: AgentName, revision: u64, entry: Option<RosterEntry>) {
        if self.revisions.get(&agent).is_some_and(|&known| known >= revision) {
            return;
        }
        match entry {
            Some(entry) => self.entries.insert(agent.clone(), entry),
            None => self.entries.remove(&agent),
        };
        self.revisions.insert(agent, revision);
    }

    fn clear(&mut self) {
        self.following = false;
        self.entries.clear();
        self.revisions.clear();
    }
}

/// A roster entry's bytes, or `None` for one that cannot be read (listed as absent, as
/// [`crate::lifecycle::roster::Roster::list`] leaves it out).
fn readable(agent: &AgentName, bytes: &[u8]) -> Option<RosterEntry> {
    serde_json::from_slice(bytes)
        .inspect_err(|err| tracing::debug!(%agent, %err, "an unreadable roster entry; not indexed"))
        .ok()
}

impl RosterIndex {
    /// `read` of every entry by name, or `None` while the index does not follow the bucket.
    pub fn read<R>(&self, read: impl FnOnce(&BTreeMap<AgentName, RosterEntry>) -> R) -> Option<R> {
        let index = self.index();
        index.following.then(|| read(&index.entries))
    }

    /// The controller wrote `entry` for `agent` at `revision`.
    pub fn wrote(&self, agent: &AgentName, revision: u64, entry: &RosterEntry) {
        let mut index = self.index();
        if index.following {
            index.apply(agent.clone(), revision, Some(entry.clone()));
        }
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows `roster` for as long as it runs: a scan, then every change; scanned and watched
    /// again after the watch fails. Nothing is answered meanwhile, nor once it is dropped (the
    /// roster then reads the bucket).
    pub async fn follow(self, js: jetstream::Context, roster: kv::Store) {
        let _unfollowed_when_dropped = Unfollowed(&self);
        loop {
            self.index().clear();
            match self.fill(&js, &roster).await {
                Ok(mut changes) => {
                    while let Some(change) = changes.next().await {
                        match change {
                            Ok(change) => self.changed(&change),
                            Err(err) => {
                                tracing::warn!(%err, "the roster index's watch failed; following again");
                                break;
                            }
                        }
                    }
                }
                Err(err) => tracing::warn!(%err, "cannot index the roster; retrying"),
            }
            tokio::time::sleep(REFOLLOW_AFTER).await;
        }
    }

    /// The watch of every change after the bucket's last sequence, then the scan: the index
    /// follows once both are in.
    async fn fill(&self, js: &jetstream::Context, roster: &kv::Store) -> Result<kv::Watch, String> {
        let stream = js.get_stream_no_info(kv_stream(AGENTS_BUCKET)).await.map_err(|e| e.to_string())?;
        let last = stream.get_info().await.map_err(|e| e.to_string())?.state.last_sequence;
        let changes = roster.watch_all_from_revision(last + 1).await.map_err(|e| e.to_string())?;
        let scanned = scan_bucket(js, AGENTS_BUCKET).await.map_err(|e| e.to_string())?;
        let mut index = self.index();
        for kv in scanned {
            let Ok(agent) = AgentName::parse(&kv.key) else { continue };
            let entry = readable(&agent, &kv.value);
            index.apply(agent, kv.revision, entry);
        }
        index.following = true;
        tracing::debug!(agents = index.entries.len(), "the roster is indexed");
        Ok(changes)
    }

    fn changed(&self, change: &kv::Entry) {
        let Ok(agent) = AgentName::parse(&change.key) else { return };
        let entry = match change.operation {
            kv::Operation::Put => readable(&agent, &change.value),
            kv::Operation::Delete | kv::Operation::Purge => None,
        };
        self.index().apply(agent, change.revision, entry);
    }
}

/// Clears the index when [`RosterIndex::follow`] ends, so a frozen index is never answered.
struct Unfollowed<'a>(&'a RosterIndex);

impl Drop for Unfollowed<'_> {
    fn drop(&mut self) {
        self.0.index().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_hive_proto::HiveName;
    use hyperhive_hive_proto::roster::Origin;

    fn entry(hive: &str) -> RosterEntry {
        RosterEntry {
            hive: HiveName::parse(hive).unwrap(),
            origin: Origin::Declared,
            created_at: "2026-12-01T00:00:00Z".into(),
            provisioning: Default::default(),
            identities: Default::default(),
            spec: None,
            revision: 0,
            labels: Default::default(),
        }
    }

    fn hive_of(index: &RosterIndex, agent: &str) -> Option<Option<String>> {
        let agent = AgentName::parse(agent).unwrap();
        index.read(|all| all.get(&agent).map(|e| e.hive.to_string()))
    }

    #[test]
    fn only_a_later_revision_changes_a_name_and_a_delete_counts_as_one() {
        let index = RosterIndex::default();
        let bee = AgentName::parse("bee").unwrap();
        index.wrote(&bee, 1, &entry("h1"));
        assert_eq!(hive_of(&index, "bee"), None, "nothing is answered or kept before it follows");
        index.index().following = true;
        index.wrote(&bee, 5, &entry("h1"));
        index.wrote(&bee, 4, &entry("h2"));
        assert_eq!(hive_of(&index, "bee"), Some(Some("h1".into())), "an older write comes late");
        index.index().apply(bee.clone(), 7, None);
        index.wrote(&bee, 6, &entry("h1"));
        assert_eq!(hive_of(&index, "bee"), Some(None), "a put older than the delete does not bring it back");
        index.wrote(&bee, 8, &entry("h2"));
        assert_eq!(hive_of(&index, "bee"), Some(Some("h2".into())), "put again after its delete");
        index.index().clear();
        assert_eq!(hive_of(&index, "bee"), None);
    }
}
