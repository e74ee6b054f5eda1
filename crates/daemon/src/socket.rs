//! A unix socket's file, removed on every exit path.
//!
//! A daemon that binds a unix socket holds a [`SocketFile`] beside its listener for as long as it
//! serves; dropping it (a clean stop, an early start error returned with `?`, a panic unwinding)
//! unlinks the file, so a client sees "not running" rather than "connection refused" and the next
//! start finds the directory as it left it.

use std::io;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The socket file at a path this process bound; unlinked on drop.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
}

impl SocketFile {
    /// Binds `path` (which must not exist) and returns the listener with the guard of its file.
    ///
    /// # Errors
    /// The bind's error (the path exists, its directory is missing or not writable).
    pub fn bind(path: &Path) -> io::Result<(UnixListener, Self)> {
        let listener = UnixListener::bind(path)?;
        Ok((listener, Self { path: path.to_path_buf() }))
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => tracing::debug!(socket = %self.path.display(), "socket removed"),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => tracing::warn!(socket = %self.path.display(), %err, "could not remove the socket"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_file_goes_with_the_guard_even_on_an_error_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let start = || -> Result<(), String> {
            let (_listener, _file) = SocketFile::bind(&path).map_err(|e| e.to_string())?;
            assert!(path.exists());
            Err("a later start step failed".into())
        };
        assert!(start().is_err());
        assert!(!path.exists(), "no socket file is left behind");
    }

    #[tokio::test]
    async fn a_file_already_gone_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sock");
        let (_listener, file) = SocketFile::bind(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        drop(file);
        assert!(!path.exists());
    }
}
