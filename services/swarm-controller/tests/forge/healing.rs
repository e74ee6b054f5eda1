//! The periodic listing: what a lost delivery left out is healed, an older listing never
//! overwrites a newer state, and the issue report follows deliveries and listings.

use hyperhive_hive_proto::AgentName;
use hyperhive_provision::forge::PullRequest;
use hyperhive_testkit::forge::PullChange;
use hyperhive_testkit::wait_until;
use serde_json::Value;
use swarm_controller::forge::config_prs::{Applied, ConfigPr, ConfigPrs, Source, from_pull};

use crate::harness::{ForgeSwarm, ORG, PATIENCE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_delivery_is_healed_by_the_listing() {
    let (swarm, _) = ForgeSwarm::with_alpha("1s").await;
    swarm.forge.hold_deliveries(true);
    let (number, _) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "lost on the way", "b").await;
    swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Mergeable(false)).await;
    assert_eq!(swarm.forge.take_held().len(), 2, "both deliveries lost");
    swarm.forge.hold_deliveries(false);
    let stored = swarm
        .wait_pr("alpha", "the listing's state", |pr| pr["title"] == "lost on the way" && pr["mergeable"] == false)
        .await;
    assert_eq!(stored["number"], number);
}

/// The stored form of a pull request of alpha's repository changed at `updated`.
fn pr(updated: &str, title: &str) -> ConfigPr {
    let pull = PullRequest {
        number: 1,
        title: title.into(),
        html_url: String::new(),
        state: "open".into(),
        merged: false,
        mergeable: Some(true),
        head_sha: String::new(),
        head_ref: String::new(),
        updated_at: updated.into(),
    };
    from_pull(&AgentName::parse("alpha").unwrap(), "swarm/alpha-config", &pull)
}

/// A listing read before a delivery was applied, but applied after it (two writers racing on
/// the real bucket): the newer state stays, and equal seconds go to the listing only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_listing_never_overwrites_a_newer_delivery() {
    let swarm = ForgeSwarm::start(ORG, "1h").await;
    let store = ConfigPrs::new(swarm.js.get_key_value("config-prs").await.unwrap());
    let agent = AgentName::parse("alpha").unwrap();
    let newer = pr("2026-11-30T10:00:05Z", "from the delivery");
    assert_eq!(store.apply(&agent, &newer, Source::Webhook).await.unwrap(), Applied::Written);
    let sequence = swarm.config_prs_sequence().await;
    let older = pr("2026-11-30T10:00:04Z", "from an older listing");
    assert_eq!(store.apply(&agent, &older, Source::Listing).await.unwrap(), Applied::Kept);
    let same_second = pr("2026-11-30T10:00:05Z", "another delivery of that second");
    assert_eq!(store.apply(&agent, &same_second, Source::Webhook).await.unwrap(), Applied::Kept);
    assert_eq!(swarm.config_prs_sequence().await, sequence, "nothing written");
    assert_eq!(store.get(&agent).await.unwrap(), Some(newer));
    let listed = pr("2026-11-30T10:00:05Z", "what the forge says now");
    assert_eq!(store.apply(&agent, &listed, Source::Listing).await.unwrap(), Applied::Written);
    assert_eq!(store.get(&agent).await.unwrap(), Some(listed));
}

fn report_titles(report: &Value, repo: &str, label: &str) -> Vec<String> {
    let repos = report["repos"].as_array().cloned().unwrap_or_default();
    let Some(found) = repos.iter().find(|r| r["repo"] == repo) else { return Vec::new() };
    found["labels"][label]
        .as_array()
        .map(|issues| issues.iter().map(|i| i["title"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issue_report_groups_open_issues_by_repository_and_label() {
    let (swarm, _) = ForgeSwarm::with_alpha("2s").await;
    swarm.forge.add_repo(ORG, "tools", false, true);
    let (_, sent) = swarm.forge.open_issue(ORG, "tools", "flaky build", &["blocked"]).await;
    assert_eq!(sent[0].status, Some(200));
    let (closing, _) =
        swarm.forge.open_issue(ORG, "alpha-config", "more memory", &["agent-request", "needs-review"]).await;
    swarm.forge.open_issue(ORG, "alpha-config", "typo", &[]).await;
    let (_, report) = swarm.get("/api/issues").await;
    assert_eq!(report_titles(&report, "swarm/tools", "blocked"), ["flaky build"]);
    assert_eq!(report_titles(&report, "swarm/alpha-config", "needs-review"), ["more memory"]);
    assert_eq!(report_titles(&report, "swarm/alpha-config", "agent-request"), ["more memory"]);
    assert_eq!(report_titles(&report, "swarm/alpha-config", "(no label)"), ["typo"]);
    assert_eq!(report["total"], 3);

    swarm.forge.close_issue(ORG, "alpha-config", closing).await;
    let (_, report) = swarm.get("/api/issues").await;
    assert_eq!(report["total"], 2);
    assert!(report_titles(&report, "swarm/alpha-config", "needs-review").is_empty());

    // An issue whose delivery is lost appears with the next listing.
    swarm.forge.hold_deliveries(true);
    swarm.forge.open_issue(ORG, "tools", "lost delivery", &["blocked"]).await;
    swarm.forge.take_held();
    let report = wait_until("the listing brings the issue", PATIENCE, || async {
        let (_, report) = swarm.get("/api/issues").await;
        (report["total"] == 3).then_some(report)
    })
    .await
    .unwrap();
    assert_eq!(report_titles(&report, "swarm/tools", "blocked"), ["lost delivery", "flaky build"]);
    assert!(report["listed_at"].is_string());
}
