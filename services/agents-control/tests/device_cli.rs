//! `agents-control device pair|connect`, the real binary, through Caddy terminating TLS with a
//! self-signed certificate made here and pinned in the codes: a host and a client pair, connect
//! and exchange messages both ways with acks; a device is named as the code suggests unless
//! `--name` says otherwise; a device given a wrong pin cannot pair.

use agents_control::clock::SystemClock;
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::control::Control;
use agents_control::key::ControlKey;
use hyperhive_control_link::Pin;
use hyperhive_control_proto::DeviceKind;
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_testkit::{Caddy, free_port};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

const WAIT: Duration = Duration::from_secs(15);
/// The control plane's name (`AGENTS_CONTROL_NAME`) in these tests.
const CONTROL_NAME: &str = "home hive";

struct Setup {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    control: Arc<Control>,
    issuer: Issuer,
    _caddy: Caddy,
    _server: tokio::task::JoinHandle<()>,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    let store: Arc<dyn Store> = Arc::new(FileStore::open(&dir.path().join("store")).unwrap());
    let key = ControlKey::from_seed([5; 32]);
    let control = Arc::new(
        Control::new(store.clone(), key.clone(), Arc::new(SystemClock))
            .with_copy_name("cp1")
            .with_name(Some(CONTROL_NAME.into())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let copy_port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(agents_control::server::serve(control.clone(), listener, std::future::pending()));

    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key_file) = (dir.path().join("proxy.crt"), dir.path().join("proxy.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key_file, certified.signing_key.serialize_pem()).unwrap();
    let pin = Pin::of_certificate(certified.cert.der()).unwrap();
    let port = free_port();
    let site = format!(
        "https://localhost:{port} {{\n\ttls {} {}\n\treverse_proxy 127.0.0.1:{copy_port}\n}}",
        cert.display(),
        key_file.display()
    );
    let caddy = Caddy::start(&site, &[port]).await.unwrap();
    let issuer = Issuer { key, control_url: format!("https://localhost:{port}"), pin: Some(pin.to_string()) };
    Setup { dir, store, control, issuer, _caddy: caddy, _server: server }
}

impl Setup {
    async fn code(&self, kind: DeviceKind, issuer: &Issuer) -> String {
        self.code_named(kind, issuer, None).await
    }

    /// A code suggesting `name` for the device (`agents-control code --name`).
    async fn code_named(&self, kind: DeviceKind, issuer: &Issuer, name: Option<&str>) -> String {
        let name = name.map(str::to_owned);
        let request = CodeRequest { kind, name, role: None, ttl: codes::DEFAULT_TTL, made_by: "test".into() };
        codes::make_code(self.store.as_ref(), &SystemClock, issuer, &request).await.unwrap().to_token()
    }

    /// Runs `device pair`; returns the device id. The control plane tells its name.
    async fn pair(&self, kind: DeviceKind, name: &str) -> (String, std::path::PathBuf) {
        let identity = self.dir.path().join(format!("{name}.json"));
        let output = agents_control(&["device", "pair", &self.code(kind, &self.issuer).await, "--name", name])
            .arg("--identity")
            .arg(&identity)
            .output()
            .await
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(answer["control_name"], CONTROL_NAME, "{answer}");
        self.control.registry.refresh(self.store.as_ref()).await.unwrap();
        (answer["device_id"].as_str().unwrap().to_owned(), identity)
    }
}

fn agents_control(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agents-control"));
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    command
}

struct Connected {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// `reconnecting` events passed over while waiting for others.
    reconnects: usize,
}

impl Connected {
    fn start(identity: &Path) -> Connected {
        let mut command = agents_control(&["device", "connect"]);
        command.arg("--identity").arg(identity).stdin(Stdio::piped()).stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Connected { child, lines, reconnects: 0 }
    }

    /// The next event whose `event` is `kind`.
    async fn event(&mut self, kind: &str) -> Value {
        serde_json::from_str(&self.event_line(kind).await).unwrap()
    }

    /// The same, as the line printed (a parsed body would lose how its numbers were written).
    async fn event_line(&mut self, kind: &str) -> String {
        let find = async {
            loop {
                let line = self.lines.next_line().await.unwrap().expect("connect exited");
                let event: Value = serde_json::from_str(&line).unwrap();
                if event["event"] == kind {
                    return line;
                }
                if event["event"] == "reconnecting" {
                    self.reconnects += 1;
                }
            }
        };
        tokio::time::timeout(WAIT, find).await.unwrap_or_else(|_| panic!("no {kind} event in time"))
    }

    async fn command(&mut self, command: Value) {
        self.command_line(&command.to_string()).await;
    }

    async fn command_line(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }
}

#[tokio::test]
async fn a_host_and_a_client_talk_through_caddy_with_the_pin() {
    let setup = setup().await;
    let (host_id, host_identity) = setup.pair(DeviceKind::Host, "box").await;
    let (client_id, client_identity) = setup.pair(DeviceKind::Client, "phone").await;
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&host_identity).unwrap().permissions().mode() & 0o777, 0o600);

    let mut host = Connected::start(&host_identity);
    let connected = host.event("connected").await;
    assert_eq!((&connected["copy"], &connected["name"]), (&json!("cp1"), &json!(CONTROL_NAME)));
    let mut client = Connected::start(&client_identity);
    client.event("connected").await;
    let presence = client.event("presence").await;
    assert_eq!(presence["hosts"][0]["online"], true, "{presence}");

    client.command(json!({"command": "send", "to": host_id, "body": {"n": 1}})).await;
    let message = host.event("message").await;
    assert_eq!((message["from"].as_str(), &message["body"]), (Some(client_id.as_str()), &json!({"n": 1})));
    assert_eq!(client.event("acked").await["seq"], 1);

    host.command(json!({"command": "send", "to": client_id, "body": "done"})).await;
    assert_eq!(client.event("message").await["body"], "done");
    assert_eq!(host.event("acked").await["to"], client_id.as_str());

    client.command(json!({"command": "teleport"})).await;
    assert!(client.event("error").await["message"].as_str().unwrap().contains("bad command"));
}

/// 12,000 numbers written `1e5` (48 KB) reach the host as written; before, the command line and
/// the copy re-encoded them to 108 KB, the copy closed the sender's link for it, and the sender
/// reconnected and resent for as long as it ran. A message over the limit is refused at once.
#[tokio::test]
async fn a_large_message_arrives_as_written_and_one_over_the_limit_is_refused_at_once() {
    let setup = setup().await;
    let (host_id, host_identity) = setup.pair(DeviceKind::Host, "box").await;
    let (_, client_identity) = setup.pair(DeviceKind::Client, "phone").await;
    let mut host = Connected::start(&host_identity);
    host.event("connected").await;
    let mut client = Connected::start(&client_identity);
    client.event("connected").await;

    let numbers = format!("[{}]", vec!["1e5"; 12_000].join(","));
    client.command_line(&format!(r#"{{"command": "send", "to": "{host_id}", "body": {numbers}}}"#)).await;
    let line = host.event_line("message").await;
    assert!(line.contains(&format!(r#""body":{numbers}"#)), "{}...", &line[..100]);
    assert_eq!(client.event("acked").await["seq"], 1);

    let over = format!("[{}]", vec!["1e5"; 17_000].join(","));
    client.command_line(&format!(r#"{{"command": "send", "to": "{host_id}", "body": {over}}}"#)).await;
    let error = client.event("error").await;
    assert!(error["message"].as_str().unwrap().contains("over the limit"), "{error}");
    client.command(json!({"command": "send", "to": host_id, "body": "after"})).await;
    assert_eq!(host.event("message").await["body"], "after");
    assert_eq!(client.event("acked").await["seq"], 2, "the refused message took no seq");
    assert_eq!((client.reconnects, host.reconnects), (0, 0), "both links stayed up");
}

/// `device pair` without `--name` takes the code's suggested name (and the machine's hostname
/// when the code suggests none); `--name` wins over the suggestion. The name is the one the
/// store records (what `agents-control hosts` and every peer list), the one printed, and the one
/// in the identity file.
#[tokio::test]
async fn a_pairing_keeps_the_name_the_code_suggests_unless_given_another() {
    let setup = setup().await;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned();
    let cases = [
        ("suggested", Some("kitchen"), None, "kitchen"),
        ("overridden", Some("kitchen"), Some("mine"), "mine"),
        ("unsuggested", None, None, hostname.as_str()),
    ];
    for (file, suggested, flag, expected) in cases {
        let code = setup.code_named(DeviceKind::Host, &setup.issuer, suggested).await;
        let identity = setup.dir.path().join(format!("{file}.json"));
        let mut command = agents_control(&["device", "pair", &code, "--identity"]);
        command.arg(&identity);
        if let Some(name) = flag {
            command.args(["--name", name]);
        }
        let output = command.output().await.unwrap();
        assert!(output.status.success(), "{file}: {}", String::from_utf8_lossy(&output.stderr));
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(answer["name"], expected, "{file}: printed {answer}");
        let id = answer["device_id"].as_str().unwrap();
        let stored = agents_control::registry::list(setup.store.as_ref(), DeviceKind::Host).await.unwrap();
        let record = stored.iter().find(|d| d.id == id).expect("the store holds the device");
        assert_eq!(record.name, expected, "{file}: the name the store records");
        let saved = hyperhive_control_link::Identity::load(&identity).unwrap();
        assert_eq!(saved.name, expected, "{file}: the name in the identity file");
    }
}

#[tokio::test]
async fn a_device_given_a_wrong_pin_does_not_pair() {
    let setup = setup().await;
    let wrong =
        Issuer { pin: Some(Pin::of_certificate(&wrong_certificate()).unwrap().to_string()), ..setup.issuer.clone() };
    let identity = setup.dir.path().join("x.json");
    let output = agents_control(&["device", "pair", &setup.code(DeviceKind::Host, &wrong).await])
        .arg("--identity")
        .arg(&identity)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("pin"), "{stderr}");
    assert!(!identity.exists());
}

fn wrong_certificate() -> Vec<u8> {
    rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap().cert.der().to_vec()
}

#[tokio::test]
async fn a_forgotten_device_stops_and_says_why_even_with_its_stdin_open() {
    let setup = setup().await;
    let (host_id, host_identity) = setup.pair(DeviceKind::Host, "box").await;
    let mut host = Connected::start(&host_identity);
    host.event("connected").await;
    agents_control::registry::forget(setup.store.as_ref(), &SystemClock, &host_id).await.unwrap();
    setup.control.revoke(&host_id);
    // stdin stays open (held here; `wait` would close it otherwise): the process must still
    // end, non-zero.
    let _stdin = host.child.stdin.take().unwrap();
    let status = tokio::time::timeout(WAIT, host.child.wait()).await.expect("connect must exit").unwrap();
    assert!(!status.success());
}
