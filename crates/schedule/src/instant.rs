//! Instants in the schedule documents: UTC, whole seconds, RFC 3339 (`2026-11-30T09:00:00Z`).
//! Whole seconds keep slot arithmetic exact and the canonical bytes stable.
//!
//! RFC 3339 writes four-digit years, so a schedule instant is between [`MIN_INSTANT`] and
//! [`MAX_INSTANT`] in UTC. A string can name a local time inside those years whose UTC instant
//! is not (`9999-12-31T23:59:59-00:01` is in year 10000): [`parse_instant`] refuses it, and the
//! slot rule never yields a slot outside the range, so every instant read or computed here can be
//! written back.

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{OffsetDateTime, UtcOffset};

/// The earliest instant a schedule may name (the first second RFC 3339 can write in UTC).
pub const MIN_INSTANT: OffsetDateTime = datetime!(0000-01-01 00:00:00 UTC);
/// The latest instant a schedule may name (the last second RFC 3339 can write in UTC).
pub const MAX_INSTANT: OffsetDateTime = datetime!(9999-12-31 23:59:59 UTC);

/// Why a string is not a schedule instant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstantError {
    /// Not RFC 3339 at all.
    #[error("{0:?} is not an RFC 3339 instant (write e.g. 2026-11-30T09:00:00Z)")]
    NotRfc3339(String),
    /// Schedules work in whole seconds.
    #[error("{0:?} has fractional seconds; schedule times are whole seconds (e.g. 2026-11-30T09:00:00Z)")]
    Fractional(String),
    /// Outside [`MIN_INSTANT`]..=[`MAX_INSTANT`] once in UTC.
    #[error(
        "{0:?} is outside the supported range 0000-01-01T00:00:00Z..9999-12-31T23:59:59Z once \
         converted to UTC; give an instant inside it"
    )]
    OutOfRange(String),
}

/// Parses an RFC 3339 instant with any offset into UTC; refuses fractional seconds and instants
/// outside [`MIN_INSTANT`]..=[`MAX_INSTANT`].
///
/// # Errors
/// [`InstantError`] saying what is wrong with `s`.
pub fn parse_instant(s: &str) -> Result<OffsetDateTime, InstantError> {
    let shown = || s.chars().take(64).collect::<String>();
    let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| InstantError::NotRfc3339(shown()))?;
    if t.nanosecond() != 0 {
        return Err(InstantError::Fractional(shown()));
    }
    t.checked_to_offset(UtcOffset::UTC).filter(is_supported).ok_or_else(|| InstantError::OutOfRange(shown()))
}

/// Whether `t` is inside [`MIN_INSTANT`]..=[`MAX_INSTANT`] (at any offset).
pub fn is_supported(t: &OffsetDateTime) -> bool {
    (MIN_INSTANT..=MAX_INSTANT).contains(t)
}

/// `t` in UTC with its sub-second part dropped (for "now" and other clock readings).
///
/// An instant whose UTC date `time` cannot hold (an offset at the very edge of year -9999 or
/// 9999) keeps its offset rather than panicking; no clock reads such a time.
pub fn whole_seconds_utc(t: OffsetDateTime) -> OffsetDateTime {
    t.checked_to_offset(UtcOffset::UTC).unwrap_or(t).replace_nanosecond(0).expect("0 is a valid nanosecond")
}

/// Formats an instant as RFC 3339 in UTC, whole seconds.
///
/// Never panics: an instant outside [`MIN_INSTANT`]..=[`MAX_INSTANT`], which nothing parsed or
/// computed here is, has no RFC 3339 form in UTC and is written as `time` displays it (e.g.
/// `-0001-12-31 23:59:59.0 +00:00:00`), which [`parse_instant`] refuses.
pub fn format_instant(t: OffsetDateTime) -> String {
    let t = whole_seconds_utc(t);
    let rfc3339 = is_supported(&t).then(|| t.format(&Rfc3339).ok()).flatten();
    rfc3339.unwrap_or_else(|| t.to_string())
}

pub(crate) fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_instant(*t))
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
    let s = String::deserialize(d)?;
    parse_instant(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn parses_any_offset_into_utc() {
        let t = parse_instant("2026-11-30T10:00:00+01:00").unwrap();
        assert_eq!(t, datetime!(2026-11-30 09:00:00 UTC));
        assert_eq!(t.offset(), UtcOffset::UTC);
        assert_eq!(format_instant(t), "2026-11-30T09:00:00Z");
    }

    #[test]
    fn rejects_bad_instants_clearly() {
        let err = parse_instant("tomorrow").unwrap_err().to_string();
        assert!(err.contains("not an RFC 3339 instant"), "{err}");
        let err = parse_instant("2026-11-30T09:00:00.5Z").unwrap_err().to_string();
        assert!(err.contains("whole seconds"), "{err}");
        let err = parse_instant("9999-12-31T23:59:59-00:01").unwrap_err().to_string();
        assert!(err.contains("outside the supported range"), "{err}");
    }

    #[test]
    fn what_cannot_be_rfc_3339_is_still_written_without_a_panic() {
        for (outside, written) in [
            (datetime!(-0001-12-31 23:59:59 UTC), "-0001-12-31 23:59:59.0 +00:00:00"),
            // Year 10000 in UTC, which `time` cannot hold: it keeps its offset.
            (datetime!(9999-12-31 23:59:59 -00:01), "9999-12-31 23:59:59.0 -00:01:00"),
        ] {
            assert_eq!(format_instant(outside), written);
            assert!(parse_instant(&format_instant(outside)).is_err());
        }
    }

    #[test]
    fn whole_seconds_drops_the_fraction() {
        let t = datetime!(2026-11-30 10:00:00.75 +01:00);
        assert_eq!(whole_seconds_utc(t), datetime!(2026-11-30 09:00:00 UTC));
    }
}
