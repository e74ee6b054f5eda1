//! The swarm's store CA: it issues each agent a short-lived X.509 client certificate, which any
//! TLS server that trusts the CA (a store, a cache, a proxy in front of one) accepts as that
//! agent (see docs/swarm/provisioning.md, "Store identity (store CA)").
//!
//! # What an issued certificate says
//! - subject `CN=<agent>`, and one subject alternative name, the URI `hyperhive:agent:<agent>`.
//!   A URI rather than a DNS name: the agent is not a host, and a DNS name would let the
//!   certificate pass as a server's for that name wherever the CA is trusted; the URI scheme
//!   also keeps agent identities apart from anything else the CA might name later. Servers
//!   that authorize by name read either field.
//! - extended key usage `clientAuth` only, key usage `digitalSignature` only, not a CA.
//! - a fresh P-256 key per certificate (never reused across renewals), a random positive
//!   128-bit serial (127 random bits: the top bit is clear so the DER integer is positive).
//! - valid from [`BACKDATE`] before the issuing instant (clocks of clients and servers differ
//!   a little) until the lifetime after it; the lifetime is at most [`MAX_LIFETIME`].
//!
//! # Layout
//! - `key_file`: reading the CA key only from a private file; writing new private files.
//! - `renewal`: [`renew_due`], the two-thirds rule.
//! - `error`: [`StoreCaError`].

mod error;
mod key_file;
mod renewal;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyperhive_schedule::AgentName;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PublicKeyData, SanType, SerialNumber,
};
use ring::rand::{SecureRandom, SystemRandom};
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer, X509Certificate};

pub use error::StoreCaError;
pub use renewal::renew_due;

use crate::secret::Secret;

/// How far before the issuing instant a certificate becomes valid: servers whose clocks are a
/// little behind the controller's must not refuse a certificate issued a moment ago.
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// The shortest lifetime issued (counted from the issuing instant; the backdate comes on top).
/// Production lifetimes are hours; tests of renewal use seconds.
pub const MIN_LIFETIME: Duration = Duration::from_secs(1);
/// The longest lifetime issued: store certificates are short-lived and renewed (there is no
/// revocation list; an agent removed keeps access until its certificate expires).
pub const MAX_LIFETIME: Duration = Duration::from_secs(31 * 24 * 3600);
/// How long a CA made by [`StoreCa::generate`] is valid.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// The scheme and prefix of the URI naming an agent in its certificate.
pub const AGENT_URI_PREFIX: &str = "hyperhive:agent:";

/// The longest CA common name (X.520's upper bound for a common name).
const MAX_COMMON_NAME: usize = 64;
/// A PEM certificate is a few kilobytes at most.
const MAX_CERT_FILE: u64 = 64 * 1024;

/// The store CA, loaded: its certificate and its signing key (never printed).
pub struct StoreCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    subject: String,
    not_after: SystemTime,
}

impl fmt::Debug for StoreCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreCa")
            .field("subject", &self.subject)
            .field("not_after", &rfc3339(self.not_after))
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A new CA's certificate and key, in PEM.
#[derive(Debug, Clone)]
pub struct GeneratedCa {
    /// The CA certificate: what TLS servers are told to trust.
    pub cert_pem: String,
    /// The CA key (PKCS#8).
    pub key_pem: Secret,
}

/// Where [`write_ca_files`] put a new CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFiles {
    /// The key, mode 0600.
    pub key_file: PathBuf,
    /// The certificate, mode 0644.
    pub cert_file: PathBuf,
}

/// A certificate issued to an agent.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM), made for this certificate only.
    pub key_pem: Secret,
    /// The serial number, lowercase hex without separators (as `openssl x509 -serial` prints
    /// it, lowercased).
    pub serial: String,
    /// The first instant it is valid (the issuing instant less [`BACKDATE`], whole seconds).
    pub not_before: SystemTime,
    /// The last instant it is valid (whole seconds).
    pub not_after: SystemTime,
}

impl StoreCa {
    /// Loads the CA from its key file (PEM PKCS#8, readable by its owner only) and its
    /// certificate file (PEM).
    ///
    /// # Errors
    /// A key file its group or others can access ([`StoreCaError::KeyFileTooOpen`]), missing
    /// or unreadable files, and everything [`StoreCa::from_pem`] refuses.
    pub fn load(key_file: &Path, cert_file: &Path) -> Result<Self, StoreCaError> {
        let key_pem = key_file::read_private(key_file)?;
        let cert_pem = read_cert_file(cert_file)?;
        Self::from_pem(&cert_pem, &key_pem)
    }

    /// The CA from its certificate and key in PEM.
    ///
    /// # Errors
    /// A key or certificate that does not parse, a certificate that is not a CA's or may not
    /// sign certificates, or a key that is not the certificate's.
    pub fn from_pem(cert_pem: &str, key_pem: &Secret) -> Result<Self, StoreCaError> {
        // rcgen's parse errors never quote the input.
        let key =
            KeyPair::from_pem(key_pem.expose()).map_err(|err| StoreCaError::InvalidKey { reason: err.to_string() })?;
        let invalid = |reason: String| StoreCaError::InvalidCertificate { reason };
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|err| invalid(format!("not a PEM certificate: {err}")))?;
        if pem.label != "CERTIFICATE" {
            return Err(invalid(format!("the PEM block is a {:?}, not a CERTIFICATE", pem.label)));
        }
        let (_, cert) = X509Certificate::from_der(&pem.contents)
            .map_err(|err| invalid(format!("not an X.509 certificate: {err}")))?;
        let is_ca = cert.basic_constraints().ok().flatten().is_some_and(|constraints| constraints.value.ca);
        if !is_ca {
            return Err(invalid("it is not a CA certificate (basicConstraints CA:TRUE is missing)".to_owned()));
        }
        if let Ok(Some(usage)) = cert.key_usage()
            && !usage.value.key_cert_sign()
        {
            return Err(invalid("its key usage does not allow signing certificates (keyCertSign)".to_owned()));
        }
        if cert.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(StoreCaError::KeyMismatch);
        }
        let not_after = UNIX_EPOCH
            + Duration::from_secs(
                u64::try_from(cert.validity().not_after.timestamp())
                    .map_err(|_| invalid("it expires before 1970".to_owned()))?,
            );
        let subject = cert.subject().to_string();
        let issuer = Issuer::from_ca_cert_der(&pem.contents.clone().into(), key)?;
        Ok(Self { issuer, cert_pem: cert_pem.to_owned(), subject, not_after })
    }

    /// A new self-signed CA named `common_name`, valid for [`CA_LIFETIME`] from [`BACKDATE`]
    /// before `now`, allowed to sign end-entity certificates only (path length 0).
    ///
    /// # Errors
    /// An empty or over-long common name, or one with control characters.
    pub fn generate(common_name: &str, now: SystemTime) -> Result<GeneratedCa, StoreCaError> {
        check_common_name(common_name)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.serial_number = Some(random_serial()?);
        let start = whole_seconds(now.checked_sub(BACKDATE).ok_or(StoreCaError::InvalidTime(now))?);
        params.not_before = to_offset(start)?;
        params.not_after = to_offset(start.checked_add(CA_LIFETIME).ok_or(StoreCaError::InvalidTime(now))?)?;
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(GeneratedCa { cert_pem: cert.pem(), key_pem: Secret::new(key.serialize_pem()) })
    }

    /// The CA certificate, PEM: what TLS servers trust to accept agents.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The last instant the CA itself is valid.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// Issues `agent` a client certificate valid for `lifetime` from `now` (see the module doc).
    ///
    /// # Errors
    /// A lifetime outside [`MIN_LIFETIME`]..=[`MAX_LIFETIME`], a certificate that would
    /// outlive the CA, or a signing failure.
    pub fn issue(&self, agent: &AgentName, lifetime: Duration, now: SystemTime) -> Result<Issued, StoreCaError> {
        if !(MIN_LIFETIME..=MAX_LIFETIME).contains(&lifetime) {
            return Err(StoreCaError::InvalidLifetime { given: lifetime, min: MIN_LIFETIME, max: MAX_LIFETIME });
        }
        let now = whole_seconds(now);
        let not_before = now.checked_sub(BACKDATE).ok_or(StoreCaError::InvalidTime(now))?;
        let not_after = now.checked_add(lifetime).ok_or(StoreCaError::InvalidTime(now))?;
        if not_after > self.not_after {
            return Err(StoreCaError::CaExpiresFirst {
                ca_not_after: rfc3339(self.not_after),
                wanted_not_after: rfc3339(not_after),
            });
        }

        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, agent.as_str());
        // Agent names are `[a-z][a-z0-9-]*`: always a valid IA5 string and URI path.
        let uri = format!("{AGENT_URI_PREFIX}{agent}");
        params.subject_alt_names = vec![SanType::URI(uri.try_into()?)];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let serial = random_serial()?;
        params.serial_number = Some(serial.clone());
        params.not_before = to_offset(not_before)?;
        params.not_after = to_offset(not_after)?;

        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: Secret::new(key.serialize_pem()),
            serial: serial.to_bytes().iter().map(|b| format!("{b:02x}")).collect(),
            not_before,
            not_after,
        })
    }
}

/// Makes a new CA named `common_name` and writes it into `dir` as `store-ca.key` (0600) and
/// `store-ca.pem` (0644), for a new swarm's set-up.
///
/// # Errors
/// When either file exists already (a CA is never replaced by accident), or cannot be written.
pub fn write_ca_files(dir: &Path, common_name: &str, now: SystemTime) -> Result<CaFiles, StoreCaError> {
    let files = CaFiles { key_file: dir.join("store-ca.key"), cert_file: dir.join("store-ca.pem") };
    for path in [&files.key_file, &files.cert_file] {
        if path.exists() {
            return Err(StoreCaError::AlreadyExists { path: path.clone() });
        }
    }
    let ca = StoreCa::generate(common_name, now)?;
    key_file::write_new(&files.key_file, ca.key_pem.expose(), 0o600)?;
    key_file::write_new(&files.cert_file, &ca.cert_pem, 0o644)?;
    Ok(files)
}

fn read_cert_file(path: &Path) -> Result<String, StoreCaError> {
    let io = |action| move |source| StoreCaError::Io { action, path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(io("opening the certificate file"))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_CERT_FILE), &mut text)
        .map_err(io("reading the certificate file"))?;
    Ok(text)
}

fn check_common_name(name: &str) -> Result<(), StoreCaError> {
    let reject = |reason: &str| Err(StoreCaError::InvalidCommonName { reason: reason.to_owned() });
    if name.trim().is_empty() {
        return reject("it is empty");
    }
    if name.chars().count() > MAX_COMMON_NAME {
        return reject("it is longer than 64 characters");
    }
    if name.chars().any(char::is_control) {
        return reject("it contains a control character");
    }
    Ok(())
}

/// 16 random bytes with the top bit clear (a positive DER integer of exactly 16 bytes) and the
/// first byte non-zero (so no encoder shortens it).
fn random_serial() -> Result<SerialNumber, StoreCaError> {
    let mut bytes = [0u8; 16];
    SystemRandom::new().fill(&mut bytes).map_err(|_| StoreCaError::Random)?;
    bytes[0] = (bytes[0] & 0x7f).max(1);
    Ok(SerialNumber::from_slice(&bytes))
}

/// X.509 times have whole seconds; truncating first makes the instants reported equal the
/// certificate's.
fn whole_seconds(at: SystemTime) -> SystemTime {
    match at.duration_since(UNIX_EPOCH) {
        Ok(since) => UNIX_EPOCH + Duration::from_secs(since.as_secs()),
        Err(_) => at,
    }
}

fn to_offset(at: SystemTime) -> Result<OffsetDateTime, StoreCaError> {
    let since = at.duration_since(UNIX_EPOCH).map_err(|_| StoreCaError::InvalidTime(at))?;
    let secs = i64::try_from(since.as_secs()).map_err(|_| StoreCaError::InvalidTime(at))?;
    let offset = OffsetDateTime::from_unix_timestamp(secs).map_err(|_| StoreCaError::InvalidTime(at))?;
    // GeneralizedTime has four year digits.
    if offset.year() > 9999 {
        return Err(StoreCaError::InvalidTime(at));
    }
    Ok(offset)
}

fn rfc3339(at: SystemTime) -> String {
    to_offset(at)
        .ok()
        .and_then(|offset| offset.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("{at:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_can_be_shared_between_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<StoreCa>();
        shared::<Issued>();
        shared::<crate::matrix::SynapseClient>();
    }
}
