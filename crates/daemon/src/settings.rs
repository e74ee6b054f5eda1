//! Checking a daemon's settings: every problem at once, durations spelled one way, renamed
//! variables read for one more release.
//!
//! A daemon reads each setting as text by its variable name (a lookup over the environment, or
//! over the clap arguments that mirror it), turns it into a typed value, and reports what is
//! wrong to a [`Check`] instead of stopping at the first bad one. [`Check::finish`] then gives
//! either the settings with the warnings to log, or [`Problems`]: one line per bad setting, each
//! starting with the variable's name and saying what to write.

use std::fmt;
use std::time::Duration;

/// One missing or malformed setting: a line that starts with its variable's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    variable: &'static str,
    line: String,
}

impl Problem {
    /// `VARIABLE: message`.
    pub fn new(variable: &'static str, message: impl fmt::Display) -> Self {
        Self { variable, line: format!("{variable}: {message}") }
    }

    /// A line already worded around the variable (`VARIABLE "x" must be ...`); it must start
    /// with the variable's name, and is prefixed with it when it does not.
    pub fn line(variable: &'static str, line: impl Into<String>) -> Self {
        let line = line.into();
        if line.starts_with(variable) { Self { variable, line } } else { Self::new(variable, line) }
    }

    /// The variable that is wrong.
    pub fn variable(&self) -> &'static str {
        self.variable
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line whatever a parser's message held: a journal shows each line on its own.
        f.write_str(&self.line.replace('\n', " "))
    }
}

/// Every problem found, in the order the settings were read; shown one a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Problems(Vec<Problem>);

impl Problems {
    /// The problems, one per bad setting.
    pub fn iter(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter()
    }

    /// How many settings are wrong.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true for a [`Problems`] that [`Check::finish`] returned.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The lines, as a daemon prints them before it exits.
    pub fn lines(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

impl From<Problem> for Problems {
    fn from(problem: Problem) -> Self {
        Self(vec![problem])
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Checked settings and the warnings reading them gave (a renamed variable still in use).
#[derive(Debug)]
pub struct Loaded<T> {
    /// The settings.
    pub config: T,
    /// One line each, for the daemon to log at start.
    pub warnings: Vec<String>,
}

impl<T> Loaded<T> {
    /// Logs every warning and gives the settings.
    pub fn log_warnings(self) -> T {
        for warning in &self.warnings {
            tracing::warn!("{warning}");
        }
        self.config
    }
}

/// Collects the problems and warnings of one reading of the settings.
#[derive(Debug, Default)]
pub struct Check {
    problems: Vec<Problem>,
    warnings: Vec<String>,
}

impl Check {
    /// Records a problem.
    pub fn problem(&mut self, problem: Problem) {
        self.problems.push(problem);
    }

    /// Records `VARIABLE: message`.
    pub fn report(&mut self, variable: &'static str, message: impl fmt::Display) {
        self.problem(Problem::new(variable, message));
    }

    /// The value, or `None` with its problem recorded.
    pub fn ok<T>(&mut self, result: Result<T, Problem>) -> Option<T> {
        result.map_err(|problem| self.problem(problem)).ok()
    }

    /// Records a warning line.
    pub fn warn(&mut self, line: impl Into<String>) {
        self.warnings.push(line.into());
    }

    /// The text of `variable`, else of its old name (with a warning saying to rename it).
    pub fn renamed(&mut self, lookup: &dyn Fn(&str) -> Option<String>, variable: Renamed) -> Option<Found> {
        let found = self.find(lookup, variable)?;
        if found.old {
            self.warn(format!(
                "{} is renamed {}; the old name is read for this release only: set {} instead",
                variable.old, variable.name, variable.name
            ));
        }
        Some(found)
    }

    /// The text under the new name, else the old one; both set is worth a warning, since the
    /// old one is then silently ignored.
    fn find(&mut self, lookup: &dyn Fn(&str) -> Option<String>, variable: Renamed) -> Option<Found> {
        let old = lookup(variable.old);
        match (lookup(variable.name), old) {
            (Some(text), old) => {
                if old.is_some() {
                    self.warn(format!(
                        "{} is ignored: {} is set and replaces it; unset {}",
                        variable.old, variable.name, variable.old
                    ));
                }
                Some(Found { variable: variable.name, text, old: false })
            }
            (None, Some(text)) => Some(Found { variable: variable.old, text, old: true }),
            (None, None) => None,
        }
    }

    /// A duration setting: `variable.name` in humantime (`30s`, `5m`), else the old `*_SECS`
    /// variable as a bare whole number of seconds (with a warning naming the new variable and
    /// the value to write there), else `default`. The caller checks the range and words the
    /// error of a value that does not parse (an old variable may keep its old message).
    pub fn duration_or_old_seconds(
        &mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
        variable: Renamed,
        default: Duration,
    ) -> DurationSetting {
        let Some(found) = self.find(lookup, variable) else {
            return DurationSetting { variable: variable.name, old: false, value: Ok(default) };
        };
        if !found.old {
            return DurationSetting { variable: found.variable, old: false, value: parse_duration(&found.text) };
        }
        let value = parse_seconds(&found.text);
        if let Ok(secs) = value {
            self.warn(format!(
                "{} is renamed {} and takes a duration: write {}={}; the old name is read for this release only",
                variable.old,
                variable.name,
                variable.name,
                humantime::format_duration(secs)
            ));
        }
        DurationSetting { variable: found.variable, old: true, value }
    }

    /// The settings `value` makes when nothing was wrong, else every problem.
    ///
    /// `value` is `None` only when some setting was refused, and each refusal records its
    /// problem; should a refusal have recorded none, the error still says so rather than panic.
    ///
    /// # Errors
    /// [`Problems`] holding every problem recorded.
    pub fn finish<T>(mut self, value: impl FnOnce() -> Option<T>) -> Result<Loaded<T>, Problems> {
        if self.problems.is_empty() {
            match value() {
                Some(config) => return Ok(Loaded { config, warnings: self.warnings }),
                None => self.report("settings", "a setting was refused without a reason; this is a bug"),
            }
        }
        Err(Problems(self.problems))
    }
}

/// A duration as read by [`Check::duration_or_old_seconds`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationSetting {
    /// The variable it came from (the new name when neither was set).
    pub variable: &'static str,
    /// Whether that is the old `*_SECS` name.
    pub old: bool,
    /// The duration, or why its text is not one.
    pub value: Result<Duration, String>,
}

impl DurationSetting {
    /// The duration when it parses and `accept` takes it, else `None` with `refusal`'s problem
    /// (given the variable, the parse error if any) recorded: `VARIABLE: message`, or the
    /// message as it is when it starts with the variable's name.
    pub fn check(
        self,
        check: &mut Check,
        accept: impl FnOnce(Duration) -> bool,
        refusal: impl FnOnce(&Self) -> String,
    ) -> Option<Duration> {
        match self.value {
            Ok(value) if accept(value) => Some(value),
            _ => {
                let message = refusal(&self);
                check.problem(Problem::line(self.variable, message));
                None
            }
        }
    }
}

/// A variable with the name it had until this release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    /// The name to write.
    pub name: &'static str,
    /// The name still read, with a warning, for one release.
    pub old: &'static str,
}

/// The text of a setting and which name it was found under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The variable that held it (the old name when only that was set).
    pub variable: &'static str,
    /// Its text.
    pub text: String,
    /// Whether it came from the old name.
    pub old: bool,
}

/// A humantime duration: `30s`, `5m`, `1h 30m`, `500ms`.
///
/// # Errors
/// A message saying what was written and how to write a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration ({e}); write it like 30s, 5m or 1h"))
}

/// A whole number of seconds, the spelling of the old `*_SECS` variables.
///
/// # Errors
/// A message saying a whole number of seconds is expected.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| format!("{text:?} is not a whole number of seconds, e.g. 60"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const EVERY: Renamed = Renamed { name: "X_EVERY", old: "X_SECS" };

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    fn duration(pairs: &[(&str, &str)]) -> (DurationSetting, Check) {
        let mut check = Check::default();
        let found = check.duration_or_old_seconds(&env(pairs), EVERY, Duration::from_secs(60));
        (found, check)
    }

    #[test]
    fn a_humantime_duration_and_an_old_seconds_integer_both_parse() {
        let (found, check) = duration(&[("X_EVERY", "5m")]);
        assert_eq!(found, DurationSetting { variable: "X_EVERY", old: false, value: Ok(Duration::from_secs(300)) });
        assert!(check.warnings.is_empty(), "{:?}", check.warnings);

        let (found, check) = duration(&[("X_SECS", "90")]);
        assert_eq!(found, DurationSetting { variable: "X_SECS", old: true, value: Ok(Duration::from_secs(90)) });
        assert_eq!(check.warnings.len(), 1, "{:?}", check.warnings);
        let warning = &check.warnings[0];
        assert!(warning.contains("X_SECS") && warning.contains("X_EVERY=1m 30s"), "{warning}");

        let (found, check) = duration(&[]);
        assert_eq!(found, DurationSetting { variable: "X_EVERY", old: false, value: Ok(Duration::from_secs(60)) });
        assert!(check.warnings.is_empty() && check.problems.is_empty());
    }

    #[test]
    fn a_duration_in_the_wrong_spelling_names_its_variable() {
        let (found, mut check) = duration(&[("X_EVERY", "60")]);
        assert_eq!(found.check(&mut check, |_| true, |s| s.value.clone().unwrap_err()), None);
        let problems = check.finish(|| Some(())).unwrap_err().to_string();
        assert!(problems.starts_with("X_EVERY: \"60\" is not a duration") && problems.contains("30s"), "{problems}");

        let (found, mut check) = duration(&[("X_SECS", "1m")]);
        assert!(found.old && found.value.is_err());
        assert!(check.warnings.is_empty(), "no rename warning for a value that is refused");
        assert_eq!(found.check(&mut check, |_| true, |_| "old words".into()), None);
        assert_eq!(check.finish(|| Some(())).unwrap_err().to_string(), "X_SECS: old words");

        let (found, mut check) = duration(&[("X_EVERY", "0s")]);
        assert_eq!(found.check(&mut check, |d| !d.is_zero(), |_| "must be more than zero".into()), None);
        assert_eq!(check.finish(|| Some(())).unwrap_err().to_string(), "X_EVERY: must be more than zero");
    }

    #[test]
    fn the_new_name_wins_and_the_old_one_is_said_to_be_ignored() {
        let mut check = Check::default();
        let found = check.renamed(&env(&[("X_EVERY", "a"), ("X_SECS", "b")]), EVERY).unwrap();
        assert_eq!(found, Found { variable: "X_EVERY", text: "a".into(), old: false });
        assert!(check.warnings[0].contains("X_SECS is ignored"), "{:?}", check.warnings);

        let mut check = Check::default();
        let found = check.renamed(&env(&[("X_SECS", "b")]), EVERY).unwrap();
        assert_eq!(found, Found { variable: "X_SECS", text: "b".into(), old: true });
        assert!(check.warnings[0].contains("set X_EVERY instead"), "{:?}", check.warnings);
    }

    #[test]
    fn every_problem_is_reported_one_a_line() {
        let mut check = Check::default();
        check.report("A", "is not set; set it to x");
        check.problem(Problem::line("B", "B \"y\" must be absolute"));
        check.problem(Problem::line("C", "a message\nover two lines"));
        check.warn("kept apart");
        let problems = check.finish(|| Some(())).unwrap_err();
        assert_eq!(problems.len(), 3);
        assert_eq!(
            problems.lines(),
            ["A: is not set; set it to x", "B \"y\" must be absolute", "C: a message over two lines"]
        );
        assert_eq!(problems.iter().map(Problem::variable).collect::<Vec<_>>(), ["A", "B", "C"]);
    }

    #[test]
    fn a_refusal_without_a_problem_is_an_error_not_a_panic() {
        let problems = Check::default().finish(|| None::<()>).unwrap_err();
        assert!(problems.to_string().contains("bug"), "{problems}");
    }
}
