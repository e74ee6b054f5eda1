//! What a job is: its id, its spec (kind, agent, dependencies), its state and its work.

use std::borrow::Borrow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AttemptError;

/// The longest job id: room for an agent name (32), a dot and a kind with a suffix.
pub const MAX_ID_LEN: usize = 128;
/// The longest kind and agent label.
pub const MAX_LABEL_LEN: usize = 64;

/// Why a string is not a job id, kind or agent label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {what} {given:?}: {reason}; a {what} is a lowercase letter or digit followed by up to \
     {max_rest} lowercase letters, digits, '.', '_' or '-'"
)]
pub struct InvalidName {
    what: &'static str,
    given: String,
    reason: &'static str,
    max_rest: usize,
}

/// Checks `s` against `^[a-z0-9][a-z0-9._-]{0,max-1}$`.
fn check(what: &'static str, s: &str, max: usize) -> Result<(), InvalidName> {
    let reject = |reason| Err(InvalidName { what, given: s.chars().take(64).collect(), reason, max_rest: max - 1 });
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    match s.chars().next() {
        None => return reject("it is empty"),
        Some(c) if !allowed(c) => return reject("it must start with a-z or 0-9"),
        Some(_) => {}
    }
    if s.len() > max {
        return reject(if max == MAX_ID_LEN {
            "it is longer than 128 characters"
        } else {
            "it is longer than 64 characters"
        });
    }
    if !s.chars().all(|c| allowed(c) || matches!(c, '.' | '_' | '-')) {
        return reject("it may only contain a-z, 0-9, '.', '_' and '-'");
    }
    Ok(())
}

/// A job's id: `^[a-z0-9][a-z0-9._-]{0,127}$`, e.g. `alpha.forge-user`. Safe in a URL path
/// segment, a log line and a terminal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(String);

impl JobId {
    /// Checks `s` against `^[a-z0-9][a-z0-9._-]{0,127}$`.
    ///
    /// # Errors
    /// [`InvalidName`] naming the rule `s` breaks.
    pub fn parse(s: &str) -> Result<Self, InvalidName> {
        check("job id", s, MAX_ID_LEN).map(|()| Self(s.to_owned()))
    }

    /// The id as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for JobId {
    type Err = InvalidName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for JobId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Checks a kind or agent label: `^[a-z0-9][a-z0-9._-]{0,63}$`.
pub(crate) fn check_label(what: &'static str, s: &str) -> Result<(), InvalidName> {
    check(what, s, MAX_LABEL_LEN)
}

/// What to add: the job's id, its kind (what the work does, e.g. `forge-user`), the agent it is
/// for (if any) and the jobs that must succeed before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// Unique in the graph.
    pub id: JobId,
    /// `^[a-z0-9][a-z0-9._-]{0,63}$`, e.g. `sso`, `forge-user`.
    pub kind: String,
    /// The agent the job works for, `^[a-z0-9][a-z0-9._-]{0,63}$`; `GET /api/jobq/graph?agent=`
    /// filters on it.
    pub agent: Option<String>,
    /// Jobs already in the graph that must succeed first (a repeated one counts once).
    pub deps: Vec<JobId>,
}

impl JobSpec {
    /// A job of `kind` with no agent and no dependencies.
    pub fn new(id: JobId, kind: impl Into<String>) -> Self {
        Self { id, kind: kind.into(), agent: None, deps: Vec::new() }
    }

    /// The same job, for `agent`.
    #[must_use]
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The same job, depending on `dep` too.
    #[must_use]
    pub fn after(mut self, dep: JobId) -> Self {
        self.deps.push(dep);
        self
    }
}

/// Where a job is in its life. `succeeded`, `skipped`, `failed`, `blocked` and `cancelled` are
/// *settled*:
/// nothing happens to the job any more unless someone retries a failed job (which also wakes the
/// jobs it blocked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Some dependency has not succeeded yet.
    Waiting,
    /// Every dependency succeeded; waiting for a free slot (bounded concurrency).
    Ready,
    /// An attempt is in flight.
    Running,
    /// An attempt succeeded.
    Succeeded,
    /// Its work had nothing to do here (its system is not configured): as good as succeeded
    /// for the jobs waiting on it, but shown apart, so nobody believes the work was done.
    Skipped,
    /// Every allowed attempt failed; `retry` gives it a fresh set.
    Failed,
    /// An attempt failed; the next starts at `next_attempt_at`.
    Retrying,
    /// A dependency failed (or is blocked itself); it runs only after that one is retried and
    /// succeeds.
    Blocked,
    /// Cancelled, or a dependency was; final.
    Cancelled,
}

impl JobState {
    /// Every state, in the order of a job's life.
    pub const ALL: [Self; 9] = [
        Self::Waiting,
        Self::Ready,
        Self::Running,
        Self::Retrying,
        Self::Succeeded,
        Self::Skipped,
        Self::Failed,
        Self::Blocked,
        Self::Cancelled,
    ];

    /// Whether nothing happens to the job any more by itself.
    pub fn is_settled(self) -> bool {
        matches!(self, Self::Succeeded | Self::Skipped | Self::Failed | Self::Blocked | Self::Cancelled)
    }

    /// Whether the jobs waiting on it may run: it succeeded, or had nothing to do.
    pub fn lets_dependents_run(self) -> bool {
        matches!(self, Self::Succeeded | Self::Skipped)
    }

    /// The name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Ready => "ready",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
            Self::Retrying => "retrying",
            Self::Blocked => "blocked",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// The work was done.
    Succeeded,
    /// There was nothing to do here: the work's system is not configured. The reason (which
    /// setting would enable it) is shown with the job, so it must be fit to show.
    Skipped(String),
}

/// Work that returns `Ok(())` succeeded.
impl From<()> for Done {
    fn from((): ()) -> Self {
        Self::Succeeded
    }
}

/// One attempt of a job's work. The error says whether a retry can help and is shown as the
/// job's `last_error`, so it must already be fit to show: never a secret.
pub type Attempt = Pin<Box<dyn Future<Output = Result<Done, AttemptError>> + Send + 'static>>;

/// A job's work: called afresh for every attempt. It must be idempotent: an attempt may have
/// done its work and still be reported failed (a timeout, a lost answer), and a job whose
/// attempt is cut short by a shutdown runs again when the graph is rebuilt.
pub type Work = Arc<dyn Fn() -> Attempt + Send + Sync>;

/// `Work` from an async closure: `work(move || async move { ... Ok(()) })`, or ending with
/// `Ok(Done::Skipped(reason))` when there is nothing to do.
pub fn work<F, Fut, T>(f: F) -> Work
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, AttemptError>> + Send + 'static,
    T: Into<Done> + 'static,
{
    Arc::new(move || {
        let attempt = f();
        Box::pin(async move { attempt.await.map(Into::into) }) as Attempt
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_follow_the_rule() {
        for ok in ["a", "0", "alpha.forge-user", "a_b.c-d", &"a".repeat(128)] {
            assert_eq!(JobId::parse(ok).unwrap().as_str(), ok);
        }
        for (bad, reason) in [
            ("", "empty"),
            (".a", "start with"),
            ("-a", "start with"),
            ("A", "start with"),
            ("a b", "may only contain"),
            ("a/b", "may only contain"),
            ("aé", "may only contain"),
            ("a\n", "may only contain"),
            (&"a".repeat(129), "longer than 128"),
        ] {
            let err = JobId::parse(bad).unwrap_err().to_string();
            assert!(err.contains(reason) && err.contains("job id"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn ids_deserialize_only_when_valid() {
        let id: JobId = serde_json::from_str("\"a.sso\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"a.sso\"");
        let err = serde_json::from_str::<JobId>("\"A.sso\"").unwrap_err().to_string();
        assert!(err.contains("invalid job id"), "{err}");
    }

    #[test]
    fn labels_are_at_most_64_characters() {
        check_label("kind", &"k".repeat(64)).unwrap();
        let err = check_label("kind", &"k".repeat(65)).unwrap_err().to_string();
        assert!(err.contains("invalid kind") && err.contains("longer than 64"), "{err}");
    }

    #[test]
    fn states_serialize_lowercase_and_five_are_settled() {
        let names: Vec<String> = JobState::ALL.iter().map(|s| serde_json::to_string(s).unwrap()).collect();
        assert_eq!(
            names,
            [
                "\"waiting\"",
                "\"ready\"",
                "\"running\"",
                "\"retrying\"",
                "\"succeeded\"",
                "\"skipped\"",
                "\"failed\"",
                "\"blocked\"",
                "\"cancelled\""
            ]
        );
        let settled: Vec<JobState> = JobState::ALL.into_iter().filter(|s| s.is_settled()).collect();
        assert_eq!(
            settled,
            [JobState::Succeeded, JobState::Skipped, JobState::Failed, JobState::Blocked, JobState::Cancelled]
        );
        for s in JobState::ALL {
            assert_eq!(s.to_string(), s.as_str());
        }
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_text_never_panics_and_accepts_only_the_rule(s in "\\PC{0,140}") {
            let ok = JobId::parse(&s).is_ok();
            let rule = !s.is_empty()
                && s.len() <= 128
                && s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c));
            prop_assert_eq!(ok, rule);
        }
    }
}
