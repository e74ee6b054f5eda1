//! What `init`, `mint_agent_creds` and `mint_hive_creds` write, and how they refuse.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hyperhive_nats_creds::{
    AgentName, HiveName, Minted, files, init, jwt, mint_agent_creds, mint_hive_creds, read_creds_jwt,
};

fn mode(path: &std::path::Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

#[test]
fn init_writes_secrets_0600_and_a_fragment_without_listen_or_jetstream() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nats");
    let summary = init(&out).unwrap();
    for secret in
        [files::OPERATOR_SEED, files::SWARM_SEED, files::SYSTEM_SEED, files::CONTROLLER_CREDS, files::SYSTEM_CREDS]
    {
        assert_eq!(mode(&out.join(secret)), 0o600, "{secret}");
    }
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains("resolver: MEMORY"));
    assert!(conf.contains(&format!("system_account: {}", summary.system_account)));
    assert!(conf.contains(&format!("{}: ey", summary.swarm_account)));
    let settings: Vec<&str> = conf.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    assert!(!settings.iter().any(|l| l.starts_with("listen") || l.starts_with("jetstream")), "{conf}");
    for seed in [files::OPERATOR_SEED, files::SWARM_SEED, files::SYSTEM_SEED] {
        let seed = fs::read_to_string(out.join(seed)).unwrap();
        assert!(!conf.contains(seed.trim()), "no seed in the fragment");
    }

    let system = jwt::verified_claims(&read_creds_jwt(&out.join(files::SYSTEM_CREDS)).unwrap()).unwrap();
    assert_eq!(system["iss"], summary.system_account, "system.creds is a user of the system account");
    let controller = jwt::verified_claims(&read_creds_jwt(&summary.controller_creds).unwrap()).unwrap();
    assert_eq!(controller["iss"], summary.swarm_account);
    assert!(controller.get("exp").is_none());
    // The swarm account holds JetStream within limits and exports the tenants' services.
    let swarm = jwt::verified_claims(fs::read_to_string(out.join(files::SWARM_JWT)).unwrap().trim()).unwrap();
    assert_eq!(swarm["nats"]["limits"]["max_bytes_required"], true, "no stream of unbounded size");
    assert!(swarm["nats"]["exports"].as_array().unwrap().iter().any(|e| e["subject"] == "todo.*"));
}

#[test]
fn init_refuses_to_overwrite_and_leaves_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path()).unwrap();
    let before = fs::read_to_string(dir.path().join(files::SWARM_SEED)).unwrap();
    let err = init(dir.path()).unwrap_err().to_string();
    assert!(err.contains("already exists") && err.contains("never overwrites"), "{err}");
    assert_eq!(fs::read_to_string(dir.path().join(files::SWARM_SEED)).unwrap(), before);
}

#[test]
fn each_agent_gets_an_account_of_its_own_added_to_the_fragment_once() {
    let dir = tempfile::tempdir().unwrap();
    let summary = init(dir.path()).unwrap();
    let out = dir.path().join("a.creds");
    let minted = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(3600), &out).unwrap();
    assert_eq!(minted, Minted::AccountWritten);
    assert_eq!(mode(&out), 0o600);
    assert_eq!(mode(&dir.path().join("accounts/agent-a.seed")), 0o600);

    let user = jwt::verified_claims(&read_creds_jwt(&out).unwrap()).unwrap();
    assert_eq!(user["exp"].as_u64().unwrap() - user["iat"].as_u64().unwrap(), 3600);
    assert_eq!(user["name"], "a");
    let account_jwt = fs::read_to_string(dir.path().join("accounts/agent-a.jwt")).unwrap();
    let account = jwt::verified_claims(account_jwt.trim()).unwrap();
    assert_eq!(user["iss"], account["sub"], "the user lives in a's own account");
    assert_ne!(account["sub"], summary.swarm_account);
    assert!(account["nats"]["limits"].get("disk_storage").is_none(), "no JetStream of its own");
    let imports: Vec<&str> =
        account["nats"]["imports"].as_array().unwrap().iter().map(|i| i["subject"].as_str().unwrap()).collect();
    assert!(imports.contains(&"todo.a") && !imports.iter().any(|s| s.contains(".b")), "{imports:?}");
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains(account_jwt.trim()), "the fragment preloads a's account");

    // Minting again rotates the user credential but leaves the account and the fragment alone.
    let conf_before = fs::read_to_string(&summary.server_conf).unwrap();
    let minted = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &out).unwrap();
    assert_eq!(minted, Minted::AccountUnchanged);
    assert_ne!(read_creds_jwt(&out).unwrap(), user.to_string());
    assert_eq!(fs::read_to_string(&summary.server_conf).unwrap(), conf_before);
    let again = jwt::verified_claims(&read_creds_jwt(&out).unwrap()).unwrap();
    assert_eq!(again["iss"], account["sub"], "same account, new user");

    // A second agent adds a second account; the first stays.
    mint_agent_creds(dir.path(), &agent("b"), Duration::from_secs(60), &dir.path().join("b.creds")).unwrap();
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains(account_jwt.trim()) && conf.contains("# agent-b"), "{conf}");
}

#[test]
fn a_hive_account_follows_its_agent_list() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path()).unwrap();
    let hive = HiveName::parse("h1").unwrap();
    let out = dir.path().join("h1.creds");
    let imports = || {
        let token = fs::read_to_string(dir.path().join("accounts/hive-h1.jwt")).unwrap();
        let claims = jwt::verified_claims(token.trim()).unwrap();
        claims["nats"]["imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["subject"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        mint_hive_creds(dir.path(), &hive, &[agent("a")], Duration::from_secs(60), &out).unwrap(),
        Minted::AccountWritten
    );
    assert!(imports().contains(&"todo.a".to_owned()));
    assert!(imports().contains(&"$KV.hive-status.h1".to_owned()));
    assert_eq!(
        mint_hive_creds(dir.path(), &hive, &[agent("a")], Duration::from_secs(60), &out).unwrap(),
        Minted::AccountUnchanged
    );
    assert_eq!(
        mint_hive_creds(dir.path(), &hive, &[agent("a"), agent("b")], Duration::from_secs(60), &out).unwrap(),
        Minted::AccountWritten,
        "a new agent changes the hive's grants"
    );
    assert!(imports().contains(&"todo.b".to_owned()));
    let user = jwt::verified_claims(&read_creds_jwt(&out).unwrap()).unwrap();
    assert_eq!(user["nats"]["sub"]["allow"], serde_json::json!(["_INBOX_hive-h1.>"]));
}

#[test]
fn mint_names_a_wrong_from_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.creds");
    let err = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &out).unwrap_err();
    assert!(err.to_string().contains("not a directory written by `swarm-controller nats init`"), "{err}");

    // The operator seed where the swarm account's seed should be.
    init(&dir.path().join("n")).unwrap();
    let n = dir.path().join("n");
    fs::copy(n.join(files::OPERATOR_SEED), n.join(files::SWARM_SEED)).unwrap();
    let err = mint_agent_creds(&n, &agent("a"), Duration::from_secs(60), &out).unwrap_err();
    assert!(err.to_string().contains("does not hold an account nkey seed"), "{err}");
    assert!(!out.exists());

    let err = mint_agent_creds(&n, &agent("a"), Duration::MAX, &out).unwrap_err();
    assert!(err.to_string().contains("--ttl"), "{err}");
}

#[test]
fn a_directory_of_the_older_single_account_layout_is_refused_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    for f in [files::OPERATOR_SEED, files::LEGACY_ACCOUNT_SEED] {
        fs::write(dir.path().join(f), "old").unwrap();
    }
    let out = dir.path().join("a.creds");
    let err = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &out).unwrap_err().to_string();
    assert!(err.contains("older `nats init`") && err.contains("--out NEWDIR"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_revocation_is_written_into_the_account_and_the_fragment_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path()).unwrap();
    let creds = dir.path().join("a.creds");
    mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(3600), &creds).unwrap();
    let first = hyperhive_nats_creds::revoke_agent(dir.path(), &agent("a")).unwrap();
    let claims = jwt::verified_claims(&first.jwt).unwrap();
    assert_eq!(claims["nats"]["revocations"]["*"], first.revoked_before);
    assert_eq!(claims["sub"], first.account);
    let conf = fs::read_to_string(dir.path().join(files::SERVER_CONF)).unwrap();
    assert!(conf.contains(&format!("{}: {}", first.account, first.jwt)), "the fragment carries the revoked JWT");
    assert!(!format!("{first:?}").contains("NKEY"), "the loader credential is not shown");
    let again = hyperhive_nats_creds::revoke_agent(dir.path(), &agent("a")).unwrap();
    assert_eq!((again.jwt, again.revoked_before), (first.jwt, first.revoked_before), "revoking again keeps the first");
    // An agent that never had an account gets a revoked one, so its name can never be minted.
    hyperhive_nats_creds::revoke_agent(dir.path(), &agent("never")).unwrap();
    let err = mint_agent_creds(dir.path(), &agent("never"), Duration::from_secs(3600), &creds).unwrap_err();
    assert!(err.to_string().contains("revoked"), "{err}");
}
