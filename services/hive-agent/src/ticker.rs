//! The schedule ticker: every tick, read this agent's key in `agent-schedules` by direct get (the
//! only read its credential grants; never `get_key_value`, which asks for stream info), fire each
//! due slot to its own queue with a message id only this agent can make ([`slot_message_id`]),
//! and only then record the slot. A crash between publish and record republishes the same
//! message id, which JetStream drops within its duplicate window.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream::DirectGetErrorKind};
use hmac::{Hmac, Mac};
use hyperhive_nats_objects::{AGENT_SCHEDULES_BUCKET, kv_key_subject, kv_stream, todo_subject};
use hyperhive_schedule::{AgentName, AgentSchedules, Todo, due_slot, format_instant};
use sha2::Sha256;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::clock::Clock;
use crate::error::{LoopError, nats};
use crate::pause::Pause;
use crate::state::State;

/// The `Nats-Msg-Id` of a slot's todo: its id and an HMAC-SHA256 of it under this agent's own
/// key. JetStream drops a repeated id across the whole `TODO` stream, so an id another agent
/// could predict could be published first, into that agent's own queue, and this agent's todo
/// would then be dropped as a duplicate. The same slot always gets the same id, so a publish
/// repeated after a crash is still dropped.
pub fn slot_message_id(key: &[u8; 32], todo_id: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(todo_id.as_bytes());
    let tag = mac.finalize().into_bytes();
    let hex: String = tag[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{todo_id}:{hex}")
}

/// What the ticker needs.
#[derive(Debug)]
pub struct Ticker {
    pub(crate) agent: AgentName,
    pub(crate) js: jetstream::Context,
    pub(crate) state: State,
    /// The key of this agent's slot message ids (see [`slot_message_id`]).
    pub(crate) message_id_key: [u8; 32],
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) period: Duration,
    /// Counts finished ticks, so tests can wait for "n more ticks" instead of sleeping.
    pub(crate) ticks: watch::Sender<u64>,
    /// Consecutive ticks that read a revision older than the one applied.
    pub(crate) older_streak: AtomicU32,
    /// Calendars this build cannot evaluate, already reported (schedule id, line and zone), so
    /// each is logged once rather than every tick.
    pub(crate) refused: Mutex<HashSet<String>>,
    /// While paused, no slot fires; on resume the slot rule fires the latest missed one once.
    pub(crate) pause: Pause,
}

/// A lagging replica answers with an older revision for seconds; an older revision for this
/// many ticks in a row means the bucket was deleted and recreated (its revisions restarted),
/// and waiting longer would ignore every schedule written since.
pub const OLDER_TICKS_BEFORE_RESET: u32 = 30;

impl Ticker {
    /// Ticks forever.
    pub async fn run(self) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            if let Err(e) = self.tick().await {
                warn!("schedule tick failed, retrying next tick: {e}");
            }
            self.ticks.send_modify(|n| *n += 1);
        }
    }

    async fn tick(&self) -> Result<(), LoopError> {
        if self.pause.check() {
            return Ok(());
        }
        let Some(doc) = self.read_schedules().await? else {
            return Ok(());
        };
        for schedule in &doc.schedules {
            if let Err(e) = schedule.calendar() {
                let key = format!("{} {:?} {:?}", schedule.id, schedule.calendar, schedule.tz);
                if self.refused.lock().expect("the refused set is never poisoned").insert(key) {
                    warn!(
                        schedule = %schedule.id,
                        "refusing a calendar this hive-agent cannot evaluate; it fires nothing \
                         until the schedule is changed or hive-agent is upgraded: {e}"
                    );
                }
                continue;
            }
            let now = self.clock.now();
            let last = self.state.last_fired(&schedule.id)?;
            let Some(slot) = due_slot(schedule, last, now) else {
                continue;
            };
            let todo = Todo::for_slot(&self.agent, &schedule.id, &schedule.body, slot);
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", slot_message_id(&self.message_id_key, &todo.id).as_str());
            let payload = serde_json::to_vec(&todo).expect("a todo of three strings serializes");
            let ack = self
                .js
                .publish_with_headers(todo_subject(&self.agent), headers, payload.into())
                .await
                .map_err(nats("publishing a slot's todo"))?
                .await
                .map_err(nats("waiting for the todo's publish ack"))?;
            self.state.record_fired(&schedule.id, slot)?;
            info!(
                schedule = %schedule.id,
                slot = %format_instant(slot),
                duplicate = ack.duplicate,
                "fired schedule slot"
            );
        }
        Ok(())
    }

    /// This agent's schedules, or `None` when the answer is older than one already applied
    /// (a lagging replica). A missing or deleted key means no schedules.
    async fn read_schedules(&self) -> Result<Option<AgentSchedules>, LoopError> {
        let bucket = self
            .js
            .get_stream_no_info(kv_stream(AGENT_SCHEDULES_BUCKET))
            .await
            .map_err(nats("opening agent-schedules"))?;
        let key = kv_key_subject(AGENT_SCHEDULES_BUCKET, self.agent.as_str());
        let message = match bucket.direct_get_last_for_subject(key).await {
            Ok(message) => message,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => {
                return Ok(Some(AgentSchedules::new(Vec::new())));
            }
            Err(e) => return Err(nats("reading its schedules by direct get")(e)),
        };
        let applied = self.state.applied_revision()?;
        if message.sequence < applied {
            let streak = self.older_streak.fetch_add(1, Ordering::Relaxed) + 1;
            if streak < OLDER_TICKS_BEFORE_RESET {
                debug!(revision = message.sequence, applied, "ignoring an older schedules revision");
                return Ok(None);
            }
            warn!(
                revision = message.sequence,
                applied,
                "agent-schedules has answered with an older revision for {streak} ticks: the \
                 bucket was recreated; applying it"
            );
            self.state.reset_revision(message.sequence)?;
        }
        self.older_streak.store(0, Ordering::Relaxed);
        let doc = if hyperhive_nats_objects::kv_removal(&message.headers) {
            AgentSchedules::new(Vec::new())
        } else {
            AgentSchedules::from_bytes(&message.payload)?
        };
        if message.sequence > applied {
            info!(revision = message.sequence, schedules = doc.schedules.len(), "applied schedules");
            self.state.record_revision(message.sequence)?;
        }
        Ok(Some(doc))
    }
}
