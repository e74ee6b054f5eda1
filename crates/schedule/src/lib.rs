//! Scheduled prompts (docs/swarm/schedules.md), the part swarm-controller and hive-agent must agree on.
//!
//! # Layout
//! - [`name`]: agent names, which are subject tokens, KV keys and unix names at once.
//! - [`doc`]: the per-agent document in `agent-schedules` and its canonical bytes.
//! - [`slot`]: the slot rule, one pure function of (definition, last recorded slot, now).
//! - [`calendar`]: cron lines in an IANA time zone, the other form of a schedule's slots.
//! - [`todo`]: the todo published on `todo.<agent>` and the names of the NATS objects.
//! - [`instant`]: UTC instants in whole seconds, written as RFC 3339.

pub mod calendar;
pub mod doc;
pub mod instant;
pub mod name;
pub mod slot;
pub mod todo;

pub use calendar::{Calendar, CalendarError};
pub use doc::{AgentSchedule, AgentSchedules, DOC_VERSION, DocError};
pub use instant::{InstantError, format_instant, parse_instant, whole_seconds_utc};
pub use name::{AgentName, HiveName, NameError};
pub use slot::{due_slot, next_fire_after, next_slot_after};
pub use todo::{Todo, fired_slot, schedule_source, slot_message_id};
