//! A webhook delivery: its headers (Forgejo's `X-Forgejo-*`, or Gitea's `X-Gitea-*`, which
//! Forgejo sends too) and the events the swarm reads from it.

use hyperhive_provision::forge::{Issue, PullRequest, payload};
use serde::Deserialize;
use serde_json::Value;
use warp::http::HeaderMap;

/// The largest delivery read: a payload carries the repository and users whole, a few KiB,
/// and a push lists at most `[webhook] PAYLOAD_COMMIT_LIMIT` commits.
pub const MAX_DELIVERY_BYTES: usize = 1024 * 1024;

/// The first of `X-Forgejo-<name>`, `X-Gitea-<name>` that is present.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    ["x-forgejo-", "x-gitea-"]
        .iter()
        .find_map(|prefix| headers.get(format!("{prefix}{name}")))
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty())
}

/// The signature (hex HMAC-SHA256 of the body).
pub fn signature(headers: &HeaderMap) -> Option<&str> {
    header(headers, "signature")
}

/// The delivery's uuid.
pub fn delivery_id(headers: &HeaderMap) -> Option<&str> {
    header(headers, "delivery")
}

/// The event name (`pull_request`, `issues`, `push`, ...).
pub fn event_name(headers: &HeaderMap) -> Option<&str> {
    header(headers, "event")
}

/// What a delivery says, of what the swarm reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A pull request changed in `owner/repo`.
    Pull { owner: String, repo: String, pull: PullRequest },
    /// An issue changed in `owner/repo`; `action` is the forge's (`opened`, `closed`, ...).
    Issue { owner: String, repo: String, action: String, issue: Issue },
    /// An event the swarm does not act on (a push, or one it does not know).
    Ignored(String),
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    action: String,
    repository: Option<RepositoryRef>,
    pull_request: Option<Value>,
    issue: Option<Value>,
}

#[derive(Deserialize)]
struct RepositoryRef {
    name: String,
    owner: OwnerRef,
}

#[derive(Deserialize)]
struct OwnerRef {
    login: String,
}

/// Reads the body of a delivery of `event`.
///
/// # Errors
/// The body is not the event's JSON payload; the message says what is missing.
pub fn parse(event: &str, body: &[u8]) -> Result<Event, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {}", e.classify_text()))?;
    if !matches!(event, "pull_request" | "issues") {
        return Ok(Event::Ignored(event.to_owned()));
    }
    let envelope: Envelope =
        serde_json::from_value(value).map_err(|_| format!("the {event} payload has a field of the wrong type"))?;
    let repository = envelope.repository.ok_or_else(|| format!("the {event} payload has no repository"))?;
    let (owner, repo) = (repository.owner.login, repository.name);
    match event {
        "pull_request" => {
            let pull = envelope.pull_request.ok_or("the pull_request payload has no pull_request")?;
            let pull = payload::pull_request(pull).map_err(|e| format!("pull_request: {e}"))?;
            Ok(Event::Pull { owner, repo, pull })
        }
        _ => {
            let issue = envelope.issue.ok_or("the issues payload has no issue")?;
            let issue = payload::issue(issue).map_err(|e| format!("issue: {e}"))?;
            Ok(Event::Issue { owner, repo, action: envelope.action, issue })
        }
    }
}

trait ClassifyText {
    fn classify_text(&self) -> &'static str;
}

impl ClassifyText for serde_json::Error {
    /// The parser's category, never its message (which may quote the body).
    fn classify_text(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Eof => "it ends early",
            serde_json::error::Category::Syntax | serde_json::error::Category::Io => "a syntax error",
            serde_json::error::Category::Data => "unexpected data",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::HeaderValue;

    #[test]
    fn forgejo_headers_come_first_then_gitea_ones() {
        let mut headers = HeaderMap::new();
        headers.insert("x-gitea-signature", HeaderValue::from_static("bb"));
        assert_eq!(signature(&headers), Some("bb"));
        headers.insert("x-forgejo-signature", HeaderValue::from_static("aa"));
        assert_eq!(signature(&headers), Some("aa"));
        headers.insert("x-forgejo-delivery", HeaderValue::from_static(" "));
        assert_eq!(delivery_id(&headers), None, "an empty header is none");
    }

    #[test]
    fn payloads_are_read_or_refused_with_a_reason() {
        let pull = serde_json::json!({
            "action": "opened",
            "repository": {"name": "a-config", "owner": {"login": "swarm"}},
            "pull_request": {"number": 2, "title": "t", "state": "open", "head": {"ref": "x", "sha": "abc"},
                             "updated_at": "2026-11-30T10:00:00Z", "mergeable": true},
        });
        let event = parse("pull_request", pull.to_string().as_bytes()).unwrap();
        let Event::Pull { owner, repo, pull } = event else { panic!("{event:?}") };
        assert_eq!(
            (owner.as_str(), repo.as_str(), pull.number, pull.head_sha.as_str()),
            ("swarm", "a-config", 2, "abc")
        );
        assert_eq!(parse("push", b"{}").unwrap(), Event::Ignored("push".into()));
        assert!(parse("push", b"{").unwrap_err().contains("not JSON"));
        assert!(parse("pull_request", b"{}").unwrap_err().contains("no repository"));
        let no_pull = r#"{"repository": {"name": "r", "owner": {"login": "o"}}}"#;
        assert!(parse("pull_request", no_pull.as_bytes()).unwrap_err().contains("no pull_request"));
        let bad = r#"{"repository": {"name": "r", "owner": {"login": "o"}}, "issue": {"title": "x"}}"#;
        assert!(parse("issues", bad.as_bytes()).unwrap_err().contains("missing field `number`"));
    }
}
