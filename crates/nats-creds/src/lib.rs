//! NATS decentralized-JWT credentials for a swarm, laid out so that no tenant can reach another
//! tenant's data (docs/swarm/security.md explains the layout and the attacks it stops).
//!
//! [`init`] makes the operator, the system account and the **swarm account** (JetStream, every
//! stream and bucket, exports; its only user is the controller), a `nats-server` config fragment
//! (the full account resolver, with every account preloaded) and the controller's credential.
//! [`mint_agent_creds`] and [`mint_hive_creds`] then give each agent and each hive an **account
//! of its own** that imports only its own subjects, and a user credential in it with an expiry;
//! [`mint_agent_of_hive`] does it for an agent created while the swarm runs, in memory.
//! Every account JWT that changed is returned ([`AccountJwt`]): the controller sends each to the
//! running server as a user of the system account ([`system_creds`]), which needs no reload; the
//! fragment is rewritten too, so a server started with it knows the account. [`revoke_agent`]
//! revokes every credential of a destroyed agent in its account JWT, sent the same way.
//!
//! # Layout
//! - [`jwt`]: operator, account and user JWTs (nats-io/jwt v2 encoding) and their verification.
//! - `fragment`: the `nats-server` config fragment and the resolver's directory.
//! - `tenant`: an agent's or a hive's account, written only when its grants change, and its users.
//! - `minted`: what minting returns ([`AccountJwt`], [`Minted`], [`NewAgent`], [`SecretCreds`]).
//! - [`permissions`]: what each tenant imports and may publish, and the subject names involved.
//! - [`limits`]: the limits of every account and what the swarm's streams must hold to.
//! - [`creds`]: the `.creds` format, seeds and secret files; [`files`]: the names of the files
//!   `init` writes.

pub mod creds;
mod error;
pub mod files;
mod fragment;
pub mod jwt;
pub mod limits;
mod minted;
pub mod permissions;
pub mod servers;
mod tenant;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use hyperhive_schedule::{AgentName, HiveName};
use nkeys::{KeyPair, KeyPairType};

pub use creds::{SECRET_MODE, UserCreds, parse_creds, read_creds, read_creds_jwt};
use creds::{read_seed, seed};
pub use error::CredsError;
pub use fragment::DEFAULT_RESOLVER_DIR;
use jwt::AccountSpec;
pub use jwt::Permissions;
pub use jwt::Validity;
use jwt::unix_now;
pub use minted::{AccountJwt, Minted, NewAgent, SecretCreds};
pub use permissions::{agent_permissions, hive_permissions};
use tenant::{Tenant, agent_tenant, hive_agents, hive_tenant, signing_keys};

/// Default lifetime of an agent's or a hive's credential.
pub const DEFAULT_AGENT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

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

/// [`init_with_resolver_dir`] with the resolver's directory at [`DEFAULT_RESOLVER_DIR`].
///
/// # Errors
/// As [`init_with_resolver_dir`].
pub fn init(out: &Path) -> Result<InitSummary, CredsError> {
    init_with_resolver_dir(out, Path::new(DEFAULT_RESOLVER_DIR))
}

/// Writes everything a `nats-server` and the controller need into `out` (created if absent).
/// The config fragment holds `operator`, `system_account`, the full account resolver keeping its
/// JWTs in `resolver_dir` (a path on the NATS host, which nats-server creates if it can) and a
/// `resolver_preload` of every account; the includer sets `listen` and `jetstream`.
///
/// # Errors
/// [`CredsError::BadResolverDir`] for a relative `resolver_dir` or one the config cannot quote,
/// [`CredsError::Exists`] if any of the files exists (nothing is written then), or an I/O error.
pub fn init_with_resolver_dir(out: &Path, resolver_dir: &Path) -> Result<InitSummary, CredsError> {
    use files::*;
    let resolver_dir = fragment::check_resolver_dir(resolver_dir)?;
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
        CLUSTER_NODE_EXAMPLE,
        CONTROLLER_CREDS,
        SYSTEM_CREDS,
        RESOLVER_DIR,
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
    creds::create_new(&out.join(RESOLVER_DIR), &format!("{resolver_dir}\n"), false)?;
    fs::create_dir(out.join(ACCOUNTS_DIR)).map_err(CredsError::io("create directory", &out.join(ACCOUNTS_DIR)))?;
    fragment::write(out)?;
    fragment::write_cluster_node_example(out, Path::new(resolver_dir))?;
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

/// Mints `agent`, run by `hive`, while the swarm runs: the agent's account (made on first use),
/// its hive's account gaining the agent's todo queue among its imports (made, with that agent
/// only, if the hive has none yet), and the agent's user credential, valid for `ttl`, returned
/// in memory. Nothing needs a reload: the server must be given each JWT of
/// [`NewAgent::accounts`] (through the system account) before the credential works. Minting again
/// for the same agent and hive changes no account and only renews the credential.
///
/// The fragment is **not** rewritten: it holds every account, so rewriting it for each agent
/// would make creating one cost as much as all the others together. When
/// [`NewAgent::changed`] is not empty, call [`write_fragment`] soon after (once for a burst), so
/// a server started with the fragment knows the agent too; until then such a server refuses the
/// agent (nothing is granted that the fragment does not hold).
///
/// The hive's user credential needs nothing new: it may publish to `todo.*`, and its account's
/// imports decide which queues that reaches ([`hive_permissions`]).
///
/// # Errors
/// [`CredsError::Revoked`] for a destroyed agent, a directory not written by [`init`], an I/O
/// error, or a `ttl` beyond what a JWT holds.
pub fn mint_agent_of_hive(
    from: &Path,
    hive: &HiveName,
    agent: &AgentName,
    ttl: Duration,
) -> Result<NewAgent, CredsError> {
    let at = validity_for(ttl)?;
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    fragment::upgrade(from)?;
    let agent_tenant = agent_tenant(agent);
    refuse_revoked(from, &agent_tenant)?;
    let mut agents = hive_agents(from, hive)?;
    if !agents.contains(agent) {
        agents.push(agent.clone());
    }
    let keys = signing_keys(from)?;
    let hive_tenant = hive_tenant(hive, &agents);
    let mut changed = Vec::new();
    let (account, written) = agent_tenant.write_account(from, &keys, None)?;
    changed.extend(written);
    let (_, written) = hive_tenant.write_account(from, &keys, None)?;
    changed.extend(written);
    let accounts =
        [&agent_tenant, &hive_tenant].iter().map(|tenant| tenant.current_jwt(from)).collect::<Result<Vec<_>, _>>()?;
    let creds = agent_tenant.user_creds(&account, at)?;
    Ok(NewAgent { creds, expires_at: at.expires_at.unwrap_or_default(), accounts, changed })
}

/// Rewrites the server's fragment from every account the directory holds now (after
/// [`mint_agent_of_hive`], which leaves that to its caller).
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn write_fragment(from: &Path) -> Result<(), CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    fragment::write(from)
}

/// Whether the server's fragment holds every account the directory holds now: it was written
/// after each account file last changed. Cheap at any size (file times only), so a caller can
/// ask before a [`write_fragment`], which reads every account.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn fragment_is_current(from: &Path) -> Result<bool, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    fragment::is_current(from)
}

/// Every account JWT the directory holds (system, swarm, no-jetstream, every tenant): what the
/// fragment preloads, and what a server that lost its resolver directory must be given again.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn all_account_jwts(from: &Path) -> Result<Vec<AccountJwt>, CredsError> {
    check_layout(from)?;
    fragment::all_accounts(from)
}

/// The public key of the operator that signs every account of the directory: the only signer
/// whose account JWTs may be given to the server.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn operator_public_key(from: &Path) -> Result<String, CredsError> {
    check_layout(from)?;
    let path = from.join(files::OPERATOR_JWT);
    let token = fs::read_to_string(&path).map_err(CredsError::io("read", &path))?;
    let claims = jwt::verified_claims(token.trim())?;
    claims["sub"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| CredsError::BadJwt(format!("{} names no operator", path.display())))
}

/// Mints `hive`'s credential into `out` (0600, replacing an older one), valid for `ttl`. The hive
/// may publish to the todo queues of `agents` (the agents it runs); minting again with another
/// list changes its account's grants, to exactly that list (an agent added by
/// [`mint_agent_of_hive`] and not named is dropped).
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
    mint_all(from, vec![(hive_tenant(hive, agents), out.to_path_buf())], validity_for(ttl)?)
}

/// The agents `hive`'s credential was minted for (whose todo queues its account imports), from
/// the account in `from`; empty when the hive has no account there.
///
/// # Errors
/// An account that cannot be read or does not verify.
pub fn agents_of_hive(from: &Path, hive: &HiveName) -> Result<Vec<AgentName>, CredsError> {
    hive_agents(from, hive)
}

/// Where `hive`'s account JWT lives in `from` (what [`agents_of_hive`] reads).
#[must_use]
pub fn hive_account_path(from: &Path, hive: &HiveName) -> PathBuf {
    tenant::hive_account_path(from, hive)
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The account JWT carrying the revocation.
    pub account: AccountJwt,
    /// Users issued at or before this unix time are refused.
    pub revoked_before: u64,
}

/// Revokes every credential ever minted for `agent`: its account JWT gets `revocations:
/// {"*": now}` and the server's fragment is rewritten (so a server started with it refuses them
/// too). Revoking again keeps the first revocation and writes nothing. An agent that never had
/// an account gets one, revoked, so no credential can be minted for the name later. The running
/// server learns of it only when the returned JWT is sent to it.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn revoke_agent(from: &Path, agent: &AgentName) -> Result<Revocation, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    fragment::upgrade(from)?;
    let tenant = agent_tenant(agent);
    let jwt_path = from.join(files::ACCOUNTS_DIR).join(format!("{}.jwt", tenant.account_name));
    if let Some(revoked_before) = revoked_before(&jwt_path)? {
        let token = fs::read_to_string(&jwt_path).map_err(CredsError::io("read", &jwt_path))?;
        return Ok(Revocation { account: AccountJwt::from_token(&token)?, revoked_before });
    }
    let now = unix_now();
    tenant.write_account(from, &signing_keys(from)?, Some(now))?;
    fragment::write(from)?;
    Ok(Revocation { account: tenant.current_jwt(from)?, revoked_before: now })
}

/// Brings the grants of accounts made by an older build up to this one's: the swarm account's
/// exports and each agent's and hive's account imports (a revoked agent keeps its revocation, a
/// hive the agents it imports). Returns the account JWTs rewritten, for the running server; none
/// when every account already grants what this build grants. The controller calls it at start,
/// so an upgrade that adds a subject (an agent's turn history) reaches the tenants that exist,
/// and one that takes a subject away (consumer create) is taken from them.
///
/// # Errors
/// A directory not written by [`init`], or an I/O error.
pub fn refresh_grants(from: &Path) -> Result<Vec<AccountJwt>, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    let keys = signing_keys(from)?;
    let mut changed = Vec::new();
    let swarm_path = from.join(files::SWARM_JWT);
    let existing =
        jwt::verified_claims(fs::read_to_string(&swarm_path).map_err(CredsError::io("read", &swarm_path))?.trim())?;
    if existing["nats"]["exports"] != jwt::claims_exports(&limits::swarm_account()) {
        let swarm = read_seed(&from.join(files::SWARM_SEED), KeyPairType::Account, "account")?;
        let issued_at = existing["iat"].as_u64().map_or_else(unix_now, |previous| unix_now().max(previous + 1));
        let at = Validity { issued_at, expires_at: None };
        let token = jwt::account_jwt(keys.operator_key(), &swarm.public_key(), "swarm", &limits::swarm_account(), at)?;
        creds::replace_file(&swarm_path, &format!("{token}\n"), false)?;
        changed.push(AccountJwt::from_token(&token)?);
    }
    let accounts_dir = from.join(files::ACCOUNTS_DIR);
    let (agents, hives) = account_files(from)?;
    for agent in agents {
        let tenant = agent_tenant(&agent);
        let path = accounts_dir.join(format!("{}.jwt", tenant.account_name));
        let (_, written) = tenant.write_account(from, &keys, revoked_before(&path)?)?;
        changed.extend(written);
    }
    // A hive's account keeps the agents it imports; its consumer grants follow this build's.
    for hive in hives {
        let tenant = hive_tenant(&hive, &hive_agents(from, &hive)?);
        let (_, written) = tenant.write_account(from, &keys, None)?;
        changed.extend(written);
    }
    if !changed.is_empty() {
        fragment::write(from)?;
    }
    Ok(changed)
}

/// The agents and hives that have an account in `from`, each sorted.
fn account_files(from: &Path) -> Result<(Vec<AgentName>, Vec<HiveName>), CredsError> {
    let accounts_dir = from.join(files::ACCOUNTS_DIR);
    let files: Vec<String> = fs::read_dir(&accounts_dir)
        .map_err(CredsError::io("read directory", &accounts_dir))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    let named = |prefix: &str| {
        let prefix = prefix.to_owned();
        files.iter().filter_map(move |file| Some(file.strip_prefix(&prefix)?.strip_suffix(".jwt")?.to_owned()))
    };
    let mut agents: Vec<AgentName> = named("agent-").filter_map(|n| AgentName::parse(&n).ok()).collect();
    let mut hives: Vec<HiveName> = named("hive-").filter_map(|n| HiveName::parse(&n).ok()).collect();
    agents.sort();
    hives.sort();
    Ok((agents, hives))
}

/// The tenants minted in a directory: every agent with an account that is not revoked, and
/// every hive with an account. The controller makes each one's durable consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MintedTenants {
    /// Agents whose credentials may connect.
    pub agents: Vec<AgentName>,
    /// Hives.
    pub hives: Vec<HiveName>,
}

/// The tenants minted in `from` ([`MintedTenants`]).
///
/// # Errors
/// A directory not written by [`init`], an account that cannot be read or does not verify.
pub fn minted_tenants(from: &Path) -> Result<MintedTenants, CredsError> {
    check_layout(from)?;
    let (agents, hives) = account_files(from)?;
    let accounts_dir = from.join(files::ACCOUNTS_DIR);
    let mut live = Vec::new();
    for agent in agents {
        if revoked_before(&accounts_dir.join(format!("agent-{agent}.jwt")))?.is_none() {
            live.push(agent);
        }
    }
    Ok(MintedTenants { agents: live, hives })
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

/// Refuses a revoked tenant: minting for it again would write its account without the
/// revocation and lift it silently.
fn refuse_revoked(from: &Path, tenant: &Tenant) -> Result<(), CredsError> {
    let path = from.join(files::ACCOUNTS_DIR).join(format!("{}.jwt", tenant.account_name));
    match revoked_before(&path)? {
        Some(_) => Err(CredsError::Revoked(tenant.account_name.clone())),
        None => Ok(()),
    }
}

fn validity_for(ttl: Duration) -> Result<Validity, CredsError> {
    let issued_at = unix_now();
    let expires_at = issued_at.checked_add(ttl.as_secs()).filter(|&t| t < i64::MAX as u64);
    Ok(Validity { issued_at, expires_at: Some(expires_at.ok_or(CredsError::TtlTooLong)?) })
}

/// Makes or updates each tenant's account, rewrites the fragment once if any account changed,
/// and writes each tenant's user credential.
fn mint_all(from: &Path, tenants: Vec<(Tenant, PathBuf)>, at: Validity) -> Result<Minted, CredsError> {
    check_layout(from)?;
    let _lock = lock_accounts(from)?;
    fragment::upgrade(from)?;
    // Checked for all before anything is written, so a refused batch changes nothing.
    for (tenant, _) in &tenants {
        refuse_revoked(from, tenant)?;
    }
    let keys = signing_keys(from)?;
    let mut minted = Minted::default();
    for (tenant, out) in tenants {
        let (account, written) = tenant.write_account(from, &keys, None)?;
        minted.changed.extend(written);
        tenant.user_creds(&account, at)?.write_to(&out)?;
    }
    if minted.changed_accounts() {
        fragment::write(from)?;
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
