//! The agent's NATS credential: read from its `.creds` file, checked to be a correctly signed,
//! unexpired user JWT of this agent whose seed is the JWT's key, and used to sign the server's
//! nonce on each (re)connect. Nothing here logs or returns any part of the seed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyperhive_nats_creds::jwt::verified_claims;
use hyperhive_nats_creds::{CredsError, UserCreds, parse_creds};
use hyperhive_schedule::AgentName;
use sha2::{Digest, Sha256};

/// A checked credential. Cheap to clone (the key is shared).
#[derive(Debug, Clone)]
pub struct Credential {
    creds: Arc<UserCreds>,
    expires_at: Option<u64>,
    digest: [u8; 32],
}

/// Why a `.creds` file does not hold a usable credential for this agent.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not in the `.creds` format.
    #[error(transparent)]
    Creds(#[from] CredsError),
    /// The JWT does not verify.
    #[error("{path} holds no valid user JWT: {source}")]
    BadJwt {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: CredsError,
    },
    /// The seed is not the key the JWT was issued to.
    #[error("{0}: the seed does not belong to the JWT's user")]
    SeedMismatch(PathBuf),
    /// A credential of another agent (or of no agent).
    #[error("{path} is not agent {agent}'s credential (its JWT names {found:?})")]
    OtherAgent {
        /// The file.
        path: PathBuf,
        /// This agent.
        agent: AgentName,
        /// The JWT's `name`.
        found: String,
    },
    /// Past its `exp`.
    #[error("the credential {path} expired {} ago", humantime::format_duration(*.ago))]
    Expired {
        /// The file.
        path: PathBuf,
        /// How long ago.
        ago: Duration,
    },
}

impl Credential {
    /// Reads and checks `path`.
    ///
    /// # Errors
    /// [`CredentialError`], naming the file and what is wrong.
    pub fn read(path: &Path, agent: &AgentName, now: u64) -> Result<Self, CredentialError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| CredentialError::Unreadable { path: path.to_path_buf(), source })?;
        Self::parse(path, &text, agent, now)
    }

    /// Checks the text of a `.creds` file (`path` names it in errors).
    ///
    /// # Errors
    /// [`CredentialError`], naming the file and what is wrong.
    pub fn parse(path: &Path, text: &str, agent: &AgentName, now: u64) -> Result<Self, CredentialError> {
        let creds = parse_creds(path, text)?;
        let claims = verified_claims(creds.jwt())
            .map_err(|source| CredentialError::BadJwt { path: path.to_path_buf(), source })?;
        if claims["sub"].as_str() != Some(creds.public_key().as_str()) {
            return Err(CredentialError::SeedMismatch(path.to_path_buf()));
        }
        let name = claims["name"].as_str().unwrap_or_default();
        if name != agent.as_str() {
            return Err(CredentialError::OtherAgent {
                path: path.to_path_buf(),
                agent: agent.clone(),
                found: name.to_owned(),
            });
        }
        let expires_at = claims["exp"].as_u64();
        if let Some(expires) = expires_at
            && expires <= now
        {
            return Err(CredentialError::Expired { path: path.to_path_buf(), ago: Duration::from_secs(now - expires) });
        }
        Ok(Self { creds: Arc::new(creds), expires_at, digest: digest(text.as_bytes()) })
    }

    /// The JWT's `exp` (unix seconds), if it expires.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }

    /// The user JWT.
    pub fn jwt(&self) -> &str {
        self.creds.jwt()
    }

    /// The digest of the file text it was read from (to notice a rewrite without keeping a
    /// second copy of the seed).
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// What the client presents to the server: the JWT and the nonce signed with the seed.
    ///
    /// # Errors
    /// The nonce could not be signed.
    pub fn auth(&self, nonce: &[u8]) -> Result<async_nats::Auth, async_nats::AuthError> {
        let mut auth = async_nats::Auth::new();
        auth.jwt = Some(self.creds.jwt().to_owned());
        auth.signature = Some(self.creds.sign(nonce).map_err(async_nats::AuthError::new)?);
        Ok(auth)
    }
}

/// The SHA-256 of a credential file's bytes.
pub fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Now in unix seconds (JWT times are whole seconds).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A JWT time for a log line.
pub fn format_expiry(expires_at: Option<u64>) -> String {
    let at = expires_at
        .and_then(|secs| i64::try_from(secs).ok())
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok());
    at.map_or_else(|| "never".to_owned(), hyperhive_schedule::format_instant)
}

#[cfg(test)]
mod tests {
    use hyperhive_nats_creds::Validity;

    use super::*;

    const NOW: u64 = 1_800_000_000;

    /// The text of `agent`'s credential valid until `expires_at`, minted in `dir`.
    fn minted(dir: &Path, agent: &str, expires_at: u64) -> String {
        if !dir.join("operator.seed").exists() {
            hyperhive_nats_creds::init(dir).unwrap();
        }
        let out = dir.join(format!("{agent}-{expires_at}.creds"));
        let at = Validity { issued_at: NOW - 60, expires_at: Some(expires_at) };
        hyperhive_nats_creds::write_agent_creds(dir, &AgentName::parse(agent).unwrap(), at, &out).unwrap();
        std::fs::read_to_string(out).unwrap()
    }

    fn seed_of(text: &str) -> &str {
        text.lines().find(|l| l.starts_with("SU")).unwrap()
    }

    #[test]
    fn a_valid_credential_of_this_agent_signs_the_nonce() {
        let dir = tempfile::tempdir().unwrap();
        let text = minted(dir.path(), "a", NOW + 60);
        let agent = AgentName::parse("a").unwrap();
        let credential = Credential::parse(Path::new("a.creds"), &text, &agent, NOW).unwrap();
        assert_eq!(credential.expires_at(), Some(NOW + 60));
        assert_eq!(credential.digest(), digest(text.as_bytes()));
        let auth = credential.auth(b"nonce").unwrap();
        assert_eq!(auth.jwt.as_deref(), Some(credential.jwt()));
        let user = nkeys::KeyPair::from_seed(seed_of(&text)).unwrap();
        assert!(user.verify(b"nonce", &auth.signature.unwrap()).is_ok());
        assert!(!format!("{credential:?}").contains(seed_of(&text)));
    }

    #[test]
    fn expired_foreign_and_mismatched_credentials_are_refused_without_the_seed() {
        let dir = tempfile::tempdir().unwrap();
        let agent = AgentName::parse("a").unwrap();
        let good = minted(dir.path(), "a", NOW + 60);
        let other = minted(dir.path(), "b", NOW + 60);
        let foreign_seed = format!(
            "{}{}",
            &good[..good.find("-----BEGIN USER NKEY SEED").unwrap()],
            &other[other.find("-----BEGIN USER NKEY SEED").unwrap()..]
        );
        let cases = [
            (minted(dir.path(), "a", NOW - 3600), "expired 1h"),
            (other.clone(), "not agent a's credential"),
            (foreign_seed, "the seed does not belong to the JWT's user"),
            (good.replace(seed_of(&good), "SUnotaseed"), "not a valid nkey seed"),
            (good[..good.find("------END USER NKEY SEED").unwrap()].to_owned(), "no END USER NKEY SEED"),
            ("not a credential".to_owned(), "no BEGIN NATS USER JWT"),
        ];
        for (text, why) in cases {
            let err = Credential::parse(Path::new("a.creds"), &text, &agent, NOW).unwrap_err().to_string();
            assert!(err.contains("a.creds") && err.contains(why), "{why}: {err}");
            for seed in [seed_of(&good), seed_of(&other)] {
                assert!(!err.contains(&seed[..16]), "{err}");
            }
        }
    }

    #[test]
    fn expiries_read_as_instants() {
        assert_eq!(format_expiry(Some(1_800_000_000)), "2027-01-15T08:00:00Z");
        assert_eq!(format_expiry(None), "never");
    }
}
