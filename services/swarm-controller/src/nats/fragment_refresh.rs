//! Rewriting the server's configuration fragment after agents were created, once for a burst.
//!
//! The fragment preloads every account, so rewriting it costs as much as all accounts together
//! (about 0.13 s at 1,000 agents, 1 s at 10,000): done for each created agent, creating the next
//! one would grow slower with every agent. The running server does not need it (each account
//! is pushed to it); a server started with the fragment does. So a creation asks for a rewrite,
//! and the rewrite runs a while later, covering every creation asked for meanwhile: at least
//! [`REFRESH_DELAY`] later, and [`SPACING`] times as long as the last rewrite took, since a
//! rewrite holds the directory's lock, which creations wait for (so rewrites hold it a tenth of
//! the time at most, however many accounts there are).
//! A rewrite asked for and lost (the controller stopped before it ran) is caught up at the next
//! start, which rewrites the fragment only when an account file is newer than it
//! ([`FragmentRefresh::catch_up`]). Revocations still rewrite it at once (`hyperhive_nats_creds::revoke_agent`): a fragment
//! that lags a creation refuses the new agent, one that lagged a revocation would let a revoked
//! one in.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a rewrite waits at least for more creations to cover.
pub const REFRESH_DELAY: Duration = Duration::from_secs(1);
/// A rewrite waits this many times as long as the last one took.
const SPACING: u32 = 10;

/// Rewrites the fragment of one `nats init` directory when asked, spaced as the module says.
#[derive(Debug)]
pub struct FragmentRefresh {
    nats_dir: PathBuf,
    asked: Arc<Notify>,
    started: Once,
    /// Rewrites done, for tests and figures.
    written: Arc<AtomicU64>,
}

impl FragmentRefresh {
    /// For the directory `nats_dir`; nothing runs until the first [`FragmentRefresh::ask`].
    pub fn new(nats_dir: PathBuf) -> Self {
        Self { nats_dir, asked: Arc::new(Notify::new()), started: Once::new(), written: Arc::default() }
    }

    /// Asks for a rewrite: it starts after the spacing the module describes and reads the
    /// directory as it then stands. Must be called from within the Tokio runtime that is to run
    /// the rewrites.
    pub fn ask(&self) {
        self.started.call_once(|| {
            let (dir, asked, written) = (self.nats_dir.clone(), self.asked.clone(), self.written.clone());
            tokio::spawn(rewrite_when_asked(dir, asked, written));
        });
        // A permit is kept when the task is not waiting (sleeping or writing), so an ask during
        // a rewrite brings one more after it.
        self.asked.notify_one();
    }

    /// Asks for a rewrite when the fragment is behind the accounts (by file times: cheap at any
    /// size), so one asked for before a stop is not lost; a directory that cannot be read is
    /// rewritten too, which reports what is wrong.
    pub async fn catch_up(&self) {
        let dir = self.nats_dir.clone();
        let current = tokio::task::spawn_blocking(move || hyperhive_nats_creds::fragment_is_current(&dir)).await;
        if !matches!(current, Ok(Ok(true))) {
            self.ask();
        }
    }

    /// Rewrites done so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

async fn rewrite_when_asked(dir: PathBuf, asked: Arc<Notify>, written: Arc<AtomicU64>) {
    let mut last_took = Duration::ZERO;
    loop {
        asked.notified().await;
        tokio::time::sleep(REFRESH_DELAY.max(last_took * SPACING)).await;
        let from = dir.clone();
        let started = std::time::Instant::now();
        let result = tokio::task::spawn_blocking(move || hyperhive_nats_creds::write_fragment(&from)).await;
        last_took = started.elapsed();
        match result {
            Ok(Ok(())) => {
                written.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(dir = %dir.display(), took_ms = last_took.as_millis(), "rewrote the NATS configuration fragment");
            }
            // The accounts are in the directory and on the server; the next creation (or the
            // controller's next start) writes the fragment again.
            Ok(Err(e)) => {
                tracing::warn!(dir = %dir.display(), "could not rewrite the NATS configuration fragment: {e}")
            }
            Err(e) => tracing::warn!("the fragment rewrite failed: {e}"),
        }
    }
}
