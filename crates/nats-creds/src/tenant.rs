//! A tenant (an agent or a hive): its own account, importing exactly its own subjects from the
//! swarm account, and the user credentials minted in it.

use std::fs;
use std::path::Path;

use hyperhive_schedule::{AgentName, HiveName};
use nkeys::{KeyPair, KeyPairType};

use crate::creds::{self, read_seed, seed};
use crate::error::CredsError;
use crate::files;
use crate::jwt::Permissions;
use crate::jwt::unix_now;
use crate::jwt::{self, AccountSpec, ServiceImport, Validity};
use crate::limits;
use crate::minted::{AccountJwt, SecretCreds};
use crate::permissions::{self, agent_permissions, hive_permissions};

/// An agent or a hive: its own account importing `imports` from the swarm account, and one user.
pub(crate) struct Tenant {
    pub(crate) account_name: String,
    user_name: String,
    imports: Vec<String>,
    stream_imports: Vec<String>,
    account_limits: jwt::AccountLimits,
    permissions: Permissions,
}

/// `agent`'s account and user.
pub(crate) fn agent_tenant(agent: &AgentName) -> Tenant {
    Tenant {
        account_name: format!("agent-{agent}"),
        user_name: agent.to_string(),
        imports: permissions::agent_imports(agent),
        stream_imports: permissions::agent_stream_imports(agent),
        account_limits: limits::agent_account(),
        permissions: agent_permissions(agent),
    }
}

/// `hive`'s account, importing the todo queues of `agents`, and user.
pub(crate) fn hive_tenant(hive: &HiveName, agents: &[AgentName]) -> Tenant {
    Tenant {
        account_name: format!("hive-{hive}"),
        user_name: format!("hive-{hive}"),
        imports: permissions::hive_imports(hive, agents),
        stream_imports: Vec::new(),
        account_limits: limits::hive_account(),
        permissions: hive_permissions(hive),
    }
}

/// `hive`'s account JWT in `from`.
pub(crate) fn hive_account_path(from: &Path, hive: &HiveName) -> std::path::PathBuf {
    from.join(files::ACCOUNTS_DIR).join(format!("hive-{hive}.jwt"))
}

/// The agents whose todo queues `hive`'s account imports now (none when it has no account).
pub(crate) fn hive_agents(from: &Path, hive: &HiveName) -> Result<Vec<AgentName>, CredsError> {
    let path = hive_account_path(from, hive);
    let token = match fs::read_to_string(&path) {
        Ok(token) => token,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CredsError::io("read", &path)(e)),
    };
    let claims = jwt::verified_claims(token.trim())?;
    let imports = claims["nats"]["imports"].as_array().cloned().unwrap_or_default();
    let queues = imports.iter().filter_map(|import| import["subject"].as_str()?.strip_prefix("todo."));
    queues
        .map(|name| {
            AgentName::parse(name).map_err(|_| {
                CredsError::BadJwt(format!("{} imports the todo queue of {name:?}, not an agent name", path.display()))
            })
        })
        .collect()
}

/// The operator key (signs tenant accounts), the swarm account's and the no-JetStream account's
/// public keys (tenants import from them).
pub(crate) struct SigningKeys {
    operator: KeyPair,
    swarm: String,
    no_jetstream: String,
}

impl SigningKeys {
    /// The operator key, which signs every account JWT.
    pub(crate) fn operator_key(&self) -> &KeyPair {
        &self.operator
    }
}

pub(crate) fn signing_keys(from: &Path) -> Result<SigningKeys, CredsError> {
    Ok(SigningKeys {
        operator: read_seed(&from.join(files::OPERATOR_SEED), KeyPairType::Operator, "operator")?,
        swarm: read_seed(&from.join(files::SWARM_SEED), KeyPairType::Account, "account")?.public_key(),
        no_jetstream: account_key_of(&from.join(files::NO_JETSTREAM_JWT))?,
    })
}

impl Tenant {
    /// The tenant's account key (made on first use), and its account JWT when it was written:
    /// left alone when it already grants the same, else (re)written.
    pub(crate) fn write_account(
        &self,
        from: &Path,
        keys: &SigningKeys,
        revoked_before: Option<u64>,
    ) -> Result<(KeyPair, Option<AccountJwt>), CredsError> {
        let accounts = from.join(files::ACCOUNTS_DIR);
        let seed_path = accounts.join(format!("{}.seed", self.account_name));
        let account = match fs::read_to_string(&seed_path) {
            Ok(_) => read_seed(&seed_path, KeyPairType::Account, "account")?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = KeyPair::new_account();
                match creds::create_new(&seed_path, &format!("{}\n", seed(&fresh)?), true) {
                    Ok(()) => fresh,
                    // Another writer made it first: theirs is the account.
                    Err(CredsError::Exists(_)) => read_seed(&seed_path, KeyPairType::Account, "account")?,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(CredsError::io("read", &seed_path)(e)),
        };
        let own = |subject: &String| ServiceImport { account: keys.swarm.clone(), subject: subject.clone() };
        let spec = AccountSpec {
            jetstream: None,
            limits: self.account_limits,
            exports: Vec::new(),
            imports: std::iter::once(ServiceImport {
                account: keys.no_jetstream.clone(),
                subject: permissions::JS_INFO.to_owned(),
            })
            .chain(self.imports.iter().map(own))
            .collect(),
            stream_exports: Vec::new(),
            stream_imports: self.stream_imports.iter().map(own).collect(),
            revoked_before,
        };
        let jwt_path = accounts.join(format!("{}.jwt", self.account_name));
        let existing = fs::read_to_string(&jwt_path).ok().and_then(|t| jwt::verified_claims(t.trim()).ok());
        let issued_at = later_than(existing.as_ref().and_then(|c| c["iat"].as_u64()));
        let at = Validity { issued_at, expires_at: None };
        let account_jwt = jwt::account_jwt(&keys.operator, &account.public_key(), &self.account_name, &spec, at)?;
        if existing.is_some_and(|before| same_grants(&before, &account_jwt)) {
            return Ok((account, None));
        }
        creds::replace_file(&jwt_path, &format!("{account_jwt}\n"), false)?;
        Ok((account, Some(AccountJwt::from_token(&account_jwt)?)))
    }

    /// The tenant's account JWT as written.
    pub(crate) fn current_jwt(&self, from: &Path) -> Result<AccountJwt, CredsError> {
        let path = from.join(files::ACCOUNTS_DIR).join(format!("{}.jwt", self.account_name));
        AccountJwt::from_token(&fs::read_to_string(&path).map_err(CredsError::io("read", &path))?)
    }

    /// A user credential in this tenant's account, limited to the tenant's own subjects.
    pub(crate) fn user_creds(&self, account: &KeyPair, at: Validity) -> Result<SecretCreds, CredsError> {
        let user = KeyPair::new_user();
        let user_jwt = jwt::user_jwt(account, &user.public_key(), &self.user_name, Some(&self.permissions), at)?;
        Ok(SecretCreds(creds::format_creds(&user_jwt, &seed(&user)?)))
    }
}

/// An issue time after `previous`, the issue time of the JWT being replaced. nats-server's
/// resolver keeps the newer of two JWTs of one account by issue time (seconds) and replaces an
/// equal one, so a stale fragment preloaded at a restart could put back a JWT written in the
/// same second as its successor; a strictly later time rules that out.
fn later_than(previous: Option<u64>) -> u64 {
    let now = unix_now();
    previous.map_or(now, |previous| now.max(previous + 1))
}

/// Whether the account JWT `wanted` grants what the existing claims `before` grant (same key,
/// name and claims, so re-minting a user credential leaves the server's configuration alone).
fn same_grants(before: &serde_json::Value, wanted: &str) -> bool {
    let Ok(after) = jwt::verified_claims(wanted) else { return false };
    let grants = |c: &serde_json::Value| (c["iss"].clone(), c["sub"].clone(), c["name"].clone(), c["nats"].clone());
    grants(before) == grants(&after)
}

/// The public key of the account whose JWT is at `path`.
fn account_key_of(path: &Path) -> Result<String, CredsError> {
    let token = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    Ok(AccountJwt::from_token(&token)?.account)
}
