//! The turn file (`turn.json` in the state directory): what the agent is doing now, for
//! hive-c0re to report. Replaced atomically (a temp file renamed over it) so a reader never sees
//! half a document. It holds no secret, so it keeps the umask's mode.
//!
//! The same changes go to the feed as the turn header on `turn.<agent>`, which also says which
//! todo and source, since when, and whether the last turn failed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyperhive_hive_proto::agent_files::{TURN_FILE, Turn, TurnState};
use hyperhive_hive_proto::feed::{RelayState, TurnHeader};
use hyperhive_schedule::{Todo, format_instant, whole_seconds_utc};
use time::OffsetDateTime;
use tracing::warn;

use crate::feed::Feed;

/// What the consumer and the pause watcher report; the file shows `working` while a turn runs
/// (even when paused meanwhile: that turn finishes), else `paused` or `idle`.
#[derive(Debug, Clone)]
pub struct TurnReporter {
    inner: Arc<Mutex<Reported>>,
    path: PathBuf,
    feed: Feed,
}

/// A turn: its todo, source and start.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TurnOf {
    todo_id: String,
    source: String,
    started_at: String,
}

#[derive(Debug, Default)]
struct Reported {
    working: Option<TurnOf>,
    /// The last turn that ended, and whether it succeeded.
    last: Option<(TurnOf, bool)>,
    paused: bool,
    /// The state last written, so an unchanged state is not rewritten every poll.
    written: Option<(Turn, Option<String>)>,
    /// The header last relayed, without its `at`.
    relayed: Option<TurnHeader>,
}

impl TurnReporter {
    /// Reports into `state_dir`/turn.json and to `feed`; relays the first header at once.
    pub fn new(state_dir: &Path, feed: Feed) -> Self {
        let reporter = Self { inner: Arc::default(), path: state_dir.join(TURN_FILE), feed };
        reporter.update(|_| {});
        reporter
    }

    /// A turn for `todo` started.
    pub fn working(&self, todo: &Todo) {
        let started_at = format_instant(whole_seconds_utc(OffsetDateTime::now_utc()));
        let turn = TurnOf { todo_id: todo.id.clone(), source: todo.source.clone(), started_at };
        self.update(|r| r.working = Some(turn));
    }

    /// The turn ended, successfully or not.
    pub fn finished(&self, succeeded: bool) {
        self.update(|r| r.last = r.working.take().map(|turn| (turn, succeeded)));
    }

    /// The pause file appeared or went away.
    pub fn set_paused(&self, paused: bool) {
        self.update(|r| r.paused = paused);
    }

    fn update(&self, change: impl FnOnce(&mut Reported)) {
        let mut reported = self.inner.lock().expect("turn reporter lock");
        change(&mut reported);
        let at = format_instant(whole_seconds_utc(OffsetDateTime::now_utc()));
        let header = header(&reported);
        if reported.relayed.as_ref() != Some(&header) {
            self.feed.turn(&TurnHeader { at: at.clone(), ..header.clone() });
            reported.relayed = Some(header);
        }
        let now = match (&reported.working, reported.paused) {
            (Some(turn), _) => (Turn::Working, Some(turn.todo_id.clone())),
            (None, true) => (Turn::Paused, None),
            (None, false) => (Turn::Idle, None),
        };
        if reported.written.as_ref() == Some(&now) {
            return;
        }
        let state = TurnState { turn: now.0, todo_id: now.1.clone(), since: at };
        // Written under the lock, so two changes cannot land in the wrong order.
        match write_atomically(&self.path, &serde_json::to_vec(&state).expect("a turn state serializes")) {
            Ok(()) => reported.written = Some(now),
            Err(e) => warn!("cannot write {}: {e}", self.path.display()),
        }
    }
}

/// The header for `reported`, with an empty `at`: a running turn, else paused, else the last
/// turn's outcome.
fn header(reported: &Reported) -> TurnHeader {
    let (state, turn) = match (&reported.working, reported.paused, &reported.last) {
        (Some(turn), _, _) => (RelayState::Working, Some(turn)),
        (None, true, _) => (RelayState::Paused, None),
        (None, false, Some((turn, false))) => (RelayState::Failed, Some(turn)),
        (None, false, last) => (RelayState::Idle, last.as_ref().map(|(turn, _)| turn)),
    };
    TurnHeader {
        state,
        todo_id: turn.map(|t| t.todo_id.clone()),
        source: turn.map(|t| t.source.clone()),
        started_at: turn.map(|t| t.started_at.clone()),
        at: String::new(),
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension("json.tmp");
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next_header(relayed: &mut tokio::sync::mpsc::Receiver<(bool, bytes::Bytes)>) -> TurnHeader {
        let (is_term, json) = relayed.recv().await.unwrap();
        assert!(!is_term);
        serde_json::from_slice(&json).unwrap()
    }

    #[tokio::test]
    async fn every_change_is_relayed_once_with_the_todo_and_the_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let (feed, mut relayed) = Feed::capture();
        let reporter = TurnReporter::new(dir.path(), feed);
        assert_eq!(next_header(&mut relayed).await.state, RelayState::Idle);
        let todo = Todo { id: "t-1".into(), source: "schedule:s".into(), body: String::new() };
        reporter.working(&todo);
        let working = next_header(&mut relayed).await;
        assert_eq!(
            (working.state, working.todo_id.as_deref(), working.source.as_deref()),
            (RelayState::Working, Some("t-1"), Some("schedule:s"))
        );
        assert!(working.started_at.is_some());
        // Paused while working: the turn runs on, so nothing changes for the watchers.
        reporter.set_paused(true);
        reporter.finished(false);
        let paused = next_header(&mut relayed).await;
        assert_eq!(paused.state, RelayState::Paused);
        reporter.set_paused(false);
        let failed = next_header(&mut relayed).await;
        assert_eq!((failed.state, failed.todo_id.as_deref()), (RelayState::Failed, Some("t-1")));
        reporter.set_paused(false);
        reporter.working(&Todo { id: "t-2".into(), ..todo });
        reporter.finished(true);
        assert_eq!(next_header(&mut relayed).await.state, RelayState::Working);
        let idle = next_header(&mut relayed).await;
        assert_eq!((idle.state, idle.todo_id.as_deref()), (RelayState::Idle, Some("t-2")));
        assert!(relayed.try_recv().is_err(), "an unchanged state is not relayed again");
        let file: TurnState = serde_json::from_slice(&std::fs::read(dir.path().join(TURN_FILE)).unwrap()).unwrap();
        assert_eq!(file.turn, Turn::Idle);
    }
}
