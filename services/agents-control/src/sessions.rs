//! Where every device is connected: its session on this copy, or which peer copy holds it
//! (as the peers told us over `/v1/peer`), plus the queue of each peer link.
//!
//! Everything sits under one lock and every operation only queues (never awaits), so the
//! order in which frames are queued to a peer is the order of the changes they describe: a
//! peer that gets `sessions` at link-up and then `session_opened`/`session_closed` always ends
//! with the truth. Each socket task owns the receiving end of its queue.
//!
//! A device has at most one live session in the whole control plane: the one with the
//! greatest session number (milliseconds since the epoch at authentication, bumped above any
//! session of that device known here). Each copy closes its own session of a device as soon
//! as it hears of a greater one, so a device that reconnected elsewhere while an old session
//! lingers keeps only the newest.

use crate::registry::Registry;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{
    CloseCode, HostPresence, LinkFrame, PeerFrame, SESSIONS_PER_FRAME, SessionInfo, UndeliverableReason,
};
use std::collections::HashMap;
use std::sync::Mutex;
use time::OffsetDateTime;
use tokio::sync::mpsc;

/// Frames queued for one session before it counts as too slow: a relayed message to a full
/// queue is reported undeliverable (the sender keeps it and resends), so one stalled device
/// cannot make the copy buffer without bound.
pub const SESSION_QUEUE: usize = 256;

/// Frames queued for one peer link: it carries many devices' traffic, so it is deeper; a full
/// one is reported undeliverable like a full session queue.
pub const PEER_QUEUE: usize = 8192;

/// What a socket task (device or peer) is told to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing<F> {
    Frame(F),
    Close(CloseCode, String),
}

#[derive(Debug)]
struct Local {
    kind: DeviceKind,
    name: String,
    session: u64,
    queue: mpsc::Sender<Outgoing<LinkFrame>>,
}

#[derive(Debug)]
struct Remote {
    copy: String,
    kind: DeviceKind,
    name: String,
    session: u64,
}

#[derive(Debug)]
struct PeerLink {
    link: u64,
    queue: mpsc::Sender<Outgoing<PeerFrame>>,
    /// When the link last received anything (a frame, a ping, a pong), by the copy's clock.
    heard: OffsetDateTime,
}

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotQueued {
    /// No session of that device here or on a linked peer.
    Offline,
    /// The queue is full (a stalled device or peer).
    Full,
}

/// Which way a relayed frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Local,
    Peer,
}

fn try_queue<F>(queue: &mpsc::Sender<Outgoing<F>>, frame: F) -> Result<(), NotQueued> {
    queue.try_send(Outgoing::Frame(frame)).map_err(|error| match error {
        mpsc::error::TrySendError::Full(_) => NotQueued::Full,
        mpsc::error::TrySendError::Closed(_) => NotQueued::Offline,
    })
}

/// Tells a socket task to close. A full queue (its other side reads slowly, or not at all) must
/// not lose the close: a replaced or revoked session would go on serving its device. The close
/// then waits for room behind the queued frames, on its own task; it ends when the socket task
/// takes it or ends (a side that stopped reading is dropped after [`crate::wire::WRITE_TIMEOUT`]).
fn tell_close<F: Send + 'static>(queue: &mpsc::Sender<Outgoing<F>>, code: CloseCode, reason: &str) {
    let close = Outgoing::Close(code, reason.to_owned());
    if let Err(mpsc::error::TrySendError::Full(close)) = queue.try_send(close)
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let queue = queue.clone();
        runtime.spawn(async move { queue.send(close).await });
    }
}

#[derive(Debug, Default)]
struct State {
    local: HashMap<String, Local>,
    remote: HashMap<String, Remote>,
    peers: HashMap<String, PeerLink>,
    last_session: u64,
    last_link: u64,
    /// Set on shutdown: new sessions and peer links are closed at once.
    closing: bool,
}

impl State {
    fn is_online(&self, device_id: &str) -> bool {
        self.local.contains_key(device_id) || self.remote.contains_key(device_id)
    }

    fn broadcast(&self, frame: &PeerFrame) {
        for peer in self.peers.values() {
            if try_queue(&peer.queue, frame.clone()).is_err() {
                tracing::warn!("a peer link's queue is full; a change of sessions was not told");
            }
        }
    }

    fn tell_clients(&self, host: HostPresence) {
        for session in self.local.values().filter(|s| s.kind == DeviceKind::Client) {
            let _ = try_queue(&session.queue, LinkFrame::PresenceChanged { host: host.clone() });
        }
    }

    /// Tells clients a host's state when it changed from `was_online`.
    fn host_changed(&self, device_id: &str, name: &str, was_online: bool) {
        let online = self.is_online(device_id);
        if online != was_online {
            self.tell_clients(host_presence(device_id, name, true, online));
        }
    }

    /// Ends the device's session here: tells its task to close with `code` and tells the
    /// peers it is gone (so none keeps routing to, or showing online, a session that ended).
    fn end_local(&mut self, device_id: &str, code: CloseCode, reason: &str) -> Option<Local> {
        let ended = self.local.remove(device_id)?;
        // The task may be gone already; then there is nothing to close.
        tell_close(&ended.queue, code, reason);
        self.broadcast(&PeerFrame::SessionClosed { device_id: device_id.to_owned(), session: ended.session });
        Some(ended)
    }

    /// A forgotten device: its session here is closed with [`CloseCode::Revoked`], where a
    /// peer holds it is dropped (that peer closes it itself), and clients hear the host is gone.
    /// `host_name` names a host the registry held as paired: its clients hear it is gone even
    /// when its session had already ended (its copy closed it before this copy heard why).
    fn end_forgotten(&mut self, device_id: &str, host_name: Option<&str>) {
        let remote = self.remote.remove(device_id).map(|r| (r.kind, r.name));
        let local =
            self.end_local(device_id, CloseCode::Revoked, "this device was forgotten").map(|l| (l.kind, l.name));
        if local.is_some() {
            tracing::info!(device = %device_id, "closed the session of a forgotten device");
        }
        let host = local.or(remote).filter(|(kind, _)| *kind == DeviceKind::Host).map(|(_, name)| name);
        if let Some(name) = host.or_else(|| host_name.map(str::to_owned)) {
            self.tell_clients(host_presence(device_id, &name, false, false));
        }
    }

    fn local_infos(&self) -> Vec<SessionInfo> {
        self.local
            .iter()
            .map(|(id, s)| SessionInfo {
                device_id: id.clone(),
                kind: s.kind,
                name: s.name.clone(),
                session: s.session,
            })
            .collect()
    }
}

#[derive(Debug, Default)]
pub struct Sessions {
    state: Mutex<State>,
}

fn host_presence(device_id: &str, name: &str, paired: bool, online: bool) -> HostPresence {
    HostPresence { device_id: device_id.to_owned(), name: name.to_owned(), paired, online }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("sessions lock")
    }

    /// Registers an authenticated session; an older session of the same device here is told
    /// to close with [`CloseCode::Replaced`], and the peers hear of it (and close theirs).
    /// Returns the session number and its queue's receiver.
    pub fn open(
        &self,
        device_id: &str,
        kind: DeviceKind,
        name: &str,
        now_ms: u64,
    ) -> (u64, mpsc::Receiver<Outgoing<LinkFrame>>) {
        let (queue, receiver) = mpsc::channel(SESSION_QUEUE);
        let mut state = self.lock();
        if state.closing {
            let _ = queue.try_send(Outgoing::Close(CloseCode::GoingAway, "this copy is shutting down".into()));
            return (0, receiver);
        }
        let known = state.remote.get(device_id).map_or(0, |r| r.session);
        let session = now_ms.max(state.last_session + 1).max(known + 1);
        state.last_session = session;
        let was_online = state.is_online(device_id);
        state.remote.remove(device_id);
        let older = state.local.insert(device_id.to_owned(), Local { kind, name: name.to_owned(), session, queue });
        if let Some(older) = older {
            // The older task may be gone already; then there is nothing to close.
            tell_close(&older.queue, CloseCode::Replaced, "a newer session connected");
        }
        state.broadcast(&PeerFrame::SessionOpened {
            session: SessionInfo { device_id: device_id.to_owned(), kind, name: name.to_owned(), session },
        });
        if kind == DeviceKind::Host {
            state.host_changed(device_id, name, was_online);
        }
        (session, receiver)
    }

    /// Removes the session if it is still the device's current one (a replaced session's end
    /// must not take its successor offline).
    pub fn close(&self, device_id: &str, session: u64) {
        let mut state = self.lock();
        if state.local.get(device_id).is_none_or(|current| current.session != session) {
            return;
        }
        let removed = state.end_local(device_id, CloseCode::Normal, "the session ended").expect("checked above");
        if removed.kind == DeviceKind::Host {
            state.host_changed(device_id, &removed.name, true);
        }
    }

    /// Relays `frame` to the device: to its session here, or one hop to the peer holding it.
    pub fn send(&self, device_id: &str, frame: LinkFrame) -> Result<Route, NotQueued> {
        let state = self.lock();
        if let Some(local) = state.local.get(device_id) {
            return try_queue(&local.queue, frame).map(|()| Route::Local);
        }
        let remote = state.remote.get(device_id).ok_or(NotQueued::Offline)?;
        let peer = state.peers.get(&remote.copy).ok_or(NotQueued::Offline)?;
        try_queue(&peer.queue, PeerFrame::Forward { to: device_id.to_owned(), frame: Box::new(frame) })
            .map(|()| Route::Peer)
    }

    /// Queues `frames` for the device only while `session` is still its current session here
    /// (the answer to a request must not reach a newer session that did not ask), all or none:
    /// a reply cut into pages never arrives with pages missing.
    pub fn send_to_session(&self, device_id: &str, session: u64, frames: Vec<LinkFrame>) -> Result<(), NotQueued> {
        let state = self.lock();
        let local = state.local.get(device_id).filter(|s| s.session == session).ok_or(NotQueued::Offline)?;
        // Everything that queues holds the lock, so the room seen here only grows meanwhile.
        if local.queue.capacity() < frames.len() {
            return Err(NotQueued::Full);
        }
        frames.into_iter().try_for_each(|frame| try_queue(&local.queue, frame))
    }

    /// Whether the device is connected here or, as the peers say, to another copy.
    pub fn is_online(&self, device_id: &str) -> bool {
        self.lock().is_online(device_id)
    }

    /// The kind of a device connected anywhere (for a device that paired after this copy's
    /// last registry refresh but is already connected to a peer).
    pub fn kind_of(&self, device_id: &str) -> Option<DeviceKind> {
        let state = self.lock();
        state.local.get(device_id).map(|l| l.kind).or_else(|| state.remote.get(device_id).map(|r| r.kind))
    }

    /// Every paired host with its online state, for a client's `presence` frame: the hosts
    /// in the registry, and hosts connected to a peer that paired since its last refresh.
    pub fn presence(&self, registry: &Registry) -> Vec<HostPresence> {
        let hosts = registry.active_of_kind(DeviceKind::Host);
        let state = self.lock();
        let mut presence: Vec<HostPresence> =
            hosts.iter().map(|host| host_presence(&host.id, &host.name, true, state.is_online(&host.id))).collect();
        let listed: std::collections::HashSet<&str> = hosts.iter().map(|h| h.id.as_str()).collect();
        let local = state.local.iter().map(|(id, s)| (id, s.kind, &s.name));
        let remote = state.remote.iter().map(|(id, r)| (id, r.kind, &r.name));
        for (id, _, name) in
            local.chain(remote).filter(|(id, kind, _)| *kind == DeviceKind::Host && !listed.contains(id.as_str()))
        {
            presence.push(host_presence(id, name, true, true));
        }
        presence
    }

    /// A host just paired (here or on a peer): clients hear of it at once, offline until it
    /// connects (a host already connected somewhere was heard of when it connected).
    pub fn host_paired(&self, device_id: &str, name: &str) {
        let state = self.lock();
        if !state.is_online(device_id) {
            state.tell_clients(host_presence(device_id, name, true, false));
        }
    }

    /// Closes the sessions of devices the registry no longer holds as paired (forgotten, or
    /// their record gone) with [`CloseCode::Revoked`]; returns how many were closed.
    /// (Sessions on peers are theirs to close: each copy runs this after its own refresh.)
    pub fn close_forgotten(&self, registry: &Registry) -> usize {
        let mut state = self.lock();
        let gone: Vec<String> = state.local.keys().filter(|id| registry.active_kind(id).is_none()).cloned().collect();
        for id in &gone {
            state.end_forgotten(id, None);
        }
        gone.len()
    }

    /// A device was forgotten: its session here is closed with [`CloseCode::Revoked`] at once
    /// and where a peer holds it is forgotten (that peer closes it on its `revoked`).
    /// `host_name`: the device was a paired host, so clients hear it is gone in any case.
    pub fn revoke(&self, device_id: &str, host_name: Option<&str>) {
        self.lock().end_forgotten(device_id, host_name);
    }

    /// Tells every linked peer.
    pub fn broadcast(&self, frame: &PeerFrame) {
        self.lock().broadcast(frame);
    }

    /// Queues `ping` number `t` to each of `peers` that is linked, behind every frame already
    /// queued to it; returns how many were queued.
    pub fn ping_peers(&self, peers: &[String], t: u64) -> usize {
        let state = self.lock();
        peers
            .iter()
            .filter_map(|copy| state.peers.get(copy))
            .filter(|peer| try_queue(&peer.queue, PeerFrame::Ping { t }).is_ok())
            .count()
    }

    /// Registers a link to the peer `copy`, up (its handshake heard) at `at` (replacing an older
    /// link to it), and queues the `sessions` frame that starts it. Returns the link number and
    /// its queue's receiver.
    pub fn attach_peer(&self, copy: &str, at: OffsetDateTime) -> (u64, mpsc::Receiver<Outgoing<PeerFrame>>) {
        let (queue, receiver) = mpsc::channel(PEER_QUEUE);
        let mut state = self.lock();
        if state.closing {
            let _ = queue.try_send(Outgoing::Close(CloseCode::GoingAway, "this copy is shutting down".into()));
            return (0, receiver);
        }
        state.last_link += 1;
        let link = state.last_link;
        for chunk in state.local_infos().chunks(SESSIONS_PER_FRAME) {
            let _ = try_queue(&queue, PeerFrame::Sessions { sessions: chunk.to_vec() });
        }
        if let Some(older) = state.peers.insert(copy.to_owned(), PeerLink { link, queue, heard: at }) {
            tell_close(&older.queue, CloseCode::Replaced, "a newer link to this copy");
        }
        (link, receiver)
    }

    /// The copies this one has a link up with, and when each link last received anything: a
    /// link proves its copy alive only while it hears from it ([`crate::peers::LINK_QUIET_AFTER`]).
    pub fn linked_peers(&self) -> HashMap<String, OffsetDateTime> {
        self.lock().peers.iter().map(|(copy, peer)| (copy.clone(), peer.heard)).collect()
    }

    /// The link `link` to the peer `copy` received something at `at`.
    pub fn peer_heard(&self, copy: &str, link: u64, at: OffsetDateTime) {
        if let Some(peer) = self.lock().peers.get_mut(copy).filter(|peer| peer.link == link) {
            peer.heard = peer.heard.max(at);
        }
    }

    /// Ends the peer link if it is still the current one: the devices it held are offline
    /// until they reconnect (to some copy).
    pub fn detach_peer(&self, copy: &str, link: u64) {
        let mut state = self.lock();
        if state.peers.get(copy).is_none_or(|current| current.link != link) {
            return;
        }
        state.peers.remove(copy);
        let gone: Vec<String> = state.remote.iter().filter(|(_, r)| r.copy == copy).map(|(id, _)| id.clone()).collect();
        for id in gone {
            let removed = state.remote.remove(&id).expect("listed above");
            if removed.kind == DeviceKind::Host {
                state.host_changed(&id, &removed.name, true);
            }
        }
    }

    /// A peer says a device connected to it.
    pub fn peer_session_opened(&self, copy: &str, info: SessionInfo) {
        let mut state = self.lock();
        let was_online = state.is_online(&info.device_id);
        if let Some(local) = state.local.get(&info.device_id) {
            if local.session > info.session {
                return; // ours is newer: the peer closes its own when it hears of ours
            }
            state.end_local(&info.device_id, CloseCode::Replaced, "a newer session connected to another copy");
        }
        if state.remote.get(&info.device_id).is_some_and(|r| r.session > info.session) {
            return;
        }
        let SessionInfo { device_id, kind, name, session } = info;
        state.remote.insert(device_id.clone(), Remote { copy: copy.to_owned(), kind, name: name.clone(), session });
        if kind == DeviceKind::Host {
            state.host_changed(&device_id, &name, was_online);
        }
    }

    /// A peer says a device's session on it ended.
    pub fn peer_session_closed(&self, copy: &str, device_id: &str, session: u64) {
        let mut state = self.lock();
        if state.remote.get(device_id).is_none_or(|r| r.copy != copy || r.session != session) {
            return;
        }
        let removed = state.remote.remove(device_id).expect("checked above");
        if removed.kind == DeviceKind::Host {
            state.host_changed(device_id, &removed.name, true);
        }
    }

    /// A frame a peer forwarded for a device here (never forwarded again). A message that
    /// finds no session is answered with `undeliverable` for its sender, back over the link.
    pub fn deliver_forwarded(&self, to: &str, frame: LinkFrame) -> Option<PeerFrame> {
        let state = self.lock();
        let queued =
            state.local.get(to).map_or(Err(NotQueued::Offline), |local| try_queue(&local.queue, frame.clone()));
        match (queued, frame) {
            (Ok(()), _) => None,
            (Err(_), LinkFrame::Message { from, epoch, seq, .. }) => {
                let reason = UndeliverableReason::Offline;
                let frame = LinkFrame::Undeliverable { to: to.to_owned(), epoch, seq, reason };
                Some(PeerFrame::Forward { to: from, frame: Box::new(frame) })
            }
            // A lost ack or report costs only a resend, which the receiver drops.
            (Err(_), _) => None,
        }
    }

    /// Shutdown: closes every session and peer link with `code` and refuses new ones.
    pub fn close_all(&self, code: CloseCode, reason: &str) {
        let mut state = self.lock();
        state.closing = true;
        for session in state.local.values() {
            tell_close(&session.queue, code, reason);
        }
        for peer in state.peers.values() {
            tell_close(&peer.queue, code, reason);
        }
    }

    /// Sessions here by kind, peer links, and how many devices the peers hold.
    pub fn counts(&self) -> Counts {
        let state = self.lock();
        let clients = state.local.values().filter(|s| s.kind == DeviceKind::Client).count();
        Counts {
            clients,
            hosts: state.local.len() - clients,
            peers: state.peers.len(),
            remote_devices: state.remote.len(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub clients: usize,
    pub hosts: usize,
    pub peers: usize,
    pub remote_devices: usize,
}

impl Counts {
    /// No device session and no peer link here.
    pub fn is_empty(&self) -> bool {
        self.clients + self.hosts + self.peers == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next<F>(receiver: &mut mpsc::Receiver<Outgoing<F>>) -> Option<Outgoing<F>> {
        receiver.try_recv().ok()
    }

    fn info(device_id: &str, kind: DeviceKind, session: u64) -> SessionInfo {
        let name = if kind == DeviceKind::Host { "box" } else { "phone" };
        SessionInfo { device_id: device_id.into(), kind, name: name.into(), session }
    }

    #[test]
    fn a_newer_session_replaces_the_older_and_the_older_end_keeps_it() {
        let sessions = Sessions::default();
        let (first, mut first_rx) = sessions.open("h1", DeviceKind::Host, "box", 5);
        let (second, _second_rx) = sessions.open("h1", DeviceKind::Host, "box", 5);
        assert!(second > first);
        assert!(matches!(next(&mut first_rx), Some(Outgoing::Close(CloseCode::Replaced, _))));
        sessions.close("h1", first);
        assert!(sessions.is_online("h1"), "the replaced session's end must not remove the newer one");
        sessions.close("h1", second);
        assert!(!sessions.is_online("h1"));
    }

    #[test]
    fn clients_hear_hosts_come_and_go() {
        let sessions = Sessions::default();
        let (_, mut client) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        let (host, _host_rx) = sessions.open("h1", DeviceKind::Host, "box", 2);
        let online = host_presence("h1", "box", true, true);
        assert_eq!(next(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: online })));
        sessions.close("h1", host);
        let offline = host_presence("h1", "box", true, false);
        assert_eq!(next(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: offline })));
        assert_eq!(sessions.send("h1", LinkFrame::Ping { t: 1 }), Err(NotQueued::Offline));
    }

    #[test]
    fn a_full_queue_is_reported_not_buffered() {
        let sessions = Sessions::default();
        let (_, _rx) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        for t in 0..SESSION_QUEUE as u64 {
            sessions.send("c1", LinkFrame::Ping { t }).unwrap();
        }
        assert_eq!(sessions.send("c1", LinkFrame::Ping { t: 0 }), Err(NotQueued::Full));
    }

    #[test]
    fn a_peer_link_starts_with_every_session_and_then_hears_each_change() {
        let sessions = Sessions::default();
        let (first, _c1) = sessions.open("c1", DeviceKind::Client, "phone", 10);
        let (_, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let Some(Outgoing::Frame(PeerFrame::Sessions { sessions: listed })) = next(&mut peer) else {
            panic!("the link must start with sessions")
        };
        assert_eq!(listed, [info("c1", DeviceKind::Client, first)]);
        let (host, _h1) = sessions.open("h1", DeviceKind::Host, "box", 11);
        assert_eq!(
            next(&mut peer),
            Some(Outgoing::Frame(PeerFrame::SessionOpened { session: info("h1", DeviceKind::Host, host) }))
        );
        sessions.close("h1", host);
        let closed = PeerFrame::SessionClosed { device_id: "h1".into(), session: host };
        assert_eq!(next(&mut peer), Some(Outgoing::Frame(closed)));
    }

    #[test]
    fn frames_for_a_device_on_a_peer_go_one_hop_over_that_link() {
        let sessions = Sessions::default();
        let (link, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let _ = next(&mut peer);
        sessions.peer_session_opened("cp2", info("h1", DeviceKind::Host, 7));
        assert!(sessions.is_online("h1"));
        assert_eq!(sessions.kind_of("h1"), Some(DeviceKind::Host));
        assert_eq!(sessions.send("h1", LinkFrame::Ping { t: 3 }), Ok(Route::Peer));
        let forwarded = PeerFrame::Forward { to: "h1".into(), frame: Box::new(LinkFrame::Ping { t: 3 }) };
        assert_eq!(next(&mut peer), Some(Outgoing::Frame(forwarded)));
        sessions.detach_peer("cp2", link);
        assert!(!sessions.is_online("h1"), "a dead link takes its devices offline");
        assert_eq!(sessions.send("h1", LinkFrame::Ping { t: 4 }), Err(NotQueued::Offline));
    }

    #[test]
    fn only_the_newest_session_of_a_device_survives_across_copies() {
        let sessions = Sessions::default();
        let (_, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let _ = next(&mut peer);
        let (mine, mut local) = sessions.open("c1", DeviceKind::Client, "phone", 100);
        // An older session elsewhere (a lingering one) does not displace ours...
        sessions.peer_session_opened("cp2", info("c1", DeviceKind::Client, mine - 1));
        assert_eq!(sessions.send("c1", LinkFrame::Ping { t: 1 }), Ok(Route::Local));
        let _ = next(&mut local);
        // ...a newer one closes ours and takes the traffic.
        sessions.peer_session_opened("cp2", info("c1", DeviceKind::Client, mine + 1));
        assert!(matches!(next(&mut local), Some(Outgoing::Close(CloseCode::Replaced, _))));
        assert_eq!(sessions.send("c1", LinkFrame::Ping { t: 2 }), Ok(Route::Peer));
        // A session opened here later is numbered above every one known, so it wins everywhere.
        let (again, _) = sessions.open("c1", DeviceKind::Client, "phone", 50);
        assert!(again > mine + 1);
    }

    #[test]
    fn a_forwarded_message_that_finds_nobody_is_reported_to_its_sender() {
        let sessions = Sessions::default();
        let message = LinkFrame::Message {
            from: "c1".into(),
            from_role: None,
            epoch: 9,
            seq: 4,
            first_unacked: 1,
            body: serde_json::json!("hi").into(),
        };
        let Some(PeerFrame::Forward { to, frame }) = sessions.deliver_forwarded("h1", message) else {
            panic!("an undeliverable message must be reported")
        };
        assert_eq!(to, "c1");
        assert_eq!(
            *frame,
            LinkFrame::Undeliverable { to: "h1".into(), epoch: 9, seq: 4, reason: UndeliverableReason::Offline }
        );
        assert_eq!(sessions.deliver_forwarded("h1", LinkFrame::Acked { from: "c1".into(), epoch: 9, seq: 4 }), None);
    }

    #[test]
    fn a_revoked_device_is_closed_here_and_forgotten_where_a_peer_holds_it() {
        let sessions = Sessions::default();
        let (_, mut client) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        let (_, mut host) = sessions.open("h1", DeviceKind::Host, "box", 2);
        let _ = next(&mut client);
        let (_, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let _ = next(&mut peer);
        sessions.peer_session_opened("cp2", info("h2", DeviceKind::Host, 3));
        let _ = next(&mut client);
        sessions.revoke("h1", None);
        assert!(matches!(next(&mut host), Some(Outgoing::Close(CloseCode::Revoked, _))));
        let forgotten = host_presence("h1", "box", false, false);
        assert_eq!(next(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: forgotten })));
        sessions.revoke("h2", None);
        assert!(!sessions.is_online("h2"));
        let forgotten = host_presence("h2", "box", false, false);
        assert_eq!(next(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: forgotten })));
        // A paired host whose session ended before the forget reached this copy: its clients
        // still hear it is gone for good, not just offline.
        sessions.revoke("h3", Some("spare"));
        let forgotten = host_presence("h3", "spare", false, false);
        assert_eq!(next(&mut client), Some(Outgoing::Frame(LinkFrame::PresenceChanged { host: forgotten })));
        sessions.revoke("c9", None);
        assert_eq!(next(&mut client), None, "a device that was no host here is not told to clients");
    }

    #[test]
    fn a_session_ended_for_any_reason_is_told_to_the_peers() {
        let sessions = Sessions::default();
        let (_, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let _ = next(&mut peer);
        let mut opened = |id: &str, at: u64| {
            let (session, _rx) = sessions.open(id, DeviceKind::Host, "box", at);
            assert!(matches!(next(&mut peer), Some(Outgoing::Frame(PeerFrame::SessionOpened { .. }))));
            session
        };
        let (forgotten, revoked, replaced) = (opened("h1", 1), opened("h2", 2), opened("h3", 3));
        let closed = |device_id: &str, session: u64| {
            Some(Outgoing::Frame(PeerFrame::SessionClosed { device_id: device_id.into(), session }))
        };
        // The registry no longer holds h1..h3 (a forget by the command line, seen at a refresh).
        let registry = Registry::default();
        sessions.revoke("h2", None);
        assert_eq!(next(&mut peer), closed("h2", revoked));
        sessions.peer_session_opened("cp2", info("h3", DeviceKind::Host, replaced + 1));
        assert_eq!(next(&mut peer), closed("h3", replaced));
        assert_eq!(sessions.close_forgotten(&registry), 1);
        assert_eq!(next(&mut peer), closed("h1", forgotten));
    }

    #[test]
    fn shutdown_closes_everything_and_refuses_newcomers() {
        let sessions = Sessions::default();
        let (_, mut device) = sessions.open("c1", DeviceKind::Client, "phone", 1);
        let (_, mut peer) = sessions.attach_peer("cp2", OffsetDateTime::UNIX_EPOCH);
        let _ = next(&mut peer);
        sessions.close_all(CloseCode::GoingAway, "bye");
        assert!(matches!(next(&mut device), Some(Outgoing::Close(CloseCode::GoingAway, _))));
        assert!(matches!(next(&mut peer), Some(Outgoing::Close(CloseCode::GoingAway, _))));
        let (_, mut late) = sessions.open("c2", DeviceKind::Client, "tablet", 2);
        assert!(matches!(next(&mut late), Some(Outgoing::Close(CloseCode::GoingAway, _))));
        assert!(!sessions.is_online("c2"));
    }
}
