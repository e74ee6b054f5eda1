//! Reading a file an agent writes (its `turn.json`), as the hive's root supervisor.
//!
//! The agent owns the directory, so it decides what stands at the path: a FIFO (an `open` that
//! never returns, stalling the thread that asked), a symbolic link to `/dev/zero` or to a file of
//! hive-c0re's, a sparse file of gigabytes, a regular file of a megabyte that makes every status
//! too large to publish. [`read`] opens without following a link and without waiting
//! (`O_NOFOLLOW | O_NONBLOCK`), takes only a regular file, and reads at most `max` bytes; each
//! refusal says what stood there, for the hive's status to report as that agent's problem.
//! [`open`] is the same check for a reader that seeks (the process runner's log tail).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;

/// Why an agent's file was not read.
#[derive(Debug, thiserror::Error)]
pub enum AgentFileError {
    /// Nothing there (yet).
    #[error("it does not exist")]
    Missing,
    /// A symbolic link, never followed.
    #[error("it is a symbolic link; the agent must write a regular file")]
    Link,
    /// Something else than a regular file.
    #[error("it is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// Over the bound.
    #[error("it holds {len} bytes, more than the {max} it may")]
    TooLarge { len: u64, max: u64 },
    /// The read itself failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
}

/// The regular file at `path`, opened without following a link or waiting on a FIFO.
///
/// # Errors
/// [`AgentFileError`]: what stood there instead.
pub fn open(path: &Path) -> Result<(File, u64), AgentFileError> {
    let flags = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let file =
        OpenOptions::new().read(true).custom_flags(flags.bits()).open(path).map_err(|e| match e.raw_os_error() {
            Some(code) if code == Errno::ELOOP as i32 => AgentFileError::Link,
            _ if e.kind() == std::io::ErrorKind::NotFound => AgentFileError::Missing,
            _ => AgentFileError::Io(e),
        })?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = match () {
            () if kind.is_fifo() => "FIFO",
            () if kind.is_char_device() => "character device",
            () if kind.is_block_device() => "block device",
            () if kind.is_socket() => "socket",
            () if kind.is_dir() => "directory",
            () => "special file",
        };
        return Err(AgentFileError::NotRegular(what));
    }
    Ok((file, meta.len()))
}

/// The file at `path`, a regular file of at most `max` bytes.
///
/// # Errors
/// [`AgentFileError`]: what stood there instead.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, AgentFileError> {
    let (file, len) = open(path)?;
    if len > max {
        return Err(AgentFileError::TooLarge { len, max });
    }
    let mut bytes = Vec::new();
    // The file may grow after the size was read: never more than one byte past the bound.
    file.take(max + 1).read_to_end(&mut bytes)?;
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > max {
        return Err(AgentFileError::TooLarge { len, max });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn only_a_small_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("turn.json");
        assert!(matches!(read(&path, 16), Err(AgentFileError::Missing)));
        std::fs::write(&path, b"{\"turn\":\"idle\"}").unwrap();
        assert_eq!(read(&path, 16).unwrap(), b"{\"turn\":\"idle\"}");
        assert!(matches!(read(&path, 8), Err(AgentFileError::TooLarge { len: 15, max: 8 })));
    }

    #[test]
    fn a_fifo_a_link_a_device_and_a_sparse_file_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let started = Instant::now();
        assert!(matches!(read(&fifo, 4096), Err(AgentFileError::NotRegular("FIFO"))));
        assert!(started.elapsed() < Duration::from_secs(1), "a FIFO without a writer must not block");

        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(read(&link, 4096), Err(AgentFileError::Link)));
        let to_file = dir.path().join("to-file");
        std::fs::write(dir.path().join("secret"), b"hive key").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), &to_file).unwrap();
        assert!(matches!(read(&to_file, 4096), Err(AgentFileError::Link)), "a link to a readable file too");

        assert!(matches!(read(Path::new("/dev/zero"), 4096), Err(AgentFileError::NotRegular("character device"))));
        assert!(matches!(read(dir.path(), 4096), Err(AgentFileError::NotRegular("directory"))));

        let sparse = dir.path().join("sparse");
        std::fs::File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
        assert!(matches!(read(&sparse, 4096), Err(AgentFileError::TooLarge { len: 2_147_483_648, max: 4096 })));
    }
}
