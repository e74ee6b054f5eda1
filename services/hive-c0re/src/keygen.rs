//! `hive-c0re keygen`: the hive's sealing key. The seed goes to a new 0600 file (never over an
//! existing one: replacing a hive's key makes every message sealed to the old one unreadable);
//! the public key (`X...`) is printed for the swarm's hive directory.

use std::path::Path;

use nkeys::XKey;

use crate::files;

/// Writes a new seed to `out` and returns its public key.
///
/// # Errors
/// A line saying why: the file exists, or cannot be written.
pub fn keygen(out: &Path) -> Result<String, String> {
    let key = XKey::new();
    let seed = key.seed().map_err(|e| format!("cannot encode the new key: {e}"))?;
    files::create_new(out, format!("{seed}\n").as_bytes(), files::PRIVATE).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            format!("{} exists; refusing to replace a hive's key (remove it first if you mean to)", out.display())
        }
        _ => format!("cannot write {}: {e}", out.display()),
    })?;
    Ok(key.public_key())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_key_is_written_private_read_back_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("hive.xkey");
        let public = keygen(&out).unwrap();
        assert!(hyperhive_hive_proto::deploy::is_public_xkey(&public), "{public}");
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(crate::config::read_xkey(&out).unwrap().public_key(), public);
        let before = std::fs::read(&out).unwrap();
        assert!(keygen(&out).unwrap_err().contains("refusing to replace"));
        assert_eq!(std::fs::read(&out).unwrap(), before);
    }
}
