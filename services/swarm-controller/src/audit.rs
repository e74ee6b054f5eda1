//! The audit log: every state-changing request the controller takes (any method but GET that
//! reaches a route, refusals included), appended to `AUDIT` with who sent it, how, with which
//! role, and the answer's status; read back newest first (`GET /api/audit`, admins only).
//!
//! An entry never holds a body: a prompt, a secret's value or a spec stays out; the path names at
//! most a secret's variable or a todo's id. Only the controller's account has the stream.

use async_nats::jetstream::{self, stream};
use hyperhive_nats_objects::{AUDIT_STREAM, AUDIT_SUBJECT};
use hyperhive_swarm_api::audit::{AuditEntry, AuditView};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The longest path an entry keeps (a longer one is cut, marked with `…`).
const MAX_PATH: usize = 512;
/// How many times an entry's publish is tried.
const ATTEMPTS: u32 = 3;

/// A read of the log NATS did not complete.
#[derive(Debug, thiserror::Error)]
#[error("reading the audit log: {0}")]
pub struct AuditUnavailable(String);

/// Writes and reads `AUDIT`.
#[derive(Debug, Clone)]
pub struct AuditLog {
    js: jetstream::Context,
}

impl AuditLog {
    /// The log in `js`'s `AUDIT`.
    pub fn new(js: jetstream::Context) -> Self {
        Self { js }
    }

    /// Appends `entry` in the background (the request's answer does not wait for it); a publish
    /// that fails after a few tries is logged with the entry, so the journal still holds it.
    pub fn record(&self, mut entry: AuditEntry) {
        if entry.path.len() > MAX_PATH {
            let cut = (0..=MAX_PATH).rev().find(|&i| entry.path.is_char_boundary(i)).unwrap_or(0);
            entry.path.truncate(cut);
            entry.path.push('…');
        }
        let js = self.js.clone();
        tokio::spawn(async move {
            let payload: bytes::Bytes = serde_json::to_vec(&entry).expect("an entry serializes").into();
            let mut last = String::new();
            for _ in 0..ATTEMPTS {
                match js.publish(AUDIT_SUBJECT, payload.clone()).await {
                    Ok(ack) => match ack.await {
                        Ok(_) => return,
                        Err(e) => last = e.to_string(),
                    },
                    Err(e) => last = e.to_string(),
                }
            }
            tracing::warn!(
                who = entry.who,
                method = entry.method,
                path = entry.path,
                status = entry.status,
                "could not append to the audit log: {last}"
            );
        });
    }

    /// Up to `limit` entries before sequence `before` (from the newest when `None`), newest first,
    /// none older than `since`; and the `before` of the next page.
    ///
    /// # Errors
    /// [`AuditUnavailable`].
    pub async fn page(
        &self,
        before: Option<u64>,
        limit: usize,
        since: Option<OffsetDateTime>,
    ) -> Result<(Vec<AuditView>, Option<u64>), AuditUnavailable> {
        let failed = |e: &dyn std::fmt::Display| AuditUnavailable(e.to_string());
        let mut stream = self.js.get_stream(AUDIT_STREAM).await.map_err(|e| failed(&e))?;
        let state = stream.info().await.map_err(|e| failed(&e))?.state.clone();
        let mut seq = before.map_or(state.last_sequence, |b| b.saturating_sub(1)).min(state.last_sequence);
        let mut entries = Vec::new();
        while seq >= state.first_sequence.max(1) && entries.len() < limit {
            match stream.direct_get(seq).await {
                Ok(message) => {
                    // An entry that does not parse (none the controller writes) is left out.
                    if let Ok(entry) = serde_json::from_slice::<AuditEntry>(&message.payload) {
                        let at = OffsetDateTime::parse(&entry.at, &Rfc3339).ok();
                        if since.is_some_and(|since| at.is_some_and(|at| at < since)) {
                            return Ok((entries, None));
                        }
                        entries.push(AuditView { seq, entry });
                    }
                }
                // Dropped by the limits between the info and the get.
                Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => {}
                Err(e) => return Err(failed(&e)),
            }
            seq -= 1;
        }
        let next =
            (seq >= state.first_sequence.max(1) && entries.len() == limit).then(|| entries.last().map(|v| v.seq));
        Ok((entries, next.flatten()))
    }
}
