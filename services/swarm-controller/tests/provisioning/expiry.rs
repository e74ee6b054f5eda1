//! Credentials with lifetimes of seconds: the agent keeps working across several renewals of its
//! NATS credential and its store certificate, no todo lost or run twice, its process never
//! restarted; a revoked forge token and a deactivated matrix account are noticed within one check
//! and repaired.

use std::time::Duration;

use hyperhive_provision::Secret;
use hyperhive_provision::forge::{Forge, ForgejoClient, TokenCheck};
use hyperhive_provision::matrix::{AccountCheck, Matrix, SynapseClient};
use hyperhive_testkit::wait_until;

use crate::harness::{HIVE, PATIENCE, Swarm, Tuning};

/// Lifetimes: renewed at two thirds (6 s), leaving 3 s for the renewal to reach the agent.
const LIFETIME: &str = "9s";

fn tuning() -> Tuning {
    Tuning {
        env: [
            ("SWARM_QUEUE_CREDS_LIFETIME", LIFETIME),
            ("SWARM_STORE_CERT_LIFETIME", LIFETIME),
            ("SWARM_CREDENTIAL_CHECK_EVERY", "1s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
        // Reactivating an account needs an index a fresh database builds in the background.
        synapse_config: Some("background_updates:\n  sleep_enabled: false\n".to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_keeps_working_across_renewals_with_no_todo_lost_or_run_twice() {
    let swarm = Swarm::start(tuning()).await;
    swarm.create("gamma").unwrap();
    let first = swarm.wait_provisioned("gamma").await;
    swarm.swarmctl(&["agent", "state", HIVE, "gamma", "up"]).unwrap();
    swarm.wait_actual("gamma", "running").await;
    let first_serial = first["identities"]["store_cert_serial"].clone();

    // Todos every 300 ms for 30 s: more than three lifetimes, so several renewals of each.
    let mut queued = Vec::new();
    let started = tokio::time::Instant::now();
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(30) {
        let id = format!("t{i:03}");
        swarm.queue("gamma", &id).await;
        queued.push(id);
        i += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A todo the server hands out just as a renewal closes the old connection is redelivered
    // after the queue's ack wait (60 s): late, never lost or run twice.
    swarm.wait_turns_within("gamma", &queued, Duration::from_secs(150)).await;

    let entry = swarm.roster_entry("gamma").unwrap();
    let revision = entry["revision"].as_u64().unwrap();
    assert!(revision >= 4, "at least three credentials messages after the deploy: revision {revision}");
    assert_ne!(entry["identities"]["store_cert_serial"], first_serial, "the certificate was renewed");
    assert_eq!(entry["actual"]["restarts"], 0, "the agent was never restarted: {entry}");
    let log = swarm.hive.as_ref().unwrap().log();
    assert!(!log.contains("restarting"), "{log}");
    // The certificate the agent holds now is a current one from the store CA.
    let identity = format!(
        "{}{}",
        swarm.agent_secret("gamma", "store-cert.pem").unwrap(),
        swarm.agent_secret("gamma", "store-key.pem").unwrap()
    );
    assert!(swarm.site.get("localhost", Some(&identity)).await.unwrap().contains("CN=gamma"));
    let metrics = swarm.metrics().await;
    for credential in ["queue-creds", "store-cert"] {
        assert!(
            metrics.contains(&format!("swarm_credential_renewals_total{{credential=\"{credential}\"}}")),
            "{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_forge_token_and_a_deactivated_matrix_account_are_repaired_within_a_check() {
    let swarm = Swarm::start(tuning()).await;
    swarm.create("gamma").unwrap();
    swarm.wait_provisioned("gamma").await;
    swarm.wait_actual("gamma", "paused").await;
    let forge = ForgejoClient::new(&swarm.forge.url(), Secret::new(swarm.forge.admin_token())).unwrap();
    let matrix = SynapseClient::new(&swarm.synapse.base_url(), Secret::new(swarm.synapse.shared_secret())).unwrap();

    let old_token = swarm.agent_secret("gamma", "forge-token").unwrap();
    assert!(swarm.forge.revoke_token("gamma", "hyperhive"));
    let new_token = wait_until("a new forge token at the agent", PATIENCE, || async {
        swarm.agent_secret("gamma", "forge-token").filter(|t| *t != old_token)
    })
    .await
    .unwrap();
    assert_eq!(forge.check_token(&Secret::new(new_token)).await.unwrap(), TokenCheck::Valid { login: "gamma".into() });
    assert_eq!(forge.check_token(&Secret::new(old_token)).await.unwrap(), TokenCheck::Invalid);

    let old_access = swarm.agent_secret("gamma", "matrix-token").unwrap();
    let user_id = swarm.synapse.user_id("gamma");
    swarm.synapse.deactivate(&user_id).await.unwrap();
    assert_eq!(matrix.whoami(&Secret::new(old_access.clone())).await.unwrap(), AccountCheck::Invalid);
    let new_access = wait_until("a working matrix token at the agent", PATIENCE, || async {
        swarm.agent_secret("gamma", "matrix-token").filter(|t| *t != old_access)
    })
    .await
    .unwrap();
    assert_eq!(matrix.whoami(&Secret::new(new_access)).await.unwrap(), AccountCheck::Valid { user_id });

    // The repairs show in the job graph and in the metrics.
    let states = swarm.job_states("gamma");
    assert!(states.keys().any(|id| id.starts_with("gamma.repair-forge-token.")), "{states:?}");
    assert!(states.keys().any(|id| id.starts_with("gamma.repair-matrix.")), "{states:?}");
    let metrics = swarm.metrics().await;
    assert!(metrics.contains("swarm_credential_renewals_total{credential=\"forge-token\"}"), "{metrics}");
    assert!(metrics.contains("swarm_credential_renewals_total{credential=\"matrix\"}"), "{metrics}");
    let live = swarm.agents_status().await;
    let gamma = live.as_array().unwrap().iter().find(|a| a["name"] == "gamma").unwrap().clone();
    assert!(gamma["credentials"]["checked_at"].is_string(), "{gamma}");
    assert!(gamma["credentials"]["credentials"]["forge-token"].is_string(), "{gamma}");
}
