//! One link per identity, shared by every swarmctl using it. The control plane keeps one session
//! per device (a newer one replaces the older), so two swarmctl processes each holding a link
//! with one identity would keep replacing each other. Instead one process, the link agent, holds
//! the link and serves it on a unix socket beside the identity (`<identity>.sock`, mode 0600,
//! the same user only); every `swarmctl --via` joins it there, so a followed terminal and any
//! number of other commands run side by side on one identity.
//!
//! The agent hands each joiner every host presence and every message from the hosts (each
//! joiner keeps only the answers to its own requests: request ids are random), and sends the
//! joiners' messages on the link in the order they come. The swarmctl program starts the agent
//! as a process of its own (`swarmctl --via FILE link-agent`, hidden) that outlives the command
//! that started it and exits once no command has used it for [`IDLE_EXIT`]; a program using
//! [`crate::remote::RemoteApi`] as a library serves it from a task of its own instead, for as
//! long as that `RemoteApi` lives. Either way `<identity>.lock` (flock) is held while the agent
//! runs, so there is at most one per identity.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyperhive_control_link::Identity;
use hyperhive_control_link::connect::{self, Command, Event};
use hyperhive_control_proto::link::{Body, HostPresence};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

use super::error::CtlError;

/// A detached agent exits after this long with no command joined: long enough to serve a run of
/// commands from a script with one link, short enough not to linger.
pub const IDLE_EXIT: Duration = Duration::from_secs(10);

/// Lines queued for one joiner; one that falls this far behind is dropped (it sees its link
/// stop) rather than holding the others up.
const JOINER_QUEUE: usize = 4096;

/// What the agent tells each joiner, one JSON object a line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shared {
    /// The first line: the agent serves this joiner.
    Joined,
    /// Every host (`changed: false`) or the hosts that changed, as the link's presence says.
    Hosts { hosts: Vec<HostPresence>, changed: bool },
    /// Why the link cannot serve now (reconnecting, a host unreachable).
    Trouble { reason: String },
    /// A message from a host: its body as the host wrote it.
    Message { body: String },
    /// The link stopped for good (the device was forgotten, its proof refused).
    Stopped { reason: String },
}

/// What a joiner asks the agent to send, one JSON object a line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outgoing {
    /// The host's device id.
    pub to: String,
    /// The message body, JSON.
    pub body: String,
}

/// `<identity>` with `suffix` appended to its file name.
fn beside(identity: &Path, suffix: &str) -> PathBuf {
    let mut name = identity.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The agent's socket for `identity`.
pub fn socket_path(identity: &Path) -> PathBuf {
    beside(identity, ".sock")
}

/// Takes `<identity>.lock`, held for as long as an agent serves the identity; `None` when
/// another process holds it (an agent is running, or starting).
///
/// # Errors
/// The lock file cannot be opened.
pub fn lock(identity: &Path) -> Result<Option<nix::fcntl::Flock<std::fs::File>>, CtlError> {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::OpenOptionsExt;
    let path = beside(identity, ".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| CtlError::Remote(format!("--via: cannot open the lock file {}: {e}", path.display())))?;
    Ok(Flock::lock(file, FlockArg::LockExclusiveNonblock).ok())
}

/// Binds the agent's socket (mode 0600), replacing a stale one: the caller holds the lock, so no
/// other agent serves there.
///
/// # Errors
/// The socket cannot be made (a path too long for a unix socket, a directory not writable).
pub fn bind(identity: &Path) -> Result<UnixListener, CtlError> {
    use std::os::unix::fs::PermissionsExt;
    let path = socket_path(identity);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|e| {
        CtlError::Remote(format!(
            "--via: cannot make the shared link's socket {} ({e}); a unix socket's path must be under 108 \
             bytes and its directory writable: keep the identity in a shorter, writable place",
            path.display()
        ))
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| CtlError::Remote(format!("--via: cannot restrict {}: {e}", path.display())))?;
    Ok(listener)
}

/// The agent as a process of its own (`swarmctl --via FILE link-agent`): serves the identity's
/// link until no command has joined for [`IDLE_EXIT`] or the link stops for good. Another agent
/// already serving it is no failure: this one simply leaves.
///
/// # Errors
/// The identity cannot be read or the socket made.
pub async fn serve_detached(identity_path: &Path) -> Result<(), CtlError> {
    let Some(_lock) = lock(identity_path)? else {
        return Ok(());
    };
    let identity = Identity::load(identity_path).map_err(|e| CtlError::Remote(format!("--via: {e}")))?;
    let listener = bind(identity_path)?;
    serve(identity, listener, Some(IDLE_EXIT)).await;
    // Gone before the lock is let go: a command finding no socket starts a new agent.
    let _ = std::fs::remove_file(socket_path(identity_path));
    Ok(())
}

/// What the agent knows to tell a new joiner.
#[derive(Debug, Default)]
struct Known {
    hosts: Option<Vec<HostPresence>>,
    trouble: Option<String>,
    joiners: HashMap<u64, mpsc::Sender<String>>,
    /// The last joiner's number.
    last_joiner: u64,
}

impl Known {
    fn tell(&mut self, line: &Shared) {
        let text = serde_json::to_string(line).expect("shared lines serialize");
        self.joiners.retain(|_, queue| queue.try_send(text.clone()).is_ok());
    }
}

/// Folds a presence into the hosts known: the whole list, or the hosts that changed (a host no
/// longer paired leaves the list).
pub fn apply_hosts(known: &mut Option<Vec<HostPresence>>, hosts: Vec<HostPresence>, changed: bool) {
    if !changed {
        *known = Some(hosts);
        return;
    }
    let known = known.get_or_insert_with(Vec::new);
    for host in hosts {
        known.retain(|h| h.device_id != host.device_id);
        if host.paired {
            known.push(host);
        }
    }
}

/// Holds `identity`'s link and serves it to whoever joins on `listener` (the same user only).
/// Returns when the link stops for good, or after `idle` with nobody joined.
pub async fn serve(identity: Identity, listener: UnixListener, idle: Option<Duration>) {
    let (commands, command_rx) = mpsc::channel(256);
    let (event_tx, mut events) = mpsc::channel(1024);
    let known = Arc::new(Mutex::new(Known::default()));
    let (joined_tx, joined) = watch::channel(0usize);
    let link = connect::run(&identity, command_rx, event_tx);
    tokio::pin!(link);
    let me = nix::unistd::getuid().as_raw();
    let idle = async {
        match idle {
            Some(idle) => idle_for(joined.clone(), idle).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(idle);
    loop {
        tokio::select! {
            stopped = &mut link => {
                let reason = stopped.err().map_or_else(|| "the link ended".to_owned(), |e| e.to_string());
                let mut known = known.lock().expect("never poisoned");
                known.tell(&Shared::Stopped { reason });
                known.joiners.clear(); // each joiner's writer ends once its lines are out
                return;
            }
            Some(event) = events.recv() => on_event(&mut known.lock().expect("never poisoned"), event),
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                if stream.peer_cred().map(|c| c.uid()).ok() != Some(me) {
                    continue; // the socket is 0600; anyone else got in during its making
                }
                let (joiner, lines) = join(&known);
                joined_tx.send_modify(|n| *n += 1);
                let (commands, joined_tx) = (commands.clone(), joined_tx.clone());
                let known = known.clone();
                tokio::spawn(async move {
                    serve_joiner(stream, lines, commands).await;
                    known.lock().expect("never poisoned").joiners.remove(&joiner);
                    joined_tx.send_modify(|n| *n -= 1);
                });
            }
            () = &mut idle => return,
        }
    }
}

/// Registers a joiner and queues what it must know first.
fn join(known: &Mutex<Known>) -> (u64, mpsc::Receiver<String>) {
    let (queue, lines) = mpsc::channel(JOINER_QUEUE);
    let mut known = known.lock().expect("never poisoned");
    let mut first = vec![Shared::Joined];
    if let Some(hosts) = &known.hosts {
        first.push(Shared::Hosts { hosts: hosts.clone(), changed: false });
    }
    if let Some(reason) = &known.trouble {
        first.push(Shared::Trouble { reason: reason.clone() });
    }
    for line in first {
        let _ = queue.try_send(serde_json::to_string(&line).expect("shared lines serialize"));
    }
    known.last_joiner += 1;
    let joiner = known.last_joiner;
    known.joiners.insert(joiner, queue);
    (joiner, lines)
}

/// Resolves once nobody has been joined for `idle`.
async fn idle_for(mut joined: watch::Receiver<usize>, idle: Duration) {
    loop {
        if joined.wait_for(|n| *n == 0).await.is_err() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(idle) => return,
            changed = joined.wait_for(|n| *n > 0) => if changed.is_err() { return },
        }
    }
}

fn on_event(known: &mut Known, event: Event) {
    let line = match event {
        Event::Presence { hosts, changed } => {
            apply_hosts(&mut known.hosts, hosts.clone(), changed);
            Shared::Hosts { hosts, changed }
        }
        Event::Message { body, .. } => Shared::Message { body: body.get().to_owned() },
        Event::Reconnecting { reason, .. } => trouble(known, reason),
        Event::Undeliverable { reason, .. } => {
            trouble(known, format!("the controller cannot be reached now ({reason:?})"))
        }
        Event::Error { message } => trouble(known, message),
        Event::Connected { .. } | Event::Acked { .. } | Event::Reply { .. } | Event::RequestFailed { .. } => return,
    };
    known.tell(&line);
}

fn trouble(known: &mut Known, reason: String) -> Shared {
    known.trouble = Some(reason.clone());
    Shared::Trouble { reason }
}

/// Writes the agent's lines to one joiner and sends what it asks on the link, until either side
/// closes.
async fn serve_joiner(stream: UnixStream, mut lines: mpsc::Receiver<String>, commands: mpsc::Sender<Command>) {
    let (read, mut write) = stream.into_split();
    let writer = async {
        while let Some(line) = lines.recv().await {
            if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                return;
            }
        }
    };
    let reader = async {
        let mut asked = BufReader::new(read).lines();
        while let Ok(Some(line)) = asked.next_line().await {
            let Ok(outgoing) = serde_json::from_str::<Outgoing>(&line) else { return };
            let Ok(body) = Body::parse(&outgoing.body) else { return };
            if commands.send(Command::Send { to: outgoing.to, body }).await.is_err() {
                return;
            }
        }
    };
    // Either end closing ends the joiner: a swarmctl that exited, or the agent dropping it.
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
}
