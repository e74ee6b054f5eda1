//! Reading and replacing the users file. A write is read, change, replace under one lock, so
//! concurrent requests land one after the other and none is lost; the replacement is a temp file
//! in the same directory (mode 0600), written, synced and renamed over the file, then the
//! directory is synced, so Authelia and a crash see the old file or the new one, never a part.
//!
//! A missing file is an empty database (created by the first write). A file that cannot be read
//! or parsed is never overwritten: every request that needs it is refused until it is fixed.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::sync::Mutex;

use crate::database::{Database, Malformed};

/// Why the file cannot be used now. The messages name the file; none holds its content.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It exists but cannot be read.
    #[error("the users file {path} cannot be read: {source}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It is not Authelia's users file as this service understands it.
    #[error("the users file {path} cannot be used: {problem}; fix or restore it (it is left as it is)")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        problem: Malformed,
    },
    /// The new file could not be written.
    #[error("the users file {path} could not be replaced: {problem}")]
    Unwritable {
        /// The file.
        path: String,
        /// What failed.
        problem: String,
    },
}

/// The users file, with the lock all writes take.
#[derive(Debug)]
pub struct UsersFile {
    path: PathBuf,
    writer: Mutex<()>,
}

impl UsersFile {
    /// The file at `path` (it need not exist yet).
    pub fn new(path: PathBuf) -> Self {
        Self { path, writer: Mutex::new(()) }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    /// Reads and parses the file as it is now.
    ///
    /// # Errors
    /// When it cannot be read or parsed.
    pub async fn read(&self) -> Result<Database, FileError> {
        match tokio::fs::read(&self.path).await {
            Ok(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| FileError::Malformed {
                    path: self.shown(),
                    problem: Malformed("it is not UTF-8 text".into()),
                })?;
                Database::parse(&text).map_err(|problem| FileError::Malformed { path: self.shown(), problem })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Database::empty()),
            Err(source) => Err(FileError::Unreadable { path: self.shown(), source }),
        }
    }

    /// Reads the file, lets `change` edit it, and replaces the file with the result when
    /// `change` returns `Ok(true)`; all under the write lock.
    ///
    /// # Errors
    /// [`FileError`] wrapped by `E`'s `From`, or `change`'s own error; either way the file is
    /// unchanged.
    pub async fn update<T, E>(&self, change: impl FnOnce(&mut Database) -> Result<(T, bool), E>) -> Result<T, E>
    where
        E: From<FileError>,
    {
        let _writer = self.writer.lock().await;
        let mut database = self.read().await?;
        let (outcome, changed) = change(&mut database)?;
        if changed {
            let text = database.to_yaml().map_err(|problem| FileError::Malformed { path: self.shown(), problem })?;
            let path = self.path.clone();
            tokio::task::spawn_blocking(move || replace(&path, text.as_bytes()))
                .await
                .map_err(|e| FileError::Unwritable {
                    path: self.shown(),
                    problem: format!("the writing task ended: {e}"),
                })?
                .map_err(|e| FileError::Unwritable { path: self.shown(), problem: e.to_string() })?;
        }
        Ok(outcome)
    }
}

/// Replaces `path` with `content`: temp file beside it (0600), write, fsync, rename, fsync the
/// directory. A failure removes the temp file and leaves `path` as it was.
fn replace(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temp = tempfile::Builder::new().prefix(&format!(".{file_name}.")).suffix(".tmp").tempfile_in(dir)?;
    temp.as_file().set_permissions(std::fs::Permissions::from_mode(0o600))?;
    temp.write_all(content)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_replace_leaves_the_file_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.yml");
        std::fs::write(&path, "users: {}\n").unwrap();
        // A directory in the way of the rename: rename(file, dir) fails.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("x"), "").unwrap();
        assert!(replace(&blocked, b"users: {}\n").is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        replace(&path, b"users:\n  a: {}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "users:\n  a: {}\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
