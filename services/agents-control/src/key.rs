//! The control key: a 32-byte Ed25519 seed shared by every copy. Its public half is
//! the control plane's identity. The private half is never written, logged or sent: this type
//! prints as `<redacted>` and every error about it describes the input, never its content.

use ed25519_dalek::{Signer, SigningKey};
use hyperhive_control_proto::encoding;
use std::path::Path;

#[derive(Clone)]
pub struct ControlKey {
    signing: SigningKey,
}

impl std::fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlKey").field("public", &self.public_key_text()).field("private", &"<redacted>").finish()
    }
}

/// Why the key could not be loaded. Never contains key material.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error(
        "no control key: set AGENTS_CONTROL_KEY_FILE (a file of 32 random bytes, e.g. `head -c 32 /dev/urandom > control-key`) or AGENTS_CONTROL_KEY (those bytes in base64url)"
    )]
    Missing,
    #[error("both AGENTS_CONTROL_KEY_FILE and AGENTS_CONTROL_KEY are set: set only one")]
    Both,
    #[error("AGENTS_CONTROL_KEY_FILE {path}: cannot read it ({reason})")]
    Unreadable { path: String, reason: String },
    #[error(
        "AGENTS_CONTROL_KEY_FILE {path}: holds {len} bytes, the key must be exactly 32 raw bytes (`head -c 32 /dev/urandom`)"
    )]
    FileLength { path: String, len: usize },
    #[error("AGENTS_CONTROL_KEY: {0} (it must be 32 bytes in base64url, 43 characters)")]
    Text(String),
}

/// A key file others can read is a key others may have: say so (but still start, as the
/// secret store mounting it decides its mode).
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(metadata) = std::fs::metadata(path) {
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the control key file is readable by other users: chmod 600 it"
            );
        }
    }
}

impl ControlKey {
    pub fn from_seed(seed: [u8; 32]) -> ControlKey {
        ControlKey { signing: SigningKey::from_bytes(&seed) }
    }

    /// Loads the key from exactly one of a file of 32 raw bytes or base64url text.
    pub fn load(file: Option<&Path>, text: Option<&str>) -> Result<ControlKey, KeyError> {
        match (file, text) {
            (None, None) => Err(KeyError::Missing),
            (Some(_), Some(_)) => Err(KeyError::Both),
            (Some(path), None) => {
                let shown = path.display().to_string();
                let bytes = std::fs::read(path)
                    .map_err(|e| KeyError::Unreadable { path: shown.clone(), reason: e.kind().to_string() })?;
                warn_if_shared(path);
                let len = bytes.len();
                let seed: [u8; 32] = bytes.try_into().map_err(|_| KeyError::FileLength { path: shown, len })?;
                Ok(ControlKey::from_seed(seed))
            }
            (None, Some(text)) => {
                let seed = encoding::decode_exact::<32>(text.trim()).map_err(|e| {
                    // `decode_exact` describes the shape of the input, never its content.
                    KeyError::Text(e)
                })?;
                Ok(ControlKey::from_seed(seed))
            }
        }
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.signing.verifying_key().to_bytes()
    }

    /// The public key in base64url, as codes and responses carry it.
    pub fn public_key_text(&self) -> String {
        encoding::encode(&self.public_key())
    }

    /// Signs `message`, returning the signature in base64url.
    pub fn sign(&self, message: &[u8]) -> String {
        encoding::encode(&self.signing.sign(message).to_bytes())
    }

    /// A secret for one `purpose`, derived from the private half with HKDF-SHA256: only holders
    /// of the control key can compute it, and secrets for different purposes are unrelated.
    pub fn derived_secret(&self, purpose: &str) -> [u8; 32] {
        struct Len32;
        impl ring::hkdf::KeyType for Len32 {
            fn len(&self) -> usize {
                32
            }
        }
        let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"hyperhive control key derivation v1");
        let info = [purpose.as_bytes()];
        let mut secret = [0u8; 32];
        salt.extract(&self.signing.to_bytes())
            .expand(&info, Len32)
            .and_then(|okm| okm.fill(&mut secret))
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        secret
    }

    /// Whether `signature` (base64url) is this key's signature over `message`: how copies
    /// check that a peer holds the same key.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        encoding::decode_exact::<64>(signature).is_ok_and(|bytes| {
            self.signing.verifying_key().verify_strict(message, &ed25519_dalek::Signature::from_bytes(&bytes)).is_ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn loads_from_a_file_or_text_and_never_shows_the_seed() {
        let seed = [42u8; 32];
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&seed).unwrap();
        let from_file = ControlKey::load(Some(file.path()), None).unwrap();
        let from_text = ControlKey::load(None, Some(&encoding::encode(&seed))).unwrap();
        assert_eq!(from_file.public_key(), from_text.public_key());
        let shown = format!("{from_file:?}");
        assert!(shown.contains("redacted") && !shown.contains(&encoding::encode(&seed)));
    }

    #[test]
    fn derived_secrets_depend_on_the_key_and_the_purpose() {
        let (key, other) = (ControlKey::from_seed([1; 32]), ControlKey::from_seed([2; 32]));
        assert_eq!(key.derived_secret("a"), ControlKey::from_seed([1; 32]).derived_secret("a"));
        assert_ne!(key.derived_secret("a"), key.derived_secret("b"));
        assert_ne!(key.derived_secret("a"), other.derived_secret("a"));
        assert_ne!(key.derived_secret("a"), [1; 32]);
    }

    #[test]
    fn wrong_shapes_are_clear_errors_without_key_material() {
        let secret_text = "c2VjcmV0LXNlY3JldC1zZWNyZXQ";
        let mut short = tempfile::NamedTempFile::new().unwrap();
        short.write_all(b"0123456789").unwrap();
        let cases = [
            (ControlKey::load(None, None).unwrap_err(), "no control key"),
            (ControlKey::load(Some(short.path()), Some("x")).unwrap_err(), "both"),
            (ControlKey::load(Some(short.path()), None).unwrap_err(), "holds 10 bytes"),
            (ControlKey::load(Some(Path::new("/nonexistent/key")), None).unwrap_err(), "cannot read"),
            (ControlKey::load(None, Some(secret_text)).unwrap_err(), "holds 20 bytes"),
            (ControlKey::load(None, Some("***")).unwrap_err(), "base64url"),
        ];
        for (error, needle) in cases {
            let message = error.to_string();
            assert!(message.contains(needle), "{message} lacks {needle}");
            assert!(!message.contains(secret_text) && !message.contains("0123456789"));
        }
    }
}
