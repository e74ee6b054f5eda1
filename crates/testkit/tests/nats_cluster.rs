//! `NatsJwt::start_cluster`: three JWT-mode nodes, one R3 stream that survives a node and stops
//! taking writes without a quorum, nodes that rejoin and catch up, and accounts minted after the
//! start that reach every node.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use hyperhive_nats_creds::AgentName;
use hyperhive_testkit::{NatsJwt, wait_until};

const STREAM: &str = "CLUSTER";
/// How long a publish may wait for its ack before it counts as refused (the context's timeout
/// bounds the ack; API requests are bounded by the client's request timeout).
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// What an election (or a rejoin) may take before the test fails.
const ELECTION_BUDGET: Duration = Duration::from_secs(30);
/// A request that must end (with an answer or an error) rather than hang: longer than the
/// client's request timeout (10 s), which bounds JetStream API requests.
const NO_HANG: Duration = Duration::from_secs(20);

fn context(client: async_nats::Client) -> jetstream::Context {
    jetstream::ContextBuilder::new().timeout(ACK_TIMEOUT).build(client)
}

/// Publishes `body` on `cluster.<body>` with `body` as its message id: a retry after a lost ack
/// is acknowledged with the first one's sequence instead of being stored twice.
async fn publish(js: &jetstream::Context, body: &str) -> anyhow::Result<u64> {
    let message = jetstream::message::PublishMessage::build().payload(body.to_owned().into()).message_id(body);
    let ack = js.send_publish(format!("cluster.{body}"), message).await?.await?;
    Ok(ack.sequence)
}

/// Publishes until one is acknowledged (each attempt bounded by the ack timeout).
async fn publish_until_acked(what: &str, js: &jetstream::Context, body: &str) -> u64 {
    wait_until(what, ELECTION_BUDGET, || async { publish(js, body).await.ok() }).await.expect(what)
}

#[tokio::test]
async fn a_single_server_is_a_cluster_of_one_node() {
    let nats = NatsJwt::start().await.expect("start nats");
    assert_eq!(nats.node_count(), 1);
    assert_eq!(nats.url(), nats.node_url(0));
    assert!(!nats.url().contains(','));
    assert!(nats.node_running(0));
    let client = nats.controller_client().await.expect("connect");
    assert_eq!(nats.connected_node(&client), Some(0));
    assert_eq!(nats.node_of_server_name("n1"), None);
}

#[tokio::test]
async fn accounts_minted_after_the_start_reach_every_node() {
    let started = Instant::now();
    let mut nats = NatsJwt::start_cluster(3).await.expect("start the cluster");
    eprintln!("a 3-node cluster answered JetStream after {:?}", started.elapsed());
    assert_eq!(nats.node_count(), 3);
    assert_eq!(nats.url().split(',').collect::<Vec<_>>(), nats.urls());
    assert_eq!(nats.node_of_server_name("n2"), Some(2));
    assert_eq!(nats.node_of_server_name("n3"), None);
    assert_eq!(nats.node_of_server_name("x1"), None);
    // async-nats takes one URL per string: the comma-separated list is for configs and tools.
    let options = async_nats::ConnectOptions::with_credentials_file(nats.controller_creds()).await.unwrap();
    assert!(options.connect(nats.url()).await.is_err(), "async-nats now parses a list of URLs");

    let agent = "late-agent";
    let name = AgentName::parse(agent).unwrap();
    let creds = nats.mint_agent(agent).await.expect("mint");
    for i in 0..3 {
        let client = async_nats::ConnectOptions::with_credentials_file(creds.clone())
            .await
            .unwrap()
            .custom_inbox_prefix(hyperhive_nats_objects::agent_inbox_prefix(&name))
            .ignore_discovered_servers()
            .connect(nats.node_url(i))
            .await
            .unwrap_or_else(|e| panic!("node {i} refused the agent minted after the start: {e}"));
        client.flush().await.unwrap();
        assert_eq!(nats.connected_node(&client), Some(i));
    }
    let client = nats.agent_client(agent).await.expect("the agent through the list");
    assert!(nats.connected_node(&client).is_some());

    // A node down while an account is added learns it when it starts again.
    nats.stop_node(2);
    assert!(!nats.node_running(2));
    let other = "while-n2-was-down";
    let other_creds = nats.mint_agent(other).await.expect("mint with a node down");
    nats.start_node_again(2).await.expect("start n2 again");
    assert!(nats.node_running(2));
    let client = async_nats::ConnectOptions::with_credentials_file(other_creds)
        .await
        .unwrap()
        .custom_inbox_prefix(hyperhive_nats_objects::agent_inbox_prefix(&AgentName::parse(other).unwrap()))
        .ignore_discovered_servers()
        .connect(nats.node_url(2))
        .await
        .expect("the restarted node knows the account added while it was down");
    client.flush().await.unwrap();
}

#[tokio::test]
async fn an_r3_stream_survives_one_node_refuses_writes_without_quorum_and_catches_up() {
    let mut nats = NatsJwt::start_cluster(3).await.expect("start the cluster");
    let js = context(nats.controller_client().await.expect("connect"));
    js.create_stream(stream::Config {
        name: STREAM.into(),
        subjects: vec!["cluster.>".into()],
        num_replicas: 3,
        max_bytes: 1024 * 1024,
        allow_direct: true,
        ..Default::default()
    })
    .await
    .expect("create the R3 stream");
    assert_eq!(publish(&js, "one").await.expect("publish"), 1);

    // The leader dies: after one election a publish is acknowledged again.
    let leader = nats.stream_leader(&js, STREAM).await.expect("a leader");
    nats.stop_node(leader);
    let killed = Instant::now();
    assert_eq!(publish_until_acked("a publish after the leader died", &js, "two").await, 2);
    eprintln!("a publish was acknowledged {:?} after the stream leader (n{leader}) was killed", killed.elapsed());
    let second = nats.stream_leader(&js, STREAM).await.expect("a new leader");
    assert_ne!(second, leader);

    // A second node dies: one of three is no quorum. Asked through the survivor alone.
    nats.stop_node(second);
    let survivor = (0..3).find(|&i| i != leader && i != second).unwrap();
    let alone = context(nats.controller_client_at(survivor).await.expect("connect to the survivor"));
    let lost = Instant::now();
    let write = tokio::time::timeout(NO_HANG, publish(&alone, "three")).await.expect("the publish ends");
    eprintln!("without quorum a publish ended after {:?}: {write:?}", lost.elapsed());
    // Refused at once, not timed out: only a stream's leader listens on its subjects, so with no
    // leader the publish has no responders, which async-nats reports as "no stream found".
    assert!(write.is_err(), "a publish without quorum was acknowledged: {write:?}");
    let asked = Instant::now();
    let info = tokio::time::timeout(NO_HANG, async { alone.get_stream(STREAM).await.map(|s| s.cached_info().clone()) })
        .await
        .expect("stream info ends");
    eprintln!("without quorum stream info ended after {:?}: {:?}", asked.elapsed(), info.as_ref().map(|i| &i.state));
    // No answer at all: the request times out (the client's request timeout, 10 s).
    assert!(info.is_err(), "stream info answered without quorum");
    let asked = Instant::now();
    let direct = tokio::time::timeout(NO_HANG, async {
        let stream = alone.get_stream_no_info(STREAM).await?;
        anyhow::Ok(stream.direct_get(1).await?)
    })
    .await
    .expect("the direct get ends");
    eprintln!(
        "without quorum a direct get of message 1 ended after {:?}: {:?}",
        asked.elapsed(),
        direct.as_ref().map(|m| m.payload.clone())
    );
    let raw = tokio::time::timeout(NO_HANG, async {
        let stream = alone.get_stream_no_info(STREAM).await?;
        anyhow::Ok(stream.get_raw_message(1).await?)
    })
    .await
    .expect("the message get ends");
    eprintln!("without quorum a (leader's) message get ended: {:?}", raw.as_ref().map(|m| m.sequence));
    // The leader's message get is refused at once (503, "JetStream system temporarily
    // unavailable"); a direct get (allow_direct) is served by the surviving replica: reads of
    // what was written go on without a quorum, possibly stale.
    assert!(raw.is_err(), "the leader's message get answered without quorum");
    assert_eq!(direct.expect("a follower serves direct gets without quorum").payload.as_ref(), b"one");

    // Both come back: writes resume with no manual step, and every replica catches up.
    nats.start_node_again(leader).await.expect("start the first leader again");
    nats.start_node_again(second).await.expect("start the second leader again");
    assert!((0..3).all(|i| nats.node_running(i)));
    let back = Instant::now();
    let seq = publish_until_acked("a publish after both nodes came back", &js, "four").await;
    eprintln!("a publish was acknowledged {:?} after both nodes were back (seq {seq})", back.elapsed());
    assert_eq!(seq, 3, "the refused publish was not stored");
    let info = wait_until("every replica to be current", ELECTION_BUDGET, || async {
        let info = js.get_stream(STREAM).await.ok()?.cached_info().clone();
        let cluster = info.cluster.as_ref()?;
        let caught_up = cluster.leader.is_some()
            && cluster.replicas.len() == 2
            && cluster.replicas.iter().all(|r| r.current && !r.offline && r.lag.unwrap_or(0) == 0);
        caught_up.then_some(info)
    })
    .await
    .expect("replicas catch up");
    assert_eq!(info.state.messages, 3);
    for i in 0..3 {
        let client = context(nats.controller_client_at(i).await.expect("connect to a node"));
        assert!(nats.stream_leader(&client, STREAM).await.is_some());
        let last = client.get_stream_no_info(STREAM).await.unwrap().direct_get_last_for_subject("cluster.four").await;
        assert_eq!(last.expect("the last message through every node").payload.as_ref(), b"four");
    }
}
