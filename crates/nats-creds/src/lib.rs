//! NATS decentralized-JWT credentials for a swarm (DESIGN 4.2).
//!
//! [`init`] makes the operator, the swarm account (JetStream enabled) and the system account,
//! their JWTs, a `nats-server` config fragment with a memory resolver, the controller's own
//! credential and the account seed that signs agents' credentials. [`mint_agent_creds`] then makes
//! an agent's `.creds` with an expiry and exactly [`agent_permissions`]: no server change needed.
//!
//! # Layout
//! - [`jwt`]: operator, account and user JWTs (nats-io/jwt v2 encoding) and their verification.
//! - [`permissions`]: the agent's grant and the subject names it refers to.
//! - [`creds`]: the `.creds` format and secret files.

pub mod creds;
mod error;
pub mod jwt;
pub mod permissions;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use hyperhive_schedule::AgentName;
use nkeys::{KeyPair, KeyPairType};

pub use creds::{SECRET_MODE, read_creds_jwt};
pub use error::CredsError;
pub use jwt::Validity;
pub use permissions::{
    Permissions, agent_durable_name, agent_inbox_prefix, agent_permissions, agent_schedule_direct_get_subject,
    agent_terminal_subject, agent_turn_subject,
};

/// Default lifetime of an agent credential.
pub const DEFAULT_AGENT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// File names `init` writes inside its `--out` directory.
pub mod files {
    /// Operator seed (0600): signs account JWTs; keep it offline after init.
    pub const OPERATOR_SEED: &str = "operator.seed";
    /// Operator JWT.
    pub const OPERATOR_JWT: &str = "operator.jwt";
    /// Swarm account seed (0600): signs users' credentials.
    pub const ACCOUNT_SEED: &str = "account.seed";
    /// Swarm account JWT.
    pub const ACCOUNT_JWT: &str = "account.jwt";
    /// System account seed (0600).
    pub const SYSTEM_SEED: &str = "system.seed";
    /// System account JWT.
    pub const SYSTEM_JWT: &str = "system.jwt";
    /// The `nats-server` config fragment to `include`.
    pub const SERVER_CONF: &str = "nats-server.conf";
    /// The controller's own credential (0600), unrestricted inside the swarm account.
    pub const CONTROLLER_CREDS: &str = "controller.creds";
}

/// What [`init`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitSummary {
    /// The operator's public key.
    pub operator: String,
    /// The swarm account's public key (all swarm traffic lives in it).
    pub account: String,
    /// The system account's public key.
    pub system_account: String,
    /// The `nats-server` config fragment.
    pub server_conf: PathBuf,
    /// The controller's credential.
    pub controller_creds: PathBuf,
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
        ACCOUNT_SEED,
        ACCOUNT_JWT,
        SYSTEM_SEED,
        SYSTEM_JWT,
        SERVER_CONF,
        CONTROLLER_CREDS,
    ];
    if let Some(existing) = all.iter().map(|f| out.join(f)).find(|p| p.exists()) {
        return Err(CredsError::Exists(existing));
    }

    let at = Validity { issued_at: unix_now(), expires_at: None };
    let operator = KeyPair::new_operator();
    let account = KeyPair::new_account();
    let system = KeyPair::new_account();
    let controller = KeyPair::new_user();
    let operator_jwt = jwt::operator_jwt(&operator, "hyperhive", &system.public_key(), at)?;
    let account_jwt = jwt::account_jwt(&operator, &account.public_key(), "swarm", true, at)?;
    let system_jwt = jwt::account_jwt(&operator, &system.public_key(), "SYS", false, at)?;
    let controller_jwt = jwt::user_jwt(&account, &controller.public_key(), "swarm-controller", None, at)?;
    let server_conf = format!(
        "# Written by `swarm-controller nats init`: decentralized JWT auth for the swarm.\n\
         # Include it from a config that sets `listen` and `jetstream`.\n\
         operator: {operator_jwt}\n\
         system_account: {sys}\n\
         resolver: MEMORY\n\
         resolver_preload: {{\n  {acc}: {account_jwt}\n  {sys}: {system_jwt}\n}}\n",
        sys = system.public_key(),
        acc = account.public_key(),
    );

    let secret = |f, kp: &KeyPair| -> Result<(), CredsError> {
        creds::create_new(&out.join(f), &format!("{}\n", seed(kp)?), true)
    };
    secret(OPERATOR_SEED, &operator)?;
    secret(ACCOUNT_SEED, &account)?;
    secret(SYSTEM_SEED, &system)?;
    creds::create_new(&out.join(OPERATOR_JWT), &format!("{operator_jwt}\n"), false)?;
    creds::create_new(&out.join(ACCOUNT_JWT), &format!("{account_jwt}\n"), false)?;
    creds::create_new(&out.join(SYSTEM_JWT), &format!("{system_jwt}\n"), false)?;
    creds::create_new(&out.join(SERVER_CONF), &server_conf, false)?;
    creds::create_new(&out.join(CONTROLLER_CREDS), &creds::format_creds(&controller_jwt, &seed(&controller)?), true)?;
    Ok(InitSummary {
        operator: operator.public_key(),
        account: account.public_key(),
        system_account: system.public_key(),
        server_conf: out.join(SERVER_CONF),
        controller_creds: out.join(CONTROLLER_CREDS),
    })
}

/// Mints `agent`'s credential into `out` (0600, replacing an older one) from the account seed in
/// `from` (the directory [`init`] wrote), valid for `ttl` from now.
///
/// # Errors
/// A missing or wrong account seed in `from`, an I/O error, or a `ttl` beyond what a JWT holds.
pub fn mint_agent_creds(from: &Path, agent: &AgentName, ttl: Duration, out: &Path) -> Result<(), CredsError> {
    let issued_at = unix_now();
    let expires_at = issued_at.checked_add(ttl.as_secs()).filter(|&t| t < i64::MAX as u64);
    let at = Validity { issued_at, expires_at: Some(expires_at.ok_or(CredsError::TtlTooLong)?) };
    write_agent_creds(from, agent, at, out)
}

/// [`mint_agent_creds`] with an explicit validity (tests mint expired credentials with it).
///
/// # Errors
/// As [`mint_agent_creds`].
pub fn write_agent_creds(from: &Path, agent: &AgentName, at: Validity, out: &Path) -> Result<(), CredsError> {
    let account = read_seed(&from.join(files::ACCOUNT_SEED), KeyPairType::Account, "account")?;
    let user = KeyPair::new_user();
    let permissions = agent_permissions(agent);
    let jwt = jwt::user_jwt(&account, &user.public_key(), agent.as_str(), Some(&permissions), at)?;
    creds::replace_secret(out, &creds::format_creds(&jwt, &seed(&user)?))
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
