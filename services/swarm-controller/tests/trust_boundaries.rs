//! Agents and hives hold credentials an adversary may hold (an agent runs whatever an AI asks).
//! Each test here is one attack, made with a tenant's own credential against a real nats-server
//! set up by the controller's own code, and asserts it changes nothing of anyone else's:
//! - JetStream answers on whatever reply subject a request names, so a request the tenant may
//!   make, with a reply subject aimed at another tenant's key, queue or definition, must not write
//!   there (a publish ack, a direct get, an API reply and an ack confirmation are each tried);
//! - one agent must not exhaust the storage other agents need;
//! - a hive must neither read, watch nor write another hive's objects, even through replies;
//! - neither a hive nor an agent may write wanted state, not even its own hive's keys;
//! - no tenant may make, change or delete a consumer, not even its own: the controller makes
//!   them, and a tenant only binds to its own, pulls and acks.
//!
//! Each attack is followed by the same request with the attacker's own inbox as reply, and the
//! check waits for that answer: the server has handled the attack by then.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv};
use async_nats::{Client, ConnectOptions, HeaderMap};
use futures::StreamExt;
use hyperhive_nats_creds::{AgentName, HiveName};
use hyperhive_nats_objects::limits::{TODO_MAX_MSG_SIZE, TODO_MAX_MSGS_PER_AGENT};
use hyperhive_nats_objects::{
    AGENT_SCHEDULES_BUCKET, AGENT_WANTED_BUCKET, AUDIT_STREAM, AUDIT_SUBJECT, DEPLOY_STREAM, DurableConsumer, Ensured,
    HIVE_STATUS_BUCKET, SCHEDULE_DEFINITIONS_BUCKET, TODO_STREAM, TURNS_STREAM, agent_consumer, agent_inbox_prefix,
    agent_schedule_direct_get_subject, deploy_subject, hive_consumers, hive_deploy_consumer, hive_durable_name,
    hive_inbox_prefix, hive_status_subject, hive_wanted_consumer, hive_wanted_filter,
};
use hyperhive_testkit::NatsJwt;

/// How long a request waits for its answer: a refused request only times out, so short, while
/// every answered request here comes back in milliseconds.
const ANSWER: Duration = Duration::from_secs(2);

struct Swarm {
    nats: NatsJwt,
    js: jetstream::Context,
}

impl Swarm {
    /// NATS in JWT mode with every stream and bucket made by the controller's own setup, and
    /// agent `b`'s schedules and one definition in place.
    async fn start() -> Self {
        let nats = NatsJwt::start().await.unwrap();
        let client = swarm_controller::nats::connect(&nats.url(), Some(&nats.controller_creds())).await.unwrap();
        let js = jetstream::new(client);
        hyperhive_nats_objects::ensure_objects(&js).await.unwrap();
        let swarm = Self { nats, js };
        swarm.bucket(AGENT_SCHEDULES_BUCKET).await.put("a", "a's schedules".into()).await.unwrap();
        swarm.bucket(AGENT_SCHEDULES_BUCKET).await.put("b", "b's schedules".into()).await.unwrap();
        swarm.bucket(SCHEDULE_DEFINITIONS_BUCKET).await.put("s1", "a definition".into()).await.unwrap();
        swarm
    }

    async fn bucket(&self, name: &str) -> kv::Store {
        self.js.get_key_value(name).await.unwrap()
    }

    /// The value and revision of `key` in `bucket`, as the controller reads it.
    async fn entry(&self, bucket: &str, key: &str) -> Option<(Vec<u8>, u64)> {
        let entry = self.bucket(bucket).await.entry(key).await.unwrap();
        entry.filter(|e| e.operation == kv::Operation::Put).map(|e| (e.value.to_vec(), e.revision))
    }

    /// How many messages the stream holds on `subject`.
    async fn held(&self, stream: &str, subject: &str) -> u64 {
        let stream = self.js.get_stream(stream).await.unwrap();
        let info = stream.info_with_subjects(subject).await.unwrap();
        let mut subjects = info;
        let mut total = 0;
        while let Some(entry) = subjects.next().await {
            total += entry.unwrap().1;
        }
        total as u64
    }

    async fn agent(&self, name: &str) -> Client {
        let creds = self.nats.mint_agent(name).await.unwrap();
        connect(&self.nats, creds, agent_inbox_prefix(&AgentName::parse(name).unwrap())).await
    }

    async fn hive(&self, name: &str, agents: &[&str]) -> Client {
        let creds = self.nats.mint_hive(name, agents).await.unwrap();
        connect(&self.nats, creds, hive_inbox_prefix(&HiveName::parse(name).unwrap())).await
    }
}

async fn connect(nats: &NatsJwt, creds: std::path::PathBuf, inbox: String) -> Client {
    ConnectOptions::with_credentials_file(creds)
        .await
        .unwrap()
        .custom_inbox_prefix(inbox)
        .request_timeout(Some(ANSWER))
        .connect(nats.url())
        .await
        .unwrap()
}

/// Publishes `payload` to `subject` with the attacker's chosen `reply`, then makes the same
/// request answered to its own inbox and waits for the answer.
async fn attack(client: &Client, subject: &str, reply: &str, headers: HeaderMap, payload: &[u8]) {
    let payload = bytes::Bytes::copy_from_slice(payload);
    client
        .publish_with_reply_and_headers(subject.to_owned(), reply.to_owned(), headers.clone(), payload.clone())
        .await
        .unwrap();
    let control = client.request_with_headers(subject.to_owned(), headers, payload).await;
    assert!(control.is_ok(), "the same request to {subject} with its own reply is answered: {control:?}");
}

/// `consumer` as the tenant of `tenant_js` uses it: made by the controller's code, bound to by
/// the tenant (which may not make it).
async fn own_consumer(
    swarm: &Swarm,
    tenant_js: &jetstream::Context,
    consumer: &DurableConsumer,
) -> consumer::PullConsumer {
    consumer.ensure(&swarm.js).await.unwrap();
    consumer.bind(tenant_js).await.unwrap()
}

fn agent_named(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

fn no_headers() -> HeaderMap {
    HeaderMap::new()
}

#[tokio::test]
async fn a_publish_ack_aimed_at_another_agents_key_or_queue_writes_nothing() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let b_key = swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await;

    attack(&a, "todo.a", &format!("$KV.{AGENT_SCHEDULES_BUCKET}.b"), no_headers(), b"x").await;
    attack(&a, "todo.a", "todo.b", no_headers(), b"x").await;

    assert_eq!(swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await, b_key, "b's schedules key is untouched");
    assert_eq!(swarm.held(TODO_STREAM, "todo.b").await, 0, "nothing was queued for b");
    assert_eq!(swarm.held(TODO_STREAM, "todo.a").await, 4, "a's own publishes landed in its own queue");
}

#[tokio::test]
async fn a_direct_get_answer_aimed_at_another_agents_key_or_a_definition_writes_nothing() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let own = agent_schedule_direct_get_subject(&AgentName::parse("a").unwrap());
    let b_key = swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await;
    let definition = swarm.entry(SCHEDULE_DEFINITIONS_BUCKET, "s1").await;

    attack(&a, &own, &format!("$KV.{AGENT_SCHEDULES_BUCKET}.b"), no_headers(), b"").await;
    attack(&a, &own, &format!("$KV.{SCHEDULE_DEFINITIONS_BUCKET}.s1"), no_headers(), b"").await;
    attack(&a, &own, "todo.b", no_headers(), b"").await;

    assert_eq!(swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await, b_key, "b's key does not hold a's schedules");
    assert_eq!(swarm.entry(SCHEDULE_DEFINITIONS_BUCKET, "s1").await, definition, "the definition is untouched");
    assert_eq!(swarm.held(TODO_STREAM, "todo.b").await, 0, "nothing was queued for b");
}

#[tokio::test]
async fn an_api_reply_aimed_at_another_agents_key_writes_nothing() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let b_key = swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await;
    agent_consumer(&agent_named("a")).ensure(&swarm.js).await.unwrap();

    attack(&a, "$JS.API.CONSUMER.INFO.TODO.agent-a", &format!("$KV.{AGENT_SCHEDULES_BUCKET}.b"), no_headers(), b"")
        .await;
    attack(&a, "$JS.API.CONSUMER.INFO.TODO.agent-a", "todo.b", no_headers(), b"").await;

    assert_eq!(swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await, b_key, "b's key is untouched");
    assert_eq!(swarm.held(TODO_STREAM, "todo.b").await, 0, "nothing was queued for b");
}

#[tokio::test]
async fn an_ack_confirmation_aimed_at_another_agents_queue_writes_nothing() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let a_js = jetstream::new(a.clone());
    for _ in 0..2 {
        a_js.publish("todo.a", "work".into()).await.unwrap().await.unwrap();
    }
    let consumer = own_consumer(&swarm, &a_js, &agent_consumer(&agent_named("a"))).await;
    let b_key = swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await;

    // An ack with a reply asks the server to confirm it there. One todo at a time: the agent's
    // consumer hands out the next only once the one before is acked.
    for (left, reply) in [(1, format!("$KV.{AGENT_SCHEDULES_BUCKET}.b")), (0, "todo.b".to_owned())] {
        let mut messages = consumer.fetch().max_messages(1).messages().await.unwrap();
        let todo = messages.next().await.unwrap().unwrap();
        a.publish_with_reply(todo.reply.clone().unwrap().to_string(), reply, "+ACK".into()).await.unwrap();
        // The ack took effect.
        hyperhive_testkit::wait_until("a's todo acked", ANSWER, || async {
            (swarm.held(TODO_STREAM, "todo.a").await == left).then_some(())
        })
        .await
        .unwrap();
    }

    assert_eq!(swarm.entry(AGENT_SCHEDULES_BUCKET, "b").await, b_key, "b's key is untouched");
    assert_eq!(swarm.held(TODO_STREAM, "todo.b").await, 0, "nothing was queued for b");
}

#[tokio::test]
async fn one_agent_filling_its_queue_is_refused_while_others_keep_working() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let b = swarm.agent("b").await;
    let (a_js, b_js) = (jetstream::new(a.clone()), jetstream::new(b.clone()));

    // A todo larger than a todo may be is refused by the stream, with a clear error.
    let huge = vec![b'x'; usize::try_from(TODO_MAX_MSG_SIZE).unwrap() + 1];
    let err = a_js.publish("todo.a", huge.into()).await.unwrap().await;
    let err = err.expect_err("a todo over the size limit is refused").to_string();
    assert!(err.contains("maximum"), "{err}");

    // Its own queue up to the limit, then refused.
    let mut acks = Vec::new();
    for n in 0..TODO_MAX_MSGS_PER_AGENT {
        acks.push(a_js.publish("todo.a", format!("todo {n}").into()).await.unwrap());
    }
    for ack in acks {
        ack.await.expect("a's queue takes todos up to its limit");
    }
    let refused = a_js.publish("todo.a", "one too many".into()).await.unwrap().await;
    let err = refused.expect_err("a publish past a's limit is refused").to_string();
    assert!(err.contains("maximum messages per subject exceeded"), "{err}");

    // No JetStream of its own to fill either.
    let own_stream = a_js
        .create_stream(jetstream::stream::Config {
            name: "MINE".into(),
            subjects: vec!["mine.>".into()],
            ..Default::default()
        })
        .await;
    assert!(own_stream.is_err(), "an agent cannot create a stream of its own");

    // b is unaffected: it queues and consumes.
    b_js.publish("todo.b", "b's work".into()).await.unwrap().await.expect("b's queue still takes todos");
    let consumer = own_consumer(&swarm, &b_js, &agent_consumer(&agent_named("b"))).await;
    let mut messages = consumer.fetch().max_messages(1).messages().await.unwrap();
    let message = messages.next().await.unwrap().unwrap();
    assert_eq!(&message.payload[..], b"b's work");
    message.double_ack().await.unwrap();
    assert_eq!(swarm.held(TODO_STREAM, "todo.a").await, u64::try_from(TODO_MAX_MSGS_PER_AGENT).unwrap());
}

#[tokio::test]
async fn a_hive_reaches_its_own_objects_only() {
    let swarm = Swarm::start().await;
    let h1 = swarm.hive("h1", &["a"]).await;
    let h2 = swarm.hive("h2", &["c"]).await;
    let (h1_name, h2_name) = (HiveName::parse("h1").unwrap(), HiveName::parse("h2").unwrap());
    let h1_js = jetstream::new(h1.clone());
    let h2_js = jetstream::new(h2.clone());

    // h1 writes and reads back its own status.
    h1_js.publish(hive_status_subject(&h1_name), "h1 is fine".into()).await.unwrap().await.unwrap();
    let own =
        h1.request(format!("$JS.API.DIRECT.GET.KV_{HIVE_STATUS_BUCKET}.$KV.{HIVE_STATUS_BUCKET}.h1"), "".into()).await;
    assert_eq!(&own.unwrap().payload[..], b"h1 is fine");
    let h1_status = swarm.entry(HIVE_STATUS_BUCKET, "h1").await;

    // h2 can neither read nor write h1's status, directly or through a reply subject.
    let read =
        h2.request(format!("$JS.API.DIRECT.GET.KV_{HIVE_STATUS_BUCKET}.$KV.{HIVE_STATUS_BUCKET}.h1"), "".into()).await;
    assert!(read.is_err(), "h2 reads h1's status: {read:?}");
    assert!(h2_js.publish(hive_status_subject(&h1_name), "forged".into()).await.unwrap().await.is_err());
    attack(&h2, &hive_status_subject(&h2_name), &format!("$KV.{HIVE_STATUS_BUCKET}.h1"), no_headers(), b"h2").await;
    attack(&h2, &hive_status_subject(&h2_name), &deploy_subject(&h1_name), no_headers(), b"h2").await;
    assert_eq!(swarm.entry(HIVE_STATUS_BUCKET, "h1").await, h1_status, "h1's status is untouched");
    assert_eq!(swarm.held(DEPLOY_STREAM, "deploy.h1").await, 0, "nothing was queued for h1");

    // Wanted state: h1 watches its own agents' keys through its own consumer; h2 cannot watch
    // h1's, under its own consumer name or under h1's.
    let wanted = swarm.bucket(AGENT_WANTED_BUCKET).await;
    wanted.put("h1.a", "up".into()).await.unwrap();
    wanted.put("h2.c", "up".into()).await.unwrap();
    let watch = |durable: String, filter: String| consumer::pull::Config {
        durable_name: Some(durable),
        filter_subject: filter,
        deliver_policy: consumer::DeliverPolicy::LastPerSubject,
        ..Default::default()
    };
    let wanted_stream = format!("KV_{AGENT_WANTED_BUCKET}");
    let own_watch = own_consumer(&swarm, &h1_js, &hive_wanted_consumer(&h1_name)).await;
    let mut updates = own_watch.fetch().max_messages(1).messages().await.unwrap();
    let update = updates.next().await.unwrap().unwrap();
    assert_eq!((update.subject.as_str(), &update.payload[..]), ("$KV.agent-wanted.h1.a", &b"up"[..]));
    let h2_wanted = h2_js.get_stream_no_info(&wanted_stream).await.unwrap();
    for (durable, filter) in [
        (hive_durable_name(&h2_name), hive_wanted_filter(&h1_name)),
        (hive_durable_name(&h1_name), hive_wanted_filter(&h1_name)),
        (hive_durable_name(&h2_name), format!("$KV.{AGENT_WANTED_BUCKET}.>")),
    ] {
        let refused = h2_wanted.create_consumer(watch(durable.clone(), filter.clone())).await;
        assert!(refused.is_err(), "h2 created {durable} on {filter}");
    }
    let h1_key = h2
        .request(format!("$JS.API.DIRECT.GET.KV_{AGENT_WANTED_BUCKET}.$KV.{AGENT_WANTED_BUCKET}.h1.a"), "".into())
        .await;
    assert!(h1_key.is_err(), "h2 reads h1's wanted state: {h1_key:?}");

    // Deploy queue: h2 cannot pull h1's messages.
    swarm.js.publish(deploy_subject(&h1_name), "sealed spec".into()).await.unwrap().await.unwrap();
    let pull = h2
        .request(format!("$JS.API.CONSUMER.MSG.NEXT.{DEPLOY_STREAM}.{}", hive_durable_name(&h1_name)), "1".into())
        .await;
    assert!(pull.is_err(), "h2 pulls h1's deploy messages: {pull:?}");
    let h1_deploy = own_consumer(&swarm, &h1_js, &hive_deploy_consumer(&h1_name)).await;
    let mut deploys = h1_deploy.fetch().max_messages(1).messages().await.unwrap();
    assert_eq!(&deploys.next().await.unwrap().unwrap().payload[..], b"sealed spec");

    // Todo queues: only those of its own agents.
    h1_js.publish("todo.a", "from the hive".into()).await.unwrap().await.expect("h1 queues a todo for its agent a");
    assert!(h1_js.publish("todo.c", "not its agent".into()).await.unwrap().await.is_err());
    assert_eq!(swarm.held(TODO_STREAM, "todo.c").await, 0);
}

/// A `Nats-Rollup: all` header on a publish to a hive's own status key would purge every other
/// key of the bucket; no bucket takes a rollup, so the publish is refused and every status stays.
#[tokio::test]
async fn a_hive_cannot_roll_up_the_status_of_every_hive() {
    let swarm = Swarm::start().await;
    let h1 = swarm.hive("h1", &["a"]).await;
    let h2 = swarm.hive("h2", &["c"]).await;
    let (h1_name, h2_name) = (HiveName::parse("h1").unwrap(), HiveName::parse("h2").unwrap());
    let (h1_js, h2_js) = (jetstream::new(h1.clone()), jetstream::new(h2.clone()));
    h1_js.publish(hive_status_subject(&h1_name), "h1 is fine".into()).await.unwrap().await.unwrap();
    h2_js.publish(hive_status_subject(&h2_name), "h2 is fine".into()).await.unwrap().await.unwrap();
    let h1_status = swarm.entry(HIVE_STATUS_BUCKET, "h1").await;
    assert!(h1_status.is_some());

    for rollup in ["all", "sub"] {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Rollup", rollup);
        let refused =
            h2_js.publish_with_headers(hive_status_subject(&h2_name), headers, "rolled up".into()).await.unwrap().await;
        assert!(refused.is_err(), "a rollup ({rollup}) was taken: {refused:?}");
    }
    assert_eq!(swarm.entry(HIVE_STATUS_BUCKET, "h1").await, h1_status, "h1's status is untouched");
    assert_eq!(swarm.entry(HIVE_STATUS_BUCKET, "h2").await.unwrap().0, b"h2 is fine", "and h2's own");
    // Every bucket the swarm makes refuses rollups, not only the one hives write.
    for bucket in hyperhive_nats_objects::BUCKETS {
        let config = swarm.js.get_stream(format!("KV_{bucket}")).await.unwrap().cached_info().config.clone();
        assert!(!config.allow_rollup, "{bucket} allows a rollup");
    }
}

/// Wanted state is the controller's to write: a hive reads and watches its own agents' keys, and
/// neither it nor an agent may write one, not even to undo a `destroyed` of its own.
#[tokio::test]
async fn neither_a_hive_nor_an_agent_writes_wanted_state_not_even_its_own() {
    let swarm = Swarm::start().await;
    let h1 = swarm.hive("h1", &["a"]).await;
    let a = swarm.agent("a").await;
    let h1_name = HiveName::parse("h1").unwrap();
    let wanted = swarm.bucket(AGENT_WANTED_BUCKET).await;
    wanted.put("h1.a", r#"{"state":"destroyed","set_at":"2026-11-30T12:00:00Z","set_by":"api"}"#.into()).await.unwrap();
    wanted.put("h1.b", r#"{"state":"up","set_at":"2026-11-30T12:00:00Z","set_by":"api"}"#.into()).await.unwrap();
    let key = format!("$KV.{AGENT_WANTED_BUCKET}.h1.a");
    let destroyed = swarm.entry(AGENT_WANTED_BUCKET, "h1.a").await;
    assert!(destroyed.is_some());
    let stream = format!("KV_{AGENT_WANTED_BUCKET}");
    let last_sequence =
        || async { swarm.js.get_stream(&stream).await.unwrap().info().await.unwrap().state.last_sequence };
    let written = last_sequence().await;
    let undo: &'static [u8] = br#"{"state":"up","set_at":"2026-11-30T12:00:01Z","set_by":"h1"}"#;
    let own_wanted = format!("$JS.API.DIRECT.GET.{stream}.{key}");
    let own_schedules = agent_schedule_direct_get_subject(&AgentName::parse("a").unwrap());

    // A direct publish to the key: refused to both (no JetStream ack), and a plain publish, after
    // which an answered request shows the server has handled it.
    for (client, own) in [(&h1, &own_wanted), (&a, &own_schedules)] {
        let js = jetstream::ContextBuilder::new().timeout(ANSWER).build(client.clone());
        let refused = js.publish(key.clone(), undo.into()).await.unwrap().await;
        assert!(refused.is_err(), "a tenant's publish to {key} was acked: {refused:?}");
        client.publish(key.clone(), undo.into()).await.unwrap();
        let answered = client.request(own.clone(), "".into()).await;
        assert!(answered.is_ok(), "{own} with the tenant's own reply is answered: {answered:?}");
    }

    // The hive's own subjects with the key as reply: its status publish ack, the direct get of
    // its own wanted key (an answer that would rewrite the key with its own value, at a new
    // revision) and of its status, and the API of its own consumers.
    let reply = key.as_str();
    attack(&h1, &hive_status_subject(&h1_name), reply, no_headers(), b"h1").await;
    attack(&h1, &own_wanted, reply, no_headers(), b"").await;
    attack(
        &h1,
        &format!("$JS.API.DIRECT.GET.KV_{HIVE_STATUS_BUCKET}.$KV.{HIVE_STATUS_BUCKET}.h1"),
        reply,
        no_headers(),
        b"",
    )
    .await;
    let durable = hive_durable_name(&h1_name);
    for consumer in hive_consumers(&h1_name) {
        consumer.ensure(&swarm.js).await.unwrap();
    }
    attack(&h1, &format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"), reply, no_headers(), b"").await;
    attack(&h1, &format!("$JS.API.CONSUMER.INFO.{DEPLOY_STREAM}.{durable}"), reply, no_headers(), b"").await;
    // A pull whose message would be delivered at the key, then one delivered to h1's own inbox,
    // whose ack asks for its confirmation at the key.
    let next = format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}");
    let pull = || bytes::Bytes::from_static(br#"{"batch":1,"no_wait":true}"#);
    let inbox = h1.new_inbox();
    let mut pulled = h1.subscribe(inbox.clone()).await.unwrap();
    h1.publish_with_reply(next.clone(), key.clone(), pull()).await.unwrap();
    h1.publish_with_reply(next, inbox, pull()).await.unwrap();
    let delivered = tokio::time::timeout(ANSWER, pulled.next()).await.unwrap().unwrap();
    assert!(delivered.subject.starts_with("$KV.agent-wanted.h1."), "{delivered:?}");
    let h1_js = jetstream::new(h1.clone());
    let unacked = || async {
        let mut consumer = h1_js
            .get_consumer_from_stream::<consumer::pull::Config, _, _>(durable.clone(), stream.clone())
            .await
            .unwrap();
        consumer.info().await.unwrap().num_ack_pending
    };
    let pending = unacked().await;
    assert!(pending > 0, "the pulled message awaits its ack");
    h1.publish_with_reply(delivered.reply.clone().unwrap(), key.clone(), "+ACK".into()).await.unwrap();
    hyperhive_testkit::wait_until("h1's ack handled", ANSWER, || async {
        (unacked().await == pending - 1).then_some(())
    })
    .await
    .unwrap();

    // The agent's own subjects with the key as reply: its todo publish ack, the direct get of its
    // schedules and its consumer's API.
    agent_consumer(&agent_named("a")).ensure(&swarm.js).await.unwrap();
    attack(&a, "todo.a", reply, no_headers(), b"x").await;
    attack(&a, &own_schedules, reply, no_headers(), b"").await;
    attack(&a, "$JS.API.CONSUMER.INFO.TODO.agent-a", reply, no_headers(), b"").await;

    assert_eq!(swarm.entry(AGENT_WANTED_BUCKET, "h1.a").await, destroyed, "h1.a is still destroyed, same revision");
    assert_eq!(last_sequence().await, written, "nothing was written to agent-wanted at all");
}

#[tokio::test]
async fn an_agent_writes_only_its_own_turn_history_and_hears_only_its_own_cancel_requests() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let a_js = jetstream::new(a.clone());
    a_js.publish("turns.a", "a's record".into()).await.unwrap().await.unwrap();
    let other = a_js.publish("turns.b", "a forged record of b".into()).await.unwrap().await;
    assert!(other.is_err(), "a wrote into b's history: {other:?}");
    attack(&a, "turns.a", "turns.b", no_headers(), b"x").await;
    assert_eq!(swarm.held(TURNS_STREAM, "turns.b").await, 0, "b's history is untouched");
    assert_eq!(
        swarm.held(TURNS_STREAM, "turns.a").await,
        3,
        "a's own records (one, and the attack's two) landed in its own history"
    );

    // Cancel requests come from the controller only, and each agent hears only its own.
    let mut own = a.subscribe("cancel.a").await.unwrap();
    let mut others = a.subscribe("cancel.b").await.unwrap();
    a.flush().await.unwrap();
    let forged = a.publish("cancel.a", "{\"todo_id\":\"forged\"}".into()).await;
    a.flush().await.unwrap();
    let controller =
        swarm_controller::nats::connect(&swarm.nats.url(), Some(&swarm.nats.controller_creds())).await.unwrap();
    // The subscription interest crosses accounts: the controller's publishes reach a once it is
    // in place.
    let heard = wait_until_heard(&controller, &mut own).await;
    assert_eq!(heard, "{\"todo_id\":\"t\"}", "the controller's request, not the forged one ({forged:?})");
    controller.publish("cancel.b", "{\"todo_id\":\"t\"}".into()).await.unwrap();
    controller.flush().await.unwrap();
    let leaked = tokio::time::timeout(ANSWER, others.next()).await;
    assert!(!matches!(leaked, Ok(Some(_))), "a heard b's cancel request: {leaked:?}");
}

/// Neither an agent nor a hive writes the audit log or reads it: the stream is the swarm
/// account's and is exported to no tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tenant_writes_or_reads_the_audit_log() {
    let swarm = Swarm::start().await;
    for (who, tenant) in [("agent a", swarm.agent("a").await), ("hive h1", swarm.hive("h1", &["a"]).await)] {
        // Acked: a stream that took the entry would answer; none in reach does.
        let js = jetstream::ContextBuilder::new().timeout(Duration::from_secs(1)).build(tenant.clone());
        let forged = js.publish(AUDIT_SUBJECT, r#"{"who":"root"}"#.into()).await.unwrap().await;
        assert!(forged.is_err(), "{who} wrote an audit entry: {forged:?}");
        let read = js.get_stream(AUDIT_STREAM).await;
        assert!(read.is_err(), "{who} reached the audit stream");
    }
    assert_eq!(swarm.held(AUDIT_STREAM, AUDIT_SUBJECT).await, 0, "nothing landed in the log");
}

/// Publishes the controller's cancel request for `a` until `subscription` hears one.
async fn wait_until_heard(controller: &Client, subscription: &mut async_nats::Subscriber) -> String {
    for _ in 0..50 {
        controller.publish("cancel.a", "{\"todo_id\":\"t\"}".into()).await.unwrap();
        controller.flush().await.unwrap();
        if let Ok(Some(message)) = tokio::time::timeout(Duration::from_millis(200), subscription.next()).await {
            return String::from_utf8_lossy(&message.payload).into_owned();
        }
    }
    panic!("a never heard its own cancel request");
}

/// The requests that would remake `consumer` from a tenant's connection: delete it, update it
/// to delete itself once idle, and make it a push consumer delivering into the swarm account (on
/// `forged.<durable>`), through both create APIs. Sent at once; each result is returned with the
/// subject it was sent to.
async fn remake(tenant: &Client, consumer: &DurableConsumer) -> Vec<(String, Result<async_nats::Message, String>)> {
    use async_nats::jetstream::consumer::IntoConsumerConfig;
    let (stream, durable) = (consumer.stream.as_str(), consumer.durable());
    let filter = consumer.config.filter_subject.as_str();
    let fixed = consumer.config.clone().into_consumer_config();
    let idle = consumer::Config { inactive_threshold: Duration::from_millis(1), ..fixed.clone() };
    let push = consumer::Config { deliver_subject: Some(format!("forged.{durable}")), max_waiting: 0, ..fixed };
    let request = |config: &consumer::Config| {
        serde_json::to_vec(&serde_json::json!({"stream_name": stream, "config": config})).unwrap()
    };
    let attempts = [
        (format!("$JS.API.CONSUMER.DELETE.{stream}.{durable}"), Vec::new()),
        (format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}.{filter}"), request(&idle)),
        (format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}.{filter}"), request(&push)),
        (format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}"), request(&push)),
        (format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}"), request(&push)),
    ];
    let sent = attempts.into_iter().map(|(subject, payload)| async move {
        let answer = tenant.request(subject.clone(), payload.into()).await.map_err(|e| e.to_string());
        (subject, answer)
    });
    futures::future::join_all(sent).await
}

/// Asserts that none of `attempts` was answered: refused before JetStream saw it.
fn all_refused(who: &str, attempts: &[(String, Result<async_nats::Message, String>)]) {
    for (subject, answer) in attempts {
        let answered = answer.as_ref().map(|m| String::from_utf8_lossy(&m.payload).into_owned());
        assert!(answered.is_err(), "{who}'s request on {subject} was answered: {answered:?}");
    }
}

/// A tenant able to create its own consumer could delete it (by an idle threshold) and make it
/// again as a push consumer delivering into the swarm account: a subscriber there received its
/// forged messages, headers included, and its queue was broken for good. The controller makes
/// every tenant consumer; an agent's and a hive's credential can neither make, change nor delete
/// theirs, before it exists or after, and their queues keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tenant_can_delete_or_remake_its_consumer_as_a_push_consumer() {
    let swarm = Swarm::start().await;
    let a = swarm.agent("a").await;
    let h1 = swarm.hive("h1", &["a"]).await;
    let h1_name = HiveName::parse("h1").unwrap();
    let mut forged = swarm.js.client().subscribe("forged.>").await.unwrap();
    swarm.js.client().flush().await.unwrap();
    let [wanted, deploy] = hive_consumers(&h1_name);
    let targets =
        [(&a, "agent a", agent_consumer(&agent_named("a"))), (&h1, "hive h1", wanted), (&h1, "hive h1", deploy)];

    for (tenant, who, consumer) in &targets {
        let stream = swarm.js.get_stream_no_info(&consumer.stream).await.unwrap();
        // Before the controller made it: the tenant cannot make it, in any shape.
        all_refused(who, &remake(tenant, consumer).await);
        let absent = stream.consumer_info(consumer.durable()).await;
        assert!(absent.is_err(), "{who} made {}: {absent:?}", consumer.durable());

        // Made by the controller: the tenant can neither delete nor change it.
        assert_eq!(consumer.ensure(&swarm.js).await.unwrap(), Ensured::Created);
        let made = stream.consumer_info(consumer.durable()).await.unwrap();
        all_refused(who, &remake(tenant, consumer).await);
        let now = stream.consumer_info(consumer.durable()).await.expect("the consumer is still there");
        assert!(consumer.matches(&now.config), "{who} changed {}: {:?}", consumer.durable(), now.config);
        assert_eq!((now.created, now.config.deliver_subject.clone()), (made.created, None), "the same pull consumer");
    }

    // Each queue still works through the tenant's own binding.
    swarm.js.publish("todo.a", "a's work".into()).await.unwrap().await.unwrap();
    swarm.bucket(AGENT_WANTED_BUCKET).await.put("h1.a", "up".into()).await.unwrap();
    swarm.js.publish(deploy_subject(&h1_name), "sealed spec".into()).await.unwrap().await.unwrap();
    for ((tenant, who, consumer), expected) in targets.iter().zip(["a's work", "up", "sealed spec"]) {
        let bound = consumer.bind(&jetstream::new((*tenant).clone())).await.unwrap();
        let mut messages = bound.fetch().max_messages(1).messages().await.unwrap();
        let message = messages.next().await.expect("a message").unwrap();
        assert_eq!(&message.payload[..], expected.as_bytes(), "{who} reads {}", consumer.durable());
        message.double_ack().await.unwrap();
    }
    assert!(
        futures::FutureExt::now_or_never(forged.next()).is_none(),
        "something was delivered into the swarm account"
    );
}

/// One tenant cannot reach another's consumer in any way: not inspect, pull, make or delete it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_consumer_is_out_of_reach() {
    let swarm = Swarm::start().await;
    let b = swarm.agent("b").await;
    let h2 = swarm.hive("h2", &["b"]).await;
    let h1_name = HiveName::parse("h1").unwrap();
    let mut victims = vec![agent_consumer(&agent_named("a"))];
    victims.extend(hive_consumers(&h1_name));
    for victim in &victims {
        victim.ensure(&swarm.js).await.unwrap();
    }
    // Every attempt at once: each refused one takes the whole answer timeout.
    let attackers = [(&b, "agent b"), (&h2, "hive h2")];
    let tries = attackers.iter().flat_map(|&(attacker, who)| victims.iter().map(move |victim| (attacker, who, victim)));
    let results = futures::future::join_all(tries.map(|(attacker, who, victim)| async move {
        let (stream, durable) = (victim.stream.as_str(), victim.durable());
        let read = [
            format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
        ]
        .map(|subject| async move {
            let answer = attacker.request(subject.clone(), "".into()).await.map_err(|e| e.to_string());
            (subject, answer)
        });
        let (mut attempts, read) = futures::join!(remake(attacker, victim), futures::future::join_all(read));
        attempts.extend(read);
        (who, attempts)
    }))
    .await;
    for (who, attempts) in &results {
        all_refused(who, attempts);
    }
    for victim in &victims {
        let stream = swarm.js.get_stream_no_info(&victim.stream).await.unwrap();
        let info = stream.consumer_info(victim.durable()).await.unwrap();
        assert!(victim.matches(&info.config), "{} was changed", victim.durable());
    }
}

/// The controller makes the consumer of every tenant it knows (the hive directory's hives, the
/// agents and hives minted in its NATS directory), adopts one a tenant made under an older build
/// with the right configuration, and replaces one remade as a push consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_makes_every_known_tenants_consumer_and_replaces_a_remade_one() {
    use swarm_controller::lifecycle::roster::Roster;
    use swarm_controller::lifecycle::tenant_consumers::{PassReport, TenantConsumers};
    let swarm = Swarm::start().await;
    swarm.nats.mint_agent("a").await.unwrap();
    swarm.nats.mint_hive("h1", &["a"]).await.unwrap();
    let (h1, h2) = (HiveName::parse("h1").unwrap(), HiveName::parse("h2").unwrap());
    let entry = hyperhive_hive_proto::directory::HiveEntry {
        description: String::new(),
        labels: Default::default(),
        xkey: None,
    };
    let consumers = TenantConsumers {
        js: swarm.js.clone(),
        hives: std::sync::Arc::new([(h2.clone(), entry)].into_iter().collect()),
        roster: Roster::new(swarm.js.clone(), swarm.bucket(hyperhive_nats_objects::AGENTS_BUCKET).await),
        nats_dir: Some(swarm.nats.creds_dir().to_path_buf()),
    };
    // An older build's tenants made their own: h1's deploy consumer as hive-c0re made it (the
    // right configuration), and agent a's remade as a push consumer.
    let deploy = hyperhive_nats_objects::hive_deploy_consumer(&h1);
    let old_deploy = consumer::pull::Config {
        durable_name: Some(deploy.durable().to_owned()),
        filter_subject: deploy_subject(&h1),
        ack_policy: consumer::AckPolicy::Explicit,
        ..Default::default()
    };
    let deploys = swarm.js.get_stream_no_info(DEPLOY_STREAM).await.unwrap();
    let adopted = deploys.create_consumer(old_deploy).await.unwrap().cached_info().created;
    let todo = swarm.js.get_stream_no_info(TODO_STREAM).await.unwrap();
    let push = consumer::push::Config {
        durable_name: Some("agent-a".into()),
        filter_subject: "todo.a".into(),
        deliver_subject: "forged.agent-a".into(),
        ..Default::default()
    };
    todo.create_consumer(push).await.unwrap();

    let report = consumers.pass().await;
    // Made: h1's wanted-state consumer, h2's two. Replaced: a's. Kept: h1's deploy consumer.
    assert_eq!(report, PassReport { created: 3, replaced: 1, failed: 0 });
    let all = [agent_consumer(&agent_named("a"))].into_iter().chain(hive_consumers(&h1)).chain(hive_consumers(&h2));
    for wanted in all {
        let stream = swarm.js.get_stream_no_info(&wanted.stream).await.unwrap();
        let info = stream.consumer_info(wanted.durable()).await.unwrap();
        assert!(wanted.matches(&info.config), "{} on {}: {:?}", wanted.durable(), wanted.stream, info.config);
    }
    assert_eq!(deploys.consumer_info(deploy.durable()).await.unwrap().created, adopted, "adopted, not made again");
    assert_eq!(consumers.pass().await, PassReport::default(), "a second pass changes nothing");
}

/// A pass over a swarm whose consumers are all as configured reads each stream's consumers a page
/// at a time: far fewer requests than one per tenant, which an idle swarm would pay every pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_with_nothing_to_change_reads_consumers_a_page_at_a_time() {
    use hyperhive_hive_proto::roster::{Origin, RosterEntry};
    use swarm_controller::lifecycle::roster::Roster;
    use swarm_controller::lifecycle::tenant_consumers::{PassReport, TenantConsumers};
    const AGENTS: usize = 600;
    let swarm = Swarm::start().await;
    // Its own connection, so its messages can be counted.
    let client =
        swarm_controller::nats::connect(&swarm.nats.url(), Some(&swarm.nats.controller_creds())).await.unwrap();
    let js = jetstream::new(client.clone());
    let roster = Roster::new(js.clone(), swarm.bucket(hyperhive_nats_objects::AGENTS_BUCKET).await);
    let hive = HiveName::parse("h1").unwrap();
    for i in 0..AGENTS {
        let entry = RosterEntry {
            hive: hive.clone(),
            origin: Origin::Declared,
            created_at: "2026-12-01T00:00:00Z".into(),
            provisioning: Default::default(),
            identities: Default::default(),
            spec: None,
            revision: 0,
            labels: Default::default(),
        };
        assert!(roster.create(&agent_named(&format!("a{i:03}")), &entry).await.unwrap());
    }
    let consumers = TenantConsumers { js, hives: Default::default(), roster, nats_dir: None };
    assert_eq!(consumers.pass().await, PassReport { created: AGENTS, replaced: 0, failed: 0 });

    let before = client.statistics().out_messages.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(consumers.pass().await, PassReport::default(), "nothing to change");
    let sent = client.statistics().out_messages.load(std::sync::atomic::Ordering::Relaxed) - before;
    // The roster's listing, then three pages of TODO's consumers: a few dozen messages, where
    // asking after each consumer took one request each.
    assert!(sent < 60, "{sent} messages sent for a pass over {AGENTS} unchanged consumers");

    // One consumer deleted behind the pass's back is made again; the rest are still kept.
    let todo = swarm.js.get_stream_no_info(TODO_STREAM).await.unwrap();
    todo.delete_consumer(agent_consumer(&agent_named("a300")).durable()).await.unwrap();
    assert_eq!(consumers.pass().await, PassReport { created: 1, replaced: 0, failed: 0 });
}
