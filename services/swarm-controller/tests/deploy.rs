//! The deploy sender against a real nats-server: what lands on `DEPLOY` opens with the hive's key
//! and no other, carries the signature of the controller's deploy key (and a hive that pins
//! another key refuses it), a repeated send is absorbed, and a send that cannot be sealed
//! publishes nothing.

use std::collections::BTreeMap;

use async_nats::jetstream;
use hyperhive_hive_proto::deploy::{DeployError, DeployKind, MSG_ID_HEADER, Payload, Secrets, open};
use hyperhive_hive_proto::directory::{HiveDirectory, HiveEntry};
use hyperhive_hive_proto::signing::{DeploySigner, PinnedKeys};
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_nats_objects::DEPLOY_STREAM;
use hyperhive_testkit::NatsJwt;
use nkeys::XKey;
use swarm_controller::lifecycle::deploy::{SendError, send};

fn hive(name: &str) -> HiveName {
    HiveName::parse(name).unwrap()
}

fn payload(to: &str, revision: u64) -> Payload {
    Payload {
        kind: DeployKind::Deploy,
        hive: hive(to),
        agent: AgentName::parse("a").unwrap(),
        revision,
        spec: Some(AgentSpec {
            turn_command: "cat".into(),
            schedule_tick: None,
            turn_timeout: None,
            env: BTreeMap::new(),
        }),
        secrets: Secrets { nats_creds: Some("-----BEGIN NATS USER JWT-----".into()), ..Default::default() },
    }
}

fn entry(xkey: Option<String>) -> HiveEntry {
    HiveEntry { description: String::new(), labels: BTreeMap::new(), xkey }
}

async fn last_sequence(js: &jetstream::Context) -> u64 {
    js.get_stream(DEPLOY_STREAM).await.unwrap().info().await.unwrap().state.last_sequence
}

#[tokio::test]
async fn a_deploy_message_opens_only_for_its_hive_and_is_sent_once() {
    let nats = NatsJwt::start().await.unwrap();
    let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
    let js = jetstream::new(client);
    hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
    let (h1_key, h2_key) = (XKey::new(), XKey::new());
    let directory: HiveDirectory = [
        (hive("h1"), entry(Some(h1_key.public_key()))),
        (hive("h2"), entry(Some(h2_key.public_key()))),
        (hive("bare"), entry(None)),
    ]
    .into_iter()
    .collect();
    let signer = DeploySigner::generate();
    let pinned = PinnedKeys::parse(&signer.public_key()).unwrap();
    let send = |payload: Payload| {
        let (js, directory, signer) = (&js, &directory, &signer);
        async move { send(js, directory, signer, &payload).await }
    };

    let sent = send(payload("h1", 3)).await.unwrap();
    assert!(!sent.duplicate);
    let stream = js.get_stream(DEPLOY_STREAM).await.unwrap();
    let message = stream.get_last_raw_message_by_subject("deploy.h1").await.unwrap();
    assert_eq!(message.sequence, sent.sequence);
    assert_eq!(message.headers.get(MSG_ID_HEADER).map(|v| v.as_str()), Some("a:deploy:3"));
    assert!(!String::from_utf8_lossy(&message.payload).contains("NATS USER JWT"), "the secret travels sealed");
    assert_eq!(open(&message.payload, &hive("h1"), &h1_key, &pinned).unwrap(), payload("h1", 3));
    assert_eq!(open(&message.payload, &hive("h1"), &h2_key, &pinned), Err(DeployError::BadSeal), "another hive's key");
    let elsewhere = PinnedKeys::parse(&DeploySigner::generate().public_key()).unwrap();
    assert!(
        matches!(open(&message.payload, &hive("h1"), &h1_key, &elsewhere), Err(DeployError::UntrustedSigner { .. })),
        "a hive pinning another controller's key"
    );

    let again = send(payload("h1", 3)).await.unwrap();
    assert!(again.duplicate, "the same (agent, kind, revision) is absorbed");
    assert_eq!(again.sequence, sent.sequence);
    let next = send(payload("h1", 4)).await.unwrap();
    assert!(!next.duplicate && next.sequence > sent.sequence, "a new revision is a new message");

    let before = last_sequence(&js).await;
    let mut no_spec = payload("h1", 5);
    no_spec.spec = None;
    let refused = [
        (send(payload("h9", 1)).await.unwrap_err(), "no hive h9"),
        (send(payload("bare", 1)).await.unwrap_err(), "has no xkey"),
        (send(no_spec).await.unwrap_err(), "must carry a spec"),
    ];
    for (err, needle) in refused {
        assert!(err.to_string().contains(needle), "{err}");
        assert!(!matches!(err, SendError::Publish { .. }), "{err}");
    }
    assert_eq!(last_sequence(&js).await, before, "nothing was published");
}
