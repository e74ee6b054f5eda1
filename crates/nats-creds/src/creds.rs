//! The standard `.creds` file (a user JWT and its nkey seed between markers) and 0600 files.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::CredsError;

const JWT_BEGIN: &str = "-----BEGIN NATS USER JWT-----";
const JWT_END: &str = "------END NATS USER JWT------";
const SEED_BEGIN: &str = "-----BEGIN USER NKEY SEED-----";
const SEED_END: &str = "------END USER NKEY SEED------";

/// Secret files (seeds, creds) are readable by their owner only.
pub const SECRET_MODE: u32 = 0o600;

/// The text of a `.creds` file as `nsc` writes it.
pub fn format_creds(jwt: &str, seed: &str) -> String {
    format!(
        "{JWT_BEGIN}\n{jwt}\n{JWT_END}\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         {SEED_BEGIN}\n{seed}\n{SEED_END}\n\n\
         *************************************************************\n"
    )
}

/// The user JWT in a `.creds` file (to inspect what it grants).
///
/// # Errors
/// [`CredsError::Io`] or [`CredsError::BadCreds`].
pub fn read_creds_jwt(path: &Path) -> Result<String, CredsError> {
    let text = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    let bad = |why| CredsError::BadCreds { path: path.to_path_buf(), why };
    let after = text.split_once(JWT_BEGIN).ok_or_else(|| bad("no BEGIN NATS USER JWT marker"))?.1;
    let jwt = after.split_once(JWT_END).ok_or_else(|| bad("no END NATS USER JWT marker"))?.0.trim();
    if jwt.is_empty() {
        return Err(bad("the JWT is empty"));
    }
    Ok(jwt.to_owned())
}

/// Creates `path` with `contents`; refuses if it exists. Secrets get mode 0600 from creation on,
/// so they are never readable by others, not even briefly.
pub(crate) fn create_new(path: &Path, contents: &str, secret: bool) -> Result<(), CredsError> {
    let mode = if secret { SECRET_MODE } else { 0o644 };
    let mut file =
        OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => CredsError::Exists(path.to_path_buf()),
            _ => CredsError::io("create", path)(e),
        })?;
    file.write_all(contents.as_bytes()).and_then(|()| file.sync_all()).map_err(CredsError::io("write", path))
}

/// Writes a file, replacing any old one atomically (a rotated credential replaces the previous
/// one; a reader sees the old or the new file, never half of one). A secret is 0600 throughout.
pub(crate) fn replace_file(path: &Path, contents: &str, secret: bool) -> Result<(), CredsError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // tempfile creates its files 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(CredsError::io("create a file in", dir))?;
    tmp.write_all(contents.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(CredsError::io("write", tmp.path()))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(if secret { SECRET_MODE } else { 0o644 }))
        .map_err(CredsError::io("set the mode of", tmp.path()))?;
    tmp.persist(path).map_err(|e| CredsError::io("write", path)(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creds_round_trip_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.creds");
        replace_file(&path, &format_creds("eyJ.x.y", "SUAXXX"), true).unwrap();
        assert_eq!(read_creds_jwt(&path).unwrap(), "eyJ.x.y");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

        fs::write(&path, "hello").unwrap();
        let err = read_creds_jwt(&path).unwrap_err().to_string();
        assert!(err.contains("a.creds") && err.contains("BEGIN NATS USER JWT"), "{err}");
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.seed");
        create_new(&path, "one", true).unwrap();
        let err = create_new(&path, "two", true).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
