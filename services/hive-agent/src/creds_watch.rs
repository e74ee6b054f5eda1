//! Follows the credential file. hive-c0re renews an agent's credential by writing the new one in
//! place of the old (atomically, by rename) well before the old one expires; the agent must move
//! to it without a restart, since a restart kills a running turn and its todo would run again.
//!
//! A changed file holding a valid, unexpired credential of this agent becomes the current one, and
//! the consumer moves the connection to it before its next fetch, when no todo is in flight (the
//! server would otherwise cut the connection when the old one expires). A changed file that is not such a credential is reported
//! once, and the connection and the credential it uses are kept.

use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};

use hyperhive_schedule::AgentName;
use tokio::time::MissedTickBehavior;
use tracing::{error, info};

use crate::connect::CurrentCredential;
use crate::credential::{Credential, digest, format_expiry, unix_now};

/// How often the file's metadata is looked at. A renewal comes a third of the credential's
/// lifetime before its expiry, so this only needs to be small against that; the look is one
/// `stat`, and the file is read only when the `stat` differs.
pub const POLL: Duration = Duration::from_millis(250);

/// The watcher of one agent's credential file.
#[derive(Debug)]
pub struct CredsWatch {
    pub(crate) path: PathBuf,
    pub(crate) agent: AgentName,
    /// Raised on each renewal; the consumer moves the connection to the new credential between
    /// two todos (see `consumer`).
    pub(crate) renewals: tokio::sync::watch::Sender<u64>,
    pub(crate) current: CurrentCredential,
}

/// What the file looked like last time: a new inode, size or mtime means "read it again", and
/// only a new digest of its bytes means it changed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stat {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl CredsWatch {
    /// Polls until the task is aborted.
    pub async fn run(self) {
        // `None` while the file cannot be read.
        let mut seen_digest = Some(self.current.lock().unwrap_or_else(PoisonError::into_inner).digest());
        let mut seen_stat = None;
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            poll.tick().await;
            let stat = match tokio::fs::metadata(&self.path).await {
                Ok(meta) => {
                    use std::os::unix::fs::MetadataExt;
                    Some(Stat { inode: meta.ino(), len: meta.len(), modified: meta.modified().ok() })
                }
                Err(_) => None,
            };
            if stat.is_some() && stat == seen_stat {
                continue;
            }
            seen_stat = stat;
            let bytes = match tokio::fs::read(&self.path).await {
                Ok(bytes) => bytes,
                Err(e) => {
                    // Reported once, until the file can be read again.
                    if seen_digest.take().is_some() {
                        error!(
                            "cannot read the credential file {}: {e}; keeping the current credential (it \
                             expires at {})",
                            self.path.display(),
                            self.current_expiry()
                        );
                    }
                    continue;
                }
            };
            let new_digest = Some(digest(&bytes));
            if new_digest == seen_digest {
                continue;
            }
            seen_digest = new_digest;
            self.changed(&bytes).await;
        }
    }

    async fn changed(&self, bytes: &[u8]) {
        let parsed = std::str::from_utf8(bytes)
            .map_err(|_| "it is not text".to_owned())
            .and_then(|text| Credential::parse(&self.path, text, &self.agent, unix_now()).map_err(|e| e.to_string()));
        let renewed = match parsed {
            Ok(renewed) => renewed,
            Err(e) => {
                error!(
                    "ignoring the rewritten credential file {}: {e}; keeping the current credential (it \
                     expires at {})",
                    self.path.display(),
                    self.current_expiry()
                );
                return;
            }
        };
        let same = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            let same = current.jwt() == renewed.jwt();
            *current = renewed.clone();
            same
        };
        if same {
            return;
        }
        info!("credential renewed, expires at {}", format_expiry(renewed.expires_at()));
        // The consumer moves the connection between two todos. A connection that is down is
        // already reconnecting, and each of its attempts reads the file afresh.
        self.renewals.send_modify(|n| *n += 1);
    }

    fn current_expiry(&self) -> String {
        format_expiry(self.current.lock().unwrap_or_else(PoisonError::into_inner).expires_at())
    }
}
