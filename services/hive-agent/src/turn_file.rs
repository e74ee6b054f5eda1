//! The turn file (`turn.json` in the state directory): what the agent is doing now, for
//! hive-c0re to report. Replaced atomically (a temp file renamed over it) so a reader never sees
//! half a document. It holds no secret, so it keeps the umask's mode.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyperhive_hive_proto::agent_files::{TURN_FILE, Turn, TurnState};
use time::OffsetDateTime;
use tracing::warn;

/// What the consumer and the pause watcher report; the file shows `working` while a turn runs
/// (even when paused meanwhile: that turn finishes), else `paused` or `idle`.
#[derive(Debug, Clone)]
pub struct TurnReporter {
    inner: Arc<Mutex<Reported>>,
    path: PathBuf,
}

#[derive(Debug, Default)]
struct Reported {
    working: Option<String>,
    paused: bool,
    /// The state last written, so an unchanged state is not rewritten every poll.
    written: Option<(Turn, Option<String>)>,
}

impl TurnReporter {
    /// Reports into `state_dir`/turn.json.
    pub fn new(state_dir: &Path) -> Self {
        Self { inner: Arc::default(), path: state_dir.join(TURN_FILE) }
    }

    /// A turn for `todo_id` started.
    pub fn working(&self, todo_id: &str) {
        self.update(|r| r.working = Some(todo_id.to_owned()));
    }

    /// The turn ended.
    pub fn idle(&self) {
        self.update(|r| r.working = None);
    }

    /// The pause file appeared or went away.
    pub fn set_paused(&self, paused: bool) {
        self.update(|r| r.paused = paused);
    }

    fn update(&self, change: impl FnOnce(&mut Reported)) {
        let mut reported = self.inner.lock().expect("turn reporter lock");
        change(&mut reported);
        let now = match (&reported.working, reported.paused) {
            (Some(id), _) => (Turn::Working, Some(id.clone())),
            (None, true) => (Turn::Paused, None),
            (None, false) => (Turn::Idle, None),
        };
        if reported.written.as_ref() == Some(&now) {
            return;
        }
        let state = TurnState {
            turn: now.0,
            todo_id: now.1.clone(),
            since: hyperhive_schedule::format_instant(hyperhive_schedule::whole_seconds_utc(OffsetDateTime::now_utc())),
        };
        // Written under the lock, so two changes cannot land in the wrong order.
        match write_atomically(&self.path, &serde_json::to_vec(&state).expect("a turn state serializes")) {
            Ok(()) => reported.written = Some(now),
            Err(e) => warn!("cannot write {}: {e}", self.path.display()),
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension("json.tmp");
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}
