//! Benchmark of the agent lifecycle: one hive of 200 agents under `hive-c0re` (process runner),
//! the `swarm-controller` binary, a JWT-mode nats-server from the test kit, each party with its
//! own credential.
//!
//! 1. **Wanted state to hive status**: one `PUT .../state` per agent (all 200 back to back, to
//!    `paused`, then to `up`), and for each agent the time from its PUT being answered to its new
//!    actual state appearing in `hive-status` (p50, p99, max), against the NATS round trip (a KV
//!    put acked) measured in the same run.
//! 2. **Memory**: hive-c0re's resident memory with 200 agents against the same daemon with none,
//!    per supervised agent.
//! 3. **Idle NATS traffic**: the messages a hive's connection sends in a quiet window (nothing
//!    changing), for the 200-agent hive against the same hive with no agents, from the server's
//!    own monitoring (`/connz`): it must not grow with agents beyond the status document.
//!
//! `cargo build -p hive-agent -p hive-c0re && cargo bench -p swarm-controller --bench hives
//! [-- --agents N --window SECS]` (defaults 200 and 60). Needs `scripts/setup`.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_schedule::AgentName;
use hyperhive_testkit::stats::{percentile, rss_kib};
use hyperhive_testkit::{NatsJwt, Process, free_port, project_binary, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HIVE: &str = "bench";
const PATIENCE: Duration = Duration::from_secs(120);

struct Options {
    agents: usize,
    window: Duration,
}

fn options() -> Options {
    let mut options = Options { agents: 200, window: Duration::from_secs(60) };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        match pair[0].as_str() {
            "--agents" => options.agents = pair[1].parse().expect("--agents N"),
            "--window" => options.window = Duration::from_secs(pair[1].parse().expect("--window SECS")),
            _ => {}
        }
    }
    options
}

fn agent(i: usize) -> String {
    format!("agent-{i:04}")
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// One HTTP/1.1 request on the controller's socket; returns the status code.
async fn put_state(socket: &Path, agent: &str, state: &str) -> u16 {
    let body = format!("{{\"state\":\"{state}\"}}");
    let request = format!(
        "PUT /api/hives/{HIVE}/agents/{agent}/state HTTP/1.1\r\nHost: controller\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::UnixStream::connect(socket).await.expect("the controller's socket");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

/// The hive: hive-c0re on the process runner with `agents` declared agents.
fn start_hive(nats: &NatsJwt, dir: &Path, agents: usize, status_secs: u64) -> Process {
    let declared: serde_json::Map<String, serde_json::Value> = (0..agents)
        .map(|i| {
            let name = agent(i);
            let creds = nats.creds_dir().join(format!("agent-{name}.creds"));
            (name, serde_json::json!({"spec": {"turn_command": "cat >/dev/null"}, "creds_file": creds}))
        })
        .collect();
    let file = dir.join(format!("agents-{agents}.json"));
    std::fs::write(&file, serde_json::Value::Object(declared).to_string()).unwrap();
    Process::builder(project_binary("hive-c0re").expect("cargo build -p hive-c0re"))
        .arg("run")
        .env("HIVE_C0RE_HIVE", HIVE)
        .env("HIVE_C0RE_NATS_URL", nats.url())
        .env("HIVE_C0RE_NATS_CREDS", nats.creds_dir().join(format!("hive-{HIVE}.creds")))
        .env("HIVE_C0RE_STATE_DIR", dir.join(format!("state-{agents}")))
        .env("HIVE_C0RE_RUNNER", "process")
        .env("HIVE_C0RE_AGENTS_FILE", file)
        .env("HIVE_C0RE_AGENT_BIN", project_binary("hive-agent").expect("cargo build -p hive-agent"))
        .env("HIVE_C0RE_STATUS_SECS", status_secs.to_string())
        .env("RUST_LOG", "warn")
        .start(&format!("hive-c0re-{agents}"))
        .unwrap()
}

async fn status(bucket: &kv::Store) -> Option<HiveStatus> {
    let bytes = bucket.get(HIVE).await.ok()??;
    serde_json::from_slice(&bytes).ok()
}

async fn wait_all(bucket: &kv::Store, agents: usize, actual: &str) {
    wait_until(&format!("{agents} agents {actual}"), PATIENCE, || async {
        let status = status(bucket).await?;
        let n = status.agents.values().filter(|a| a.actual.as_str() == actual).count();
        (n == agents).then_some(())
    })
    .await
    .unwrap();
}

/// PUTs `state` for every agent back to back, and measures for each the time from its PUT's
/// answer to `actual` first showing for it in `hive-status`.
async fn lifecycle_round(socket: &Path, bucket: &kv::Store, agents: usize, state: &str, actual: &str) -> Vec<Duration> {
    let mut watch = bucket.watch(HIVE).await.unwrap();
    let mut answered = HashMap::new();
    for i in 0..agents {
        let name = agent(i);
        assert_eq!(put_state(socket, &name, state).await, 200, "PUT {name} {state}");
        answered.insert(name, Instant::now());
    }
    let mut seen: HashMap<String, Instant> = HashMap::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while seen.len() < agents {
        let entry = tokio::time::timeout_at(deadline, watch.next()).await.expect("every agent shown in time");
        let entry = entry.expect("the watch goes on").unwrap();
        let at = Instant::now();
        let Ok(status) = serde_json::from_slice::<HiveStatus>(&entry.value) else { continue };
        for (name, agent) in &status.agents {
            if agent.actual.as_str() == actual && answered.contains_key(name.as_str()) {
                seen.entry(name.to_string()).or_insert(at);
            }
        }
    }
    let mut latencies: Vec<Duration> =
        seen.iter().map(|(name, at)| at.saturating_duration_since(answered[name])).collect();
    latencies.sort();
    latencies
}

/// Messages the hive's connection(s) sent during `window`, from the server's `/connz`.
async fn idle_messages(monitor: u16, account: &str, window: Duration) -> u64 {
    let count = || async {
        let url = format!("http://127.0.0.1:{monitor}/connz?auth=1&limit=10000");
        let text = http_get(&url).await;
        let connz: serde_json::Value = serde_json::from_str(&text).expect("connz JSON");
        connz["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["account"] == account)
            .map(|c| c["in_msgs"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let before = count().await;
    tokio::time::sleep(window).await; // the measurement window itself
    count().await - before
}

async fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    // HTTP/1.0: the body comes whole, never chunked.
    let request = format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}

/// The public key of the hive's account, from its JWT in the `nats init` directory.
fn hive_account(creds_dir: &Path) -> String {
    use base64::Engine as _;
    let jwt = std::fs::read_to_string(creds_dir.join(format!("accounts/hive-{HIVE}.jwt"))).unwrap();
    let claims = jwt.trim().split('.').nth(1).unwrap();
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(&claims).unwrap();
    claims["sub"].as_str().unwrap().to_owned()
}

/// p50 of a KV put acked by JetStream, on the controller's connection: the NATS round trip the
/// lifecycle's figures are compared with.
async fn nats_round_trip(js: &jetstream::Context) -> Duration {
    let bucket = js
        .create_key_value(kv::Config {
            bucket: "bench-round-trip".into(),
            history: 1,
            max_bytes: 1 << 20,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut times = Vec::new();
    for i in 0..200u32 {
        let started = Instant::now();
        bucket.put("k", i.to_string().into()).await.unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    percentile(&times, 0.5)
}

#[tokio::main]
async fn main() {
    let options = options();
    let monitor = free_port();
    let nats = NatsJwt::start_with_config(&format!("http: \"127.0.0.1:{monitor}\"")).await.unwrap();
    let names: Vec<AgentName> = (0..options.agents).map(|i| AgentName::parse(&agent(i)).unwrap()).collect();
    nats.mint_agents(&names).await.unwrap();
    let refs: Vec<&str> = names.iter().map(AgentName::as_str).collect();
    nats.mint_hive(HIVE, &refs).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hives_file = dir.path().join("hives.json");
    std::fs::write(&hives_file, format!("{{\"{HIVE}\": {{\"description\": \"benchmark\"}}}}")).unwrap();
    let socket = dir.path().join("run/controller.sock");
    let mut controller = Process::builder(env!("CARGO_BIN_EXE_swarm-controller"))
        .env("SWARM_CONTROLLER_SOCKET", &socket)
        .env("SWARM_NATS_URL", nats.url())
        .env("SWARM_NATS_CREDS", nats.controller_creds())
        .env("SWARM_HIVES_FILE", &hives_file)
        // The directory the agents were minted in: the controller makes their consumers at start.
        .env("SWARM_NATS_DIR", nats.creds_dir())
        .env("RUST_LOG", "warn")
        .start("swarm-controller")
        .unwrap();
    wait_until("the controller's socket", PATIENCE, || async { socket.exists().then_some(()) }).await.unwrap();
    let js = jetstream::new(nats.controller_client().await.unwrap());
    let bucket = js.get_key_value("hive-status").await.unwrap();
    let account = hive_account(nats.creds_dir());
    println!("one hive, {} agents, process runner; idle window {:?}", options.agents, options.window);

    // Baselines with no agents: memory, and idle traffic with the status document alone.
    let mut empty = start_hive(&nats, dir.path(), 0, 15);
    wait_until("the empty hive's status", PATIENCE, || async { status(&bucket).await.map(|_| ()) }).await.unwrap();
    let empty_rss = rss_kib(empty.pid());
    let empty_idle = idle_messages(monitor, &account, options.window).await;
    empty.kill();

    let hive = start_hive(&nats, dir.path(), options.agents, 15);
    wait_all(&bucket, options.agents, "running").await;
    // The controller puts each agent on the roster when it first sees it in the hive's status.
    let roster = js.get_key_value("agents").await.unwrap();
    wait_until("every agent on the roster", PATIENCE, || async {
        let keys: Vec<String> = roster.keys().await.ok()?.filter_map(|k| async { k.ok() }).collect().await;
        (keys.len() == options.agents).then_some(())
    })
    .await
    .unwrap();
    let round_trip = nats_round_trip(&js).await;
    let paused = lifecycle_round(&socket, &bucket, options.agents, "paused", "paused").await;
    let resumed = lifecycle_round(&socket, &bucket, options.agents, "up", "running").await;
    let full_rss = rss_kib(hive.pid());
    let full_idle = idle_messages(monitor, &account, options.window).await;

    println!("NATS round trip (KV put acked, p50): {}", millis(round_trip));
    for (what, latencies) in [("paused", &paused), ("up", &resumed)] {
        let (p50, p99, max) = (percentile(latencies, 0.5), percentile(latencies, 0.99), latencies[latencies.len() - 1]);
        println!(
            "PUT {what} -> shown in hive-status: p50 {} ({:.0}x round trip), p99 {} ({:.0}x), max {}",
            millis(p50),
            p50.as_secs_f64() / round_trip.as_secs_f64(),
            millis(p99),
            p99.as_secs_f64() / round_trip.as_secs_f64(),
            millis(max)
        );
    }
    println!(
        "hive-c0re memory: {} KiB with no agents, {} KiB with {}: {:.1} KiB per supervised agent",
        empty_rss,
        full_rss,
        options.agents,
        (full_rss.saturating_sub(empty_rss)) as f64 / options.agents as f64
    );
    let per_minute = |n: u64| n as f64 * 60.0 / options.window.as_secs_f64();
    println!(
        "idle hive NATS messages per minute: {:.1} with no agents, {:.1} with {} ({:.2}x)",
        per_minute(empty_idle),
        per_minute(full_idle),
        options.agents,
        full_idle as f64 / empty_idle.max(1) as f64
    );
    controller.kill();
}
