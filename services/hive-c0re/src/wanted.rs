//! Watching the wanted state: the hive's durable pull consumer `hive-<hive>` on `KV_agent-wanted`,
//! filtered on `$KV.agent-wanted.<hive>.*`, delivering the last value per key, made by the
//! swarm-controller (hive-c0re binds to it, waiting while it is not there yet). Each value is
//! recorded locally (and converged to) before it is acked. At start every known agent's key is
//! also read by direct get, so a hive whose local state was lost converges too.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, message::Message, stream::DirectGetErrorKind};
use futures::StreamExt;
use hyperhive_hive_proto::wanted::{Wanted, parse_wanted_key, wanted_key};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_objects::{AGENT_WANTED_BUCKET, hive_wanted_consumer, kv_key_subject, kv_stream};
use tokio::sync::Mutex;
use tracing::{error, info, warn};

use crate::registry::Registry;
use crate::runner::Runner;

/// Pause before trying again after a NATS error.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How long the agents wait at start for their wanted states to be read from NATS; after that
/// (NATS down) they start on their local records and the reads go on in the background.
const START_PATIENCE: Duration = Duration::from_secs(10);

/// Reads every known agent's key, starts the agents, then consumes changes, forever.
pub async fn run<R: Runner>(js: jetstream::Context, hive: HiveName, registry: Arc<Mutex<Registry<R>>>) {
    let patience = tokio::time::Instant::now() + START_PATIENCE;
    while let Err(e) = read_all(&js, &hive, &registry).await {
        warn!("cannot read the wanted states at start, retrying: {e}");
        if tokio::time::Instant::now() >= patience {
            registry.lock().await.start_all();
        }
        tokio::time::sleep(RETRY_DELAY).await;
    }
    registry.lock().await.start_all();
    loop {
        if let Err(e) = consume(&js, &hive, &registry).await {
            warn!("wanted-state consumer stopped, retrying in {RETRY_DELAY:?}: {e}");
        }
        tokio::time::sleep(RETRY_DELAY).await;
    }
}

fn stream_name() -> String {
    kv_stream(AGENT_WANTED_BUCKET)
}

async fn read_all<R: Runner>(
    js: &jetstream::Context,
    hive: &HiveName,
    registry: &Mutex<Registry<R>>,
) -> anyhow::Result<()> {
    let stream = js.get_stream_no_info(stream_name()).await?;
    let known: Vec<AgentName> = registry.lock().await.known();
    for agent in known {
        let key = kv_key_subject(AGENT_WANTED_BUCKET, &wanted_key(hive, &agent));
        let (wanted, revision) = match stream.direct_get_last_for_subject(&key).await {
            Ok(message) => (
                parse(&message.headers, &message.payload).map_err(|e| anyhow::anyhow!("{key}: {e}"))?,
                message.sequence,
            ),
            // No value at all (never written): revision 0, which a known revision outranks, since
            // a replica that lags may not have the key yet.
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => (None, 0),
            Err(e) => return Err(e.into()),
        };
        registry.lock().await.set_wanted(&agent, wanted, revision, true)?;
    }
    Ok(())
}

/// A value (`None` for a deleted or purged key).
fn parse(headers: &async_nats::HeaderMap, payload: &[u8]) -> Result<Option<Wanted>, String> {
    if hyperhive_nats_objects::kv_removal(headers) {
        return Ok(None);
    }
    serde_json::from_slice(payload).map(Some).map_err(|e| format!("not a wanted-state document: {e}"))
}

async fn consume<R: Runner>(
    js: &jetstream::Context,
    hive: &HiveName,
    registry: &Mutex<Registry<R>>,
) -> anyhow::Result<()> {
    // Bound, never created: the swarm-controller makes it (this credential may not).
    let consumer = hive_wanted_consumer(hive).bind_when_made(js).await?;
    let mut messages = consumer.messages().await?;
    info!("watching wanted states");
    while let Some(message) = messages.next().await {
        handle(message.map_err(|e| anyhow::anyhow!(e))?, hive, registry).await?;
    }
    Ok(())
}

async fn handle<R: Runner>(message: Message, hive: &HiveName, registry: &Mutex<Registry<R>>) -> anyhow::Result<()> {
    let key = message.subject.strip_prefix(&kv_key_subject(AGENT_WANTED_BUCKET, "")).unwrap_or_default();
    let agent = match parse_wanted_key(key) {
        Some((for_hive, agent)) if &for_hive == hive => agent,
        _ => {
            error!(subject = %message.subject, "ignoring a wanted-state key that is not <this hive>.<agent>");
            message.ack_with(AckKind::Term).await.map_err(|e| anyhow::anyhow!(e))?;
            return Ok(());
        }
    };
    let empty = async_nats::HeaderMap::new();
    let wanted = match parse(message.headers.as_ref().unwrap_or(&empty), &message.payload) {
        Ok(wanted) => wanted,
        Err(e) => {
            error!(agent = %agent, "ignoring wanted state: {e}");
            message.ack_with(AckKind::Term).await.map_err(|e| anyhow::anyhow!(e))?;
            return Ok(());
        }
    };
    let revision = message.info().map_err(|e| anyhow::anyhow!(e))?.stream_sequence;
    info!(agent = %agent, wanted = ?wanted.as_ref().map(|w| w.state), revision, "wanted state");
    registry.lock().await.set_wanted(&agent, wanted, revision, false)?;
    message.double_ack().await.map_err(|e| anyhow::anyhow!(e))?;
    Ok(())
}
