//! Calendar schedules (docs/swarm/schedules.md, "Calendar schedules"): a cron line of five
//! fields, or one of the names `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`
//! (`@annually`), read as wall-clock times in an IANA time zone.
//!
//! The cron pattern is parsed and searched by `croner` on `jiff` zoned times; `jiff` holds the
//! time zone rules (the system's tzdb, or the copy bundled into the binary when the system has
//! none). Nothing here knows a zone's rules itself.
//!
//! # Slots
//! A calendar's slots are the instants its pattern matches, in the order of real time. The slot
//! rule needs the latest slot at or before `now`: croner searches backwards from `now`, field by
//! field (year, month, day, hour, minute), so years of downtime cost about as much as a minute.
//!
//! # Daylight saving
//! - A wall-clock time that does not exist (spring forward: 02:30 in Europe/Berlin on
//!   2027-03-28) of a pattern with a fixed minute and hour fires once, at the first minute after
//!   the gap (03:00 local time, 01:00 UTC). A pattern whose hour is a wildcard or a step
//!   (`30 * * * *`) has no slot inside the gap: the clock skips that hour.
//! - A wall-clock time that happens twice (fall back: 02:30 on 2027-10-31) of a pattern with a
//!   fixed minute and hour fires once, at its first occurrence (02:30 +02:00, 00:30 UTC). A
//!   pattern whose hour is a wildcard or a step fires in both passes of the repeated hour, which
//!   are an hour of real time apart like any other two of its slots.
//!
//! # Range
//! croner searches years 1 to 4999; a calendar has no slot after [`CALENDAR_END`].

use std::fmt;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use time::OffsetDateTime;
use time::macros::datetime;

use crate::instant::is_supported;

/// The time zone of a calendar given without one.
pub const DEFAULT_TZ: &str = "UTC";

/// The names a calendar may be instead of five fields.
pub const CALENDAR_NAMES: [&str; 6] = ["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually"];

/// The last instant a calendar can have a slot at (croner searches years up to 4999).
pub const CALENDAR_END: OffsetDateTime = datetime!(4999-12-31 23:59:59 UTC);

/// What a calendar line must look like, for error messages.
pub const CALENDAR_RULE: &str = "a calendar is a cron line of 5 fields (minute hour day-of-month month \
                                 day-of-week, e.g. \"0 9 * * 1-5\") or one of @hourly, @daily, @weekly, \
                                 @monthly, @yearly, @annually";

/// Why a calendar (a cron line and a time zone) cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// Not 5 fields (6 would be seconds, 7 years: neither is taken).
    #[error("calendar {line:?} has {fields} fields; {CALENDAR_RULE}")]
    FieldCount {
        /// The line as given.
        line: String,
        /// How many whitespace-separated fields it has.
        fields: usize,
    },
    /// An `@name` that is not one of [`CALENDAR_NAMES`].
    #[error("calendar {0:?} is not a known name; {CALENDAR_RULE}")]
    UnknownName(String),
    /// The cron parser refused it.
    #[error("calendar {line:?} is not a valid cron line ({reason}); {CALENDAR_RULE}")]
    Invalid {
        /// The line as given.
        line: String,
        /// The parser's reason.
        reason: String,
    },
    /// No such IANA zone in the time zone database.
    #[error(
        "time zone {0:?} is not in the time zone database; give an IANA name such as UTC, \
         Europe/Berlin or America/New_York"
    )]
    UnknownZone(String),
    /// The pattern matches no date at all (e.g. `0 0 30 2 *`, February 30th).
    #[error("calendar {0:?} never fires (no date matches it); check the day and month fields")]
    NeverFires(String),
}

/// A parsed calendar: a cron pattern and the zone its wall-clock times are read in.
#[derive(Clone)]
pub struct Calendar {
    line: String,
    tz_name: String,
    cron: Cron,
    tz: TimeZone,
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calendar").field("line", &self.line).field("tz", &self.tz_name).finish()
    }
}

impl Calendar {
    /// Parses a cron line (5 fields or an `@name`) and an IANA zone name.
    ///
    /// A pattern that matches no date parses (an agent just never fires it); the controller
    /// refuses it at its door with [`Calendar::check_fires`].
    ///
    /// # Errors
    /// [`CalendarError`] saying what is wrong.
    pub fn parse(line: &str, tz: &str) -> Result<Self, CalendarError> {
        let shown: String = line.chars().take(100).collect();
        let trimmed = line.trim();
        if trimmed.starts_with('@') {
            if !CALENDAR_NAMES.iter().any(|n| n.eq_ignore_ascii_case(trimmed)) {
                return Err(CalendarError::UnknownName(shown));
            }
        } else {
            let fields = trimmed.split_whitespace().count();
            if fields != 5 {
                return Err(CalendarError::FieldCount { line: shown, fields });
            }
        }
        let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
        let cron = parser.parse(trimmed).map_err(|e| CalendarError::Invalid { line: shown, reason: e.to_string() })?;
        let zone = TimeZone::get(tz).map_err(|_| CalendarError::UnknownZone(tz.chars().take(64).collect()))?;
        Ok(Self { line: line.to_owned(), tz_name: tz.to_owned(), cron, tz: zone })
    }

    /// The cron line as given.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The zone name as given.
    pub fn tz(&self) -> &str {
        &self.tz_name
    }

    /// Refuses a calendar with no slot after `t` (within [`CALENDAR_END`]).
    ///
    /// # Errors
    /// [`CalendarError::NeverFires`].
    pub fn check_fires(&self, t: OffsetDateTime) -> Result<(), CalendarError> {
        match self.next_after(t) {
            Some(_) => Ok(()),
            None => Err(CalendarError::NeverFires(self.line.clone())),
        }
    }

    /// The latest slot at or before `t`, found by searching backwards from `t`.
    pub fn latest_at_or_before(&self, t: OffsetDateTime) -> Option<OffsetDateTime> {
        let from = self.zoned(t.min(CALENDAR_END))?;
        let found = self.cron.find_previous_occurrence(&from, true).ok()?;
        instant(found.timestamp())
    }

    /// The first slot strictly after `t`.
    pub fn next_after(&self, t: OffsetDateTime) -> Option<OffsetDateTime> {
        if t >= CALENDAR_END {
            return None;
        }
        let from = self.zoned(t)?;
        let found = self.cron.find_next_occurrence(&from, false).ok()?;
        instant(found.timestamp()).filter(|slot| *slot <= CALENDAR_END)
    }

    /// `t` as wall-clock time in this calendar's zone, e.g. `2027-03-28 03:00 +02:00`.
    pub fn local(&self, t: OffsetDateTime) -> String {
        match self.zoned(t) {
            Some(z) => z.strftime("%Y-%m-%d %H:%M %:z").to_string(),
            None => crate::instant::format_instant(t),
        }
    }

    fn zoned(&self, t: OffsetDateTime) -> Option<jiff::Zoned> {
        Some(Timestamp::from_second(t.unix_timestamp()).ok()?.to_zoned(self.tz.clone()))
    }
}

fn instant(t: Timestamp) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(t.as_second()).ok().filter(is_supported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    fn berlin(line: &str) -> Calendar {
        Calendar::parse(line, "Europe/Berlin").unwrap()
    }

    #[test]
    fn weekday_mornings_in_berlin() {
        let c = berlin("0 9 * * 1-5");
        // Friday 2026-12-04 10:00 Berlin (09:00 UTC): latest is 09:00 Berlin, 08:00 UTC.
        let t = datetime!(2026-12-04 09:00:00 UTC);
        assert_eq!(c.latest_at_or_before(t), Some(datetime!(2026-12-04 08:00:00 UTC)));
        // Next is Monday.
        assert_eq!(c.next_after(t), Some(datetime!(2026-12-07 08:00:00 UTC)));
        assert_eq!(c.local(datetime!(2026-12-07 08:00:00 UTC)), "2026-12-07 09:00 +01:00");
        // Summer time: 09:00 Berlin is 07:00 UTC.
        assert_eq!(c.next_after(datetime!(2027-07-01 00:00:00 UTC)), Some(datetime!(2027-07-01 07:00:00 UTC)));
    }

    #[test]
    fn names_are_the_usual_patterns() {
        let t = datetime!(2026-12-02 10:17:00 UTC);
        let utc = |line| Calendar::parse(line, DEFAULT_TZ).unwrap();
        assert_eq!(utc("@hourly").latest_at_or_before(t), Some(datetime!(2026-12-02 10:00:00 UTC)));
        assert_eq!(utc("@daily").latest_at_or_before(t), Some(datetime!(2026-12-02 00:00:00 UTC)));
        assert_eq!(utc("@weekly").latest_at_or_before(t), Some(datetime!(2026-11-29 00:00:00 UTC)));
        assert_eq!(utc("@monthly").latest_at_or_before(t), Some(datetime!(2026-12-01 00:00:00 UTC)));
        assert_eq!(utc("@yearly").latest_at_or_before(t), Some(datetime!(2026-01-01 00:00:00 UTC)));
        assert_eq!(utc("@ANNUALLY").latest_at_or_before(t), Some(datetime!(2026-01-01 00:00:00 UTC)));
    }

    #[test]
    fn bad_calendars_say_what_to_send() {
        let cases = [
            ("0 0 * * * *", "UTC", "has 6 fields"),
            ("* * * *", "UTC", "has 4 fields"),
            ("", "UTC", "has 0 fields"),
            ("@reboot", "UTC", "not a known name"),
            ("61 * * * *", "UTC", "not a valid cron line"),
            ("0 9 * * 1-5", "Europe/Nowhere", "not in the time zone database"),
            ("0 9 * * 1-5", "", "not in the time zone database"),
        ];
        for (line, tz, needle) in cases {
            let err = Calendar::parse(line, tz).unwrap_err().to_string();
            assert!(err.contains(needle), "{line:?} {tz:?}: {err}");
        }
        let never = Calendar::parse("0 0 30 2 *", "UTC").unwrap();
        let err = never.check_fires(datetime!(2026-12-02 00:00:00 UTC)).unwrap_err().to_string();
        assert!(err.contains("never fires"), "{err}");
        assert_eq!(never.latest_at_or_before(datetime!(2026-12-02 00:00:00 UTC)), None);
        // February 29th fires, in leap years.
        let leap = Calendar::parse("0 0 29 2 *", "UTC").unwrap();
        assert_eq!(leap.next_after(datetime!(2026-12-02 00:00:00 UTC)), Some(datetime!(2028-02-29 00:00:00 UTC)));
    }

    #[test]
    fn spring_forward_fires_a_missing_time_once_at_the_end_of_the_gap() {
        // 2027-03-28 in Europe/Berlin: 02:00 +01:00 is followed by 03:00 +02:00.
        let c = berlin("30 2 * * *");
        let day_before = datetime!(2027-03-27 01:30:00 UTC);
        let shifted = datetime!(2027-03-28 01:00:00 UTC);
        assert_eq!(c.next_after(day_before), Some(shifted));
        assert_eq!(c.local(shifted), "2027-03-28 03:00 +02:00");
        assert_eq!(c.next_after(shifted), Some(datetime!(2027-03-29 00:30:00 UTC)));
        for minutes in [0, 1, 29, 30, 60, 23 * 60] {
            let t = shifted + Duration::minutes(minutes);
            assert_eq!(c.latest_at_or_before(t), Some(shifted), "+{minutes} min");
        }
        assert_eq!(c.latest_at_or_before(shifted - Duration::seconds(1)), Some(day_before));
        // An hourly pattern has no slot in the skipped hour.
        let hourly = berlin("30 * * * *");
        assert_eq!(hourly.next_after(datetime!(2027-03-28 00:30:00 UTC)), Some(datetime!(2027-03-28 01:30:00 UTC)));
    }

    #[test]
    fn fall_back_fires_a_repeated_time_once() {
        // 2027-10-31 in Europe/Berlin: 02:00-03:00 happens at +02:00 and again at +01:00.
        let c = berlin("30 2 * * *");
        let first = datetime!(2027-10-31 00:30:00 UTC);
        assert_eq!(c.next_after(datetime!(2027-10-30 12:00:00 UTC)), Some(first));
        assert_eq!(c.local(first), "2027-10-31 02:30 +02:00");
        assert_eq!(c.next_after(first), Some(datetime!(2027-11-01 01:30:00 UTC)));
        // During and after the second 02:30 the latest slot is still the first one.
        for t in
            [datetime!(2027-10-31 01:30:00 UTC), datetime!(2027-10-31 01:45:00 UTC), datetime!(2027-10-31 22:00:00 UTC)]
        {
            assert_eq!(c.latest_at_or_before(t), Some(first), "{t}");
        }
        // An hourly pattern fires in both passes, an hour of real time apart.
        let hourly = berlin("30 * * * *");
        assert_eq!(hourly.next_after(first), Some(datetime!(2027-10-31 01:30:00 UTC)));
        assert_eq!(
            hourly.latest_at_or_before(datetime!(2027-10-31 01:59:00 UTC)),
            Some(datetime!(2027-10-31 01:30:00 UTC))
        );
    }

    #[test]
    fn years_of_downtime_are_one_backwards_search() {
        let c = berlin("0 9 * * 1-5");
        let started = std::time::Instant::now();
        let back = datetime!(2999-06-15 12:00:00 UTC); // a Saturday: Friday's slot
        assert_eq!(c.latest_at_or_before(back), Some(datetime!(2999-06-14 07:00:00 UTC)));
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        // Past croner's range the latest slot is the last one before its end.
        let late = Calendar::parse("@yearly", DEFAULT_TZ).unwrap();
        assert_eq!(
            late.latest_at_or_before(datetime!(9999-01-01 00:00:00 UTC)),
            Some(datetime!(4999-01-01 00:00:00 UTC))
        );
        assert_eq!(late.next_after(datetime!(4999-06-01 00:00:00 UTC)), None);
    }
}
