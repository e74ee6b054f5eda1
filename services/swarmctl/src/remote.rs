//! `swarmctl --via IDENTITY`: the API through the control plane. swarmctl joins the identity's
//! link as a paired client (one link per identity, shared by every swarmctl using it:
//! [`crate::shared_link`]), picks the controller among the hosts (`--host`, by id or name; the
//! only host when there is one), and sends each request as messages
//! ([`hyperhive_swarm_api::remote`]); the link resends what a dying copy lost, so a request sent
//! once is answered once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::http::StatusCode;
use hyperhive_control_link::Identity;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::HostPresence;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};

use hyperhive_swarm_api::remote::{self as frames, FromController, PIECE_BYTES, RequestFrame, ToController};

use super::error::CtlError;
use super::shared_link::{self, Outgoing, Shared};

/// How long swarmctl waits for the identity's shared link to take it (an agent starting, or one
/// leaving as this swarmctl arrived).
const JOIN_WITHIN: Duration = Duration::from_secs(5);
/// How often it knocks meanwhile.
const JOIN_EVERY: Duration = Duration::from_millis(50);

/// How long swarmctl waits for the control plane to let it in and list the hosts.
const CONNECT_WITHIN: Duration = Duration::from_secs(20);

/// How long swarmctl waits for the host it wants to be listed once the control plane let it in:
/// every copy hears of a host paired or connected through another at once over its peer links;
/// a copy whose peer link is down learns of it at its next refresh of the registry, a few
/// seconds later.
const HOST_LISTED_WITHIN: Duration = Duration::from_secs(10);

/// How long swarmctl waits for the chosen host to come online when it is listed offline: long
/// enough for a controller moving to another copy (its copy died), short enough that a host that
/// is down is said at once rather than after [`ANSWER_WITHIN`].
const ONLINE_WITHIN: Duration = Duration::from_secs(3);

/// How long a request waits for each message of its answer (a copy's death costs a few
/// seconds; a host that is offline never answers).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

type Pending = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<FromController>>>>;

/// What the link's events tell the requests.
#[derive(Debug, Default, Clone)]
struct LinkState {
    hosts: Option<Vec<HostPresence>>,
    /// Why the last connection failed, or why the link stopped for good.
    trouble: Option<String>,
    stopped: bool,
}

/// Where the agent serving an identity's shared link runs when none does yet.
#[derive(Debug, Clone)]
pub enum AgentHome {
    /// A process of its own, this program run as `PROGRAM --via FILE link-agent`: it outlives
    /// the command that started it, so other commands keep their link when that one ends.
    Process(std::path::PathBuf),
    /// A task of this process, for as long as the [`RemoteApi`] lives (a program using swarmctl
    /// as a library).
    InProcess,
}

impl AgentHome {
    /// [`AgentHome::Process`] when this program is swarmctl, else [`AgentHome::InProcess`].
    pub fn of_this_program() -> AgentHome {
        match std::env::current_exe() {
            Ok(exe) if exe.file_name().is_some_and(|name| name == "swarmctl") => AgentHome::Process(exe),
            _ => AgentHome::InProcess,
        }
    }
}

/// An agent served from this process; stopped when dropped.
#[derive(Debug)]
struct InProcessAgent {
    _lock: nix::fcntl::Flock<std::fs::File>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InProcessAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A link to the control plane, pointed at one host.
#[derive(Debug)]
pub struct RemoteApi {
    /// The agent, when this process serves it.
    _agent: Option<InProcessAgent>,
    commands: mpsc::Sender<Outgoing>,
    host: HostPresence,
    pending: Pending,
    state: watch::Receiver<LinkState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RemoteApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RemoteApi {
    /// Connects with the client identity at `path` and picks the host `host` (an id or a
    /// name), or the only host; the identity's shared link is served from this process when
    /// none serves it yet ([`AgentHome::InProcess`]).
    ///
    /// # Errors
    /// [`CtlError::Remote`] saying what failed: the identity, the control plane, the host.
    pub async fn connect(path: &Path, host: Option<&str>) -> Result<Self, CtlError> {
        Self::connect_from(path, host, &AgentHome::InProcess).await
    }

    /// [`RemoteApi::connect`], starting the shared link's agent in `home` when none serves it.
    ///
    /// # Errors
    /// As [`RemoteApi::connect`].
    pub async fn connect_from(path: &Path, host: Option<&str>, home: &AgentHome) -> Result<Self, CtlError> {
        let identity = Identity::load(path).map_err(|e| CtlError::Remote(format!("--via: {e}")))?;
        if identity.kind != DeviceKind::Client {
            return Err(CtlError::Remote(format!(
                "--via {} is a host's identity; swarmctl needs a client's: `agents-control device pair CODE \
                 --identity FILE` with a code from `agents-control code --client`",
                path.display()
            )));
        }
        let control = identity.control_url.clone();
        let (lines, writer, agent) = join(path, identity, home).await?;
        let (commands, command_rx) = mpsc::channel(256);
        let (state_tx, mut state) = watch::channel(LinkState::default());
        let pending: Pending = Arc::default();
        let task = tokio::spawn(follow(lines, writer, command_rx, state_tx, pending.clone()));
        let mut api = RemoteApi {
            _agent: agent,
            commands,
            host: HostPresence { device_id: String::new(), name: String::new(), paired: true, online: false },
            pending,
            state: state.clone(),
            task,
        };
        let listed =
            tokio::time::timeout(CONNECT_WITHIN, state.wait_for(|s| s.hosts.is_some() || s.stopped)).await.is_ok();
        let now = state.borrow().clone();
        if !listed || now.hosts.is_none() {
            let why = now.trouble.unwrap_or_else(|| "no answer".into());
            let verb = if now.stopped { "refused this client" } else { "could not be reached" };
            return Err(CtlError::Remote(format!("the control plane at {control} {verb}: {why}")));
        }
        let deadline = tokio::time::Instant::now() + HOST_LISTED_WITHIN;
        while !names_the_host(state.borrow().hosts.as_deref().unwrap_or_default(), host) {
            match tokio::time::timeout_at(deadline, state.changed()).await {
                Ok(Ok(())) => {}
                // The time is up, or the link stopped: `choose` says what is listed.
                Ok(Err(_)) | Err(_) => break,
            }
        }
        let hosts = state.borrow().hosts.clone().unwrap_or_default();
        api.host = choose(&hosts, host)?;
        let id = api.host.device_id.clone();
        let online = |s: &LinkState| s.stopped || s.hosts.iter().flatten().any(|h| h.device_id == id && h.online);
        if !online(&state.borrow()) && tokio::time::timeout(ONLINE_WITHIN, state.wait_for(online)).await.is_err() {
            return Err(CtlError::Remote(format!(
                "host {} ({id}) is offline: it is paired, but its swarm-controller has had no link to the control                  plane for {}s; check that it runs and that its control link is up (`control_link` in GET /healthz on                  its socket), then try again",
                api.host.name,
                ONLINE_WITHIN.as_secs()
            )));
        }
        Ok(api)
    }

    /// Sends `request` to the host; returns the answer's status and its body as it arrives.
    ///
    /// # Errors
    /// [`CtlError::Remote`] when the link stops or the host does not answer in time.
    pub async fn open(&self, request: Request<Full<Bytes>>) -> Result<(StatusCode, RemoteBody), CtlError> {
        let (parts, body) = request.into_parts();
        let content = body.collect().await.map_err(|e| CtlError::Protocol(e.to_string()))?.to_bytes();
        let id = frames::new_id();
        let headers: Vec<frames::Header> = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let header_bytes: usize = headers.iter().map(|(n, v)| n.len() + v.len() + 8).sum::<usize>() + path.len();
        let pieces = frames::pieces(&content, PIECE_BYTES.saturating_sub(header_bytes));
        let last = pieces.len() - 1;
        let (tx, rx) = mpsc::unbounded_channel();
        self.pending.lock().expect("never poisoned").insert(id.clone(), tx);
        let mut reader = RemoteBody {
            id: id.clone(),
            rx,
            commands: self.commands.clone(),
            host: self.host.clone(),
            pending: self.pending.clone(),
            state: self.state.clone(),
            first: None,
            ended: false,
        };
        for (index, piece) in pieces.into_iter().enumerate() {
            let (body, more) = (frames::encode_piece(piece), index < last);
            let frame = if index == 0 {
                ToController::Request(RequestFrame {
                    id: id.clone(),
                    method: parts.method.to_string(),
                    path: path.clone(),
                    headers: headers.clone(),
                    size: Some(content.len() as u64),
                    body,
                    more,
                })
            } else {
                ToController::Body { id: id.clone(), body, more }
            };
            self.send(&frame).await?;
        }
        match reader.message().await? {
            FromController::Response { status, body, more, .. } => {
                let status = StatusCode::from_u16(status)
                    .map_err(|_| CtlError::Protocol(format!("the controller answered status {status}")))?;
                reader.first = Some(Bytes::from(frames::decode_piece(&body).map_err(CtlError::Protocol)?));
                reader.ended = !more;
                Ok((status, reader))
            }
            other => Err(CtlError::Protocol(format!("the controller answered {other:?} before a response"))),
        }
    }

    async fn send(&self, frame: &ToController) -> Result<(), CtlError> {
        send_to(&self.commands, &self.host.device_id, frame).await
    }
}

async fn send_to(commands: &mpsc::Sender<Outgoing>, host: &str, frame: &ToController) -> Result<(), CtlError> {
    let body = serde_json::to_string(frame).expect("frames serialize");
    commands
        .send(Outgoing { to: host.to_owned(), body })
        .await
        .map_err(|_| CtlError::Remote("the link to the control plane stopped".into()))
}

/// Whether `hosts` holds the host `wanted` names (by id or name), or any host when none is named.
fn names_the_host(hosts: &[HostPresence], wanted: Option<&str>) -> bool {
    match wanted {
        Some(wanted) => hosts.iter().any(|h| h.device_id == wanted || h.name == wanted),
        None => !hosts.is_empty(),
    }
}

/// The host named `wanted` (an id, or a name only one host has), or the only host.
fn choose(hosts: &[HostPresence], wanted: Option<&str>) -> Result<HostPresence, CtlError> {
    let listed = || {
        let names: Vec<String> = hosts
            .iter()
            .map(|h| format!("{} ({}, {})", h.name, h.device_id, if h.online { "online" } else { "offline" }))
            .collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    };
    let found: Vec<&HostPresence> = match wanted {
        Some(wanted) => {
            let by_id: Vec<_> = hosts.iter().filter(|h| h.device_id == wanted).collect();
            if by_id.is_empty() { hosts.iter().filter(|h| h.name == wanted).collect() } else { by_id }
        }
        None => hosts.iter().collect(),
    };
    match (found.as_slice(), wanted) {
        ([host], _) => Ok((*host).clone()),
        ([], Some(wanted)) => {
            Err(CtlError::Remote(format!("no host {wanted:?} at the control plane; hosts: {}", listed())))
        }
        ([], None) => Err(CtlError::Remote(
            "the control plane has no hosts: pair the controller with `swarm-controller pair CODE`".into(),
        )),
        (_, Some(wanted)) => Err(CtlError::Remote(format!(
            "more than one host is called {wanted:?}; choose by id with --host: {}",
            listed()
        ))),
        (_, None) => Err(CtlError::Remote(format!("choose the controller with --host ID|NAME; hosts: {}", listed()))),
    }
}

/// An answer's body as its messages arrive.
#[derive(Debug)]
pub struct RemoteBody {
    id: String,
    rx: mpsc::UnboundedReceiver<FromController>,
    commands: mpsc::Sender<Outgoing>,
    host: HostPresence,
    pending: Pending,
    state: watch::Receiver<LinkState>,
    /// The piece the `response` message carried, handed out first.
    first: Option<Bytes>,
    ended: bool,
}

impl RemoteBody {
    /// The next message of this request's answer.
    async fn message(&mut self) -> Result<FromController, CtlError> {
        let mut state = self.state.clone();
        tokio::select! {
            frame = tokio::time::timeout(ANSWER_WITHIN, self.rx.recv()) => match frame {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => Err(self.trouble("the link to the control plane stopped")),
                Err(_) => {
                    let online = self.state.borrow().hosts.iter().flatten().any(|h| h.device_id == self.host.device_id && h.online);
                    let how = if online { "is online but did not answer" } else { "is offline" };
                    Err(CtlError::Remote(format!(
                        "no answer from the controller (host {} {}) within {}s: it {how}",
                        self.host.name, self.host.device_id, ANSWER_WITHIN.as_secs()
                    )))
                }
            },
            _ = state.wait_for(|s| s.stopped) => Err(self.trouble("the control plane closed the link")),
        }
    }

    fn trouble(&self, what: &str) -> CtlError {
        let why = self.state.borrow().trouble.clone().unwrap_or_default();
        CtlError::Remote(format!("{what}: {why}"))
    }

    /// The next piece of the body; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<Bytes, CtlError>> {
        if let Some(first) = self.first.take().filter(|f| !f.is_empty()) {
            return Some(Ok(first));
        }
        if self.ended {
            return None;
        }
        let frame = match self.message().await {
            Ok(frame) => frame,
            Err(e) => {
                self.ended = true;
                return Some(Err(e));
            }
        };
        match frame {
            FromController::Body { body, more, error, .. } => {
                self.ended = !more;
                if let Some(error) = error {
                    return Some(Err(CtlError::Remote(format!("the stream ended: {error}"))));
                }
                Some(frames::decode_piece(&body).map(Bytes::from).map_err(CtlError::Protocol))
            }
            FromController::Refused { error } => {
                self.ended = true;
                Some(Err(CtlError::Remote(format!("the controller refused the request: {error}"))))
            }
            FromController::Response { .. } => {
                self.ended = true;
                Some(Err(CtlError::Protocol("the controller answered one request twice".into())))
            }
        }
    }
}

impl Drop for RemoteBody {
    fn drop(&mut self) {
        self.pending.lock().expect("never poisoned").remove(&self.id);
        if !self.ended {
            // Stop the controller's side of a stream no one reads any more.
            let cancel = ToController::Cancel { id: self.id.clone() };
            let body = serde_json::to_string(&cancel).expect("frames serialize");
            let _ = self.commands.try_send(Outgoing { to: self.host.device_id.clone(), body });
        }
    }
}

/// Joins the identity's shared link: knocks on its agent's socket, starting the agent in `home`
/// when nobody answers, until the agent says it serves this swarmctl (an agent that was leaving
/// as this one knocked closes without a word, and a new one is started).
///
/// # Errors
/// No agent took this swarmctl within [`JOIN_WITHIN`].
async fn join(
    path: &Path,
    identity: Identity,
    home: &AgentHome,
) -> Result<(Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf, Option<InProcessAgent>), CtlError> {
    let socket = shared_link::socket_path(path);
    let deadline = tokio::time::Instant::now() + JOIN_WITHIN;
    let mut identity = Some(identity);
    let mut agent = None;
    let mut why: String;
    loop {
        match UnixStream::connect(&socket).await {
            // Whoever listens there hears every request: it must be this user's own agent (a
            // directory others may write to could hold someone else's socket by that name).
            Ok(stream) if stream.peer_cred().map(|c| c.uid()).ok() != Some(nix::unistd::getuid().as_raw()) => {
                return Err(CtlError::Remote(format!(
                    "--via: {} is served by another user; remove it, and keep the identity in a directory only \
                     you can write to",
                    socket.display()
                )));
            }
            Ok(stream) => {
                let (read, writer) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                match tokio::time::timeout_at(deadline, lines.next_line()).await {
                    Ok(Ok(Some(first))) if matches!(serde_json::from_str(&first), Ok(Shared::Joined)) => {
                        return Ok((lines, writer, agent));
                    }
                    _ => why = "the agent closed without taking this swarmctl".into(),
                }
            }
            Err(error) => why = error.to_string(),
        }
        if agent.is_none() && identity.is_some() {
            match home {
                AgentHome::Process(program) => {
                    identity = None; // started once; it takes the lock, or another agent has it
                    start_process(program, path)?;
                }
                AgentHome::InProcess => {
                    if let Some(lock) = shared_link::lock(path)? {
                        let listener = shared_link::bind(path)?;
                        let identity = identity.take().expect("checked above");
                        let task = tokio::spawn(shared_link::serve(identity, listener, None));
                        agent = Some(InProcessAgent { _lock: lock, task });
                    }
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CtlError::Remote(format!(
                "--via: the shared link of {} did not take this swarmctl within {}s ({why}); its agent is \
                 `swarmctl --via {} link-agent` (see docs/swarm/remote.md)",
                path.display(),
                JOIN_WITHIN.as_secs(),
                path.display()
            )));
        }
        tokio::time::sleep(JOIN_EVERY).await;
    }
}

/// Starts the agent as a process of its own, in its own process group (a Ctrl-C meant for this
/// command does not stop the link other commands use), its output nowhere.
fn start_process(program: &Path, identity: &Path) -> Result<(), CtlError> {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(program)
        .arg("--via")
        .arg(identity)
        .arg("link-agent")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| CtlError::Remote(format!("--via: cannot start the shared link's agent: {e}")))?;
    // Reaped if it ends while this command runs; it usually outlives it.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// Reads what the agent tells, into the link's state and the requests waiting; writes this
/// swarmctl's messages to it.
async fn follow(
    mut lines: Lines<BufReader<OwnedReadHalf>>,
    mut writer: OwnedWriteHalf,
    mut outgoing: mpsc::Receiver<Outgoing>,
    state: watch::Sender<LinkState>,
    pending: Pending,
) {
    let write = async {
        while let Some(message) = outgoing.recv().await {
            let line = serde_json::to_string(&message).expect("outgoing lines serialize") + "\n";
            if writer.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    };
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<Shared>(&line) {
                Ok(Shared::Hosts { hosts, changed }) => {
                    state.send_modify(|s| shared_link::apply_hosts(&mut s.hosts, hosts, changed));
                }
                Ok(Shared::Trouble { reason }) => state.send_modify(|s| s.trouble = Some(reason)),
                Ok(Shared::Message { body }) => route_message(&pending, &body),
                Ok(Shared::Stopped { reason }) => state.send_modify(|s| {
                    s.stopped = true;
                    s.trouble = Some(reason);
                }),
                Ok(Shared::Joined) | Err(_) => {}
            }
        }
    };
    tokio::select! {
        () = read => {}
        () = write => {}
    }
    state.send_modify(|s| {
        if !s.stopped {
            s.stopped = true;
            s.trouble = Some(s.trouble.take().map_or_else(
                || "the shared link's agent left".to_owned(),
                |why| format!("the shared link's agent left ({why})"),
            ));
        }
    });
}

fn route_message(pending: &Pending, body: &str) {
    let Ok(frame) = serde_json::from_str::<FromController>(body) else {
        return;
    };
    let pending = pending.lock().expect("never poisoned");
    match &frame {
        FromController::Response { id, .. } | FromController::Body { id, .. } => {
            if let Some(tx) = pending.get(id) {
                let _ = tx.send(frame);
            }
        }
        // Not tied to a request: every open one learns of it.
        FromController::Refused { .. } => {
            for tx in pending.values() {
                let _ = tx.send(frame.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, name: &str, online: bool) -> HostPresence {
        HostPresence { device_id: id.into(), name: name.into(), paired: true, online }
    }

    #[test]
    fn the_host_is_chosen_by_id_then_name_or_is_the_only_one() {
        let hosts = [host("d1", "swarm", true), host("d2", "laptop", false), host("d3", "laptop", true)];
        assert_eq!(choose(&hosts, Some("d2")).unwrap().device_id, "d2");
        assert_eq!(choose(&hosts, Some("swarm")).unwrap().device_id, "d1");
        let err = choose(&hosts, Some("laptop")).unwrap_err().to_string();
        assert!(err.contains("more than one") && err.contains("d2") && err.contains("d3"), "{err}");
        let err = choose(&hosts, Some("nope")).unwrap_err().to_string();
        assert!(err.contains("no host \"nope\"") && err.contains("swarm (d1, online)"), "{err}");
        let err = choose(&hosts, None).unwrap_err().to_string();
        assert!(err.contains("--host"), "{err}");
        assert_eq!(choose(&hosts[..1], None).unwrap().device_id, "d1");
        assert!(choose(&[], None).unwrap_err().to_string().contains("swarm-controller pair"));
        assert!(names_the_host(&hosts, Some("d2")) && names_the_host(&hosts, Some("swarm")));
        assert!(names_the_host(&hosts, None) && !names_the_host(&[], None));
        assert!(!names_the_host(&hosts, Some("nope")), "a host not listed is waited for, then refused");
    }
}
