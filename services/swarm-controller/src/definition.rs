//! A schedule definition: the one document kept under its id in `schedule-definitions`
//! (docs/swarm/schedules.md), how requests create and change it, and their validation.
//!
//! The document and the request bodies are the API's wire types (`hyperhive-swarm-api`, shared
//! with swarmctl); what they must satisfy and how a change moves `not_before` are rules of the
//! controller, kept here. Everything here is pure: the route handlers parse a request into a
//! validated value, apply it with the clock's "now", and hand the resulting document to the
//! store.

use std::collections::BTreeSet;

use hyperhive_schedule::calendar::DEFAULT_TZ;
use hyperhive_schedule::{AgentName, AgentSchedule, Calendar, parse_instant};
use hyperhive_swarm_api::schedules::{NewScheduleRequest, SchedulePatchRequest};
use serde_json::Value;
use time::OffsetDateTime;

pub use hyperhive_swarm_api::schedules::{ScheduleDefinition, ScheduleView, Stamp};

/// The definition document version this build writes and reads.
pub const DEFINITION_VERSION: u32 = 1;
/// Longest schedule name, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// Largest prompt body, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest interval: ten years. Longer ones are surely a typo, and keeping slot instants far
/// inside the range `time` can represent keeps every slot computable.
pub const MAX_INTERVAL_SECS: u64 = 10 * 366 * 24 * 3600;

/// Why stored bytes are not a definition (never caused by a client).
#[derive(Debug, thiserror::Error)]
pub enum StoredError {
    /// Not JSON of the documented shape.
    #[error("stored schedule definition is malformed: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Written by another version of swarm-controller.
    #[error(
        "stored schedule definition has version {0}; this swarm-controller reads only version \
         {DEFINITION_VERSION}"
    )]
    UnknownVersion(u64),
}

/// The controller's rules for a definition: how it is stored, created, changed and shown to
/// each agent. A trait because the document is a wire type of another crate.
pub trait DefinitionRules: Sized {
    /// The bytes kept in `schedule-definitions`.
    fn to_bytes(&self) -> Vec<u8>;

    /// Reads the bytes kept in `schedule-definitions`.
    ///
    /// # Errors
    /// [`StoredError`] when they are not a definition of this version.
    fn from_bytes(bytes: &[u8]) -> Result<Self, StoredError>;

    /// A new definition from a validated request, every agent's `not_before` set to `now`.
    fn create(id: String, new: NewSchedule, now: OffsetDateTime) -> Self;

    /// This definition with `patch` applied at `now`.
    ///
    /// `not_before` moves to `now` for every agent when the anchor, interval, calendar or zone
    /// changes or the schedule is resumed, and for an agent when it is added; a body, name or
    /// pause change leaves it, so such an edit never moves or refires a slot.
    ///
    /// Setting a calendar drops the interval and setting an interval (or null) drops the
    /// calendar and its zone, so an edit can switch forms.
    ///
    /// # Errors
    /// [`InvalidRequest`] when the result has no valid timing (both forms in one patch, a zone
    /// without a calendar, a calendar that never fires after the anchor).
    fn patched(&self, patch: SchedulePatch, now: OffsetDateTime) -> Result<Self, InvalidRequest>;

    /// What `agent` sees of this schedule in its `agent-schedules` key.
    fn for_agent(&self, agent: &AgentName) -> Option<AgentSchedule>;
}

impl DefinitionRules for ScheduleDefinition {
    fn to_bytes(&self) -> Vec<u8> {
        let mut value = serde_json::to_value(self).expect("a definition serializes");
        value["version"] = DEFINITION_VERSION.into();
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, StoredError> {
        let mut value: serde_json::Map<String, Value> = serde_json::from_slice(bytes)?;
        let version = value.remove("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != u64::from(DEFINITION_VERSION) {
            return Err(StoredError::UnknownVersion(version));
        }
        Ok(serde_json::from_value(Value::Object(value))?)
    }

    fn create(id: String, new: NewSchedule, now: OffsetDateTime) -> Self {
        let not_before = new.agents.iter().map(|a| (a.clone(), Stamp(now))).collect();
        Self {
            id,
            name: new.name,
            agents: new.agents,
            body: new.body,
            anchor: Stamp(new.anchor),
            interval: new.timing.interval,
            calendar: new.timing.calendar,
            tz: new.timing.tz,
            paused: new.paused,
            allow_unknown_agents: new.allow_unknown_agents,
            not_before,
        }
    }

    fn patched(&self, patch: SchedulePatch, now: OffsetDateTime) -> Result<Self, InvalidRequest> {
        let mut next = self.clone();
        if let Some(name) = patch.name {
            next.name = name;
        }
        if let Some(body) = patch.body {
            next.body = body;
        }
        if let Some(anchor) = patch.anchor {
            next.anchor = Stamp(anchor);
        }
        if patch.interval.is_some() && matches!(patch.calendar, Some(Some(_))) {
            return Err(InvalidRequest(BOTH_TIMINGS.into()));
        }
        if let Some(interval) = patch.interval {
            next.interval = interval;
            next.calendar = None;
            next.tz = None;
        }
        match patch.calendar {
            Some(Some(line)) => {
                next.interval = None;
                next.calendar = Some(line);
            }
            Some(None) => {
                next.calendar = None;
                next.tz = None;
            }
            None => {}
        }
        match patch.tz {
            Some(Some(_)) if next.calendar.is_none() => return Err(InvalidRequest(TZ_WITHOUT_CALENDAR.into())),
            Some(tz) if next.calendar.is_some() => next.tz = tz,
            _ => {}
        }
        if next.calendar.is_some() {
            let tz = next.tz.get_or_insert_with(|| DEFAULT_TZ.to_owned());
            check_calendar(next.calendar.as_deref().unwrap_or_default(), tz, next.anchor.0)?;
        }
        if let Some(paused) = patch.paused {
            next.paused = paused;
        }
        if let Some(allow) = patch.allow_unknown_agents {
            next.allow_unknown_agents = allow;
        }
        if let Some(agents) = patch.agents {
            next.agents = agents;
        }
        let timing_changed = next.anchor != self.anchor
            || next.interval != self.interval
            || next.calendar != self.calendar
            || next.tz != self.tz;
        let resumed = self.paused && !next.paused;
        next.not_before = next
            .agents
            .iter()
            .map(|agent| {
                let kept = self.not_before.get(agent).copied();
                let stamp = match kept {
                    Some(stamp) if !timing_changed && !resumed => stamp,
                    _ => Stamp(now),
                };
                (agent.clone(), stamp)
            })
            .collect();
        Ok(next)
    }

    fn for_agent(&self, agent: &AgentName) -> Option<AgentSchedule> {
        let not_before = self.not_before.get(agent)?;
        Some(AgentSchedule {
            id: self.id.clone(),
            body: self.body.clone(),
            anchor: self.anchor.0,
            interval: self.interval,
            calendar: self.calendar.clone(),
            tz: self.tz.clone(),
            paused: self.paused,
            not_before: not_before.0,
        })
    }
}

/// A validated `POST /api/schedules` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSchedule {
    /// 1 to 100 characters.
    pub name: String,
    /// Non-empty, unique, sorted.
    pub agents: Vec<AgentName>,
    /// 1 byte to 64 KiB.
    pub body: String,
    /// The first slot.
    pub anchor: OffsetDateTime,
    /// An interval, a one-shot or a calendar.
    pub timing: Timing,
    /// Created paused.
    pub paused: bool,
    /// Agents not on the roster were accepted on purpose.
    pub allow_unknown_agents: bool,
}

/// A schedule's timing, checked: an interval (or a one-shot), or a calendar and its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// Seconds between slots; `None` with no calendar is a one-shot.
    pub interval: Option<u64>,
    /// A cron line; then `interval` is `None` and `tz` is set.
    pub calendar: Option<String>,
    /// The calendar's zone.
    pub tz: Option<String>,
}

/// What both forms at once are told.
const BOTH_TIMINGS: &str = "give either interval or calendar, not both: a calendar schedule has no \
                            interval (leave it out or send null)";
/// What a zone without a calendar is told.
const TZ_WITHOUT_CALENDAR: &str = "tz is the time zone of a calendar; send calendar with it (e.g. \
                                   \"calendar\": \"0 9 * * 1-5\"), or leave tz out";

/// Parses a calendar in its zone and refuses one that never fires after `anchor`.
fn check_calendar(line: &str, tz: &str, anchor: OffsetDateTime) -> Result<(), InvalidRequest> {
    let calendar = Calendar::parse(line, tz).map_err(|e| InvalidRequest(e.to_string()))?;
    let from = anchor - time::Duration::seconds(1);
    calendar.check_fires(from).map_err(|e| InvalidRequest(e.to_string()))
}

fn validate_timing(
    interval: Option<Option<u64>>,
    calendar: Option<String>,
    tz: Option<String>,
    anchor: OffsetDateTime,
) -> Result<Timing, InvalidRequest> {
    match (interval, calendar) {
        (Some(Some(_)), Some(_)) => Err(InvalidRequest(BOTH_TIMINGS.into())),
        (_, Some(line)) => {
            let line = line.trim().to_owned();
            let tz = tz.unwrap_or_else(|| DEFAULT_TZ.to_owned());
            check_calendar(&line, &tz, anchor)?;
            Ok(Timing { interval: None, calendar: Some(line), tz: Some(tz) })
        }
        (_, None) if tz.is_some() => Err(InvalidRequest(TZ_WITHOUT_CALENDAR.into())),
        (None, None) => Err(InvalidRequest(
            "missing field `interval`: send interval (whole seconds, or null for a one-shot) or \
             calendar (a cron line)"
                .into(),
        )),
        (Some(interval), None) => Ok(Timing { interval: validate_interval(interval)?, calendar: None, tz: None }),
    }
}

/// A validated `PATCH /api/schedules/{id}` body: `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulePatch {
    /// New name.
    pub name: Option<String>,
    /// New agent list.
    pub agents: Option<Vec<AgentName>>,
    /// New prompt.
    pub body: Option<String>,
    /// New anchor.
    pub anchor: Option<OffsetDateTime>,
    /// New interval (`Some(None)`: make it a one-shot).
    pub interval: Option<Option<u64>>,
    /// New calendar (`Some(None)`: drop it).
    pub calendar: Option<Option<String>>,
    /// New zone (`Some(None)`: back to UTC).
    pub tz: Option<Option<String>>,
    /// Pause or resume.
    pub paused: Option<bool>,
    /// Accept added agents that are not on the roster.
    pub allow_unknown_agents: Option<bool>,
}

/// A request body that is not acceptable; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRequest(pub String);

fn malformed(err: &serde_json::Error) -> InvalidRequest {
    InvalidRequest(format!("malformed request body: {err}"))
}

impl NewSchedule {
    /// Parses and validates a JSON request body.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the first rule broken.
    pub fn from_json(bytes: &[u8]) -> Result<Self, InvalidRequest> {
        let req: NewScheduleRequest = serde_json::from_slice(bytes).map_err(|e| malformed(&e))?;
        let name = validate_name(req.name)?;
        let agents = validate_agents(&req.agents)?;
        let body = validate_body(req.body)?;
        let anchor = validate_anchor(&req.anchor)?;
        Ok(Self {
            name,
            agents,
            body,
            anchor,
            timing: validate_timing(req.interval, req.calendar, req.tz, anchor)?,
            paused: req.paused,
            allow_unknown_agents: req.allow_unknown_agents,
        })
    }
}

impl SchedulePatch {
    /// Parses and validates a JSON request body.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the first rule broken.
    pub fn from_json(bytes: &[u8]) -> Result<Self, InvalidRequest> {
        let req: SchedulePatchRequest = serde_json::from_slice(bytes).map_err(|e| malformed(&e))?;
        Ok(Self {
            name: req.name.map(validate_name).transpose()?,
            agents: req.agents.as_deref().map(validate_agents).transpose()?,
            body: req.body.map(validate_body).transpose()?,
            anchor: req.anchor.as_deref().map(validate_anchor).transpose()?,
            interval: req.interval.map(validate_interval).transpose()?,
            calendar: req.calendar.map(|c| c.map(|line| line.trim().to_owned())),
            tz: req.tz,
            paused: req.paused,
            allow_unknown_agents: req.allow_unknown_agents,
        })
    }
}

fn validate_name(name: String) -> Result<String, InvalidRequest> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return Err(InvalidRequest(format!("name must be 1 to {MAX_NAME_CHARS} characters (it has {chars})")));
    }
    if name.chars().any(char::is_control) {
        return Err(InvalidRequest("name must not contain control characters such as newlines or tabs".into()));
    }
    Ok(name)
}

fn validate_agents(agents: &[String]) -> Result<Vec<AgentName>, InvalidRequest> {
    if agents.is_empty() {
        return Err(InvalidRequest("agents must list at least one agent name".into()));
    }
    let mut seen = BTreeSet::new();
    for given in agents {
        let agent = AgentName::parse(given).map_err(|e| InvalidRequest(format!("agents: {e}")))?;
        if !seen.insert(agent) {
            return Err(InvalidRequest(format!("agents lists {given:?} more than once; list each agent once")));
        }
    }
    Ok(seen.into_iter().collect())
}

fn validate_body(body: String) -> Result<String, InvalidRequest> {
    if body.is_empty() || body.len() > MAX_BODY_BYTES {
        return Err(InvalidRequest(format!(
            "body must be 1 byte to {} KiB (it has {} bytes)",
            MAX_BODY_BYTES / 1024,
            body.len()
        )));
    }
    Ok(body)
}

fn validate_anchor(anchor: &str) -> Result<OffsetDateTime, InvalidRequest> {
    parse_instant(anchor).map_err(|e| InvalidRequest(format!("anchor: {e}")))
}

/// The range of a whole number of seconds; the wire type has refused any other JSON already.
fn validate_interval(interval: Option<u64>) -> Result<Option<u64>, InvalidRequest> {
    match interval {
        None => Ok(None),
        Some(secs @ 1..=MAX_INTERVAL_SECS) => Ok(Some(secs)),
        Some(secs) => Err(InvalidRequest(format!(
            "interval must be a whole number of seconds from 1 to {MAX_INTERVAL_SECS}, or null for a \
             one-shot (got {secs})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-30 09:00:00 UTC);
    const T1: OffsetDateTime = datetime!(2026-11-30 10:00:00 UTC);

    fn new_json(extra: &str) -> String {
        format!(
            r#"{{"name":"standup","agents":["b","a"],"body":"hi","anchor":"2026-11-30T09:00:00Z","interval":60{extra}}}"#
        )
    }

    fn created() -> ScheduleDefinition {
        let new = NewSchedule::from_json(new_json("").as_bytes()).unwrap();
        ScheduleDefinition::create("s1".into(), new, T0)
    }

    fn patch(json: &str) -> SchedulePatch {
        SchedulePatch::from_json(json.as_bytes()).unwrap()
    }

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn a_valid_request_becomes_a_sorted_definition_stamped_now() {
        let d = created();
        assert_eq!(d.agents, vec![agent("a"), agent("b")]);
        assert_eq!(d.interval, Some(60));
        assert_eq!((d.calendar.as_deref(), d.tz.as_deref(), d.allow_unknown_agents), (None, None, false));
        assert!(!d.paused);
        assert!(d.not_before.values().all(|s| s.0 == T0));
        let back = ScheduleDefinition::from_bytes(&d.to_bytes()).unwrap();
        assert_eq!(back, d);
        let view = ScheduleView { definition: d, revision: 7, agent_status: Default::default(), next_fire: None };
        let json = serde_json::to_string(&view).unwrap();
        assert!(json.contains(r#""revision":7"#) && !json.contains("version\":1"), "{json}");
        assert_eq!(serde_json::from_str::<ScheduleView>(&json).unwrap(), view);
    }

    #[test]
    fn stored_documents_of_other_versions_are_refused() {
        let mut v: Value = serde_json::from_slice(&created().to_bytes()).unwrap();
        v["version"] = 2.into();
        let err = ScheduleDefinition::from_bytes(v.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("version 2"), "{err}");
    }

    #[test]
    fn each_validation_rule_has_a_clear_message() {
        let long_name = "n".repeat(101);
        let big_body = "x".repeat(MAX_BODY_BYTES + 1);
        let cases: Vec<(String, &str)> = vec![
            ("not json".into(), "malformed request body"),
            ("[]".into(), "malformed request body"),
            (new_json(r#","color":"red""#), "unknown field `color`"),
            (new_json("").replace(r#""name":"standup""#, r#""name":"""#), "name must be 1 to 100"),
            (new_json("").replace("standup", &long_name), "it has 101"),
            (new_json("").replace("standup", "a\\nb"), "control characters"),
            (new_json("").replace(r#"["b","a"]"#, "[]"), "at least one agent"),
            (new_json("").replace(r#"["b","a"]"#, r#"["a","a"]"#), "more than once"),
            (new_json("").replace(r#"["b","a"]"#, r#"["Bad"]"#), "invalid agent name"),
            (new_json("").replace(r#""body":"hi""#, r#""body":"""#), "body must be 1 byte"),
            (new_json("").replace(r#""hi""#, &format!("{big_body:?}")), "65537 bytes"),
            (new_json("").replace("2026-11-30T09:00:00Z", "tomorrow"), "not an RFC 3339"),
            (new_json("").replace("09:00:00Z", "09:00:00.5Z"), "whole seconds"),
            (new_json("").replace(r#","interval":60"#, ""), "missing field `interval`"),
            (new_json("").replace(r#""interval":60"#, r#""interval":0"#), "whole number"),
            (new_json("").replace(r#""interval":60"#, r#""interval":-5"#), "whole number"),
            (new_json("").replace(r#""interval":60"#, r#""interval":1.5"#), "whole number"),
            (new_json("").replace(r#""interval":60"#, r#""interval":"1h""#), "whole number"),
            (new_json("").replace(r#""interval":60"#, r#""interval":99999999999"#), "from 1 to"),
            (new_json(r#","paused":"yes""#), "malformed request body"),
        ];
        for (json, needle) in cases {
            let err = NewSchedule::from_json(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{json}: {err}");
        }
    }

    #[test]
    fn null_interval_is_a_one_shot() {
        let json = new_json("").replace(r#""interval":60"#, r#""interval":null"#);
        assert_eq!(NewSchedule::from_json(json.as_bytes()).unwrap().timing.interval, None);
    }

    #[test]
    fn patch_tells_null_from_absent() {
        assert_eq!(patch(r#"{"interval":null}"#).interval, Some(None));
        assert_eq!(patch("{}").interval, None);
        assert_eq!(patch("{}"), SchedulePatch::default());
        let err = SchedulePatch::from_json(br#"{"id":"x"}"#).unwrap_err().to_string();
        assert!(err.contains("unknown field `id`"), "{err}");
        let err = SchedulePatch::from_json(br#"{"agents":[]}"#).unwrap_err().to_string();
        assert!(err.contains("at least one agent"), "{err}");
    }

    #[test]
    fn body_name_and_pause_edits_keep_not_before() {
        let d = created();
        for json in [r#"{"body":"new"}"#, r#"{"name":"renamed"}"#, r#"{"paused":true}"#] {
            let next = d.patched(patch(json), T1).unwrap();
            assert_eq!(next.not_before, d.not_before, "{json}");
        }
    }

    #[test]
    fn timing_edits_and_resume_move_not_before_for_every_agent() {
        let d = created();
        let paused = d.patched(patch(r#"{"paused":true}"#), T1).unwrap();
        for (from, json) in [
            (&d, r#"{"anchor":"2026-12-01T00:00:00Z"}"#),
            (&d, r#"{"interval":120}"#),
            (&d, r#"{"interval":null}"#),
            (&paused, r#"{"paused":false}"#),
        ] {
            let next = from.patched(patch(json), T1).unwrap();
            assert!(next.not_before.values().all(|s| s.0 == T1), "{json}");
        }
        // The same anchor and interval written again is not a timing change.
        let same = d.patched(patch(r#"{"interval":60,"anchor":"2026-11-30T10:00:00+01:00"}"#), T1).unwrap();
        assert_eq!(same.not_before, d.not_before);
    }

    #[test]
    fn an_added_agent_starts_now_and_a_removed_one_is_dropped() {
        let d = created();
        let next = d.patched(patch(r#"{"agents":["b","c"]}"#), T1).unwrap();
        assert_eq!(next.agents, vec![agent("b"), agent("c")]);
        assert_eq!(next.not_before[&agent("b")].0, T0);
        assert_eq!(next.not_before[&agent("c")].0, T1);
        assert!(!next.not_before.contains_key(&agent("a")));
        assert!(next.for_agent(&agent("a")).is_none());
        let seen = next.for_agent(&agent("c")).unwrap();
        assert_eq!((seen.id.as_str(), seen.not_before), ("s1", T1));
    }

    fn calendar_json(extra: &str) -> String {
        new_json(extra).replace(r#""interval":60"#, r#""calendar":"0 9 * * 1-5""#)
    }

    #[test]
    fn a_calendar_schedule_defaults_to_utc_and_reaches_the_agent() {
        let new = NewSchedule::from_json(calendar_json("").as_bytes()).unwrap();
        assert_eq!(new.timing, Timing { interval: None, calendar: Some("0 9 * * 1-5".into()), tz: Some("UTC".into()) });
        let json = calendar_json(r#","tz":"Europe/Berlin","interval":null,"allow_unknown_agents":true"#);
        let d = ScheduleDefinition::create("s1".into(), NewSchedule::from_json(json.as_bytes()).unwrap(), T0);
        assert!(d.allow_unknown_agents);
        let seen = d.for_agent(&agent("a")).unwrap();
        assert_eq!(
            (seen.interval, seen.calendar.as_deref(), seen.tz.as_deref()),
            (None, Some("0 9 * * 1-5"), Some("Europe/Berlin"))
        );
        assert_eq!(ScheduleDefinition::from_bytes(&d.to_bytes()).unwrap(), d);
        // An interval schedule's stored and agent bytes carry no calendar fields at all.
        let plain = created();
        let text = String::from_utf8(plain.to_bytes()).unwrap();
        assert!(!text.contains("calendar") && !text.contains("tz") && !text.contains("allow_unknown"), "{text}");
    }

    #[test]
    fn bad_calendars_are_refused_saying_what_to_send() {
        let cases: Vec<(String, &str)> = vec![
            (calendar_json("").replace("0 9 * * 1-5", "0 0 9 * * 1-5"), "has 6 fields"),
            (calendar_json(r#","tz":"Europe/Nowhere""#), "not in the time zone database"),
            (calendar_json("").replace("0 9 * * 1-5", "0 0 30 2 *"), "never fires"),
            (new_json(r#","calendar":"@daily""#), "either interval or calendar, not both"),
            (new_json(r#","tz":"Europe/Berlin""#), "send calendar with it"),
            (new_json("").replace(r#","interval":60"#, ""), "missing field `interval`"),
            (calendar_json("").replace("0 9 * * 1-5", "@reboot"), "not a known name"),
        ];
        for (json, needle) in cases {
            let err = NewSchedule::from_json(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{json}: {err}");
        }
    }

    #[test]
    fn a_patch_switches_forms_and_moves_not_before_on_calendar_changes() {
        let d = created();
        let cal = d.patched(patch(r#"{"calendar":"*/5 * * * *","tz":"Asia/Tokyo"}"#), T1).unwrap();
        assert_eq!(
            (cal.interval, cal.calendar.as_deref(), cal.tz.as_deref()),
            (None, Some("*/5 * * * *"), Some("Asia/Tokyo"))
        );
        assert!(cal.not_before.values().all(|s| s.0 == T1));
        let body = cal.patched(patch(r#"{"body":"new"}"#), T1 + time::Duration::hours(1)).unwrap();
        assert_eq!(body.not_before, cal.not_before);
        let later = T1 + time::Duration::hours(2);
        let zone = cal.patched(patch(r#"{"tz":"Europe/Berlin"}"#), later).unwrap();
        assert!(zone.not_before.values().all(|s| s.0 == later));
        let utc = cal.patched(patch(r#"{"tz":null}"#), later).unwrap();
        assert_eq!(utc.tz.as_deref(), Some("UTC"));
        let back = cal.patched(patch(r#"{"interval":300}"#), later).unwrap();
        assert_eq!((back.interval, back.calendar, back.tz), (Some(300), None, None));
        for (json, needle) in [
            (r#"{"interval":60,"calendar":"@daily"}"#, "not both"),
            (r#"{"tz":"Europe/Berlin"}"#, "send calendar with it"),
            (r#"{"calendar":"0 0 30 2 *"}"#, "never fires"),
            (r#"{"calendar":"@daily","tz":"Nowhere/Else"}"#, "time zone database"),
        ] {
            let err = d.patched(patch(json), T1).unwrap_err().to_string();
            assert!(err.contains(needle), "{json}: {err}");
        }
    }
}
