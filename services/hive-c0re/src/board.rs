//! The board: every agent's part of the hive status, written by its supervisor and by the
//! registry, read by the status publisher. A change wakes the publisher at once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::status::{ActualState, AgentStatus};
use tokio::sync::Notify;

/// Shared, cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Board {
    inner: Arc<Mutex<BTreeMap<AgentName, Entry>>>,
    changed: Arc<Notify>,
}

/// One agent's status and where its turn file is.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its status (the turn is filled in when published).
    pub status: AgentStatus,
    /// Its `turn.json`.
    pub turn_file: PathBuf,
}

impl Board {
    /// Adds or replaces `agent`'s entry.
    pub fn insert(&self, agent: AgentName, entry: Entry) {
        self.inner.lock().expect("board lock").insert(agent, entry);
        self.changed.notify_one();
    }

    /// Changes `agent`'s status (nothing if it has no entry).
    pub fn update(&self, agent: &AgentName, change: impl FnOnce(&mut AgentStatus)) {
        if let Some(entry) = self.inner.lock().expect("board lock").get_mut(agent) {
            let before = entry.status.clone();
            change(&mut entry.status);
            if entry.status == before {
                return;
            }
        }
        self.changed.notify_one();
    }

    /// Sets `agent`'s actual state, and `since` when it changes.
    pub fn set_actual(&self, agent: &AgentName, actual: ActualState) {
        self.update(agent, |s| {
            if s.actual != actual {
                s.actual = actual;
                s.since = crate::now();
            }
        });
    }

    /// A copy of every entry.
    pub fn snapshot(&self) -> BTreeMap<AgentName, Entry> {
        self.inner.lock().expect("board lock").clone()
    }

    /// Resolves at the next change.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}
