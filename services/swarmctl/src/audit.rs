//! `swarmctl audit`: who changed what, newest first.

use hyper::http::Method;
use hyperhive_swarm_api::audit::{AuditPage, Via};
use hyperhive_swarm_api::paths;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::client::{self, Api, CtlError};
use super::format::{grid, pretty_answer};

/// `--since`: a duration back from `now` (`1h`, `30m`, `2d`) or an RFC 3339 time.
///
/// # Errors
/// A usage error saying what to write.
pub fn parse_since(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, CtlError> {
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(at);
    }
    let back = humantime::parse_duration(text).map_err(|_| {
        CtlError::Usage(format!("--since {text:?} is neither a duration (1h, 30m, 2d) nor an RFC 3339 time"))
    })?;
    let back =
        time::Duration::try_from(back).map_err(|_| CtlError::Usage(format!("--since {text:?} is too long ago")))?;
    now.checked_sub(back).ok_or_else(|| CtlError::Usage(format!("--since {text:?} is too long ago")))
}

/// `swarmctl audit [--since WHEN] [--limit N] [--json]`.
pub async fn audit(api: &Api, since: Option<OffsetDateTime>, limit: usize, json: bool) -> Result<String, CtlError> {
    let mut path = format!("{}?limit={limit}", paths::AUDIT);
    if let Some(since) = since {
        let since = since.to_offset(time::UtcOffset::UTC).format(&Rfc3339).expect("a time formats");
        path.push_str(&format!("&since={}", since.replace(':', "%3A")));
    }
    let bytes = client::request(api, Method::GET, &path, None, None).await?;
    if json {
        return pretty_answer(&bytes);
    }
    let page: AuditPage = client::answer(&bytes)?;
    let rows = page.entries.iter().map(|v| {
        let e = &v.entry;
        let via = match e.via {
            Via::Socket => "socket",
            Via::ControlPlane => "control plane",
            Via::Gateway => "gateway",
        };
        let role = e.role.map_or_else(|| "none".to_owned(), |r| r.to_string());
        [e.at.clone(), e.who.clone(), via.to_owned(), role, e.method.clone(), e.path.clone(), e.status.to_string()]
    });
    Ok(grid(["AT", "WHO", "VIA", "ROLE", "METHOD", "PATH", "STATUS"], rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn since_is_a_duration_back_or_a_time() {
        let now = datetime!(2026-12-02 10:00:00 UTC);
        assert_eq!(parse_since("1h", now).unwrap(), datetime!(2026-12-02 09:00:00 UTC));
        assert_eq!(parse_since("2d", now).unwrap(), datetime!(2026-11-30 10:00:00 UTC));
        assert_eq!(parse_since("2026-12-01T08:00:00+01:00", now).unwrap(), datetime!(2026-12-01 07:00:00 UTC));
        for bad in ["yesterday", "", "-1h"] {
            assert!(parse_since(bad, now).unwrap_err().to_string().contains("neither a duration"), "{bad}");
        }
    }
}
