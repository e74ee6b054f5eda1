//! The names the roster was seen to hold, and the hive of those whose entry was read, so that
//! asking whether an agent exists (every prompt, every agent route) and syncing the roster from a
//! hive's status (every few seconds from every hive) cost no NATS round trip after the first time.
//!
//! The controller never removes a roster entry (a destroyed agent keeps its entry, wanted state
//! `destroyed`) nor moves one to another hive, so a name once seen stays true, and its hive
//! with it, except where someone deletes a key by hand. A
//! watch of the bucket's deletes forgets such names; the memo answers only while that watch runs,
//! and starts empty each time it is (re)made, so a delete made while it was down cannot leave a
//! name behind.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::StreamExt;
use hyperhive_hive_proto::{AgentName, HiveName};

/// How long to wait before watching again after the watch failed.
const REWATCH_AFTER: Duration = Duration::from_secs(1);

/// Names found on the roster, valid while their watch runs. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SeenNames {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Whether the deletes watch runs; without it nothing seen is trusted.
    watching: AtomicBool,
    names: Mutex<Names>,
}

#[derive(Debug, Default)]
struct Names {
    /// Found on the roster, with its hive when the read showed it.
    seen: HashMap<AgentName, Option<HiveName>>,
    /// Deleted, and not put again since, as the watch saw: a read that found one of these
    /// before its delete came through is not remembered.
    deleted: HashSet<AgentName>,
}

impl Names {
    fn remember(&mut self, agent: &AgentName, hive: Option<&HiveName>) {
        if !self.deleted.contains(agent) {
            let known = self.seen.entry(agent.clone()).or_default();
            if let Some(hive) = hive {
                *known = Some(hive.clone());
            }
        }
    }
}

impl SeenNames {
    /// Whether `agent` was seen on the roster (and not deleted since).
    pub fn contains(&self, agent: &AgentName) -> bool {
        self.inner.watching.load(Ordering::Acquire) && self.names().seen.contains_key(agent)
    }

    /// The hive of `agent`'s roster entry, when a read showed it (and it was not deleted since).
    pub fn hive_of(&self, agent: &AgentName) -> Option<HiveName> {
        if !self.inner.watching.load(Ordering::Acquire) {
            return None;
        }
        self.names().seen.get(agent).cloned().flatten()
    }

    /// `agent` is on the roster: a read found it.
    pub fn saw(&self, agent: &AgentName) {
        self.remember(agent, None);
    }

    /// `agent` is on the roster under `hive`: a read or a write showed it.
    pub fn saw_on(&self, agent: &AgentName, hive: &HiveName) {
        self.remember(agent, Some(hive));
    }

    /// Each agent of `listed` is on the roster under its hive: a listing showed them (one lock
    /// for the whole listing).
    pub fn saw_all_on<'a>(&self, listed: impl IntoIterator<Item = (&'a AgentName, &'a HiveName)>) {
        if self.inner.watching.load(Ordering::Acquire) {
            let mut names = self.names();
            for (agent, hive) in listed {
                names.remember(agent, Some(hive));
            }
        }
    }

    fn remember(&self, agent: &AgentName, hive: Option<&HiveName>) {
        if self.inner.watching.load(Ordering::Acquire) {
            self.names().remember(agent, hive);
        }
    }

    fn names(&self) -> std::sync::MutexGuard<'_, Names> {
        self.inner.names.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets every name deleted from `roster` for as long as it runs, watching again after
    /// the watch fails (the memo unused meanwhile).
    pub async fn watch_deletes(self, roster: kv::Store) {
        loop {
            self.forget_all();
            match roster.watch_all().await {
                Ok(mut watch) => {
                    self.inner.watching.store(true, Ordering::Release);
                    while let Some(entry) = watch.next().await {
                        match entry {
                            Ok(entry) => self.watched(&entry),
                            Err(err) => {
                                tracing::warn!(%err, "the roster's deletes watch failed; watching again");
                                break;
                            }
                        }
                    }
                }
                Err(err) => tracing::warn!(%err, "cannot watch the roster's deletes; retrying"),
            }
            self.forget_all();
            tokio::time::sleep(REWATCH_AFTER).await;
        }
    }

    fn watched(&self, entry: &kv::Entry) {
        let Ok(agent) = AgentName::parse(&entry.key) else { return };
        let mut names = self.names();
        if entry.operation == kv::Operation::Put {
            names.deleted.remove(&agent);
        } else {
            names.seen.remove(&agent);
            names.deleted.insert(agent);
        }
    }

    fn forget_all(&self) {
        self.inner.watching.store(false, Ordering::Release);
        let mut names = self.names();
        names.seen.clear();
        names.deleted.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bee() -> AgentName {
        AgentName::parse("bee").unwrap()
    }

    #[test]
    fn nothing_is_remembered_or_answered_while_no_watch_runs() {
        let seen = SeenNames::default();
        seen.saw(&bee());
        assert!(!seen.contains(&bee()));
        seen.inner.watching.store(true, Ordering::Release);
        assert!(!seen.contains(&bee()), "a name seen before the watch ran is not kept");
        seen.saw(&bee());
        assert!(seen.contains(&bee()));
        seen.forget_all();
        assert!(!seen.contains(&bee()));
        seen.inner.watching.store(true, Ordering::Release);
        assert!(!seen.contains(&bee()), "a new watch starts from nothing");
    }

    fn entry(operation: kv::Operation) -> kv::Entry {
        kv::Entry {
            bucket: "agents".into(),
            key: "bee".into(),
            value: bytes::Bytes::new(),
            revision: 1,
            delta: 0,
            created: time::OffsetDateTime::UNIX_EPOCH,
            operation,
            seen_current: true,
        }
    }

    #[test]
    fn a_deleted_name_is_forgotten_and_a_read_from_before_its_delete_not_kept() {
        let seen = SeenNames::default();
        seen.inner.watching.store(true, Ordering::Release);
        seen.saw(&bee());
        seen.watched(&entry(kv::Operation::Delete));
        assert!(!seen.contains(&bee()));
        // A read that found bee just before the delete, remembered after the watch saw it.
        seen.saw(&bee());
        assert!(!seen.contains(&bee()), "a stale read does not bring a deleted name back");
        seen.watched(&entry(kv::Operation::Put));
        seen.saw(&bee());
        assert!(seen.contains(&bee()), "put again, it is remembered again");
        seen.watched(&entry(kv::Operation::Purge));
        assert!(!seen.contains(&bee()));
    }

    #[test]
    fn a_hive_is_known_once_a_read_showed_it_and_forgotten_with_its_name() {
        let seen = SeenNames::default();
        let h1 = HiveName::parse("h1").unwrap();
        seen.saw_on(&bee(), &h1);
        assert_eq!(seen.hive_of(&bee()), None, "nothing is kept while no watch runs");
        seen.inner.watching.store(true, Ordering::Release);
        seen.saw(&bee());
        assert_eq!(seen.hive_of(&bee()), None, "a read that showed no hive");
        seen.saw_on(&bee(), &h1);
        seen.saw(&bee());
        assert_eq!(seen.hive_of(&bee()), Some(h1.clone()), "kept by a later read without one");
        seen.watched(&entry(kv::Operation::Delete));
        assert_eq!(seen.hive_of(&bee()), None);
        seen.saw_on(&bee(), &h1);
        assert_eq!(seen.hive_of(&bee()), None, "a stale read of a deleted name is not kept");
    }
}
