//! Instants in the schedule documents: UTC, whole seconds, RFC 3339 (`2026-11-30T09:00:00Z`).
//! Whole seconds keep slot arithmetic exact and the canonical bytes stable.

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Why a string is not a schedule instant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstantError {
    /// Not RFC 3339 at all.
    #[error("{0:?} is not an RFC 3339 instant (write e.g. 2026-11-30T09:00:00Z)")]
    NotRfc3339(String),
    /// Schedules work in whole seconds.
    #[error("{0:?} has fractional seconds; schedule times are whole seconds (e.g. 2026-11-30T09:00:00Z)")]
    Fractional(String),
}

/// Parses an RFC 3339 instant with any offset into UTC; refuses fractional seconds.
///
/// # Errors
/// [`InstantError`] saying what is wrong with `s`.
pub fn parse_instant(s: &str) -> Result<OffsetDateTime, InstantError> {
    let shown = || s.chars().take(64).collect::<String>();
    let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| InstantError::NotRfc3339(shown()))?;
    if t.nanosecond() != 0 {
        return Err(InstantError::Fractional(shown()));
    }
    Ok(t.to_offset(UtcOffset::UTC))
}

/// `t` in UTC with its sub-second part dropped (for "now" and other clock readings).
pub fn whole_seconds_utc(t: OffsetDateTime) -> OffsetDateTime {
    t.to_offset(UtcOffset::UTC).replace_nanosecond(0).expect("0 is a valid nanosecond")
}

/// Formats an instant as RFC 3339 in UTC, whole seconds.
pub fn format_instant(t: OffsetDateTime) -> String {
    whole_seconds_utc(t).format(&Rfc3339).expect("a UTC instant with a four-digit year formats as RFC 3339")
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
    }

    #[test]
    fn whole_seconds_drops_the_fraction() {
        let t = datetime!(2026-11-30 10:00:00.75 +01:00);
        assert_eq!(whole_seconds_utc(t), datetime!(2026-11-30 09:00:00 UTC));
    }
}
