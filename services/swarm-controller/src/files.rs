//! Writing a file that must not exist yet (a key, a credential): created exclusively with its
//! final mode, so it is never readable by others for a moment and never written over, and synced
//! before the caller reports it written.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `bytes` to a new file `path` with `mode`.
///
/// # Errors
/// The file exists (`AlreadyExists`) or cannot be written.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
