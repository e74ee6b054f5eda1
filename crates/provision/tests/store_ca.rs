//! The store CA against a real TLS server: Caddy requiring client certificates from the CA
//! (`client_auth { mode require_and_verify; trust_pool file <ca.pem> }`). A certificate the CA
//! issued gets in, and Caddy sees the agent's name in it; one from another CA, an expired one
//! and none at all are refused in the handshake. Without a server: what an issued certificate
//! says, and what loading the CA refuses.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use hyperhive_provision::Secret;
use hyperhive_provision::store_ca::{
    AGENT_URI_PREFIX, BACKDATE, Issued, MAX_LIFETIME, StoreCa, StoreCaError, write_ca_files,
};
use hyperhive_schedule::AgentName;
use hyperhive_testkit::ClientCertSite;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).expect("a valid agent name")
}

/// A CA written to `dir` the way a new swarm's set-up writes it, then loaded from its files.
fn store_ca(dir: &Path, now: SystemTime) -> anyhow::Result<StoreCa> {
    let files = write_ca_files(dir, "hyperhive test swarm store CA", now)?;
    Ok(StoreCa::load(&files.key_file, &files.cert_file)?)
}

/// The certificate and its key, as a TLS client presents them.
fn pem(issued: &Issued) -> String {
    format!("{}{}", issued.cert_pem, issued.key_pem.expose())
}

fn assert_refused(result: anyhow::Result<String>, alert: &str) {
    let err = result.expect_err(alert);
    let text = err.to_string().to_lowercase();
    assert!(text.contains(&alert.to_lowercase()), "expected the alert {alert}: {err:#}");
}

#[tokio::test]
async fn caddy_lets_in_only_current_certificates_from_the_store_ca() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let now = SystemTime::now();
    let ca_dir = dir.path().join("ca");
    std::fs::create_dir(&ca_dir)?;
    let ca = store_ca(&ca_dir, now - 30 * DAY)?;
    let ca_file = ca_dir.join("store-ca.pem");
    let site = ClientCertSite::start(dir.path(), &ca_file).await?;

    let started = std::time::Instant::now();
    let good = ca.issue(&agent("agent-a"), HOUR, now)?;
    let issue_time = started.elapsed();
    let body = site.get("localhost", Some(&pem(&good))).await?;
    assert!(body.contains("CN=agent-a"), "{body}");
    assert!(body.contains(&format!("{AGENT_URI_PREFIX}agent-a")), "{body}");
    eprintln!("issuing one certificate took {issue_time:?}; Caddy answered {body:?}");

    let other_dir = tempfile::tempdir()?;
    let stranger = store_ca(other_dir.path(), now - DAY)?.issue(&agent("agent-a"), HOUR, now)?;
    assert_refused(site.get("localhost", Some(&pem(&stranger))).await, "UnknownCA");

    // Issued for an hour, ten days ago.
    let expired = ca.issue(&agent("agent-a"), HOUR, now - 10 * DAY)?;
    assert!(expired.not_after < now);
    assert_refused(site.get("localhost", Some(&pem(&expired))).await, "CertificateExpired");

    assert_refused(site.get("localhost", None).await, "CertificateRequired");
    // Without SNI (an address, not a name) the same policy holds.
    assert_refused(site.get("127.0.0.1", None).await, "CertificateRequired");

    // The good one still works after the refusals.
    site.get("localhost", Some(&pem(&good))).await?;
    Ok(())
}

#[test]
fn an_issued_certificate_names_the_agent_for_client_auth_only() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let now = SystemTime::now();
    let ca = store_ca(dir.path(), now - DAY)?;
    let issued = ca.issue(&agent("builder-7"), 6 * HOUR, now)?;

    let now_secs = now.duration_since(SystemTime::UNIX_EPOCH)?.as_secs();
    let at = |secs: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    assert_eq!(issued.not_before, at(now_secs) - BACKDATE);
    assert_eq!(issued.not_after, at(now_secs) + 6 * HOUR);

    let (_, pem) = x509_parser::pem::parse_x509_pem(issued.cert_pem.as_bytes())?;
    let (_, cert) = X509Certificate::from_der(&pem.contents)?;
    assert_eq!(cert.subject().to_string(), "CN=builder-7");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes())?;
    let (_, ca_cert) = X509Certificate::from_der(&ca_pem.contents)?;
    assert_eq!(cert.issuer(), ca_cert.subject());
    assert_eq!(cert.validity().not_before.timestamp() as u64, now_secs - BACKDATE.as_secs());
    assert_eq!(cert.validity().not_after.timestamp() as u64, now_secs + 6 * 3600);

    let names = &cert.subject_alternative_name()?.context("a SAN")?.value.general_names;
    assert_eq!(names.len(), 1);
    assert!(matches!(names[0], GeneralName::URI("hyperhive:agent:builder-7")), "{names:?}");
    let eku = cert.extended_key_usage()?.context("an EKU")?.value;
    assert!(eku.client_auth && !eku.server_auth && !eku.any && !eku.code_signing && eku.other.is_empty());
    assert!(!cert.is_ca());
    let usage = cert.key_usage()?.context("a key usage")?.value;
    assert!(usage.digital_signature() && !usage.key_cert_sign());

    let serial = cert.raw_serial();
    assert_eq!(serial.len(), 16, "a 128-bit serial");
    assert!(serial[0] & 0x80 == 0 && serial[0] != 0, "positive and not shortened");
    let hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(issued.serial, hex);

    // A renewal is a new key and a new serial.
    let renewed = ca.issue(&agent("builder-7"), 6 * HOUR, now)?;
    assert_ne!(renewed.serial, issued.serial);
    assert_ne!(renewed.key_pem, issued.key_pem);
    assert!(issued.key_pem.expose().contains("BEGIN PRIVATE KEY"));
    for text in [format!("{issued:?}"), format!("{ca:?}")] {
        assert!(!text.contains("PRIVATE KEY"), "{text}");
    }
    Ok(())
}

#[test]
fn lifetimes_are_short_and_within_the_cas() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let now = SystemTime::now();
    let ca = store_ca(dir.path(), now)?;
    let name = agent("agent-a");
    for lifetime in [Duration::ZERO, Duration::from_millis(999), MAX_LIFETIME + Duration::from_secs(1)] {
        let err = ca.issue(&name, lifetime, now).expect_err("out of range");
        assert!(matches!(err, StoreCaError::InvalidLifetime { .. }), "{err}");
    }
    ca.issue(&name, MAX_LIFETIME, now)?;
    // Ten years on, the CA ends before the certificate would.
    let err = ca.issue(&name, DAY, now + 3650 * DAY).expect_err("past the CA");
    assert!(matches!(err, StoreCaError::CaExpiresFirst { .. }), "{err}");
    assert!(err.to_string().contains("valid until"), "{err}");
    Ok(())
}

#[test]
fn loading_refuses_open_keys_strangers_keys_and_certificates_that_are_not_a_ca() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let now = SystemTime::now();
    let files = write_ca_files(dir.path(), "store CA", now)?;
    assert_eq!(std::fs::metadata(&files.key_file)?.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&files.cert_file)?.permissions().mode() & 0o777, 0o644);
    let key_pem = std::fs::read_to_string(&files.key_file)?;
    let cert_pem = std::fs::read_to_string(&files.cert_file)?;

    // Written once: a second set-up never replaces the swarm's CA.
    let err = write_ca_files(dir.path(), "store CA", now).expect_err("exists");
    assert!(matches!(err, StoreCaError::AlreadyExists { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&files.key_file)?, key_pem);

    std::fs::set_permissions(&files.key_file, std::fs::Permissions::from_mode(0o644))?;
    let err = StoreCa::load(&files.key_file, &files.cert_file).expect_err("key readable by all");
    assert!(matches!(err, StoreCaError::KeyFileTooOpen { mode: 0o644, .. }), "{err}");
    assert!(err.to_string().contains("chmod 600"), "{err}");
    std::fs::set_permissions(&files.key_file, std::fs::Permissions::from_mode(0o600))?;
    StoreCa::load(&files.key_file, &files.cert_file)?;

    let err = StoreCa::load(&dir.path().join("nope.key"), &files.cert_file).expect_err("missing");
    assert!(err.to_string().contains("nope.key"), "{err}");

    let other = StoreCa::generate("another CA", now)?;
    let err = StoreCa::from_pem(&cert_pem, &other.key_pem).expect_err("a stranger's key");
    assert!(matches!(err, StoreCaError::KeyMismatch), "{err}");

    let leaf = StoreCa::from_pem(&cert_pem, &Secret::new(key_pem.clone()))?.issue(&agent("agent-a"), HOUR, now)?;
    let err = StoreCa::from_pem(&leaf.cert_pem, &leaf.key_pem).expect_err("a leaf is not a CA");
    assert!(matches!(err, StoreCaError::InvalidCertificate { .. }) && err.to_string().contains("not a CA"), "{err}");

    for (cert, key, needle) in [
        ("garbage", key_pem.as_str(), "not a PEM certificate"),
        (cert_pem.as_str(), "garbage", "not a usable PEM private key"),
        (key_pem.as_str(), key_pem.as_str(), "PRIVATE KEY\", not a CERTIFICATE"),
    ] {
        let err = StoreCa::from_pem(cert, &Secret::new(key)).expect_err(needle);
        assert!(err.to_string().contains(needle), "{needle}: {err}");
        assert!(!format!("{err} {err:?}").contains(key_pem.lines().nth(1).unwrap_or("-")), "key material in {err}");
    }

    for name in ["", "   ", "two\nlines", &"n".repeat(65)] {
        let err = StoreCa::generate(name, now).expect_err("bad common name");
        assert!(matches!(err, StoreCaError::InvalidCommonName { .. }), "{name:?}: {err}");
    }
    Ok(())
}
