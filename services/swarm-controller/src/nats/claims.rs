//! Giving the running nats-server new and changed account JWTs (docs/swarm/security.md, "The
//! account resolver").
//!
//! The server runs the full account resolver: it keeps every account JWT in a directory of its
//! own and takes new and changed ones from a user of the system account as a request on
//! `$SYS.REQ.CLAIMS.UPDATE`. It writes the JWT to its directory (so a restart keeps it), applies
//! it to the account if loaded (a revocation closes the revoked users' connections), and answers
//! `jwt updated`. An account it has not loaded is read from the directory when first used, so an
//! account that never existed before works at once and a revocation holds for an account nobody
//! is connected to. Only the system account can publish there: a tenant's subjects are its own
//! account's, where nothing answers `$SYS` requests, and its user may publish only to its grants.

use std::path::Path;
use std::time::Duration;

use hyperhive_nats_creds::{AccountJwt, jwt};
use serde_json::Value;

/// The request that stores an account JWT in the resolver (the subject names no account: the
/// server reads it from the JWT).
pub const CLAIMS_UPDATE: &str = "$SYS.REQ.CLAIMS.UPDATE";

/// What the server answers once it has stored and applied a JWT.
const UPDATED: &str = "jwt updated";

/// How long connecting and one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the server was not given an account JWT. The text holds no secret (no JWT is shown; they
/// are public anyway, but long).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The system user's credential could not be read.
    #[error("reading the system user's credential {path}: {reason}")]
    Creds {
        /// The `.creds` file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The server could not be reached, or refused the system user.
    #[error("connecting to {url} as the system user: {reason}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
    /// The JWT is not one the swarm's operator signed for that account: not sent.
    #[error("the account JWT of {name} ({account}) was not sent: {why}")]
    Untrusted {
        /// The account's name.
        name: String,
        /// The account's public key.
        account: String,
        /// What is wrong with it.
        why: String,
    },
    /// Nothing answers claim updates: the server runs another resolver.
    #[error(
        "no nats-server answered {CLAIMS_UPDATE} for {name} ({account}): the server does not run the \
         full account resolver; give it the fragment `swarm-controller nats init` writes now (resolver \
         type full) and restart it"
    )]
    NoResolver {
        /// The account's name.
        name: String,
        /// The account's public key.
        account: String,
    },
    /// The request failed (timed out, connection lost).
    #[error("sending the account JWT of {name} ({account}): {reason}")]
    Request {
        /// The account's name.
        name: String,
        /// The account's public key.
        account: String,
        /// Why.
        reason: String,
    },
    /// The server answered that it did not take the JWT.
    #[error("nats-server refused the account JWT of {name} ({account}): {said}")]
    Refused {
        /// The account's name.
        name: String,
        /// The account's public key.
        account: String,
        /// The server's own words (`jwt validation failed: ...`, `jwt update resulted in error: ...`).
        said: String,
    },
}

/// Gives the server at `url` every JWT of `accounts`, in order, as the system user whose
/// credential is at `system_creds`, and checks each was stored. Idempotent: the same JWT again is
/// answered `jwt updated` and changes nothing.
///
/// Each JWT must be signed by `operator` (the swarm's operator public key), checked here before
/// anything is sent: nats-server checks a JWT's signature but stores one signed by any other
/// operator, or by the account itself, and answers `jwt updated`; it refuses that account only
/// when a client uses it, and a restart would load the stored JWT in place of a good one.
///
/// # Errors
/// [`PushError`] at the first account not stored; the ones before it were.
pub async fn push(url: &str, system_creds: &Path, operator: &str, accounts: &[AccountJwt]) -> Result<(), PushError> {
    if accounts.is_empty() {
        return Ok(());
    }
    for account in accounts {
        check_signed_by(operator, account)?;
    }
    let options = async_nats::ConnectOptions::with_credentials_file(system_creds)
        .await
        .map_err(|e| PushError::Creds { path: system_creds.display().to_string(), reason: e.to_string() })?;
    let client = options
        .name("swarm-controller-system")
        .connection_timeout(REQUEST_TIMEOUT)
        .request_timeout(Some(REQUEST_TIMEOUT))
        .connect(hyperhive_nats_creds::servers::server_list(url))
        .await
        .map_err(|e| PushError::Connect { url: url.to_owned(), reason: e.to_string() })?;
    for account in accounts {
        push_one(&client, account).await?;
    }
    Ok(())
}

/// Refuses a JWT that is not a valid account JWT for `account.account` signed by `operator`.
fn check_signed_by(operator: &str, account: &AccountJwt) -> Result<(), PushError> {
    let untrusted =
        |why: String| PushError::Untrusted { name: account.name.clone(), account: account.account.clone(), why };
    let claims = jwt::verified_claims(&account.jwt).map_err(|e| untrusted(e.to_string()))?;
    if claims["iss"] != operator {
        return Err(untrusted(format!("it is signed by {}, not by the swarm's operator {operator}", claims["iss"])));
    }
    if claims["sub"] != account.account.as_str() {
        return Err(untrusted(format!("it is the JWT of account {}", claims["sub"])));
    }
    Ok(())
}

async fn push_one(client: &async_nats::Client, account: &AccountJwt) -> Result<(), PushError> {
    let (name, key) = (account.name.clone(), account.account.clone());
    let answer = match client.request(CLAIMS_UPDATE, account.jwt.clone().into()).await {
        Ok(answer) => answer,
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
            return Err(PushError::NoResolver { name, account: key });
        }
        Err(e) => return Err(PushError::Request { name, account: key, reason: e.to_string() }),
    };
    match answer_error(&answer.payload, &key) {
        None => Ok(()),
        Some(said) => Err(PushError::Refused { name, account: key, said }),
    }
}

/// What is wrong with the server's answer to an update of `account`, if anything:
/// `{"data": {"account": A, "code": 200, "message": "jwt updated"}}` is success; an error is
/// `{"error": {"account": A, "code": 500, "description": "..."}}`.
fn answer_error(payload: &[u8], account: &str) -> Option<String> {
    let Ok(answer) = serde_json::from_slice::<Value>(payload) else {
        return Some(format!("an answer that is not JSON: {:?}", String::from_utf8_lossy(payload)));
    };
    if let Some(error) = answer.get("error") {
        let said = error["description"].as_str().map_or_else(|| error.to_string(), str::to_owned);
        return Some(said);
    }
    let data = &answer["data"];
    if data["message"] != UPDATED {
        return Some(format!("an answer other than {UPDATED:?}: {data}"));
    }
    if data["account"] != account {
        return Some(format!("an answer about another account: {data}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_jwt_updated_for_this_account_is_success() {
        let ok = br#"{"server":{},"data":{"account":"AA","code":200,"message":"jwt updated"}}"#;
        assert_eq!(answer_error(ok, "AA"), None);
        assert!(answer_error(ok, "AB").unwrap().contains("another account"));
        let refused = br#"{"server":{},"error":{"account":"AA","code":500,"description":"jwt validation failed - x"}}"#;
        assert_eq!(answer_error(refused, "AA").unwrap(), "jwt validation failed - x");
        let skipped = br#"{"server":{},"data":{"account":"AA","code":200,"message":"jwt update skipped"}}"#;
        assert!(answer_error(skipped, "AA").unwrap().contains("skipped"));
        assert!(answer_error(b"nope", "AA").unwrap().contains("not JSON"));
    }
}
