//! The todo an agent consumes, and the ids a fired slot's todo carries.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::instant::{format_instant, parse_instant};
use crate::name::AgentName;

/// One unit of work, published as JSON on `todo.<agent>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// Unique per todo; a finished id never runs again.
    pub id: String,
    /// Who asked: `schedule:<id>` for a fired slot.
    pub source: String,
    /// The prompt, given to the turn on stdin.
    pub body: String,
}

impl Todo {
    /// The todo a fired slot publishes to `agent`; its id is the slot's message id, so the same
    /// slot is the same todo however often it is published.
    pub fn for_slot(agent: &AgentName, schedule_id: &str, body: &str, slot: OffsetDateTime) -> Self {
        Self {
            id: slot_message_id(agent, schedule_id, slot),
            source: schedule_source(schedule_id),
            body: body.to_owned(),
        }
    }
}

/// `schedule:<id>`: the source of a todo fired by a schedule.
pub fn schedule_source(schedule_id: &str) -> String {
    format!("schedule:{schedule_id}")
}

/// `schedule:<id>:<agent>:<slot RFC 3339>`: the `Nats-Msg-Id` of a slot fired for `agent`, so
/// JetStream drops a second publish of the same slot to the same agent within its duplicate
/// window.
///
/// The agent is part of the id because JetStream deduplicates across the whole `TODO` stream, not
/// per subject: without it, the agents sharing a schedule would publish the same id and all but
/// the first agent's todo would be dropped as duplicates.
pub fn slot_message_id(agent: &AgentName, schedule_id: &str, slot: OffsetDateTime) -> String {
    format!("schedule:{schedule_id}:{agent}:{}", format_instant(slot))
}

/// The slot a todo of id `message_id` was fired for, when it is a slot of `schedule_id` fired for
/// `agent` ([`slot_message_id`]).
pub fn fired_slot(message_id: &str, agent: &AgentName, schedule_id: &str) -> Option<OffsetDateTime> {
    let slot = message_id.strip_prefix(&format!("schedule:{schedule_id}:{agent}:"))?;
    parse_instant(slot).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn names_are_as_documented() {
        let agent = AgentName::parse("bee-1").unwrap();
        let todo = Todo::for_slot(&agent, "s1", "hello", datetime!(2026-11-30 09:00:00 UTC));
        assert_eq!(todo.id, "schedule:s1:bee-1:2026-11-30T09:00:00Z");
        let other = AgentName::parse("bee-2").unwrap();
        assert_ne!(
            slot_message_id(&agent, "s1", datetime!(2026-11-30 09:00:00 UTC)),
            slot_message_id(&other, "s1", datetime!(2026-11-30 09:00:00 UTC)),
            "agents sharing a schedule must not share message ids: JetStream dedupes stream-wide"
        );
        assert_eq!(todo.source, "schedule:s1");
        assert_eq!(
            serde_json::to_string(&todo).unwrap(),
            r#"{"id":"schedule:s1:bee-1:2026-11-30T09:00:00Z","source":"schedule:s1","body":"hello"}"#
        );
    }

    #[test]
    fn a_fired_slot_is_read_back_only_for_its_schedule_and_agent() {
        let (bee, wasp) = (AgentName::parse("bee").unwrap(), AgentName::parse("wasp").unwrap());
        let slot = datetime!(2026-11-30 09:00:00 UTC);
        let id = slot_message_id(&bee, "s1", slot);
        assert_eq!(fired_slot(&id, &bee, "s1"), Some(slot));
        assert_eq!(fired_slot(&id, &wasp, "s1"), None);
        assert_eq!(fired_slot(&id, &bee, "s"), None, "a prefix of the id is another schedule");
        assert_eq!(fired_slot(&id, &bee, "s10"), None);
        assert_eq!(fired_slot("schedule:s1:bee:soon", &bee, "s1"), None);
        assert_eq!(fired_slot("prompt-1", &bee, "s1"), None);
    }
}
