//! The slot rule over random histories of calendar schedules, in zones with and without daylight
//! saving, starting just before their clock changes: ticks, clock jumps (downtime of minutes to a
//! year), restarts, crashes between publish and record, body and timing edits (a new cron line, a
//! new zone, a new anchor, or a switch to or from an interval), pause and resume. Invariants, as
//! for interval schedules (`slot_properties.rs`): no slot is delivered twice, every fire is a slot
//! of the current calendar (or grid), due, the latest one, not before the anchor or `not_before`,
//! fired slots only move forward, no slot inside a pause ever fires, and a tick right after a fire
//! fires nothing.

use std::collections::BTreeSet;

use hyperhive_schedule::{AgentSchedule, due_slot};
use proptest::prelude::*;
use time::{Duration, OffsetDateTime};

/// Cron lines with fixed times, wildcards and steps, names, and a leap-day one.
const LINES: [&str; 12] = [
    "30 2 * * *",
    "30 * * * *",
    "*/20 * * * *",
    "0 9 * * 1-5",
    "15,45 1-3 * * *",
    "@hourly",
    "@daily",
    "0 0 29 2 *",
    "*/7 2 * * 0",
    "* * * * *",
    "0 3 * * 0",
    "0 2 * * *",
];

/// Zones with the usual one-hour change (both hemispheres), a 30-minute one, and none.
const ZONES: [&str; 6] =
    ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"];

/// Starts a few hours before a clock change in one of the zones (2027), or anywhere.
const STARTS: [&str; 6] = [
    "2027-03-27T22:00:00Z", // Berlin springs forward at 01:00Z on the 28th
    "2027-10-30T22:00:00Z", // Berlin falls back at 01:00Z on the 31st
    "2027-03-14T03:00:00Z", // New York springs forward at 07:00Z
    "2027-11-07T02:00:00Z", // New York falls back at 06:00Z
    "2027-04-03T12:00:00Z", // Sydney (16:00Z) and Lord Howe (15:00Z) fall back
    "2027-10-02T12:00:00Z", // Sydney (16:00Z) and Lord Howe (15:30Z) spring forward
];

#[derive(Debug, Clone)]
enum Timing {
    Calendar { line: usize, zone: usize },
    Interval(Option<u64>),
}

#[derive(Debug, Clone)]
enum Op {
    Advance(i64),
    Tick,
    TickCrashBeforeRecord,
    Restart,
    BodyEdit,
    TimingEdit { anchor_shift: i64, timing: Timing },
    Pause,
    Resume,
}

fn timing() -> impl Strategy<Value = Timing> {
    prop_oneof![
        5 => (0..LINES.len(), 0..ZONES.len()).prop_map(|(line, zone)| Timing::Calendar { line, zone }),
        1 => prop::option::weighted(0.8, 60u64..7200).prop_map(Timing::Interval),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..900).prop_map(Op::Advance),
        2 => (0i64..20_000).prop_map(Op::Advance),
        1 => (0i64..40_000_000).prop_map(Op::Advance),
        8 => Just(Op::Tick),
        1 => Just(Op::TickCrashBeforeRecord),
        1 => Just(Op::Restart),
        1 => Just(Op::BodyEdit),
        1 => (-200_000i64..20_000, timing()).prop_map(|(anchor_shift, timing)| Op::TimingEdit { anchor_shift, timing }),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
    ]
}

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn apply(s: &mut AgentSchedule, timing: &Timing) {
    match *timing {
        Timing::Calendar { line, zone } => {
            s.interval = None;
            s.calendar = Some(LINES[line].to_owned());
            s.tz = Some(ZONES[zone].to_owned());
        }
        Timing::Interval(interval) => {
            s.interval = interval;
            s.calendar = None;
            s.tz = None;
        }
    }
}

/// Whether `slot` is a slot of `s` and the latest one at or before `now`.
fn latest_on_grid(s: &AgentSchedule, slot: OffsetDateTime, now: OffsetDateTime) -> Result<(), TestCaseError> {
    prop_assert!(slot >= s.anchor, "{slot} before the anchor {}", s.anchor);
    match s.calendar().unwrap() {
        Some(calendar) => {
            prop_assert_eq!(calendar.next_after(slot - Duration::seconds(1)), Some(slot), "{} is not a slot", slot);
            let next = calendar.next_after(slot);
            prop_assert!(next.is_none_or(|n| n > now), "{slot} is not the latest slot at {now}: {next:?} is");
        }
        None => {
            let offset = (slot - s.anchor).whole_seconds();
            match s.interval {
                None => prop_assert_eq!(offset, 0),
                Some(i) => {
                    prop_assert_eq!(offset % i as i64, 0, "{} is off the grid", slot);
                    prop_assert!(slot + Duration::seconds(i as i64) > now, "{slot} is not the latest");
                }
            }
        }
    }
    Ok(())
}

fn check_history(start: usize, anchor_offset: i64, first: Timing, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let start = OffsetDateTime::parse(STARTS[start], &time::format_description::well_known::Rfc3339).unwrap();
    let mut now = start.unix_timestamp();
    let mut schedule = AgentSchedule {
        id: "s".into(),
        body: "b0".into(),
        anchor: at(now + anchor_offset),
        interval: None,
        calendar: None,
        tz: None,
        paused: false,
        not_before: at(now),
    };
    apply(&mut schedule, &first);
    let mut recorded: Option<OffsetDateTime> = None;
    let mut delivered: BTreeSet<OffsetDateTime> = BTreeSet::new();
    let mut unrecorded: Option<OffsetDateTime> = None;
    let mut pauses: Vec<(i64, i64)> = Vec::new();
    let mut paused_since: Option<i64> = None;
    let mut fired_this_instant = false;

    for op in ops {
        match op {
            Op::Advance(secs) => {
                now += secs;
                if secs > 0 {
                    fired_this_instant = false;
                }
            }
            Op::Tick | Op::TickCrashBeforeRecord => {
                let Some(slot) = due_slot(&schedule, recorded, at(now)) else { continue };
                prop_assert!(!fired_this_instant || unrecorded.is_some(), "a second fire without time passing: {slot}");
                prop_assert!(slot <= at(now), "fired a future slot");
                latest_on_grid(&schedule, slot, at(now))?;
                prop_assert!(slot >= schedule.not_before, "{slot} before not_before");
                prop_assert!(!schedule.paused, "fired while paused");
                prop_assert!(recorded.is_none_or(|r| slot > r), "went backwards");
                let t = slot.unix_timestamp();
                prop_assert!(!pauses.iter().any(|&(from, to)| from <= t && t < to), "{slot} fell during a pause");
                if delivered.contains(&slot) {
                    prop_assert_eq!(unrecorded, Some(slot), "slot {} delivered twice", slot);
                }
                delivered.insert(slot);
                fired_this_instant = true;
                if matches!(op, Op::Tick) {
                    recorded = Some(slot);
                    unrecorded = None;
                } else {
                    unrecorded = Some(slot);
                }
            }
            Op::Restart => {}
            Op::BodyEdit => schedule.body.push('!'),
            Op::TimingEdit { anchor_shift, timing } => {
                schedule.anchor = at(now + anchor_shift);
                apply(&mut schedule, &timing);
                schedule.not_before = at(now);
                fired_this_instant = false;
            }
            Op::Pause => {
                if !schedule.paused {
                    schedule.paused = true;
                    paused_since = Some(now);
                }
            }
            Op::Resume => {
                if let Some(from) = paused_since.take() {
                    schedule.paused = false;
                    schedule.not_before = at(now);
                    pauses.push((from, now));
                    fired_this_instant = false;
                }
            }
        }
    }
    Ok(())
}

/// A daily 02:30 in Berlin ticked every minute across both clock changes of 2027 fires once a
/// day: at 03:00 +02:00 on the day the clock springs forward, at the first 02:30 on the day it
/// falls back.
#[test]
fn a_daily_slot_ticked_every_minute_fires_once_a_day_across_both_changes() {
    for (from, shifted) in
        [("2027-03-26T12:00:00Z", "2027-03-28T01:00:00Z"), ("2027-10-29T12:00:00Z", "2027-10-31T00:30:00Z")]
    {
        let from = OffsetDateTime::parse(from, &time::format_description::well_known::Rfc3339).unwrap();
        let shifted = OffsetDateTime::parse(shifted, &time::format_description::well_known::Rfc3339).unwrap();
        let schedule = AgentSchedule {
            id: "s".into(),
            body: "b".into(),
            anchor: from,
            interval: None,
            calendar: Some("30 2 * * *".into()),
            tz: Some("Europe/Berlin".into()),
            paused: false,
            not_before: from,
        };
        let mut recorded = None;
        let mut fired = Vec::new();
        for minute in 0..4 * 24 * 60 {
            let now = from + Duration::minutes(minute);
            if let Some(slot) = due_slot(&schedule, recorded, now) {
                fired.push(slot);
                recorded = Some(slot);
            }
        }
        assert_eq!(fired.len(), 4, "{fired:?}");
        assert!(fired.contains(&shifted), "{fired:?}");
        for pair in fired.windows(2) {
            let hours = (pair[1] - pair[0]).whole_hours();
            assert!((23..=25).contains(&hours), "{fired:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn no_calendar_history_breaks_the_slot_invariants(
        start in 0..STARTS.len(),
        anchor_offset in -200_000i64..20_000,
        first in timing(),
        ops in prop::collection::vec(op(), 1..150),
    ) {
        check_history(start, anchor_offset, first, ops)?;
    }
}
