//! Wanted state, KV `agent-wanted`, key `<hive>.<agent>`: written only by the controller, every
//! write a compare-and-set on the key's revision (create-if-absent for the first).

use std::collections::BTreeMap;

use async_nats::jetstream::{self, kv};
use hyperhive_hive_proto::wanted::{Wanted, parse_wanted_key, wanted_key};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_objects::{AGENT_WANTED_BUCKET, kv_key_subject, kv_stream};

use crate::nats::{NatsError, scan_bucket};

/// A wanted state with the revision it was read at (the `If-Match` value for its next change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The document.
    pub wanted: Wanted,
    /// Its revision in `agent-wanted`.
    pub revision: u64,
}

/// A failed write.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The key is not at the revision the write was based on (or exists when none was expected).
    #[error("the wanted state changed meanwhile")]
    Conflict,
    /// NATS refused or is unreachable.
    #[error("NATS: {0}")]
    Nats(String),
}

/// The `agent-wanted` bucket.
#[derive(Debug, Clone)]
pub struct WantedStore {
    js: jetstream::Context,
    kv: kv::Store,
}

impl WantedStore {
    /// Wraps the bucket made by [`hyperhive_nats_objects::ensure_objects`].
    pub fn new(js: jetstream::Context, kv: kv::Store) -> Self {
        Self { js, kv }
    }

    /// The wanted state of `agent` on `hive`, if one was ever written (and is readable), read
    /// from the stream's leader. The bucket allows direct get (hives read their keys that way),
    /// and on a cluster a direct get may be answered by a replica that lags; this read is the base
    /// of a compare-and-set and of what the API shows, so it must be the newest.
    ///
    /// # Errors
    /// NATS errors, as text.
    pub async fn get(&self, hive: &HiveName, agent: &AgentName) -> Result<Option<Stored>, String> {
        use async_nats::jetstream::stream::LastRawMessageErrorKind;
        let key = wanted_key(hive, agent);
        let stream = self.js.get_stream_no_info(kv_stream(AGENT_WANTED_BUCKET)).await.map_err(|e| e.to_string())?;
        let message = match stream.get_last_raw_message_by_subject(&kv_key_subject(AGENT_WANTED_BUCKET, &key)).await {
            Ok(message) => message,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        if hyperhive_nats_objects::kv_removal(&message.headers) {
            return Ok(None);
        }
        Ok(decode(&key, &message.payload).map(|wanted| Stored { wanted, revision: message.sequence }))
    }

    /// Every readable wanted state, by (hive, agent).
    ///
    /// # Errors
    /// [`NatsError::Scan`].
    pub async fn list(&self) -> Result<BTreeMap<(HiveName, AgentName), Stored>, NatsError> {
        Ok(scan_bucket(&self.js, AGENT_WANTED_BUCKET)
            .await?
            .into_iter()
            .filter_map(|kv| {
                let names = parse_wanted_key(&kv.key)?;
                let wanted = decode(&kv.key, &kv.value)?;
                Some((names, Stored { wanted, revision: kv.revision }))
            })
            .collect())
    }

    /// Writes `wanted` if the key is still at `based_on` (`None`: only if it does not exist).
    ///
    /// # Errors
    /// [`WriteError::Conflict`] when it is not, else [`WriteError::Nats`].
    pub async fn put(
        &self,
        hive: &HiveName,
        agent: &AgentName,
        wanted: &Wanted,
        based_on: Option<u64>,
    ) -> Result<u64, WriteError> {
        let key = wanted_key(hive, agent);
        let bytes = serde_json::to_vec(wanted).map_err(|e| WriteError::Nats(e.to_string()))?;
        match based_on {
            None => self.kv.create(&key, bytes.into()).await.map_err(|e| match e.kind() {
                kv::CreateErrorKind::AlreadyExists => WriteError::Conflict,
                _ => WriteError::Nats(e.to_string()),
            }),
            Some(revision) => self.kv.update(&key, bytes.into(), revision).await.map_err(|e| match e.kind() {
                kv::UpdateErrorKind::WrongLastRevision => WriteError::Conflict,
                _ => WriteError::Nats(e.to_string()),
            }),
        }
    }
}

fn decode(key: &str, value: &[u8]) -> Option<Wanted> {
    serde_json::from_slice(value)
        .inspect_err(|err| tracing::error!(key, %err, "skipping an unreadable wanted state"))
        .ok()
}
