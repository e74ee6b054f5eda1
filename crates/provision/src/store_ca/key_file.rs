//! Private key files: read only when no one but the owner can reach them, written new with mode
//! 0600, never overwritten.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::StoreCaError;
use crate::secret::Secret;

/// A PEM key is a few hundred bytes; anything much larger is not one.
const MAX_KEY_FILE: u64 = 64 * 1024;

/// Reads the key at `path`, refusing a file its group or others may read or write.
///
/// The mode is checked on the opened file, so the file checked is the file read.
pub(super) fn read_private(path: &Path) -> Result<Secret, StoreCaError> {
    let io = |action| move |source| StoreCaError::Io { action, path: path.to_owned(), source };
    let file = File::open(path).map_err(io("opening the key file"))?;
    let metadata = file.metadata().map_err(io("reading the metadata of the key file"))?;
    if !metadata.is_file() {
        return Err(StoreCaError::InvalidKey { reason: format!("{} is not a regular file", path.display()) });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(StoreCaError::KeyFileTooOpen { path: path.to_owned(), mode });
    }
    if metadata.len() > MAX_KEY_FILE {
        return Err(StoreCaError::InvalidKey {
            reason: format!("{} is larger than {MAX_KEY_FILE} bytes", path.display()),
        });
    }
    let mut text = String::new();
    file.take(MAX_KEY_FILE).read_to_string(&mut text).map_err(io("reading the key file"))?;
    Ok(Secret::new(text))
}

/// Writes `contents` to a new file at `path` with `mode`; fails if the file exists.
pub(super) fn write_new(path: &Path, contents: &str, mode: u32) -> Result<(), StoreCaError> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            StoreCaError::AlreadyExists { path: path.to_owned() }
        } else {
            StoreCaError::Io { action: "creating", path: path.to_owned(), source }
        }
    })?;
    let io = |source| StoreCaError::Io { action: "writing", path: path.to_owned(), source };
    // The umask may have taken bits away from `mode`, never added any; set it exactly.
    file.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_readable_by_others_is_refused_and_a_private_one_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ca.key");
        write_new(&path, "KEY", 0o600).expect("written");
        assert_eq!(std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777, 0o600);
        assert_eq!(read_private(&path).expect("read").expose(), "KEY");

        for mode in [0o640, 0o604, 0o620, 0o644] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = read_private(&path).expect_err("too open");
            assert!(matches!(err, StoreCaError::KeyFileTooOpen { .. }), "{err}");
            assert!(err.to_string().contains(&format!("{mode:04o}")), "{err}");
            assert!(!err.to_string().contains("KEY"), "{err}");
        }
    }

    #[test]
    fn nothing_is_overwritten_and_missing_files_are_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ca.key");
        write_new(&path, "first", 0o600).expect("written");
        let err = write_new(&path, "second", 0o600).expect_err("exists");
        assert!(matches!(err, StoreCaError::AlreadyExists { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "first");

        let missing = dir.path().join("missing.key");
        let err = read_private(&missing).expect_err("missing");
        assert!(err.to_string().contains("missing.key"), "{err}");
        let err = read_private(dir.path()).expect_err("a directory");
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
