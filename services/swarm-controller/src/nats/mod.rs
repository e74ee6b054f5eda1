//! The controller's NATS: its connection, what a failed write means, reading a whole KV bucket
//! in one pass ([`scan_bucket`]) and listing the keys under a few tokens ([`key_listing`]); the
//! tenants' accounts it changes while the swarm runs
//! ([`tenants`]), how the running server learns them ([`claims`]), the fragment a starting
//! server reads, rewritten after creations ([`fragment_refresh`]), and the tenants' durable
//! consumers it makes ([`consumers`]). The streams and buckets
//! themselves are named and made by `hyperhive_nats_objects`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures::StreamExt;
use hyperhive_nats_objects::{SetupError, kv_key_subject, kv_stream};

pub mod claims;
pub mod consumers;
pub mod fragment_refresh;
pub mod key_listing;
pub mod tenants;

/// A NATS step that failed; the message says which and why.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// Connecting failed (server down, bad credential file...).
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
    /// Making or checking a bucket or stream failed, or one exists with settings the swarm
    /// cannot work with.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Reading a bucket failed.
    #[error("reading bucket {bucket}: {reason}")]
    Scan {
        /// The bucket.
        bucket: String,
        /// Why.
        reason: String,
    },
}

/// A failed NATS request, with what it means for the caller: on a cluster a write can fail in
/// two ways that differ in what is known. No server led the stream (no quorum): nothing was
/// written. The write was not confirmed in time: it may still take effect once the cluster has
/// a quorum again, so the state must be read before the write is repeated.
pub fn what_to_do(error: &str) -> String {
    let lower = error.to_ascii_lowercase();
    if lower.contains("no stream found") || lower.contains("no responders") {
        // A publish to a stream with no leader has no responder at once, and so does one while
        // the quorum is lost: the controller cannot tell them apart, so it names both.
        format!(
            "{error}: no NATS server leads this bucket now: JetStream is electing a leader (a NATS node just stopped \
             or came back), or the cluster has lost its quorum, or NATS is away; nothing was written; try again in \
             a few seconds (if this goes on, bring the cluster's nodes back)"
        )
    } else if lower.contains("temporarily unavailable") {
        format!(
            "{error}: JetStream is electing a leader (a NATS node just stopped or came back); nothing was written; \
             try again in a few seconds (if this goes on, the cluster has lost its quorum: bring its nodes back)"
        )
    } else if lower.contains("timed out") || lower.contains("timeout") {
        format!(
            "{error}: NATS did not confirm in time (a cluster that lost its quorum, or NATS away); a write may still \
             take effect once NATS has a quorum again, so read the state before trying again"
        )
    } else {
        format!("{error}; try again")
    }
}

/// Connects with the controller's credential file, if any.
///
/// # Errors
/// [`NatsError::Connect`] when the server cannot be reached or refuses the credential.
pub async fn connect(url: &str, creds: Option<&Path>) -> Result<async_nats::Client, NatsError> {
    let connect_error = |reason: String| NatsError::Connect { url: url.to_owned(), reason };
    let options = match creds {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| connect_error(format!("reading credential {}: {e}", path.display())))?,
        None => async_nats::ConnectOptions::new(),
    };
    options
        .name("swarm-controller")
        .connection_timeout(Duration::from_secs(5))
        .connect(hyperhive_nats_creds::servers::server_list(url))
        .await
        .map_err(|e| connect_error(e.to_string()))
}

/// One live key of a bucket.
#[derive(Debug, Clone)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: Bytes,
    /// Its revision (the stream sequence).
    pub revision: u64,
}

/// How many times a scan asks the stream for its last sequence before it answers with what it
/// read: a bucket written faster than one round trip is listed as read by then.
const SCAN_CHECKS: u32 = 32;
/// How long a scan waits for its next message before it asks the stream whether one is due.
const SCAN_IDLE: Duration = Duration::from_secs(2);

/// Every live key of `bucket` with its value, by key: one ordered consumer delivering the whole
/// stream, so a bucket of any size is read in one stream rather than one request per key.
/// Deleted and purged keys are left out.
///
/// Every bucket keeps one value per key, so the whole stream is one message per key. A key
/// rewritten during the scan has its old message removed and its new one ahead of the consumer,
/// and the consumer's own count of what is pending can reach zero before that one (nats-server
/// does not count such removals reliably, and "the last message per key" plans its messages
/// when the consumer is made). So the scan ends only when the stream's last sequence, asked
/// once the consumer says nothing is pending, has been delivered.
///
/// # Errors
/// [`NatsError::Scan`] when the consumer cannot be made or fails mid-way.
pub async fn scan_bucket(js: &jetstream::Context, bucket: &str) -> Result<Vec<KeyValue>, NatsError> {
    let scan_error = |reason: String| NatsError::Scan { bucket: bucket.to_owned(), reason };
    let prefix = kv_key_subject(bucket, "");
    let stream = js.get_stream_no_info(kv_stream(bucket)).await.map_err(|e| scan_error(e.to_string()))?;
    let consumer = stream
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: js.client().new_inbox(),
            filter_subject: format!("{prefix}>"),
            deliver_policy: consumer::DeliverPolicy::All,
            replay_policy: consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(|e| scan_error(e.to_string()))?;
    // The server would keep the consumer for its inactivity threshold (30 s) after the scan; a
    // burst of listings (the UI, a script) must not pile them up until a limit refuses the next.
    let name = consumer.cached_info().name.clone();
    let scanned = read_to_end(&stream, consumer, &prefix).await.map_err(scan_error);
    if let Err(e) = stream.delete_consumer(&name).await {
        tracing::debug!(bucket, error = %e, "could not delete a scan's consumer; the server drops it within 30 s");
    }
    scanned
}

/// What the ordered consumer on `stream` delivers up to the stream's last message, the later
/// value of a key winning and a deleted or purged key left out.
async fn read_to_end(
    stream: &jetstream::stream::Stream<()>,
    consumer: consumer::Consumer<consumer::push::OrderedConfig>,
    prefix: &str,
) -> Result<Vec<KeyValue>, String> {
    let mut live = BTreeMap::new();
    let mut delivered = 0;
    let mut pending = consumer.cached_info().num_pending;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    for _ in 0..SCAN_CHECKS {
        while pending > 0 {
            let Ok(next) = tokio::time::timeout(SCAN_IDLE, messages.next()).await else { break };
            let message = next.ok_or("the consumer ended before the last key")?.map_err(|e| e.to_string())?;
            let info = message.info().map_err(|e| e.to_string())?;
            (delivered, pending) = (info.stream_sequence, info.pending);
            let Some(key) = message.subject.strip_prefix(prefix) else { continue };
            if message.headers.as_ref().is_some_and(hyperhive_nats_objects::kv_removal) {
                live.remove(key);
            } else {
                let value = KeyValue { key: key.to_owned(), value: message.payload.clone(), revision: delivered };
                live.insert(key.to_owned(), value);
            }
        }
        let state = stream.get_info().await.map_err(|e| e.to_string())?.state;
        if state.messages == 0 || delivered >= state.last_sequence {
            break;
        }
        pending = state.last_sequence - delivered;
    }
    Ok(live.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::what_to_do;

    #[test]
    fn a_failed_write_says_what_is_known() {
        let none = what_to_do("NATS: failed to put: no stream found for given subject");
        assert!(
            none.contains("electing a leader")
                && none.contains("nothing was written")
                && none.contains("try again in a few seconds")
                && none.contains("quorum"),
            "{none}"
        );
        let unknown = what_to_do("NATS: timed out: didn't receive ack in time");
        assert!(unknown.contains("may still take effect") && unknown.contains("read the state"), "{unknown}");
        let electing = what_to_do("failed getting entry: JetStream system temporarily unavailable (code 503)");
        assert!(
            electing.contains("electing a leader")
                && electing.contains("in a few seconds")
                && electing.contains("quorum"),
            "{electing}"
        );
        assert_eq!(what_to_do("NATS: connection closed"), "NATS: connection closed; try again");
    }
}
