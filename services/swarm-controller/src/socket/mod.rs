//! The API's unix socket (services/swarm-controller/README.md, "Why a unix socket").
//!
//! The socket is mode 0666 on purpose: the directory holding it is the access control (its mode
//! and owner decide who may reach the API). That only holds if the directory contains nothing but
//! this socket, so [`bind`] refuses to start when anything else is there. A socket left by a
//! previous run (systemd keeps the directory with `RuntimeDirectoryPreserve=yes`) is unlinked,
//! unless a live controller still answers on it. The file is removed when the [`SocketFile`]
//! [`bind`] returns is dropped, so no exit path of the daemon leaves it behind. [`serve`] is the
//! accept loop that tells each request who is at the other end.

pub mod event_stream;
pub mod serve;

pub use serve::{Access, serve};

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use hyperhive_daemon::socket::SocketFile;
use tokio::net::UnixListener;

/// The socket's mode: anyone who can enter the directory may use the API.
pub const SOCKET_MODE: u32 = 0o666;

/// Why the socket could not be set up; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Something other than our socket is in the directory.
    #[error(
        "refusing to start: {dir} holds {entry:?} besides the controller's socket; the directory \
         is the socket's access control, so it must hold nothing else (move that away or set \
         SWARM_CONTROLLER_SOCKET to a path in an empty directory)"
    )]
    ForeignEntry {
        /// The socket's directory.
        dir: String,
        /// The unexpected entry's file name.
        entry: String,
    },
    /// A controller is already serving on this socket.
    #[error("refusing to start: another swarm-controller is already serving on {0}")]
    InUse(String),
    /// A filesystem call failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SocketError {
    let path = path.display().to_string();
    move |source| SocketError::Io { action, path, source }
}

/// Checks the directory, unlinks a stale socket, binds `path` and makes it mode 0666. The socket
/// file lives as long as the [`SocketFile`].
///
/// # Errors
/// [`SocketError`] when the directory holds anything else, another controller is serving, or a
/// filesystem call fails.
pub fn bind(path: &Path) -> Result<(UnixListener, SocketFile), SocketError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir).map_err(io_error("creating directory", dir))?;
    let own_name = path.file_name().unwrap_or_default();
    for entry in fs::read_dir(dir).map_err(io_error("reading directory", dir))? {
        let entry = entry.map_err(io_error("reading directory", dir))?;
        let is_socket = entry.file_type().map_err(io_error("inspecting", &entry.path()))?.is_socket();
        if entry.file_name() != own_name || !is_socket {
            return Err(SocketError::ForeignEntry {
                dir: dir.display().to_string(),
                entry: entry.file_name().to_string_lossy().into_owned(),
            });
        }
        remove_stale(path)?;
    }
    let (listener, file) = SocketFile::bind(path).map_err(io_error("binding", path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(io_error("setting the mode of", path))?;
    Ok((listener, file))
}

/// Unlinks a socket nobody serves on; refuses if a live controller answers.
fn remove_stale(path: &Path) -> Result<(), SocketError> {
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse(path.display().to_string()));
    }
    tracing::info!(socket = %path.display(), "unlinking the stale socket of a previous run");
    fs::remove_file(path).map_err(io_error("unlinking stale socket", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_with_mode_0666_creating_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("run/controller.sock");
        let _bound = bind(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
    }

    #[tokio::test]
    async fn replaces_a_stale_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("controller.sock");
        // A socket whose listener is gone: what a killed controller leaves behind.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_socket());
        let _bound = bind(&path).unwrap();
        assert!(tokio::net::UnixStream::connect(&path).await.is_ok());
    }

    #[tokio::test]
    async fn refuses_a_directory_holding_anything_else() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("controller.sock");
        fs::write(tmp.path().join("notes.txt"), "x").unwrap();
        let err = bind(&path).unwrap_err().to_string();
        assert!(err.contains("refusing to start"), "{err}");
        assert!(err.contains("notes.txt"), "{err}");
        assert!(!path.exists(), "nothing was bound");
    }

    #[tokio::test]
    async fn refuses_a_regular_file_in_the_sockets_place() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("controller.sock");
        fs::write(&path, "not a socket").unwrap();
        let err = bind(&path).unwrap_err().to_string();
        assert!(err.contains("refusing to start"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "not a socket");
    }

    #[tokio::test]
    async fn refuses_to_steal_a_live_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("controller.sock");
        let _first = bind(&path).unwrap();
        let err = bind(&path).unwrap_err().to_string();
        assert!(err.contains("already serving"), "{err}");
    }

    #[tokio::test]
    async fn the_socket_file_goes_with_its_guard() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("controller.sock");
        let (listener, file) = bind(&path).unwrap();
        drop(listener);
        assert!(path.exists(), "the file stays while the guard lives");
        drop(file);
        assert!(!path.exists());
        assert!(fs::read_dir(tmp.path()).unwrap().next().is_none(), "the directory is as it was");
    }
}
