//! The path with no pin: the proxy's certificate is checked against trusted authorities. Here
//! the authority is a local CA made for the test (given to the client configuration only; the
//! machine's trust store is never touched) and Caddy serves certificates it issued: a good one
//! connects; one for another name, an expired one and one from an unknown issuer are refused;
//! and the web PKI roots the device uses by default do not know this CA.

mod tls_support;

use std::sync::Arc;

use hyperhive_control_link::{tls_client_config, tls_client_config_with_roots};
use hyperhive_testkit::{Caddy, free_port};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::RootCertStore;
use tls_support::{BODY, get, site};

/// A certificate and key in PEM, as Caddy reads them.
struct Issued {
    cert: String,
    key: String,
}

fn local_ca() -> anyhow::Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, "hyperhive test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

fn issue(ca: &CertifiedIssuer<'static, KeyPair>, name: &str, expired: bool) -> anyhow::Result<Issued> {
    let mut params = CertificateParams::new(vec![name.to_owned()])?;
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    Ok(Issued { cert: cert.pem(), key: key.serialize_pem() })
}

fn self_signed(name: &str) -> anyhow::Result<Issued> {
    let certified = rcgen::generate_simple_self_signed(vec![name.to_owned()])?;
    Ok(Issued { cert: certified.cert.pem(), key: certified.signing_key.serialize_pem() })
}

/// One Caddy with one site per certificate, each on its own port; the ports in order.
async fn serve(certificates: &[Issued], dir: &std::path::Path) -> anyhow::Result<(Caddy, Vec<u16>)> {
    let mut sites = String::new();
    let mut ports = Vec::new();
    for (index, issued) in certificates.iter().enumerate() {
        let (cert, key) = (dir.join(format!("{index}.crt")), dir.join(format!("{index}.key")));
        std::fs::write(&cert, &issued.cert)?;
        std::fs::write(&key, &issued.key)?;
        let port = free_port();
        sites.push_str(&site(port, &cert, &key));
        ports.push(port);
    }
    let caddy = Caddy::start(&sites, &ports).await?;
    Ok((caddy, ports))
}

#[tokio::test]
async fn without_a_pin_only_a_valid_certificate_from_a_trusted_authority_connects() -> anyhow::Result<()> {
    let ca = local_ca()?;
    let dir = tempfile::tempdir()?;
    let certificates = [
        issue(&ca, "localhost", false)?,
        issue(&ca, "other.example", false)?,
        issue(&ca, "localhost", true)?,
        self_signed("localhost")?,
    ];
    let (_caddy, ports) = serve(&certificates, dir.path()).await?;
    let [good, other_name, expired, unknown_issuer] = ports[..] else { unreachable!("four sites") };

    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone())?;
    let trusting_the_ca = tls_client_config_with_roots(None, roots)?;

    let response = get(Arc::clone(&trusting_the_ca), good).await?;
    assert!(response.starts_with("HTTP/1.1 200") && response.contains(BODY), "{response}");

    for (port, needle) in [(other_name, "not valid for name"), (expired, "expired"), (unknown_issuer, "unknownissuer")]
    {
        let err = get(Arc::clone(&trusting_the_ca), port).await.expect_err(needle);
        assert!(format!("{err:#}").to_lowercase().contains(needle), "{needle}: {err:#}");
    }

    // The device's default roots (the web PKI's, compiled in) do not include this CA.
    let err = get(tls_client_config(None)?, good).await.expect_err("an unknown CA is refused");
    assert!(format!("{err:#}").to_lowercase().contains("unknownissuer"), "{err:#}");
    Ok(())
}
