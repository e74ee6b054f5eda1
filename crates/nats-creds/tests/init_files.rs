//! What `init`, `mint_agent_creds` and `mint_hive_creds` write, and how they refuse.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use hyperhive_nats_creds::{
    AgentName, DEFAULT_RESOLVER_DIR, HiveName, files, init, init_with_resolver_dir, jwt, mint_agent_creds,
    mint_agent_of_hive, mint_hive_creds, read_creds_jwt,
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
    assert!(conf.contains("type: full") && conf.contains(&format!("dir: \"{DEFAULT_RESOLVER_DIR}\"")), "{conf}");
    assert!(conf.contains("allow_delete: false") && !conf.contains("MEMORY"), "{conf}");
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

/// The cluster example is a config nats-server accepts as written (`-t` checks and exits), with
/// the fragment included, a JetStream store beside the resolver's directory and three routes.
#[test]
fn the_cluster_node_example_is_a_config_nats_server_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let resolver = dir.path().join("state/jwt");
    init_with_resolver_dir(dir.path(), &resolver).unwrap();
    let example = fs::read_to_string(dir.path().join(files::CLUSTER_NODE_EXAMPLE)).unwrap();
    assert!(example.contains(&format!("store_dir: \"{}\"", dir.path().join("state").display())), "{example}");
    assert_eq!(example.matches("nats-route://").count(), 3, "{example}");
    assert!(example.contains("include \"nats-server.conf\""), "{example}");
    let conf = dir.path().join("node.conf");
    fs::write(&conf, &example).unwrap();
    let checked = std::process::Command::new(hyperhive_testkit::tool(hyperhive_testkit::Tool::NatsServer).unwrap())
        .arg("-t")
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    assert!(checked.status.success(), "nats-server -t refused the example: {said}");
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
    assert_eq!(minted.changed.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["agent-a"]);
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
    assert_eq!(minted.changed[0].jwt, account_jwt.trim(), "the changed JWT is the one written");
    assert_eq!(minted.changed[0].account, account["sub"]);
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains(account_jwt.trim()), "the fragment preloads a's account");

    // Minting again rotates the user credential but leaves the account and the fragment alone.
    let conf_before = fs::read_to_string(&summary.server_conf).unwrap();
    let minted = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &out).unwrap();
    assert!(!minted.changed_accounts(), "{minted:?}");
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
    let mint = |agents: &[AgentName]| mint_hive_creds(dir.path(), &hive, agents, Duration::from_secs(60), &out);
    assert!(mint(&[agent("a")]).unwrap().changed_accounts());
    assert!(imports().contains(&"todo.a".to_owned()));
    assert!(imports().contains(&"$KV.hive-status.h1".to_owned()));
    assert!(!mint(&[agent("a")]).unwrap().changed_accounts());
    assert!(mint(&[agent("a"), agent("b")]).unwrap().changed_accounts(), "a new agent changes the hive's grants");
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
    let claims = jwt::verified_claims(&first.account.jwt).unwrap();
    assert_eq!(claims["nats"]["revocations"]["*"], first.revoked_before);
    assert_eq!(claims["sub"], first.account.account);
    assert_eq!(first.account.name, "agent-a");
    let conf = fs::read_to_string(dir.path().join(files::SERVER_CONF)).unwrap();
    let preloaded = format!("{}: {}", first.account.account, first.account.jwt);
    assert!(conf.contains(&preloaded), "the fragment carries the revoked JWT");
    let again = hyperhive_nats_creds::revoke_agent(dir.path(), &agent("a")).unwrap();
    assert_eq!(again, first, "revoking again keeps the first");
    // An agent that never had an account gets a revoked one, so its name can never be minted.
    hyperhive_nats_creds::revoke_agent(dir.path(), &agent("never")).unwrap();
    let err = mint_agent_creds(dir.path(), &agent("never"), Duration::from_secs(3600), &creds).unwrap_err();
    assert!(err.to_string().contains("revoked"), "{err}");
}

#[test]
fn init_records_the_resolver_directory_and_refuses_one_the_config_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nats");
    let summary = init_with_resolver_dir(&out, std::path::Path::new("/srv/nats state/jwt")).unwrap();
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains("dir: \"/srv/nats state/jwt\""), "{conf}");
    assert_eq!(fs::read_to_string(out.join(files::RESOLVER_DIR)).unwrap().trim(), "/srv/nats state/jwt");
    // Kept when the fragment is rewritten.
    mint_agent_creds(&out, &agent("a"), Duration::from_secs(60), &out.join("a.creds")).unwrap();
    assert!(fs::read_to_string(&summary.server_conf).unwrap().contains("dir: \"/srv/nats state/jwt\""));

    for (bad, why) in [("jwt", "not absolute"), ("/a\"b", "quote"), ("/a\nb", "control"), ("/$HOME", "'$'")] {
        let fresh = dir.path().join("refused");
        let err = init_with_resolver_dir(&fresh, std::path::Path::new(bad)).unwrap_err().to_string();
        assert!(err.contains(why) && err.contains("absolute path on the NATS host"), "{bad}: {err}");
        assert!(!fresh.exists(), "nothing written for {bad:?}");
    }
}

#[test]
fn a_directory_of_the_memory_resolver_is_upgraded_to_the_full_one_by_the_next_mint() {
    let dir = tempfile::tempdir().unwrap();
    let summary = init(dir.path()).unwrap();
    mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &dir.path().join("a.creds")).unwrap();
    // What an older `init` left: no resolver-dir, a memory-resolver fragment.
    fs::remove_file(dir.path().join(files::RESOLVER_DIR)).unwrap();
    fs::write(&summary.server_conf, "resolver: MEMORY\nresolver_preload: {}\n").unwrap();
    // Even a mint that changes no account (a rotation) upgrades it.
    let minted = mint_agent_creds(dir.path(), &agent("a"), Duration::from_secs(60), &dir.path().join("a.creds"));
    assert!(!minted.unwrap().changed_accounts());
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains(&format!("dir: \"{DEFAULT_RESOLVER_DIR}\"")) && !conf.contains("MEMORY"), "{conf}");
    assert!(conf.contains("# agent-a") && conf.contains("# SYS"), "every account preloaded: {conf}");
    assert_eq!(fs::read_to_string(dir.path().join(files::RESOLVER_DIR)).unwrap().trim(), DEFAULT_RESOLVER_DIR);
}

#[test]
fn an_agent_made_at_run_time_changes_its_own_and_its_hives_account_once() {
    let dir = tempfile::tempdir().unwrap();
    let summary = init(dir.path()).unwrap();
    let hive = HiveName::parse("h1").unwrap();
    mint_hive_creds(dir.path(), &hive, &[agent("a")], Duration::from_secs(60), &dir.path().join("h1.creds")).unwrap();
    let hive_jwt = || fs::read_to_string(dir.path().join("accounts/hive-h1.jwt")).unwrap().trim().to_owned();
    let before = hive_jwt();

    let new = mint_agent_of_hive(dir.path(), &hive, &agent("b"), Duration::from_secs(3600)).unwrap();
    let names: Vec<&str> = new.changed.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["agent-b", "hive-h1"]);
    assert_eq!(new.changed[1].jwt, hive_jwt(), "the hive's new JWT is returned and written");
    let claims = jwt::verified_claims(&hive_jwt()).unwrap();
    let imports: Vec<&str> =
        claims["nats"]["imports"].as_array().unwrap().iter().map(|i| i["subject"].as_str().unwrap()).collect();
    assert!(imports.contains(&"todo.a") && imports.contains(&"todo.b"), "a is kept, b added: {imports:?}");
    let iat = |token: &str| jwt::verified_claims(token).unwrap()["iat"].as_u64().unwrap();
    assert!(iat(&hive_jwt()) > iat(&before), "a replacing JWT is strictly newer");
    // The fragment is left behind until it is written, and says so.
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(!conf.contains(&new.changed[0].jwt), "not preloaded before the fragment is written");
    assert!(!hyperhive_nats_creds::fragment_is_current(dir.path()).unwrap());
    // File times tick coarsely (a tie counts as behind): the accounts are made a second older, so
    // the fragment written now is strictly newer.
    let second_ago = std::time::SystemTime::now() - Duration::from_secs(1);
    for entry in fs::read_dir(dir.path()).unwrap().chain(fs::read_dir(dir.path().join("accounts")).unwrap()) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jwt") {
            fs::File::options().write(true).open(&path).unwrap().set_modified(second_ago).unwrap();
        }
    }
    hyperhive_nats_creds::write_fragment(dir.path()).unwrap();
    assert!(hyperhive_nats_creds::fragment_is_current(dir.path()).unwrap());
    let conf = fs::read_to_string(&summary.server_conf).unwrap();
    assert!(conf.contains(&new.changed[0].jwt) && conf.contains(&hive_jwt()), "both preloaded");

    // The credential is in memory only, shown nowhere, and is a user of b's own account.
    assert!(!dir.path().join("agent-b.creds").exists());
    let seed = new.creds.expose().lines().find(|l| l.starts_with("SU")).expect("a user seed").to_owned();
    assert!(!format!("{new:?}").contains(&seed), "the seed is not shown");
    let creds = dir.path().join("b.creds");
    new.creds.write_to(&creds).unwrap();
    assert_eq!(mode(&creds), 0o600);
    let user = jwt::verified_claims(&read_creds_jwt(&creds).unwrap()).unwrap();
    assert_eq!(user["iss"], new.changed[0].account);
    assert_eq!(user["exp"].as_u64(), Some(new.expires_at));

    // Again: a new credential, no account changed.
    let again = mint_agent_of_hive(dir.path(), &hive, &agent("b"), Duration::from_secs(3600)).unwrap();
    assert!(again.changed.is_empty(), "{again:?}");
    assert_ne!(again.creds, new.creds);

    // A hive without an account gets one naming the agent; a revoked agent is refused.
    let other = HiveName::parse("h2").unwrap();
    let made = mint_agent_of_hive(dir.path(), &other, &agent("c"), Duration::from_secs(60)).unwrap();
    assert_eq!(made.changed.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["agent-c", "hive-h2"]);
    hyperhive_nats_creds::revoke_agent(dir.path(), &agent("c")).unwrap();
    let err = mint_agent_of_hive(dir.path(), &other, &agent("c"), Duration::from_secs(60)).unwrap_err().to_string();
    assert!(err.contains("revoked"), "{err}");
}
