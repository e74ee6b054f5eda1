//! The agent's state db (`state.db`, SQLite in WAL mode): the last slot fired per schedule, the
//! highest `agent-schedules` revision applied, and finished todo ids.
//!
//! The directory is created 0700 and the db with its `-wal` and `-shm` files are 0600 whatever
//! the umask: they hold what the agent was asked to do.
//!
//! Migrations are numbered by `PRAGMA user_version`: each entry of [`MIGRATIONS`] runs once, in
//! order, in its own transaction; never edit one that has shipped, append a new one.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use time::OffsetDateTime;

const MIGRATIONS: &[&str] = &[
    // 1: first schema.
    "CREATE TABLE fired_slots (
         schedule_id TEXT PRIMARY KEY NOT NULL,
         slot_unix INTEGER NOT NULL
     );
     CREATE TABLE finished_todos (
         todo_id TEXT PRIMARY KEY NOT NULL,
         finished_unix INTEGER NOT NULL,
         exit_code INTEGER
     );
     CREATE TABLE applied_revision (
         only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
         revision INTEGER NOT NULL
     );",
    // 2: the agent's own secrets (the key of its todos' message ids).
    "CREATE TABLE secrets (
         name TEXT PRIMARY KEY NOT NULL,
         value BLOB NOT NULL
     );",
];

/// The name in `secrets` of the key that makes this agent's slot message ids unguessable.
const MESSAGE_ID_KEY: &str = "message-id-key";

/// A state db failure, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A statement failed.
    #[error("state db {path}: {action}: {source}")]
    Db {
        /// `state.db`.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The state directory cannot be created.
    #[error("cannot create the state directory {path} (HIVE_AGENT_STATE_DIR): {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A value in the db is not what this hive-agent wrote.
    #[error(
        "state db {path}: {what} is damaged; remove state.db to start afresh (the agent then refires the latest due slot once)"
    )]
    Corrupt {
        /// `state.db`.
        path: PathBuf,
        /// Which value.
        what: &'static str,
    },
    /// The db or its `-wal`/`-shm` file cannot be made private (0600).
    #[error("cannot make {path} readable by this user only (mode 0600): {source}")]
    Private {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A newer hive-agent migrated this db.
    #[error(
        "state db {path} has schema version {found}, newer than this hive-agent knows ({known}); \
         upgrade hive-agent"
    )]
    Newer {
        /// `state.db`.
        path: PathBuf,
        /// The db's version.
        found: usize,
        /// The latest version this build knows.
        known: usize,
    },
}

/// The state db, shared by the ticker and the consumer (each call is one short statement).
#[derive(Debug, Clone)]
pub struct State {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl State {
    /// Opens (creating if absent) `dir/state.db` in WAL mode and runs pending migrations.
    ///
    /// # Errors
    /// When the directory or db cannot be created or opened, or a migration fails.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let path = dir.join("state.db");
        let fail = |action| {
            let path = path.clone();
            move |source| StateError::Db { path, action, source }
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| StateError::Dir { path: dir.to_path_buf(), source })?;
        make_private(&path)?;
        let mut conn = Connection::open(&path).map_err(fail("opening"))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(fail("enabling WAL"))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(fail("setting synchronous"))?;
        let version: usize = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(fail("reading the schema version"))?;
        if version > MIGRATIONS.len() {
            return Err(StateError::Newer { path, found: version, known: MIGRATIONS.len() });
        }
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            let tx = conn.transaction().map_err(fail("starting a migration"))?;
            tx.execute_batch(sql).map_err(fail("migrating"))?;
            tx.pragma_update(None, "user_version", index + 1).map_err(fail("migrating"))?;
            tx.commit().map_err(fail("committing a migration"))?;
        }
        Ok(Self { conn: Arc::new(Mutex::new(conn)), path })
    }

    fn with<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StateError> {
        let conn = self.conn.lock().expect("state db lock");
        f(&conn).map_err(|source| StateError::Db { path: self.path.clone(), action, source })
    }

    /// The key of this agent's slot message ids: 32 random bytes, made on first use and kept, so
    /// a slot published again after a crash or a restart gets the same id.
    pub fn message_id_key(&self) -> Result<[u8; 32], StateError> {
        self.with("reading the message id key", |c| {
            let fresh: [u8; 32] = rand::random();
            c.execute(
                "INSERT OR IGNORE INTO secrets (name, value) VALUES (?1, ?2)",
                params![MESSAGE_ID_KEY, fresh.as_slice()],
            )?;
            c.query_row("SELECT value FROM secrets WHERE name = ?1", params![MESSAGE_ID_KEY], |row| {
                row.get::<_, Vec<u8>>(0)
            })
        })
        .and_then(|value| {
            value.try_into().map_err(|_| StateError::Corrupt { path: self.path.clone(), what: "the message id key" })
        })
    }

    /// The last slot fired for `schedule_id`.
    pub fn last_fired(&self, schedule_id: &str) -> Result<Option<OffsetDateTime>, StateError> {
        let unix: Option<i64> = self.with("reading a fired slot", |c| {
            c.query_row("SELECT slot_unix FROM fired_slots WHERE schedule_id = ?1", params![schedule_id], |row| {
                row.get(0)
            })
            .optional()
        })?;
        Ok(unix.and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok()))
    }

    /// Records `slot` as fired for `schedule_id` (only ever moves forward).
    pub fn record_fired(&self, schedule_id: &str, slot: OffsetDateTime) -> Result<(), StateError> {
        self.with("recording a fired slot", |c| {
            c.execute(
                "INSERT INTO fired_slots (schedule_id, slot_unix) VALUES (?1, ?2)
                 ON CONFLICT (schedule_id) DO UPDATE SET slot_unix = max(slot_unix, excluded.slot_unix)",
                params![schedule_id, slot.unix_timestamp()],
            )
            .map(drop)
        })
    }

    /// The highest `agent-schedules` revision applied (replicas may answer with older ones).
    pub fn applied_revision(&self) -> Result<u64, StateError> {
        let revision: Option<i64> = self.with("reading the applied revision", |c| {
            c.query_row("SELECT revision FROM applied_revision", [], |row| row.get(0)).optional()
        })?;
        Ok(revision.map_or(0, |r| u64::try_from(r).unwrap_or(0)))
    }

    /// Remembers `revision` as applied.
    pub fn record_revision(&self, revision: u64) -> Result<(), StateError> {
        let revision = i64::try_from(revision).unwrap_or(i64::MAX);
        self.with("recording the applied revision", |c| {
            c.execute(
                "INSERT INTO applied_revision (only_row, revision) VALUES (1, ?1)
                 ON CONFLICT (only_row) DO UPDATE SET revision = max(revision, excluded.revision)",
                params![revision],
            )
            .map(drop)
        })
    }

    /// Sets the applied revision to `revision`, also downwards (the bucket was recreated).
    pub fn reset_revision(&self, revision: u64) -> Result<(), StateError> {
        let revision = i64::try_from(revision).unwrap_or(i64::MAX);
        self.with("resetting the applied revision", |c| {
            c.execute(
                "INSERT INTO applied_revision (only_row, revision) VALUES (1, ?1)
                 ON CONFLICT (only_row) DO UPDATE SET revision = excluded.revision",
                params![revision],
            )
            .map(drop)
        })
    }

    /// Whether the todo `id` already finished (a redelivery must not run it again).
    pub fn is_finished(&self, todo_id: &str) -> Result<bool, StateError> {
        self.with("reading finished todos", |c| {
            c.query_row("SELECT 1 FROM finished_todos WHERE todo_id = ?1", params![todo_id], |_| Ok(()))
                .optional()
                .map(|found| found.is_some())
        })
    }

    /// Records the todo `id` as finished, with the turn's exit code (None: killed by a signal).
    pub fn record_finished(&self, todo_id: &str, at: OffsetDateTime, exit_code: Option<i32>) -> Result<(), StateError> {
        self.with("recording a finished todo", |c| {
            c.execute(
                "INSERT OR IGNORE INTO finished_todos (todo_id, finished_unix, exit_code)
                 VALUES (?1, ?2, ?3)",
                params![todo_id, at.unix_timestamp(), exit_code],
            )
            .map(drop)
        })
    }
}

/// Creates `path` 0600 if absent, and sets it and any `-wal`/`-shm` file beside it (left by an
/// older hive-agent at the umask) to 0600. SQLite gives the `-wal` and `-shm` files it creates
/// later the db's mode, so they are 0600 too.
fn make_private(path: &Path) -> Result<(), StateError> {
    let private = |path: &Path, source| StateError::Private { path: path.to_path_buf(), source };
    let owner_only = || Permissions::from_mode(0o600);
    OpenOptions::new().append(true).create(true).mode(0o600).open(path).map_err(|e| private(path, e))?;
    std::fs::set_permissions(path, owner_only()).map_err(|e| private(path, e))?;
    for suffix in ["-wal", "-shm"] {
        let mut companion = path.as_os_str().to_owned();
        companion.push(suffix);
        let companion = PathBuf::from(companion);
        match std::fs::set_permissions(&companion, owner_only()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other.map_err(|e| private(&companion, e))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn state_survives_reopening_and_slots_only_move_forward() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(dir.path()).unwrap();
        assert_eq!(state.last_fired("s").unwrap(), None);
        state.record_fired("s", datetime!(2026-11-30 10:00:00 UTC)).unwrap();
        state.record_fired("s", datetime!(2026-11-30 09:00:00 UTC)).unwrap();
        state.record_finished("t1", datetime!(2026-11-30 10:00:00 UTC), Some(3)).unwrap();
        state.record_revision(7).unwrap();
        state.record_revision(5).unwrap();
        drop(state);

        let state = State::open(dir.path()).unwrap();
        assert_eq!(state.last_fired("s").unwrap(), Some(datetime!(2026-11-30 10:00:00 UTC)));
        assert!(state.is_finished("t1").unwrap());
        assert!(!state.is_finished("t2").unwrap());
        assert_eq!(state.applied_revision().unwrap(), 7);
    }

    #[test]
    fn the_message_id_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let key = State::open(dir.path()).unwrap().message_id_key().unwrap();
        assert_eq!(State::open(dir.path()).unwrap().message_id_key().unwrap(), key);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(State::open(other.path()).unwrap().message_id_key().unwrap(), key, "each agent its own");
    }

    #[test]
    fn the_db_is_wal_and_at_the_latest_schema() {
        let dir = tempfile::tempdir().unwrap();
        State::open(dir.path()).unwrap();
        let conn = Connection::open(dir.path().join("state.db")).unwrap();
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len());
    }

    #[test]
    fn a_newer_schema_is_refused_with_advice() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("state.db")).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = State::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("newer than this hive-agent") && err.contains("state.db"), "{err}");
    }
}
