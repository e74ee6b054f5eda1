//! The periodic pass over every tenant's durable consumers (their rules: `nats/consumers.rs`): at
//! start and on every reconcile pass, for every tenant the controller knows: each hive of the hive
//! directory, each agent and hive minted in `SWARM_NATS_DIR` (agents declared on a host are minted
//! there by `nats agent-creds`), and each agent on the roster. The pass reads each stream's
//! consumers a page at a time (one request for up to 256) and asks after one consumer only where
//! the page shows it missing or different: an idle swarm's pass costs a request per 256 tenants,
//! not one per tenant.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_nats_creds::{AgentName, HiveName};
use hyperhive_nats_objects::{DurableConsumer, Ensured, agent_consumer, hive_consumers};

use crate::lifecycle::roster::Roster;

/// What one pass over every known tenant did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    /// Consumers made where there was none.
    pub created: usize,
    /// Consumers replaced because their configuration differed.
    pub replaced: usize,
    /// Consumers that could not be checked or made (logged; tried again next pass).
    pub failed: usize,
}

/// Every tenant the controller knows, and their consumers.
#[derive(Debug, Clone)]
pub struct TenantConsumers {
    /// The controller's JetStream.
    pub js: jetstream::Context,
    /// The hive directory.
    pub hives: Arc<HiveDirectory>,
    /// The roster's agents.
    pub roster: Roster,
    /// `SWARM_NATS_DIR`: the tenants minted there.
    pub nats_dir: Option<PathBuf>,
}

impl TenantConsumers {
    /// The agents and hives the controller knows now. A source that cannot be read is logged
    /// and left out of this pass.
    async fn known(&self) -> (BTreeSet<AgentName>, BTreeSet<HiveName>) {
        let mut hives: BTreeSet<HiveName> = self.hives.keys().cloned().collect();
        let mut agents = BTreeSet::new();
        if let Some(dir) = self.nats_dir.clone() {
            match tokio::task::spawn_blocking(move || hyperhive_nats_creds::minted_tenants(&dir)).await {
                Ok(Ok(minted)) => {
                    agents.extend(minted.agents);
                    hives.extend(minted.hives);
                }
                Ok(Err(e)) => tracing::warn!("cannot read the tenants minted in SWARM_NATS_DIR: {e}"),
                Err(e) => tracing::warn!("reading the tenants minted in SWARM_NATS_DIR failed: {e}"),
            }
        }
        match self.roster.list().await {
            Ok(roster) => agents.extend(roster.into_keys()),
            Err(e) => tracing::warn!("cannot read the roster for its agents' consumers: {e}"),
        }
        (agents, hives)
    }

    /// Makes every known tenant's consumers as the swarm configures them.
    pub async fn pass(&self) -> PassReport {
        let (agents, hives) = self.known().await;
        let wanted: Vec<DurableConsumer> =
            agents.iter().map(agent_consumer).chain(hives.iter().flat_map(hive_consumers)).collect();
        let listed = self.listed(&wanted).await;
        let mut report = PassReport::default();
        for consumer in &wanted {
            let found = listed.get(&(consumer.stream.clone(), consumer.durable().to_owned()));
            if !found.is_some_and(|config| consumer.matches(config)) {
                self.ensure_one(consumer, &mut report).await;
            }
        }
        report
    }

    /// The consumers of the streams `wanted` is on, by stream and name, as their listings show
    /// them now. A stream whose listing fails is left out from there on: its consumers not
    /// listed are then each checked and made on their own.
    async fn listed(&self, wanted: &[DurableConsumer]) -> HashMap<(String, String), consumer::Config> {
        let streams: BTreeSet<&str> = wanted.iter().map(|c| c.stream.as_str()).collect();
        let mut listed = HashMap::new();
        for name in streams {
            let stream = match self.js.get_stream_no_info(name).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!(stream = name, "cannot open the stream to list its consumers: {e}");
                    continue;
                }
            };
            let mut consumers = stream.consumers();
            while let Some(info) = consumers.next().await {
                match info {
                    Ok(info) => {
                        listed.insert((name.to_owned(), info.name), info.config);
                    }
                    Err(e) => {
                        tracing::warn!(
                            stream = name,
                            "listing the stream's consumers failed; checking the rest one by one: {e}"
                        );
                        break;
                    }
                }
            }
        }
        listed
    }

    async fn ensure_one(&self, consumer: &DurableConsumer, report: &mut PassReport) {
        match consumer.ensure(&self.js).await {
            Ok(Ensured::Kept) => {}
            Ok(Ensured::Created) => report.created += 1,
            Ok(Ensured::Replaced) => report.replaced += 1,
            Err(e) => {
                report.failed += 1;
                tracing::warn!("tenant consumer not made; retrying at the next pass: {e}");
            }
        }
    }
}
