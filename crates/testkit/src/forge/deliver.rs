//! Webhook deliveries, as the forge's `services/webhook/deliver.go` sends them: a `POST` of the
//! event's JSON payload (`api.PullRequestPayload`, `api.IssuePayload`, `api.PushPayload` of
//! `modules/structs/hook.go`) to each active organisation webhook of the repository's owner
//! whose events include the event, with the headers `X-Forgejo-Delivery`/`X-Gitea-Delivery` (a
//! uuid), `X-Forgejo-Event`/`X-Gitea-Event`, `X-Forgejo-Event-Type`/`X-Gitea-Event-Type`,
//! `X-Forgejo-Signature`/`X-Gitea-Signature` (hex HMAC-SHA256 of the body under the hook's
//! secret; empty without a secret) and `Content-Type: application/json`.
//!
//! The forge queues deliveries and sends them from a worker; the stand-in sends them before
//! the test's change returns, so a test knows when they arrived and what the receiver said.

use std::time::Duration;

use ring::hmac;
use serde_json::{Value, json};

use super::state::State;
use super::swarm_state::Delivery;

/// How long a receiver may take to answer one delivery (the forge's `[webhook] DELIVER_TIMEOUT`
/// is 5 s).
const DELIVER_TIMEOUT: Duration = Duration::from_secs(5);

/// Hex HMAC-SHA256 of `body` under `secret`, as the forge signs; empty for an empty secret.
pub fn signature(secret: &str, body: &[u8]) -> String {
    if secret.is_empty() {
        return String::new();
    }
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    hmac::sign(&key, body).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The deliveries of one event in `repo` (lower-case `owner/name`): one per active webhook of
/// the owner whose events take it.
pub(super) fn prepare(state: &State, repo: &str, event: &str, payload: &Value) -> Vec<Delivery> {
    let owner = repo.split_once('/').map_or(repo, |(o, _)| o);
    let body = serde_json::to_vec(payload).unwrap_or_default();
    state
        .swarm
        .hooks
        .iter()
        .filter(|h| h.active && h.org == owner && h.events.iter().any(|e| e == event))
        .map(|hook| {
            let id = uuid();
            let signature = signature(&hook.secret, &body);
            let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
            for forge in ["Forgejo", "Gitea"] {
                headers.push((format!("X-{forge}-Delivery"), id.clone()));
                headers.push((format!("X-{forge}-Event"), event.to_owned()));
                headers.push((format!("X-{forge}-Event-Type"), event.to_owned()));
                headers.push((format!("X-{forge}-Signature"), signature.clone()));
            }
            Delivery {
                id,
                hook_id: hook.id,
                url: hook.url.clone(),
                event: event.to_owned(),
                headers,
                body: body.clone(),
                status: None,
            }
        })
        .collect()
}

/// Sends one delivery and records the receiver's status in it.
pub(super) async fn send(mut delivery: Delivery) -> Delivery {
    let client = reqwest::Client::builder().timeout(DELIVER_TIMEOUT).build().unwrap_or_default();
    let mut request = client.post(&delivery.url).body(delivery.body.clone());
    for (name, value) in &delivery.headers {
        request = request.header(name, value);
    }
    delivery.status = request.send().await.ok().map(|r| r.status().as_u16());
    delivery
}

/// `api.PullRequestPayload`.
pub(super) fn pull_payload(state: &State, repo: &str, number: i64, action: &str, sender: &str) -> Value {
    let pull = state.swarm.pulls.iter().find(|p| p.repo == repo && p.number == number);
    json!({
        "action": action,
        "number": number,
        "pull_request": pull.map(|p| state.pull_json(p)),
        "requested_reviewer": null,
        "repository": repository(state, repo),
        "sender": sender_json(state, sender),
        "commit_id": "",
        "review": null,
    })
}

/// `api.IssuePayload`.
pub(super) fn issue_payload(state: &State, repo: &str, number: i64, action: &str, sender: &str) -> Value {
    let issue = state.swarm.issues.iter().find(|i| i.repo == repo && i.number == number);
    json!({
        "action": action,
        "number": number,
        "changes": null,
        "issue": issue.map(|i| state.issue_json(i)),
        "repository": repository(state, repo),
        "sender": sender_json(state, sender),
        "commit_id": "",
    })
}

/// `api.PushPayload` of a push of `after` to `reference`, with no commit listed.
pub(super) fn push_payload(state: &State, repo: &str, reference: &str, after: &str, sender: &str) -> Value {
    let repository = repository(state, repo);
    json!({
        "ref": reference,
        "before": "0".repeat(40),
        "after": after,
        "compare_url": format!("{}/compare/{}", repository["html_url"].as_str().unwrap_or(""), after),
        "commits": [],
        "total_commits": 0,
        "head_commit": null,
        "repository": repository,
        "pusher": sender_json(state, sender),
        "sender": sender_json(state, sender),
    })
}

fn repository(state: &State, repo: &str) -> Value {
    let (owner, name) = repo.split_once('/').unwrap_or((repo, ""));
    state.repo(owner, name).map_or(Value::Null, |r| state.repo_json(r, None))
}

fn sender_json(state: &State, login: &str) -> Value {
    state.user(login).map_or(Value::Null, |u| state.user_json(u, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hex_hmac_sha256() {
        // RFC 4231, test case 2.
        let body = b"what do ya want for nothing?";
        assert_eq!(signature("Jefe", body), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert_eq!(signature("", body), "");
        let id = uuid();
        assert_eq!((id.len(), &id[14..15]), (36, "4"));
    }
}
