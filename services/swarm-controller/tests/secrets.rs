//! The secret store against a real nats-server set up by the controller's own code: what lands in
//! `swarm-secrets` is sealed, a sealed value opens only under its own record and key, and no
//! tenant credential reaches the bucket.

mod common;

use async_nats::jetstream::{self, kv};
use hyperhive_nats_objects::SWARM_SECRETS_BUCKET;
use hyperhive_testkit::NatsJwt;
use swarm_controller::secrets::{OpenError, Plaintext, RecordKey, SecretStore, SecretsError, SecretsKey};

const SECRET: &[u8] = b"forge-token-0123456789abcdef";

struct Setup {
    nats: NatsJwt,
    client: async_nats::Client,
    bucket: kv::Store,
}

async fn setup() -> Setup {
    let nats = NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let buckets = hyperhive_nats_objects::ensure_objects(&jetstream::new(client.clone())).await.unwrap();
    Setup { nats, client, bucket: buckets.secrets }
}

fn record(agent: &str) -> RecordKey {
    RecordKey::agent(agent, "forge-token").unwrap()
}

#[tokio::test]
async fn a_secret_is_stored_sealed_and_read_back_whole() {
    let s = setup().await;
    let store = SecretStore::new(s.bucket.clone(), SecretsKey::generate());
    assert_eq!(store.get(&record("alpha")).await.unwrap(), None);
    store.put(&record("alpha"), &Plaintext::new(SECRET)).await.unwrap();
    assert_eq!(store.get(&record("alpha")).await.unwrap().unwrap().expose(), SECRET);

    let raw = s.bucket.get("agent.alpha.forge-token").await.unwrap().unwrap();
    assert!(!raw.windows(SECRET.len()).any(|w| w == SECRET), "the bucket holds the secret in the clear");
    assert!(raw.len() > SECRET.len(), "a sealed value carries its nonce and tag");

    store.delete(&record("alpha")).await.unwrap();
    assert_eq!(store.get(&record("alpha")).await.unwrap(), None);
}

#[tokio::test]
async fn a_value_moved_changed_or_sealed_under_another_key_is_refused_without_showing_it() {
    let s = setup().await;
    let store = SecretStore::new(s.bucket.clone(), SecretsKey::generate());
    store.put(&record("alpha"), &Plaintext::new(SECRET)).await.unwrap();
    let sealed = s.bucket.get("agent.alpha.forge-token").await.unwrap().unwrap();

    // Someone who can write the bucket copies alpha's token to beta's record.
    s.bucket.put("agent.beta.forge-token", sealed.clone()).await.unwrap();
    let moved = store.get(&record("beta")).await.unwrap_err();
    assert!(matches!(moved, SecretsError::Open { problem: OpenError::Refused, .. }), "{moved:?}");

    let mut changed = sealed.to_vec();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    s.bucket.put("agent.alpha.forge-token", changed.into()).await.unwrap();
    let tampered = store.get(&record("alpha")).await.unwrap_err();
    assert!(matches!(tampered, SecretsError::Open { problem: OpenError::Refused, .. }), "{tampered:?}");
    let message = tampered.to_string();
    assert!(message.contains("agent.alpha.forge-token") && message.contains("SWARM_SECRETS_KEY_FILE"), "{message}");

    s.bucket.put("agent.alpha.forge-token", sealed).await.unwrap();
    let other_key = SecretStore::new(s.bucket.clone(), SecretsKey::generate());
    assert!(matches!(other_key.get(&record("alpha")).await, Err(SecretsError::Open { .. })));
    assert_eq!(store.get(&record("alpha")).await.unwrap().unwrap().expose(), SECRET, "the original still opens");
}

/// An agent or a hive asks for a secret by direct get and watches the bucket's subjects while
/// the controller writes: nothing reaches either.
#[tokio::test]
async fn no_tenant_credential_reaches_the_secret_store() {
    let s = setup().await;
    let store = SecretStore::new(s.bucket.clone(), SecretsKey::generate());
    store.put(&record("alpha"), &Plaintext::new(SECRET)).await.unwrap();
    common::assert_no_tenant_reaches(&s.nats, SWARM_SECRETS_BUCKET, "agent.alpha.forge-token", || async {
        store.put(&record("alpha"), &Plaintext::new(SECRET)).await.unwrap();
    })
    .await;
}

/// Each deploy message lists its agent's linked accounts and secret variables: that listing
/// reads the agent's own keys only, so its cost does not grow with the swarm. Keys of another
/// agent whose name starts alike, and a deleted record, are left out.
#[tokio::test]
async fn listing_an_agents_records_reads_its_own_keys_only() {
    let s = setup().await;
    let store = SecretStore::new(s.bucket.clone(), SecretsKey::generate());
    const OTHERS: usize = 300;
    for n in 0..OTHERS {
        s.bucket.put(format!("agent.other{n}.forge-token"), "sealed".into()).await.unwrap();
    }
    for key in
        ["agent.alpha.forge-token", "agent.alpha.linked-github", "agent.alpha.linked-old", "agent.alphabet.env.x"]
    {
        s.bucket.put(key, "sealed".into()).await.unwrap();
    }
    s.bucket.delete("agent.alpha.linked-old").await.unwrap();

    let received = || s.client.statistics().in_messages.load(std::sync::atomic::Ordering::Relaxed);
    let before = received();
    let listed = store.records("agent.alpha.").await.unwrap();
    let cost = received() - before;
    let names: Vec<&str> = listed.iter().map(RecordKey::as_str).collect();
    assert_eq!(names, ["agent.alpha.forge-token", "agent.alpha.linked-github"]);
    assert!(cost < 20, "listing two records took {cost} messages: it read the other {OTHERS} agents' keys");

    let linked = store.records("agent.alpha.linked-").await.unwrap();
    assert_eq!(linked.iter().map(RecordKey::as_str).collect::<Vec<_>>(), ["agent.alpha.linked-github"]);
    assert_eq!(store.records("swarm.env.").await.unwrap(), [], "nothing under the swarm's variables");
    assert_eq!(store.records("agent.").await.unwrap().len(), OTHERS + 3, "a shorter prefix lists every agent's");

    let mut stream = s.bucket.stream.clone();
    assert_eq!(stream.info().await.unwrap().state.consumer_count, 0, "a listing leaves no consumer behind");
}
