//! NATS JWTs (nats-io/jwt v2 encoding): `base64url(header) . base64url(claims) . base64url(sig)`,
//! the signature an ed25519 nkey signature over the first two parts.
//!
//! Written here rather than with the `nats-jwt` crate because that crate cannot make the
//! operator JWT and this project needs exactly three claim shapes (operator, account, user).
//! A real nats-server accepting them is what proves this module (`tests/server_accepts.rs`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nkeys::KeyPair;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::CredsError;
use crate::permissions::Permissions;

/// "No limit" in NATS JWT limits.
const UNLIMITED: i64 = -1;

/// Claims every JWT carries; `nats` holds the type-specific part.
#[derive(Debug, Serialize)]
struct Claims<'a> {
    jti: String,
    iat: u64,
    iss: String,
    name: &'a str,
    sub: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    exp: Option<u64>,
    nats: Value,
}

/// When a JWT is issued and until when it is valid (unix seconds; `None` = no expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `iat`.
    pub issued_at: u64,
    /// `exp`.
    pub expires_at: Option<u64>,
}

/// The operator's self-signed JWT naming the system account.
pub fn operator_jwt(operator: &KeyPair, name: &str, system_account: &str, at: Validity) -> Result<String, CredsError> {
    let nats = json!({"system_account": system_account, "type": "operator", "version": 2});
    encode(operator, name, &operator.public_key(), at, nats)
}

/// An account JWT signed by the operator. `jetstream` enables unlimited JetStream (the swarm
/// account); the system account must not have it.
pub fn account_jwt(
    operator: &KeyPair,
    account_public_key: &str,
    name: &str,
    jetstream: bool,
    at: Validity,
) -> Result<String, CredsError> {
    let mut limits = json!({
        "subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED, "imports": UNLIMITED,
        "exports": UNLIMITED, "wildcards": true, "conn": UNLIMITED, "leaf": UNLIMITED,
    });
    if jetstream {
        for key in ["mem_storage", "disk_storage", "streams", "consumer"] {
            limits[key] = json!(UNLIMITED);
        }
    }
    let nats = json!({
        "limits": limits,
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account",
        "version": 2,
    });
    encode(operator, name, account_public_key, at, nats)
}

/// A user JWT signed by its account; `permissions` `None` means everything in the account.
pub fn user_jwt(
    account: &KeyPair,
    user_public_key: &str,
    name: &str,
    permissions: Option<&Permissions>,
    at: Validity,
) -> Result<String, CredsError> {
    let mut nats = json!({
        "subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED,
        "pub": {}, "sub": {},
        "type": "user",
        "version": 2,
    });
    if let Some(p) = permissions {
        nats["pub"] = json!({"allow": p.publish_allow});
        nats["sub"] = json!({"allow": p.subscribe_allow});
    }
    encode(account, name, user_public_key, at, nats)
}

fn encode(issuer: &KeyPair, name: &str, subject: &str, at: Validity, nats: Value) -> Result<String, CredsError> {
    let mut claims = Claims {
        jti: String::new(),
        iat: at.issued_at,
        iss: issuer.public_key(),
        name,
        sub: subject,
        exp: at.expires_at,
        nats,
    };
    // The JWT id is a digest of the claims without it, as nats-io/jwt does (uniqueness only;
    // the server does not recompute it).
    let unidentified = serde_json::to_vec(&claims).map_err(CredsError::Encode)?;
    claims.jti = hex_upper(&Sha256::digest(&unidentified));
    let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).map_err(CredsError::Encode)?);
    let signing_input = format!("{header}.{body}");
    let signature = issuer.sign(signing_input.as_bytes()).map_err(|e| CredsError::Key(e.to_string()))?;
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// The claims of a JWT after checking its signature against its `iss` key (for tests and for
/// tools that show what a credential grants).
///
/// # Errors
/// [`CredsError::BadJwt`] when the token is not three base64url parts, not JSON, or its signature
/// does not verify.
pub fn verified_claims(jwt: &str) -> Result<Value, CredsError> {
    let bad = |why: &str| CredsError::BadJwt(why.to_owned());
    let mut parts = jwt.trim().split('.');
    let (Some(header), Some(body), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("a JWT has three '.'-separated parts"));
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| bad("a part is not base64url"));
    let claims: Value = serde_json::from_slice(&decode(body)?).map_err(|_| bad("the claims are not JSON"))?;
    let issuer = claims["iss"].as_str().ok_or_else(|| bad("no issuer (iss)"))?;
    let key = KeyPair::from_public_key(issuer).map_err(|_| bad("the issuer is not an nkey"))?;
    key.verify(format!("{header}.{body}").as_bytes(), &decode(signature)?)
        .map_err(|_| bad("the signature does not verify"))?;
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: Validity = Validity { issued_at: 1_800_000_000, expires_at: Some(1_800_086_400) };

    #[test]
    fn a_user_jwt_carries_exactly_its_grants_and_verifies() {
        let account = KeyPair::new_account();
        let user = KeyPair::new_user();
        let perms = Permissions { publish_allow: vec!["todo.a".into()], subscribe_allow: vec!["_INBOX_a.>".into()] };
        let jwt = user_jwt(&account, &user.public_key(), "a", Some(&perms), AT).unwrap();
        let claims = verified_claims(&jwt).unwrap();
        assert_eq!(claims["iss"], account.public_key());
        assert_eq!(claims["sub"], user.public_key());
        assert_eq!(claims["exp"], 1_800_086_400u64);
        assert_eq!(claims["nats"]["type"], "user");
        assert_eq!(claims["nats"]["pub"], json!({"allow": ["todo.a"]}));
        assert_eq!(claims["nats"]["sub"], json!({"allow": ["_INBOX_a.>"]}));
        assert_eq!(claims["jti"].as_str().unwrap().len(), 64);
    }

    #[test]
    fn operator_is_self_signed_and_account_is_operator_signed() {
        let operator = KeyPair::new_operator();
        let no_expiry = Validity { expires_at: None, ..AT };
        let op = verified_claims(&operator_jwt(&operator, "op", "ASYS", no_expiry).unwrap()).unwrap();
        assert_eq!(op["iss"], op["sub"]);
        assert!(op.get("exp").is_none());
        let account = KeyPair::new_account();
        let acc = account_jwt(&operator, &account.public_key(), "swarm", true, no_expiry).unwrap();
        let acc = verified_claims(&acc).unwrap();
        assert_eq!(acc["iss"], operator.public_key());
        assert_eq!(acc["nats"]["limits"]["disk_storage"], -1);
    }

    #[test]
    fn tampering_is_detected() {
        let account = KeyPair::new_account();
        let jwt = user_jwt(&account, "UABC", "a", None, AT).unwrap();
        let mut parts: Vec<&str> = jwt.split('.').collect();
        let forged_claims =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!({"iss": account.public_key(), "sub": "UEVIL"})).unwrap());
        parts[1] = &forged_claims;
        let err = verified_claims(&parts.join(".")).unwrap_err().to_string();
        assert!(err.contains("signature does not verify"), "{err}");
        assert!(verified_claims("a.b").unwrap_err().to_string().contains("three"));
    }
}
