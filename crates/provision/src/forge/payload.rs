//! The objects inside webhook payloads (`api.PullRequestPayload.pull_request`,
//! `api.IssuePayload.issue`), read with the same definitions as the API's answers, so that a
//! delivery and a listing give the same [`PullRequest`] or [`Issue`].

use serde_json::Value;

use super::types::{Issue, PullRequest};
use super::wire;

/// A `PullRequest` object.
///
/// # Errors
/// When `value` is not one (a missing `number`, a field of the wrong type); the message names
/// no value.
pub fn pull_request(value: Value) -> Result<PullRequest, String> {
    serde_json::from_value::<wire::WirePull>(value).map(PullRequest::from).map_err(describe)
}

/// An `Issue` object.
///
/// # Errors
/// As [`pull_request`].
pub fn issue(value: Value) -> Result<Issue, String> {
    serde_json::from_value::<wire::WireIssue>(value).map(Issue::from).map_err(describe)
}

fn describe(e: serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("missing field") { text } else { "a field has the wrong type".to_owned() }
}
