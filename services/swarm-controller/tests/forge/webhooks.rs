//! Deliveries the stand-in sends to the controller through Caddy: taken only when signed with
//! the webhook secret, once per signed body (across restarts), and never older over newer.

use hyperhive_testkit::forge::{PullChange, signature};

use crate::harness::{ForgeSwarm, ORG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_from_the_forge_updates_the_agents_config_pr() {
    let (swarm, _) = ForgeSwarm::with_alpha("1h").await;

    let (number, deliveries) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "raise the budget", "budget").await;
    assert_eq!(deliveries.len(), 1, "one hook, one delivery");
    assert_eq!(deliveries[0].status, Some(200), "taken");
    let stored = swarm.stored_pr("alpha").await.expect("written by the delivery, not a listing (1h)");
    let pull = swarm.forge.pull(ORG, "alpha-config", number).unwrap();
    assert_eq!(stored["number"], number);
    assert_eq!(stored["title"], "raise the budget");
    assert_eq!(stored["state"], "open");
    assert_eq!(stored["head"], pull.head_sha);
    assert_eq!(stored["head_ref"], "budget");
    assert_eq!(stored["mergeable"], true);
    assert_eq!(stored["repo"], "swarm/alpha-config");
    let (status, served) = swarm.get("/api/agents/alpha/config-pr").await;
    assert_eq!((status, &served), (200, &stored));

    swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Merge).await;
    let stored = swarm.stored_pr("alpha").await.unwrap();
    assert_eq!((stored["state"].as_str(), stored["mergeable"].as_bool()), (Some("merged"), Some(false)));

    // A pull request in a repository that is no agent's config repository changes nothing.
    swarm.forge.add_repo(ORG, "tools", false, true);
    let before = swarm.config_prs_sequence().await;
    let (_, deliveries) = swarm.forge.open_pull(ORG, "tools", "alpha", "unrelated", "x").await;
    assert_eq!(deliveries[0].status, Some(200));
    assert_eq!(swarm.config_prs_sequence().await, before);
    let (status, all) = swarm.get("/api/config-prs").await;
    assert_eq!((status, all.as_array().map(Vec::len)), (200, Some(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_wrongly_signed_truncated_or_oversized_deliveries_are_refused_and_change_nothing() {
    let (swarm, hook) = ForgeSwarm::with_alpha("1h").await;
    let (number, _) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "first", "b").await;
    let stored = swarm.wait_pr("alpha", "the first state", |pr| pr["title"] == "first").await;
    let before = swarm.config_prs_sequence().await;

    // The forge signs with a secret someone typed in its web UI: refused.
    swarm.forge.change_hook_by_hand(hook.id, Some("not-the-swarms-secret"), None);
    let sent = swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Title("second".into())).await;
    assert_eq!(sent[0].status, Some(401));
    let genuine = sent[0].clone();

    let secret = swarm.secret_hex();
    let without = |names: &[&str]| -> Vec<(String, String)> {
        genuine.headers.iter().filter(|(n, _)| !names.iter().any(|x| n.ends_with(x))).cloned().collect()
    };
    let signed_with = |body: &[u8]| -> Vec<(String, String)> {
        let mut headers = without(&["Signature"]);
        headers.push(("X-Gitea-Signature".into(), signature(&secret, body)));
        headers
    };
    // The genuine body, now correctly signed, would be taken: so each refusal below is the
    // check's doing.
    let truncated = genuine.body[..genuine.body.len() - 1].to_vec();
    let oversized = {
        let mut value: serde_json::Value = serde_json::from_slice(&genuine.body).unwrap();
        value["padding"] = serde_json::Value::String("x".repeat(1024 * 1024));
        serde_json::to_vec(&value).unwrap()
    };
    // (what, headers, body, status, what the error says)
    type Case<'a> = (&'a str, Vec<(String, String)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        ("no signature header", without(&["Signature"]), genuine.body.clone(), 401, "X-Forgejo-Signature"),
        ("signed with another secret", genuine.headers.clone(), genuine.body.clone(), 401, "does not match"),
        ("the body truncated after signing", signed_with(&genuine.body), truncated, 401, "does not match"),
        (
            "a signature that is not hex",
            {
                let mut h = without(&["Signature"]);
                h.push(("X-Forgejo-Signature".into(), "zz".repeat(32)));
                h
            },
            genuine.body.clone(),
            401,
            "does not match",
        ),
        ("over 1 MiB, correctly signed", signed_with(&oversized), oversized.clone(), 413, "larger than"),
    ];
    for (what, headers, body, status, says) in cases {
        let (got, answer) = swarm.post_webhook(&headers, body).await;
        assert_eq!(got, status, "{what}: {answer}");
        assert!(answer["error"].as_str().unwrap_or("").contains(says), "{what}: {answer}");
    }
    assert_eq!(swarm.config_prs_sequence().await, before, "nothing written");
    assert_eq!(swarm.stored_pr("alpha").await.unwrap(), stored);

    // The same body signed with the swarm's secret is taken, proving the cases above differed
    // only in what they got wrong.
    let (status, answer) = swarm.post_webhook(&signed_with(&genuine.body), genuine.body.clone()).await;
    assert_eq!((status, answer["outcome"].as_str()), (200, Some("applied")), "{answer}");
    assert_eq!(swarm.stored_pr("alpha").await.unwrap()["title"], "second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_delivery_changes_nothing_and_reversed_deliveries_end_in_the_newest_state() {
    let (swarm, _) = ForgeSwarm::with_alpha("1h").await;
    let (number, opened) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "one", "b").await;
    let before = swarm.config_prs_sequence().await;
    let again = swarm.forge.send(&opened[0]).await;
    assert_eq!(again.status, Some(200));
    assert_eq!(swarm.config_prs_sequence().await, before, "the same delivery id: nothing written");

    // The same payload under a new delivery id (a forge's "redeliver", or a captured delivery
    // replayed: the signature covers the body only): taken already, so not applied again.
    let mut fresh = opened[0].clone();
    for (name, value) in &mut fresh.headers {
        if name.ends_with("-Delivery") {
            *value = "00000000-0000-4000-8000-000000000001".into();
        }
    }
    let (status, answer) = swarm.post_webhook(&fresh.headers, fresh.body.clone()).await;
    assert_eq!((status, answer["outcome"].as_str()), (200, Some("duplicate")), "{answer}");
    assert_eq!(swarm.config_prs_sequence().await, before);

    // Three changes whose deliveries arrive newest first.
    swarm.forge.hold_deliveries(true);
    for title in ["two", "three", "four"] {
        swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Title(title.into())).await;
    }
    swarm.forge.hold_deliveries(false);
    let held = swarm.forge.take_held();
    assert_eq!(held.len(), 3);
    let statuses: Vec<_> = send_all(&swarm, held.iter().rev()).await;
    assert_eq!(statuses, [Some(200), Some(200), Some(200)]);
    let stored = swarm.stored_pr("alpha").await.unwrap();
    assert_eq!(stored["title"], "four", "the newest state stays");
    assert_eq!(stored["updated"], rfc3339(swarm.forge.pull(ORG, "alpha-config", number).unwrap().updated));
}

async fn send_all<'a>(
    swarm: &ForgeSwarm,
    deliveries: impl Iterator<Item = &'a hyperhive_testkit::forge::Delivery>,
) -> Vec<Option<u16>> {
    let mut statuses = Vec::new();
    for delivery in deliveries {
        statuses.push(swarm.forge.send(delivery).await.status);
    }
    statuses
}

fn rfc3339(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_keeps_its_secret_and_config_prs() {
    let (mut swarm, _) = ForgeSwarm::with_alpha("1h").await;
    let file = swarm.state_dir.join("webhook-secret");
    let bytes = std::fs::read(&file).unwrap();
    let (number, opened) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "kept", "b").await;
    let stored = swarm.wait_pr("alpha", "the state", |pr| pr["title"] == "kept").await;

    let taken = opened[0].clone();

    swarm.controller.kill();
    swarm.start_controller().await;
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "the same secret");
    assert_eq!(swarm.get("/api/agents/alpha/config-pr").await, (200, stored));
    // A delivery taken before the restart, replayed after it, is still taken.
    let (status, answer) = swarm.post_webhook(&taken.headers, taken.body.clone()).await;
    assert_eq!((status, answer["outcome"].as_str()), (200, Some("duplicate")), "{answer}");
    // The hook's secret is still the one the controller verifies with.
    let sent = swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Close).await;
    assert_eq!(sent[0].status, Some(200));
    assert_eq!(swarm.stored_pr("alpha").await.unwrap()["state"], "closed");
}
