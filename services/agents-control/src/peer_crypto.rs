//! The keys of a link between copies and the sealing of its frames
//! (`docs/control-plane/link-protocol.md`, "Sealed frames"). Each side makes an ephemeral X25519
//! key for the link; their shared secret and a secret derived from the control key, salted with
//! the hash of the whole handshake transcript, give one ChaCha20-Poly1305 key per direction.
//! Every frame after the handshake is sealed under the next nonce of its direction (a counter
//! both sides keep), so a frame changed, injected, dropped, reordered or replayed on the path
//! fails to open, and the link is dropped.

use hyperhive_control_proto::encoding;
use hyperhive_control_proto::link::{PeerRole, PeerTranscript};
use ring::{aead, agreement, digest, hkdf, rand::SystemRandom};

/// What the control key derives the link secret for: mixed into every link's keys, so only a
/// holder of the control key can compute them even with both ephemeral secrets.
const LINK_SECRET_PURPOSE: &str = "hyperhive peer link secret v2";

/// Bytes a sealed frame adds to the frame's text before base64url: the Poly1305 tag.
pub const SEAL_OVERHEAD: usize = 16;

/// The most text a sealed frame of `plain` bytes takes on the wire.
pub const fn sealed_len(plain: usize) -> usize {
    (plain + SEAL_OVERHEAD).div_ceil(3) * 4
}

/// This side's ephemeral X25519 key for one link.
pub struct Ephemeral {
    private: agreement::EphemeralPrivateKey,
    public: String,
}

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ephemeral").field("public", &self.public).finish_non_exhaustive()
    }
}

/// Why the link's keys could not be made.
#[derive(Debug, thiserror::Error)]
#[error("the other copy's key is not an X25519 public key")]
pub struct BadKey;

impl Ephemeral {
    pub fn generate() -> Ephemeral {
        let private = agreement::EphemeralPrivateKey::generate(&agreement::X25519, &SystemRandom::new())
            .expect("the system's random source works");
        let public = encoding::encode(private.compute_public_key().expect("an X25519 public key").as_ref());
        Ephemeral { private, public }
    }

    /// The public key, base64url, as the handshake carries it.
    pub fn public(&self) -> &str {
        &self.public
    }

    /// The keys of the link whose handshake said `transcript`, for the side `role`: one to seal
    /// what it sends, one to open what it receives. `link_secret` is
    /// [`link_secret`]`(control key)`.
    pub fn link_keys(
        self,
        transcript: &PeerTranscript<'_>,
        role: PeerRole,
        link_secret: &[u8; 32],
    ) -> Result<(Sealer, Opener), BadKey> {
        let theirs = match role {
            PeerRole::Dialer => transcript.acceptor_key,
            PeerRole::Acceptor => transcript.dialer_key,
        };
        let theirs = encoding::decode_exact::<32>(theirs).map_err(|_| BadKey)?;
        let theirs = agreement::UnparsedPublicKey::new(&agreement::X25519, theirs);
        let hash = digest::digest(&digest::SHA256, &transcript.encode());
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, hash.as_ref());
        // ring refuses a shared secret of zeros (a low-order key from the other side).
        let prk = agreement::agree_ephemeral(self.private, &theirs, |shared| {
            salt.extract(&[shared, link_secret.as_slice()].concat())
        })
        .map_err(|_| BadKey)?;
        let key = |direction: &[u8]| {
            let info = [direction];
            let okm = prk.expand(&info, &aead::CHACHA20_POLY1305).expect("a ChaCha20 key length");
            aead::LessSafeKey::new(aead::UnboundKey::from(okm))
        };
        let (to_acceptor, to_dialer) = (key(b"dialer to acceptor"), key(b"acceptor to dialer"));
        Ok(match role {
            PeerRole::Dialer => (Sealer { key: to_acceptor, next: 0 }, Opener { key: to_dialer, next: 0 }),
            PeerRole::Acceptor => (Sealer { key: to_dialer, next: 0 }, Opener { key: to_acceptor, next: 0 }),
        })
    }
}

/// The secret every link's keys mix in, derived from the control key.
pub fn link_secret(key: &crate::key::ControlKey) -> [u8; 32] {
    key.derived_secret(LINK_SECRET_PURPOSE)
}

/// The nonce of the `n`th frame in one direction (each direction has its own key).
fn nonce(n: u64) -> aead::Nonce {
    let mut bytes = [0u8; aead::NONCE_LEN];
    bytes[4..].copy_from_slice(&n.to_be_bytes());
    aead::Nonce::assume_unique_for_key(bytes)
}

/// Seals the frames one side sends.
pub struct Sealer {
    key: aead::LessSafeKey,
    next: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("next", &self.next).finish_non_exhaustive()
    }
}

impl Sealer {
    /// The text message that carries `frame`: base64url of its sealed bytes.
    pub fn seal(&mut self, frame: &str) -> String {
        let mut bytes = Vec::with_capacity(frame.len() + SEAL_OVERHEAD);
        bytes.extend_from_slice(frame.as_bytes());
        self.key
            .seal_in_place_append_tag(nonce(self.next), aead::Aad::empty(), &mut bytes)
            .expect("a frame is far below ChaCha20-Poly1305's length limit");
        self.next += 1;
        encoding::encode(&bytes)
    }
}

/// A received message that is not the next sealed frame from the other side.
#[derive(Debug, thiserror::Error)]
#[error("a peer frame failed authentication (changed, injected or replayed on the way)")]
pub struct Tampered;

/// Opens the frames one side receives, in order.
pub struct Opener {
    key: aead::LessSafeKey,
    next: u64,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("next", &self.next).finish_non_exhaustive()
    }
}

impl Opener {
    /// The frame's text, if `message` is the next frame the other side sealed.
    pub fn open(&mut self, message: &str) -> Result<String, Tampered> {
        let mut bytes = encoding::decode(message).map_err(|_| Tampered)?;
        let plain = self.key.open_in_place(nonce(self.next), aead::Aad::empty(), &mut bytes).map_err(|_| Tampered)?;
        let text = std::str::from_utf8(plain).map_err(|_| Tampered)?.to_owned();
        self.next += 1;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ControlKey;

    struct Ends {
        dialer: (Sealer, Opener),
        acceptor: (Sealer, Opener),
    }

    fn link(dialer_secret: [u8; 32], acceptor_secret: [u8; 32]) -> Ends {
        let (d, a) = (Ephemeral::generate(), Ephemeral::generate());
        let (dk, ak) = (d.public().to_owned(), a.public().to_owned());
        let transcript = PeerTranscript {
            acceptor: "0b",
            acceptor_nonce: "n1",
            acceptor_key: &ak,
            dialer: "0a",
            dialer_nonce: "n2",
            dialer_key: &dk,
        };
        Ends {
            dialer: d.link_keys(&transcript, PeerRole::Dialer, &dialer_secret).unwrap(),
            acceptor: a.link_keys(&transcript, PeerRole::Acceptor, &acceptor_secret).unwrap(),
        }
    }

    #[test]
    fn frames_open_in_order_in_each_direction_and_hide_their_text() {
        let secret = link_secret(&ControlKey::from_seed([3; 32]));
        let Ends { dialer: (mut d_seal, mut d_open), acceptor: (mut a_seal, mut a_open) } = link(secret, secret);
        for i in 0..3 {
            let frame = format!("{{\"type\":\"ping\",\"t\":{i}}}");
            let sealed = d_seal.seal(&frame);
            assert!(!sealed.contains("ping") && sealed.len() <= sealed_len(frame.len()));
            assert_eq!(a_open.open(&sealed).unwrap(), frame);
            assert_eq!(d_open.open(&a_seal.seal(&frame)).unwrap(), frame);
        }
    }

    #[test]
    fn a_changed_replayed_reflected_or_foreign_frame_does_not_open() {
        let secret = link_secret(&ControlKey::from_seed([3; 32]));
        let Ends { dialer: (mut d_seal, mut d_open), acceptor: (_, mut a_open) } = link(secret, secret);
        let first = d_seal.seal("one");
        assert_eq!(a_open.open(&first).unwrap(), "one");
        assert!(a_open.open(&first).is_err(), "a replay");
        let second = d_seal.seal("two");
        assert!(d_open.open(&second).is_err(), "a frame reflected back to its sender");
        let mut bytes = encoding::decode(&second).unwrap();
        bytes[0] ^= 1;
        assert!(a_open.open(&encoding::encode(&bytes)).is_err(), "a changed frame");
        assert!(a_open.open("{\"type\":\"ping\",\"t\":1}").is_err(), "a plaintext frame");
        // The same handshake with another control key's secret gives other keys.
        let other = link_secret(&ControlKey::from_seed([4; 32]));
        let Ends { dialer: (mut d_seal, _), acceptor: (_, mut a_open) } = link(secret, other);
        assert!(a_open.open(&d_seal.seal("one")).is_err());
    }

    #[test]
    fn a_low_order_key_is_refused() {
        let transcript = PeerTranscript {
            acceptor: "0b",
            acceptor_nonce: "n",
            acceptor_key: &encoding::encode(&[0u8; 32]),
            dialer: "0a",
            dialer_nonce: "n",
            dialer_key: "x",
        };
        assert!(Ephemeral::generate().link_keys(&transcript, PeerRole::Dialer, &[0; 32]).is_err());
    }
}
