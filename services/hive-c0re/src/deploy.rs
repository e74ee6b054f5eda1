//! The deploy consumer: the hive's durable pull consumer `hive-<hive>` on `DEPLOY`, filtered on
//! `deploy.<hive>`, made by the swarm-controller (hive-c0re binds to it, waiting while it is not
//! there yet). Each message's signature is checked against the controller keys the hive pins,
//! then it is opened with the hive's xkey and applied through the registry, which saves it
//! durably before it is acked. A refused message (unsigned or signed by a key not pinned, a bad
//! seal, another hive, malformed, a destroyed agent, an invalid spec) is terminated, so it is
//! never redelivered, with one log line saying why and who sent it; the line never holds a
//! secret. Without an xkey (`HIVE_C0RE_XKEY_FILE`) the consumer does
//! not run: messages wait in the stream until the hive has its key.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, message::Message};
use futures::StreamExt;
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::deploy::open;
use hyperhive_nats_objects::hive_deploy_consumer;
use tokio::sync::Mutex;
use tracing::{error, info, warn};

use crate::config::DeployKeys;
use crate::registry::{Applied, NotApplied, Registry};
use crate::runner::Runner;

/// Pause before trying again after a NATS error.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Consumes deploy messages forever.
pub async fn run<R: Runner>(
    js: jetstream::Context,
    hive: HiveName,
    keys: DeployKeys,
    registry: Arc<Mutex<Registry<R>>>,
) {
    loop {
        if let Err(e) = consume(&js, &hive, &keys, &registry).await {
            warn!("deploy consumer stopped, retrying in {RETRY_DELAY:?}: {e}");
        }
        tokio::time::sleep(RETRY_DELAY).await;
    }
}

async fn consume<R: Runner>(
    js: &jetstream::Context,
    hive: &HiveName,
    keys: &DeployKeys,
    registry: &Mutex<Registry<R>>,
) -> anyhow::Result<()> {
    // Bound, never created: the swarm-controller makes it (this credential may not).
    let consumer = hive_deploy_consumer(hive).bind_when_made(js).await?;
    let mut messages = consumer.messages().await?;
    info!("consuming deploy messages");
    while let Some(message) = messages.next().await {
        handle(message.map_err(|e| anyhow::anyhow!(e))?, hive, keys, registry).await?;
    }
    Ok(())
}

async fn handle<R: Runner>(
    message: Message,
    hive: &HiveName,
    keys: &DeployKeys,
    registry: &Mutex<Registry<R>>,
) -> anyhow::Result<()> {
    let payload = match open(&message.payload, hive, &keys.xkey, &keys.controller) {
        Ok(payload) => payload,
        Err(e) => return refuse(&message, &e.to_string()).await,
    };
    let (agent, kind, revision) = (payload.agent.clone(), payload.kind, payload.revision);
    let applied = registry.lock().await.deploy(payload);
    match applied {
        Ok(Applied::Changed) => info!(agent = %agent, kind = kind.as_str(), revision, "deploy applied"),
        Ok(Applied::AlreadyApplied) => {
            info!(agent = %agent, kind = kind.as_str(), revision, "deploy revision already applied; nothing to do");
        }
        Err(NotApplied::Refused(why)) => return refuse(&message, &why).await,
        Err(NotApplied::Failed(why)) => {
            error!(agent = %agent, "deploy not applied, handing it back to retry: {why}");
            message.ack_with(AckKind::Nak(Some(RETRY_DELAY))).await.map_err(|e| anyhow::anyhow!(e))?;
            return Ok(());
        }
    }
    message.double_ack().await.map_err(|e| anyhow::anyhow!(e))?;
    Ok(())
}

/// Terminates a refused message (it is never redelivered) with one line saying why.
async fn refuse(message: &Message, why: &str) -> anyhow::Result<()> {
    error!("deploy message refused: {why}");
    message.ack_with(AckKind::Term).await.map_err(|e| anyhow::anyhow!(e))
}
