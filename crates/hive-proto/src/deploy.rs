//! Deploy messages: stream `DEPLOY`, subject `deploy.<hive>`, one per (agent, revision, kind).
//!
//! The envelope is plain JSON naming the hive, the agent, the revision and the kind; the payload
//! (the spec and the secrets) is sealed to the hive's public xkey (X25519 + XSalsa20-Poly1305,
//! nkeys' `xkeys`) with a fresh sender key per message, so neither NATS, nor another hive, nor
//! anyone reading the stream can read it. The sealed payload repeats the envelope's fields and
//! [`open`] refuses a message whose two copies differ, so an envelope cannot be re-addressed to
//! another agent, hive or revision. Every envelope is signed by the controller's deploy key
//! ([`crate::signing`]), which each hive pins: the seal protects the secrets, the signature says
//! who sent them, and NATS permissions (only the controller may publish on `deploy.*`) are a
//! second wall rather than the only one.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use nkeys::XKey;
use serde::{Deserialize, Serialize};

use crate::signing::{DeploySigner, PinnedKeys};
use crate::spec::{AgentSpec, SpecError};
use crate::{AgentName, HiveName};

/// The header carrying a deploy message's id, `<agent>:<kind>:<revision>`: JetStream drops a
/// second publish of the same message within the stream's duplicate window.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// What a deploy message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeployKind {
    /// A new agent or a new spec (with its secrets).
    Deploy,
    /// Renewed or linked secrets for an agent already deployed.
    Credentials,
}

impl DeployKind {
    /// As written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DeployKind::Deploy => "deploy",
            DeployKind::Credentials => "credentials",
        }
    }
}

/// A deploy message as it travels on `deploy.<hive>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// `deploy` or `credentials`.
    pub kind: DeployKind,
    /// The hive it is for.
    pub hive: HiveName,
    /// The agent it is about.
    pub agent: AgentName,
    /// Increases with every message about this agent; a hive applies each revision once.
    pub revision: u64,
    /// The public xkey of the (one-time) sender key.
    pub sender: String,
    /// The sealed [`Payload`], base64.
    pub sealed: String,
    /// The public deploy key of the controller that signed it (`V...`). Absent in a message
    /// from before messages were signed, which no hive applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// The signer's Ed25519 signature over every other field, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Envelope {
    /// The message id for [`MSG_ID_HEADER`].
    pub fn msg_id(&self) -> String {
        format!("{}:{}:{}", self.agent, self.kind.as_str(), self.revision)
    }

    /// Who the log names as the sender: the signing key, else the one-time sealing key.
    pub fn sent_by(&self) -> String {
        match &self.signer {
            Some(signer) => format!("signer {}", signer.chars().take(60).collect::<String>()),
            None => format!("unsigned, sealed by {}", self.sender.chars().take(60).collect::<String>()),
        }
    }

    /// The fields the signature covers, in order.
    fn signed_fields(&self) -> [String; 6] {
        [
            self.kind.as_str().to_owned(),
            self.hive.to_string(),
            self.agent.to_string(),
            self.revision.to_string(),
            self.sender.clone(),
            self.sealed.clone(),
        ]
    }
}

/// The agent's secrets. Never logged, never stored outside the agent's own 0600 files.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secrets {
    /// The agent's NATS `.creds` file content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats_creds: Option<String>,
    /// Further secret files by name (`[a-z0-9][a-z0-9._-]*`), e.g. a forge token.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Secret environment variables for the agent's turns, by name
    /// ([`crate::env_secrets`]): the swarm's defaults with the agent's own values over them.
    /// A message without it (written before it existed) means none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("nats_creds", &self.nats_creds.as_ref().map(|_| "<redacted>"))
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What is sealed: the envelope's addressing again, the spec (for `deploy`) and the secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    /// As in the envelope.
    pub kind: DeployKind,
    /// As in the envelope.
    pub hive: HiveName,
    /// As in the envelope.
    pub agent: AgentName,
    /// As in the envelope.
    pub revision: u64,
    /// How to run the agent (required for `deploy`, absent for `credentials`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<AgentSpec>,
    /// The secrets.
    pub secrets: Secrets,
}

/// Why a deploy message is refused; nothing is applied then. The text never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeployError {
    /// Not an envelope.
    #[error("not a deploy message: {0}")]
    Malformed(String),
    /// For another hive.
    #[error("the message is for hive {to}, not this hive ({this})")]
    WrongHive {
        /// The hive named.
        to: String,
        /// This hive.
        this: String,
    },
    /// The seal does not open with this hive's key (sealed to another key, or altered).
    #[error("the seal does not open with this hive's xkey: sealed to another hive's key, or altered on the way")]
    BadSeal,
    /// The sealed copy of the addressing differs from the envelope's.
    #[error("the sealed payload is addressed to {sealed}, the envelope to {envelope}: refused as tampered")]
    Readdressed {
        /// What the seal says.
        sealed: String,
        /// What the envelope says.
        envelope: String,
    },
    /// A `deploy` without a spec, or a spec that does not validate.
    #[error("{0}")]
    BadSpec(String),
    /// A secret file name outside `[a-z0-9][a-z0-9._-]*`.
    #[error("secret file name {0:?} must match [a-z0-9][a-z0-9._-]* (at most 64 characters)")]
    BadSecretName(String),
    /// A secret variable whose name or value the rules of [`crate::env_secrets`] refuse.
    #[error("secret environment: {0}")]
    BadSecretEnv(String),
    /// Sealing failed (a bad recipient key).
    #[error("cannot seal to {0:?}: not a public curve key")]
    BadRecipient(String),
    /// No signature: a controller from before messages were signed, or a forgery.
    #[error("the message is not signed ({sent_by}); this hive applies only messages its pinned controller key signed")]
    Unsigned {
        /// Who sealed it.
        sent_by: String,
    },
    /// Signed by a key this hive does not pin.
    #[error(
        "signed by {signer}, which this hive does not pin (HIVE_C0RE_CONTROLLER_KEYS); a forgery, or a controller \
         whose new key the hive has not been given yet"
    )]
    UntrustedSigner {
        /// The key named.
        signer: String,
    },
    /// The signature does not verify: the message was altered, or the signer named falsely.
    #[error("the signature of {signer} does not verify: the message was altered or forged")]
    BadSignature {
        /// The key named.
        signer: String,
    },
}

/// Whether `key` is a public xkey (`X...`).
pub fn is_public_xkey(key: &str) -> bool {
    key.starts_with('X') && XKey::from_public_key(key).is_ok()
}

/// Seals `payload` to `recipient` (the hive's public xkey) in a fresh envelope signed by `signer`.
///
/// # Errors
/// [`DeployError::BadRecipient`], or [`DeployError::BadSpec`]/[`DeployError::BadSecretName`]
/// for a payload the hive would refuse (so it is refused before it is sent).
pub fn seal(payload: &Payload, recipient: &str, signer: &DeploySigner) -> Result<Envelope, DeployError> {
    check_payload(payload)?;
    let bad_recipient = || DeployError::BadRecipient(recipient.chars().take(80).collect());
    if !is_public_xkey(recipient) {
        return Err(bad_recipient());
    }
    let recipient_key = XKey::from_public_key(recipient).map_err(|_| bad_recipient())?;
    let sender = XKey::new();
    let plain = serde_json::to_vec(payload).map_err(|e| DeployError::Malformed(e.to_string()))?;
    let sealed = sender.seal(&plain, &recipient_key).map_err(|_| bad_recipient())?;
    let mut envelope = Envelope {
        kind: payload.kind,
        hive: payload.hive.clone(),
        agent: payload.agent.clone(),
        revision: payload.revision,
        sender: sender.public_key(),
        sealed: STANDARD.encode(sealed),
        signer: None,
        signature: None,
    };
    let fields = envelope.signed_fields();
    let signature = signer.sign(&fields.each_ref().map(String::as_str));
    envelope.signer = Some(signer.public_key());
    envelope.signature = Some(STANDARD.encode(signature));
    Ok(envelope)
}

/// Parses a message received on `deploy.<this>`, checks that one of the `pinned` controller keys
/// signed it, and opens it with the hive's own xkey. The signature is checked before the seal is
/// opened, so a forgery costs the hive no decryption.
///
/// # Errors
/// [`DeployError`] saying why it is refused.
pub fn open(bytes: &[u8], this: &HiveName, own: &XKey, pinned: &PinnedKeys) -> Result<Payload, DeployError> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| DeployError::Malformed(e.to_string()))?;
    if &envelope.hive != this {
        return Err(DeployError::WrongHive { to: envelope.hive.to_string(), this: this.to_string() });
    }
    verify_signature(&envelope, pinned)?;
    let sender = XKey::from_public_key(&envelope.sender)
        .map_err(|_| DeployError::Malformed("sender is not a public curve key".into()))?;
    let sealed =
        STANDARD.decode(&envelope.sealed).map_err(|_| DeployError::Malformed("sealed is not base64".into()))?;
    let plain = own.open(&sealed, &sender).map_err(|_| DeployError::BadSeal)?;
    // serde's message may quote a value, and inside the seal a value may be a secret: say only where.
    let payload: Payload = serde_json::from_slice(&plain).map_err(|e| {
        DeployError::Malformed(format!(
            "the sealed payload is not a deploy payload (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let address = |kind: DeployKind, hive: &HiveName, agent: &AgentName, revision: u64| {
        format!("{} {hive}/{agent} revision {revision}", kind.as_str())
    };
    let (sealed_to, envelope_to) = (
        address(payload.kind, &payload.hive, &payload.agent, payload.revision),
        address(envelope.kind, &envelope.hive, &envelope.agent, envelope.revision),
    );
    if sealed_to != envelope_to {
        return Err(DeployError::Readdressed { sealed: sealed_to, envelope: envelope_to });
    }
    check_payload(&payload)?;
    Ok(payload)
}

fn verify_signature(envelope: &Envelope, pinned: &PinnedKeys) -> Result<(), DeployError> {
    let (Some(signer), Some(signature)) = (&envelope.signer, &envelope.signature) else {
        return Err(DeployError::Unsigned { sent_by: envelope.sent_by() });
    };
    let named: String = signer.chars().take(60).collect();
    if !pinned.pins(signer) {
        return Err(DeployError::UntrustedSigner { signer: named });
    }
    let signature = STANDARD.decode(signature).map_err(|_| DeployError::BadSignature { signer: named.clone() })?;
    let fields = envelope.signed_fields();
    if !pinned.verifies(signer, &fields.each_ref().map(String::as_str), &signature) {
        return Err(DeployError::BadSignature { signer: named });
    }
    Ok(())
}

fn check_payload(payload: &Payload) -> Result<(), DeployError> {
    match (&payload.kind, &payload.spec) {
        (DeployKind::Deploy, None) => {
            return Err(DeployError::BadSpec(format!("agent {}: a deploy message must carry a spec", payload.agent)));
        }
        (_, Some(spec)) => spec.validate(&payload.agent).map_err(|e: SpecError| DeployError::BadSpec(e.to_string()))?,
        (DeployKind::Credentials, None) => {}
    }
    for name in payload.secrets.files.keys() {
        let ok = name.len() <= 64
            && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
        if !ok || name == crate::env_secrets::ENV_FILE {
            return Err(DeployError::BadSecretName(name.chars().take(80).collect()));
        }
    }
    crate::env_secrets::check_all(&payload.secrets.env).map_err(DeployError::BadSecretEnv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller() -> (DeploySigner, PinnedKeys) {
        let signer = DeploySigner::generate();
        let pinned = PinnedKeys::parse(&signer.public_key()).unwrap();
        (signer, pinned)
    }

    fn payload(hive: &str) -> Payload {
        Payload {
            kind: DeployKind::Deploy,
            hive: HiveName::parse(hive).unwrap(),
            agent: AgentName::parse("a").unwrap(),
            revision: 3,
            spec: Some(AgentSpec {
                turn_command: "cat".into(),
                schedule_tick: None,
                turn_timeout: None,
                env: BTreeMap::new(),
            }),
            secrets: Secrets {
                nats_creds: Some("-----BEGIN NATS USER JWT-----".into()),
                files: BTreeMap::new(),
                env: BTreeMap::from([("API_TOKEN".into(), "env-s3cr3t".into())]),
            },
        }
    }

    #[test]
    fn a_sealed_message_opens_only_for_its_hive() {
        let (h1, h2) = (XKey::new(), XKey::new());
        let (signer, pinned) = controller();
        let this = HiveName::parse("h1").unwrap();
        let envelope = seal(&payload("h1"), &h1.public_key(), &signer).unwrap();
        let bytes = serde_json::to_vec(&envelope).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("NATS USER JWT"), "the secret travels sealed");
        assert!(!String::from_utf8_lossy(&bytes).contains("env-s3cr3t"), "the secret travels sealed");
        assert_eq!(open(&bytes, &this, &h1, &pinned).unwrap(), payload("h1"));
        assert_eq!(open(&bytes, &this, &h2, &pinned), Err(DeployError::BadSeal));
        let other = HiveName::parse("h2").unwrap();
        assert!(matches!(open(&bytes, &other, &h2, &pinned), Err(DeployError::WrongHive { .. })));
    }

    #[test]
    fn a_readdressed_or_altered_envelope_is_refused() {
        let key = XKey::new();
        let (signer, pinned) = controller();
        let this = HiveName::parse("h1").unwrap();
        let envelope = seal(&payload("h1"), &key.public_key(), &signer).unwrap();
        let open_as_sent = |envelope: &Envelope| open(&serde_json::to_vec(envelope).unwrap(), &this, &key, &pinned);
        // Any field changed after signing breaks the signature; re-signed by the controller's key
        // (which an attacker does not hold), a readdressed envelope is still caught by the seal.
        let mut readdressed = envelope.clone();
        readdressed.agent = AgentName::parse("b").unwrap();
        assert!(matches!(open_as_sent(&readdressed), Err(DeployError::BadSignature { .. })));
        let resigned = |mut e: Envelope| {
            let signature = signer.sign(&e.signed_fields().each_ref().map(String::as_str));
            e.signature = Some(STANDARD.encode(signature));
            e
        };
        let err = open_as_sent(&resigned(readdressed)).unwrap_err();
        assert!(matches!(err, DeployError::Readdressed { .. }), "{err}");
        let mut bumped = envelope.clone();
        bumped.revision = 4;
        assert!(matches!(open_as_sent(&bumped), Err(DeployError::BadSignature { .. })));
        assert!(matches!(open_as_sent(&resigned(bumped)), Err(DeployError::Readdressed { .. })));
        let mut flipped = envelope.clone();
        let mut raw = STANDARD.decode(&flipped.sealed).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        flipped.sealed = STANDARD.encode(raw);
        assert!(matches!(open_as_sent(&flipped), Err(DeployError::BadSignature { .. })));
        assert_eq!(open_as_sent(&resigned(flipped)), Err(DeployError::BadSeal));
        for junk in [&b"{}"[..], b"not json", b""] {
            assert!(matches!(open(junk, &this, &key, &pinned), Err(DeployError::Malformed(_))));
        }
    }

    /// The attack a signature stops: anyone holding a hive's public xkey (the hive directory
    /// shows it) seals a message of their own, with a revision no real one will ever pass.
    #[test]
    fn a_message_not_signed_by_a_pinned_key_is_refused_before_its_seal_is_opened() {
        let hive = XKey::new();
        let (signer, pinned) = controller();
        let this = HiveName::parse("h1").unwrap();
        let mut forged = payload("h1");
        forged.revision = u64::MAX >> 1;
        let by_attacker = DeploySigner::generate();
        let envelope = seal(&forged, &hive.public_key(), &by_attacker).unwrap();
        let err = open(&serde_json::to_vec(&envelope).unwrap(), &this, &hive, &pinned).unwrap_err();
        assert!(
            matches!(&err, DeployError::UntrustedSigner { signer } if *signer == by_attacker.public_key()),
            "{err}"
        );
        // The attacker names the controller's key as the signer: the signature does not verify.
        let mut named_falsely = envelope.clone();
        named_falsely.signer = Some(signer.public_key());
        let err = open(&serde_json::to_vec(&named_falsely).unwrap(), &this, &hive, &pinned).unwrap_err();
        assert!(matches!(err, DeployError::BadSignature { .. }), "{err}");
        // Or sends it unsigned, as before messages were signed.
        let mut unsigned = envelope;
        (unsigned.signer, unsigned.signature) = (None, None);
        let err = open(&serde_json::to_vec(&unsigned).unwrap(), &this, &hive, &pinned).unwrap_err();
        assert!(matches!(&err, DeployError::Unsigned { sent_by } if sent_by.contains(&unsigned.sender)), "{err}");
    }

    /// Replacing the controller's key: hives pin the old and the new key, the controller moves
    /// to the new one, then hives drop the old one.
    #[test]
    fn a_hive_pinning_two_keys_accepts_both_and_dropping_one_refuses_it() {
        let hive = XKey::new();
        let this = HiveName::parse("h1").unwrap();
        let (old, new) = (DeploySigner::generate(), DeploySigner::generate());
        let by_old = serde_json::to_vec(&seal(&payload("h1"), &hive.public_key(), &old).unwrap()).unwrap();
        let by_new = serde_json::to_vec(&seal(&payload("h1"), &hive.public_key(), &new).unwrap()).unwrap();
        let both = PinnedKeys::parse(&format!("{},{}", old.public_key(), new.public_key())).unwrap();
        assert!(open(&by_old, &this, &hive, &both).is_ok());
        assert!(open(&by_new, &this, &hive, &both).is_ok());
        let new_only = PinnedKeys::parse(&new.public_key()).unwrap();
        assert!(open(&by_new, &this, &hive, &new_only).is_ok());
        assert!(matches!(open(&by_old, &this, &hive, &new_only), Err(DeployError::UntrustedSigner { .. })));
    }

    #[test]
    fn a_malformed_sealed_payload_is_refused_without_quoting_it() {
        let (hive, sender) = (XKey::new(), XKey::new());
        let recipient = XKey::from_public_key(&hive.public_key()).unwrap();
        let plain = br#"{"kind":"deploy","hive":"h1","agent":"a","revision":"SECRET-TOKEN-1234","secrets":{}}"#;
        let envelope = Envelope {
            kind: DeployKind::Deploy,
            hive: HiveName::parse("h1").unwrap(),
            agent: AgentName::parse("a").unwrap(),
            revision: 1,
            sender: sender.public_key(),
            sealed: STANDARD.encode(sender.seal(plain, &recipient).unwrap()),
            signer: None,
            signature: None,
        };
        let (signer, pinned) = controller();
        let fields = envelope.signed_fields();
        let signature = signer.sign(&fields.each_ref().map(String::as_str));
        let envelope =
            Envelope { signer: Some(signer.public_key()), signature: Some(STANDARD.encode(signature)), ..envelope };
        let err =
            open(&serde_json::to_vec(&envelope).unwrap(), &HiveName::parse("h1").unwrap(), &hive, &pinned).unwrap_err();
        assert!(matches!(err, DeployError::Malformed(_)), "{err}");
        assert!(!err.to_string().contains("SECRET-TOKEN"), "{err}");
    }

    #[test]
    fn a_payload_the_hive_would_refuse_is_not_sealed() {
        let key = XKey::new().public_key();
        let signer = DeploySigner::generate();
        let seal = |payload: &Payload, key: &str| seal(payload, key, &signer);
        let mut no_spec = payload("h1");
        no_spec.spec = None;
        assert!(matches!(seal(&no_spec, &key), Err(DeployError::BadSpec(_))));
        let mut bad_name = payload("h1");
        bad_name.secrets.files.insert("../etc/passwd".into(), "x".into());
        assert!(matches!(seal(&bad_name, &key), Err(DeployError::BadSecretName(_))));
        assert!(matches!(seal(&payload("h1"), "Xnope"), Err(DeployError::BadRecipient(_))));
        let debug = format!("{:?}", payload("h1").secrets);
        assert!(!debug.contains("NATS USER JWT") && !debug.contains("env-s3cr3t"), "{debug}");
        let mut reserved_file = payload("h1");
        reserved_file.secrets.files.insert(crate::env_secrets::ENV_FILE.into(), "x".into());
        assert!(matches!(seal(&reserved_file, &key), Err(DeployError::BadSecretName(_))));
        let mut bad_env = payload("h1");
        bad_env.secrets.env.insert("LD_PRELOAD".into(), "env-s3cr3t".into());
        let err = seal(&bad_env, &key).unwrap_err();
        assert!(matches!(err, DeployError::BadSecretEnv(_)) && !err.to_string().contains("env-s3cr3t"), "{err}");
    }

    #[test]
    fn a_payload_written_before_secret_variables_existed_still_opens() {
        let old = r#"{"nats_creds":"c","files":{"forge-token":"t"}}"#;
        let secrets: Secrets = serde_json::from_str(old).unwrap();
        assert!(secrets.env.is_empty());
        assert_eq!(secrets.files.len(), 1);
    }
}
