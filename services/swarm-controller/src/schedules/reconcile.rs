//! Keeping `agent-schedules` equal to what the definitions say (docs/swarm/schedules.md).
//!
//! Each agent's key holds the schedules naming it ([`desired_documents`]). The controller
//! remembers what each key holds, so after a change it writes only the keys of that schedule's
//! agents (old and new) whose bytes differ, and the periodic pass re-reads both buckets and
//! repairs anything changed behind its back (a deleted key, a lost write), again writing only
//! keys whose bytes differ and removing keys of agents with no schedules.
//!
//! One mutex serialises changes and passes: each computes from the latest definitions under the
//! lock, so whatever order concurrent changes finish in, the last write of a key is current.
//! The pass reads both buckets before it takes the lock, because a read can take seconds (a NATS
//! election) and the API's checks and changes wait for that lock; a change made during the read
//! makes the pass read again, under the lock, so it never writes from older definitions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures::StreamExt;
use hyperhive_nats_objects::AGENT_SCHEDULES_BUCKET;
use hyperhive_schedule::{AgentName, AgentSchedules};
use tokio::sync::Mutex;

use crate::definition::{DefinitionRules, ScheduleDefinition};
use crate::nats::{KeyValue, scan_bucket};
use crate::schedules::store::{Definitions, Revisioned, StoreError};

/// How many key writes are in flight at once: enough to hide a round trip, few enough not to
/// crowd the agents' direct gets.
const WRITES_IN_FLIGHT: usize = 64;

/// The largest agent document written: one NATS message (`max_payload`, 1 MiB by default) less
/// room for its subject and headers. A schedule that would push an agent past it is refused,
/// because a key that cannot be written would leave that agent silently without it.
pub const MAX_AGENT_DOC_BYTES: usize = 1024 * 1024 - 4096;

/// The bytes each agent's key should hold: for every agent named by any definition, its
/// schedules in canonical form.
pub fn desired_documents<'a>(
    definitions: impl IntoIterator<Item = &'a ScheduleDefinition>,
) -> BTreeMap<AgentName, Vec<u8>> {
    let mut per_agent: BTreeMap<AgentName, Vec<_>> = BTreeMap::new();
    for definition in definitions {
        for agent in &definition.agents {
            if let Some(schedule) = definition.for_agent(agent) {
                per_agent.entry(agent.clone()).or_default().push(schedule);
            }
        }
    }
    per_agent.into_iter().map(|(agent, schedules)| (agent, AgentSchedules::new(schedules).to_bytes())).collect()
}

/// The writes that make `current` equal `desired` (restricted to `scope` when given).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Keys to (over)write, with their new bytes.
    pub put: Vec<(String, Vec<u8>)>,
    /// Keys to remove: agents with no schedules left.
    pub remove: Vec<String>,
}

/// Compares desired and current bytes; equal keys are left alone.
pub fn plan(
    desired: &BTreeMap<AgentName, Vec<u8>>,
    current: &HashMap<String, Bytes>,
    scope: Option<&BTreeSet<AgentName>>,
) -> Plan {
    let in_scope = |key: &str| scope.is_none_or(|s| s.iter().any(|a| a.as_str() == key));
    let put = desired
        .iter()
        .filter(|(agent, _)| in_scope(agent.as_str()))
        .filter(|(agent, bytes)| current.get(agent.as_str()).map(|b| &b[..]) != Some(&bytes[..]))
        .map(|(agent, bytes)| (agent.as_str().to_owned(), bytes.clone()))
        .collect();
    let wanted: BTreeSet<&str> = desired.keys().map(AgentName::as_str).collect();
    let mut remove: Vec<String> =
        current.keys().filter(|key| in_scope(key) && !wanted.contains(key.as_str())).cloned().collect();
    remove.sort();
    Plan { put, remove }
}

/// What one change or pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Agents whose keys were compared.
    pub compared: usize,
    /// Keys written.
    pub written: usize,
    /// Keys removed.
    pub removed: usize,
    /// Writes or removals that failed (logged; the next pass retries them).
    pub failed: usize,
    /// How long it took, reads included.
    pub elapsed: Duration,
}

#[derive(Debug, Default)]
struct Known {
    /// The definitions as last read or written, by id.
    definitions: BTreeMap<String, ScheduleDefinition>,
    /// What each agent key holds, as last read or written.
    keys: HashMap<String, Bytes>,
    /// How many changes through the API have been applied: a pass that read the buckets
    /// without the lock uses what it read only if this did not move meanwhile.
    changes: u64,
}

/// Both buckets as a pass read them ([`Reconciler::read`]), to be applied with
/// [`Reconciler::apply`].
#[derive(Debug)]
pub struct PassRead {
    started: Instant,
    /// How many changes had gone through when the reading began.
    changes: u64,
    definitions: Vec<Revisioned>,
    keys: Vec<KeyValue>,
}

/// The single writer of `agent-schedules`.
#[derive(Debug)]
pub struct Reconciler {
    js: jetstream::Context,
    definitions: Definitions,
    agent_schedules: kv::Store,
    known: Mutex<Known>,
}

impl Reconciler {
    /// A reconciler that knows nothing yet; run [`Reconciler::pass`] before serving.
    pub fn new(js: jetstream::Context, definitions: Definitions, agent_schedules: kv::Store) -> Self {
        Self { js, definitions, agent_schedules, known: Mutex::new(Known::default()) }
    }

    /// Re-reads both buckets and writes every key whose bytes differ from the definitions,
    /// removing keys of agents with no schedules: [`Reconciler::read`], then
    /// [`Reconciler::apply`].
    ///
    /// # Errors
    /// [`StoreError`] when a bucket cannot be read (nothing is written then).
    pub async fn pass(&self) -> Result<Report, StoreError> {
        let read = self.read().await?;
        self.apply(read).await
    }

    /// A pass's reading of both buckets, without holding the lock the API's checks and changes
    /// take.
    ///
    /// # Errors
    /// [`StoreError`] when a bucket cannot be read.
    pub async fn read(&self) -> Result<PassRead, StoreError> {
        let started = Instant::now();
        let changes = self.known.lock().await.changes;
        let (definitions, keys) = self.read_buckets().await?;
        Ok(PassRead { started, changes, definitions, keys })
    }

    /// A pass's writes from `read`, or from a fresh reading under the lock when a change went
    /// through since `read` began (its definitions may be older than that change's).
    ///
    /// # Errors
    /// [`StoreError`] when the buckets must be read again and cannot be (nothing is written then).
    pub async fn apply(&self, read: PassRead) -> Result<Report, StoreError> {
        let mut known = self.known.lock().await;
        let (definitions, keys) =
            if known.changes == read.changes { (read.definitions, read.keys) } else { self.read_buckets().await? };
        known.definitions = definitions.into_iter().map(|r| (r.definition.id.clone(), r.definition)).collect();
        known.keys = keys.into_iter().map(|kv| (kv.key, kv.value)).collect();
        let desired = desired_documents(known.definitions.values());
        let plan = plan(&desired, &known.keys, None);
        let mut report = self.execute(plan, &mut known).await;
        report.compared = desired.len().max(known.keys.len());
        report.elapsed = read.started.elapsed();
        Ok(report)
    }

    async fn read_buckets(&self) -> Result<(Vec<Revisioned>, Vec<KeyValue>), StoreError> {
        Ok((self.definitions.list().await?, scan_bucket(&self.js, AGENT_SCHEDULES_BUCKET).await?))
    }

    /// Refuses `candidate` (a new or changed schedule) when it would make one of its agents'
    /// documents larger than [`MAX_AGENT_DOC_BYTES`]; the message names the agent and the size.
    ///
    /// # Errors
    /// The message to show the client.
    pub async fn check_fits(&self, candidate: &ScheduleDefinition) -> Result<(), String> {
        let known = self.known.lock().await;
        let sharing = known
            .definitions
            .values()
            .filter(|d| d.id != candidate.id && d.agents.iter().any(|a| candidate.agents.contains(a)));
        let desired = desired_documents(sharing.chain(std::iter::once(candidate)));
        match candidate
            .agents
            .iter()
            .find_map(|a| desired.get(a).filter(|doc| doc.len() > MAX_AGENT_DOC_BYTES).map(|doc| (a, doc.len())))
        {
            Some((agent, size)) => Err(format!(
                "agent {agent}'s schedules would take {size} bytes, more than the \
                 {MAX_AGENT_DOC_BYTES} one NATS message holds; shorten the body or give that \
                 agent fewer schedules"
            )),
            None => Ok(()),
        }
    }

    /// The id of a schedule other than `except` named `name`, among the definitions this
    /// reconciler holds (read at every pass and re-read after every change through the API), so
    /// the check costs no bucket scan.
    pub async fn named(&self, name: &str, except: &str) -> Option<String> {
        let known = self.known.lock().await;
        known.definitions.values().find(|d| d.name == name && d.id != except).map(|d| d.id.clone())
    }

    /// Brings the keys of schedule `id`'s agents (before and after the change) up to date after
    /// the API changed it. The definition is re-read under the lock, so a late caller can never
    /// write an older version over a newer one.
    ///
    /// # Errors
    /// [`StoreError`] when the definition cannot be read (the next pass repairs the keys).
    pub async fn schedule_changed(&self, id: &str) -> Result<Report, StoreError> {
        let started = Instant::now();
        let mut known = self.known.lock().await;
        known.changes += 1;
        let current = self.definitions.get(id).await?;
        let mut scope: BTreeSet<AgentName> =
            known.definitions.get(id).map(|d| d.agents.iter().cloned().collect()).unwrap_or_default();
        match current {
            Some(r) => {
                scope.extend(r.definition.agents.iter().cloned());
                known.definitions.insert(id.to_owned(), r.definition);
            }
            None => {
                known.definitions.remove(id);
            }
        }
        let naming_scope = known.definitions.values().filter(|d| d.agents.iter().any(|a| scope.contains(a)));
        let desired = desired_documents(naming_scope);
        let plan = plan(&desired, &known.keys, Some(&scope));
        let mut report = self.execute(plan, &mut known).await;
        report.compared = scope.len();
        report.elapsed = started.elapsed();
        Ok(report)
    }

    async fn execute(&self, plan: Plan, known: &mut Known) -> Report {
        let mut report = Report::default();
        let store = &self.agent_schedules;
        let mut puts = futures::stream::iter(plan.put)
            .map(|(key, bytes)| async move {
                let bytes = Bytes::from(bytes);
                let result = store.put(&key, bytes.clone()).await.map_err(|e| e.to_string());
                (key, bytes, result)
            })
            .buffer_unordered(WRITES_IN_FLIGHT);
        while let Some((key, bytes, result)) = puts.next().await {
            match result {
                Ok(_) => {
                    report.written += 1;
                    known.keys.insert(key, bytes);
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(agent = %key, %err, "writing the agent's schedules failed; the next pass retries");
                }
            }
        }
        let mut removals = futures::stream::iter(plan.remove)
            .map(|key| async move {
                let result = store.delete(&key).await.map_err(|e| e.to_string());
                (key, result)
            })
            .buffer_unordered(WRITES_IN_FLIGHT);
        while let Some((key, result)) = removals.next().await {
            match result {
                Ok(()) => {
                    report.removed += 1;
                    known.keys.remove(&key);
                }
                Err(err) => {
                    report.failed += 1;
                    tracing::warn!(agent = %key, %err, "removing the agent's schedules failed; the next pass retries");
                }
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{DefinitionRules, NewSchedule, ScheduleDefinition};
    use proptest::prelude::*;
    use time::macros::datetime;

    fn definition(id: &str, agents: &[&str], body: &str) -> ScheduleDefinition {
        let agents: Vec<String> = agents.iter().map(|a| format!("{a:?}")).collect();
        let json = format!(
            r#"{{"name":"n","agents":[{}],"body":{body:?},"anchor":"2026-11-30T09:00:00Z","interval":60}}"#,
            agents.join(",")
        );
        let new = NewSchedule::from_json(json.as_bytes()).unwrap();
        ScheduleDefinition::create(id.to_owned(), new, datetime!(2026-11-30 08:00:00 UTC))
    }

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn as_current(desired: &BTreeMap<AgentName, Vec<u8>>) -> HashMap<String, Bytes> {
        desired.iter().map(|(a, b)| (a.as_str().to_owned(), Bytes::from(b.clone()))).collect()
    }

    #[test]
    fn each_agent_gets_only_its_schedules_sorted() {
        let defs = [definition("s2", &["a", "b"], "two"), definition("s1", &["a"], "one")];
        let desired = desired_documents(&defs);
        let a = AgentSchedules::from_bytes(&desired[&agent("a")]).unwrap();
        let ids: Vec<&str> = a.schedules.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s1", "s2"]);
        let b = AgentSchedules::from_bytes(&desired[&agent("b")]).unwrap();
        assert_eq!(b.schedules.len(), 1);
        assert_eq!(b.schedules[0].body, "two");
    }

    #[test]
    fn nothing_changed_plans_nothing() {
        let defs = [definition("s1", &["a", "b"], "x")];
        let desired = desired_documents(&defs);
        assert_eq!(plan(&desired, &as_current(&desired), None), Plan::default());
    }

    #[test]
    fn a_deleted_key_is_rewritten_and_a_stale_one_removed() {
        let defs = [definition("s1", &["a", "b"], "x")];
        let desired = desired_documents(&defs);
        let mut current = as_current(&desired);
        current.remove("a");
        current.insert("gone".into(), Bytes::from_static(b"{}"));
        let p = plan(&desired, &current, None);
        assert_eq!(p.put.len(), 1);
        assert_eq!(p.put[0].0, "a");
        assert_eq!(p.remove, ["gone"]);
    }

    #[test]
    fn a_scoped_plan_touches_only_its_agents() {
        let before = desired_documents(&[definition("s1", &["a", "b"], "x")]);
        let after = desired_documents(&[definition("s1", &["a", "b"], "edited")]);
        let scope: BTreeSet<AgentName> = [agent("a")].into();
        let p = plan(&after, &as_current(&before), Some(&scope));
        assert_eq!(p.put.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(p.remove.is_empty());
    }

    proptest! {
        /// Applying a plan makes the keys equal the desired documents, and a second plan is empty.
        #[test]
        fn a_plan_converges(
            schedules in prop::collection::vec(
                (prop::collection::btree_set("[a-e]", 1..4), "[a-z]{1,3}"), 0..6),
            junk in prop::collection::btree_map("[a-g]", "[a-z]{0,3}", 0..6),
        ) {
            let defs: Vec<ScheduleDefinition> = schedules.iter().enumerate().map(|(i, (agents, body))| {
                let agents: Vec<&str> = agents.iter().map(String::as_str).collect();
                definition(&format!("s{i}"), &agents, body)
            }).collect();
            let desired = desired_documents(&defs);
            let mut current: HashMap<String, Bytes> =
                junk.into_iter().map(|(k, v)| (k, Bytes::from(v))).collect();
            let p = plan(&desired, &current, None);
            for (key, _) in &p.put {
                prop_assert!(current.get(key).map(|b| &b[..]) != Some(&desired[&agent(key)][..]));
            }
            for (key, bytes) in p.put { current.insert(key, Bytes::from(bytes)); }
            for key in p.remove { current.remove(&key); }
            prop_assert_eq!(&current, &as_current(&desired));
            prop_assert_eq!(plan(&desired, &current, None), Plan::default());
        }
    }
}
