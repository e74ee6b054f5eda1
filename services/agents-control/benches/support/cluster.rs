//! `agents-control serve` copies as real processes (the binary this bench was built with: the
//! release one under `cargo bench`) sharing one store and one control key, each with its own
//! peer URL so they link over `/v1/peer` once they see each other's membership records.

use hyperhive_control_proto::encoding;
use hyperhive_testkit::{Process, Signal, free_port, wait_until};
use std::net::SocketAddr;
use std::time::Duration;

pub const SEED: [u8; 32] = [0x5c; 32];
const START: Duration = Duration::from_secs(60);
const LINKED: Duration = Duration::from_secs(60);

pub struct Copy {
    pub process: Process,
    pub addr: SocketAddr,
}

impl Copy {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn rss(&self) -> u64 {
        crate::support::stats::rss_bytes(self.pid())
    }

    pub fn kill(&mut self) {
        self.process.signal(Signal::SIGKILL).expect("the copy is running");
    }

    pub async fn metrics(&self) -> Metrics {
        Metrics(hyperhive_testkit::process::http_get_ok(self.addr, "/metrics").await.unwrap_or_default())
    }
}

/// The environment every copy shares: `store` (an `AGENTS_STORE` URL) plus `extra` (S3 settings).
pub fn copy_env(store: &str, control_url: &str, extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env = extra;
    env.extend([
        ("AGENTS_STORE".to_owned(), store.to_owned()),
        ("AGENTS_CONTROL_KEY".to_owned(), encoding::encode(&SEED)),
        ("AGENTS_CONTROL_URL".to_owned(), control_url.to_owned()),
        // The copies are reached over loopback only, without a TLS proxy in front.
        ("AGENTS_CONTROL_ALLOW_HTTP".to_owned(), "1".to_owned()),
        // Connections are logged at info: at 10,000 devices that is the copy's main work.
        ("RUST_LOG".to_owned(), "warn".to_owned()),
        // Thousands of devices paired a moment before, all on 127.0.0.1, connect at once: each
        // is a store lookup for a device the copy has not read yet, far past the lookup budget
        // of one unproven address. The budget is not what is measured here.
        ("AGENTS_CONTROL_LOOKUP_RATE".to_owned(), "1000000".to_owned()),
        ("AGENTS_CONTROL_LOOKUP_RATE_PER_ADDRESS".to_owned(), "1000000".to_owned()),
    ]);
    env
}

/// Starts a copy on `addr` (pick it with [`free_address`]); returns once `/readyz` answers 200.
pub async fn start_copy(env: &[(String, String)], addr: SocketAddr, label: &str) -> Copy {
    let mut process = Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &addr.to_string(), "--peer-url", &format!("http://{addr}"), "--drain", "300ms"])
        .envs(env.iter().cloned())
        .start(label)
        .expect("agents-control starts");
    process.wait_for_http_ok(addr, "/readyz", START).await.unwrap_or_else(|e| panic!("{label}: {e}"));
    Copy { process, addr }
}

pub fn free_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Three copies on `env`, linked to each other.
pub async fn three_copies(env: &[(String, String)]) -> Vec<Copy> {
    let mut copies = Vec::new();
    for label in ["copyA", "copyB", "copyC"] {
        copies.push(start_copy(env, free_address(), label).await);
    }
    wait_peers(&copies, 2).await;
    copies
}

/// Waits until every copy in `copies` reports `peers` linked peers.
pub async fn wait_peers(copies: &[Copy], peers: u64) {
    wait_until(&format!("agents_control_peers {peers} on every copy"), LINKED, || async {
        for copy in copies {
            if copy.metrics().await.value("agents_control_peers") != Some(peers as f64) {
                return None;
            }
        }
        Some(())
    })
    .await
    .unwrap();
}

/// A copy's `/metrics` text.
pub struct Metrics(pub String);

impl Metrics {
    /// The value of the series written exactly `series` (name with its labels).
    pub fn value(&self, series: &str) -> Option<f64> {
        self.0.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The sum over every series whose line starts with `prefix` (a name, or a name and the
    /// start of its labels).
    pub fn sum(&self, prefix: &str) -> f64 {
        self.0
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    pub fn connections(&self) -> f64 {
        self.sum("agents_control_connections")
    }
}
