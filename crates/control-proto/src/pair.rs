//! `POST /v1/pair`: a device redeems a code and registers its own Ed25519 public key.
//!
//! The device proves it holds the private key by signing [`proof_message`] (which binds the code,
//! the key and the name, so a proof cannot be replayed with another code or name). A device that
//! was given no name sends its own default ([`DeviceName::Default`]): the name the code suggests
//! (`agents-control code --name`), when it has one, is then the device's name. The control
//! plane answers with the device id and its signature over [`device_statement`], which the device
//! checks against the control public key the code carried.

use crate::encoding;
use crate::{DeviceKind, code::Code};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Longest device name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairRequest {
    /// The code token, as `agents-control code` printed it.
    pub code: String,
    /// The device's Ed25519 public key, base64url.
    pub public_key: String,
    /// The name shown for this device, 1 to 64 characters, no control characters.
    pub name: String,
    /// `name` is only the device's own default (its hostname): the code's suggested name wins
    /// when it has one. Absent means `false`: `name` is the name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub name_is_default: bool,
    /// The device key's signature over [`proof_message`], base64url.
    pub proof: String,
}

/// The success body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairResponse {
    pub device_id: String,
    pub kind: DeviceKind,
    pub name: String,
    /// The control plane's signature over [`device_statement`], base64url.
    pub signature: String,
    /// The control plane's name (`AGENTS_CONTROL_NAME`), the one windows and phones show;
    /// absent when it was given none. For display only: it is not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_name: Option<String>,
}

/// A pair request that is well formed and whose proof holds.
#[derive(Debug, Clone)]
pub struct VerifiedPairRequest {
    pub code: Code,
    pub public_key: VerifyingKey,
    pub name: String,
    /// See [`PairRequest::name_is_default`].
    pub name_is_default: bool,
}

/// The name a device asks to be paired under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceName<'a> {
    /// Chosen for this device (`--name`): it is the device's name.
    Chosen(&'a str),
    /// The device's own default (its hostname): the name the code suggests wins when it has one.
    Default(&'a str),
}

impl<'a> DeviceName<'a> {
    /// The name the device sends.
    pub fn as_str(&self) -> &'a str {
        match self {
            DeviceName::Chosen(name) | DeviceName::Default(name) => name,
        }
    }

    fn is_default(&self) -> bool {
        matches!(self, DeviceName::Default(_))
    }
}

/// Why a pair request is refused before the store is consulted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PairRequestError {
    #[error("code: {0}")]
    Code(#[from] crate::code::CodeError),
    #[error("public_key {0}: send the device's Ed25519 public key, 32 bytes in base64url")]
    PublicKey(String),
    #[error("name {0}")]
    Name(String),
    #[error("proof {0}: sign the pairing message with the device key (see docs/control-plane/protocol.md)")]
    Proof(String),
}

/// The bytes a device signs to prove it holds its key. A default name adds a last line, so a
/// proof for a chosen name cannot be replayed to take the code's suggestion instead.
pub fn proof_message(code_token: &str, public_key: &str, name: &str, name_is_default: bool) -> Vec<u8> {
    let default = if name_is_default { "\ndefault" } else { "" };
    format!("hyperhive pair v1\n{}\n{public_key}\n{name}{default}", code_token.trim()).into_bytes()
}

/// The bytes the control plane signs to vouch for a paired device.
pub fn device_statement(device_id: &str, kind: DeviceKind, public_key: &str) -> Vec<u8> {
    format!("hyperhive device v1\n{device_id}\n{kind}\n{public_key}").into_bytes()
}

/// Checks a device name: 1 to [`MAX_NAME_CHARS`] characters, no control characters, not blank.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("is empty: give the device a name".into());
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(format!("is {chars} characters long, at most {MAX_NAME_CHARS} are allowed"));
    }
    if name.chars().any(char::is_control) {
        return Err("contains control characters".into());
    }
    Ok(())
}

impl PairRequest {
    /// What a device given the name `name` sends: signs the proof with its key.
    pub fn sign(code_token: &str, device_key: &SigningKey, name: &str) -> PairRequest {
        PairRequest::sign_as(code_token, device_key, DeviceName::Chosen(name))
    }

    /// What a device sends for a chosen or a default name: signs the proof with its key.
    pub fn sign_as(code_token: &str, device_key: &SigningKey, name: DeviceName<'_>) -> PairRequest {
        let public_key = encoding::encode(device_key.verifying_key().as_bytes());
        let proof = device_key.sign(&proof_message(code_token, &public_key, name.as_str(), name.is_default()));
        PairRequest {
            code: code_token.trim().to_owned(),
            public_key,
            name: name.as_str().to_owned(),
            name_is_default: name.is_default(),
            proof: encoding::encode(&proof.to_bytes()),
        }
    }

    /// Parses every field and checks the proof.
    pub fn verify(&self) -> Result<VerifiedPairRequest, PairRequestError> {
        let code = Code::parse(&self.code)?;
        let key_bytes = encoding::decode_exact::<32>(&self.public_key).map_err(PairRequestError::PublicKey)?;
        let public_key = VerifyingKey::from_bytes(&key_bytes)
            .map_err(|_| PairRequestError::PublicKey("is not a valid Ed25519 point".into()))?;
        validate_name(&self.name).map_err(PairRequestError::Name)?;
        let proof = encoding::decode_exact::<64>(&self.proof).map_err(PairRequestError::Proof)?;
        public_key
            .verify_strict(
                &proof_message(&self.code, &self.public_key, &self.name, self.name_is_default),
                &Signature::from_bytes(&proof),
            )
            .map_err(|_| PairRequestError::Proof("does not verify against public_key".into()))?;
        Ok(VerifiedPairRequest { code, public_key, name: self.name.clone(), name_is_default: self.name_is_default })
    }
}

impl PairResponse {
    /// What a device checks: the control plane (holder of `control_key`) vouched for this id.
    pub fn verify(&self, control_key: &VerifyingKey, device_public_key: &str) -> bool {
        let Ok(signature) = encoding::decode_exact::<64>(&self.signature) else {
            return false;
        };
        control_key
            .verify_strict(
                &device_statement(&self.device_id, self.kind, device_public_key),
                &Signature::from_bytes(&signature),
            )
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_token() -> String {
        Code {
            control_url: "http://127.0.0.1:8791".into(),
            control_public_key: SigningKey::from_bytes(&[3; 32]).verifying_key().to_bytes(),
            pin: None,
            kind: DeviceKind::Client,
            secret: [5; 32],
        }
        .to_token()
    }

    #[test]
    fn a_signed_request_verifies() {
        let key = SigningKey::from_bytes(&[4; 32]);
        let request = PairRequest::sign(&code_token(), &key, "laptop");
        let verified = request.verify().unwrap();
        assert_eq!(verified.public_key, key.verifying_key());
        assert_eq!(verified.name, "laptop");
    }

    #[test]
    fn a_proof_for_another_name_or_key_is_refused() {
        let key = SigningKey::from_bytes(&[4; 32]);
        let mut request = PairRequest::sign(&code_token(), &key, "laptop");
        request.name = "phone".into();
        assert!(matches!(request.verify(), Err(PairRequestError::Proof(_))));
        let mut request = PairRequest::sign(&code_token(), &key, "laptop");
        request.public_key = encoding::encode(SigningKey::from_bytes(&[6; 32]).verifying_key().as_bytes());
        assert!(matches!(request.verify(), Err(PairRequestError::Proof(_))));
    }

    #[test]
    fn a_default_name_is_signed_as_one_and_cannot_be_flipped() {
        let key = SigningKey::from_bytes(&[4; 32]);
        let request = PairRequest::sign_as(&code_token(), &key, DeviceName::Default("box"));
        assert!(request.verify().unwrap().name_is_default);
        let mut flipped = request.clone();
        flipped.name_is_default = false;
        assert!(matches!(flipped.verify(), Err(PairRequestError::Proof(_))));
        let mut flipped = PairRequest::sign(&code_token(), &key, "box");
        flipped.name_is_default = true;
        assert!(matches!(flipped.verify(), Err(PairRequestError::Proof(_))));
        let chosen = serde_json::to_value(PairRequest::sign(&code_token(), &key, "box")).unwrap();
        assert!(chosen.get("name_is_default").is_none(), "a chosen name's body is as before: {chosen}");
    }

    #[test]
    fn malformed_fields_are_named() {
        let key = SigningKey::from_bytes(&[4; 32]);
        let good = PairRequest::sign(&code_token(), &key, "laptop");
        type Spoil = fn(&mut PairRequest);
        let cases: [(Spoil, &str); 6] = [
            (|r| r.code = "nope".into(), "code:"),
            (|r| r.public_key = "AAAA".into(), "public_key"),
            (|r| r.name = String::new(), "name is empty"),
            (|r| r.name = "x".repeat(65), "at most 64"),
            (|r| r.name = "a\u{7}b".into(), "control characters"),
            (|r| r.proof = "%%".into(), "proof"),
        ];
        for (spoil, needle) in cases {
            let mut request = good.clone();
            spoil(&mut request);
            let message = request.verify().unwrap_err().to_string();
            assert!(message.contains(needle), "{message} lacks {needle}");
        }
    }

    #[test]
    fn the_response_signature_binds_id_kind_and_key() {
        let control = SigningKey::from_bytes(&[3; 32]);
        let statement = device_statement("dev_1", DeviceKind::Host, "pk");
        let response = PairResponse {
            device_id: "dev_1".into(),
            kind: DeviceKind::Host,
            name: "n".into(),
            signature: encoding::encode(&control.sign(&statement).to_bytes()),
            control_name: None,
        };
        assert!(response.verify(&control.verifying_key(), "pk"));
        assert!(!response.verify(&control.verifying_key(), "other"));
        let mut forged = response.clone();
        forged.device_id = "dev_2".into();
        assert!(!forged.verify(&control.verifying_key(), "pk"));
    }
}
