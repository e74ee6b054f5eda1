//! The webhook secret: the one file the controller keeps in its state directory
//! (`SWARM_STATE_DIR`, the NixOS module's `StateDirectory=swarm-controller`).
//!
//! `webhook-secret` holds 32 random bytes, mode 0600. It is made at the first start (written to
//! a temp file created with `O_EXCL` and mode 0600, synced, then linked into place, which fails
//! rather than replace a file another process made meanwhile) and read on every start after. A
//! file with another mode or size stops the controller with a line saying what is wrong and how
//! to fix it: the controller never guesses which of two secrets the forge holds.
//!
//! The forge signs with the hook's `secret` string, so the controller gives it the bytes as 64
//! lower-case hex characters and keys its HMAC with that text. Neither is ever logged: `Debug`
//! shows `<redacted>`.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use hyperhive_provision::Secret;
use sha2::Sha256;

/// The file's name in the state directory.
pub const FILE_NAME: &str = "webhook-secret";
/// Bytes of secret.
pub const SECRET_BYTES: usize = 32;

/// The webhook secret.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    /// The hex text the forge signs with (the HMAC key).
    hex: String,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

impl WebhookSecret {
    /// Reads `<dir>/webhook-secret`, or makes it when there is none.
    ///
    /// # Errors
    /// A line naming the file, what is wrong with it and the fix (never the secret).
    pub fn load_or_create(dir: &Path) -> Result<Self, String> {
        let path = dir.join(FILE_NAME);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => Self::read(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(dir, &path),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    fn read(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        if !meta.file_type().is_file() {
            return Err(format!("{shown} is not a regular file; remove it and start again to make a new secret"));
        }
        let mode = meta.mode() & 0o777;
        if mode != 0o600 {
            return Err(format!(
                "{shown} has mode {mode:o}, not 600: others may have read the webhook secret; delete the file and \
                 start again (a new secret is made and the forge's webhook is set to it within one pass), or \
                 chmod 600 it if nobody else could read it"
            ));
        }
        if meta.len() != SECRET_BYTES as u64 {
            return Err(format!(
                "{shown} holds {} bytes, not {SECRET_BYTES}: it is not a webhook secret this controller made; \
                 delete it and start again (a new secret is made and the forge's webhook is set to it within one pass)",
                meta.len()
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let bytes: [u8; SECRET_BYTES] =
            bytes.try_into().map_err(|_| format!("{shown} changed while it was read; start again"))?;
        Ok(Self::from_bytes(&bytes))
    }

    fn create(dir: &Path, path: &Path) -> Result<Self, String> {
        let bytes: [u8; SECRET_BYTES] = rand::random();
        let temp = temp_path(dir);
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
            // The mode given to open is cut by the umask; set it exactly.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            // A hard link fails when the name exists, so a file another process put there
            // meanwhile is never replaced (rename would replace it).
            std::fs::hard_link(&temp, path)?;
            std::fs::File::open(dir)?.sync_all()
        };
        let outcome = write();
        let _ = std::fs::remove_file(&temp);
        match outcome {
            Ok(()) => {
                tracing::info!(file = %path.display(), "webhook secret made");
                Ok(Self::from_bytes(&bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::read(path),
            Err(e) => Err(format!(
                "cannot make {}: {e}; the state directory must exist and be writable by the controller",
                path.display()
            )),
        }
    }

    fn from_bytes(bytes: &[u8; SECRET_BYTES]) -> Self {
        Self { hex: bytes.iter().map(|b| format!("{b:02x}")).collect() }
    }

    /// The secret as the forge's webhook is given it.
    pub fn hook_secret(&self) -> Secret {
        Secret::new(self.hex.clone())
    }

    /// Whether `signature` (hex, as in `X-Forgejo-Signature`) is the HMAC-SHA256 of `body`,
    /// compared in constant time.
    pub fn verifies(&self, body: &[u8], signature: &str) -> bool {
        let Some(expected) = decode_hex(signature.trim()) else { return false };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.hex.as_bytes()) else { return false };
        mac.update(body);
        mac.verify_slice(&expected).is_ok()
    }
}

fn temp_path(dir: &Path) -> PathBuf {
    let tag: u64 = rand::random();
    dir.join(format!(".{FILE_NAME}.{}.{tag:016x}.tmp", std::process::id()))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &WebhookSecret, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.hook_secret().expose().as_bytes()).unwrap();
        mac.update(body);
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn made_once_with_mode_0600_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = WebhookSecret::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(FILE_NAME);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.len()), (0o600, 32));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(WebhookSecret::load_or_create(dir.path()).unwrap(), first);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file is never rewritten");
        assert_eq!(first.hook_secret().expose().len(), 64);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [FILE_NAME], "no temp file is left");
    }

    #[test]
    fn a_file_with_another_mode_or_size_stops_the_start_saying_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let secret = WebhookSecret::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = WebhookSecret::load_or_create(dir.path()).unwrap_err();
        assert!(err.contains("mode 644") && err.contains("chmod 600") && err.contains("delete"), "{err}");
        assert!(!err.contains(secret.hook_secret().expose()), "{err}");

        std::fs::write(&path, b"short").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = WebhookSecret::load_or_create(dir.path()).unwrap_err();
        assert!(err.contains("holds 5 bytes, not 32") && err.contains("delete it"), "{err}");
        assert!(!err.contains('\n'), "{err}");

        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = WebhookSecret::load_or_create(dir.path()).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_missing_state_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = WebhookSecret::load_or_create(&dir.path().join("absent")).unwrap_err();
        assert!(err.contains("state directory must exist"), "{err}");
    }

    #[test]
    fn a_secret_made_meanwhile_by_another_process_is_read_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let other = WebhookSecret::load_or_create(dir.path()).unwrap();
        // As if this process had found no file, then lost the race to make it.
        let path = dir.path().join(FILE_NAME);
        assert_eq!(WebhookSecret::create(dir.path(), &path).unwrap(), other);
    }

    #[test]
    fn only_the_hmac_of_the_exact_body_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let secret = WebhookSecret::load_or_create(dir.path()).unwrap();
        let body = br#"{"action":"opened"}"#;
        let good = sign(&secret, body);
        assert!(secret.verifies(body, &good));
        assert!(secret.verifies(body, &good.to_uppercase()), "hex is case-insensitive");
        assert!(!secret.verifies(&body[..body.len() - 1], &good), "a truncated body");
        assert!(!secret.verifies(body, &good[..62]), "a truncated signature");
        assert!(!secret.verifies(body, ""));
        assert!(!secret.verifies(body, "zz"));
        assert!(!secret.verifies(body, &"0".repeat(64)));
        assert!(!format!("{secret:?}").contains(secret.hook_secret().expose()));
    }
}
