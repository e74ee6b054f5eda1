//! The secret store's key: 32 random bytes, written base64 on one line to a file only its owner
//! can read. The controller refuses a key file others can read, so a key that leaked through a
//! loose mode is not used silently.

use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;

/// Length of the key in bytes (XChaCha20-Poly1305).
pub const KEY_LEN: usize = 32;

/// The key every value of `swarm-secrets` is sealed under. Its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct SecretsKey([u8; KEY_LEN]);

impl fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretsKey(..)")
    }
}

/// Compares without an early exit, so a comparison leaks nothing of where two keys differ.
impl PartialEq for SecretsKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().zip(other.0.iter()).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl Eq for SecretsKey {}

/// Why a key file was refused; the message names the file and the fix, never its content.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read the secrets key file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "the secrets key file {path} can be read by others (mode {mode:o}); run `chmod 600 {path}` (it must be readable by its owner only)"
    )]
    Exposed { path: String, mode: u32 },
    #[error(
        "the secrets key file {path} does not hold a key: {problem}; it must hold {KEY_LEN} bytes in base64 on one line, as `swarm-controller secrets-key --out FILE` writes"
    )]
    Malformed { path: String, problem: &'static str },
    #[error("cannot write the secrets key file {path}: {source}")]
    Write { path: String, source: std::io::Error },
}

impl SecretsKey {
    /// A fresh random key.
    pub fn generate() -> SecretsKey {
        let mut bytes = [0; KEY_LEN];
        rand::rng().fill_bytes(&mut bytes);
        SecretsKey(bytes)
    }

    /// The key for these bytes (tests and the sealing code).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> SecretsKey {
        SecretsKey(bytes)
    }

    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Reads a key file, refusing one that others can read or that holds anything but a key.
    ///
    /// # Errors
    /// [`KeyFileError`] naming the file and the fix.
    pub fn load(path: &Path) -> Result<SecretsKey, KeyFileError> {
        let shown = path.display().to_string();
        let read = |source| KeyFileError::Read { path: shown.clone(), source };
        let mode = fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::Exposed { path: shown, mode });
        }
        let text = fs::read_to_string(path).map_err(read)?;
        let malformed = |problem| KeyFileError::Malformed { path: shown.clone(), problem };
        let line = text.strip_suffix('\n').unwrap_or(&text);
        if line.is_empty() {
            return Err(malformed("it is empty"));
        }
        if line.contains(['\n', '\r', ' ', '\t']) {
            return Err(malformed("it holds more than one base64 line"));
        }
        let bytes = STANDARD.decode(line).map_err(|_| malformed("it is not base64"))?;
        let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|_| malformed("it is not 32 bytes long"))?;
        Ok(SecretsKey(bytes))
    }

    /// Writes this key to a new file `path`, mode 0600; an existing file is never replaced (a
    /// replaced key would make every stored secret unreadable).
    ///
    /// # Errors
    /// [`KeyFileError::Write`], also when the file exists.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyFileError> {
        let write = |source| KeyFileError::Write { path: path.display().to_string(), source };
        crate::files::create_new(path, format!("{}\n", STANDARD.encode(self.0)).as_bytes(), 0o600).map_err(write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(dir: &Path, text: &str, mode: u32) -> std::path::PathBuf {
        let path = dir.join("key");
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_written_key_loads_back_and_its_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let key = SecretsKey::generate();
        key.write_new(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(SecretsKey::load(&path).unwrap().0, key.0);
        assert!(matches!(key.write_new(&path), Err(KeyFileError::Write { .. })), "an existing key is never replaced");
        assert_eq!(format!("{key:?}"), "SecretsKey(..)");
    }

    #[test]
    fn a_key_file_others_can_read_or_that_holds_no_key_is_refused_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let good = STANDARD.encode([7u8; KEY_LEN]);
        let exposed = SecretsKey::load(&file_with(dir.path(), &good, 0o644)).unwrap_err().to_string();
        assert!(exposed.contains("chmod 600") && !exposed.contains(&good), "{exposed}");
        for (text, problem) in [
            ("", "empty"),
            ("not-base64!\n", "not base64"),
            (&*STANDARD.encode([7u8; 31]), "32 bytes"),
            (&*format!("{good}\n{good}\n"), "one base64 line"),
        ] {
            let message = SecretsKey::load(&file_with(dir.path(), text, 0o600)).unwrap_err().to_string();
            assert!(message.contains(problem), "{message}");
            assert!(!message.contains(&good), "{message}");
        }
        let missing = SecretsKey::load(&dir.path().join("absent")).unwrap_err().to_string();
        assert!(missing.contains("cannot read"), "{missing}");
        assert!(SecretsKey::load(&file_with(dir.path(), &format!("{good}\n"), 0o400)).is_ok());
    }
}
