//! The query of a paged history route: `?limit=N&before=SEQ`, and what the route adds
//! (`&failed=true` for turns, `&since=RFC3339` for the audit log).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

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
                ("limit", _) => {
                    parsed.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| bad(format!("limit {value:?} is not a number from 1 to {MAX_LIMIT}")))?;
                }
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
}
