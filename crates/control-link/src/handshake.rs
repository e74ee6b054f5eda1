//! The device's half of the link handshake (`docs/control-plane/link-protocol.md`), as pure
//! functions over the frames: answer the server's challenge by signing its nonce with the
//! device key, then check that the server signed the device's nonce with the control key the
//! pairing code carried. A device sends nothing else before the second step succeeds.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use hyperhive_control_proto::encoding;
use hyperhive_control_proto::link::{
    CloseCode, LINK_PROTOCOL_VERSION, LinkFrame, NONCE_LEN, device_proof_message, server_proof_message,
};
use rand::RngCore;

/// Why the device ends a handshake; [`HandshakeError::close_code`] is the code to close with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error("the control plane's first frame was \"{0}\", not a challenge: is this URL an agents-control /v1/link?")]
    NotChallenge(String),
    #[error(
        "the control plane speaks link protocol version {server}, this device version {LINK_PROTOCOL_VERSION}: update the older side"
    )]
    UnsupportedVersion { server: u32 },
    #[error("the challenge's server_nonce {0}")]
    BadServerNonce(String),
    #[error("the control plane answered \"{0}\" instead of welcome")]
    NotWelcome(String),
    #[error(
        "the control plane's signature {0}: it does not hold the control key this device paired with (a different control plane, or someone in between); not connecting"
    )]
    ServerProofFailed(String),
}

impl HandshakeError {
    pub fn close_code(&self) -> CloseCode {
        match self {
            HandshakeError::UnsupportedVersion { .. } => CloseCode::UnsupportedVersion,
            HandshakeError::ServerProofFailed(_) => CloseCode::ServerProofFailed,
            _ => CloseCode::ProtocolViolation,
        }
    }
}

/// The device has answered the challenge and waits for the server's proof.
#[derive(Debug, Clone)]
pub struct AwaitingWelcome {
    device_id: String,
    server_nonce: String,
    device_nonce: String,
}

/// Answers the server's first frame: returns the `hello` to send and the state that checks
/// the answer to it.
///
/// # Errors
/// When `challenge` is not a well-formed challenge of this protocol version.
pub fn answer_challenge(
    challenge: &LinkFrame,
    device_id: &str,
    device_key: &SigningKey,
    rng: &mut impl RngCore,
) -> Result<(LinkFrame, AwaitingWelcome), HandshakeError> {
    let LinkFrame::Challenge { version, server_nonce } = challenge else {
        return Err(HandshakeError::NotChallenge(challenge.type_name()));
    };
    if *version != LINK_PROTOCOL_VERSION {
        return Err(HandshakeError::UnsupportedVersion { server: *version });
    }
    encoding::decode_exact::<NONCE_LEN>(server_nonce).map_err(HandshakeError::BadServerNonce)?;
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let device_nonce = encoding::encode(&nonce);
    let signature = device_key.sign(&device_proof_message(server_nonce, &device_nonce, device_id));
    let hello = LinkFrame::Hello {
        version: LINK_PROTOCOL_VERSION,
        device_id: device_id.to_owned(),
        device_nonce: device_nonce.clone(),
        signature: encoding::encode(&signature.to_bytes()),
    };
    let state = AwaitingWelcome { device_id: device_id.to_owned(), server_nonce: server_nonce.clone(), device_nonce };
    Ok((hello, state))
}

impl AwaitingWelcome {
    /// Checks the server's answer to the `hello`; returns the name of the copy on success.
    ///
    /// # Errors
    /// When `welcome` is another frame, or its signature is not the control key's over this
    /// connection's nonces and this device's id.
    pub fn verify_welcome(&self, welcome: &LinkFrame, control_key: &VerifyingKey) -> Result<String, HandshakeError> {
        let LinkFrame::Welcome { signature, copy, .. } = welcome else {
            return Err(HandshakeError::NotWelcome(welcome.type_name()));
        };
        let signature = encoding::decode_exact::<64>(signature).map_err(HandshakeError::ServerProofFailed)?;
        let message = server_proof_message(&self.device_nonce, &self.server_nonce, &self.device_id);
        control_key
            .verify_strict(&message, &Signature::from_bytes(&signature))
            .map_err(|_| HandshakeError::ServerProofFailed("does not verify".into()))?;
        Ok(copy.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const DEVICE_ID: &str = "dev-1";

    fn key(byte: u8) -> SigningKey {
        SigningKey::from_bytes(&[byte; 32])
    }

    fn challenge(nonce_byte: u8) -> LinkFrame {
        LinkFrame::Challenge {
            version: LINK_PROTOCOL_VERSION,
            server_nonce: encoding::encode(&[nonce_byte; NONCE_LEN]),
        }
    }

    /// What the server does with a hello (the server side is agents-control's; this is the
    /// protocol's rule, so the test proves the two halves fit): check the device's proof, then
    /// sign the device's nonce with the control key.
    fn server_answers(
        challenge: &LinkFrame,
        hello: &LinkFrame,
        device: &VerifyingKey,
        control: &SigningKey,
    ) -> LinkFrame {
        let (LinkFrame::Challenge { server_nonce, .. }, LinkFrame::Hello { device_id, device_nonce, signature, .. }) =
            (challenge, hello)
        else {
            panic!("not a challenge and a hello");
        };
        let signature = Signature::from_bytes(&encoding::decode_exact::<64>(signature).unwrap());
        device.verify_strict(&device_proof_message(server_nonce, device_nonce, device_id), &signature).unwrap();
        let proof = control.sign(&server_proof_message(device_nonce, server_nonce, device_id));
        LinkFrame::Welcome { signature: encoding::encode(&proof.to_bytes()), copy: "cp1".into(), name: None }
    }

    #[test]
    fn both_proofs_hold_with_the_right_keys() {
        let (device, control) = (key(1), key(2));
        let challenge = challenge(7);
        let (hello, awaiting) =
            answer_challenge(&challenge, DEVICE_ID, &device, &mut StdRng::seed_from_u64(1)).unwrap();
        let welcome = server_answers(&challenge, &hello, &device.verifying_key(), &control);
        assert_eq!(awaiting.verify_welcome(&welcome, &control.verifying_key()).unwrap(), "cp1");
    }

    #[test]
    fn a_server_without_the_control_key_is_refused() {
        let (device, control, impostor) = (key(1), key(2), key(3));
        let challenge = challenge(7);
        let (hello, awaiting) =
            answer_challenge(&challenge, DEVICE_ID, &device, &mut StdRng::seed_from_u64(1)).unwrap();
        let welcome = server_answers(&challenge, &hello, &device.verifying_key(), &impostor);
        let err = awaiting.verify_welcome(&welcome, &control.verifying_key()).unwrap_err();
        assert!(matches!(err, HandshakeError::ServerProofFailed(_)));
        assert_eq!(err.close_code(), CloseCode::ServerProofFailed);
        assert!(err.to_string().contains("control key this device paired with"), "{err}");
    }

    #[test]
    fn a_welcome_replayed_from_another_connection_is_refused() {
        let (device, control) = (key(1), key(2));
        let first = challenge(7);
        let (hello, _) = answer_challenge(&first, DEVICE_ID, &device, &mut StdRng::seed_from_u64(1)).unwrap();
        let recorded = server_answers(&first, &hello, &device.verifying_key(), &control);
        // A new connection: another device nonce, so the recorded proof no longer fits.
        let (_, awaiting) = answer_challenge(&first, DEVICE_ID, &device, &mut StdRng::seed_from_u64(2)).unwrap();
        assert!(matches!(
            awaiting.verify_welcome(&recorded, &control.verifying_key()),
            Err(HandshakeError::ServerProofFailed(_))
        ));
    }

    #[test]
    fn bad_challenges_and_answers_are_named() {
        let device = key(1);
        let rng = &mut StdRng::seed_from_u64(1);
        let err = answer_challenge(&LinkFrame::Ping { t: 1 }, DEVICE_ID, &device, rng).unwrap_err();
        assert_eq!(err, HandshakeError::NotChallenge("ping".into()));
        let newer =
            LinkFrame::Challenge { version: LINK_PROTOCOL_VERSION + 1, server_nonce: encoding::encode(&[0; 32]) };
        let err = answer_challenge(&newer, DEVICE_ID, &device, rng).unwrap_err();
        assert_eq!(err.close_code(), CloseCode::UnsupportedVersion);
        let short = LinkFrame::Challenge { version: LINK_PROTOCOL_VERSION, server_nonce: encoding::encode(&[0; 8]) };
        assert!(matches!(answer_challenge(&short, DEVICE_ID, &device, rng), Err(HandshakeError::BadServerNonce(_))));

        let (_, awaiting) = answer_challenge(&challenge(1), DEVICE_ID, &device, rng).unwrap();
        let control = key(2).verifying_key();
        assert_eq!(
            awaiting.verify_welcome(&LinkFrame::Pong { t: 1 }, &control),
            Err(HandshakeError::NotWelcome("pong".into()))
        );
        let garbled = LinkFrame::Welcome { signature: "not base64!".into(), copy: "cp1".into(), name: None };
        assert!(matches!(awaiting.verify_welcome(&garbled, &control), Err(HandshakeError::ServerProofFailed(_))));
    }

    proptest! {
        /// Whatever a server answers, the device never panics and accepts only the real proof.
        #[test]
        fn no_forged_welcome_is_accepted(signature in any::<String>(), bytes in prop::collection::vec(any::<u8>(), 64), copy in any::<String>()) {
            let (device, control) = (key(1), key(2));
            let (_, awaiting) = answer_challenge(&challenge(7), DEVICE_ID, &device, &mut StdRng::seed_from_u64(1)).unwrap();
            for signature in [signature, encoding::encode(&bytes)] {
                let forged = LinkFrame::Welcome { signature, copy: copy.clone(), name: None };
                prop_assert!(awaiting.verify_welcome(&forged, &control.verifying_key()).is_err());
            }
        }
    }
}
