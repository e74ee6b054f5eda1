//! Bad requests on every forge route: each a clear JSON 4xx (or 503 saying what to set), never
//! a change.

use hyper::http::{Method, StatusCode};
use hyperhive_testkit::forge::signature;

use crate::common::Controller;
use crate::harness::{ForgeSwarm, ORG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_bad_names_and_unknown_agents_are_clear_errors() {
    let controller = Controller::start(60).await;
    let cases: &[(Method, &str, StatusCode, &str)] = &[
        (Method::GET, "/api/forge/webhook", StatusCode::METHOD_NOT_ALLOWED, "use POST"),
        (Method::PUT, "/api/forge/webhook", StatusCode::METHOD_NOT_ALLOWED, "use POST"),
        (Method::POST, "/api/config-prs", StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::DELETE, "/api/agents/alpha/config-pr", StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::POST, "/api/issues", StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        (Method::GET, "/api/agents/alpha/config-pr", StatusCode::NOT_FOUND, "no config pull request"),
        (Method::GET, "/api/agents/Not_An_Agent/config-pr", StatusCode::BAD_REQUEST, "agent name"),
        (Method::GET, "/api/agents/a..b/config-pr", StatusCode::BAD_REQUEST, "agent name"),
        (Method::GET, "/api/forge/hooks", StatusCode::NOT_FOUND, "/api/forge/webhook"),
    ];
    for (method, path, status, says) in cases {
        let (got, body) = controller.call(method.clone(), path, &[], "").await.unwrap();
        assert_eq!(got, *status, "{method} {path}: {body}");
        assert!(body["error"].as_str().unwrap_or("").contains(says), "{method} {path}: {body}");
    }
    let (status, body) = controller.call(Method::GET, "/api/config-prs", &[], "").await.unwrap();
    assert_eq!((status, body), (StatusCode::OK, serde_json::json!([])));
    let (status, body) = controller.call(Method::GET, "/api/issues", &[], "").await.unwrap();
    assert_eq!((status, body["total"].as_u64()), (StatusCode::OK, Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_state_directory_deliveries_are_503_naming_the_variable() {
    let controller = Controller::start(60).await;
    let headers = [("content-type", "application/json"), ("x-gitea-signature", "00"), ("x-gitea-event", "push")];
    let (status, body) = controller.call(Method::POST, "/api/forge/webhook", &headers, "{}").await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body["error"].as_str().unwrap().contains("SWARM_STATE_DIR"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_but_malformed_deliveries_are_400_unknown_events_are_taken_and_ignored() {
    let swarm = ForgeSwarm::start(ORG, "1h").await;
    swarm.add_agent("alpha").await;
    let secret = swarm.secret_hex();
    let signed = |event: Option<&str>, body: &[u8], content_type: &str| {
        let mut headers = vec![
            ("Content-Type".to_owned(), content_type.to_owned()),
            ("X-Forgejo-Signature".to_owned(), signature(&secret, body)),
            ("X-Forgejo-Delivery".to_owned(), format!("{:x}-{}", body_hash(body), event.unwrap_or(""))),
        ];
        if let Some(event) = event {
            headers.push(("X-Forgejo-Event".to_owned(), event.to_owned()));
        }
        headers
    };
    let before = swarm.config_prs_sequence().await;
    // (event, body, content type, status, what the error says)
    type Case<'a> = (Option<&'a str>, &'a [u8], &'a str, u16, &'a str);
    let cases: Vec<Case> = vec![
        (Some("pull_request"), b"{\"action\": ", "application/json", 400, "not JSON"),
        (Some("pull_request"), b"[]", "application/json", 400, "wrong type"),
        (Some("pull_request"), b"{\"action\": \"opened\"}", "application/json", 400, "no repository"),
        (
            Some("issues"),
            br#"{"action": "opened", "repository": {"name": "r", "owner": {"login": "swarm"}}, "issue": {}}"#,
            "application/json",
            400,
            "missing field `number`",
        ),
        (None, b"{}", "application/json", 400, "X-Forgejo-Event"),
        (Some("pull_request"), b"{}", "text/plain", 415, "Content-Type: application/json"),
    ];
    for (event, body, content_type, status, says) in cases {
        let (got, answer) = swarm.post_webhook(&signed(event, body, content_type), body.to_vec()).await;
        assert_eq!(got, status, "{event:?} {}: {answer}", String::from_utf8_lossy(body));
        assert!(answer["error"].as_str().unwrap_or("").contains(says), "{answer}");
    }
    for event in ["release", "push", "repository"] {
        // A body of its own each: a signed body is taken once, whatever the unsigned event header says.
        let body = format!(r#"{{"ref": "refs/heads/{event}"}}"#);
        let body = body.as_bytes();
        let (got, answer) = swarm.post_webhook(&signed(Some(event), body, "application/json"), body.to_vec()).await;
        assert_eq!((got, answer["outcome"].as_str()), (200, Some("ignored")), "{event}: {answer}");
    }
    assert_eq!(swarm.config_prs_sequence().await, before, "nothing written");
    // Through the proxy, nothing of the API but the webhook is reachable.
    let other = reqwest::get(swarm.webhook_url.replace("/api/forge/webhook", "/api/config-prs")).await.unwrap();
    assert_eq!(other.status().as_u16(), 404);
}

/// FNV-1a of `body`: with the event, a delivery id distinct for each case.
fn body_hash(body: &[u8]) -> u64 {
    body.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}
