//! Whether processes are still running, read from `/proc`, so a test can wait for everything a
//! child started to be gone. A zombie counts as gone: it runs nothing and only waits for its
//! parent (often an init that is slow to reap, in a container) to collect it.

use std::time::Duration;

use nix::unistd::Pid;

use crate::wait::wait_until;

/// Whether `pid` is a running (not zombie) process.
pub fn is_running(pid: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `pid (comm) state ...`; comm may hold spaces and parentheses.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    state.is_some_and(|state| state != "Z")
}

/// Waits until none of `pids` is running.
///
/// # Errors
/// When some still run at the deadline; the error lists them.
pub async fn wait_until_none_running(pids: &[Pid], timeout: Duration) -> anyhow::Result<()> {
    let running = || pids.iter().copied().filter(|&pid| is_running(pid)).collect::<Vec<_>>();
    let what = format!("processes {pids:?} to end");
    let outcome = wait_until(&what, timeout, || async { running().is_empty().then_some(()) }).await;
    outcome.map_err(|e| e.context(format!("still running: {:?}", running())))
}
