//! The device's TLS client configuration. A control plane behind a proxy with a
//! self-signed certificate hands out codes carrying the **pin**, the base64url SHA-256 of that
//! certificate's SubjectPublicKeyInfo. Given a pin, the device accepts exactly that key and
//! ignores the system trust store (an operator's CA or a compromised public CA cannot stand in);
//! the handshake signature is still verified, so only the holder of the private key passes.
//! Without a pin, the usual web PKI roots decide.

use std::sync::Arc;

use hyperhive_control_proto::encoding;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

/// A certificate key pin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Pin([u8; 32]);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error(
        "pin {0}: expected the base64url SHA-256 of the certificate's public key, as `agents-control pin --cert FILE` prints it"
    )]
    Malformed(String),
    #[error("the certificate cannot be parsed: {0}")]
    Certificate(String),
}

impl Pin {
    /// The pin of a DER certificate.
    ///
    /// # Errors
    /// When `der` is not an X.509 certificate.
    pub fn of_certificate(der: &[u8]) -> Result<Pin, PinError> {
        let (_, certificate) =
            x509_parser::parse_x509_certificate(der).map_err(|e| PinError::Certificate(e.to_string()))?;
        Ok(Pin(Sha256::digest(certificate.public_key().raw).into()))
    }
}

impl std::str::FromStr for Pin {
    type Err = PinError;

    fn from_str(text: &str) -> Result<Pin, PinError> {
        encoding::decode_exact::<32>(text.trim()).map(Pin).map_err(PinError::Malformed)
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&encoding::encode(&self.0))
    }
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pin({self})")
    }
}

/// The certificate's key is not the pinned one.
#[derive(thiserror::Error)]
#[error(
    "the server's certificate key has pin {presented}, but this device was given pin {expected}: not the control plane's proxy (or its certificate changed: pair again with a new code)"
)]
struct PinMismatch {
    expected: Pin,
    presented: Pin,
}

// rustls shows a certificate error's cause with `{:?}`: make that the readable sentence.
impl std::fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Accepts only a certificate whose key has the pin; signatures are checked as usual.
#[derive(Debug)]
struct PinnedKeyVerifier {
    pin: Pin,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedKeyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The pin names the key, not a name or a validity period: a self-signed proxy
        // certificate is trusted for exactly as long as its key is the pinned one.
        let presented = Pin::of_certificate(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        if presented == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(PinMismatch {
                expected: self.pin,
                presented,
            })))))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The TLS client configuration for the link: with `pin`, only a certificate with that key is
/// accepted; without, the web PKI roots (webpki-roots) decide. The crypto provider is named
/// (ring) rather than taken from the process default, which is ambiguous in a binary that links
/// more than one.
///
/// # Errors
/// Only if the provider offers no safe protocol version (it always does).
pub fn tls_client_config(pin: Option<Pin>) -> Result<Arc<ClientConfig>, rustls::Error> {
    tls_client_config_with_roots(pin, RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() })
}

/// [`tls_client_config`] with `roots` instead of the web PKI roots when there is no pin: the
/// same verifier, trusting another set of authorities (tests use a local CA made for the test,
/// so the machine's trust store is never touched).
///
/// # Errors
/// Only if the provider offers no safe protocol version (it always does).
pub fn tls_client_config_with_roots(
    pin: Option<Pin>,
    roots: RootCertStore,
) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider) as Arc<CryptoProvider>)
        .with_safe_default_protocol_versions()?;
    let config = match pin {
        Some(pin) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedKeyVerifier { pin, algorithms }))
            .with_no_client_auth(),
        None => builder.with_root_certificates(roots).with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse_and_print_as_base64url() {
        let pin: Pin = encoding::encode(&[9; 32]).parse().unwrap();
        assert_eq!(pin.to_string(), encoding::encode(&[9; 32]));
        let err = "short".parse::<Pin>().unwrap_err();
        assert!(err.to_string().contains("agents-control pin --cert"), "{err}");
        assert!(Pin::of_certificate(b"not a certificate").is_err());
    }
}
