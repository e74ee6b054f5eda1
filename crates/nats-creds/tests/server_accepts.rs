//! A real nats-server in JWT mode accepts what this crate makes, and enforces the agent grant:
//! with agent `a`'s credential, `b`'s key, a watch on `agent-schedules`, a read of
//! `schedule-definitions`, a publish to `todo.b` and a subscribe to `_INBOX.>` are all refused,
//! as is a create of its own consumer, while `a`'s own key, queue and consumer (made with the
//! controller's credential) work.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, stream};
use async_nats::{ConnectOptions, Event};
use futures::StreamExt;
use hyperhive_nats_creds::{AgentName, Validity};
use hyperhive_nats_objects::{agent_consumer, agent_inbox_prefix, agent_schedule_direct_get_subject};
use hyperhive_testkit::NatsJwt;
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(10);
/// Short, because a refused request only shows as a timeout (plus a permissions event).
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

async fn controller(server: &NatsJwt) -> async_nats::Client {
    server.controller_client().await.expect("the controller credential is accepted")
}

/// Connects as `agent` and returns the client plus the server's permission-violation messages.
async fn agent(server: &NatsJwt, agent: &str) -> (async_nats::Client, mpsc::UnboundedReceiver<String>) {
    let name = AgentName::parse(agent).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let client = ConnectOptions::with_credentials_file(server.mint_agent(agent).await.unwrap())
        .await
        .unwrap()
        .custom_inbox_prefix(agent_inbox_prefix(&name))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                if let Event::ServerError(e) = event {
                    let _ = tx.send(e.to_string());
                }
            }
        })
        .connect(server.url())
        .await
        .expect("the agent credential is accepted");
    (client, rx)
}

async fn swarm_objects(client: async_nats::Client) -> jetstream::Context {
    let js = jetstream::new(client);
    js.create_stream(stream::Config {
        name: "TODO".into(),
        subjects: vec!["todo.*".into()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: Duration::from_secs(120),
        // The swarm account requires every stream to declare its size.
        max_bytes: 1 << 20,
        ..Default::default()
    })
    .await
    .unwrap();
    // async-nats creates every bucket with direct get allowed.
    for bucket in ["agent-schedules", "schedule-definitions"] {
        let store = js
            .create_key_value(kv::Config { bucket: bucket.into(), max_bytes: 1 << 20, ..Default::default() })
            .await
            .unwrap();
        for key in ["a", "b"] {
            store.put(key, format!("{bucket}/{key}").into()).await.unwrap();
        }
    }
    js
}

async fn expect_violation(events: &mut mpsc::UnboundedReceiver<String>, what: &str) {
    let event = tokio::time::timeout(TIMEOUT, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no permissions violation for {what}"))
        .unwrap();
    assert!(event.to_lowercase().contains("permissions violation"), "{what}: {event}");
}

#[tokio::test]
async fn agent_reads_its_own_key_and_nothing_else() {
    let server = NatsJwt::start().await.unwrap();
    let _js = swarm_objects(controller(&server).await).await;
    let (a, mut violations) = agent(&server, "a").await;
    let name_a = AgentName::parse("a").unwrap();

    // Its own key, by direct get.
    let own = a.request(agent_schedule_direct_get_subject(&name_a), "".into()).await.expect("its own key reads fine");
    assert_eq!(&own.payload[..], b"agent-schedules/a");
    assert!(violations.try_recv().is_err(), "no violation for its own key");

    // b's key.
    let b_key = "$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.b";
    assert!(a.request(b_key, "".into()).await.is_err());
    expect_violation(&mut violations, "direct get of b's key").await;

    // A watch on the bucket: the client's watch creates an unnamed consumer.
    let a_js = jetstream::new(a.clone());
    let bucket = a_js.get_stream_no_info("KV_agent-schedules").await.unwrap();
    let watch = bucket
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: format!("{}.watch", agent_inbox_prefix(&name_a)),
            filter_subject: "$KV.agent-schedules.>".into(),
            ..Default::default()
        })
        .await;
    assert!(watch.is_err(), "a watch on agent-schedules must be refused");
    expect_violation(&mut violations, "watch on agent-schedules").await;

    // schedule-definitions, by direct get or by the stream API.
    let definitions = "$JS.API.DIRECT.GET.KV_schedule-definitions.$KV.schedule-definitions.a";
    assert!(a.request(definitions, "".into()).await.is_err());
    expect_violation(&mut violations, "read of schedule-definitions").await;
    assert!(a.request("$JS.API.STREAM.INFO.KV_schedule-definitions", "".into()).await.is_err());
    expect_violation(&mut violations, "stream info of schedule-definitions").await;

    // Another agent's queue.
    a.publish("todo.b", "x".into()).await.unwrap();
    a.flush().await.unwrap();
    expect_violation(&mut violations, "publish to todo.b").await;

    // Everyone's replies.
    let _sub = a.subscribe("_INBOX.>").await.unwrap();
    a.flush().await.unwrap();
    expect_violation(&mut violations, "subscribe to _INBOX.>").await;
}

#[tokio::test]
async fn agent_uses_its_own_queue_and_not_another_agents_consumer() {
    let server = NatsJwt::start().await.unwrap();
    let js = swarm_objects(controller(&server).await).await;
    let (a, mut violations) = agent(&server, "a").await;
    let name_a = AgentName::parse("a").unwrap();
    let a_js = jetstream::new(a.clone());

    let ack = a_js.publish("todo.a", "hello".into()).await.unwrap().await.unwrap();
    assert_eq!(ack.stream, "TODO");

    // Its own consumer is the controller's to make; the agent may only bind to it.
    let queue = a_js.get_stream_no_info("TODO").await.unwrap();
    let own_consumer = agent_consumer(&name_a);
    assert!(queue.create_consumer(own_consumer.config.clone()).await.is_err());
    expect_violation(&mut violations, "creating its own consumer").await;
    own_consumer.ensure(&js).await.unwrap();
    let own = own_consumer.bind(&a_js).await.expect("its own durable consumer");
    let mut messages = own.messages().await.unwrap();
    let message = tokio::time::timeout(TIMEOUT, messages.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(&message.payload[..], b"hello");
    message.double_ack().await.expect("ack of its own todo");

    // b's consumer, through the same scoped subject form.
    let b_consumer = consumer::pull::Config {
        durable_name: Some("agent-b".into()),
        filter_subject: "todo.b".into(),
        ..Default::default()
    };
    assert!(queue.create_consumer(b_consumer).await.is_err());
    expect_violation(&mut violations, "creating b's consumer").await;
    assert!(violations.try_recv().is_err());
}

#[tokio::test]
async fn an_expired_credential_is_refused() {
    let server = NatsJwt::start().await.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let expired = Validity { issued_at: now - 7200, expires_at: Some(now - 3600) };
    let creds = server.mint_agent_with("a", expired).await.unwrap();
    let result = ConnectOptions::with_credentials_file(creds).await.unwrap().connect(server.url()).await;
    let err = result.expect_err("an expired credential must be refused").to_string();
    assert!(err.to_lowercase().contains("authorization"), "{err}");

    // And the unexpired one of the same agent connects.
    let fresh = server.mint_agent("a").await.unwrap();
    ConnectOptions::with_credentials_file(fresh)
        .await
        .unwrap()
        .connect(server.url())
        .await
        .expect("an unexpired credential of the same agent is accepted");
}

/// The user JWT travels in the CONNECT line, which nats-server caps at 4 KiB by default: a hive
/// running many agents must still connect, and still queue todos only for its own agents.
#[tokio::test]
async fn a_hive_of_five_hundred_agents_connects_and_queues_only_for_its_own() {
    let server = NatsJwt::start().await.unwrap();
    let names: Vec<String> = (0..500).map(|i| format!("agent-{i:03}")).collect();
    let agents: Vec<&str> = names.iter().map(String::as_str).collect();
    let creds = server.mint_hive("big", &agents).await.unwrap();
    let js = swarm_objects(server.controller_client().await.unwrap()).await;
    let hive = ConnectOptions::with_credentials_file(&creds)
        .await
        .unwrap()
        .custom_inbox_prefix("_INBOX_hive-big")
        .connect(server.url())
        .await
        .expect("a hive with 500 agents connects");
    let hive_js = jetstream::new(hive);
    hive_js.publish("todo.agent-499", "work".into()).await.unwrap().await.expect("its own agent's queue");
    assert!(hive_js.publish("todo.other", "not its agent".into()).await.unwrap().await.is_err());
    let mut todo = js.get_stream("TODO").await.unwrap();
    assert_eq!(todo.info().await.unwrap().state.messages, 1);
}
