//! The query of a paged route: a history's `?limit=N&before=SEQ` with what the route adds
//! (`&failed=true` for turns, `&since=RFC3339` for the audit log), and the agent lists'
//! `?limit=N&after=NAME&hive=HIVE`.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use std::collections::BTreeMap;
use std::ops::Bound;

use hyperhive_hive_proto::{AgentName, HiveName};

use super::ApiError;

/// Entries per page when `?limit` is not given.
const DEFAULT_LIMIT: usize = 20;
/// The most entries one page holds.
const MAX_LIMIT: usize = 500;

/// Which of the optional parameters a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// `failed=true|false`: only what did not succeed.
    Failed,
    /// `since=RFC3339`: nothing older.
    Since,
}

/// A parsed page query.
#[derive(Debug, PartialEq, Eq)]
pub struct PageQuery {
    pub limit: usize,
    pub before: Option<u64>,
    pub failed: bool,
    pub since: Option<OffsetDateTime>,
}

impl PageQuery {
    /// `query` with `limit`, `before` and the `filter` the route takes.
    pub fn parse(query: &str, filter: Filter) -> Result<Self, ApiError> {
        let mut parsed = PageQuery { limit: DEFAULT_LIMIT, before: None, failed: false, since: None };
        let usage = match filter {
            Filter::Failed => "failed=true",
            Filter::Since => "since=2026-12-01T00:00:00Z",
        };
        let bad = |what: String| ApiError::BadRequest(format!("{what}; use ?limit=1..{MAX_LIMIT}&before=SEQ&{usage}"));
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match (key, filter) {
                ("limit", _) => parsed.limit = parse_limit(value, MAX_LIMIT).map_err(bad)?,
                ("before", _) => {
                    parsed.before =
                        Some(value.parse().map_err(|_| bad(format!("before {value:?} is not an entry's seq")))?);
                }
                ("failed", Filter::Failed) => {
                    parsed.failed = match value {
                        "true" | "" => true,
                        "false" => false,
                        _ => return Err(bad(format!("failed {value:?} is not true or false"))),
                    };
                }
                ("since", Filter::Since) => {
                    let text = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
                    let since = OffsetDateTime::parse(&text, &Rfc3339)
                        .map_err(|_| bad(format!("since {text:?} is not an RFC 3339 time")))?;
                    parsed.since = Some(since);
                }
                _ => return Err(bad(format!("unknown query parameter {key:?}"))),
            }
        }
        Ok(parsed)
    }
}

/// The most agents one page of an agent list holds.
const MAX_AGENTS: usize = 1000;

/// A parsed agent list query: agents in name order, those after `after` (exclusive), at most
/// `limit` of them (every one when no limit is given), only `hive`'s when one is named. The
/// next page is asked with `after` set to the last name of this one; a page shorter than its
/// limit is the last.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AgentsQuery {
    pub limit: Option<usize>,
    pub after: Option<AgentName>,
    pub hive: Option<HiveName>,
}

impl AgentsQuery {
    /// `query` with `limit`, `after` and `hive`.
    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let bad = |what: String| {
            ApiError::BadRequest(format!("{what}; use ?limit=1..{MAX_AGENTS}&after=AGENT&hive=HIVE (each optional)"))
        };
        let mut parsed = AgentsQuery::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "limit" => parsed.limit = Some(parse_limit(value, MAX_AGENTS).map_err(bad)?),
                "after" => {
                    parsed.after = Some(
                        AgentName::parse(value)
                            .map_err(|e| bad(format!("after {value:?} is not an agent name: {e}")))?,
                    );
                }
                "hive" => {
                    parsed.hive = Some(
                        HiveName::parse(value).map_err(|e| bad(format!("hive {value:?} is not a hive name: {e}")))?,
                    );
                }
                _ => return Err(bad(format!("unknown query parameter {key:?}"))),
            }
        }
        Ok(parsed)
    }

    /// The page of `all` (in name order) this query asks for: from the cursor on, without
    /// going through the names before it.
    pub fn page<V: Clone>(
        &self,
        all: &BTreeMap<AgentName, V>,
        hive_of: impl Fn(&V) -> &HiveName,
    ) -> Vec<(AgentName, V)> {
        let from = self.after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
        all.range((from, Bound::Unbounded))
            .filter(|(_, v)| self.hive.as_ref().is_none_or(|h| hive_of(v) == h))
            .take(self.limit.unwrap_or(usize::MAX))
            .map(|(name, v)| (name.clone(), v.clone()))
            .collect()
    }
}

/// `value` as a page size from 1 to `max`, else what is wrong with it.
fn parse_limit(value: &str, max: usize) -> Result<usize, String> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("limit {value:?} is not a number from 1 to {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_query_is_checked() {
        let none = PageQuery { limit: 20, before: None, failed: false, since: None };
        assert_eq!(PageQuery::parse("", Filter::Failed).unwrap(), none);
        assert_eq!(
            PageQuery::parse("limit=5&before=9&failed=true", Filter::Failed).unwrap(),
            PageQuery { limit: 5, before: Some(9), failed: true, since: None }
        );
        let since = PageQuery::parse("since=2026-12-01T10%3A00%3A00Z", Filter::Since).unwrap().since;
        assert_eq!(since, Some(time::macros::datetime!(2026-12-01 10:00:00 UTC)));
        for bad in
            ["limit=0", "limit=501", "limit=x", "before=-1", "failed=maybe", "page=2", "since=2026-12-01T10:00:00Z"]
        {
            assert!(PageQuery::parse(bad, Filter::Failed).is_err(), "{bad}");
        }
        for bad in ["failed=true", "since=yesterday"] {
            assert!(PageQuery::parse(bad, Filter::Since).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_agents_query_is_checked() {
        assert_eq!(AgentsQuery::parse("").unwrap(), AgentsQuery::default());
        let q = AgentsQuery::parse("limit=2&after=bee&hive=h1").unwrap();
        assert_eq!(q.limit, Some(2));
        assert_eq!(q.after.as_ref().map(AgentName::as_str), Some("bee"));
        assert_eq!(q.hive.as_ref().map(HiveName::as_str), Some("h1"));
        for bad in
            ["limit=0", "limit=1001", "limit=", "after=Not%20A%20Name", "after=", "hive=../x", "before=3", "page=2"]
        {
            match AgentsQuery::parse(bad) {
                Err(ApiError::BadRequest(err)) => {
                    assert!(err.contains("?limit=1..1000&after=AGENT&hive=HIVE"), "{bad}: {err}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_agents_page_starts_after_its_cursor_and_keeps_to_its_hive_and_limit() {
        let name = |n: &str| AgentName::parse(n).unwrap();
        let hive = |n: &str| HiveName::parse(n).unwrap();
        let all: BTreeMap<AgentName, HiveName> =
            [("a", "h1"), ("b", "h2"), ("c", "h1"), ("d", "h1"), ("e", "h2")].map(|(a, h)| (name(a), hive(h))).into();
        let names = |q: &str| {
            AgentsQuery::parse(q).unwrap().page(&all, |h| h).into_iter().map(|(a, _)| a.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(""), ["a", "b", "c", "d", "e"]);
        assert_eq!(names("limit=2"), ["a", "b"]);
        assert_eq!(names("limit=2&after=b"), ["c", "d"]);
        assert_eq!(names("limit=2&after=d"), ["e"]);
        assert_eq!(names("after=e"), Vec::<String>::new());
        // A cursor no longer listed (the agent was removed) still starts the page after it.
        assert_eq!(names("after=bb&limit=1"), ["c"]);
        assert_eq!(names("hive=h1&after=a&limit=5"), ["c", "d"]);
        assert_eq!(names("hive=h3"), Vec::<String>::new());
    }
}
