//! The roster, KV `agents`: one entry per agent the swarm knows.
//!
//! Declared agents come to the swarm through their hive's status: for each hive of the directory,
//! every agent in its status that is not on the roster yet is added (create-if-absent, so two
//! passes at once add it once), provided, when the controller has the signing directory, the
//! hive's credential was minted for it. An agent is never moved: one already on the roster under another
//! hive keeps its entry, and the clash is logged. The controller watches `hive-status` and also
//! runs the same sync from its periodic pass, so a missed watch event is repaired. The whole
//! roster is kept in memory by name ([`RosterIndex`]): the agent lists read it, asking whether an
//! agent exists (every prompt, every agent route) costs no request, and neither does a status of
//! agents the roster has (every hive sends one every few seconds).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::roster::{Identities, RosterEntry};
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_objects::AGENTS_BUCKET;
use hyperhive_schedule::instant::format_instant;

use crate::clock::Clock;
use crate::lifecycle::hives::parse_status;
use crate::lifecycle::roster_index::RosterIndex;
use crate::nats::{NatsError, scan_bucket};

/// How often [`Roster::update`] rereads after losing a race.
const UPDATE_ATTEMPTS: usize = 10;

/// What one sync did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncReport {
    /// Entries added.
    pub added: usize,
    /// Agents left alone because the roster has them under another hive.
    pub clashes: usize,
    /// Statuses of hives not in the directory.
    pub unknown_hives: usize,
    /// Agents a hive reported that its credential was not minted for: left off the roster.
    pub unminted: usize,
}

/// The `agents` bucket.
#[derive(Debug, Clone)]
pub struct Roster {
    js: jetstream::Context,
    kv: kv::Store,
    /// The `nats init` directory, whose hive accounts say which agents each hive was minted
    /// for; without it a hive's status may add any agent.
    nats_dir: Option<std::path::PathBuf>,
    /// Each hive's minted agents, with the modification time of the account they were read
    /// from: a status comes every few seconds, the account changes when an agent is minted.
    minted: Arc<std::sync::Mutex<BTreeMap<HiveName, MintedAt>>>,
    /// Every entry by name, while [`Roster::keep_index`] runs.
    index: RosterIndex,
}

/// A hive's minted agents and the modification time of the account they were read from.
type MintedAt = (std::time::SystemTime, BTreeSet<AgentName>);

impl Roster {
    /// Wraps the bucket made by [`hyperhive_nats_objects::ensure_objects`].
    pub fn new(js: jetstream::Context, kv: kv::Store) -> Self {
        Self { js, kv, nats_dir: None, minted: Arc::default(), index: RosterIndex::default() }
    }

    /// The roster taking from each hive's status only the agents the hive was minted for, as
    /// its account in `nats_dir` (`SWARM_NATS_DIR`) says.
    #[must_use]
    pub fn minted_in(mut self, nats_dir: Option<std::path::PathBuf>) -> Self {
        self.nats_dir = nats_dir;
        self
    }

    /// The agents `hive` may add, or `None` when any (no signing directory). The account is
    /// read again only when its file changed.
    fn minted(&self, hive: &HiveName) -> Result<Option<BTreeSet<AgentName>>, String> {
        let Some(dir) = &self.nats_dir else { return Ok(None) };
        let account = hyperhive_nats_creds::hive_account_path(dir, hive);
        let changed = std::fs::metadata(&account).and_then(|m| m.modified()).ok();
        let mut cache = self.minted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(changed), Some((read_at, agents))) = (changed, cache.get(hive))
            && *read_at == changed
        {
            return Ok(Some(agents.clone()));
        }
        let agents: BTreeSet<AgentName> =
            hyperhive_nats_creds::agents_of_hive(dir, hive).map_err(|e| e.to_string())?.into_iter().collect();
        match changed {
            Some(changed) => cache.insert(hive.clone(), (changed, agents.clone())),
            None => cache.remove(hive),
        };
        Ok(Some(agents))
    }

    /// Every readable entry, by agent name; an unreadable one is logged and left out.
    ///
    /// # Errors
    /// [`NatsError::Scan`].
    pub async fn list(&self) -> Result<BTreeMap<AgentName, RosterEntry>, NatsError> {
        let listed: BTreeMap<AgentName, RosterEntry> = scan_bucket(&self.js, AGENTS_BUCKET)
            .await?
            .into_iter()
            .filter_map(|kv| {
                let agent = AgentName::parse(&kv.key).ok();
                match (agent, serde_json::from_slice::<RosterEntry>(&kv.value)) {
                    (Some(agent), Ok(entry)) => Some((agent, entry)),
                    (_, result) => {
                        tracing::error!(key = %kv.key, error = ?result.err(), "skipping an unreadable roster entry");
                        None
                    }
                }
            })
            .collect();
        Ok(listed)
    }

    /// The entry of `agent`, if it is on the roster and readable.
    ///
    /// # Errors
    /// NATS errors, as text.
    pub async fn get(&self, agent: &AgentName) -> Result<Option<RosterEntry>, String> {
        let Some(entry) = self.kv.entry(agent.as_str()).await.map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        Ok(serde_json::from_slice(&entry.value)
            .inspect_err(|err| tracing::error!(%agent, %err, "an unreadable roster entry; treated as absent"))
            .ok())
    }

    /// Whether `agent` is on the roster: from the index while it follows the bucket, else read.
    ///
    /// # Errors
    /// NATS errors, as text.
    pub async fn contains(&self, agent: &AgentName) -> Result<bool, String> {
        match self.index.read(|all| all.contains_key(agent)) {
            Some(indexed) => Ok(indexed),
            None => Ok(self.get(agent).await?.is_some()),
        }
    }

    /// Keeps [`Roster::index`] following the bucket, for as long as it runs.
    pub async fn keep_index(self) {
        self.index.clone().follow(self.js.clone(), self.kv.clone()).await;
    }

    /// Every entry by name in memory, while [`Roster::keep_index`] runs: what the agent lists
    /// read instead of the bucket.
    pub fn index(&self) -> &RosterIndex {
        &self.index
    }

    /// Adds `entry` for `agent` unless the roster has it: `Ok(false)` when it does.
    ///
    /// # Errors
    /// NATS errors, as text.
    pub async fn create(&self, agent: &AgentName, entry: &RosterEntry) -> Result<bool, String> {
        let bytes = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        match self.kv.create(agent.as_str(), bytes.into()).await {
            Ok(revision) => {
                self.index.wrote(agent, revision, entry);
                Ok(true)
            }
            Err(err) if err.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(err) => Err(err.to_string()),
        }
    }

    /// Changes `agent`'s entry with `change`, as a compare-and-set on the revision it read,
    /// repeated when another write slipped in between; returns the entry as written.
    ///
    /// # Errors
    /// The agent is not on the roster, or NATS errors, as text.
    pub async fn update(&self, agent: &AgentName, change: impl Fn(&mut RosterEntry)) -> Result<RosterEntry, String> {
        let written = self
            .try_update(agent, |entry| {
                change(entry);
                Ok::<_, std::convert::Infallible>(())
            })
            .await?;
        Ok(written.unwrap_or_else(|never| match never {}))
    }

    /// [`Roster::update`] with a change that may refuse: a refusal (the inner error) writes
    /// nothing.
    ///
    /// # Errors
    /// The agent is not on the roster, or NATS errors, as text.
    pub async fn try_update<E>(
        &self,
        agent: &AgentName,
        change: impl Fn(&mut RosterEntry) -> Result<(), E>,
    ) -> Result<Result<RosterEntry, E>, String> {
        for _ in 0..UPDATE_ATTEMPTS {
            let current = self.kv.entry(agent.as_str()).await.map_err(|e| e.to_string())?;
            let Some(current) = current.filter(|e| e.operation == kv::Operation::Put) else {
                return Err(format!("agent {agent} is not on the roster"));
            };
            let mut entry: RosterEntry = serde_json::from_slice(&current.value)
                .map_err(|e| format!("agent {agent}'s roster entry is unreadable: {e}"))?;
            if let Err(refused) = change(&mut entry) {
                return Ok(Err(refused));
            }
            let bytes = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
            match self.kv.update(agent.as_str(), bytes.into(), current.revision).await {
                Ok(revision) => {
                    self.index.wrote(agent, revision, &entry);
                    return Ok(Ok(entry));
                }
                Err(err) if err.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                Err(err) => return Err(err.to_string()),
            }
        }
        Err(format!("agent {agent}'s roster entry keeps changing under this update; it is retried"))
    }

    /// Adds every agent of `status` that is not on the roster yet, if its hive is in `directory`
    /// and, with a signing directory, its credential was minted for that agent (a hive cannot put
    /// names on the roster it does not run, nor squat the name of an agent to be created), and
    /// makes each added agent's consumer.
    ///
    /// # Errors
    /// NATS errors, as text; entries added before the error stay.
    pub async fn sync(
        &self,
        directory: &HiveDirectory,
        status: &HiveStatus,
        clock: &dyn Clock,
    ) -> Result<SyncReport, String> {
        let mut report = SyncReport::default();
        if !directory.contains_key(&status.hive) {
            tracing::warn!(hive = %status.hive, "a status from a hive not in the directory (SWARM_HIVES_FILE); ignored");
            report.unknown_hives += 1;
            return Ok(report);
        }
        let minted = self.minted(&status.hive)?;
        // The hives of the status's agents the index has, under one lock.
        let known: BTreeMap<&AgentName, HiveName> = self
            .index
            .read(|all| status.agents.keys().filter_map(|a| Some((a, all.get(a)?.hive.clone()))).collect())
            .unwrap_or_default();
        for (agent, agent_status) in &status.agents {
            if minted.as_ref().is_some_and(|minted| !minted.contains(agent)) {
                report.unminted += 1;
                continue;
            }
            // Known already: nothing to add, and no round trip.
            if let Some(on_roster) = known.get(agent) {
                if *on_roster != status.hive {
                    report.clashes += 1;
                }
                continue;
            }
            let entry = RosterEntry {
                hive: status.hive.clone(),
                origin: agent_status.origin,
                created_at: format_instant(clock.now()),
                provisioning: BTreeMap::new(),
                identities: Identities::default(),
                spec: None,
                revision: 0,
                labels: Default::default(),
            };
            let bytes = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
            match self.kv.create(agent.as_str(), bytes.into()).await {
                Ok(revision) => {
                    tracing::info!(%agent, hive = %status.hive, origin = ?entry.origin, "agent added to the roster");
                    self.index.wrote(agent, revision, &entry);
                    report.added += 1;
                    // Its consumer at once, not at the next reconcile pass: the agent is running
                    // and waits for it (the pass makes it if this fails).
                    if let Err(err) = crate::nats::consumers::ensure_agent(&self.js, agent).await {
                        tracing::warn!(%agent, %err, "the agent's consumer was not made; the reconcile pass retries");
                    }
                }
                Err(err) if err.kind() == kv::CreateErrorKind::AlreadyExists => {
                    if let Some(existing) = self.get(agent).await?
                        && existing.hive != status.hive
                    {
                        tracing::warn!(
                            %agent, on_roster = %existing.hive, reported_by = %status.hive,
                            "an agent on the roster under another hive is reported by this hive; left where it is"
                        );
                        report.clashes += 1;
                    }
                }
                Err(err) => return Err(err.to_string()),
            }
        }
        if report.unminted > 0 {
            tracing::warn!(
                hive = %status.hive, agents = report.unminted,
                "the hive's status names agents its credential was not minted for; left off the roster"
            );
        }
        Ok(report)
    }

    /// Syncs from every status in `statuses`.
    ///
    /// # Errors
    /// The first NATS error, as text.
    pub async fn sync_all<'a>(
        &self,
        directory: &HiveDirectory,
        statuses: impl IntoIterator<Item = &'a HiveStatus>,
        clock: &dyn Clock,
    ) -> Result<SyncReport, String> {
        let mut total = SyncReport::default();
        for status in statuses {
            let one = self.sync(directory, status, clock).await?;
            total.added += one.added;
            total.clashes += one.clashes;
            total.unknown_hives += one.unknown_hives;
            total.unminted += one.unminted;
        }
        Ok(total)
    }
}

/// Watches `hive-status` and syncs the roster from every status written, until the watch ends
/// (the periodic pass covers what is missed meanwhile). Restarted by the caller.
pub async fn watch_statuses(
    hive_status: kv::Store,
    roster: Roster,
    directory: Arc<HiveDirectory>,
    clock: Arc<dyn Clock>,
) {
    loop {
        let mut watch = match hive_status.watch_all().await {
            Ok(watch) => watch,
            Err(err) => {
                tracing::warn!(%err, "cannot watch hive-status; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        while let Some(entry) = watch.next().await {
            let entry = match entry {
                Ok(entry) if entry.operation == kv::Operation::Put => entry,
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(%err, "hive-status watch failed; watching again");
                    break;
                }
            };
            let Some(status) = parse_status(&entry.key, &entry.value) else { continue };
            if let Err(err) = roster.sync(&directory, &status, clock.as_ref()).await {
                tracing::warn!(hive = %status.hive, %err, "roster sync failed; the periodic pass retries");
            }
        }
        // The server dropped the watch (a restart, a leader change): watch again after a pause.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
