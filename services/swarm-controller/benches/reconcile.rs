//! Benchmark of scheduled prompts, against real nats-servers in JWT mode from the test kit, run
//! twice in one process: first on one server with every stream and bucket at one replica (R1,
//! `hyperhive_nats_objects::ensure_objects`), then on a three-node JetStream cluster with every stream and bucket
//! replicated three times (R3, `hyperhive_nats_objects::ensure_replicated_objects(&js, 3)`), every client given the
//! list of all nodes. Each run measures:
//!
//! 1. reconcile of 10,000 agents and 2,000 schedules (1 to 20 agents each): the first pass
//!    (writes every key: the baseline), a pass with nothing changed (must write nothing), and one
//!    edited schedule (must write only its agents' keys), both through the pass and through the
//!    per-change path the API uses;
//! 2. 1,000 agents, each on its own connection, reading its key by direct get every 10 s (random
//!    phase): p50 and p99 latency, first as users of the swarm account (the single-account
//!    baseline), then each from its own account through its imports (as agents do), against a
//!    baseline of sequential gets on one connection, all measured in the same run. On the cluster
//!    it also says which node each connection landed on and which node leads the buckets.
//!
//! A final table sets the two runs side by side with the ratio R3/R1.
//!
//! `cargo bench -p swarm-controller --bench reconcile [-- --rounds N] [--only-r1 | --only-r3]`
//! (N polling rounds of 10 s, default 3; both runs unless one is named). Needs `scripts/setup`.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;
use hyperhive_nats_objects::AGENT_SCHEDULES_BUCKET;
use hyperhive_schedule::AgentName;
use hyperhive_testkit::NatsJwt;
use rand::{Rng, SeedableRng};
use swarm_controller::definition::{DefinitionRules, NewSchedule, ScheduleDefinition, Timing};
use swarm_controller::nats;
use swarm_controller::schedules::reconcile::Reconciler;
use swarm_controller::schedules::store::{Definitions, new_id};
use time::OffsetDateTime;

const AGENTS: usize = 10_000;
const SCHEDULES: usize = 2_000;
const POLLING_AGENTS: usize = 1_000;
const CADENCE: Duration = Duration::from_secs(10);
/// Nodes of the cluster of the second run (and the replicas of its streams and buckets).
const CLUSTER_NODES: usize = 3;

fn agent_name(i: usize) -> AgentName {
    AgentName::parse(&format!("agent-{i:05}")).expect("a valid name")
}

/// 2,000 schedules of 1 to 20 agents, laid out consecutively (wrapping) so all 10,000 agents
/// are named; a fixed seed makes runs comparable.
fn schedules(now: OffsetDateTime) -> Vec<ScheduleDefinition> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut next_agent = 0;
    (0..SCHEDULES)
        .map(|i| {
            let count = rng.random_range(1..=20);
            let agents = (0..count).map(|j| agent_name((next_agent + j) % AGENTS)).collect();
            next_agent += count;
            let new = NewSchedule {
                name: format!("schedule {i}"),
                agents,
                body: format!("prompt {i}: {}", "x".repeat(200)),
                anchor: now,
                timing: Timing { interval: Some(1800), calendar: None, tz: None },
                paused: false,
                allow_unknown_agents: true,
            };
            ScheduleDefinition::create(new_id(), new, now)
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// p50 and p99 of a set of latencies.
#[derive(Debug, Clone, Copy)]
struct Latencies {
    p50: Duration,
    p99: Duration,
}

impl Latencies {
    fn of(sorted: &[Duration]) -> Self {
        Self { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }
    }
}

/// What one run measured, for the final comparison.
#[derive(Debug)]
struct Figures {
    stored: Duration,
    first: Duration,
    noop: Duration,
    per_change: Duration,
    pass_after_edit: Duration,
    sequential: Latencies,
    single_account: Latencies,
    minting: Duration,
    own_account: Latencies,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rounds: u32 = match args.iter().skip_while(|a| *a != "--rounds").nth(1) {
        Some(n) => n.parse()?,
        None => 3,
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    let (only_r1, only_r3) = (flag("--only-r1"), flag("--only-r3"));
    anyhow::ensure!(!(only_r1 && only_r3), "--only-r1 and --only-r3 exclude each other");

    let mut r1 = None;
    if !only_r3 {
        println!("## R1: one server, every stream and bucket with one replica");
        println!();
        let server = NatsJwt::start().await?;
        r1 = Some(measure(&server, 1, rounds).await?);
        // Stopped before the cluster starts, so the two runs never compete for the machine.
        drop(server);
    }
    let mut r3 = None;
    if !only_r1 {
        if r1.is_some() {
            println!();
        }
        println!(
            "## R{CLUSTER_NODES}: {CLUSTER_NODES}-node cluster, every stream and bucket with {CLUSTER_NODES} replicas"
        );
        println!();
        let started = Instant::now();
        let cluster = NatsJwt::start_cluster(CLUSTER_NODES).await?;
        println!("cluster started (meta leader counts every node current): {}", ms(started.elapsed()));
        r3 = Some(measure(&cluster, CLUSTER_NODES, rounds).await?);
        drop(cluster);
    }
    if let (Some(r1), Some(r3)) = (&r1, &r3) {
        println!();
        compare(r1, r3);
    }
    Ok(())
}

/// Both measurements against `server` (one server or a cluster), every stream and bucket with
/// `replicas` copies; prints as it goes and returns the figures.
async fn measure(server: &NatsJwt, replicas: usize, rounds: u32) -> anyhow::Result<Figures> {
    let client = nats::connect(&server.url(), Some(&server.controller_creds())).await?;
    let controller_node = server.connected_node(&client);
    let js = jetstream::new(client);
    let buckets = hyperhive_nats_objects::ensure_replicated_objects(&js, replicas).await?;
    if server.node_count() > 1 {
        let mut leaders = Vec::new();
        for stream in [&buckets.definitions.stream_name, &buckets.agent_schedules.stream_name] {
            let node = server.stream_leader(&js, stream).await;
            leaders.push(format!("{stream} led by {}", node_label(server, node)));
        }
        println!("controller connected to {}; {}", node_label(server, controller_node), leaders.join("; "));
    }
    let definitions = Definitions::new(js.clone(), buckets.definitions);
    let reconciler = Reconciler::new(js.clone(), definitions.clone(), buckets.agent_schedules);

    let now = hyperhive_schedule::whole_seconds_utc(OffsetDateTime::now_utc());
    let all = schedules(now);
    let started = Instant::now();
    let mut creates = futures::stream::iter(&all).map(|d| definitions.create(d)).buffer_unordered(64);
    while let Some(result) = creates.next().await {
        result?;
    }
    let stored = started.elapsed();
    println!("# reconcile (R{replicas}): {AGENTS} agents, {SCHEDULES} schedules (1 to 20 agents each)");
    println!("stored {SCHEDULES} definitions in {}", ms(stored));

    let first = reconciler.pass().await?;
    println!(
        "first pass (baseline, every key new): {}  compared {}  written {}  removed {}",
        ms(first.elapsed),
        first.compared,
        first.written,
        first.removed
    );
    let noop = reconciler.pass().await?;
    println!(
        "no-op pass: {}  compared {}  written {}  removed {}  ({:.2}x the first pass)",
        ms(noop.elapsed),
        noop.compared,
        noop.written,
        noop.removed,
        noop.elapsed.as_secs_f64() / first.elapsed.as_secs_f64()
    );

    let edited = all.iter().max_by_key(|d| d.agents.len()).expect("schedules");
    let current = definitions.get(&edited.id).await?.expect("stored");
    let mut changed = current.definition.clone();
    changed.body.push_str(" (edited)");
    let revision = definitions.update(&changed, current.revision).await?;
    let per_change = reconciler.schedule_changed(&edited.id).await?;
    println!(
        "one schedule edited ({} agents), per-change path: {}  written {}",
        edited.agents.len(),
        ms(per_change.elapsed),
        per_change.written
    );
    changed.body.push_str(" again");
    definitions.update(&changed, revision).await?;
    let pass_after_edit = reconciler.pass().await?;
    println!(
        "one schedule edited ({} agents), reconcile pass: {}  written {}  removed {}",
        edited.agents.len(),
        ms(pass_after_edit.elapsed),
        pass_after_edit.written,
        pass_after_edit.removed
    );

    println!();
    println!(
        "# direct gets (R{replicas}): {POLLING_AGENTS} agents, one connection each, every {CADENCE:?}, {rounds} rounds"
    );
    let baseline = sequential_gets(&js, POLLING_AGENTS).await?;
    println!(
        "baseline, sequential on one connection: p50 {}  p99 {}  ({} gets)",
        ms(percentile(&baseline, 0.5)),
        ms(percentile(&baseline, 0.99)),
        baseline.len()
    );
    let agents: Vec<AgentName> = (0..POLLING_AGENTS).map(agent_name).collect();

    // The same polling, first as users of the swarm account itself (the data path when agents
    // shared the account holding the bucket), then each agent from its own account through its
    // imports (the path every agent takes now). Every connection is given every node.
    let mut shared = Vec::with_capacity(POLLING_AGENTS);
    for agent in &agents {
        shared.push((agent.clone(), server.controller_client().await?));
    }
    print_spread(server, "single-account connections", shared.iter().map(|(_, c)| c));
    let shared = shared.into_iter().map(|(agent, client)| (agent, jetstream::new(client))).collect();
    let single_account = poll_at_cadence(shared, rounds).await?;
    report("single account (baseline)", &single_account, &baseline, None);

    let minting = Instant::now();
    let creds = server.mint_agents(&agents).await?;
    let minting = minting.elapsed();
    let reloads = if server.node_count() > 1 { "one reload of every node" } else { "one server reload" };
    println!("minted {POLLING_AGENTS} agent accounts and credentials, {reloads}: {}", ms(minting));
    let mut own = Vec::with_capacity(POLLING_AGENTS);
    for (agent, creds) in agents.iter().zip(creds) {
        let client = async_nats::ConnectOptions::with_credentials_file(&creds)
            .await?
            .custom_inbox_prefix(format!("_INBOX_{agent}"))
            .connect(server.urls())
            .await?;
        own.push((agent.clone(), client));
    }
    print_spread(server, "own-account connections", own.iter().map(|(_, c)| c));
    let own = own.into_iter().map(|(agent, client)| (agent, jetstream::new(client))).collect();
    let per_agent = poll_at_cadence(own, rounds).await?;
    report("own account per agent", &per_agent, &baseline, Some(&single_account));

    Ok(Figures {
        stored,
        first: first.elapsed,
        noop: noop.elapsed,
        per_change: per_change.elapsed,
        pass_after_edit: pass_after_edit.elapsed,
        sequential: Latencies::of(&baseline),
        single_account: Latencies::of(&single_account),
        minting,
        own_account: Latencies::of(&per_agent),
    })
}

/// `n1`, or `unknown` when the node could not be told.
fn node_label(server: &NatsJwt, node: Option<usize>) -> String {
    node.map_or_else(|| "unknown".to_owned(), |i| server.node_name(i))
}

/// How many of `clients` are connected to each node (on a cluster only).
fn print_spread<'a>(server: &NatsJwt, what: &str, clients: impl Iterator<Item = &'a async_nats::Client>) {
    if server.node_count() < 2 {
        return;
    }
    let mut counts = vec![0usize; server.node_count()];
    let mut unknown = 0;
    for client in clients {
        match server.connected_node(client) {
            Some(i) => counts[i] += 1,
            None => unknown += 1,
        }
    }
    let mut spread: Vec<String> =
        counts.iter().enumerate().map(|(i, n)| format!("{} {n}", server.node_name(i))).collect();
    if unknown > 0 {
        spread.push(format!("unknown {unknown}"));
    }
    println!("{what} by node: {}", spread.join(", "));
}

/// The two runs side by side, with the ratio R3/R1 of each figure.
fn compare(r1: &Figures, r3: &Figures) {
    let rows: [(&str, Duration, Duration); 12] = [
        ("stored definitions", r1.stored, r3.stored),
        ("first pass", r1.first, r3.first),
        ("no-op pass", r1.noop, r3.noop),
        ("one edited schedule, per-change path", r1.per_change, r3.per_change),
        ("one edited schedule, reconcile pass", r1.pass_after_edit, r3.pass_after_edit),
        ("direct get, sequential p50", r1.sequential.p50, r3.sequential.p50),
        ("direct get, sequential p99", r1.sequential.p99, r3.sequential.p99),
        ("direct get, single account p50", r1.single_account.p50, r3.single_account.p50),
        ("direct get, single account p99", r1.single_account.p99, r3.single_account.p99),
        ("minting the agents' accounts", r1.minting, r3.minting),
        ("direct get, own account p50", r1.own_account.p50, r3.own_account.p50),
        ("direct get, own account p99", r1.own_account.p99, r3.own_account.p99),
    ];
    println!("# R{CLUSTER_NODES} ({CLUSTER_NODES}-node cluster) against R1 (one server)");
    println!("{:<38} {:>13} {:>13} {:>8}", "", "R1", format!("R{CLUSTER_NODES}"), format!("R{CLUSTER_NODES}/R1"));
    for (what, one, three) in rows {
        let ratio = three.as_secs_f64() / one.as_secs_f64();
        println!("{what:<38} {:>13} {:>13} {:>7.2}x", ms(one), ms(three), ratio);
    }
}

/// Each connection reads its agent's key by direct get every [`CADENCE`], with a random phase,
/// `rounds` times; returns every latency, sorted.
async fn poll_at_cadence(
    connections: Vec<(AgentName, jetstream::Context)>,
    rounds: u32,
) -> anyhow::Result<Vec<Duration>> {
    let polls = connections.into_iter().map(|(agent, js)| async move {
        let mut latencies = Vec::new();
        let phase = Duration::from_millis(rand::rng().random_range(0..CADENCE.as_millis() as u64));
        tokio::time::sleep(phase).await;
        let stream = js.get_stream_no_info(format!("KV_{AGENT_SCHEDULES_BUCKET}")).await?;
        let key = format!("$KV.{AGENT_SCHEDULES_BUCKET}.{agent}");
        let mut ticks = tokio::time::interval(CADENCE);
        for _ in 0..rounds {
            ticks.tick().await;
            let started = Instant::now();
            stream.direct_get_last_for_subject(&key).await?;
            latencies.push(started.elapsed());
        }
        anyhow::Ok(latencies)
    });
    let mut latencies: Vec<Duration> = Vec::new();
    for result in futures::future::join_all(polls).await {
        latencies.extend(result?);
    }
    latencies.sort();
    Ok(latencies)
}

fn report(what: &str, latencies: &[Duration], sequential: &[Duration], single_account: Option<&[Duration]>) {
    let (p50, p99) = (percentile(latencies, 0.5), percentile(latencies, 0.99));
    let against = |base: &[Duration]| p99.as_secs_f64() / percentile(base, 0.99).as_secs_f64();
    let vs_single =
        single_account.map(|s| format!("; p99 {:.2}x the single-account p99", against(s))).unwrap_or_default();
    println!(
        "{what}, at the cadence: p50 {}  p99 {}  max {}  ({} gets; p99 {:.2}x the sequential p99{vs_single})",
        ms(p50),
        ms(p99),
        ms(*latencies.last().expect("samples")),
        latencies.len(),
        against(sequential),
    );
}

/// One direct get per agent key, one at a time, on the controller's connection.
async fn sequential_gets(js: &jetstream::Context, count: usize) -> anyhow::Result<Vec<Duration>> {
    let stream = js.get_stream_no_info(format!("KV_{AGENT_SCHEDULES_BUCKET}")).await?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let key = format!("$KV.{AGENT_SCHEDULES_BUCKET}.{}", agent_name(i));
        let started = Instant::now();
        stream.direct_get_last_for_subject(&key).await?;
        out.push(started.elapsed());
    }
    out.sort();
    Ok(out)
}
