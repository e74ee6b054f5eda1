//! Benchmark (not a test): N agents, each on its own connection with its own least-privilege
//! credential, read their key in `agent-schedules` by direct get at the ticker's cadence, against
//! a real JWT-mode nats-server. Prints p50/p99/max latency, and as a baseline the same get
//! repeated back to back on one idle connection, measured in the same run.
//!
//! `cargo run -p hive-agent --release --example direct_get_bench -- --agents 1000 --cadence 10s --duration 60s`

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use clap::Parser;
use hyperhive_nats_creds::agent_inbox_prefix;
use hyperhive_schedule::{AgentName, AgentSchedule, AgentSchedules};
use hyperhive_testkit::NatsJwt;
use tokio::sync::Mutex;

/// Direct-get latency of many agents polling their schedules.
#[derive(Debug, Parser)]
struct Args {
    /// Number of agents (connections).
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// How often each agent reads its key (HIVE_AGENT_SCHEDULE_TICK).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    cadence: Duration,
    /// How long the polling runs.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Schedules in each agent's document.
    #[arg(long, default_value_t = 3)]
    schedules_per_agent: usize,
}

fn doc(n: usize) -> Vec<u8> {
    let anchor = time::macros::datetime!(2026-11-30 09:00:00 UTC);
    let schedules = (0..n)
        .map(|i| AgentSchedule {
            id: format!("sched-{i:04}"),
            body: "Review the open pull requests and summarise what needs attention. ".repeat(4),
            anchor,
            interval: Some(3600),
            paused: false,
            not_before: anchor,
        })
        .collect();
    AgentSchedules::new(schedules).to_bytes()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn show(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn connect_agent(server: &NatsJwt, name: &AgentName) -> async_nats::Client {
    async_nats::ConnectOptions::with_credentials_file(server.mint_agent(name.as_str()).unwrap())
        .await
        .unwrap()
        .custom_inbox_prefix(agent_inbox_prefix(name))
        .connect(server.url())
        .await
        .unwrap()
}

async fn direct_get(js: &jetstream::Context, name: &AgentName) -> Duration {
    let stream = js.get_stream_no_info("KV_agent-schedules").await.unwrap();
    let started = Instant::now();
    let message = stream
        .direct_get_last_for_subject(format!("$KV.agent-schedules.{name}"))
        .await
        .expect("direct get of the agent's own key");
    let elapsed = started.elapsed();
    AgentSchedules::from_bytes(&message.payload).expect("a valid document");
    elapsed
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let server = NatsJwt::start().await.expect("nats-server (run scripts/setup)");
    let controller = async_nats::ConnectOptions::with_credentials_file(server.controller_creds())
        .await
        .unwrap()
        .connect(server.url())
        .await
        .unwrap();
    let js = jetstream::new(controller);
    let bucket =
        js.create_key_value(kv::Config { bucket: "agent-schedules".into(), ..Default::default() }).await.unwrap();
    let value = doc(args.schedules_per_agent);
    let names: Vec<AgentName> = (0..args.agents).map(|i| AgentName::parse(&format!("agent-{i:05}")).unwrap()).collect();
    for name in &names {
        bucket.put(name.as_str(), value.clone().into()).await.unwrap();
    }

    // Baseline: one agent, back to back, nothing else running.
    let baseline_js = jetstream::new(connect_agent(&server, &names[0]).await);
    let mut baseline: Vec<Duration> = Vec::new();
    for _ in 0..2000 {
        baseline.push(direct_get(&baseline_js, &names[0]).await);
    }
    baseline.sort();

    let connect_started = Instant::now();
    let mut clients = Vec::with_capacity(args.agents);
    for name in &names {
        clients.push((name.clone(), jetstream::new(connect_agent(&server, name).await)));
    }
    let connect_time = connect_started.elapsed();

    let latencies = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + args.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (name, js)) in clients.into_iter().enumerate() {
        let latencies = latencies.clone();
        // Agents start at spread-out phases, as independently started processes do.
        let phase = args.cadence.mul_f64(i as f64 / args.agents as f64);
        let cadence = args.cadence;
        tasks.spawn(async move {
            tokio::time::sleep(phase).await;
            let mut ticker = tokio::time::interval(cadence);
            while Instant::now() < deadline {
                ticker.tick().await;
                let latency = direct_get(&js, &name).await;
                latencies.lock().await.push(latency);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut all = latencies.lock().await.clone();
    all.sort();

    println!("direct get of the agent's own key, {} B document", value.len());
    println!(
        "baseline (1 connection, back to back, {} gets): p50 {} p99 {}",
        baseline.len(),
        show(percentile(&baseline, 0.50)),
        show(percentile(&baseline, 0.99))
    );
    println!(
        "{} agents on their own connections every {:?} for {:?} ({} gets, {:.0}/s; connecting took {:?}):",
        args.agents,
        args.cadence,
        args.duration,
        all.len(),
        all.len() as f64 / args.duration.as_secs_f64(),
        connect_time
    );
    let (p50, p99) = (percentile(&all, 0.50), percentile(&all, 0.99));
    println!(
        "  p50 {} ({:.1}x baseline)  p99 {} ({:.1}x baseline)  max {}",
        show(p50),
        p50.as_secs_f64() / percentile(&baseline, 0.50).as_secs_f64(),
        show(p99),
        p99.as_secs_f64() / percentile(&baseline, 0.99).as_secs_f64(),
        show(*all.last().unwrap())
    );
}
