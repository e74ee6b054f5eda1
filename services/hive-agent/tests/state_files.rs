//! `state.db` and its directory are private to the agent's user whatever the umask. Alone in its
//! own test binary because the umask is per process.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hive_agent::state::State;
use nix::sys::stat::{Mode, umask};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn the_state_dir_is_0700_and_the_db_files_0600_under_a_permissive_umask() {
    umask(Mode::empty());
    let root = tempfile::tempdir().unwrap();

    let fresh = root.path().join("new/agent");
    let state = State::open(&fresh).unwrap();
    state.record_revision(1).unwrap();
    for (path, expected) in [
        (fresh.clone(), 0o700),
        (fresh.join("state.db"), 0o600),
        (fresh.join("state.db-wal"), 0o600),
        (fresh.join("state.db-shm"), 0o600),
    ] {
        assert_eq!(mode(&path), expected, "{}", path.display());
    }
    drop(state);

    // Files an older hive-agent left at the umask are made private on the next start (closing
    // the db removed its -wal and -shm; an empty -wal is one with no frames yet).
    let db = fresh.join("state.db");
    let wal = fresh.join("state.db-wal");
    std::fs::write(&wal, b"").unwrap();
    for path in [&db, &wal] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let state = State::open(&fresh).unwrap();
    assert_eq!(state.applied_revision().unwrap(), 1, "the same db");
    for name in ["state.db", "state.db-wal", "state.db-shm"] {
        assert_eq!(mode(&fresh.join(name)), 0o600, "{name}");
    }
}
