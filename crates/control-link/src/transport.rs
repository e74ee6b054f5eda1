//! The byte stream to the control plane: TCP, wrapped in TLS (with the pinned-key verifier when
//! the identity has a pin) for `https://` control URLs.

use crate::tls::{Pin, tls_client_config};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A connected stream, TLS or plain.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Where a control URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("control URL {0:?} is not http://HOST[:PORT] or https://HOST[:PORT]")]
    BadUrl(String),
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("TLS with {host}: {source}")]
    Tls { host: String, source: std::io::Error },
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, TransportError> {
        let bad = || TransportError::BadUrl(url.to_owned());
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(bad());
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad())?),
            None => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(Target { tls, host: host.to_owned(), port })
    }

    /// The WebSocket URL of `path` on this target.
    pub fn ws_url(&self, path: &str) -> String {
        let scheme = if self.tls { "wss" } else { "ws" };
        format!("{scheme}://{}:{}{path}", self.host, self.port)
    }

    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Opens the stream; with TLS, only a certificate with `pin`'s key is accepted when given.
    pub async fn connect(&self, pin: Option<Pin>) -> Result<Box<dyn Stream>, TransportError> {
        let addr = self.authority();
        let tcp = TcpStream::connect(&addr).await.map_err(|source| TransportError::Connect { addr, source })?;
        let _ = tcp.set_nodelay(true);
        if !self.tls {
            return Ok(Box::new(tcp));
        }
        let tls_error = |source| TransportError::Tls { host: self.host.clone(), source };
        let config = tls_client_config(pin).map_err(|e| tls_error(std::io::Error::other(e)))?;
        let name = ServerName::try_from(self.host.clone())
            .map_err(|e| tls_error(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
        let stream = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.map_err(tls_error)?;
        Ok(Box::new(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_urls_parse_or_say_what_is_wrong() {
        let target = Target::parse("https://agents.example.com").unwrap();
        assert_eq!(target, Target { tls: true, host: "agents.example.com".into(), port: 443 });
        assert_eq!(target.ws_url("/v1/link"), "wss://agents.example.com:443/v1/link");
        assert_eq!(Target::parse("http://127.0.0.1:8791/").unwrap().port, 8791);
        for bad in ["ftp://x", "https://", "https://x/path", "http://x:port", "x:1"] {
            let error = Target::parse(bad).unwrap_err().to_string();
            assert!(error.contains("https://HOST"), "{bad}: {error}");
        }
    }
}
