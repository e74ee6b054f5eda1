//! How swarmctl writes durations, schedules, tables and the API's JSON.

use std::time::Duration;

use hyperhive_schedule::{Calendar, next_fire_after};
use time::OffsetDateTime;

use super::client::{self, CtlError};
use super::untrusted;

use hyperhive_swarm_api::schedules::{AgentStatus, FiredSlots, ScheduleDefinition, ScheduleView, Stamp};
use hyperhive_swarm_api::work::LastTurn;
use serde_json::Value;

/// JSON `value`, indented, with a final newline.
pub(super) fn pretty(value: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(value).expect("a JSON value serializes"))
}

/// The API's JSON as it came (`--json`), so nothing the controller says is lost on the way.
pub(super) fn pretty_answer(bytes: &[u8]) -> Result<String, CtlError> {
    Ok(pretty(&client::answer::<Value>(bytes)?))
}

/// A text field, or `-` when empty.
pub(super) fn or_dash(value: &str) -> String {
    if value.is_empty() { "-".into() } else { value.to_owned() }
}

/// `--every`: a humantime duration of whole seconds, at least one (30m, 1h, 1d, 90s).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_every(s: &str) -> Result<u64, String> {
    let cron_like = s.trim_start().starts_with('@') || s.contains('*') || s.split_whitespace().count() >= 5;
    if cron_like {
        return Err(format!(
            "{s:?} looks like a calendar, not a duration; use --cron '{s}' (with --tz ZONE for a time zone other than UTC)"
        ));
    }
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 90s, 30m, 1h or 1d"))?;
    if d.subsec_nanos() != 0 || d < Duration::from_secs(1) {
        return Err(format!("{s:?} is not a whole number of seconds >= 1"));
    }
    Ok(d.as_secs())
}

/// An interval as the shortest exact unit: 90s, 30m, 1h, 1d; `once` for a one-shot.
pub fn format_every(interval: Option<u64>) -> String {
    match interval {
        None => "once".into(),
        Some(s) if s % 86_400 == 0 => format!("{}d", s / 86_400),
        Some(s) if s % 3_600 == 0 => format!("{}h", s / 3_600),
        Some(s) if s % 60 == 0 => format!("{}m", s / 60),
        Some(s) => format!("{s}s"),
    }
}

/// A schedule's timing: its interval (`1h`, `once`) or its calendar and zone.
pub fn timing(d: &ScheduleDefinition) -> String {
    match &d.calendar {
        Some(line) => format!("{line} ({})", d.tz.as_deref().unwrap_or("UTC")),
        None => format_every(d.interval),
    }
}

/// The calendar of a calendar schedule, parsed; its error when this build cannot evaluate it.
fn calendar(d: &ScheduleDefinition) -> Option<Result<Calendar, String>> {
    let line = d.calendar.as_deref()?;
    Some(Calendar::parse(line, d.tz.as_deref().unwrap_or("UTC")).map_err(|e| e.to_string()))
}

/// The next `n` fire times after `now`, each written in the schedule's zone (RFC 3339 UTC for an
/// interval schedule).
pub fn next_fires(d: &ScheduleDefinition, now: OffsetDateTime, n: usize) -> Result<Vec<String>, String> {
    let calendar = calendar(d).transpose()?;
    let mut out = Vec::new();
    let mut t = now;
    while out.len() < n {
        let Some(next) = next_fire_after(d.anchor.0, d.interval, calendar.as_ref(), t) else { break };
        out.push(in_zone(calendar.as_ref(), next));
        t = next;
    }
    Ok(out)
}

/// `t` in a calendar's zone, or RFC 3339 UTC without one.
fn in_zone(calendar: Option<&Calendar>, t: OffsetDateTime) -> String {
    calendar.map_or_else(|| Stamp(t).to_string(), |c| c.local(t))
}

/// When the schedule fires next, as seen at `now`.
pub fn next_fire(s: &ScheduleView, now: OffsetDateTime) -> String {
    let d = &s.definition;
    if d.paused {
        return "paused".into();
    }
    match next_fires(d, now, 1) {
        Ok(next) => next.into_iter().next().unwrap_or_else(|| "done".into()),
        Err(e) => format!("cannot evaluate: {e}"),
    }
}

/// The agents, each marked when the roster does not know it or it was destroyed.
fn agents(s: &ScheduleView) -> Vec<String> {
    s.definition
        .agents
        .iter()
        .map(|a| match s.agent_status.get(a) {
            Some(status @ (AgentStatus::Unknown | AgentStatus::Destroyed)) => format!("{a} ({})", status.as_str()),
            _ => a.to_string(),
        })
        .collect()
}

/// The `schedule list` table.
pub fn table(schedules: &[ScheduleView], now: OffsetDateTime) -> String {
    let rows = schedules.iter().map(|s| {
        let d = &s.definition;
        [
            d.id.clone(),
            d.name.clone(),
            agents(s).join(","),
            timing(d),
            if d.paused { "yes" } else { "no" }.into(),
            next_fire(s, now),
        ]
    });
    grid(["ID", "NAME", "AGENTS", "EVERY", "PAUSED", "NEXT FIRE"], rows)
}

/// A table: each column as wide as its widest cell, two spaces between columns.
pub fn grid<const N: usize>(header: [&str; N], rows: impl IntoIterator<Item = [String; N]>) -> String {
    let header = header.map(String::from);
    // Cells hold what hives and agents wrote: never a control for the operator's terminal.
    let rows: Vec<[String; N]> = rows.into_iter().map(|row| row.map(|c| untrusted::cell(&c).into_owned())).collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    std::iter::once(&header)
        .chain(&rows)
        .map(|row| {
            let cells: Vec<String> = row.iter().zip(widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
            format!("{}\n", cells.join("  ").trim_end())
        })
        .collect()
}

/// How a turn ended, in a few words: `succeeded`, `failed (exit 3)`, `timed out`.
pub fn turn_result(last: &LastTurn) -> String {
    use hyperhive_hive_proto::turns::TurnOutcome;
    match (last.outcome, last.exit_code) {
        (TurnOutcome::Failed, Some(code)) => format!("failed (exit {code})"),
        (outcome, _) => outcome.as_str().replace('_', " "),
    }
}

/// How many fire times `schedule show` lists.
pub const SHOWN_FIRES: usize = 5;

/// `schedule show`: every field, the next fires, each agent's latest fired slot as its turn
/// history records it (`fired`, or why it could not be read; left out when `None`), the body
/// last.
pub fn details(s: &ScheduleView, fired: Option<&Result<FiredSlots, String>>, now: OffsetDateTime) -> String {
    let d = &s.definition;
    let agents: Vec<String> = agents(s)
        .into_iter()
        .zip(&d.agents)
        .map(|(shown, a)| match d.not_before.get(a) {
            Some(nb) => format!("{shown} (not before {nb})"),
            None => shown,
        })
        .collect();
    let mut out = format!(
        "id:        {}\nname:      {}\nrevision:  {}\nagents:    {}\nanchor:    {}\n",
        d.id,
        d.name,
        s.revision,
        agents.join(", "),
        d.anchor,
    );
    match &d.calendar {
        Some(line) => out.push_str(&format!("calendar:  {line}\ntz:        {}\n", d.tz.as_deref().unwrap_or("UTC"))),
        None => out.push_str(&format!("every:     {}\n", format_every(d.interval))),
    }
    if d.allow_unknown_agents {
        out.push_str("unknown agents allowed: yes\n");
    }
    out.push_str(&format!("paused:    {}\n", if d.paused { "yes" } else { "no" }));
    match next_fires(d, now, SHOWN_FIRES) {
        Ok(next) if next.is_empty() => out.push_str("next fires: none (done)\n"),
        Ok(next) => {
            let note = if d.paused { " (while paused none of these fires)" } else { "" };
            out.push_str(&format!("next fires{note}:\n"));
            for t in next {
                out.push_str(&format!("  {t}\n"));
            }
        }
        Err(e) => out.push_str(&format!("next fires: cannot evaluate ({e})\n")),
    }
    match fired {
        None => {}
        Some(Ok(fired)) => {
            out.push_str("last fired (the latest slot each agent's turn history records):\n");
            let calendar = calendar(d).and_then(Result::ok);
            let width = fired.agents.keys().map(|a| a.as_str().len()).max().unwrap_or(0);
            for (agent, slot) in &fired.agents {
                let line = match slot {
                    Some(f) => match hyperhive_schedule::parse_instant(&f.slot) {
                        Ok(t) => {
                            let (result, ended) = (turn_result(&f.turn), untrusted::cell(&f.turn.ended_at));
                            format!("{}: {result}, ended {ended}", in_zone(calendar.as_ref(), t))
                        }
                        Err(_) => format!("{}: {}", untrusted::cell(&f.slot), turn_result(&f.turn)),
                    },
                    None => "none recorded".into(),
                };
                out.push_str(&format!("  {:width$}  {line}\n", agent.as_str()));
            }
        }
        Some(Err(e)) => out.push_str(&format!("last fired: could not be read ({e})\n")),
    }
    out.push_str(&format!("body:\n{}\n", d.body));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepts_the_documented_forms() {
        for (s, secs) in [("30m", 1800), ("1h", 3600), ("1d", 86_400), ("90s", 90), ("1h 30m", 5400)] {
            assert_eq!(parse_every(s), Ok(secs), "{s}");
        }
        for bad in ["", "soon", "90", "1500ms", "0s", "-1h"] {
            assert!(parse_every(bad).is_err(), "{bad}");
        }
        for cron in ["0 9 * * 1-5", "@daily", "*/5"] {
            let err = parse_every(cron).unwrap_err();
            assert!(err.contains("use --cron"), "{cron}: {err}");
        }
    }

    #[test]
    fn every_is_shown_in_its_largest_exact_unit() {
        let shown: Vec<String> =
            [None, Some(90), Some(1800), Some(5400), Some(7200), Some(172_800)].into_iter().map(format_every).collect();
        assert_eq!(shown, ["once", "90s", "30m", "90m", "2h", "2d"]);
    }

    fn view(calendar: Option<&str>, tz: Option<&str>) -> ScheduleView {
        let agent = |s: &str| hyperhive_schedule::AgentName::parse(s).unwrap();
        let t = time::macros::datetime!(2026-12-01 00:00:00 UTC);
        ScheduleView {
            definition: ScheduleDefinition {
                id: "0123456789abcdef".into(),
                name: "mornings".into(),
                agents: vec![agent("a"), agent("b"), agent("c")],
                body: "plan".into(),
                anchor: Stamp(t),
                interval: calendar.is_none().then_some(3600),
                calendar: calendar.map(str::to_owned),
                tz: tz.map(str::to_owned),
                paused: false,
                allow_unknown_agents: true,
                not_before: [(agent("a"), Stamp(t))].into(),
            },
            revision: 3,
            agent_status: [
                (agent("a"), AgentStatus::Known),
                (agent("b"), AgentStatus::Unknown),
                (agent("c"), AgentStatus::Destroyed),
            ]
            .into(),
            next_fire: None,
        }
    }

    #[test]
    fn show_lists_the_next_fires_in_the_zone_and_marks_agents() {
        // Friday 2026-12-04 12:00 UTC: next are Monday to Friday at 09:00 in Berlin (+01:00).
        let now = time::macros::datetime!(2026-12-04 12:00:00 UTC);
        let ended = "2026-12-04T08:00:03Z\u{1b}]0;owned\u{7}";
        let turn = LastTurn {
            todo_id: "schedule:s1:a:2026-12-04T08:00:00Z".into(),
            source: "schedule:s1".into(),
            outcome: hyperhive_hive_proto::turns::TurnOutcome::Failed,
            exit_code: Some(3),
            ended_at: ended.into(),
        };
        let slot = hyperhive_swarm_api::schedules::FiredSlot { slot: "2026-12-04T08:00:00Z".into(), turn };
        let fired = FiredSlots { agents: [("a".parse().unwrap(), Some(slot)), ("b".parse().unwrap(), None)].into() };
        let shown = details(&view(Some("0 9 * * 1-5"), Some("Europe/Berlin")), Some(&Ok(fired)), now);
        for line in [
            "agents:    a (not before 2026-12-01T00:00:00Z), b (unknown), c (destroyed)",
            "calendar:  0 9 * * 1-5",
            "tz:        Europe/Berlin",
            "unknown agents allowed: yes",
            "  2026-12-07 09:00 +01:00",
            "  2026-12-11 09:00 +01:00",
            "  a  2026-12-04 09:00 +01:00: failed (exit 3), ended 2026-12-04T08:00:03Z",
            "  b  none recorded",
        ] {
            assert!(shown.contains(line), "{line:?} missing:\n{shown}");
        }
        assert!(!shown.contains('\u{1b}'), "an agent's words cannot command the terminal:\n{shown}");
        let unread = details(&view(None, None), Some(&Err("TURNS has no leader".into())), now);
        assert!(unread.contains("last fired: could not be read (TURNS has no leader)"), "{unread}");
        assert!(!details(&view(None, None), None, now).contains("last fired"));
        assert_eq!(shown.lines().filter(|l| l.starts_with("  2026-12-")).count(), SHOWN_FIRES, "{shown}");
        let tokyo = table(&[view(Some("@daily"), Some("Asia/Tokyo"))], now);
        assert!(tokyo.contains("@daily (Asia/Tokyo)") && tokyo.contains("2026-12-05 00:00 +09:00"), "{tokyo}");
        assert!(tokyo.contains("a,b (unknown),c (destroyed)"), "{tokyo}");
        // An interval schedule is shown as before, in UTC.
        let hourly = table(&[view(None, None)], now);
        assert!(hourly.contains("1h") && hourly.contains("2026-12-04T13:00:00Z"), "{hourly}");
    }

    #[test]
    fn a_calendar_this_build_cannot_evaluate_says_so() {
        let now = time::macros::datetime!(2026-12-04 12:00:00 UTC);
        let shown = details(&view(Some("@daily"), Some("Mars/Olympus")), None, now);
        assert!(shown.contains("next fires: cannot evaluate") && shown.contains("Mars/Olympus"), "{shown}");
    }
}
