//! The whole path: created, provisioned in every system, paused on its hive, every credential
//! working where it is used, `up` runs a todo; and no secret anywhere it must not be.

use hyperhive_provision::Secret;
use hyperhive_provision::forge::{Forge, ForgejoClient, TokenCheck};
use hyperhive_provision::matrix::{AccountCheck, Matrix, SynapseClient};

use crate::harness::{HIVE, Swarm, TEMPLATE, Tuning};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_is_provisioned_in_every_system_and_runs_its_todo_once_up() {
    let swarm = Swarm::start(Tuning::default()).await;
    let out = swarm
        .swarmctl(&[
            "agent",
            "create",
            "gamma",
            "--hive",
            HIVE,
            "--turn-command",
            &swarm.turn_command("gamma"),
            "--wait",
        ])
        .unwrap();
    assert!(out.contains("9 provisioning jobs queued"), "{out}");
    let states = swarm.job_states("gamma");
    assert_eq!(states.len(), 9, "{states:?}");
    assert!(states.values().all(|s| s == "succeeded"), "{states:?}");

    let entry = swarm.wait_provisioned("gamma").await;
    let identities = &entry["identities"];
    assert_eq!(identities["sso_user"], "gamma");
    assert_eq!(identities["forge_user"], "gamma");
    assert_eq!(identities["config_repo"], format!("{}/gamma-config", TEMPLATE.0));
    assert_eq!(identities["matrix_user"], swarm.synapse.user_id("gamma"));
    assert!(identities["store_cert_serial"].is_string() && identities["queue_creds_expires_at"].is_string());
    assert_eq!(entry["origin"], "created");
    assert_eq!(entry["wanted"]["state"], "paused");
    swarm.wait_actual("gamma", "paused").await;

    // Each system has exactly one of each, and the template's content is in the repository.
    let counts = swarm.forge.counts();
    assert_eq!((counts.users_created, counts.repos_generated, counts.tokens_minted), (1, 1, 1), "{counts:?}");
    assert!(swarm.forge.repo(TEMPLATE.0, "gamma-config").is_some());
    // The agent may write to its own config repository, and nobody else was given a part of it.
    let collaborators = swarm.forge.collaborators(TEMPLATE.0, "gamma-config");
    assert_eq!(collaborators.into_iter().collect::<Vec<_>>(), [("gamma".to_owned(), "write".to_owned())]);
    let users = std::fs::read_to_string(swarm.bridge.users_file()).unwrap();
    assert_eq!(users.matches("gamma:").count(), 1, "{users}");

    // The secrets the hive handed the agent work where they are meant to.
    let forge = ForgejoClient::new(&swarm.forge.url(), Secret::new(swarm.forge.admin_token())).unwrap();
    let token = Secret::new(swarm.agent_secret("gamma", "forge-token").expect("the forge token file"));
    assert_eq!(forge.check_token(&token).await.unwrap(), TokenCheck::Valid { login: "gamma".into() });
    let matrix = SynapseClient::new(&swarm.synapse.base_url(), Secret::new(swarm.synapse.shared_secret())).unwrap();
    let access = Secret::new(swarm.agent_secret("gamma", "matrix-token").expect("the matrix token file"));
    assert_eq!(matrix.whoami(&access).await.unwrap(), AccountCheck::Valid { user_id: swarm.synapse.user_id("gamma") });
    let identity = format!(
        "{}{}",
        swarm.agent_secret("gamma", "store-cert.pem").expect("the certificate file"),
        swarm.agent_secret("gamma", "store-key.pem").expect("the key file")
    );
    let answer = swarm.site.get("localhost", Some(&identity)).await.unwrap();
    assert!(answer.contains("CN=gamma"), "{answer}");
    assert!(swarm.agent_secret("gamma", "store-ca.pem").is_some());

    // Paused holds the todo; up runs it, once.
    swarm.queue("gamma", "t1").await;
    swarm.swarmctl(&["agent", "state", HIVE, "gamma", "up"]).unwrap();
    swarm.wait_turns("gamma", &["t1".to_owned()]).await;

    // A second create of the name is refused, and creates nothing.
    let again = swarm.create("gamma").unwrap_err();
    assert!(again.contains("exists already"), "{again}");
    assert_eq!(swarm.forge.counts().users_created, 1);
}
