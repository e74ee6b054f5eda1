//! Durable file writes. A record or a secret is written to a temp file beside it (0600 from
//! creation on for secrets), synced, renamed over the old one and the directory synced: a crash
//! leaves the old file or the new one, never half of one, and never a secret readable by others.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of files holding secrets or records.
pub const PRIVATE: u32 = 0o600;

/// Replaces `path` with `bytes` atomically, mode `mode`.
///
/// # Errors
/// The failing step's I/O error, naming the path.
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    // A leading dot: no record, pause file or secret name (they start with [a-z0-9]) can be
    // this name, so a write never clobbers a neighbour.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.tmp"));
    let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(&temp);
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp).map_err(named)?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(named)?;
    std::fs::rename(&temp, path).map_err(named)?;
    if let Some(dir) = path.parent() {
        File::open(dir).and_then(|d| d.sync_all()).map_err(named)?;
    }
    Ok(())
}

/// Creates `path` with `bytes` and mode `mode`; refuses if it exists.
///
/// # Errors
/// `AlreadyExists`, or the failing step's I/O error.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    file.write_all(bytes).and_then(|()| file.sync_all())
}

/// Creates `dir` and its parents with mode `mode` (for the dirs it creates).
///
/// # Errors
/// The I/O error, naming the directory.
pub fn make_dir(dir: &Path, mode: u32) -> std::io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))
}

/// Sets `path`'s mode to exactly `mode` (what [`make_dir`] asks for is narrowed by the umask and
/// not applied to a directory that exists).
///
/// # Errors
/// The I/O error, naming the path.
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot set the mode of {}: {e}", path.display())))
}
