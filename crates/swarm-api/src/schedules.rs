//! Schedules on the wire: the document as `GET /api/schedules[/{id}]` shows it (with its
//! revision), and the bodies of `POST /api/schedules` and `PATCH /api/schedules/{id}`
//! (docs/swarm/schedules.md, "API").
//!
//! The request bodies carry what the client typed; the controller checks them (names, agents,
//! the body's size, the anchor, the interval's range) and says what is wrong.

use std::collections::BTreeMap;
use std::fmt;

use hyperhive_schedule::instant::format_instant;
use hyperhive_schedule::{AgentName, parse_instant};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;

/// An instant written as RFC 3339 in UTC, whole seconds (`2026-11-30T09:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub OffsetDateTime);

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_instant(self.0))
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_instant(&s).map(Stamp).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_instant(self.0))
    }
}

/// One scheduled prompt, as the API shows it and as the controller stores it (the stored form
/// adds its document version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDefinition {
    /// Made by the controller; also the key in `schedule-definitions`.
    pub id: String,
    /// What people call it (1 to 100 characters).
    pub name: String,
    /// The agents it prompts: non-empty, unique, sorted.
    pub agents: Vec<AgentName>,
    /// The prompt (1 byte to 64 KiB).
    pub body: String,
    /// Slots are `anchor + k * interval`, or the calendar's fire times at or after it.
    pub anchor: Stamp,
    /// Seconds between slots, or `None` for a one-shot at `anchor` or a calendar schedule.
    pub interval: Option<u64>,
    /// A cron line (5 fields or an `@name`), for a calendar schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// The IANA zone of the calendar (always set with one, `UTC` unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// A paused schedule fires nothing.
    pub paused: bool,
    /// Created or changed with agents that were not on the roster, on purpose.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_unknown_agents: bool,
    /// Per agent: no slot before this instant fires. The latest of creation, the last anchor or
    /// interval change, the last resume and the time the agent was added.
    pub not_before: BTreeMap<AgentName, Stamp>,
}

/// A definition as the API shows it: the document plus its revision (the `If-Match` value for
/// its next change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleView {
    /// The document.
    #[serde(flatten)]
    pub definition: ScheduleDefinition,
    /// Its revision in `schedule-definitions`.
    pub revision: u64,
    /// Per agent, what the roster says of it: `known`, `unknown` (not on the roster) or
    /// `destroyed` (its wanted state). Empty when the roster could not be read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_status: BTreeMap<AgentName, AgentStatus>,
    /// When it fires next, as the controller saw it when answering (calendar schedules in
    /// their zone's rules); absent when paused, for a one-shot whose time has passed, or for a
    /// calendar this build cannot evaluate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<Stamp>,
}

impl ScheduleDefinition {
    /// When it fires next after `now`: `None` when paused, for a one-shot whose time has
    /// passed, or for a calendar this build cannot evaluate.
    pub fn next_fire(&self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        if self.paused {
            return None;
        }
        let calendar = match &self.calendar {
            Some(line) => Some(hyperhive_schedule::Calendar::parse(line, self.tz.as_deref().unwrap_or("UTC")).ok()?),
            None => None,
        };
        hyperhive_schedule::next_fire_after(self.anchor.0, self.interval, calendar.as_ref(), now)
    }
}

/// What the roster says of an agent a schedule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// On the roster.
    Known,
    /// Not on the roster (allowed with `allow_unknown_agents`, or removed since).
    Unknown,
    /// On the roster with wanted state `destroyed`.
    Destroyed,
}

impl AgentStatus {
    /// The word shown for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Known => "known",
            Self::Unknown => "unknown",
            Self::Destroyed => "destroyed",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The body of `POST /api/schedules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewScheduleRequest {
    /// What people call it.
    pub name: String,
    /// The agents to prompt, as typed (the controller sorts them and refuses duplicates).
    pub agents: Vec<String>,
    /// The prompt.
    pub body: String,
    /// The first slot, RFC 3339.
    pub anchor: String,
    /// Seconds between slots (`Some(Some(n))`), or null for a one-shot (`Some(None)`). Required
    /// without a calendar: a missing interval is refused rather than taken for a one-shot. With
    /// a calendar, absent or null.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present_interval")]
    pub interval: Option<Option<u64>>,
    /// A cron line (5 fields or an `@name`) instead of an interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// The calendar's IANA zone (default `UTC`); only with a calendar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Created paused (default false).
    #[serde(default)]
    pub paused: bool,
    /// Accept agents that are not on the roster (default false: refused).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_unknown_agents: bool,
}

/// The body of `PATCH /api/schedules/{id}`: an absent field is left as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulePatchRequest {
    /// New name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New agent list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
    /// New prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// New anchor, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// New interval: `Some(None)` (sent as null) makes it a one-shot; `None` leaves it.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present_interval")]
    pub interval: Option<Option<u64>>,
    /// New calendar: makes it a calendar schedule (its interval is dropped); null drops the
    /// calendar and its zone.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub calendar: Option<Option<String>>,
    /// New zone of the calendar; null goes back to `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub tz: Option<Option<String>>,
    /// Pause or resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Accept added agents that are not on the roster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unknown_agents: Option<bool>,
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, by `default`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl SchedulePatchRequest {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The answer to `DELETE /api/schedules/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDeleted {
    /// The schedule removed.
    pub id: String,
    /// Always true.
    pub deleted: bool,
}

/// What an interval that is not a whole number of seconds (or null) is told.
const INTERVAL_RULE: &str = "interval must be a whole number of seconds >= 1, or null for a one-shot";

/// An interval: null, or a whole number of seconds. Its range is the controller's to check;
/// a fraction, a negative number or a string gets the rule rather than serde's type names.
fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64()),
        other => Err(serde::de::Error::custom(format!("{INTERVAL_RULE} (got {other})"))),
    }
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, by `default`).
fn present_interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    interval(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn a_new_schedule_has_the_field_names_the_controller_reads() {
        let request = NewScheduleRequest {
            name: "standup".into(),
            agents: vec!["b".into(), "a".into()],
            body: "hi".into(),
            anchor: "2026-11-30T09:00:00Z".into(),
            interval: Some(Some(60)),
            calendar: None,
            tz: None,
            paused: true,
            allow_unknown_agents: false,
        };
        let wire = json!({
            "name": "standup", "agents": ["b", "a"], "body": "hi",
            "anchor": "2026-11-30T09:00:00Z", "interval": 60, "paused": true,
        });
        assert_eq!(serde_json::to_value(&request).unwrap(), wire);
        assert_eq!(serde_json::from_value::<NewScheduleRequest>(wire).unwrap(), request);
        let once = NewScheduleRequest { interval: Some(None), ..request.clone() };
        assert_eq!(serde_json::to_value(&once).unwrap()["interval"], serde_json::Value::Null);
        let calendar = NewScheduleRequest {
            interval: None,
            calendar: Some("0 9 * * 1-5".into()),
            tz: Some("Europe/Berlin".into()),
            allow_unknown_agents: true,
            ..request
        };
        let wire = json!({
            "name": "standup", "agents": ["b", "a"], "body": "hi", "anchor": "2026-11-30T09:00:00Z",
            "calendar": "0 9 * * 1-5", "tz": "Europe/Berlin", "paused": true, "allow_unknown_agents": true,
        });
        assert_eq!(serde_json::to_value(&calendar).unwrap(), wire);
        assert_eq!(serde_json::from_value::<NewScheduleRequest>(wire).unwrap(), calendar);
    }

    #[test]
    fn a_new_schedule_needs_its_interval_and_refuses_strangers() {
        let base = json!({"name": "n", "agents": ["a"], "body": "b", "anchor": "2026-11-30T09:00:00Z"});
        // Absent and null differ: the controller requires one or the other without a calendar.
        assert_eq!(serde_json::from_value::<NewScheduleRequest>(base.clone()).unwrap().interval, None);
        let mut paused_default = base.clone();
        paused_default["interval"] = json!(null);
        let read = serde_json::from_value::<NewScheduleRequest>(paused_default).unwrap();
        assert!(!read.paused && !read.allow_unknown_agents);
        assert_eq!(read.interval, Some(None));
        for bad in [json!(1.5), json!(-5), json!("1h")] {
            let mut body = base.clone();
            body["interval"] = bad.clone();
            let err = serde_json::from_value::<NewScheduleRequest>(body).unwrap_err().to_string();
            assert!(err.contains("whole number of seconds"), "{bad}: {err}");
        }
        let mut extra = base;
        extra["interval"] = json!(60);
        extra["color"] = json!("red");
        let err = serde_json::from_value::<NewScheduleRequest>(extra).unwrap_err().to_string();
        assert!(err.contains("unknown field `color`"), "{err}");
    }

    #[test]
    fn a_patch_sends_only_what_changes_and_null_for_a_one_shot() {
        let every = SchedulePatchRequest {
            name: Some("n".into()),
            agents: Some(vec!["a".into()]),
            body: Some("b".into()),
            anchor: Some("2026-11-30T09:00:00Z".into()),
            interval: Some(Some(90)),
            calendar: Some(Some("@daily".into())),
            tz: Some(None),
            paused: Some(false),
            allow_unknown_agents: Some(true),
        };
        let wire = json!({
            "name": "n", "agents": ["a"], "body": "b", "anchor": "2026-11-30T09:00:00Z",
            "interval": 90, "calendar": "@daily", "tz": null, "paused": false, "allow_unknown_agents": true,
        });
        assert_eq!(serde_json::to_value(&every).unwrap(), wire);
        assert_eq!(serde_json::from_value::<SchedulePatchRequest>(wire).unwrap(), every);
        let once = SchedulePatchRequest { interval: Some(None), ..Default::default() };
        assert_eq!(serde_json::to_string(&once).unwrap(), r#"{"interval":null}"#);
        assert_eq!(serde_json::from_str::<SchedulePatchRequest>(r#"{"interval":null}"#).unwrap(), once);
        let nothing: SchedulePatchRequest = serde_json::from_str("{}").unwrap();
        assert!(nothing.is_empty() && !once.is_empty());
        assert_eq!(serde_json::to_string(&nothing).unwrap(), "{}");
        let err = serde_json::from_str::<SchedulePatchRequest>(r#"{"id":"x"}"#).unwrap_err().to_string();
        assert!(err.contains("unknown field `id`"), "{err}");
    }

    #[test]
    fn the_next_fire_follows_the_interval_the_calendar_and_its_zone() {
        let t = datetime!(2026-11-30 09:00:00 UTC);
        let schedule = |interval, calendar: Option<&str>, tz: Option<&str>| ScheduleDefinition {
            id: "s1".into(),
            name: "standup".into(),
            agents: vec![agent("a")],
            body: "hi".into(),
            anchor: Stamp(t),
            interval,
            calendar: calendar.map(Into::into),
            tz: tz.map(Into::into),
            paused: false,
            allow_unknown_agents: false,
            not_before: BTreeMap::new(),
        };
        let now = datetime!(2026-11-30 10:30:00 UTC);
        assert_eq!(schedule(Some(3600), None, None).next_fire(now), Some(datetime!(2026-11-30 11:00:00 UTC)));
        assert_eq!(schedule(None, None, None).next_fire(now), None, "a one-shot whose time passed");
        assert_eq!(schedule(None, None, None).next_fire(t - time::Duration::hours(1)), Some(t));
        let berlin = schedule(None, Some("0 9 * * *"), Some("Europe/Berlin"));
        assert_eq!(berlin.next_fire(now), Some(datetime!(2026-12-01 08:00:00 UTC)), "09:00 in Berlin is 08:00 UTC");
        assert_eq!(ScheduleDefinition { paused: true, ..berlin }.next_fire(now), None);
        assert_eq!(schedule(None, Some("not a calendar"), None).next_fire(now), None);
    }

    #[test]
    fn a_view_is_the_document_with_its_revision_beside_it() {
        let t = datetime!(2026-11-30 09:00:00 UTC);
        let view = ScheduleView {
            definition: ScheduleDefinition {
                id: "s1".into(),
                name: "standup".into(),
                agents: vec![agent("a")],
                body: "hi".into(),
                anchor: Stamp(t),
                interval: None,
                calendar: None,
                tz: None,
                paused: false,
                allow_unknown_agents: false,
                not_before: [(agent("a"), Stamp(t))].into(),
            },
            revision: 7,
            agent_status: BTreeMap::new(),
            next_fire: None,
        };
        let wire = json!({
            "id": "s1", "name": "standup", "agents": ["a"], "body": "hi",
            "anchor": "2026-11-30T09:00:00Z", "interval": null, "paused": false,
            "not_before": {"a": "2026-11-30T09:00:00Z"}, "revision": 7,
        });
        assert_eq!(serde_json::to_value(&view).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ScheduleView>(wire).unwrap(), view);
        let seen = ScheduleView { agent_status: [(agent("a"), AgentStatus::Destroyed)].into(), ..view.clone() };
        assert_eq!(serde_json::to_value(&seen).unwrap()["agent_status"], json!({"a": "destroyed"}));
        let next = ScheduleView { next_fire: Some(Stamp(t)), ..seen.clone() };
        assert_eq!(serde_json::to_value(&next).unwrap()["next_fire"], "2026-11-30T09:00:00Z");
        let deleted = ScheduleDeleted { id: "s1".into(), deleted: true };
        assert_eq!(serde_json::to_value(&deleted).unwrap(), json!({"id": "s1", "deleted": true}));
    }
}

/// `GET /api/schedules/{id}/fired`: per agent of the schedule, the latest of its slots that the
/// agent's turn history records (`null` when the history holds none: never fired, still running,
/// or older than the history keeps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiredSlots {
    /// Every agent of the schedule.
    pub agents: BTreeMap<AgentName, Option<FiredSlot>>,
}

/// One agent's latest recorded slot of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiredSlot {
    /// The slot (RFC 3339, UTC).
    pub slot: String,
    /// How its turn went.
    pub turn: crate::work::LastTurn,
}
