//! What `init` and `mint_agent_creds` write, and how they refuse.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hyperhive_nats_creds::{AgentName, files, init, jwt, mint_agent_creds, read_creds_jwt};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_writes_secrets_0600_and_a_fragment_without_listen_or_jetstream() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nats");
    let summary = init(&out).unwrap();
    for secret in [files::OPERATOR_SEED, files::ACCOUNT_SEED, files::SYSTEM_SEED, files::CONTROLLER_CREDS] {
        assert_eq!(mode(&out.join(secret)), 0o600, "{secret}");
    }
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains("resolver: MEMORY"));
    assert!(conf.contains(&format!("system_account: {}", summary.system_account)));
    assert!(conf.contains(&format!("{}: ey", summary.account)));
    let settings: Vec<&str> = conf.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(!settings.iter().any(|l| l.starts_with("listen") || l.starts_with("jetstream")), "{conf}");
    for seed in [files::OPERATOR_SEED, files::ACCOUNT_SEED, files::SYSTEM_SEED] {
        let seed = fs::read_to_string(out.join(seed)).unwrap();
        assert!(!conf.contains(seed.trim()), "no seed in the fragment");
    }

    let controller = jwt::verified_claims(&read_creds_jwt(&summary.controller_creds).unwrap()).unwrap();
    assert_eq!(controller["iss"], summary.account);
    assert!(controller.get("exp").is_none());
}

#[test]
fn init_refuses_to_overwrite_and_leaves_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path()).unwrap();
    let before = fs::read_to_string(dir.path().join(files::ACCOUNT_SEED)).unwrap();
    let err = init(dir.path()).unwrap_err().to_string();
    assert!(err.contains("already exists") && err.contains("never overwrites"), "{err}");
    assert_eq!(fs::read_to_string(dir.path().join(files::ACCOUNT_SEED)).unwrap(), before);
}

#[test]
fn minted_creds_expire_after_the_ttl_and_are_0600() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path()).unwrap();
    let out = dir.path().join("a.creds");
    let agent = AgentName::parse("a").unwrap();
    mint_agent_creds(dir.path(), &agent, Duration::from_secs(3600), &out).unwrap();
    assert_eq!(mode(&out), 0o600);
    let claims = jwt::verified_claims(&read_creds_jwt(&out).unwrap()).unwrap();
    let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
    assert_eq!(lifetime, 3600);
    assert_eq!(claims["name"], "a");
    // Minting again replaces the credential (rotation).
    mint_agent_creds(dir.path(), &agent, Duration::from_secs(60), &out).unwrap();
    assert_ne!(read_creds_jwt(&out).unwrap(), claims.to_string());
}

#[test]
fn mint_names_a_wrong_from_directory() {
    let dir = tempfile::tempdir().unwrap();
    let agent = AgentName::parse("a").unwrap();
    let out = dir.path().join("a.creds");
    let err = mint_agent_creds(dir.path(), &agent, Duration::from_secs(60), &out).unwrap_err();
    assert!(err.to_string().contains("account.seed"), "{err}");

    // The operator seed where the account seed should be.
    init(&dir.path().join("n")).unwrap();
    fs::copy(dir.path().join("n").join(files::OPERATOR_SEED), dir.path().join(files::ACCOUNT_SEED)).unwrap();
    let err = mint_agent_creds(dir.path(), &agent, Duration::from_secs(60), &out).unwrap_err();
    assert!(err.to_string().contains("does not hold an account nkey seed"), "{err}");
    assert!(!out.exists());

    let err = mint_agent_creds(&dir.path().join("n"), &agent, Duration::MAX, &out).unwrap_err();
    assert!(err.to_string().contains("--ttl"), "{err}");
}
