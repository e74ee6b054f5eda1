//! The pin of a certificate: base64url SHA-256 of its SubjectPublicKeyInfo.

use hyperhive_control_link::Pin;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PinError {
    #[error("no PEM certificate found (expected a -----BEGIN CERTIFICATE----- block)")]
    NotPem,
    #[error("the PEM block is a {0}, not a CERTIFICATE")]
    NotCertificate(String),
    /// control-link's message ("the certificate cannot be parsed: ...").
    #[error("{0}")]
    Malformed(String),
}

/// The pin of the first certificate in `pem` (a chain file's first block is the leaf).
pub fn pin_of_pem(pem: &[u8]) -> Result<String, PinError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| PinError::NotPem)?;
    if block.label != "CERTIFICATE" {
        return Err(PinError::NotCertificate(block.label));
    }
    // The same computation devices check against (control-link's verifier).
    Pin::of_certificate(&block.contents).map(|pin| pin.to_string()).map_err(|e| PinError::Malformed(e.to_string()))
}
