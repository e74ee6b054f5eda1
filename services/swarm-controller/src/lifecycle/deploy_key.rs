//! The controller's deploy key file (`SWARM_DEPLOY_KEY_FILE`): the seed of the key that signs
//! every deploy and credentials message, on one line, in a file only its owner can read. Hives pin
//! its public half (`HIVE_C0RE_CONTROLLER_KEYS`), so whoever holds this file can run code on every
//! hive: it is refused when others can read it, and never replaced once written.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hyperhive_hive_proto::signing::DeploySigner;

/// Reads the key, refusing a file others can read or one that holds no deploy key seed. The
/// error names the file and the fix, never its content.
///
/// # Errors
/// One line saying why.
pub fn load(path: &Path) -> Result<DeploySigner, String> {
    let shown = path.display();
    let mode = fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "the deploy key file {shown} can be read by others (mode {mode:o}); run `chmod 600 {shown}` \
             (it must be readable by its owner only)"
        ));
    }
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    DeploySigner::from_seed(&text).map_err(|e| format!("{shown}: {e}"))
}

/// Writes a new key to `path` (mode 0600, never over an existing file: hives pin the key, and
/// a replaced one would leave every hive refusing the controller) and returns its public key.
///
/// # Errors
/// One line saying why, also when the file exists.
pub fn write_new(path: &Path) -> Result<String, String> {
    let signer = DeploySigner::generate();
    let seed = signer.seed().map_err(|e| e.to_string())?;
    let write_error = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::AlreadyExists => format!(
            "{} exists; refusing to replace the deploy key every hive pins (to replace it, see \
             docs/swarm/security.md, \"Replacing the deploy key\")",
            path.display()
        ),
        _ => format!("cannot write {}: {e}", path.display()),
    };
    crate::files::create_new(path, format!("{seed}\n").as_bytes(), 0o600).map_err(write_error)?;
    Ok(signer.public_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_key_is_private_loads_back_and_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deploy.key");
        let public = write_new(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path).unwrap().public_key(), public);
        let before = fs::read(&path).unwrap();
        assert!(write_new(&path).unwrap_err().contains("refusing to replace"));
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_key_file_others_can_read_or_that_holds_no_key_is_refused_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deploy.key");
        let seed = DeploySigner::generate().seed().unwrap();
        fs::write(&path, &seed).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let exposed = load(&path).unwrap_err();
        assert!(exposed.contains("chmod 600") && !exposed.contains(&seed), "{exposed}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let xkey_seed = nkeys::XKey::new().seed().unwrap();
        fs::write(&path, &xkey_seed).unwrap();
        let wrong = load(&path).unwrap_err();
        assert!(wrong.contains("not a deploy key seed") && !wrong.contains(&xkey_seed), "{wrong}");
        assert!(load(&dir.path().join("absent")).unwrap_err().contains("cannot read"));
    }
}
