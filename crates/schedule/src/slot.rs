//! The slot rule (docs/swarm/schedules.md): one pure function of (definition, last recorded slot, now).
//!
//! Slots are `anchor + k * interval` for k >= 0 (only `anchor` for a one-shot), or, for a
//! calendar schedule, the fire times of its calendar at or after `anchor` (found by a backwards
//! search from `now`, see [`crate::calendar`]). The rest of the rule is the same for both. The latest slot
//! at or before `now` is found in O(1) with k = floor((now - anchor) / interval), never by
//! enumerating missed slots, so any length of downtime costs the same and yields one catch-up.
//! Arithmetic is on whole UTC seconds in i128, so no instant the `time` crate can represent
//! overflows; a slot outside the instants a schedule can write (years 0000 to 9999, see
//! [`crate::instant`]) is simply "no slot".

use time::OffsetDateTime;

use crate::calendar::Calendar;
use crate::doc::AgentSchedule;
use crate::instant::is_supported;

/// The slot `s` should fire now, if any: the latest slot at or before `now`, provided the schedule
/// is not paused, the slot is not before `not_before` and it is later than `last_fired` (the last
/// slot this agent recorded for this schedule id).
///
/// Consequences: a body edit (same anchor, interval and `not_before`) never moves or refires a
/// slot; after downtime only the latest missed slot fires, once; a restart refires nothing;
/// a one-shot fires once; slots that fell during a pause are before the resume's `not_before`.
///
/// A calendar this build cannot evaluate ([`AgentSchedule::calendar`] fails) has no slot; the
/// agent reports it.
pub fn due_slot(s: &AgentSchedule, last_fired: Option<OffsetDateTime>, now: OffsetDateTime) -> Option<OffsetDateTime> {
    if s.paused {
        return None;
    }
    let slot = match s.calendar() {
        Ok(Some(calendar)) => latest_calendar_slot(s.anchor, &calendar, now)?,
        Ok(None) => latest_slot_at_or_before(s.anchor, s.interval, now)?,
        Err(_) => return None,
    };
    let after_last = last_fired.is_none_or(|last| slot > last);
    (slot >= s.not_before && after_last).then_some(slot)
}

/// The first slot strictly after `t` (what `swarmctl schedule list` shows as the next fire), or
/// `None` when a one-shot's slot has passed.
pub fn next_slot_after(anchor: OffsetDateTime, interval: Option<u64>, t: OffsetDateTime) -> Option<OffsetDateTime> {
    let (a, now) = (seconds(anchor), seconds(t));
    if now < a {
        return instant(a);
    }
    let step = positive_interval(interval)?;
    instant(a + ((now - a) / step + 1) * step)
}

/// The first slot strictly after `t` of either form: the calendar's when there is one, else the
/// interval grid's.
pub fn next_fire_after(
    anchor: OffsetDateTime,
    interval: Option<u64>,
    calendar: Option<&Calendar>,
    t: OffsetDateTime,
) -> Option<OffsetDateTime> {
    match calendar {
        // The first calendar slot at or after the anchor, or after t.
        Some(calendar) => calendar.next_after(t.max(anchor - time::Duration::seconds(1))),
        None => next_slot_after(anchor, interval, t),
    }
}

/// The latest calendar slot at or before `t`, if it is not before the anchor.
fn latest_calendar_slot(anchor: OffsetDateTime, calendar: &Calendar, t: OffsetDateTime) -> Option<OffsetDateTime> {
    calendar.latest_at_or_before(t).filter(|slot| *slot >= anchor)
}

/// The latest slot at or before `t`, or `None` before the anchor.
fn latest_slot_at_or_before(
    anchor: OffsetDateTime,
    interval: Option<u64>,
    t: OffsetDateTime,
) -> Option<OffsetDateTime> {
    let (a, now) = (seconds(anchor), seconds(t));
    if now < a {
        return None;
    }
    match positive_interval(interval) {
        None => instant(a),
        Some(step) => instant(a + (now - a) / step * step),
    }
}

/// An interval of 0 has no grid; documents refuse it, and here it degrades to a one-shot
/// rather than a division by zero.
fn positive_interval(interval: Option<u64>) -> Option<i128> {
    interval.filter(|&i| i > 0).map(i128::from)
}

fn seconds(t: OffsetDateTime) -> i128 {
    i128::from(t.unix_timestamp())
}

fn instant(seconds: i128) -> Option<OffsetDateTime> {
    let seconds = i64::try_from(seconds).ok()?;
    OffsetDateTime::from_unix_timestamp(seconds).ok().filter(is_supported)
}

#[cfg(test)]
mod tests {
    //! One named case per seed guarantee; the property test is in `tests/slot_properties.rs`.
    use super::*;
    use time::Duration;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-11-30 09:00:00 UTC);
    const HOUR: u64 = 3600;

    fn hourly() -> AgentSchedule {
        AgentSchedule {
            id: "s".into(),
            body: "b".into(),
            anchor: T0,
            interval: Some(HOUR),
            calendar: None,
            tz: None,
            paused: false,
            not_before: T0 - Duration::minutes(5),
        }
    }

    fn hours(n: i64) -> Duration {
        Duration::hours(n)
    }

    #[test]
    fn fires_the_slot_at_its_time_and_not_before() {
        let s = hourly();
        assert_eq!(due_slot(&s, None, T0 - Duration::seconds(1)), None);
        assert_eq!(due_slot(&s, None, T0), Some(T0));
        assert_eq!(due_slot(&s, Some(T0), T0 + Duration::minutes(59)), None);
        assert_eq!(due_slot(&s, Some(T0), T0 + hours(1)), Some(T0 + hours(1)));
    }

    #[test]
    fn body_edit_never_moves_or_refires_a_slot() {
        let s = hourly();
        let fired = due_slot(&s, None, T0 + Duration::seconds(10)).unwrap();
        let edited = AgentSchedule { body: "a new prompt".into(), ..s.clone() };
        assert_eq!(due_slot(&edited, Some(fired), T0 + Duration::seconds(20)), None);
        assert_eq!(due_slot(&edited, Some(fired), T0 + hours(1)), Some(T0 + hours(1)));
    }

    #[test]
    fn downtime_fires_only_the_latest_missed_slot_once() {
        let s = hourly();
        let back = T0 + hours(5) + Duration::minutes(30);
        assert_eq!(due_slot(&s, Some(T0), back), Some(T0 + hours(5)));
        assert_eq!(due_slot(&s, Some(T0 + hours(5)), back + Duration::seconds(10)), None);
    }

    #[test]
    fn downtime_of_centuries_is_still_one_step() {
        let s = hourly();
        let back = datetime!(2999-01-01 00:30:00 UTC);
        assert_eq!(due_slot(&s, Some(T0), back), Some(datetime!(2999-01-01 00:00:00 UTC)));
    }

    #[test]
    fn restart_refires_nothing() {
        let s = hourly();
        let fired = due_slot(&s, None, T0).unwrap();
        // A restart only re-reads last_fired from the state db: the same inputs, no fire.
        for later in [0, 1, 10, 3599] {
            assert_eq!(due_slot(&s, Some(fired), T0 + Duration::seconds(later)), None);
        }
    }

    #[test]
    fn one_shot_fires_once() {
        let s = AgentSchedule { interval: None, ..hourly() };
        assert_eq!(due_slot(&s, None, T0 - Duration::seconds(1)), None);
        assert_eq!(due_slot(&s, None, T0 + hours(3)), Some(T0));
        assert_eq!(due_slot(&s, Some(T0), T0 + hours(300)), None);
        assert_eq!(next_slot_after(T0, None, T0 - hours(1)), Some(T0));
        assert_eq!(next_slot_after(T0, None, T0), None);
    }

    #[test]
    fn paused_slots_are_skipped_and_never_fired_after_resume() {
        let s = hourly();
        let paused = AgentSchedule { paused: true, ..s.clone() };
        assert_eq!(due_slot(&paused, Some(T0), T0 + hours(3)), None);
        // Resumed at 03:30 past T0: the controller moves not_before to the resume.
        let resumed = AgentSchedule { not_before: T0 + hours(3) + Duration::minutes(30), ..s };
        assert_eq!(due_slot(&resumed, Some(T0), T0 + hours(3) + Duration::minutes(31)), None);
        assert_eq!(due_slot(&resumed, Some(T0), T0 + hours(4)), Some(T0 + hours(4)));
    }

    #[test]
    fn timing_edit_never_fires_a_slot_before_the_edit() {
        let s = hourly();
        let edit_at = T0 + hours(2) + Duration::minutes(10);
        // Interval shortened to 15 minutes from the same anchor: slots before the edit are gone.
        let edited = AgentSchedule { interval: Some(900), not_before: edit_at, ..s };
        assert_eq!(due_slot(&edited, Some(T0 + hours(2)), edit_at), None);
        assert_eq!(
            due_slot(&edited, Some(T0 + hours(2)), edit_at + Duration::minutes(5)),
            Some(T0 + hours(2) + Duration::minutes(15))
        );
        // An anchor moved into the past from a fresh agent: nothing before the edit either.
        let moved = AgentSchedule { anchor: T0 - hours(48), not_before: edit_at, ..hourly() };
        assert_eq!(due_slot(&moved, None, edit_at), None);
    }

    #[test]
    fn next_slot_is_strictly_after() {
        assert_eq!(next_slot_after(T0, Some(HOUR), T0), Some(T0 + hours(1)));
        assert_eq!(next_slot_after(T0, Some(HOUR), T0 - hours(9)), Some(T0));
        assert_eq!(next_slot_after(T0, Some(HOUR), T0 + hours(1) - Duration::seconds(1)), Some(T0 + hours(1)));
        assert_eq!(next_slot_after(T0, Some(u64::MAX), T0), None);
    }

    #[test]
    fn interval_zero_degrades_to_a_one_shot() {
        let s = AgentSchedule { interval: Some(0), ..hourly() };
        assert_eq!(due_slot(&s, None, T0 + hours(2)), Some(T0));
        assert_eq!(due_slot(&s, Some(T0), T0 + hours(4)), None);
    }

    fn weekdays_at_nine_in_berlin() -> AgentSchedule {
        AgentSchedule {
            interval: None,
            calendar: Some("0 9 * * 1-5".into()),
            tz: Some("Europe/Berlin".into()),
            anchor: datetime!(2026-11-30 00:00:00 UTC),
            not_before: datetime!(2026-11-30 00:00:00 UTC),
            ..hourly()
        }
    }

    // Monday 2026-11-30 09:00 in Berlin is 08:00 UTC.
    const MON: OffsetDateTime = datetime!(2026-11-30 08:00:00 UTC);

    #[test]
    fn a_calendar_slot_fires_at_its_time_once() {
        let s = weekdays_at_nine_in_berlin();
        assert_eq!(due_slot(&s, None, MON - Duration::seconds(1)), None);
        assert_eq!(due_slot(&s, None, MON), Some(MON));
        assert_eq!(due_slot(&s, Some(MON), MON + hours(5)), None);
        assert_eq!(due_slot(&s, Some(MON), MON + hours(24)), Some(MON + hours(24)));
    }

    #[test]
    fn calendar_body_edit_restart_and_downtime_follow_the_same_rule() {
        let s = weekdays_at_nine_in_berlin();
        let edited = AgentSchedule { body: "new".into(), ..s.clone() };
        assert_eq!(due_slot(&edited, Some(MON), MON + Duration::minutes(10)), None);
        // Down from Monday to Saturday noon: only Friday's slot fires, once.
        let saturday = datetime!(2026-12-05 11:00:00 UTC);
        let friday = datetime!(2026-12-04 08:00:00 UTC);
        assert_eq!(due_slot(&s, Some(MON), saturday), Some(friday));
        assert_eq!(due_slot(&s, Some(friday), saturday), None);
        // Down for years, back on a Saturday: still one backwards search, one catch-up (Friday).
        assert_eq!(
            due_slot(&s, Some(MON), datetime!(2999-06-15 12:00:00 UTC)),
            Some(datetime!(2999-06-14 07:00:00 UTC))
        );
    }

    #[test]
    fn calendar_pause_resume_and_anchor_are_honoured() {
        let s = weekdays_at_nine_in_berlin();
        let paused = AgentSchedule { paused: true, ..s.clone() };
        assert_eq!(due_slot(&paused, None, MON + hours(1)), None);
        let resumed = AgentSchedule { not_before: MON + hours(1), ..s.clone() };
        assert_eq!(due_slot(&resumed, None, MON + hours(2)), None);
        assert_eq!(due_slot(&resumed, None, MON + hours(24)), Some(MON + hours(24)));
        // No calendar slot before the anchor.
        let later = AgentSchedule { anchor: MON + Duration::seconds(1), ..s.clone() };
        assert_eq!(due_slot(&later, None, MON + hours(2)), None);
        assert_eq!(
            next_fire_after(later.anchor, None, s.calendar().unwrap().as_ref(), MON - hours(48)),
            Some(MON + hours(24))
        );
        assert_eq!(next_fire_after(s.anchor, None, s.calendar().unwrap().as_ref(), MON - hours(48)), Some(MON));
    }

    #[test]
    fn a_calendar_the_agent_cannot_evaluate_fires_nothing() {
        let s = AgentSchedule { tz: Some("Mars/Olympus".into()), ..weekdays_at_nine_in_berlin() };
        assert_eq!(due_slot(&s, None, MON + hours(1)), None);
    }
}
