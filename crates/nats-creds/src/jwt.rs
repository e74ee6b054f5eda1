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

/// What an account JWT declares besides its name and key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountSpec {
    /// JetStream storage; `None` disables JetStream in the account.
    pub jetstream: Option<JetStreamLimits>,
    /// Connection and message limits.
    pub limits: AccountLimits,
    /// Services this account offers to others.
    pub exports: Vec<ServiceExport>,
    /// Services of other accounts this account's users may call.
    pub imports: Vec<ServiceImport>,
    /// Subjects whose messages this account offers to others (one-way: nothing answers).
    pub stream_exports: Vec<String>,
    /// Messages of other accounts' subjects delivered into this account (the subject as the
    /// exporter publishes it, and as this account's users subscribe to it).
    pub stream_imports: Vec<ServiceImport>,
    /// Every user JWT of the account issued at or before this unix time is refused
    /// (`revocations: {"*": t}`): how a tenant's credentials are revoked.
    pub revoked_before: Option<u64>,
}

/// Per-account connection and message limits (`-1` means none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountLimits {
    /// Connections at once.
    pub connections: i64,
    /// Subscriptions at once, over all connections.
    pub subscriptions: i64,
    /// Largest message payload in bytes.
    pub payload: i64,
}

impl Default for AccountLimits {
    fn default() -> Self {
        Self { connections: UNLIMITED, subscriptions: UNLIMITED, payload: UNLIMITED }
    }
}

/// JetStream limits of an account that holds streams. nats-server reserves the account's
/// storage limits against its own `max_file_store`/`max_memory_store` and refuses JetStream for
/// the whole account when they do not fit, so a bound set here must fit every server it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JetStreamLimits {
    /// Bytes on disk over all streams (`-1`: the server's limit).
    pub disk_storage: i64,
    /// Bytes in memory over all streams (`-1`: the server's limit).
    pub mem_storage: i64,
    /// Number of streams.
    pub streams: i64,
    /// Number of consumers.
    pub consumers: i64,
    /// Every stream must declare its `max_bytes`, so none can grow without bound.
    pub max_bytes_required: bool,
}

/// How many answers one request to an exported service may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseType {
    /// One answer (a publish ack, a direct get, an API reply).
    Singleton,
    /// Any number of answers until the threshold passes (a pull request's messages).
    Stream,
}

/// Publish and subscribe allow lists of a user JWT; everything else is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permissions {
    /// Subjects the user may publish to.
    pub publish_allow: Vec<String>,
    /// Subjects the user may subscribe to.
    pub subscribe_allow: Vec<String>,
}

/// A service another account may import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceExport {
    /// The subject, wildcards allowed; importers may take any literal or narrower subject of it.
    pub subject: String,
    /// Answers per request.
    pub response: ResponseType,
}

/// A service (or, in [`AccountSpec::stream_imports`], a stream) imported from another account
/// under the same subject name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceImport {
    /// The exporting account's public key.
    pub account: String,
    /// The subject, as the exporter sees it and as this account's users publish to it.
    pub subject: String,
}

/// An account JWT signed by the operator.
pub fn account_jwt(
    operator: &KeyPair,
    account_public_key: &str,
    name: &str,
    spec: &AccountSpec,
    at: Validity,
) -> Result<String, CredsError> {
    let l = spec.limits;
    let mut limits = json!({
        "subs": l.subscriptions, "data": UNLIMITED, "payload": l.payload, "imports": UNLIMITED,
        "exports": UNLIMITED, "wildcards": true, "conn": l.connections, "leaf": 0,
    });
    if let Some(js) = spec.jetstream {
        limits["disk_storage"] = json!(js.disk_storage);
        limits["mem_storage"] = json!(js.mem_storage);
        limits["streams"] = json!(js.streams);
        limits["consumer"] = json!(js.consumers);
        limits["max_bytes_required"] = json!(js.max_bytes_required);
    }
    let exports = claims_exports(spec);
    let services = spec.imports.iter().map(|i| {
        json!({"name": i.subject, "subject": i.subject, "local_subject": i.subject, "account": i.account, "type": "service"})
    });
    let streams = spec.stream_imports.iter().map(|i| {
        json!({"name": i.subject, "subject": i.subject, "local_subject": i.subject, "account": i.account, "type": "stream"})
    });
    let imports: Vec<Value> = services.chain(streams).collect();
    let mut nats = json!({
        "limits": limits,
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account",
        "version": 2,
    });
    if !exports.is_null() {
        nats["exports"] = exports;
    }
    if !imports.is_empty() {
        nats["imports"] = json!(imports);
    }
    if let Some(t) = spec.revoked_before {
        nats["revocations"] = json!({"*": t});
    }
    encode(operator, name, account_public_key, at, nats)
}

/// The `exports` claim of an account JWT for `spec`, as [`account_jwt`] writes it (`null` when it
/// exports nothing, and the claim is then left out).
pub fn claims_exports(spec: &AccountSpec) -> Value {
    let services = spec.exports.iter().map(|e| {
        let response = match e.response {
            ResponseType::Singleton => "Singleton",
            ResponseType::Stream => "Stream",
        };
        json!({"name": e.subject, "subject": e.subject, "type": "service", "response_type": response})
    });
    let streams = spec.stream_exports.iter().map(|s| json!({"name": s, "subject": s, "type": "stream"}));
    let exports: Vec<Value> = services.chain(streams).collect();
    if exports.is_empty() { Value::Null } else { json!(exports) }
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

/// Now, in unix seconds (the unit of a JWT's `iat` and `exp`).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
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
        let spec = AccountSpec {
            jetstream: Some(JetStreamLimits {
                disk_storage: 1 << 30,
                mem_storage: 0,
                streams: 8,
                consumers: 100,
                max_bytes_required: true,
            }),
            ..AccountSpec::default()
        };
        let acc = account_jwt(&operator, &account.public_key(), "swarm", &spec, no_expiry).unwrap();
        let acc = verified_claims(&acc).unwrap();
        assert_eq!(acc["iss"], operator.public_key());
        assert_eq!(acc["nats"]["limits"]["disk_storage"], 1 << 30);
        assert_eq!(acc["nats"]["limits"]["leaf"], 0);
        assert_eq!(acc["nats"]["limits"]["max_bytes_required"], true);

        let tenant = AccountSpec {
            imports: vec![ServiceImport { account: account.public_key(), subject: "todo.a".into() }],
            ..AccountSpec::default()
        };
        let a = verified_claims(&account_jwt(&operator, "AA", "agent-a", &tenant, no_expiry).unwrap()).unwrap();
        assert!(a["nats"]["limits"].get("disk_storage").is_none(), "a tenant account has no JetStream");
        assert_eq!(a["nats"]["imports"][0]["local_subject"], "todo.a");
        assert_eq!(a["nats"]["imports"][0]["type"], "service");
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
