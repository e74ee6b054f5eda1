//! Schedule instants and slots never panic, whatever a client or a document gives: every
//! RFC 3339-ish string is either refused with an error or parsed into the supported range and
//! written back unchanged, and every (anchor, interval, now) gives a slot inside that range or
//! none. The anchors and slots at the edges of the range are named cases.

use hyperhive_schedule::instant::{MAX_INSTANT, MIN_INSTANT};
use hyperhive_schedule::{AgentSchedule, InstantError, due_slot, format_instant, next_slot_after, parse_instant};
use proptest::prelude::*;
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// Strings shaped like RFC 3339 instants, with every field allowed to stray out of its range
/// (years 0000 and 9999, offsets up to +-99:99, leap seconds, fractions, lowercase separators).
fn rfc3339ish() -> impl Strategy<Value = String> {
    let year = prop_oneof![Just(0u32), Just(1), Just(9998), Just(9999), 0u32..10_000];
    let any_date = (year, 0u32..14, 0u32..33).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"));
    // The first and last day, where an offset carries the instant out of the range.
    let edge_date = prop_oneof![Just("0000-01-01".to_owned()), Just("9999-12-31".to_owned())];
    let date = prop_oneof![2 => any_date, 1 => edge_date];
    let clock = (0u32..25, 0u32..61, 0u32..62).prop_map(|(h, m, s)| format!("{h:02}:{m:02}:{s:02}"));
    let fraction = prop::option::weighted(0.2, "\\.[0-9]{1,12}");
    let offset = prop_oneof![
        Just("Z".to_owned()),
        Just("z".to_owned()),
        Just("-00:01".to_owned()),
        Just("+00:01".to_owned()),
        (prop::bool::ANY, 0u32..100, 0u32..100)
            .prop_map(|(east, h, m)| format!("{}{h:02}:{m:02}", if east { '+' } else { '-' })),
    ];
    let separator = prop_oneof![Just('T'), Just('t'), Just(' ')];
    (date, separator, clock, fraction, offset).prop_map(|(date, sep, clock, fraction, offset)| {
        format!("{date}{sep}{clock}{}{offset}", fraction.unwrap_or_default())
    })
}

/// Any instant `time` can hold (years -9999 to 9999), at any offset.
fn any_instant() -> impl Strategy<Value = OffsetDateTime> {
    let days = Date::MIN.to_julian_day()..=Date::MAX.to_julian_day();
    let edge_days = prop_oneof![
        Just(Date::MIN.to_julian_day()),
        Just(Date::MAX.to_julian_day()),
        Just(MIN_INSTANT.date().to_julian_day()),
        Just(MAX_INSTANT.date().to_julian_day()),
    ];
    let day = prop_oneof![3 => days, 1 => edge_days];
    let offset = prop_oneof![Just(0), Just(-60), Just(60), -86_399i32..=86_399];
    (day, 0u32..86_400, offset).prop_map(|(day, second, offset)| {
        let date = Date::from_julian_day(day).expect("a day in range");
        let (h, m, s) = (second / 3600, second / 60 % 60, second % 60);
        let time = Time::from_hms(h as u8, m as u8, s as u8).expect("a time of day");
        PrimitiveDateTime::new(date, time).assume_offset(UtcOffset::from_whole_seconds(offset).expect("offset"))
    })
}

fn interval() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![Just(None), Just(Some(0)), Just(Some(1)), Just(Some(u64::MAX)), any::<u64>().prop_map(Some)]
}

fn in_supported_range(t: OffsetDateTime) -> bool {
    (MIN_INSTANT..=MAX_INSTANT).contains(&t)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn parsing_never_panics_and_what_parses_writes_back(s in rfc3339ish()) {
        if let Ok(t) = parse_instant(&s) {
            prop_assert!(in_supported_range(t), "{s} parsed to {t}, outside the range");
            prop_assert_eq!(t.offset(), UtcOffset::UTC);
            let written = format_instant(t);
            prop_assert_eq!(parse_instant(&written), Ok(t), "{} -> {}", s, written);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,40}") {
        let _ = parse_instant(&s);
    }

    #[test]
    fn formatting_any_instant_never_panics(t in any_instant()) {
        let written = format_instant(t);
        if in_supported_range(t) {
            prop_assert_eq!(parse_instant(&written), Ok(t.replace_nanosecond(0).unwrap()));
        }
    }

    #[test]
    fn slots_of_any_anchor_interval_and_now_are_in_range_or_none(
        anchor in any_instant(),
        interval in interval(),
        now in any_instant(),
        not_before in any_instant(),
        last in prop::option::of(any_instant()),
    ) {
        let next = next_slot_after(anchor, interval, now);
        let schedule =
            AgentSchedule { id: "s".into(), body: "b".into(), anchor, interval, calendar: None, tz: None, paused: false, not_before };
        let due = due_slot(&schedule, last, now);
        for slot in [next, due].into_iter().flatten() {
            prop_assert!(in_supported_range(slot), "slot {slot} outside the range");
            prop_assert_eq!(parse_instant(&format_instant(slot)), Ok(slot));
        }
    }
}

#[test]
fn anchors_just_outside_the_range_are_refused_with_the_range() {
    for outside in ["9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00+00:01", "9999-12-31T23:30:00-23:59"] {
        let err = parse_instant(outside).unwrap_err();
        assert!(matches!(err, InstantError::OutOfRange(_)), "{outside}: {err:?}");
        let message = err.to_string();
        assert!(message.contains("0000-01-01T00:00:00Z..9999-12-31T23:59:59Z"), "{message}");
        assert!(message.contains(outside), "{message}");
    }
}

#[test]
fn the_edges_of_the_range_are_accepted() {
    for (given, written) in [
        ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
        ("0000-01-01T00:01:00+00:01", "0000-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
        ("9999-12-31T23:58:59-00:01", "9999-12-31T23:59:59Z"),
    ] {
        assert_eq!(format_instant(parse_instant(given).unwrap()), written);
    }
}

#[test]
fn slots_past_the_end_of_the_range_are_no_slot() {
    let schedule = AgentSchedule {
        id: "s".into(),
        body: "b".into(),
        anchor: MAX_INSTANT,
        interval: Some(10 * 366 * 24 * 3600),
        calendar: None,
        tz: None,
        paused: false,
        not_before: MIN_INSTANT,
    };
    assert_eq!(next_slot_after(MAX_INSTANT, Some(1), MAX_INSTANT), None);
    assert_eq!(due_slot(&schedule, None, MAX_INSTANT), Some(MAX_INSTANT));
    assert_eq!(due_slot(&schedule, Some(MAX_INSTANT), MAX_INSTANT), None);
    // An anchor before the range (never accepted from outside) gives no slot rather than one
    // that cannot be written.
    let before = MIN_INSTANT - time::Duration::DAY;
    let early = AgentSchedule { anchor: before, interval: None, not_before: before, ..schedule };
    assert_eq!(due_slot(&early, None, MIN_INSTANT), None);
    assert_eq!(next_slot_after(before, None, before - time::Duration::DAY), None);
}
