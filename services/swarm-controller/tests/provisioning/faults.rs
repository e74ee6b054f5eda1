//! A controller killed (`kill -9`) in the middle of a step, after the step's server did the work
//! but before the controller heard back: the next run finishes the agent and makes nothing twice.
//! And a step whose server is down: retried with backoff, failed, its dependents blocked, then
//! retried by hand once the server is back.

use std::time::Duration;

use hyperhive_provision::Secret;
use hyperhive_provision::forge::{Forge, ForgejoClient, TokenCheck};
use hyperhive_testkit::{HoldProxy, wait_until};
use warp::http::Method;

use crate::harness::{PATIENCE, Swarm, TEMPLATE, Tuning};

/// Holds the answer to `method path` on `proxy`, creates `gamma`, kills the controller once the
/// server has answered, starts it again, and waits until `gamma` is provisioned and paused.
async fn kill_while_held(pick: fn(&Swarm) -> &HoldProxy, method: Method, path: &str) -> Swarm {
    let mut swarm = Swarm::start(Tuning::default()).await;
    pick(&swarm).hold(Some(method), path);
    swarm.create("gamma").unwrap();
    tokio::time::timeout(PATIENCE, pick(&swarm).held()).await.expect("the held request to be answered upstream");
    swarm.kill_controller();
    swarm.start_controller().await;
    let entry = swarm.wait_provisioned("gamma").await;
    assert_eq!(entry["wanted"]["state"], "paused");
    swarm.wait_actual("gamma", "paused").await;
    assert!(swarm.controller_log().contains("resuming provisioning where it stopped"), "{}", swarm.controller_log());
    swarm
}

fn sso_users(swarm: &Swarm) -> usize {
    std::fs::read_to_string(swarm.bridge.users_file()).unwrap().matches("gamma:").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_sso_user_was_made_the_next_run_adopts_it() {
    let swarm = kill_while_held(|s| &s.proxies.sso, Method::PUT, "/v1/users/gamma").await;
    assert_eq!(sso_users(&swarm), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_forge_user_was_made_the_next_run_adopts_it() {
    let swarm = kill_while_held(|s| &s.proxies.forge, Method::POST, "/api/v1/admin/users").await;
    let counts = swarm.forge.counts();
    assert_eq!((counts.users_created, counts.repos_generated, counts.tokens_minted), (1, 1, 1), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_config_repo_was_generated_the_next_run_adopts_it() {
    let path = format!("/api/v1/repos/{}/{}/generate", TEMPLATE.0, TEMPLATE.1);
    let swarm = kill_while_held(|s| &s.proxies.forge, Method::POST, &path).await;
    assert_eq!(swarm.forge.counts().repos_generated, 1);
    assert!(swarm.forge.repo(TEMPLATE.0, "gamma-config").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_forge_token_was_minted_the_lost_token_is_replaced_not_added() {
    let swarm = kill_while_held(|s| &s.proxies.forge, Method::POST, "/api/v1/users/gamma/tokens").await;
    // The first token's value died with the killed controller: it is deleted, one new one minted.
    let counts = swarm.forge.counts();
    assert_eq!((counts.tokens_minted, counts.tokens_deleted), (2, 1), "{counts:?}");
    assert_eq!(swarm.forge.token_names("gamma"), ["hyperhive"]);
    let forge = ForgejoClient::new(&swarm.forge.url(), Secret::new(swarm.forge.admin_token())).unwrap();
    let token = Secret::new(swarm.agent_secret("gamma", "forge-token").unwrap());
    assert_eq!(forge.check_token(&token).await.unwrap(), TokenCheck::Valid { login: "gamma".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_matrix_account_was_registered_the_next_run_logs_in_to_it() {
    let swarm = kill_while_held(|s| &s.proxies.matrix, Method::POST, "/_synapse/admin/v1/register").await;
    let entry = swarm.roster_entry("gamma").unwrap();
    assert_eq!(entry["identities"]["matrix_user"], swarm.synapse.user_id("gamma"));
    assert!(swarm.agent_secret("gamma", "matrix-token").is_some());
}

/// Kills the controller over and over at varying moments while it provisions, so the kill lands
/// in every kind of step, the ones that only talk to NATS (store certificate, NATS credential,
/// wanted state, deploy) too: the agent is still finished once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_again_and_again_while_provisioning_the_agent_is_finished_once() {
    let mut swarm = Swarm::start(Tuning::default()).await;
    swarm.create("gamma").unwrap();
    let mut kills = 0;
    for delay_ms in [5_u64, 20, 40, 60, 90, 130, 180, 250] {
        if swarm.roster_entry("gamma").is_some_and(|e| e["provisioning"]["deploy"]["state"] == "done") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        swarm.kill_controller();
        kills += 1;
        swarm.start_controller().await;
    }
    assert!(kills >= 1, "provisioning finished before the first kill");
    swarm.wait_provisioned("gamma").await;
    swarm.wait_actual("gamma", "paused").await;
    let counts = swarm.forge.counts();
    assert_eq!((counts.users_created, counts.repos_generated), (1, 1), "{counts:?}");
    assert_eq!(swarm.forge.token_names("gamma"), ["hyperhive"]);
    assert_eq!(sso_users(&swarm), 1);
    // One wanted state, written once (its first revision is still the one it has).
    let wanted = swarm.js.get_key_value("agent-wanted").await.unwrap();
    let entry = wanted.entry("hive1.gamma").await.unwrap().unwrap();
    let history = wanted.history("hive1.gamma").await.unwrap();
    use futures::StreamExt;
    assert_eq!(history.count().await, 1, "the wanted state was written once (revision {})", entry.revision);
    eprintln!("{kills} kills during provisioning");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_server_is_down_fails_blocks_its_dependents_and_is_retried_by_hand() {
    let tuning = Tuning { env: vec![("SWARM_JOBQ_MAX_ATTEMPTS".into(), "2".into())], ..Tuning::default() };
    let swarm = Swarm::start(tuning).await;
    swarm.forge.set_down(true);
    swarm.create("gamma").unwrap();
    let states = wait_until("forge-user to fail", PATIENCE, || async {
        let states = swarm.job_states("gamma");
        (states.get("gamma.forge-user").map(String::as_str) == Some("failed")).then_some(states)
    })
    .await
    .unwrap();
    for blocked in ["gamma.config-repo", "gamma.forge-token", "gamma.declare-paused", "gamma.deploy"] {
        wait_until(&format!("{blocked} to be blocked"), PATIENCE, || async {
            (swarm.job_states("gamma").get(blocked).map(String::as_str) == Some("blocked")).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {states:?}"));
    }
    let graph = swarm.swarmctl_json(&["jobs", "--agent", "gamma"]);
    let node = graph["nodes"].as_array().unwrap().iter().find(|n| n["id"] == "gamma.forge-user").unwrap().clone();
    assert_eq!(node["attempts"], 2, "{node}");
    let entry = swarm.roster_entry("gamma").unwrap();
    assert_eq!(entry["provisioning"]["forge-user"]["state"], "failed", "{entry}");
    assert!(entry["provisioning"]["forge-user"]["error"].as_str().unwrap().contains("forge"), "{entry}");
    assert_eq!(swarm.forge.counts().users_created, 0);
    // The table says which job failed and why.
    let table = swarm.swarmctl(&["jobs", "--agent", "gamma"]).unwrap();
    assert!(table.contains("failed") && table.contains("blocked"), "{table}");

    swarm.forge.set_down(false);
    swarm.swarmctl(&["jobs", "retry", "gamma.forge-user"]).unwrap();
    swarm.wait_provisioned("gamma").await;
    let states = swarm.job_states("gamma");
    assert!(states.values().all(|s| s == "succeeded"), "{states:?}");
    assert_eq!(swarm.forge.counts().users_created, 1);
}

/// Creates `gamma` with one job at a time, and kills the controller the moment the roster shows
/// `step` running (a watch on its roster key), so the kill lands inside that step or right after
/// its work, before or after it was recorded; starts the controller again and waits until
/// `gamma` is provisioned and paused.
async fn kill_when_running(step: &str) -> Swarm {
    use futures::StreamExt;
    let tuning = Tuning { env: vec![("SWARM_JOBQ_CONCURRENCY".into(), "1".into())], ..Tuning::default() };
    let mut swarm = Swarm::start(tuning).await;
    let roster = swarm.js.get_key_value("agents").await.unwrap();
    let mut watch = roster.watch("gamma").await.unwrap();
    swarm.create("gamma").unwrap();
    let running = tokio::time::timeout(PATIENCE, async {
        while let Some(entry) = watch.next().await {
            let entry: serde_json::Value = serde_json::from_slice(&entry.unwrap().value).unwrap_or_default();
            if entry["provisioning"][step]["state"] == "running" {
                return;
            }
        }
    });
    running.await.unwrap_or_else(|_| panic!("{step} never showed running"));
    swarm.kill_controller();
    swarm.start_controller().await;
    swarm.wait_provisioned("gamma").await;
    swarm.wait_actual("gamma", "paused").await;
    swarm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_in_the_store_identity_step_the_agent_still_gets_one_working_certificate() {
    let swarm = kill_when_running("store-identity").await;
    let identity = format!(
        "{}{}",
        swarm.agent_secret("gamma", "store-cert.pem").unwrap(),
        swarm.agent_secret("gamma", "store-key.pem").unwrap()
    );
    assert!(swarm.site.get("localhost", Some(&identity)).await.unwrap().contains("CN=gamma"));
    let entry = swarm.roster_entry("gamma").unwrap();
    assert!(
        swarm.agent_secret("gamma", "store-cert.pem").is_some() && entry["identities"]["store_cert_serial"].is_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_in_the_queue_credential_step_the_agent_connects_with_the_credential_it_was_given() {
    let swarm = kill_when_running("queue-credential").await;
    swarm.queue("gamma", "t1").await;
    swarm.swarmctl(&["agent", "state", crate::harness::HIVE, "gamma", "up"]).unwrap();
    swarm.wait_turns("gamma", &["t1".to_owned()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_in_the_declare_paused_step_the_wanted_state_is_written_once() {
    use futures::StreamExt;
    let swarm = kill_when_running("declare-paused").await;
    let wanted = swarm.js.get_key_value("agent-wanted").await.unwrap();
    assert_eq!(wanted.history("hive1.gamma").await.unwrap().count().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_in_the_deploy_step_the_hive_applies_the_deploy_once() {
    let swarm = kill_when_running("deploy").await;
    let log = swarm.hive.as_ref().unwrap().log();
    let applied = log.lines().filter(|l| l.contains("deploy applied") && l.contains("kind=\"deploy\"")).count();
    assert_eq!(applied, 1, "{log}");
}
