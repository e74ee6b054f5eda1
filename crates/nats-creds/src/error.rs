//! What can go wrong while making or reading credentials. Messages name the file and the fix;
//! none of them carries a seed or a JWT.

use std::path::PathBuf;

/// A credentials operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CredsError {
    /// `init` never overwrites: an existing file may be the only copy of a key.
    #[error(
        "{0} already exists; `nats init` never overwrites keys. Choose an empty --out directory \
         or remove the old files deliberately"
    )]
    Exists(PathBuf),
    /// Reading or writing a file failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "create directory").
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A seed file does not hold the right kind of nkey seed.
    #[error("{path} does not hold an {expected} nkey seed; is --from the directory `nats init` wrote?")]
    BadSeed {
        /// The file.
        path: PathBuf,
        /// "account", "operator", ...
        expected: &'static str,
    },
    /// An nkey operation failed.
    #[error("nkey error: {0}")]
    Key(String),
    /// Claims could not be encoded.
    #[error("cannot encode JWT claims: {0}")]
    Encode(#[source] serde_json::Error),
    /// A token is not a valid, correctly signed JWT.
    #[error("not a valid NATS JWT: {0}")]
    BadJwt(String),
    /// A credentials file is not in the standard `.creds` format.
    #[error("{path} is not a NATS .creds file: {why}")]
    BadCreds {
        /// The file.
        path: PathBuf,
        /// What is missing.
        why: &'static str,
    },
    /// The directory was written by an older `nats init`, whose agents shared the swarm account.
    #[error(
        "{0} was written by an older `nats init`: its agent credentials are users of the account that \
         holds every stream, which lets an agent reach other agents' data. Run `swarm-controller nats \
         init --out NEWDIR`, mint every agent's credential again from NEWDIR, and give nats-server \
         NEWDIR's nats-server.conf"
    )]
    LegacyLayout(PathBuf),
    /// The directory is not one `nats init` wrote.
    #[error(
        "{0} is not a directory written by `swarm-controller nats init` (it lacks operator.seed or \
         accounts/); pass the directory given to `nats init --out`"
    )]
    NotInitDir(PathBuf),
    /// The tenant's account was revoked (a destroyed agent): minting for it again would lift the
    /// revocation.
    #[error(
        "{0}'s credentials were revoked (the agent was destroyed); a revoked account is never given \
         a credential again. Use a new agent name"
    )]
    Revoked(String),
    /// The resolver directory given to `init` cannot stand in the server's config.
    #[error(
        "{dir} cannot be the NATS resolver's directory: {why}; give an absolute path on the NATS \
         host (e.g. /var/lib/nats/jwt)"
    )]
    BadResolverDir {
        /// The path given.
        dir: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The expiry lies beyond what a JWT can say.
    #[error("the credential lifetime is too long; use a --ttl of at most a few years")]
    TtlTooLong,
}

impl CredsError {
    pub(crate) fn io(action: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Io { action, path, source }
    }
}
