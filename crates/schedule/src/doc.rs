//! The value of one agent's key in `agent-schedules` (docs/swarm/schedules.md): that agent's schedules, without
//! names or other agents, sorted by id. swarm-controller writes a key only when these bytes
//! change, so [`AgentSchedules::to_bytes`] is canonical: the same schedules give the same bytes.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::calendar::{Calendar, CalendarError};

/// The document version this crate writes and the only one it reads.
pub const DOC_VERSION: u32 = 1;

/// One schedule as an agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSchedule {
    /// The schedule id, made by the controller.
    pub id: String,
    /// The prompt.
    pub body: String,
    /// Slots are `anchor + k * interval`, k >= 0 (RFC 3339, UTC, whole seconds).
    #[serde(with = "crate::instant")]
    pub anchor: OffsetDateTime,
    /// Seconds between slots (>= 1), or `None` for a one-shot at `anchor` (or a calendar).
    pub interval: Option<u64>,
    /// A cron line (5 fields or an `@name`): the slots are its fire times at or after `anchor`
    /// ([`crate::calendar`]). Absent for interval schedules and one-shots, so their bytes are
    /// what they were before calendars existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// The IANA zone the calendar is read in; absent means [`crate::calendar::DEFAULT_TZ`].
    /// Only with a calendar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// A paused schedule fires nothing.
    pub paused: bool,
    /// No slot before this instant fires: the latest of creation, the last anchor or interval
    /// change, the last resume and the time this agent was added (set by the controller).
    #[serde(with = "crate::instant")]
    pub not_before: OffsetDateTime,
}

/// The whole value of one agent's key: `{"version":1,"schedules":[...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSchedules {
    /// Always [`DOC_VERSION`] when written by this crate.
    pub version: u32,
    /// Sorted by id in [`AgentSchedules::to_bytes`].
    pub schedules: Vec<AgentSchedule>,
}

/// Why bytes are not an agent-schedules document.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// Not JSON of the documented shape.
    #[error("agent-schedules document is malformed: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Written by a newer (or older) controller.
    #[error(
        "agent-schedules document has version {0}, this build reads only version {DOC_VERSION}; \
         upgrade hive-agent and swarm-controller together"
    )]
    UnknownVersion(u32),
    /// Two entries with the same id: the controller never writes that.
    #[error("agent-schedules document lists schedule {0:?} twice")]
    DuplicateId(String),
    /// An interval of 0 seconds has no slots.
    #[error("schedule {0:?} has interval 0; an interval is a whole number of seconds >= 1, or null")]
    ZeroInterval(String),
    /// Both forms of timing at once: the controller never writes that.
    #[error("schedule {0:?} has both an interval and a calendar; a schedule has one or the other")]
    IntervalAndCalendar(String),
    /// A zone without a calendar.
    #[error("schedule {0:?} has a time zone but no calendar")]
    TzWithoutCalendar(String),
}

impl AgentSchedule {
    /// The calendar of a calendar schedule, parsed; `Ok(None)` for an interval schedule or a
    /// one-shot.
    ///
    /// # Errors
    /// A calendar this build cannot evaluate (a pattern it does not know, a zone missing from its
    /// time zone database): the agent refuses that schedule and says why.
    pub fn calendar(&self) -> Result<Option<Calendar>, CalendarError> {
        self.calendar
            .as_deref()
            .map(|line| Calendar::parse(line, self.tz.as_deref().unwrap_or(crate::calendar::DEFAULT_TZ)))
            .transpose()
    }
}

impl AgentSchedules {
    /// A version-1 document holding `schedules` (in any order).
    pub fn new(schedules: Vec<AgentSchedule>) -> Self {
        Self { version: DOC_VERSION, schedules }
    }

    /// Canonical JSON: schedules sorted by id, fields in declaration order, no whitespace.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut sorted = self.clone();
        sorted.schedules.sort_by(|a, b| a.id.cmp(&b.id));
        serde_json::to_vec(&sorted).expect("a document of strings, numbers and bools serializes")
    }

    /// Reads a document, refusing unknown versions, unknown fields, duplicate ids and interval 0.
    ///
    /// # Errors
    /// [`DocError`] saying what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DocError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        // The version is checked first so a future document with new fields reports its version
        // rather than an unknown field.
        let VersionOnly { version } = serde_json::from_slice(bytes)?;
        if version != DOC_VERSION {
            return Err(DocError::UnknownVersion(version));
        }
        let doc: Self = serde_json::from_slice(bytes)?;
        let mut ids: Vec<&str> = doc.schedules.iter().map(|s| s.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(DocError::DuplicateId(pair[0].to_owned()));
        }
        if let Some(s) = doc.schedules.iter().find(|s| s.interval == Some(0)) {
            return Err(DocError::ZeroInterval(s.id.clone()));
        }
        if let Some(s) = doc.schedules.iter().find(|s| s.interval.is_some() && s.calendar.is_some()) {
            return Err(DocError::IntervalAndCalendar(s.id.clone()));
        }
        if let Some(s) = doc.schedules.iter().find(|s| s.tz.is_some() && s.calendar.is_none()) {
            return Err(DocError::TzWithoutCalendar(s.id.clone()));
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn schedule(id: &str) -> AgentSchedule {
        AgentSchedule {
            id: id.to_owned(),
            body: "say \"hi\"\n".to_owned(),
            anchor: datetime!(2026-11-30 09:00:00 UTC),
            interval: Some(3600),
            calendar: None,
            tz: None,
            paused: false,
            not_before: datetime!(2026-11-30 08:59:30 UTC),
        }
    }

    #[test]
    fn a_calendar_schedule_carries_its_line_and_zone() {
        let s = AgentSchedule {
            interval: None,
            calendar: Some("0 9 * * 1-5".into()),
            tz: Some("Europe/Berlin".into()),
            ..schedule("c")
        };
        let bytes = AgentSchedules::new(vec![s.clone()]).to_bytes();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains(r#""interval":null,"calendar":"0 9 * * 1-5","tz":"Europe/Berlin","paused":false"#),
            "{text}"
        );
        assert_eq!(AgentSchedules::from_bytes(&bytes).unwrap().schedules, vec![s.clone()]);
        assert_eq!(s.calendar().unwrap().unwrap().tz(), "Europe/Berlin");
        // A calendar this build cannot evaluate reads as a document, and is refused on its own.
        let unknown = AgentSchedule { tz: Some("Mars/Olympus".into()), ..s };
        let doc = AgentSchedules::from_bytes(&AgentSchedules::new(vec![unknown.clone()]).to_bytes()).unwrap();
        let err = doc.schedules[0].calendar().unwrap_err().to_string();
        assert!(err.contains("Mars/Olympus"), "{err}");
    }

    #[test]
    fn both_timings_or_a_lone_zone_are_refused() {
        let both = AgentSchedule { calendar: Some("@daily".into()), ..schedule("a") };
        let err = AgentSchedules::from_bytes(&AgentSchedules::new(vec![both]).to_bytes()).unwrap_err();
        assert!(err.to_string().contains("both an interval and a calendar"), "{err}");
        let zone = AgentSchedule { tz: Some("UTC".into()), ..schedule("a") };
        let err = AgentSchedules::from_bytes(&AgentSchedules::new(vec![zone]).to_bytes()).unwrap_err();
        assert!(err.to_string().contains("time zone but no calendar"), "{err}");
    }

    #[test]
    fn bytes_are_canonical_and_sorted() {
        let a = AgentSchedules::new(vec![schedule("b"), schedule("a")]);
        let b = AgentSchedules::new(vec![schedule("a"), schedule("b")]);
        assert_eq!(a.to_bytes(), b.to_bytes());
        let text = String::from_utf8(a.to_bytes()).unwrap();
        assert!(
            text.starts_with(
                r#"{"version":1,"schedules":[{"id":"a","body":"say \"hi\"\n","anchor":"2026-11-30T09:00:00Z","interval":3600,"paused":false,"not_before":"2026-11-30T08:59:30Z"}"#
            ),
            "{text}"
        );
        assert_eq!(AgentSchedules::from_bytes(&a.to_bytes()).unwrap(), b);
    }

    #[test]
    fn one_shot_is_null_interval() {
        let mut s = schedule("a");
        s.interval = None;
        let bytes = AgentSchedules::new(vec![s.clone()]).to_bytes();
        assert!(String::from_utf8_lossy(&bytes).contains(r#""interval":null"#));
        assert_eq!(AgentSchedules::from_bytes(&bytes).unwrap().schedules, vec![s]);
    }

    #[test]
    fn refuses_what_the_controller_never_writes() {
        let cases = [
            (r#"{"version":2,"schedules":[]}"#, "version 2"),
            (r#"{"version":1,"schedules":[],"x":1}"#, "unknown field"),
            (r#"{"version":1}"#, "missing field"),
            (r#"not json"#, "malformed"),
            (
                r#"{"version":1,"schedules":[{"id":"a","body":"","anchor":"2026-11-30T09:00:00Z","interval":null,"paused":false,"not_before":"yesterday"}]}"#,
                "not an RFC 3339",
            ),
            (
                r#"{"version":1,"schedules":[{"id":"a","body":"","anchor":"2026-11-30T09:00:00Z","interval":0,"paused":false,"not_before":"2026-11-30T09:00:00Z"}]}"#,
                "interval 0",
            ),
            (
                r#"{"version":1,"schedules":[{"id":"a","body":"","anchor":"9999-12-31T23:59:59-00:01","interval":null,"paused":false,"not_before":"2026-11-30T09:00:00Z"}]}"#,
                "outside the supported range",
            ),
            (
                r#"{"version":1,"schedules":[{"id":"a","body":"","anchor":"2026-11-30T09:00:00Z","interval":-1,"paused":false,"not_before":"2026-11-30T09:00:00Z"}]}"#,
                "malformed",
            ),
        ];
        for (input, why) in cases {
            let err = AgentSchedules::from_bytes(input.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(why), "{input}: {err}");
        }
        let twice = AgentSchedules::new(vec![schedule("a"), schedule("a")]).to_bytes();
        let err = AgentSchedules::from_bytes(&twice).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");
    }
}
