//! The pinned-key TLS verifier against a real Caddy serving a self-signed certificate made
//! here: the right pin connects (the system and web PKI roots know nothing of this
//! certificate), a wrong pin is refused with an error saying so, and without a pin the web PKI
//! roots refuse it.

mod tls_support;

use hyperhive_control_link::{Pin, tls_client_config};
use hyperhive_testkit::{Caddy, free_port};
use tls_support::{BODY, get, site};

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
    let caddy = Caddy::start(&site(port, &cert_path, &key_path), &[port]).await?;
    Ok(PinnedProxy { caddy, port, pin, _certificate_dir: dir })
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
