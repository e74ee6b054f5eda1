//! The deliveries taken, KV `forge-deliveries`: each applied delivery's key is the SHA-256 of
//! its body, which the signature covers, and its value the event's name (the entry's own time
//! says when). The delivery id header is not signed, so a replay under
//! a new id is the same body and is found; the bucket outlives restarts, and its entries expire
//! after [`hyperhive_nats_objects::limits::FORGE_DELIVERIES_MAX_AGE`].

use async_nats::jetstream::kv;
use sha2::{Digest, Sha256};

/// The bucket of deliveries taken.
#[derive(Debug, Clone)]
pub struct Deliveries {
    kv: kv::Store,
}

impl Deliveries {
    /// Wraps the bucket made by `ensure_objects`.
    pub fn new(kv: kv::Store) -> Self {
        Self { kv }
    }

    /// Whether a delivery of this body was applied already.
    ///
    /// # Errors
    /// NATS errors, as text.
    pub async fn taken(&self, body: &[u8]) -> Result<bool, String> {
        match self.kv.entry(key(body)).await {
            Ok(entry) => Ok(entry.is_some_and(|e| e.operation == kv::Operation::Put)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Records the delivery of `body` as applied (after it was, so a failed one may come again).
    /// A failure is logged, not returned: the delivery was applied, and a replay of it meets the
    /// rule that an older state never replaces a newer one.
    pub async fn record(&self, body: &[u8], event: &str) {
        match self.kv.create(key(body), event.to_owned().into()).await {
            Ok(_) => {}
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => tracing::warn!("could not record a webhook delivery as taken (a replay may be applied): {e}"),
        }
    }
}

/// The key of a delivery: its body's SHA-256, in hex.
fn key(body: &[u8]) -> String {
    Sha256::digest(body).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_bodys_sha256() {
        assert_eq!(key(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_ne!(key(b"{\"a\":1}"), key(b"{\"a\":2}"));
    }
}
