//! How swarmctl writes durations, schedules and tables.

use std::time::Duration;

use hyperhive_schedule::next_slot_after;
use time::OffsetDateTime;

use super::untrusted;

use hyperhive_swarm_api::schedules::{ScheduleView, Stamp};

/// `--every`: a humantime duration of whole seconds, at least one (30m, 1h, 1d, 90s).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_every(s: &str) -> Result<u64, String> {
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

/// When the schedule fires next, as seen at `now`.
pub fn next_fire(s: &ScheduleView, now: OffsetDateTime) -> String {
    let d = &s.definition;
    if d.paused {
        return "paused".into();
    }
    match next_slot_after(d.anchor.0, d.interval, now) {
        Some(t) => Stamp(t).to_string(),
        None => "done".into(),
    }
}

/// The `schedule list` table.
pub fn table(schedules: &[ScheduleView], now: OffsetDateTime) -> String {
    let rows = schedules.iter().map(|s| {
        let d = &s.definition;
        let agents: Vec<&str> = d.agents.iter().map(|a| a.as_str()).collect();
        [
            d.id.clone(),
            d.name.clone(),
            agents.join(","),
            format_every(d.interval),
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

/// `schedule show`: every field, the body last.
pub fn details(s: &ScheduleView, now: OffsetDateTime) -> String {
    let d = &s.definition;
    let agents: Vec<String> = d
        .agents
        .iter()
        .map(|a| match d.not_before.get(a) {
            Some(nb) => format!("{a} (not before {nb})"),
            None => a.to_string(),
        })
        .collect();
    format!(
        "id:        {}\nname:      {}\nrevision:  {}\nagents:    {}\nanchor:    {}\nevery:     {}\npaused:    {}\nnext fire: {}\nbody:\n{}\n",
        d.id,
        d.name,
        s.revision,
        agents.join(", "),
        d.anchor,
        format_every(d.interval),
        if d.paused { "yes" } else { "no" },
        next_fire(s, now),
        d.body,
    )
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
    }

    #[test]
    fn every_is_shown_in_its_largest_exact_unit() {
        let shown: Vec<String> =
            [None, Some(90), Some(1800), Some(5400), Some(7200), Some(172_800)].into_iter().map(format_every).collect();
        assert_eq!(shown, ["once", "90s", "30m", "90m", "2h", "2d"]);
    }
}
