//! The slot rule over random histories: ticks, clock jumps (downtime), restarts,
//! crashes between publish and record, body and timing edits, pause and resume. Invariants:
//! no slot is delivered twice, every fire is on the current grid, due and not before
//! `not_before`, fired slots only move forward, no slot inside a pause ever fires, and a tick
//! right after a fire fires nothing (at most one catch-up per gap).

use std::collections::BTreeSet;

use hyperhive_schedule::{AgentSchedule, due_slot};
use proptest::prelude::*;
use time::OffsetDateTime;

const START: i64 = 1_800_000_000;

#[derive(Debug, Clone)]
enum Op {
    /// The clock moves on (short steps and long downtimes).
    Advance(i64),
    /// One ticker pass: fire the due slot, publish, record.
    Tick,
    /// A tick that publishes and crashes before recording the slot.
    TickCrashBeforeRecord,
    /// The agent restarts: only the recorded slot survives (it lives in the state db).
    Restart,
    /// The prompt changes; timing does not.
    BodyEdit,
    /// Anchor and/or interval change; the controller moves `not_before` to now.
    TimingEdit {
        anchor_shift: i64,
        interval: Option<u64>,
    },
    Pause,
    Resume,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..200).prop_map(Op::Advance),
        1 => (0i64..100_000).prop_map(Op::Advance),
        6 => Just(Op::Tick),
        1 => Just(Op::TickCrashBeforeRecord),
        1 => Just(Op::Restart),
        1 => Just(Op::BodyEdit),
        1 => (-5_000i64..5_000, prop::option::weighted(0.8, 1u64..500))
            .prop_map(|(anchor_shift, interval)| Op::TimingEdit { anchor_shift, interval }),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
    ]
}

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn on_grid(s: &AgentSchedule, slot: OffsetDateTime) -> bool {
    let offset = (slot - s.anchor).whole_seconds();
    match s.interval {
        _ if offset < 0 => false,
        None => offset == 0,
        Some(i) => offset % i as i64 == 0,
    }
}

/// Plays one history against the slot rule, failing at the first broken invariant.
fn check_history(anchor_offset: i64, interval: Option<u64>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut now = START;
    let mut schedule = AgentSchedule {
        id: "s".into(),
        body: "b0".into(),
        anchor: at(START + anchor_offset),
        interval,
        calendar: None,
        tz: None,
        paused: false,
        not_before: at(START),
    };
    let mut recorded: Option<OffsetDateTime> = None;
    // Slots JetStream has accepted (the message id dedupes a republish of the same slot).
    let mut delivered: BTreeSet<OffsetDateTime> = BTreeSet::new();
    // A slot published by a crashed tick but not recorded.
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
                prop_assert!(on_grid(&schedule, slot), "{slot} is off the grid");
                prop_assert!(slot >= schedule.not_before, "{slot} before not_before");
                prop_assert!(!schedule.paused, "fired while paused");
                prop_assert!(recorded.is_none_or(|r| slot > r), "went backwards");
                let t = slot.unix_timestamp();
                prop_assert!(!pauses.iter().any(|&(from, to)| from <= t && t < to), "{slot} fell during a pause");
                if delivered.contains(&slot) {
                    // Only a crashed tick's own slot may be published again (and is dropped
                    // as a duplicate by its message id).
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
            Op::TimingEdit { anchor_shift, interval } => {
                schedule.anchor = at(now + anchor_shift);
                schedule.interval = interval;
                schedule.not_before = at(now);
                // A slot of the new grid at this very instant may fire. The unrecorded slot
                // stays: a slot's message id names only the schedule and the instant, so the
                // new grid's slot at that same instant is dropped as its duplicate.
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

/// Found by the property below: a tick crashed before recording its slot, then a timing edit
/// whose new grid has a slot at that same instant. The slot is published again under the same
/// message id, so JetStream delivers it once.
#[test]
fn a_timing_edit_after_a_crashed_tick_republishes_only_under_the_same_id() {
    let ops = vec![
        Op::Advance(197),
        Op::Advance(4),
        Op::TickCrashBeforeRecord,
        Op::TimingEdit { anchor_shift: -266, interval: Some(1) },
        Op::Tick,
    ];
    check_history(-7058, Some(17), ops).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn no_history_breaks_the_slot_invariants(
        anchor_offset in -10_000i64..10_000,
        interval in prop::option::weighted(0.85, 1u64..500),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        check_history(anchor_offset, interval, ops)?;
    }
}
