//! Benchmark of what nats-server's memory holds per agent, split by what an agent brings: `N`
//! agents' accounts minted and given to the running server (no connection yet), then `N`
//! connections of the controller's own user (the swarm account, no permissions: the baseline),
//! then each agent's first connection (its account comes alive, with its imports, and the
//! user's publish and subscribe allow lists), each agent's second connection (the allow lists
//! alone), and one inbox subscription on each. Each figure is nats-server's resident memory
//! (`/varz` `mem`) after the step, less before it, per agent, and its ratio to the baseline.
//!
//! The server is a Go program: its resident memory holds garbage not yet collected, as much again
//! as its live memory at Go's default (`GOGC=100`). Run with `GOGC=10 GODEBUG=madvdontneed=1`
//! in the environment (nats-server inherits it) for figures close to what it holds live.
//!
//! `[GOGC=10 GODEBUG=madvdontneed=1] cargo bench -p swarm-controller --bench nats_memory [--
//! --agents N]` (default 1,000). Needs `scripts/setup`.

use std::time::Duration;

use hyperhive_nats_creds::AgentName;
use hyperhive_testkit::{NatsJwt, free_port, wait_until};
use serde_json::Value;

const PATIENCE: Duration = Duration::from_secs(60);

fn agents_option() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == "--agents").map_or(1_000, |p| p[1].parse().expect("--agents takes a number"))
}

/// nats-server's `/varz` on its monitoring port.
struct Monitor {
    url: String,
}

impl Monitor {
    async fn varz(&self) -> Value {
        reqwest::get(&self.url).await.unwrap().json().await.unwrap()
    }

    /// The server's resident memory in KiB once it counts `connections` clients and its
    /// memory has been read the same twice in a row, a second apart (the allocations of the
    /// step are done), or after [`PATIENCE`] of reads that differ (the last read).
    async fn settled_kib(&self, connections: usize) -> f64 {
        wait_until("the server to count every connection", PATIENCE, || async {
            (self.varz().await["connections"].as_u64()? as usize >= connections).then_some(())
        })
        .await
        .unwrap();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut last = self.varz().await["mem"].as_f64().unwrap();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = self.varz().await["mem"].as_f64().unwrap();
            if now == last || tokio::time::Instant::now() > deadline {
                return now / 1024.0;
            }
            last = now;
        }
    }
}

async fn agent_connection(creds: &std::path::Path, nats: &NatsJwt) -> async_nats::Client {
    async_nats::ConnectOptions::with_credentials_file(creds).await.unwrap().connect(nats.url()).await.unwrap()
}

#[tokio::main]
async fn main() {
    let n = agents_option();
    let port = free_port();
    let nats = NatsJwt::start_with_config(&format!("http: \"127.0.0.1:{port}\"")).await.unwrap();
    let monitor = Monitor { url: format!("http://127.0.0.1:{port}/varz") };
    let names: Vec<AgentName> = (0..n).map(|i| AgentName::parse(&format!("agent-{i:05}")).unwrap()).collect();
    println!("nats-server memory per agent, {n} agents");

    let mut steps = Vec::new();
    let start = monitor.settled_kib(0).await;
    let creds = nats.mint_agents(&names).await.unwrap();
    steps.push(("account minted and given to the server", monitor.settled_kib(0).await));
    let mut controller = Vec::with_capacity(n);
    for _ in 0..n {
        controller.push(nats.controller_client().await.unwrap());
    }
    steps.push(("a connection of the controller's user (baseline)", monitor.settled_kib(n).await));
    let mut first = Vec::with_capacity(n);
    for path in &creds {
        first.push(agent_connection(path, &nats).await);
    }
    steps.push(("the agent's first connection", monitor.settled_kib(2 * n).await));
    let mut second = Vec::with_capacity(n);
    for path in &creds {
        second.push(agent_connection(path, &nats).await);
    }
    steps.push(("the agent's second connection", monitor.settled_kib(3 * n).await));
    let mut inboxes = Vec::with_capacity(n);
    for (client, name) in second.iter().zip(&names) {
        let prefix = hyperhive_nats_objects::agent_inbox_prefix(name);
        inboxes.push(client.subscribe(format!("{prefix}.>")).await.unwrap());
    }
    for client in &second {
        client.flush().await.unwrap();
    }
    steps.push(("an inbox subscription", monitor.settled_kib(3 * n).await));

    let mut before = start;
    let mut per_agent = Vec::new();
    for (what, after) in &steps {
        per_agent.push((*what, (after - before) / n as f64));
        before = *after;
    }
    let baseline = per_agent[1].1;
    for (what, kib) in per_agent {
        println!("{what}: {kib:.1} KiB ({:.2}x the baseline)", kib / baseline);
    }
    println!("nats-server in all: {:.0} MiB", before / 1024.0);
    drop((controller, first, inboxes, second));
}
