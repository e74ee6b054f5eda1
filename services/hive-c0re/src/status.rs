//! The status publisher: puts the hive's [`HiveStatus`] to `$KV.hive-status.<hive>` every
//! `HIVE_C0RE_STATUS_SECS` and soon after any change. Changes are gathered for [`DEBOUNCE`]
//! first, so many agents changing together (a restart of hive-c0re with 200 agents) make a few
//! publishes, not hundreds.

use std::time::Duration;

use async_nats::jetstream;
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::agent_files::TurnState;
use hyperhive_hive_proto::status::{ActualState, HiveStatus};
use hyperhive_nats_creds::hive_status_subject;
use tracing::{debug, warn};

use crate::board::Board;

/// How long changes are gathered before a publish.
pub const DEBOUNCE: Duration = Duration::from_millis(150);
/// The largest status document: the bucket's value limit is 1 MiB; log tails go first.
pub const MAX_STATUS_BYTES: usize = 1 << 20;

/// What the publisher needs.
#[derive(Debug)]
pub struct Publisher {
    /// The hive's JetStream context.
    pub js: jetstream::Context,
    /// The hive.
    pub hive: HiveName,
    /// The agents' statuses.
    pub board: Board,
    /// How often to publish when nothing changes.
    pub every: Duration,
    /// When this hive-c0re started (RFC 3339).
    pub started_at: String,
}

impl Publisher {
    /// Publishes forever.
    pub async fn run(self) {
        let mut interval = tokio::time::interval(self.every);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                () = self.board.changed() => tokio::time::sleep(DEBOUNCE).await,
            }
            let bytes = self.document();
            match self.js.publish(hive_status_subject(&self.hive), bytes.into()).await {
                Ok(ack) => match ack.await {
                    Ok(ack) => debug!(revision = ack.sequence, "published the hive status"),
                    Err(e) => warn!("the hive status was not stored: {e}"),
                },
                Err(e) => warn!("cannot publish the hive status: {e}"),
            }
        }
    }

    /// The status now, serialized, within [`MAX_STATUS_BYTES`].
    pub fn document(&self) -> Vec<u8> {
        let agents = self
            .board
            .snapshot()
            .into_iter()
            .map(|(agent, entry)| {
                let mut status = entry.status;
                if matches!(status.actual, ActualState::Running | ActualState::Paused) {
                    status.turn = std::fs::read(&entry.turn_file)
                        .ok()
                        .and_then(|bytes| serde_json::from_slice::<TurnState>(&bytes).ok());
                }
                (agent, status)
            })
            .collect();
        let mut status = HiveStatus {
            hive: self.hive.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: self.started_at.clone(),
            published_at: crate::now(),
            load: load(),
            agents,
        };
        let mut bytes = serde_json::to_vec(&status).expect("a status serializes");
        if bytes.len() > MAX_STATUS_BYTES {
            warn!(bytes = bytes.len(), "the hive status is over 1 MiB; leaving out the log tails");
            status.agents.values_mut().for_each(|a| a.log_tail.clear());
            bytes = serde_json::to_vec(&status).expect("a status serializes");
        }
        bytes
    }
}

/// The 1, 5 and 15 minute load averages (zeros if `/proc/loadavg` cannot be read).
fn load() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut fields = text.split_whitespace().map(|f| f.parse().unwrap_or(0.0));
    [fields.next().unwrap_or(0.0), fields.next().unwrap_or(0.0), fields.next().unwrap_or(0.0)]
}
