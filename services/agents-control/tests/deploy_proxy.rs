//! `deploy/Caddyfile` itself, in front of a real copy: the copy's operator and peer routes
//! (`/metrics`, `/v1/peer`) are refused by the proxy, while the public ones pass through.
//!
//! The file is used as shipped, with only its site address moved to a free port (as the VM test
//! moves it to the host name `proxy`) and its certificate and upstreams given through the
//! environment variables it reads.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hyperhive_control_proto::encoding;
use hyperhive_testkit::{Process, Tool, free_port, tool};

const START: Duration = Duration::from_secs(30);
const SHIPPED_ADDRESS: &str = "https://127.0.0.1:8443 {";

/// `curl` through the proxy, trusting its certificate: (status, body).
fn get(port: u16, cert: &Path, path: &str) -> (u16, String) {
    let out = Command::new(tool(Tool::Curl).unwrap())
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(cert)
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs (Debian: apt-get install curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

#[tokio::test]
async fn the_shipped_caddyfile_serves_the_public_routes_and_refuses_metrics_and_peer_links() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("proxy.crt"), dir.path().join("proxy.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let proxy_port = free_port();

    std::fs::create_dir(dir.path().join("store")).unwrap();
    let copy = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut served = Process::builder(env!("CARGO_BIN_EXE_agents-control"))
        .args(["serve", "--listen", &copy.to_string(), "--peer-url", &format!("http://{copy}")])
        .env("AGENTS_STORE", format!("file://{}", dir.path().join("store").display()))
        .env("AGENTS_CONTROL_KEY", encoding::encode(&[0x5a; 32]))
        .env("AGENTS_CONTROL_URL", format!("https://127.0.0.1:{proxy_port}"))
        .start("agents-control")
        .unwrap();
    served.wait_for_http_ok(copy, "/readyz", START).await.unwrap();
    // The copy itself serves both routes the proxy must keep to itself.
    for path in ["/metrics", "/v1/peer"] {
        let status = hyperhive_testkit::process::http_status(copy, path).await.unwrap();
        assert_ne!(status, 404, "the copy serves {path} directly");
    }

    let shipped =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/Caddyfile")).unwrap();
    assert!(shipped.contains(SHIPPED_ADDRESS), "deploy/Caddyfile no longer serves {SHIPPED_ADDRESS}");
    let caddyfile = dir.path().join("Caddyfile");
    std::fs::write(&caddyfile, shipped.replace(SHIPPED_ADDRESS, &format!("https://127.0.0.1:{proxy_port} {{")))
        .unwrap();
    let mut caddy = Process::builder(tool(Tool::Caddy).unwrap())
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&caddyfile)
        .env("PROXY_CERT", &cert)
        .env("PROXY_KEY", &key)
        .env("UPSTREAMS", copy.to_string())
        .env("HOME", dir.path())
        .env("XDG_DATA_HOME", dir.path().join("xdg-data"))
        .env("XDG_CONFIG_HOME", dir.path().join("xdg-config"))
        .start("caddy")
        .unwrap();
    caddy.wait_for_port(proxy_port, START).await.unwrap();

    // Through the proxy: the copy's health answers once the proxy's own health check passed it.
    hyperhive_testkit::wait_until("/readyz through the proxy", START, || async {
        (get(proxy_port, &cert, "/readyz").0 == 200).then_some(())
    })
    .await
    .unwrap();
    for path in ["/metrics", "/metrics/anything", "/v1/peer", "/v1/peer/x"] {
        let (status, body) = get(proxy_port, &cert, path);
        assert_eq!((status, body.as_str()), (404, "not served here"), "{path} through the proxy");
    }
    // Pairing is public: a malformed pairing request reaches the copy and gets its own answer.
    let (status, body) = get(proxy_port, &cert, "/v1/pair");
    assert_ne!(status, 404, "/v1/pair is refused by the proxy: {body}");
}
