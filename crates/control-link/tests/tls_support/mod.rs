//! What the TLS tests share: Caddy sites serving a fixed body with a given certificate, and one
//! HTTPS GET of `localhost` through a client configuration.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every site answers, so a response can be told from an error page.
pub const BODY: &str = "behind the test proxy";

/// A Caddy site on `localhost:port` serving [`BODY`] with the certificate and key at these paths.
pub fn site(port: u16, cert: &Path, key: &Path) -> String {
    format!("https://localhost:{port} {{\n\ttls {} {}\n\trespond \"{BODY}\" 200\n}}\n", cert.display(), key.display())
}

/// One HTTPS GET of `localhost` through `config`; the response text, or the TLS error.
pub async fn get(config: Arc<ClientConfig>, port: u16) -> anyhow::Result<String> {
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
