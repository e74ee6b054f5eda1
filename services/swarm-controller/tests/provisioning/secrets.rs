//! After a full provisioning run: no secret of the agent appears in any log, any API answer, the
//! job graph, or any KV value other than the sealed ones (which do not hold it in the clear
//! either).

use swarm_controller::nats::scan_bucket;
use swarm_controller::secrets::{RecordKey, SecretStore, SecretsKey};

use crate::common::assert_absent;
use crate::harness::{Swarm, Tuning};

/// Every secret the swarm holds for `agent`: the values of its records in the secret store
/// (passwords, tokens, the NATS credential, the certificate's key), opened with the controller's
/// key, cut into the lines that would give one away.
async fn secrets_of(swarm: &Swarm, agent: &str) -> Vec<String> {
    let key = SecretsKey::load(&swarm.dir.path().join("secrets.key")).unwrap();
    let store = SecretStore::new(swarm.js.get_key_value("swarm-secrets").await.unwrap(), key);
    let mut found = Vec::new();
    for kind in
        ["sso-password", "forge-password", "forge-token", "matrix-password", "matrix-token", "store-key", "queue-creds"]
    {
        let value = store.get(&RecordKey::agent(agent, kind).unwrap()).await.unwrap();
        let value = String::from_utf8(value.unwrap_or_else(|| panic!("no {kind} stored")).expose().to_vec()).unwrap();
        // A PEM key or a creds file: every long line of it (the seed, the key's base64), not the
        // armour lines, which are public words.
        for line in value.lines().map(str::trim).filter(|l| l.len() >= 16 && !l.starts_with("-----")) {
            if !line.contains("NATS") && !line.starts_with("eyJ") {
                found.push(line.to_owned());
            }
        }
    }
    assert!(found.len() >= 7, "{} secret lines", found.len());
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_logs_answers_the_graph_or_plain_kv_values() {
    let mut swarm = Swarm::start(Tuning::default()).await;
    swarm.create("gamma").unwrap();
    swarm.wait_provisioned("gamma").await;
    swarm.wait_actual("gamma", "paused").await;
    // A kill and a restart, so the resumed run's log and the health pass are scanned too.
    swarm.kill_controller();
    swarm.start_controller().await;
    let secrets = secrets_of(&swarm, "gamma").await;

    for (what, args) in [
        ("swarmctl agents", vec!["agents", "--json"]),
        ("swarmctl jobs", vec!["jobs", "--json"]),
        ("swarmctl hives status", vec!["hives", "status", "--json"]),
    ] {
        assert_absent(&secrets, what, &swarm.swarmctl(&args).unwrap());
    }
    let again = swarm.create("gamma").unwrap_err();
    assert_absent(&secrets, "a refused create", &again);
    for log in swarm.controller.past_logs.iter().chain([&swarm.controller_log()]) {
        assert_absent(&secrets, "the controller's log", log);
    }
    assert_absent(&secrets, "hive-c0re's log", &swarm.hive.as_ref().unwrap().log());
    for bucket in ["agents", "agent-wanted", "hive-status", "agent-schedules", "schedule-definitions", "swarm-secrets"]
    {
        for kv in scan_bucket(&swarm.js, bucket).await.unwrap() {
            assert_absent(&secrets, bucket, &kv.key);
            assert_absent(&secrets, bucket, &String::from_utf8_lossy(&kv.value));
        }
    }
}
