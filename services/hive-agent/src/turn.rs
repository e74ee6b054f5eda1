//! A turn: the configured command run through `sh -c`, the todo body on stdin, in a process
//! group of its own, so that every process the turn starts (a tool in the background, a
//! pipeline, a sub-shell) ends with it: on its timeout, when the agent stops, and when `sh`
//! exits leaving something behind.
//!
//! A process that leaves the group on purpose (`setsid`, a double-forking daemon) escapes this;
//! under systemd the unit's cgroup still ends it when the unit stops.
//!
//! Its stdout and stderr are read as the command writes them: each read goes to the agent's own
//! stdout or stderr (its log) and to the [`Feed`] (its terminal), never waiting on the latter.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use hyperhive_schedule::{AgentName, Todo};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::feed::{Feed, Utf8Chunker};
use crate::output_tail::OutputTail;

/// How long a turn past its timeout has between SIGTERM and SIGKILL: long enough for a tool to
/// remove its lock files (git does on SIGTERM), short enough not to hold the queue.
pub const TERM_GRACE: Duration = Duration::from_secs(5);

/// How long the output of a turn that has ended may take to drain into the log and the feed.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// `sh` exited (its status says how the command went).
    Exited(ExitStatus),
    /// Still running at the timeout: its process group was sent SIGTERM, then SIGKILL.
    TimedOut,
    /// Cancelled by an operator: its process group was sent SIGTERM, then SIGKILL.
    Cancelled,
}

/// What a turn is run with besides its command and todo.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits<'a> {
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// Where its output goes (its terminal).
    pub feed: &'a Feed,
    /// The last of its output, kept for its record.
    pub tail: &'a OutputTail,
}

/// Runs `command` for `todo` and waits for it to exit, at most `limits.timeout`, or until
/// `cancelled` resolves. Whatever the turn started is killed when it ends, and at once if this
/// future is dropped (agent shutdown: the todo is then not acked and comes back).
///
/// # Errors
/// When `sh` cannot be started or waited for. A turn that cannot read all of its stdin (it
/// exited early) is not an error: its exit status says how it went.
pub async fn run_turn(
    command: &str,
    agent: &AgentName,
    todo: &Todo,
    limits: TurnLimits<'_>,
    cancelled: impl Future<Output = ()>,
) -> std::io::Result<TurnEnd> {
    let TurnLimits { timeout, feed, tail } = limits;
    let mut turn = TurnGroup::spawn(
        Command::new("sh")
            .arg("-c")
            .arg(command)
            .envs(crate::turn_env::current()?)
            .env("HIVE_AGENT_NAME", agent.as_str())
            .env("HIVE_TODO_ID", &todo.id)
            .env("HIVE_TODO_SOURCE", &todo.source)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )?;
    let mut stdin = turn.child.stdin.take().expect("stdin is piped");
    let readers = [
        forward(turn.child.stdout.take().expect("stdout is piped"), tokio::io::stdout(), feed.clone(), tail.clone()),
        forward(turn.child.stderr.take().expect("stderr is piped"), tokio::io::stderr(), feed.clone(), tail.clone()),
    ];
    let body = todo.body.clone();
    // Written concurrently with the wait so a body larger than the pipe buffer cannot deadlock
    // against a command that exits without reading it.
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(body.as_bytes()).await;
    });
    let stopped_by = tokio::select! {
        status = turn.child.wait() => status.map(TurnEnd::Exited),
        () = tokio::time::sleep(timeout) => Ok(TurnEnd::TimedOut),
        () = cancelled => Ok(TurnEnd::Cancelled),
    };
    let end = match stopped_by {
        Ok(ended @ (TurnEnd::TimedOut | TurnEnd::Cancelled)) => {
            turn.signal(Signal::SIGTERM);
            // Whether or not `sh` left within the grace, the group is killed below, so a child
            // that ignores SIGTERM is not left behind.
            let _ = tokio::time::timeout(TERM_GRACE, turn.child.wait()).await;
            turn.signal(Signal::SIGKILL);
            turn.child.wait().await.map(|_| ended)
        }
        exited => exited,
    };
    feed.abort();
    // What the turn left running is ended now, so its pipes close and the readers finish with
    // everything it wrote.
    turn.signal(Signal::SIGKILL);
    for reader in readers {
        if tokio::time::timeout(OUTPUT_DRAIN, reader).await.is_err() {
            tracing::warn!("the turn's output did not drain within {OUTPUT_DRAIN:?}");
        }
    }
    end
}

/// Reads `from` until it closes, writing each read to `log`, offering it to `feed` and keeping
/// the last of it in `tail`.
fn forward<R, W>(mut from: R, mut log: W, feed: Feed, tail: OutputTail) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut chunker = Utf8Chunker::default();
        let mut buffer = vec![0u8; 8192];
        loop {
            let read = match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => &buffer[..n],
            };
            // The feed first: writing the log (stdout) is a hand-off to Tokio's blocking
            // threads, which a watcher of the terminal need not wait for.
            feed.terminal(&chunker.push(read));
            tail.push(read);
            let _ = log.write_all(read).await;
        }
        let rest = chunker.finish();
        if !rest.is_empty() {
            feed.terminal(&rest);
        }
        let _ = log.flush().await;
    })
}

/// `sh` as the leader of a new process group; dropping this kills the whole group.
#[derive(Debug)]
struct TurnGroup {
    child: Child,
    /// The group's id: `sh`'s pid.
    group: Pid,
}

impl TurnGroup {
    fn spawn(command: &mut Command) -> std::io::Result<Self> {
        let child = command.process_group(0).kill_on_drop(true).spawn()?;
        let pid = child.id().expect("a child that was never waited for has a pid");
        let group = Pid::from_raw(i32::try_from(pid).expect("pids fit in an i32"));
        Ok(Self { child, group })
    }

    /// Signals every process of the group. The group id cannot name another group: while `sh`
    /// is unreaped it holds the id, and after that any member left holds it; only once the group
    /// is empty does the id become free, and the kernel then hands it out again only after
    /// cycling through every other pid. An empty group answers ESRCH, which is what is wanted.
    fn signal(&self, signal: Signal) {
        let _ = killpg(self.group, signal);
    }
}

impl Drop for TurnGroup {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Instant;

    const LONG: Duration = Duration::from_secs(3600);

    /// A turn's limits with a tail nobody reads.
    fn limits(timeout: Duration, feed: &Feed) -> TurnLimits<'_> {
        let tail: &'static OutputTail = Box::leak(Box::default());
        TurnLimits { timeout, feed, tail }
    }

    /// A cancellation that never comes.
    fn pending() -> std::future::Pending<()> {
        std::future::pending()
    }

    /// A log whose writes never finish (a stalled journal).
    struct StalledLog;

    impl AsyncWrite for StalledLog {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Pending
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Pending
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Pending
        }
    }

    #[tokio::test]
    async fn output_reaches_the_feed_and_the_tail_before_its_log_write_finishes() {
        let (feed, mut fed) = Feed::capture();
        let tail = OutputTail::default();
        let (mut writer, reader) = tokio::io::duplex(64);
        let forwarding = forward(reader, StalledLog, feed, tail.clone());
        writer.write_all(b"one line\n").await.unwrap();
        let (terminal, chunk) = tokio::time::timeout(Duration::from_secs(5), fed.recv())
            .await
            .expect("the feed waited for the log")
            .unwrap();
        assert!(terminal);
        assert_eq!(&chunk[..], b"one line\n");
        assert_eq!(tail.text(), ("one line\n".to_owned(), 0));
        forwarding.abort();
    }

    fn todo(body: &str) -> Todo {
        Todo { id: "t-1".into(), source: "schedule:s".into(), body: body.into() }
    }

    fn bee() -> AgentName {
        AgentName::parse("bee").unwrap()
    }

    /// A turn that records the pids of `sh`, a background sleep and a foreground one (through a
    /// shell that records its pid and execs into the sleep); `prelude` runs first.
    fn lingering(dir: &Path, prelude: &str) -> String {
        format!(
            "{prelude} echo $$ > {pids}; sleep 1000 & echo $! >> {pids}; sh -c 'echo $$ >> {pids}; exec sleep 1000'",
            pids = dir.join("pids").display()
        )
    }

    /// The pids a lingering turn wrote, once it has written all three.
    async fn pids_of(dir: &Path) -> Vec<Pid> {
        let file = dir.join("pids");
        hyperhive_testkit::wait_until("the turn's pids", Duration::from_secs(10), || async {
            let text = std::fs::read_to_string(&file).ok()?;
            let pids: Vec<Pid> = text.lines().filter_map(|l| l.trim().parse().ok()).map(Pid::from_raw).collect();
            (pids.len() == 3).then_some(pids)
        })
        .await
        .unwrap()
    }

    async fn none_running(pids: &[Pid]) {
        hyperhive_testkit::wait_until_none_running(pids, Duration::from_secs(10)).await.unwrap();
    }

    #[tokio::test]
    async fn the_body_is_on_stdin_and_the_todo_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let command =
            format!("{{ cat; echo \"|$HIVE_AGENT_NAME|$HIVE_TODO_ID|$HIVE_TODO_SOURCE\"; }} > {}", out.display());
        let end = run_turn(&command, &bee(), &todo("hello"), limits(LONG, &Feed::disabled()), pending()).await.unwrap();
        assert!(matches!(end, TurnEnd::Exited(status) if status.success()), "{end:?}");
        assert_eq!(std::fs::read_to_string(out).unwrap(), "hello|bee|t-1|schedule:s\n");
    }

    #[tokio::test]
    async fn the_output_reaches_the_relay_whole_even_split_mid_character() {
        let (feed, mut fed) = Feed::capture();
        // 'é' is written a byte at a time, with a pause between, from stdout; stderr too.
        let command = r"printf 'start\n'; printf '\303'; sleep 0.2; printf '\251\n'; printf 'oops\n' >&2";
        let end = run_turn(command, &bee(), &todo(""), limits(LONG, &feed), pending()).await.unwrap();
        assert!(matches!(end, TurnEnd::Exited(status) if status.success()), "{end:?}");
        drop(feed);
        let mut chunks = Vec::new();
        while let Some((is_term, chunk)) = fed.recv().await {
            assert!(is_term);
            assert!(std::str::from_utf8(&chunk).is_ok(), "a chunk split a character: {chunk:?}");
            chunks.push(String::from_utf8(chunk.to_vec()).unwrap());
        }
        let all = chunks.concat();
        assert!(all.contains("start\né\n") && all.contains("oops\n"), "{all:?}");
    }

    #[tokio::test]
    async fn exit_codes_come_back_and_unread_stdin_is_fine() {
        let big = "x".repeat(1 << 20);
        let end = run_turn("exit 3", &bee(), &todo(&big), limits(LONG, &Feed::disabled()), pending()).await.unwrap();
        assert!(matches!(end, TurnEnd::Exited(status) if status.code() == Some(3)), "{end:?}");
    }

    #[tokio::test]
    async fn a_turn_past_its_timeout_is_killed_with_everything_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let end = run_turn(
            &lingering(dir.path(), ""),
            &bee(),
            &todo(""),
            limits(Duration::from_secs(1), &Feed::disabled()),
            pending(),
        )
        .await
        .unwrap();
        assert_eq!(end, TurnEnd::TimedOut);
        assert!(started.elapsed() < TERM_GRACE, "SIGTERM alone ends these sleeps: {:?}", started.elapsed());
        none_running(&pids_of(dir.path()).await).await;
    }

    #[tokio::test]
    async fn a_turn_that_ignores_sigterm_is_killed_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        // The ignored SIGTERM is inherited by both sleeps.
        let command = lingering(dir.path(), "trap '' TERM;");
        let end = run_turn(&command, &bee(), &todo(""), limits(Duration::from_secs(1), &Feed::disabled()), pending())
            .await
            .unwrap();
        assert_eq!(end, TurnEnd::TimedOut);
        assert!(started.elapsed() >= TERM_GRACE, "killed before the grace: {:?}", started.elapsed());
        none_running(&pids_of(dir.path()).await).await;
    }

    #[tokio::test]
    async fn a_cancelled_turn_ends_with_everything_it_started_and_keeps_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let command = lingering(dir.path(), "echo before-cancel;");
        let (feed, tail) = (Feed::disabled(), OutputTail::default());
        let limits = TurnLimits { timeout: LONG, feed: &feed, tail: &tail };
        let pids = dir.path().to_owned();
        // Cancelled once the turn has started all three processes.
        let cancel = async move {
            pids_of(&pids).await;
        };
        let end = run_turn(&command, &bee(), &todo(""), limits, cancel).await.unwrap();
        assert_eq!(end, TurnEnd::Cancelled);
        none_running(&pids_of(dir.path()).await).await;
        assert!(tail.text().0.contains("before-cancel"), "{:?}", tail.text());
    }

    #[tokio::test]
    async fn a_dropped_turn_leaves_no_process_behind() {
        let dir = tempfile::tempdir().unwrap();
        let command = lingering(dir.path(), "");
        let agent = bee();
        let todo = todo("");
        let feed = Feed::disabled();
        let turn = run_turn(&command, &agent, &todo, limits(LONG, &feed), pending());
        let pids = tokio::select! {
            end = turn => panic!("the turn ended by itself: {end:?}"),
            pids = pids_of(dir.path()) => pids,
        };
        none_running(&pids).await;
    }

    #[tokio::test]
    async fn what_a_finished_turn_left_running_is_ended_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let command = format!("sleep 1000 & echo $! > {}; exit 0", pids.display());
        let end = run_turn(&command, &bee(), &todo(""), limits(LONG, &Feed::disabled()), pending()).await.unwrap();
        assert!(matches!(end, TurnEnd::Exited(status) if status.success()), "{end:?}");
        let background = Pid::from_raw(std::fs::read_to_string(pids).unwrap().trim().parse().unwrap());
        none_running(&[background]).await;
    }
}
