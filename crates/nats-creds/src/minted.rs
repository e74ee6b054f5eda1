//! What minting hands back: account JWTs for the server, and credentials held in memory.

use std::path::Path;

use crate::creds;
use crate::error::CredsError;
use crate::jwt;

/// An account JWT as the server must hold it. Public: it carries no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountJwt {
    /// The account's public key (`A...`).
    pub account: String,
    /// The account's name (`agent-<name>`, `hive-<name>`, `swarm`, `SYS`, `no-jetstream`).
    pub name: String,
    /// The operator-signed JWT.
    pub jwt: String,
}

impl AccountJwt {
    /// Reads the key and name of a JWT this crate made, checking its signature.
    ///
    /// # Errors
    /// [`CredsError::BadJwt`] when it is not a valid account JWT.
    pub fn from_token(token: &str) -> Result<Self, CredsError> {
        let claims = jwt::verified_claims(token)?;
        let field = |name: &str| {
            claims[name].as_str().map(str::to_owned).ok_or_else(|| CredsError::BadJwt(format!("the JWT has no {name}")))
        };
        Ok(Self { account: field("sub")?, name: field("name")?, jwt: token.trim().to_owned() })
    }
}

/// What minting changed in the accounts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Minted {
    /// Every account JWT that was added or changed (and so written into the fragment): the
    /// running server must be given each ([`AccountJwt`]) before the new credentials work. Empty
    /// when every account already granted the same: the credentials work at once.
    pub changed: Vec<AccountJwt>,
}

impl Minted {
    /// Whether an account was added or changed.
    pub fn changed_accounts(&self) -> bool {
        !self.changed.is_empty()
    }
}

/// A `.creds` text (a user JWT and its nkey seed) held in memory. A secret: its `Debug` shows
/// nothing of it, and it is never written or logged by this crate.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretCreds(pub(crate) String);

impl SecretCreds {
    /// The `.creds` text, to hand to its holder (e.g. sealed in a deploy message).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Writes it to `path`, mode 0600, replacing an older file atomically.
    ///
    /// # Errors
    /// An I/O error.
    pub fn write_to(&self, path: &Path) -> Result<(), CredsError> {
        creds::replace_file(path, &self.0, true)
    }
}

impl std::fmt::Debug for SecretCreds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCreds(<redacted>)")
    }
}

/// An agent made while the swarm runs ([`crate::mint_agent_of_hive`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgent {
    /// The agent's user credential.
    pub creds: SecretCreds,
    /// When it expires (unix seconds).
    pub expires_at: u64,
    /// The agent's and its hive's account JWTs as they now stand: what the running server must
    /// hold before the credential works. Giving it an unchanged JWT again is harmless, so a
    /// caller whose earlier push failed can push these.
    pub accounts: Vec<AccountJwt>,
    /// Those of [`NewAgent::accounts`] written by this call (the fragment needs writing again:
    /// [`crate::write_fragment`]): the agent's when it is new, its hive's when its imports gained
    /// the agent's queue.
    pub changed: Vec<AccountJwt>,
}
