//! Listing the live keys of a bucket under a few leading tokens (`agent.alpha.>`), reading only
//! those keys' subjects: what an agent's own records cost must not grow with the swarm.
//! `kv::Store::keys` lists the whole bucket, which made every deploy message read every
//! agent's secret records three times.

use std::time::Duration;

use async_nats::jetstream::{consumer, kv};
use futures::StreamExt;

/// How long the listing waits for its next key before it gives up.
const NEXT_KEY_WAIT: Duration = Duration::from_secs(5);
/// How long the server keeps a listing's consumer when the listing could not delete it.
const INACTIVE_THRESHOLD: Duration = Duration::from_secs(30);

/// The live keys of `bucket` that start with `head`, each once, in no set order. `head` is
/// empty or whole tokens ending in a dot (`agent.alpha.`), since only whole tokens make a
/// subject filter; a caller wanting a partial last token filters what comes back.
///
/// One ephemeral pull consumer delivering the headers of each matching key's last message (as
/// `kv::Store::keys` does for the whole bucket with a push consumer, which needs the client's
/// inbox); deleted and purged keys are left out.
///
/// # Errors
/// Why the consumer could not be made or stopped delivering, as text.
pub async fn keys_under(bucket: &kv::Store, head: &str) -> Result<Vec<String>, String> {
    if !(head.is_empty() || head.ends_with('.')) {
        return Err(format!("a key listing's head is whole tokens ending in a dot, not {head:?}"));
    }
    let prefix = &bucket.prefix;
    let consumer = bucket
        .stream
        .create_consumer(consumer::pull::Config {
            filter_subject: format!("{prefix}{head}>"),
            headers_only: true,
            deliver_policy: consumer::DeliverPolicy::LastPerSubject,
            ack_policy: consumer::AckPolicy::None,
            replay_policy: consumer::ReplayPolicy::Instant,
            inactive_threshold: INACTIVE_THRESHOLD,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let name = consumer.cached_info().name.clone();
    let listed = read_keys(consumer, prefix).await;
    // Left alone, the server would keep the consumer for its inactivity threshold; deploys in a
    // burst must not pile them up until a limit refuses the next.
    if let Err(e) = bucket.stream.delete_consumer(&name).await {
        tracing::debug!(bucket = %bucket.name, error = %e, "could not delete a key listing's consumer; the server drops it soon");
    }
    listed
}

async fn read_keys(consumer: consumer::Consumer<consumer::pull::Config>, prefix: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    if consumer.cached_info().num_pending == 0 {
        return Ok(keys);
    }
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    loop {
        let next = tokio::time::timeout(NEXT_KEY_WAIT, messages.next())
            .await
            .map_err(|_| format!("no key came within {NEXT_KEY_WAIT:?} while more were due"))?;
        let message = next.ok_or("the listing ended before its last key")?.map_err(|e| e.to_string())?;
        let pending = message.info().map_err(|e| e.to_string())?.pending;
        let removed = message.headers.as_ref().is_some_and(hyperhive_nats_objects::kv_removal);
        if let (false, Some(key)) = (removed, message.subject.strip_prefix(prefix)) {
            keys.push(key.to_owned());
        }
        if pending == 0 {
            return Ok(keys);
        }
    }
}
