//! Sealing one value: XChaCha20-Poly1305 under the store's key, a random 24-byte nonce per
//! value (large enough that random nonces never repeat in practice), and the record's key as
//! associated data, so a sealed value opens only under the key it was written to.
//!
//! Layout: one version byte ([`FORMAT`]), the nonce, then the ciphertext with its 16-byte tag.

use std::fmt;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;

use super::SecretsKey;

/// The first byte of every sealed value; another value means another layout.
pub const FORMAT: u8 = 1;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Binds the associated data to this use, so nothing sealed elsewhere under the same key
/// could pass for a stored secret.
const CONTEXT: &[u8] = b"hyperhive swarm-secrets v1\n";

/// An opened value. Its `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct Plaintext(Vec<u8>);

impl Plaintext {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Plaintext {
        Plaintext(bytes.into())
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Plaintext({} bytes)", self.0.len())
    }
}

/// Why a sealed value did not open. Never says anything of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("it is too short to be a sealed value")]
    Truncated,
    #[error("it is in format {0}, which this controller does not know (a newer controller wrote it?)")]
    UnknownFormat(u8),
    #[error(
        "it does not open: it was changed, copied from another record, or sealed under another SWARM_SECRETS_KEY_FILE"
    )]
    Refused,
}

fn associated_data(record: &str) -> Vec<u8> {
    [CONTEXT, record.as_bytes()].concat()
}

/// Seals `plaintext` for the record `record`.
pub fn seal(key: &SecretsKey, record: &str, plaintext: &[u8]) -> Vec<u8> {
    let mut nonce = [0; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let cipher = XChaCha20Poly1305::new(key.bytes().into());
    let aad = associated_data(record);
    let sealed = cipher
        .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad: &aad })
        .expect("XChaCha20-Poly1305 seals any length a KV value can have");
    [&[FORMAT][..], &nonce, &sealed].concat()
}

/// Opens a value sealed for the record `record`.
///
/// # Errors
/// [`OpenError`]; nothing is returned of a value that does not verify.
pub fn open(key: &SecretsKey, record: &str, sealed: &[u8]) -> Result<Plaintext, OpenError> {
    let (&format, rest) = sealed.split_first().ok_or(OpenError::Truncated)?;
    if format != FORMAT {
        return Err(OpenError::UnknownFormat(format));
    }
    if rest.len() < NONCE_LEN + TAG_LEN {
        return Err(OpenError::Truncated);
    }
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    let cipher = XChaCha20Poly1305::new(key.bytes().into());
    let aad = associated_data(record);
    cipher
        .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: &aad })
        .map(Plaintext)
        .map_err(|_| OpenError::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(byte: u8) -> SecretsKey {
        SecretsKey::from_bytes([byte; 32])
    }

    proptest! {
        #[test]
        fn a_sealed_value_opens_only_unchanged_for_its_record_under_its_key(
            value in proptest::collection::vec(any::<u8>(), 0..512),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let sealed = seal(&key(1), "agent.a.forge-password", &value);
            let opened = open(&key(1), "agent.a.forge-password", &sealed).unwrap();
            prop_assert_eq!(opened.expose(), &value[..]);
            if value.len() >= 8 {
                prop_assert!(!sealed.windows(value.len()).any(|w| w == &value[..]), "the plaintext shows in the sealed value");
            }
            let mut changed = sealed.clone();
            let at = flip.index(changed.len());
            changed[at] ^= 1 << bit;
            let refused = open(&key(1), "agent.a.forge-password", &changed).unwrap_err();
            prop_assert!(matches!(refused, OpenError::Refused | OpenError::UnknownFormat(_)), "{:?}", refused);
            prop_assert_eq!(open(&key(1), "agent.b.forge-password", &sealed), Err(OpenError::Refused));
            prop_assert_eq!(open(&key(2), "agent.a.forge-password", &sealed), Err(OpenError::Refused));
        }
    }

    #[test]
    fn two_seals_of_one_value_differ_and_short_or_foreign_input_is_refused() {
        let (a, b) = (seal(&key(1), "r", b"same"), seal(&key(1), "r", b"same"));
        assert_ne!(a, b, "each seal takes a fresh nonce");
        assert_eq!(open(&key(1), "r", &[]), Err(OpenError::Truncated));
        assert_eq!(open(&key(1), "r", &a[..NONCE_LEN + TAG_LEN]), Err(OpenError::Truncated));
        let mut other_format = a.clone();
        other_format[0] = 2;
        assert_eq!(open(&key(1), "r", &other_format), Err(OpenError::UnknownFormat(2)));
        assert_eq!(format!("{:?}", open(&key(1), "r", &a).unwrap()), "Plaintext(4 bytes)");
    }
}
