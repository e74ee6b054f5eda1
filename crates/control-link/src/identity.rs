//! A paired device's identity: pairing (the pure halves around `POST /v1/pair`) and the
//! identity file every later connection reads.
//!
//! The file holds the device's private key, so it is written mode 0600 (through a temporary
//! file and a rename, so a crash never leaves half a key) and refused when others can read it.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{SigningKey, VerifyingKey};
use hyperhive_control_proto::code::{Code, CodeError};
use hyperhive_control_proto::pair::{DeviceName, PairRequest, PairResponse, validate_name};
use hyperhive_control_proto::{DeviceKind, encoding};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::tls::Pin;

/// The version of the identity file's format.
pub const IDENTITY_VERSION: u32 = 1;

/// What a paired device knows about itself and its control plane.
#[derive(Clone)]
pub struct Identity {
    pub device_id: String,
    pub kind: DeviceKind,
    pub name: String,
    pub control_url: String,
    /// The key the server must prove it holds at every connection.
    pub control_key: VerifyingKey,
    pub pin: Option<Pin>,
    /// The control plane's name as it said when this device paired (`AGENTS_CONTROL_NAME`), if
    /// it had one; the name in each `welcome` is the current one.
    pub control_name: Option<String>,
    device_key: SigningKey,
}

impl std::fmt::Debug for Identity {
    // The device key is the device's credential: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("device_id", &self.device_id)
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("control_url", &self.control_url)
            .field("pin", &self.pin)
            .field("control_name", &self.control_name)
            .field("device_key", &"<redacted>")
            .finish()
    }
}

/// The identity file's JSON.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    version: u32,
    device_id: String,
    kind: DeviceKind,
    name: String,
    control_url: String,
    control_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    control_name: Option<String>,
    /// The device key's 32-byte Ed25519 seed.
    device_key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("code: {0}")]
    Code(#[from] CodeError),
    #[error("name {0}")]
    Name(String),
    #[error("the code carries pin {0}")]
    Pin(#[source] crate::tls::PinError),
    #[error(
        "the control plane's answer is not signed by the control key the code carries: not the control plane that made the code; not paired"
    )]
    ResponseNotSigned,
    #[error("the control plane paired this device as a {got}, but the code is for a {expected}")]
    WrongKind { expected: DeviceKind, got: DeviceKind },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} can be read by other users (mode {mode:o}): it holds the device key; run `chmod 600 {path}`")]
    Readable { path: PathBuf, mode: u32 },
    #[error("{path} is not an identity file ({detail}): pair again to make one")]
    Malformed { path: PathBuf, detail: String },
    #[error(
        "{path} is identity format version {version}, this build reads version {IDENTITY_VERSION}: update this program"
    )]
    UnsupportedVersion { path: PathBuf, version: u32 },
}

/// A pairing in progress: the request is sent, the answer not yet checked.
#[derive(Debug)]
pub struct PendingPairing {
    code: Code,
    name: String,
    device_key: SigningKey,
    public_key: String,
}

/// Makes the device's key pair and the `POST /v1/pair` body for `code_token`.
///
/// # Errors
/// When the code or the name is malformed (the messages say how to fix it).
pub fn start_pairing(
    code_token: &str,
    name: DeviceName<'_>,
    rng: &mut impl RngCore,
) -> Result<(PairRequest, PendingPairing), IdentityError> {
    let code = Code::parse(code_token)?;
    validate_name(name.as_str()).map_err(IdentityError::Name)?;
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    let device_key = SigningKey::from_bytes(&seed);
    let request = PairRequest::sign_as(code_token, &device_key, name);
    let public_key = request.public_key.clone();
    Ok((request, PendingPairing { code, name: name.as_str().to_owned(), device_key, public_key }))
}

impl PendingPairing {
    /// Checks the control plane's answer and returns the device's identity.
    ///
    /// # Errors
    /// When the answer is not signed with the code's control key, or names another kind.
    pub fn finish(self, response: &PairResponse) -> Result<Identity, IdentityError> {
        let control_key =
            VerifyingKey::from_bytes(&self.code.control_public_key).map_err(|_| IdentityError::ResponseNotSigned)?;
        if !response.verify(&control_key, &self.public_key) {
            return Err(IdentityError::ResponseNotSigned);
        }
        if response.kind != self.code.kind {
            return Err(IdentityError::WrongKind { expected: self.code.kind, got: response.kind });
        }
        let pin = self.code.pin.as_deref().map(str::parse).transpose().map_err(IdentityError::Pin)?;
        // The control plane names the device (the code's suggestion may have replaced a default
        // name); the name sent stands in only for an answer whose name is not a valid one.
        let name = if validate_name(&response.name).is_ok() { response.name.clone() } else { self.name };
        Ok(Identity {
            device_id: response.device_id.clone(),
            kind: response.kind,
            name,
            control_url: self.code.control_url.clone(),
            control_key,
            pin,
            control_name: response.control_name.clone(),
            device_key: self.device_key,
        })
    }
}

impl Identity {
    pub fn device_key(&self) -> &SigningKey {
        &self.device_key
    }

    /// Writes the identity to `path`, mode 0600, replacing the file whole.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), IdentityError> {
        let io = |source| IdentityError::Io { path: path.to_owned(), source };
        let file = IdentityFile {
            version: IDENTITY_VERSION,
            device_id: self.device_id.clone(),
            kind: self.kind,
            name: self.name.clone(),
            control_url: self.control_url.clone(),
            control_key: encoding::encode(self.control_key.as_bytes()),
            pin: self.pin.map(|pin| pin.to_string()),
            control_name: self.control_name.clone(),
            device_key: encoding::encode(self.device_key.as_bytes()),
        };
        let text = serde_json::to_string_pretty(&file).expect("the identity serializes to JSON");
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        // A temporary file a crash left behind would make `create_new` fail: it holds nothing
        // that matters (the rename never happened).
        let _ = std::fs::remove_file(&temporary);
        let mut out =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary).map_err(io)?;
        out.write_all(text.as_bytes()).and_then(|()| out.sync_all()).map_err(io)?;
        std::fs::rename(&temporary, path).map_err(io)
    }

    /// Reads the identity at `path`.
    ///
    /// # Errors
    /// When the file is missing, readable by others, or not an identity file of this version.
    pub fn load(path: &Path) -> Result<Identity, IdentityError> {
        let io = |source| IdentityError::Io { path: path.to_owned(), source };
        let malformed = |detail: String| IdentityError::Malformed { path: path.to_owned(), detail };
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(IdentityError::Readable { path: path.to_owned(), mode });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        let file: IdentityFile = serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        if file.version != IDENTITY_VERSION {
            return Err(IdentityError::UnsupportedVersion { path: path.to_owned(), version: file.version });
        }
        let control_key = encoding::decode_exact::<32>(&file.control_key)
            .ok()
            .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
            .ok_or_else(|| malformed("control_key is not an Ed25519 public key".into()))?;
        let device_key =
            encoding::decode_exact::<32>(&file.device_key).map_err(|e| malformed(format!("device_key {e}")))?;
        let pin = file.pin.as_deref().map(str::parse).transpose().map_err(|e| malformed(format!("{e}")))?;
        Ok(Identity {
            device_id: file.device_id,
            kind: file.kind,
            name: file.name,
            control_url: file.control_url,
            control_key,
            pin,
            control_name: file.control_name,
            device_key: SigningKey::from_bytes(&device_key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::Signer;
    use hyperhive_control_proto::pair::device_statement;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn control() -> SigningKey {
        SigningKey::from_bytes(&[3; 32])
    }

    fn code(kind: DeviceKind, pin: Option<String>) -> String {
        Code {
            control_url: "https://agents.example.com".into(),
            control_public_key: control().verifying_key().to_bytes(),
            pin,
            kind,
            secret: [5; 32],
        }
        .to_token()
    }

    /// The control plane's side of `POST /v1/pair` (agents-control's; the protocol's rule).
    fn answer(request: &PairRequest, kind: DeviceKind, signer: &SigningKey) -> PairResponse {
        let verified = request.verify().unwrap();
        let statement = device_statement("dev-9", kind, &request.public_key);
        PairResponse {
            device_id: "dev-9".into(),
            kind,
            name: verified.name,
            signature: encoding::encode(&signer.sign(&statement).to_bytes()),
            control_name: Some("home".into()),
        }
    }

    fn paired(pin: Option<String>) -> Identity {
        let (request, pending) =
            start_pairing(&code(DeviceKind::Host, pin), DeviceName::Chosen("box"), &mut StdRng::seed_from_u64(1))
                .unwrap();
        pending.finish(&answer(&request, DeviceKind::Host, &control())).unwrap()
    }

    #[test]
    fn pairing_checks_the_answer_with_the_codes_control_key() {
        let identity = paired(Some(encoding::encode(&[8; 32])));
        assert_eq!((identity.device_id.as_str(), identity.kind), ("dev-9", DeviceKind::Host));
        assert_eq!(identity.control_key, control().verifying_key());
        assert_eq!(identity.pin.unwrap().to_string(), encoding::encode(&[8; 32]));

        let (request, pending) =
            start_pairing(&code(DeviceKind::Host, None), DeviceName::Chosen("box"), &mut StdRng::seed_from_u64(1))
                .unwrap();
        let impostor = answer(&request, DeviceKind::Host, &SigningKey::from_bytes(&[4; 32]));
        assert!(matches!(pending.finish(&impostor), Err(IdentityError::ResponseNotSigned)));

        let (request, pending) =
            start_pairing(&code(DeviceKind::Host, None), DeviceName::Chosen("box"), &mut StdRng::seed_from_u64(1))
                .unwrap();
        let client = answer(&request, DeviceKind::Client, &control());
        assert!(matches!(pending.finish(&client), Err(IdentityError::WrongKind { .. })));
    }

    #[test]
    fn bad_codes_and_names_are_refused_before_anything_is_sent() {
        let rng = &mut StdRng::seed_from_u64(1);
        assert!(matches!(start_pairing("hello", DeviceName::Chosen("box"), rng), Err(IdentityError::Code(_))));
        assert!(matches!(
            start_pairing(&code(DeviceKind::Client, None), DeviceName::Chosen(" "), rng),
            Err(IdentityError::Name(_))
        ));
    }

    #[test]
    fn the_identity_file_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device.json");
        let identity = paired(None);
        identity.save(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let loaded = Identity::load(&path).unwrap();
        assert_eq!(loaded.device_key().to_bytes(), identity.device_key().to_bytes());
        assert_eq!(loaded.device_id, identity.device_id);
        assert_eq!(loaded.control_name.as_deref(), Some("home"), "the name the control plane gave when pairing");
        assert!(!format!("{loaded:?}").contains(&encoding::encode(identity.device_key().as_bytes())));
        identity.save(&path).unwrap(); // saving again replaces the file
    }

    #[test]
    fn unsafe_or_damaged_identity_files_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device.json");
        paired(None).save(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Identity::load(&path).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"version\": 1", "\"version\": 2")).unwrap();
        assert!(matches!(Identity::load(&path), Err(IdentityError::UnsupportedVersion { version: 2, .. })));
        std::fs::write(&path, "{}").unwrap();
        let err = Identity::load(&path).unwrap_err();
        assert!(err.to_string().contains("pair again"), "{err}");
        let err = Identity::load(&dir.path().join("missing.json")).unwrap_err();
        assert!(matches!(err, IdentityError::Io { .. }), "{err}");
    }
}
