//! Three `agents-control serve` processes sharing one moto bucket and one control key, behind one
//! Caddy site that terminates TLS with a certificate made here (pinned in every code), balances
//! round robin and health-checks `/readyz`. Devices are the real `device pair|connect` binary
//! ([`device`]).
//!
//! The binary is `target/debug/agents-control` ([`agents_control_binary`]): build it first
//! (`cargo build -p agents-control --bins`; agents-control's own tests build it anyway).

pub mod device;

use crate::caddy::Caddy;
use crate::ports::free_port;
use crate::process::Process;
use crate::process::http_status;
use crate::s3::{S3, S3Server};
use crate::wait::wait_until;
use device::{Device, Input, Linked};
use hyperhive_control_link::Pin;
use hyperhive_control_proto::encoding;
use hyperhive_object_store::Store;
use hyperhive_object_store::s3::S3Store;
use nix::sys::signal::Signal;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SEED: [u8; 32] = [0x6b; 32];
const PREFIX: &str = "control";
const START: Duration = Duration::from_secs(30);
/// Membership records are listed every few seconds and links are made at once: generous, since
/// two other harnesses may be starting on the same two cores.
const PEERS_WITHIN: Duration = Duration::from_secs(30);
/// How many times a device is restarted to land on a chosen copy: round robin over three
/// copies lands on each within three tries; the rest absorbs health-check flaps.
const PLACEMENT_ATTEMPTS: usize = 12;
/// Where the copies write their membership records (agents-control's `records::MEMBERS`).
const MEMBERS: &str = "members/";

/// The `agents-control` binary as `cargo build` left it; panics with how to build it when it is
/// not there.
pub fn agents_control_binary() -> PathBuf {
    crate::tools::project_binary("agents-control").unwrap_or_else(|error| panic!("{error:#}"))
}

/// One running copy and what devices call it (the `copy` of its `welcome`).
#[derive(Debug)]
pub struct Copy {
    pub process: Process,
    pub addr: SocketAddr,
    pub name: String,
}

#[derive(Debug)]
pub struct Cluster {
    // Field order is drop order: devices' servers go before the bucket.
    pub copies: Vec<Copy>,
    _caddy: Caddy,
    pub s3: S3,
    env: Vec<(String, String)>,
    tls: Tls,
    binary: PathBuf,
    dir: tempfile::TempDir,
}

/// The proxy's certificate and its pin.
#[derive(Debug)]
struct Tls {
    cert: PathBuf,
    key: PathBuf,
    pin: String,
}

impl Tls {
    fn make(dir: &Path) -> Tls {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let (cert, key) = (dir.join("proxy.crt"), dir.join("proxy.key"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        Tls { cert, key, pin: Pin::of_certificate(certified.cert.der()).unwrap().to_string() }
    }
}

/// A pin no certificate here has.
pub fn other_pin() -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    Pin::of_certificate(certified.cert.der()).unwrap().to_string()
}

/// A Caddy site on `port` for `upstreams`. Active checks on `/readyz` take a dead or draining copy
/// out within one interval; a dial that fails meanwhile is retried on the next copy.
///
/// When every copy fails `/readyz` at once (they share the bucket, so an outage does that), the
/// checked proxy has no upstream and answers 503 after `lb_try_duration`; the `handle_errors`
/// route then proxies to every copy unchecked. That is the fail-open behaviour of production
/// balancers (an ALB routes to all targets when none is healthy, Envoy has its panic threshold):
/// without it no device could reconnect during a bucket outage, which docs/control-plane/README.md promises.
fn caddy_site(port: u16, tls: &Tls, upstreams: &[SocketAddr]) -> String {
    let to = upstreams.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
    format!(
        "https://localhost:{port} {{
\ttls {cert} {key}
\treverse_proxy {to} {{
\t\tlb_policy round_robin
\t\tlb_try_duration 1s
\t\tlb_try_interval 100ms
\t\thealth_uri /readyz
\t\thealth_interval 300ms
\t\thealth_timeout 1s
\t}}
\thandle_errors 503 {{
\t\treverse_proxy {to} {{
\t\t\tlb_policy round_robin
\t\t\tlb_try_duration 5s
\t\t\tlb_try_interval 100ms
\t\t}}
\t}}
}}",
        cert = tls.cert.display(),
        key = tls.key.display(),
    )
}

impl Cluster {
    /// Starts the bucket, three copies and Caddy; returns once every copy is ready and Caddy
    /// listens.
    pub async fn start() -> Cluster {
        let binary = agents_control_binary();
        let dir = tempfile::tempdir().unwrap();
        let s3 = S3::start(S3Server::Moto).await.unwrap();
        let tls = Tls::make(dir.path());
        let caddy_port = free_port();
        let mut env = s3.env();
        env.extend([
            ("AGENTS_STORE".to_owned(), s3.store_url(PREFIX)),
            ("AGENTS_CONTROL_KEY".to_owned(), encoding::encode(&SEED)),
            ("AGENTS_CONTROL_URL".to_owned(), format!("https://localhost:{caddy_port}")),
            ("AGENTS_CONTROL_PIN".to_owned(), tls.pin.clone()),
            ("RUST_LOG".to_owned(), "info".to_owned()),
        ]);
        let mut copies = Vec::new();
        for index in 0..3 {
            copies.push(start_copy(&binary, &env, &format!("copy{index}")));
        }
        let mut running = Vec::new();
        for (mut process, addr) in copies {
            process.wait_for_http_ok(addr, "/readyz", START).await.unwrap();
            running.push((process, addr));
        }
        let store = S3Store::from_client(&s3.client(), s3.bucket(), PREFIX);
        let copies = name_copies(&store, running).await;
        let upstreams: Vec<SocketAddr> = copies.iter().map(|copy| copy.addr).collect();
        let caddy = Caddy::start(&caddy_site(caddy_port, &tls, &upstreams), &[caddy_port]).await.unwrap();
        Cluster { copies, _caddy: caddy, s3, env, tls, binary, dir }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The environment every copy runs with (the bucket, the control key, the public URL and
    /// the pin); [`Cluster::cli`] runs with it too.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Starts a copy that shares the bucket but holds another control key, behind its own Caddy
    /// site with the same certificate: what a device meets when something without the key sits
    /// at an address with the right certificate. Returns its public URL with the handles.
    pub async fn impostor(&self) -> (String, Process, Caddy) {
        let port = free_port();
        let mut env = self.env.clone();
        for (key, value) in &mut env {
            match key.as_str() {
                "AGENTS_CONTROL_KEY" => *value = encoding::encode(&[0x99; 32]),
                "AGENTS_CONTROL_URL" => *value = format!("https://localhost:{port}"),
                _ => {}
            }
        }
        let (mut process, addr) = start_copy(&self.binary, &env, "impostor");
        process.wait_for_http_ok(addr, "/readyz", START).await.unwrap();
        let caddy = Caddy::start(&caddy_site(port, &self.tls, &[addr]), &[port]).await.unwrap();
        (format!("https://localhost:{port}"), process, caddy)
    }

    /// Runs `agents-control ARGS` with the copies' environment; (success, stdout, stderr).
    pub async fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let output = tokio::process::Command::new(&self.binary)
            .args(args)
            .envs(self.env.iter().cloned())
            .output()
            .await
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.success(), text(&output.stdout), text(&output.stderr))
    }

    /// A fresh code from `agents-control code --client|--host [EXTRA...]`.
    pub async fn code(&self, kind: &str, extra: &[&str]) -> String {
        let mut args = vec!["code", kind];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = self.cli(&args).await;
        assert!(ok, "agents-control code {kind}: {stderr}");
        stdout.trim().to_owned()
    }

    /// Pairs a device named `name` with a fresh code of `kind` (`--client` or `--host`).
    pub async fn pair(&self, kind: &str, name: &str) -> Device {
        let code = self.code(kind, &[]).await;
        Device::pair(&code, name, self.dir()).await.unwrap_or_else(|stderr| panic!("pairing {name}: {stderr}"))
    }

    /// Connects `device` until it lands on copy `index` (round robin decides, so it is
    /// restarted until it does).
    pub async fn connect_on(&self, device: &Device, index: usize, input: Input) -> Linked {
        let wanted = &self.copies[index].name;
        let mut landed = Vec::new();
        for _ in 0..PLACEMENT_ATTEMPTS {
            let mut linked = Linked::start(&device.identity, input);
            let copy = linked.connected().await;
            if &copy == wanted {
                return linked;
            }
            linked.kill().await;
            landed.push(copy);
        }
        panic!("{} never landed on {wanted} in {PLACEMENT_ATTEMPTS} tries: {landed:?}", device.name)
    }

    /// Waits until every copy still running reports `agents_control_peers` = `peers`.
    pub async fn wait_peers(&mut self, peers: u64) {
        self.wait_metric("agents_control_peers", |value| value == peers).await;
    }

    /// Waits until the unlabelled metric `name` satisfies `wanted` on every copy still running.
    pub async fn wait_metric(&mut self, name: &str, wanted: impl Fn(u64) -> bool) {
        let addrs = self.running();
        wait_until(&format!("{name} as wanted on {addrs:?}"), PEERS_WITHIN, || async {
            for &addr in &addrs {
                if !gauge(addr, name).await.is_some_and(&wanted) {
                    return None;
                }
            }
            Some(())
        })
        .await
        .unwrap();
    }

    /// The unlabelled metric `name` on copy `index` now.
    pub async fn metric(&self, index: usize, name: &str) -> Option<u64> {
        gauge(self.copies[index].addr, name).await
    }

    /// Waits until every running copy has read the registry (a LIST of the devices) since this
    /// call, so every device paired before it is known to every copy, even with the bucket gone.
    pub async fn wait_registry_read(&mut self) {
        // Each refresh lists the devices, then the members: four more LISTs hold a whole
        // refresh that began after this call.
        const LISTS: &str = "agents_control_store_operations_total{operation=\"list\",result=\"ok\"}";
        let mut targets = Vec::new();
        for addr in self.running() {
            targets.push((addr, gauge(addr, LISTS).await.unwrap_or(0) + 4));
        }
        wait_until("every copy to read the registry again", Duration::from_secs(15), || async {
            for &(addr, target) in &targets {
                if gauge(addr, LISTS).await.unwrap_or(0) < target {
                    return None;
                }
            }
            Some(())
        })
        .await
        .unwrap();
    }

    /// The addresses of the copies that have not exited.
    fn running(&mut self) -> Vec<SocketAddr> {
        self.copies.iter_mut().filter_map(|copy| (!copy.process.has_exited()).then_some(copy.addr)).collect()
    }

    /// Sends `signal` to copy `index`.
    pub fn signal(&mut self, index: usize, signal: Signal) {
        self.copies[index].process.signal(signal).unwrap();
    }

    /// Kills copy `index` (SIGKILL) and reaps it; a no-op when it has already exited.
    pub fn kill(&mut self, index: usize) {
        self.copies[index].process.kill();
    }

    /// Waits until `/readyz` answers `status` on every copy in `indexes`.
    pub async fn wait_readyz(&self, indexes: &[usize], status: u16, within: Duration) {
        let addrs: Vec<SocketAddr> = indexes.iter().map(|&i| self.copies[i].addr).collect();
        wait_until(&format!("/readyz {status} on {addrs:?}"), within, || async {
            for &addr in &addrs {
                if http_status(addr, "/readyz").await.ok() != Some(status) {
                    return None;
                }
            }
            Some(())
        })
        .await
        .unwrap();
    }
}

fn start_copy(binary: &Path, env: &[(String, String)], label: &str) -> (Process, SocketAddr) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let process = Process::builder(binary)
        .args(["serve", "--listen", &addr.to_string(), "--peer-url", &format!("http://{addr}"), "--drain", "300ms"])
        .envs(env.iter().cloned())
        .start(label)
        .unwrap();
    (process, addr)
}

/// What the harness reads of a membership record (agents-control's `records::MemberRecord`,
/// documented in docs/control-plane/store.md); the kit does not depend on agents-control.
#[derive(Deserialize)]
struct MemberRecord {
    schema: u32,
    copy_id: String,
    peer_url: Option<String>,
}

/// The schema version of the records this harness reads (agents-control's `records::SCHEMA`).
const SCHEMA: u32 = 1;

/// Names each copy by its membership record (the copy id its `welcome` carries), found by the
/// peer URL it was given.
async fn name_copies(store: &dyn Store, running: Vec<(Process, SocketAddr)>) -> Vec<Copy> {
    let mut by_url = std::collections::HashMap::new();
    for key in store.list(MEMBERS).await.unwrap() {
        let bytes = store.get(&key).await.unwrap().expect("a listed member record").bytes;
        let member: MemberRecord =
            serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("{key} is not a member record: {error}"));
        assert_eq!(member.schema, SCHEMA, "{key}: a schema version this harness does not know");
        by_url.insert(member.peer_url.unwrap_or_default(), member.copy_id);
    }
    running
        .into_iter()
        .map(|(process, addr)| {
            let name = by_url.get(&format!("http://{addr}")).cloned().expect("every copy wrote its membership record");
            Copy { process, addr, name }
        })
        .collect()
}

/// The value of an unlabelled gauge on a copy's `/metrics`, if it answers and has it.
async fn gauge(addr: SocketAddr, name: &str) -> Option<u64> {
    let text = crate::process::http_get_ok(addr, "/metrics").await?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}
