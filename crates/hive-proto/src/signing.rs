//! Who may send deploy messages: the controller signs every deploy and credentials message with
//! its deploy key (an Ed25519 nkey of the service kind: seed `SV...`, public key `V...`), and each
//! hive pins the public key (or, while the key is being replaced, the old and the new one) in its
//! own configuration. A hive applies only a message whose signature one of its pinned keys
//! verifies, so NATS permissions are no longer all that stands between a broadened grant and code
//! running on every hive: a message sealed by anyone else to a hive's public xkey (which the hive
//! directory shows) is refused before its seal is even opened.
//!
//! What is signed is every field of the envelope, each separated by a NUL (no field can hold one:
//! names are checked, the seal is base64, keys are nkeys), after a label naming the format, so a
//! signature cannot be moved to another message, kind, agent, hive or revision.

use nkeys::{KeyPair, KeyPairType};

/// The label at the start of the signed bytes; a new format gets a new label.
const SIGNED_LABEL: &[u8] = b"hyperhive deploy message v1";

/// The controller's private deploy key.
pub struct DeploySigner {
    key: KeyPair,
}

impl std::fmt::Debug for DeploySigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploySigner").field("public", &self.key.public_key()).finish()
    }
}

/// Why a deploy key, or a list of pinned keys, is refused. The text never holds a seed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The seed text is not a service-kind nkey seed.
    #[error("not a deploy key seed (one line starting with SV, as `swarm-controller deploy-key --out FILE` writes)")]
    BadSeed,
    /// A pinned key is not a public service-kind nkey.
    #[error(
        "{0:?} is not a controller deploy key (a public key starting with V, as `swarm-controller deploy-key` prints)"
    )]
    BadPublic(String),
    /// No key pinned.
    #[error("no key given; pin the controller's deploy key (a public key starting with V)")]
    NonePinned,
}

impl DeploySigner {
    /// A new random key.
    pub fn generate() -> Self {
        Self { key: KeyPair::new(KeyPairType::Service) }
    }

    /// Reads a seed (surrounding whitespace ignored).
    ///
    /// # Errors
    /// [`KeyError::BadSeed`] for anything but a service-kind seed.
    pub fn from_seed(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if !text.starts_with("SV") {
            return Err(KeyError::BadSeed);
        }
        KeyPair::from_seed(text).map(|key| Self { key }).map_err(|_| KeyError::BadSeed)
    }

    /// The seed, for the key file only.
    ///
    /// # Errors
    /// When the key cannot be encoded (never for a key this type made).
    pub fn seed(&self) -> Result<String, KeyError> {
        self.key.seed().map_err(|_| KeyError::BadSeed)
    }

    /// The public key hives pin (`V...`).
    pub fn public_key(&self) -> String {
        self.key.public_key()
    }

    /// Signs `fields` of a message.
    pub(crate) fn sign(&self, fields: &[&str]) -> Vec<u8> {
        // Signing with a key made from a seed cannot fail: only a public-only pair refuses.
        self.key.sign(&signed_bytes(fields)).expect("a deploy signer always holds its seed")
    }
}

/// The controller deploy keys a hive accepts: one, or two while the key is being replaced.
#[derive(Clone)]
pub struct PinnedKeys {
    keys: Vec<KeyPair>,
}

impl std::fmt::Debug for PinnedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.keys.iter().map(KeyPair::public_key)).finish()
    }
}

impl PinnedKeys {
    /// Parses a comma- or whitespace-separated list of public keys.
    ///
    /// # Errors
    /// [`KeyError::BadPublic`] naming the first key that is not a public deploy key, or
    /// [`KeyError::NonePinned`].
    pub fn parse(list: &str) -> Result<Self, KeyError> {
        let mut keys = Vec::new();
        for text in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
            let bad = || KeyError::BadPublic(text.chars().take(80).collect());
            if !text.starts_with('V') {
                return Err(bad());
            }
            keys.push(KeyPair::from_public_key(text).map_err(|_| bad())?);
        }
        if keys.is_empty() {
            return Err(KeyError::NonePinned);
        }
        Ok(Self { keys })
    }

    /// Whether `signer` is one of the pinned keys.
    pub fn pins(&self, signer: &str) -> bool {
        self.keys.iter().any(|k| k.public_key() == signer)
    }

    /// Whether `signature` over `fields` was made by `signer`, which must be pinned.
    pub(crate) fn verifies(&self, signer: &str, fields: &[&str], signature: &[u8]) -> bool {
        self.keys
            .iter()
            .find(|k| k.public_key() == signer)
            .is_some_and(|k| k.verify(&signed_bytes(fields), signature).is_ok())
    }
}

fn signed_bytes(fields: &[&str]) -> Vec<u8> {
    let mut out = SIGNED_LABEL.to_vec();
    for field in fields {
        out.push(0);
        out.extend_from_slice(field.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_reads_back_and_only_a_deploy_seed_is_taken() {
        let signer = DeploySigner::generate();
        let again = DeploySigner::from_seed(&format!("  {}\n", signer.seed().unwrap())).unwrap();
        assert_eq!(again.public_key(), signer.public_key());
        assert!(signer.public_key().starts_with('V'));
        let user_seed = KeyPair::new_user().seed().unwrap();
        assert_eq!(DeploySigner::from_seed(&user_seed).unwrap_err(), KeyError::BadSeed);
        assert_eq!(DeploySigner::from_seed("SVnotaseed").unwrap_err(), KeyError::BadSeed);
        let debug = format!("{signer:?}");
        assert!(!debug.contains(&signer.seed().unwrap()), "{debug}");
    }

    #[test]
    fn pinned_keys_are_parsed_strictly() {
        let (a, b) = (DeploySigner::generate(), DeploySigner::generate());
        let both = PinnedKeys::parse(&format!("{}, {}", a.public_key(), b.public_key())).unwrap();
        assert!(both.pins(&a.public_key()) && both.pins(&b.public_key()));
        assert_eq!(PinnedKeys::parse(" , ").unwrap_err(), KeyError::NonePinned);
        let account = KeyPair::new_account().public_key();
        assert!(matches!(PinnedKeys::parse(&account), Err(KeyError::BadPublic(_))));
        let mut typo = a.public_key();
        typo.replace_range(5..6, if &typo[5..6] == "A" { "B" } else { "A" });
        assert!(matches!(PinnedKeys::parse(&typo), Err(KeyError::BadPublic(_))), "a checksum catches a typo");
        assert!(matches!(PinnedKeys::parse(&a.seed().unwrap()), Err(KeyError::BadPublic(_))));
    }

    #[test]
    fn a_signature_verifies_only_for_its_fields_and_its_signer() {
        let (a, b) = (DeploySigner::generate(), DeploySigner::generate());
        let pinned = PinnedKeys::parse(&a.public_key()).unwrap();
        let signature = a.sign(&["deploy", "h1", "x"]);
        assert!(pinned.verifies(&a.public_key(), &["deploy", "h1", "x"], &signature));
        assert!(!pinned.verifies(&a.public_key(), &["deploy", "h1", "y"], &signature));
        assert!(!pinned.verifies(&a.public_key(), &["deploy", "h1x"], &signature), "fields are separated");
        let by_b = b.sign(&["deploy", "h1", "x"]);
        assert!(!pinned.verifies(&b.public_key(), &["deploy", "h1", "x"], &by_b), "b is not pinned");
        assert!(!pinned.verifies(&a.public_key(), &["deploy", "h1", "x"], &by_b), "b's signature named as a's");
    }
}
