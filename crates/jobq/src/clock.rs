//! Wall-clock time for the snapshot's timestamps. Scheduling itself runs on tokio's clock
//! (`tokio::time::Instant`), so tests drive it with a paused runtime; the wall clock only labels
//! events, and is injectable so the controller's own (fake in tests) clock labels them.

use std::fmt;

use time::OffsetDateTime;

/// A source of "now" for timestamps.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant, in UTC.
    fn now(&self) -> OffsetDateTime;
}

/// The system clock, in UTC, truncated to milliseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        truncate_to_millis(OffsetDateTime::now_utc())
    }
}

/// `t` without its sub-millisecond part.
pub(crate) fn truncate_to_millis(t: OffsetDateTime) -> OffsetDateTime {
    let millis = t.millisecond();
    t.replace_nanosecond(u32::from(millis) * 1_000_000).unwrap_or(t)
}

/// Serde as an RFC 3339 string (`2026-11-30T12:00:00Z`, `2026-11-30T12:00:00.25Z`).
pub(crate) mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
        let text = t.format(&Rfc3339).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OffsetDateTime, D::Error> {
        let text = String::deserialize(deserializer)?;
        OffsetDateTime::parse(&text, &Rfc3339).map_err(serde::de::Error::custom)
    }

    /// The same for an optional instant (`null` when absent).
    pub mod option {
        use super::*;

        #[allow(clippy::ref_option)] // serde's `with` hands over `&Option<T>`
        pub fn serialize<S: Serializer>(t: &Option<OffsetDateTime>, serializer: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => super::serialize(t, serializer),
                None => serializer.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<OffsetDateTime>, D::Error> {
            let text = Option::<String>::deserialize(deserializer)?;
            text.map(|t| OffsetDateTime::parse(&t, &Rfc3339).map_err(serde::de::Error::custom)).transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_system_clock_is_utc_in_whole_milliseconds() {
        let now = SystemClock.now();
        assert_eq!(now.offset(), time::UtcOffset::UTC);
        assert_eq!(now.nanosecond() % 1_000_000, 0);
        assert_eq!(
            truncate_to_millis(datetime!(2026-11-30 12:00:00.123_456_789 UTC)),
            datetime!(2026-11-30 12:00:00.123 UTC)
        );
    }
}
