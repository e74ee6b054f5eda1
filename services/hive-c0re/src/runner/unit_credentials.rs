//! An agent unit's secrets, staged in its own state directory so that a renewal reaches the
//! running unit in place.
//!
//! `LoadCredential=` copies a file once, when the unit starts, so a renewed NATS credential would
//! need a restart, which kills a running turn (its todo would run again). Instead hive-c0re copies
//! the agent's secrets into `credentials/` inside the unit's `StateDirectory`, owned by the unit's
//! dynamic user, before each start and again after each renewal; hive-agent follows the file.
//!
//! That directory belongs to the agent, which runs arbitrary commands, and hive-c0re writes into
//! it as root, so every step is taken relative to a directory descriptor and never follows a
//! link the agent may have planted: the state directory is opened under `/var/lib/private`
//! (root's, mode 0700, out of the agent's reach), each further name with `O_NOFOLLOW`, files are
//! created afresh (`O_EXCL`) and renamed into place (a rename replaces a planted link rather than
//! writing through it). The agent can at worst break its own copy, which it could do anyway.
//!
//! Ownership: the files get the owner of the state directory. systemd gives a dynamic user the
//! uid that owns its state directory when it can, and otherwise changes the owner of the whole
//! tree at start, so a copy made before the first start (owned by root) becomes the agent's too.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, fstat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, fsync, unlinkat};

/// The directory inside the unit's state directory that holds its secrets.
pub const DIR: &str = "credentials";

/// The NATS credential's name among them.
pub const NATS_CREDS: &str = "nats-creds";

/// Copies `files` (name -> bytes) into `<state_dir>/credentials/`, each replaced atomically with
/// mode 0400 and the state directory's owner, and removes every other file there. Creates the
/// state directory (mode 0700, root's until systemd hands it to the unit) when it does not exist.
///
/// # Errors
/// The failing step, naming the path; a link where a directory should be is refused.
pub fn stage(state_dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let at = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{path}: {e}"))
    };
    let (Some(parent), Some(leaf)) = (state_dir.parent(), state_dir.file_name()) else {
        return Err(std::io::Error::other(format!("{} is not a state directory", state_dir.display())));
    };
    crate::files::make_dir(parent, 0o700)?;
    let parent_fd = open_dir(None, parent.as_os_str()).map_err(at(parent))?;
    let state_fd = open_or_make_dir(&parent_fd, leaf).map_err(at(state_dir))?;
    let owner = fstat(&state_fd).map_err(std::io::Error::from).map_err(at(state_dir))?;
    let dir_path = state_dir.join(DIR);
    let dir_fd = open_or_make_dir(&state_fd, OsStr::new(DIR)).map_err(at(&dir_path))?;
    chown_to(&dir_fd, &owner).map_err(at(&dir_path))?;
    for (name, bytes) in files {
        replace(&dir_fd, name, bytes, &owner).map_err(at(&dir_path.join(name)))?;
    }
    let keep: BTreeSet<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    remove_others(dir_fd, &keep).map_err(at(&dir_path))
}

/// Reads each `(name, path)` of hive-c0re's own secret files, for [`stage`].
///
/// # Errors
/// The first file that cannot be read, naming it.
pub fn read_sources(sources: &[(String, &Path)]) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    sources
        .iter()
        .map(|(name, path)| {
            std::fs::read(path)
                .map(|bytes| (name.clone(), bytes))
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        })
        .collect()
}

fn open_dir(at: Option<&OwnedFd>, name: &OsStr) -> std::io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(match at {
        Some(dir) => openat(dir, name, flags, Mode::empty())?,
        None => nix::fcntl::open(name, flags, Mode::empty())?,
    })
}

/// `name` under `dir`, made (mode 0700) when missing; a link or a file there is refused
/// (`O_NOFOLLOW` with `O_DIRECTORY` fails on both).
fn open_or_make_dir(dir: &OwnedFd, name: &OsStr) -> std::io::Result<OwnedFd> {
    match mkdirat(dir, name, Mode::S_IRWXU) {
        Ok(()) | Err(Errno::EEXIST) => open_dir(Some(dir), name),
        Err(e) => Err(e.into()),
    }
}

fn chown_to(fd: &impl AsFd, owner: &FileStat) -> std::io::Result<()> {
    Ok(fchown(fd, Some(Uid::from_raw(owner.st_uid)), Some(Gid::from_raw(owner.st_gid)))?)
}

/// Writes `bytes` to a fresh temp file in `dir` and renames it over `name`.
fn replace(dir: &OwnedFd, name: &str, bytes: &[u8], owner: &FileStat) -> std::io::Result<()> {
    let temp = format!(".{name}.tmp");
    match unlinkat(dir, temp.as_str(), UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(dir, temp.as_str(), flags, Mode::S_IRUSR)?;
    chown_to(&fd, owner)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()?;
    renameat(dir, temp.as_str(), dir, name)?;
    Ok(fsync(dir)?)
}

/// Removes every entry of `dir` not in `keep` (files and links only: `unlinkat` without
/// `AT_REMOVEDIR` never touches a directory, and never follows a link).
fn remove_others(dir: OwnedFd, keep: &BTreeSet<&str>) -> std::io::Result<()> {
    let mut listing = nix::dir::Dir::from_fd(dir)?;
    let others: Vec<Vec<u8>> = listing
        .iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type() != Some(nix::dir::Type::Directory))
        .map(|e| e.file_name().to_bytes().to_vec())
        .filter(|n| !std::str::from_utf8(n).is_ok_and(|n| keep.contains(n)))
        .collect();
    for name in others {
        match unlinkat(&listing, OsStr::from_bytes(&name), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};

    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        pairs.iter().map(|(n, b)| ((*n).to_owned(), b.as_bytes().to_vec())).collect()
    }

    /// Giving the files to the unit's user takes root (the build sandbox's user is not).
    mod needs_root {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};

        use super::super::*;
        use super::files;

        #[test]
        fn stages_files_read_only_for_the_state_directory_owner() {
            let root = tempfile::tempdir().unwrap();
            let state = root.path().join("private/hive-agent-bee");
            std::fs::create_dir_all(&state).unwrap();
            // The unit's dynamic user owns its state directory; the copies must be that user's.
            std::os::unix::fs::chown(&state, Some(61_234), Some(61_234)).unwrap();
            stage(&state, &files(&[(NATS_CREDS, "creds-1"), ("token", "t")])).unwrap();
            for name in [NATS_CREDS, "token"] {
                let meta = std::fs::metadata(state.join(DIR).join(name)).unwrap();
                assert_eq!((meta.uid(), meta.gid()), (61_234, 61_234), "{name}");
                assert_eq!(meta.permissions().mode() & 0o7777, 0o400, "{name}");
            }
            let dir = std::fs::metadata(state.join(DIR)).unwrap();
            assert_eq!((dir.uid(), dir.permissions().mode() & 0o7777), (61_234, 0o700));
            assert_eq!(std::fs::read(state.join(DIR).join(NATS_CREDS)).unwrap(), b"creds-1");
        }
    }

    #[test]
    fn a_renewal_replaces_the_file_and_drops_secrets_no_longer_sent() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("hive-agent-bee");
        stage(&state, &files(&[(NATS_CREDS, "creds-1"), ("linked-matrix", "old")])).unwrap();
        let before = std::fs::metadata(state.join(DIR).join(NATS_CREDS)).unwrap().ino();
        stage(&state, &files(&[(NATS_CREDS, "creds-2")])).unwrap();
        let creds = state.join(DIR).join(NATS_CREDS);
        assert_eq!(std::fs::read(&creds).unwrap(), b"creds-2");
        assert_ne!(std::fs::metadata(&creds).unwrap().ino(), before, "replaced by rename, not rewritten");
        let left: Vec<_> = std::fs::read_dir(state.join(DIR)).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [NATS_CREDS], "a secret no longer sent is removed, and no temp file is left");
    }

    #[test]
    fn a_link_planted_as_the_credentials_directory_is_refused_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("hive-agent-bee");
        let target = root.path().join("elsewhere");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&target).unwrap();
        symlink(&target, state.join(DIR)).unwrap();
        let err = stage(&state, &files(&[(NATS_CREDS, "creds")])).unwrap_err();
        assert!(err.to_string().contains(DIR), "{err}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
    }

    #[test]
    fn a_link_planted_as_a_secret_file_is_replaced_not_written_through() {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("hive-agent-bee");
        stage(&state, &files(&[(NATS_CREDS, "creds-1")])).unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let planted = state.join(DIR).join(NATS_CREDS);
        std::fs::remove_file(&planted).unwrap();
        symlink(&victim, &planted).unwrap();
        // Also a planted temp name, which a create with O_EXCL|O_NOFOLLOW must not follow.
        symlink(&victim, state.join(DIR).join(format!(".{NATS_CREDS}.tmp"))).unwrap();
        stage(&state, &files(&[(NATS_CREDS, "creds-2")])).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&planted).unwrap(), b"creds-2");
    }

    #[test]
    fn a_link_planted_as_the_state_directory_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("elsewhere");
        std::fs::create_dir_all(&target).unwrap();
        let state = root.path().join("hive-agent-bee");
        symlink(&target, &state).unwrap();
        assert!(stage(&state, &files(&[(NATS_CREDS, "creds")])).is_err());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    }
}
