//! The secret store against a real nats-server set up by the controller's own code: what lands in
//! `swarm-secrets` is sealed, a sealed value opens only under its own record and key, and no
//! tenant credential reaches the bucket.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use async_nats::{ConnectOptions, HeaderMap};
use futures::StreamExt;
use hyperhive_nats_creds::{AgentName, agent_inbox_prefix, hive_inbox_prefix};
use hyperhive_testkit::NatsJwt;
use swarm_controller::secrets::{
    OpenError, Plaintext, RecordKey, SWARM_SECRETS_BUCKET, SecretStore, SecretsError, SecretsKey,
};

const SECRET: &[u8] = b"forge-token-0123456789abcdef";

struct Setup {
    nats: NatsJwt,
    bucket: kv::Store,
}

async fn setup() -> Setup {
    let nats = NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let buckets = swarm_controller::nats::ensure_objects(&jetstream::new(client)).await.unwrap();
    Setup { nats, bucket: buckets.secrets }
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
    let alpha = AgentName::parse("alpha").unwrap();
    let tenants = [
        (s.nats.mint_agent("alpha").await.unwrap(), agent_inbox_prefix(&alpha)),
        (s.nats.mint_hive("h1", &["alpha"]).await.unwrap(), hive_inbox_prefix(&"h1".parse().unwrap())),
    ];
    for (creds, inbox) in tenants {
        let client = ConnectOptions::with_credentials_file(creds)
            .await
            .unwrap()
            .custom_inbox_prefix(inbox)
            .request_timeout(Some(Duration::from_secs(2)))
            .connect(s.nats.url())
            .await
            .unwrap();
        let mut watch = client.subscribe(format!("$KV.{SWARM_SECRETS_BUCKET}.>")).await.unwrap();
        let direct =
            format!("$JS.API.DIRECT.GET.KV_{SWARM_SECRETS_BUCKET}.$KV.{SWARM_SECRETS_BUCKET}.agent.alpha.forge-token");
        let answer = client.request_with_headers(direct, HeaderMap::new(), "".into()).await;
        assert!(answer.is_err(), "a tenant's direct get of a secret was answered: {answer:?}");
        client.flush().await.unwrap();
        store.put(&record("alpha"), &Plaintext::new(SECRET)).await.unwrap();
        let seen = tokio::time::timeout(Duration::from_millis(500), watch.next()).await;
        assert!(seen.is_err(), "a tenant saw a write to the secret store: {seen:?}");
    }
}
