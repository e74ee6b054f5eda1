//! How a job queue runs: how many attempts at once, how many per job, how long between them.

use std::time::Duration;

/// How the wait before a retry is drawn below its ceiling (see [`crate::backoff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Exactly the ceiling (tests and reasoning only: jobs failing together retry together).
    None,
    /// Anywhere from zero to the ceiling: spreads retries the most, but may retry at once.
    Full,
    /// From half the ceiling to the ceiling: spread, and never sooner than half (the default).
    Equal,
}

/// The queue's settings; [`JobqConfig::default`] suits the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobqConfig {
    /// Attempts in flight at once, across all jobs (1 to [`MAX_CONCURRENCY`]). A job beyond it
    /// waits as `ready`. Default 8: provisioning talks to a handful of servers, each of which
    /// should not see a burst from one controller.
    pub max_concurrency: usize,
    /// The ceiling of the first retry's wait; it doubles per failed attempt. Default 1 s.
    pub backoff_base: Duration,
    /// The largest ceiling, at least `backoff_base`. Default 60 s.
    pub backoff_max: Duration,
    /// Attempts per job before it is `failed` (1 to [`MAX_ATTEMPTS`]). Default 6: with the
    /// defaults, the waits' ceilings are 1, 2, 4, 8 and 16 s, so a job fails 16 to 31 s (plus
    /// its attempts' own time) after its first attempt: long enough to ride out a server
    /// restart, short enough for an operator watching `swarmctl jobs` to see it.
    pub max_attempts: u32,
    /// How each wait is drawn below its ceiling. Default [`Jitter::Equal`].
    pub jitter: Jitter,
    /// The longest one attempt may run; a longer one is stopped and counts as failed, so a hung
    /// server cannot hold a slot forever. Default 5 minutes.
    pub attempt_timeout: Duration,
}

/// The most attempts in flight at once.
pub const MAX_CONCURRENCY: usize = 1024;
/// The most attempts per job.
pub const MAX_ATTEMPTS: u32 = 100;

impl Default for JobqConfig {
    fn default() -> Self {
        Self {
            max_concurrency: 8,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            max_attempts: 6,
            jitter: Jitter::Equal,
            attempt_timeout: Duration::from_secs(300),
        }
    }
}

/// Why a [`JobqConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid job queue configuration: {0}")]
pub struct ConfigError(String);

impl JobqConfig {
    /// Checks every field's range.
    ///
    /// # Errors
    /// [`ConfigError`] naming the field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |m: String| Err(ConfigError(m));
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return fail(format!("max_concurrency is {}; it must be 1 to {MAX_CONCURRENCY}", self.max_concurrency));
        }
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return fail(format!("max_attempts is {}; it must be 1 to {MAX_ATTEMPTS}", self.max_attempts));
        }
        if self.backoff_base.is_zero() {
            return fail("backoff_base is zero; it must be positive".into());
        }
        if self.backoff_max < self.backoff_base {
            return fail(format!(
                "backoff_max ({:?}) is below backoff_base ({:?}); it must be at least as long",
                self.backoff_max, self.backoff_base
            ));
        }
        // A day: beyond it, a retry is no longer "automatic" in any useful sense, and the
        // arithmetic stays far from overflow.
        if self.backoff_max > Duration::from_secs(86_400) {
            return fail(format!("backoff_max is {:?}; it must be at most one day", self.backoff_max));
        }
        if self.attempt_timeout.is_zero() {
            return fail("attempt_timeout is zero; it must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid() {
        let c = JobqConfig::default();
        c.validate().unwrap();
        assert_eq!((c.max_concurrency, c.max_attempts), (8, 6));
        assert_eq!((c.backoff_base, c.backoff_max), (Duration::from_secs(1), Duration::from_secs(60)));
    }

    #[test]
    fn each_bad_field_is_named() {
        let base = JobqConfig::default();
        let cases = [
            (JobqConfig { max_concurrency: 0, ..base.clone() }, "max_concurrency is 0"),
            (JobqConfig { max_concurrency: 1025, ..base.clone() }, "max_concurrency is 1025"),
            (JobqConfig { max_attempts: 0, ..base.clone() }, "max_attempts is 0"),
            (JobqConfig { max_attempts: 101, ..base.clone() }, "max_attempts is 101"),
            (JobqConfig { backoff_base: Duration::ZERO, ..base.clone() }, "backoff_base is zero"),
            (JobqConfig { backoff_max: Duration::from_millis(500), ..base.clone() }, "below backoff_base"),
            (JobqConfig { backoff_max: Duration::from_secs(86_401), ..base.clone() }, "at most one day"),
            (JobqConfig { attempt_timeout: Duration::ZERO, ..base.clone() }, "attempt_timeout is zero"),
        ];
        for (config, needle) in cases {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        JobqConfig { max_concurrency: 1, max_attempts: 1, backoff_max: base.backoff_base, ..base }.validate().unwrap();
    }
}
