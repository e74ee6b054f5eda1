//! The pinned-key TLS verifier against a real Caddy serving a self-signed certificate made
//! here: the right pin connects (the system and web PKI roots know nothing of this
//! certificate), a wrong pin is refused with an error saying so, and without a pin the web PKI
//! roots refuse it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyperhive_control_link::{Pin, tls_client_config};
use hyperhive_testkit::{Caddy, free_port};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const BODY: &str = "behind the pinned proxy";

/// Caddy on a free port with a fresh self-signed certificate for `localhost`, and its pin.
struct PinnedProxy {
    caddy: Caddy,
    port: u16,
    pin: Pin,
    _certificate_dir: tempfile::TempDir,
}

async fn pinned_proxy() -> anyhow::Result<PinnedProxy> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let dir = tempfile::tempdir()?;
    let (cert_path, key_path) = (dir.path().join("proxy.crt"), dir.path().join("proxy.key"));
    std::fs::write(&cert_path, certified.cert.pem())?;
    std::fs::write(&key_path, certified.signing_key.serialize_pem())?;
    let pin = Pin::of_certificate(certified.cert.der())?;
    let port = free_port();
    let site = format!(
        "https://localhost:{port} {{\n\ttls {} {}\n\trespond \"{BODY}\" 200\n}}",
        cert_path.display(),
        key_path.display()
    );
    let caddy = Caddy::start(&site, &[port]).await?;
    Ok(PinnedProxy { caddy, port, pin, _certificate_dir: dir })
}

/// One HTTPS GET through `config`; the response text, or the TLS error.
async fn get(config: Arc<ClientConfig>, port: u16) -> anyhow::Result<String> {
    let exchange = async {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.context("TCP connect")?;
        let mut tls = TlsConnector::from(config).connect(ServerName::try_from("localhost")?, tcp).await?;
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
        let mut response = String::new();
        tls.read_to_string(&mut response).await?;
        anyhow::Ok(response)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, exchange).await.context("TLS exchange timed out")?
}

#[tokio::test]
async fn only_the_pinned_certificate_key_is_accepted() -> anyhow::Result<()> {
    let mut proxy = pinned_proxy().await?;

    let response = get(tls_client_config(Some(proxy.pin))?, proxy.port).await?;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(BODY), "{response}");

    let other_key = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let wrong_pin = Pin::of_certificate(other_key.cert.der())?;
    let err = get(tls_client_config(Some(wrong_pin))?, proxy.port).await.unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains(&format!("this device was given pin {wrong_pin}")), "{message}");
    assert!(message.contains(&format!("has pin {}", proxy.pin)), "{message}");

    let err = get(tls_client_config(None)?, proxy.port).await.unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("UnknownIssuer"), "without a pin the web PKI decides: {message}");

    assert!(!proxy.caddy.process().has_exited(), "Caddy stayed up throughout");
    Ok(())
}
