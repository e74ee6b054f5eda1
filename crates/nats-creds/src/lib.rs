//! NATS decentralized-JWT credentials for a swarm, laid out so that no tenant can reach another
//! tenant's data (docs/swarm/security.md explains the layout and the attacks it stops).
//!
//! [`init`] makes the operator, the system account and the **swarm account** (JetStream, every
//! stream and bucket, exports; its only user is the controller), a `nats-server` config fragment
//! and the controller's credential. [`mint_agent_creds`] and [`mint_hive_creds`] then give each
//! agent and each hive an **account of its own** that imports only its own subjects, and a user
//! credential in it with an expiry. A new tenant account is added to the fragment, which the
//! server must then load again (`nats-server --signal reload` or a restart). [`revoke_agent`]
//! revokes every credential of a destroyed agent in its account JWT and the fragment; the
//! controller then sends that JWT to the running server with the system user ([`system_creds`]).
//!
//! # Layout
//! - [`jwt`]: operator, account and user JWTs (nats-io/jwt v2 encoding) and their verification.
//! - [`permissions`]: what each tenant imports and may publish, and the subject names involved.
//! - [`limits`]: the limits of every account and what the swarm's streams must hold to.
//! - [`creds`]: the `.creds` format and secret files.

pub mod creds;
mod error;
pub mod jwt;
pub mod limits;
pub mod permissions;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use hyperhive_schedule::{AgentName, HiveName};
use nkeys::{KeyPair, KeyPairType};

pub use creds::{SECRET_MODE, read_creds_jwt};
pub use error::CredsError;
pub use jwt::Validity;
use jwt::{AccountSpec, ServiceImport};
pub use permissions::{
    AGENT_WANTED_BUCKET, DEPLOY_STREAM, HIVE_STATUS_BUCKET, Permissions, agent_durable_name, agent_inbox_prefix,
    agent_permissions, agent_schedule_direct_get_subject, agent_terminal_subject, agent_turn_subject, deploy_subject,
    hive_durable_name, hive_inbox_prefix, hive_permissions, hive_status_subject, hive_wanted_filter,
};

/// Default lifetime of an agent's or a hive's credential.
pub const DEFAULT_AGENT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// File names `init` writes inside its `--out` directory.
pub mod files {
    /// Operator seed (0600): signs account JWTs, so every new agent or hive needs it; keep the
    /// directory offline.
    pub const OPERATOR_SEED: &str = "operator.seed";
    /// Operator JWT.
    pub const OPERATOR_JWT: &str = "operator.jwt";
    /// Swarm account seed (0600): signs the controller's credential.
    pub const SWARM_SEED: &str = "swarm.seed";
    /// Swarm account JWT (exports, JetStream limits).
    pub const SWARM_JWT: &str = "swarm.jwt";
    /// System account seed (0600).
    pub const SYSTEM_SEED: &str = "system.seed";
    /// System account JWT.
    pub const SYSTEM_JWT: &str = "system.jwt";
    /// An account with no users and no JetStream: tenants import `$JS.API.INFO` from it (see
    /// [`crate::permissions::JS_INFO`]).
    pub const NO_JETSTREAM_JWT: &str = "no-jetstream.jwt";
    /// The `nats-server` config fragment to `include`; rewritten when a tenant account is added.
    pub const SERVER_CONF: &str = "nats-server.conf";
    /// The controller's own credential (0600), unrestricted inside the swarm account.
    pub const CONTROLLER_CREDS: &str = "controller.creds";
    /// A user of the system account (0600): the controller sends updated account JWTs (a
    /// revocation) to the running server with it. An older `init` did not write it;
    /// [`crate::system_creds`] makes it from `system.seed` on first need.
    pub const SYSTEM_CREDS: &str = "system.creds";
    /// Tenant accounts: `agent-<name>.seed` (0600) and `.jwt`, `hive-<name>.seed` and `.jwt`.
    pub const ACCOUNTS_DIR: &str = "accounts";
    /// What an older `nats init` wrote, whose agent credentials shared the swarm account.
    pub const LEGACY_ACCOUNT_SEED: &str = "account.seed";
}

/// What [`init`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitSummary {
    /// The operator's public key.
    pub operator: String,
    /// The swarm account's public key (every stream and bucket lives in it).
    pub swarm_account: String,
    /// The system account's public key.
    pub system_account: String,
    /// The `nats-server` config fragment.
    pub server_conf: PathBuf,
    /// The controller's credential.
    pub controller_creds: PathBuf,
}

/// What minting a tenant's credential did to the server's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Minted {
    /// The tenant's account was already in the fragment with these grants: the credential works
    /// at once.
    AccountUnchanged,
    /// The tenant's account was added or its grants changed: the fragment was rewritten and the
    /// server must load it again before the credential works.
    AccountWritten,
}

/// Writes everything a `nats-server` and the controller need into `out` (created if absent).
/// The config fragment holds `operator`, `system_account`, `resolver: MEMORY` and
/// `resolver_preload`; the includer sets `listen` and `jetstream`.
///
/// # Errors
/// [`CredsError::Exists`] if any of the files exists (nothing is written then), or an I/O error.
pub fn init(out: &Path) -> Result<InitSummary, CredsError> {
    use files::*;
    fs::create_dir_all(out).map_err(CredsError::io("create directory", out))?;
    let all = [
        OPERATOR_SEED,
        OPERATOR_JWT,
        SWARM_SEED,
        SWARM_JWT,
        SYSTEM_SEED,
        SYSTEM_JWT,
        NO_JETSTREAM_JWT,
        SERVER_CONF,
        CONTROLLER_CREDS,
        SYSTEM_CREDS,
        ACCOUNTS_DIR,
        LEGACY_ACCOUNT_SEED,
    ];
    if let Some(existing) = all.iter().map(|f| out.join(f)).find(|p| p.exists()) {
        return Err(CredsError::Exists(existing));
    }

    let at = Validity { issued_at: unix_now(), expires_at: None };
    let operator = KeyPair::new_operator();
    let swarm = KeyPair::new_account();
    let system = KeyPair::new_account();
    let controller = KeyPair::new_user();
    let operator_jwt = jwt::operator_jwt(&operator, "hyperhive", &system.public_key(), at)?;
    let swarm_jwt = jwt::account_jwt(&operator, &swarm.public_key(), "swarm", &limits::swarm_account(), at)?;
    let system_jwt = jwt::account_jwt(&operator, &system.public_key(), "SYS", &AccountSpec::default(), at)?;
    let no_jetstream = KeyPair::new_account();
    let no_jetstream_jwt =
        jwt::account_jwt(&operator, &no_jetstream.public_key(), "no-jetstream", &limits::no_jetstream_account(), at)?;
    let controller_jwt = jwt::user_jwt(&swarm, &controller.public_key(), "swarm-controller", None, at)?;

    let secret = |f, kp: &KeyPair| -> Result<(), CredsError> {
        creds::create_new(&out.join(f), &format!("{}\n", seed(kp)?), true)
    };
    secret(OPERATOR_SEED, &operator)?;
    secret(SWARM_SEED, &swarm)?;
    secret(SYSTEM_SEED, &system)?;
    creds::create_new(&out.join(OPERATOR_JWT), &format!("{operator_jwt}\n"), false)?;
    creds::create_new(&out.join(SWARM_JWT), &format!("{swarm_jwt}\n"), false)?;
    creds::create_new(&out.join(SYSTEM_JWT), &format!("{system_jwt}\n"), false)?;
    creds::create_new(&out.join(NO_JETSTREAM_JWT), &format!("{no_jetstream_jwt}\n"), false)?;
    fs::create_dir(out.join(ACCOUNTS_DIR)).map_err(CredsError::io("create directory", &out.join(ACCOUNTS_DIR)))?;
    write_server_conf(out)?;
    creds::create_new(&out.join(CONTROLLER_CREDS), &creds::format_creds(&controller_jwt, &seed(&controller)?), true)?;
    write_system_creds(out, &system)?;
    Ok(InitSummary {
        operator: operator.public_key(),
        swarm_account: swarm.public_key(),
        system_account: system.public_key(),
        server_conf: out.join(SERVER_CONF),
        controller_creds: out.join(CONTROLLER_CREDS),
    })
}

/// Mints `agent`'s credential into `out` (0600, replacing an older one), valid for `ttl` from
/// now, from the directory [`init`] wrote. The agent's account is made on first use.
///
/// # Errors
/// A directory not written by [`init`], an I/O error, or a `ttl` beyond what a JWT holds.
pub fn mint_agent_creds(from: &Path, agent: &AgentName, ttl: Duration, out: &Path) -> Result<Minted, CredsError> {
    write_agent_creds(from, agent, validity_for(ttl)?, out)
}

/// [`mint_agent_creds`] with an explicit validity (tests mint expired credentials with it).
///
/// # Errors
/// As [`mint_agent_creds`].
pub fn write_agent_creds(from: &Path, agent: &AgentName, at: Validity, out: &Path) -> Result<Minted, CredsError> {
    mint_all(from, vec![(agent_tenant(agent), out.to_path_buf())], at)
}

/// Mints the credential of each `(agent, file)`, writing the server's fragment once for all of
/// them (minting agents one by one rewrites it each time).
///
/// # Errors
/// As [`mint_agent_creds`].
pub fn mint_many_agent_creds(
    from: &Path,
    agents: &[(AgentName, PathBuf)],
    ttl: Duration,
) -> Result<Minted, CredsError> {
    let tenants = agents.iter().map(|(agent, out)| (agent_tenant(agent), out.clone())).collect();
    mint_all(from, tenants, validity_for(ttl)?)
}

fn agent_tenant(agent: &AgentName) -> Tenant {
    Tenant {
        account_name: format!("agent-{agent}"),
        user_name: agent.to_string(),
        imports: permissions::agent_imports(agent),
        account_limits: limits::agent_account(),
        permissions: agent_permissions(agent),
    }
}

/// Mints `hive`'s credential into `out` (0600, replacing an older one), valid for `ttl`. The hive
/// may publish to the todo queues of `agents` (the agents it runs); minting again with another
/// list changes its account's grants.
///
/// # Errors
/// As [`mint_agent_creds`].
pub fn mint_hive_creds(
    from: &Path,
    hive: &HiveName,
    agents: &[AgentName],
    ttl: Duration,
    out: &Path,
) -> Result<Minted, CredsError> {
    let tenant = Tenant {
        account_name: format!("hive-{hive}"),
        user_name: format!("hive-{hive}"),
        imports: permissions::hive_imports(hive, agents),
        account_limits: limits::hive_account(),
        permissions: hive_permissions(hive, agents),
    };
    mint_all(from, vec![(tenant, out.to_path_buf())], validity_for(ttl)?)
}

/// `from`'s system-account user credential, made from `system.seed` when an older [`init`]
/// did not write it.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn system_creds(from: &Path) -> Result<PathBuf, CredsError> {
    check_layout(from)?;
    let path = from.join(files::SYSTEM_CREDS);
    if path.exists() {
        return Ok(path);
    }
    let system = read_seed(&from.join(files::SYSTEM_SEED), KeyPairType::Account, "account")?;
    match write_system_creds(from, &system) {
        // Made at the same moment by another caller: theirs is as good.
        Ok(()) | Err(CredsError::Exists(_)) => Ok(path),
        Err(err) => Err(err),
    }
}

fn write_system_creds(dir: &Path, system: &KeyPair) -> Result<(), CredsError> {
    let user = KeyPair::new_user();
    let at = Validity { issued_at: unix_now(), expires_at: None };
    let user_jwt = jwt::user_jwt(system, &user.public_key(), "swarm-controller-system", None, at)?;
    creds::create_new(&dir.join(files::SYSTEM_CREDS), &creds::format_creds(&user_jwt, &seed(&user)?), true)
}

/// An agent's revoked account, to be sent to the running server.
#[derive(Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The account's public key (`$SYS.REQ.ACCOUNT.<account>.CLAIMS.UPDATE`).
    pub account: String,
    /// The account JWT carrying the revocation (public: it holds no secret).
    pub jwt: String,
    /// Users issued at or before this unix time are refused.
    pub revoked_before: u64,
    /// A `.creds` text of a one-off user of the account, issued at `revoked_before` (so the
    /// revocation covers it) and allowed no real subject. Connecting with it makes a server
    /// running `resolver: MEMORY` load the account, which it must have loaded to apply the
    /// update. A secret: held in memory only, never written or logged.
    pub loader_creds: String,
}

impl std::fmt::Debug for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocation")
            .field("account", &self.account)
            .field("revoked_before", &self.revoked_before)
            .field("loader_creds", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// The subject the loader user may use: nothing listens or answers there.
const LOADER_SUBJECT: &str = "_hyperhive_revocation_loader";

/// Revokes every credential ever minted for `agent`: its account JWT gets `revocations:
/// {"*": now}` and the server's fragment is rewritten (so a restarted or reloaded server refuses
/// them too). Revoking again keeps the first revocation and writes nothing. An agent that never
/// had an account gets one, revoked, so no credential can be minted for the name later. The
/// running server learns of it only when the returned JWT is sent to it.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn revoke_agent(from: &Path, agent: &AgentName) -> Result<Revocation, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    let tenant = agent_tenant(agent);
    let accounts = from.join(files::ACCOUNTS_DIR);
    let jwt_path = accounts.join(format!("{}.jwt", tenant.account_name));
    let (account, jwt, revoked_before) = match revoked_before(&jwt_path)? {
        Some(at) => {
            let seed_path = accounts.join(format!("{}.seed", tenant.account_name));
            let account = read_seed(&seed_path, KeyPairType::Account, "account")?;
            let jwt = fs::read_to_string(&jwt_path).map_err(CredsError::io("read", &jwt_path))?.trim().to_owned();
            (account, jwt, at)
        }
        None => {
            let (operator, swarm, no_jetstream) = signing_keys(from)?;
            let now = unix_now();
            let (account, jwt) = tenant.write_account(from, &operator, &swarm, &no_jetstream, Some(now))?;
            write_server_conf(from)?;
            (account, jwt, now)
        }
    };
    let loader = KeyPair::new_user();
    let inert =
        Permissions { publish_allow: vec![LOADER_SUBJECT.into()], subscribe_allow: vec![LOADER_SUBJECT.into()] };
    let at = Validity { issued_at: revoked_before, expires_at: None };
    let loader_jwt = jwt::user_jwt(&account, &loader.public_key(), "revocation-loader", Some(&inert), at)?;
    Ok(Revocation {
        account: account.public_key(),
        jwt,
        revoked_before,
        loader_creds: creds::format_creds(&loader_jwt, &seed(&loader)?),
    })
}

/// When the account JWT at `path` revokes all its users, if it does (`None` also when absent).
fn revoked_before(path: &Path) -> Result<Option<u64>, CredsError> {
    let token = match fs::read_to_string(path) {
        Ok(token) => token,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CredsError::io("read", path)(e)),
    };
    let claims = jwt::verified_claims(token.trim())?;
    Ok(claims["nats"]["revocations"]["*"].as_u64())
}

fn validity_for(ttl: Duration) -> Result<Validity, CredsError> {
    let issued_at = unix_now();
    let expires_at = issued_at.checked_add(ttl.as_secs()).filter(|&t| t < i64::MAX as u64);
    Ok(Validity { issued_at, expires_at: Some(expires_at.ok_or(CredsError::TtlTooLong)?) })
}

/// An agent or a hive: its own account importing `imports` from the swarm account, and one user.
struct Tenant {
    account_name: String,
    user_name: String,
    imports: Vec<String>,
    account_limits: jwt::AccountLimits,
    permissions: Permissions,
}

/// Makes or updates each tenant's account, rewrites the fragment once if any account changed,
/// and writes each tenant's user credential.
fn mint_all(from: &Path, tenants: Vec<(Tenant, PathBuf)>, at: Validity) -> Result<Minted, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    let accounts = from.join(files::ACCOUNTS_DIR);
    // Checked for all before anything is written, so a refused batch changes nothing.
    for (tenant, _) in &tenants {
        if revoked_before(&accounts.join(format!("{}.jwt", tenant.account_name)))?.is_some() {
            return Err(CredsError::Revoked(tenant.account_name.clone()));
        }
    }
    let (operator, swarm, no_jetstream) = signing_keys(from)?;
    let mut minted = Minted::AccountUnchanged;
    for (tenant, out) in tenants {
        let jwt_path = accounts.join(format!("{}.jwt", tenant.account_name));
        let before = fs::read_to_string(&jwt_path).ok();
        let (account, written) = tenant.write_account(from, &operator, &swarm, &no_jetstream, None)?;
        if before.as_deref().map(str::trim) != Some(written.as_str()) {
            minted = Minted::AccountWritten;
        }
        let user = KeyPair::new_user();
        let user_jwt = jwt::user_jwt(&account, &user.public_key(), &tenant.user_name, Some(&tenant.permissions), at)?;
        creds::replace_file(&out, &creds::format_creds(&user_jwt, &seed(&user)?), true)?;
    }
    if minted == Minted::AccountWritten {
        write_server_conf(from)?;
    }
    Ok(minted)
}

/// Holds the lock on `accounts/` while alive. Two mints (or a mint and a revocation) at once
/// would each rewrite the fragment from the accounts they saw, and the later one could drop the
/// account the other added or revoked.
fn lock_accounts(from: &Path) -> Result<fs::File, CredsError> {
    let lock_path = from.join(files::ACCOUNTS_DIR).join(".lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(CredsError::io("open", &lock_path))?;
    lock.lock().map_err(CredsError::io("lock", &lock_path))?;
    Ok(lock)
}

/// The operator key (signs tenant accounts), the swarm account's and the no-JetStream account's
/// public keys (tenants import from them).
fn signing_keys(from: &Path) -> Result<(KeyPair, String, String), CredsError> {
    let operator = read_seed(&from.join(files::OPERATOR_SEED), KeyPairType::Operator, "operator")?;
    let swarm = read_seed(&from.join(files::SWARM_SEED), KeyPairType::Account, "account")?.public_key();
    let no_jetstream = account_key_of(&from.join(files::NO_JETSTREAM_JWT))?;
    Ok((operator, swarm, no_jetstream))
}

impl Tenant {
    /// The tenant's account key (made on first use) and its account JWT as it now stands: left
    /// alone when it already grants the same, else (re)written.
    fn write_account(
        &self,
        from: &Path,
        operator: &KeyPair,
        swarm: &str,
        no_jetstream: &str,
        revoked_before: Option<u64>,
    ) -> Result<(KeyPair, String), CredsError> {
        let accounts = from.join(files::ACCOUNTS_DIR);
        let seed_path = accounts.join(format!("{}.seed", self.account_name));
        let account = match fs::read_to_string(&seed_path) {
            Ok(_) => read_seed(&seed_path, KeyPairType::Account, "account")?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = KeyPair::new_account();
                creds::create_new(&seed_path, &format!("{}\n", seed(&fresh)?), true)?;
                fresh
            }
            Err(e) => return Err(CredsError::io("read", &seed_path)(e)),
        };
        let own = |subject: &String| ServiceImport { account: swarm.to_owned(), subject: subject.clone() };
        let spec = AccountSpec {
            jetstream: None,
            limits: self.account_limits,
            exports: Vec::new(),
            imports: std::iter::once(ServiceImport {
                account: no_jetstream.to_owned(),
                subject: permissions::JS_INFO.to_owned(),
            })
            .chain(self.imports.iter().map(own))
            .collect(),
            revoked_before,
        };
        let now = Validity { issued_at: unix_now(), expires_at: None };
        let account_jwt = jwt::account_jwt(operator, &account.public_key(), &self.account_name, &spec, now)?;
        let jwt_path = accounts.join(format!("{}.jwt", self.account_name));
        if let Some(existing) = same_grants(&jwt_path, &account_jwt) {
            return Ok((account, existing));
        }
        creds::replace_file(&jwt_path, &format!("{account_jwt}\n"), false)?;
        Ok((account, account_jwt))
    }
}

/// The account JWT at `path` if it grants what `wanted` grants (same key, name and claims, so
/// re-minting a user credential leaves the server's configuration alone).
fn same_grants(path: &Path, wanted: &str) -> Option<String> {
    let existing = fs::read_to_string(path).ok()?.trim().to_owned();
    let grants = |token: &str| {
        jwt::verified_claims(token)
            .ok()
            .map(|c| (c["iss"].clone(), c["sub"].clone(), c["name"].clone(), c["nats"].clone()))
    };
    let before = grants(&existing);
    (before.is_some() && before == grants(wanted)).then_some(existing)
}

/// The public key of the account whose JWT is at `path`.
fn account_key_of(path: &Path) -> Result<String, CredsError> {
    let token = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    let claims = jwt::verified_claims(token.trim())?;
    claims["sub"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| CredsError::BadJwt(format!("{} names no account", path.display())))
}

/// Refuses a directory that is not an [`init`] directory of this layout, saying what to do.
fn check_layout(from: &Path) -> Result<(), CredsError> {
    if from.join(files::LEGACY_ACCOUNT_SEED).exists() && !from.join(files::SWARM_SEED).exists() {
        return Err(CredsError::LegacyLayout(from.to_path_buf()));
    }
    let accounts = from.join(files::ACCOUNTS_DIR);
    if !from.join(files::OPERATOR_SEED).exists() || !accounts.is_dir() {
        return Err(CredsError::NotInitDir(from.to_path_buf()));
    }
    Ok(())
}

/// Writes the fragment from the operator, system and swarm JWTs and every tenant account JWT in
/// `accounts/`, in name order, replacing the old one atomically.
fn write_server_conf(dir: &Path) -> Result<(), CredsError> {
    use files::*;
    let read_jwt = |path: &Path| -> Result<String, CredsError> {
        Ok(fs::read_to_string(path).map_err(CredsError::io("read", path))?.trim().to_owned())
    };
    let operator = read_jwt(&dir.join(OPERATOR_JWT))?;
    let mut accounts =
        vec![read_jwt(&dir.join(SYSTEM_JWT))?, read_jwt(&dir.join(SWARM_JWT))?, read_jwt(&dir.join(NO_JETSTREAM_JWT))?];
    let tenants_dir = dir.join(ACCOUNTS_DIR);
    let mut tenants: Vec<PathBuf> = fs::read_dir(&tenants_dir)
        .map_err(CredsError::io("read directory", &tenants_dir))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jwt"))
        .collect();
    tenants.sort();
    for path in &tenants {
        accounts.push(read_jwt(path)?);
    }
    let mut preload = String::new();
    let mut system = String::new();
    for token in &accounts {
        let claims = jwt::verified_claims(token)?;
        let (key, name) = (claims["sub"].as_str().unwrap_or_default(), claims["name"].as_str().unwrap_or_default());
        if name == "SYS" {
            system = key.to_owned();
        }
        preload.push_str(&format!("  # {name}\n  {key}: {token}\n"));
    }
    let conf = format!(
        "# Written by `swarm-controller nats init` and rewritten by `nats agent-creds` and\n\
         # `nats hive-creds` when they add an account: decentralized JWT auth for the swarm.\n\
         # Include it from a config that sets `listen` and `jetstream`.\n\
         operator: {operator}\n\
         system_account: {system}\n\
         resolver: MEMORY\n\
         resolver_preload: {{\n{preload}}}\n"
    );
    creds::replace_file(&dir.join(SERVER_CONF), &conf, false)
}

fn read_seed(path: &Path, kind: KeyPairType, expected: &'static str) -> Result<KeyPair, CredsError> {
    let text = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    let bad = || CredsError::BadSeed { path: path.to_path_buf(), expected };
    let key = KeyPair::from_seed(text.trim()).map_err(|_| bad())?;
    if key.key_pair_type() != kind {
        return Err(bad());
    }
    Ok(key)
}

fn seed(key: &KeyPair) -> Result<String, CredsError> {
    key.seed().map_err(|e| CredsError::Key(e.to_string()))
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
