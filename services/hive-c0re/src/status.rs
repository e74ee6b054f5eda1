//! The status publisher: puts the hive's [`HiveStatus`] to `$KV.hive-status.<hive>` every
//! `HIVE_C0RE_STATUS_SECS` and soon after any change. Changes are gathered for [`DEBOUNCE`]
//! first, so many agents changing together (a restart of hive-c0re with 200 agents) make a few
//! publishes, not hundreds.

use std::path::Path;
use std::time::Duration;

use async_nats::jetstream;
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::agent_files::{MAX_TURN_FILE_BYTES, TURN_FILE, TurnState};
use hyperhive_hive_proto::status::{ActualState, HiveStatus};
use hyperhive_nats_objects::hive_status_subject;
use tracing::{debug, warn};

use crate::agent_file::{self, AgentFileError};
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
                    (status.turn, status.problem) = turn_of(&entry.turn_file);
                }
                (agent, status)
            })
            .collect();
        let status = HiveStatus {
            hive: self.hive.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: self.started_at.clone(),
            published_at: crate::now(),
            load: load(),
            agents,
        };
        within_limit(status)
    }
}

/// The agent's turn as its turn file says, or why that file could not be taken (the agent
/// writes it; see [`crate::agent_file`]). No file yet is no problem.
fn turn_of(path: &Path) -> (Option<TurnState>, Option<String>) {
    match agent_file::read(path, MAX_TURN_FILE_BYTES) {
        Ok(bytes) => match serde_json::from_slice::<TurnState>(&bytes) {
            Ok(turn) => (Some(turn), None),
            Err(e) => (None, Some(format!("{TURN_FILE} is not a turn state: {e}"))),
        },
        Err(AgentFileError::Missing) => (None, None),
        Err(e) => (None, Some(format!("{TURN_FILE}: {e}"))),
    }
}

/// Serializes `status`, leaving out the log tails if it would exceed [`MAX_STATUS_BYTES`].
fn within_limit(mut status: HiveStatus) -> Vec<u8> {
    let bytes = serde_json::to_vec(&status).expect("a status serializes");
    if bytes.len() <= MAX_STATUS_BYTES {
        return bytes;
    }
    warn!(bytes = bytes.len(), "the hive status is over 1 MiB; leaving out the log tails");
    status.agents.values_mut().for_each(|a| a.log_tail.clear());
    serde_json::to_vec(&status).expect("a status serializes")
}

/// The 1, 5 and 15 minute load averages (zeros if `/proc/loadavg` cannot be read).
fn load() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut fields = text.split_whitespace().map(|f| f.parse().unwrap_or(0.0));
    [fields.next().unwrap_or(0.0), fields.next().unwrap_or(0.0), fields.next().unwrap_or(0.0)]
}

#[cfg(test)]
mod tests {
    use hyperhive_hive_proto::AgentName;
    use hyperhive_hive_proto::roster::Origin;
    use hyperhive_hive_proto::status::{AgentStatus, LOG_TAIL_BYTES};
    use hyperhive_hive_proto::wanted::WantedState;

    use super::*;

    #[test]
    fn log_tails_are_dropped_first_when_the_status_would_pass_one_mib() {
        let agent = |tail: &str| AgentStatus {
            origin: Origin::Created,
            wanted: WantedState::Up,
            actual: ActualState::Failed,
            since: crate::now(),
            restarts: 4,
            last_exit: None,
            log_tail: vec![tail.to_owned()],
            turn: None,
            revision: Some(1),
            problem: None,
        };
        let status = |agents: usize| HiveStatus {
            hive: HiveName::parse("h").unwrap(),
            version: "0".into(),
            started_at: crate::now(),
            published_at: crate::now(),
            load: [0.0; 3],
            agents: (0..agents)
                .map(|i| (AgentName::parse(&format!("a{i}")).unwrap(), agent(&"x".repeat(LOG_TAIL_BYTES))))
                .collect(),
        };
        let small: HiveStatus = serde_json::from_slice(&within_limit(status(3))).unwrap();
        assert!(small.agents.values().all(|a| !a.log_tail.is_empty()), "a small status keeps its tails");
        let big = within_limit(status(1000));
        assert!(big.len() <= MAX_STATUS_BYTES, "{}", big.len());
        let big: HiveStatus = serde_json::from_slice(&big).unwrap();
        assert_eq!(big.agents.len(), 1000, "every agent is still there");
        assert!(big.agents.values().all(|a| a.log_tail.is_empty()));
    }
}
