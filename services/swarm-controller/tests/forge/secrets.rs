//! The webhook secret never appears in a log, an API answer or a KV value.

use hyperhive_testkit::forge::PullChange;
use swarm_controller::nats::scan_bucket;

use crate::common::assert_absent;
use crate::harness::{ForgeSwarm, ORG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_secret_appears_in_no_log_answer_or_kv_value() {
    let (mut swarm, hook) = ForgeSwarm::with_alpha("1s").await;
    let (number, _) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "t", "b").await;
    swarm.forge.open_issue(ORG, "alpha-config", "an issue", &["blocked"]).await;
    // A repair, a refused delivery and a restart, so their log lines are scanned too.
    swarm.forge.change_hook_by_hand(hook.id, Some("wrong"), None);
    let refused = swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Close).await;
    assert_eq!(refused[0].status, Some(401));
    swarm.wait_objects(ORG).await;
    swarm.controller.kill();
    swarm.start_controller().await;
    swarm.wait_pr("alpha", "the listing's state", |pr| pr["state"] == "closed").await;

    let secrets = vec![swarm.secret_hex()];
    for path in ["/api/config-prs", "/api/agents/alpha/config-pr", "/api/issues", "/api/agents", "/metrics"] {
        let (_, body) = swarm.get(path).await;
        assert_absent(&secrets, path, &body.to_string());
    }
    let (_, answer) = swarm.post_webhook(&refused[0].headers, refused[0].body.clone()).await;
    assert_absent(&secrets, "a refused delivery's answer", &answer.to_string());
    for log in swarm.controller.past_logs.iter().chain([&swarm.controller.log()]) {
        assert_absent(&secrets, "the controller's log", log);
    }
    for bucket in ["agents", "config-prs", "swarm-secrets", "hive-status", "agent-wanted"] {
        for kv in scan_bucket(&swarm.js, bucket).await.unwrap() {
            assert_absent(&secrets, bucket, &String::from_utf8_lossy(&kv.value));
        }
    }
}

/// `config-prs` is the controller's alone: no agent or hive credential reads it, even while a
/// delivery writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tenant_credential_reaches_config_prs() {
    let (swarm, _) = ForgeSwarm::with_alpha("1h").await;
    let (number, _) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "t", "b").await;
    let titles = std::sync::atomic::AtomicUsize::new(0);
    crate::common::assert_no_tenant_reaches(&swarm.nats, "config-prs", "alpha", || async {
        let title = format!("title {}", titles.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        let sent = swarm.forge.change_pull(ORG, "alpha-config", number, PullChange::Title(title.clone())).await;
        assert_eq!(sent[0].status, Some(200));
        assert_eq!(swarm.stored_pr("alpha").await.unwrap()["title"], title.as_str(), "the write happened");
    })
    .await;
}
