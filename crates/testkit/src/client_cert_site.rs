//! Caddy serving HTTPS and requiring a client certificate from one CA (`client_auth { mode
//! require_and_verify; trust_pool file <ca.pem> }`): what the store CA's certificates are for.
//! The site answers the client certificate's subject and URIs, so a test sees who got in.

use std::path::Path;
use std::time::Duration;

use rcgen::{CertificateParams, KeyPair};

use crate::caddy::Caddy;
use crate::ports::free_port;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A running site; Caddy stops when it is dropped.
#[derive(Debug)]
pub struct ClientCertSite {
    caddy: Caddy,
    port: u16,
    server_cert: String,
}

impl ClientCertSite {
    /// Starts Caddy on a free port with a self-signed server certificate for `localhost` and
    /// `127.0.0.1` (files in `dir`), requiring client certificates from `client_ca_file`. The
    /// site has no host name, so its one TLS policy applies with or without SNI.
    ///
    /// # Errors
    /// When the certificate cannot be made or Caddy does not start.
    pub async fn start(dir: &Path, client_ca_file: &Path) -> anyhow::Result<Self> {
        let server_key = KeyPair::generate()?;
        let server_cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
            .self_signed(&server_key)?
            .pem();
        let (cert_file, key_file) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&cert_file, &server_cert)?;
        std::fs::write(&key_file, server_key.serialize_pem())?;
        let port = free_port();
        let site = format!(
            "https://:{port} {{\n\ttls {} {} {{\n\t\tclient_auth {{\n\t\t\tmode require_and_verify\n\t\t\ttrust_pool file {}\n\t\t}}\n\t}}\n\trespond \"subject={{tls_client_subject}} uris={{http.request.tls.client.san.uris}}\" 200\n}}\n",
            cert_file.display(),
            key_file.display(),
            client_ca_file.display(),
        );
        let caddy = Caddy::start(&site, &[port]).await?;
        Ok(Self { caddy, port, server_cert })
    }

    /// The HTTPS port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The Caddy process (to stop it, read its log).
    pub fn caddy(&mut self) -> &mut Caddy {
        &mut self.caddy
    }

    /// One GET of `https://<host>:<port>/` presenting `identity_pem` (a certificate followed by
    /// its key, PEM) if given: the body, or the whole error chain on one line (reqwest hides the
    /// TLS alert in a source).
    ///
    /// # Errors
    /// The handshake or the request failed, or the answer was not 200.
    pub async fn get(&self, host: &str, identity_pem: Option<&str>) -> anyhow::Result<String> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.server_cert.as_bytes())?)
            .timeout(REQUEST_TIMEOUT);
        if let Some(pem) = identity_pem {
            builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes())?);
        }
        let response = builder.build()?.get(format!("https://{host}:{}/", self.port)).send().await.map_err(chain)?;
        let status = response.status();
        let body = response.text().await.map_err(chain)?;
        anyhow::ensure!(status == 200, "answered {status}: {body}");
        Ok(body)
    }
}

fn chain(err: reqwest::Error) -> anyhow::Error {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    anyhow::anyhow!(text)
}
