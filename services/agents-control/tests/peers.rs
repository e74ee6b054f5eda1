//! Copies together: several copies served in process by `serve::run` on loopback
//! ports, sharing one `file://` store, find each other in the membership records and link over
//! `/v1/peer`. Devices on different copies exchange messages, a forget on one copy cuts the
//! device on another within a second, a device connected twice keeps only its newest session,
//! a copy without the control key is refused as a peer, a recheck asked of any copy cuts a
//! device forgotten in the store on every copy, and SIGTERM's order holds.
//! (The same with real processes, moto and Caddy is `three_copies.rs`.)

mod http_client;
mod link_client;

use agents_control::clock::SystemClock;
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::membership::Membership;
use agents_control::records;
use agents_control::serve::{self, ServeError};
use futures::{SinkExt, StreamExt};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{
    CloseCode, HostPresence, LinkFrame, PEER_PROTOCOL_VERSION, PeerFrame, PeerRole, PeerTranscript, SessionInfo,
    UndeliverableReason, peer_proof_message,
};
use hyperhive_object_store::Store;
use hyperhive_object_store::file::FileStore;
use hyperhive_testkit::{Toward, WsMitm, wait_until};
use link_client::{
    Device, Socket, connect_refused, next_close, next_close_within, next_frame, raw_send,
    relay_as_written_and_refuse_too_large, send, send_frame, try_connect,
};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;

const SEED: [u8; 32] = [11; 32];
const LINKED: Duration = Duration::from_secs(10);

struct Copy {
    control: Arc<Control>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Drop for Copy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    copies: Vec<Copy>,
}

async fn start_copy(store: Arc<dyn Store>, seed: [u8; 32]) -> Copy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    start_serving(store, seed, listener, Some(url)).await
}

/// A copy serving on `listener` whose membership record names `peer_url` (`None`: a copy the
/// others cannot reach, which dials them all).
async fn start_serving(
    store: Arc<dyn Store>,
    seed: [u8; 32],
    listener: tokio::net::TcpListener,
    peer_url: Option<String>,
) -> Copy {
    let addr = listener.local_addr().unwrap();
    let membership = Arc::new(Membership::new("test".into(), peer_url));
    let control = Arc::new(
        Control::new(store, ControlKey::from_seed(seed), Arc::new(SystemClock)).with_copy_name(membership.copy_id()),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(serve::run(control.clone(), membership, listener, shutdown, Duration::from_millis(300)));
    let ready = control.clone();
    wait_until("the copy to be ready", LINKED, || {
        let ready = ready.clone();
        async move { ready.readiness().ok() }
    })
    .await
    .unwrap();
    Copy { control, addr, stop: Some(stop), task }
}

/// `n` copies on one store, each linked to every other.
async fn cluster(n: usize) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
    let mut copies = Vec::new();
    for _ in 0..n {
        copies.push(start_copy(store.clone(), SEED).await);
    }
    let cluster = Cluster { _dir: dir, store, copies };
    cluster.wait_linked(n - 1).await;
    cluster
}

impl Cluster {
    async fn wait_linked(&self, peers: usize) {
        for copy in &self.copies {
            let control = copy.control.clone();
            wait_until("every copy linked to every other", LINKED, || {
                let control = control.clone();
                async move { (control.sessions.counts().peers == peers).then_some(()) }
            })
            .await
            .unwrap();
        }
    }

    async fn pair(&self, kind: DeviceKind, name: &str) -> Device {
        let key = ControlKey::from_seed(SEED);
        link_client::pair(self.store.as_ref(), &SystemClock, &key, kind, name).await
    }

    /// Connects `device` to copy `i`; the welcome must name that copy.
    async fn connect(&self, i: usize, device: &Device) -> Socket {
        let (socket, verdict) = try_connect(self.copies[i].addr, device, SEED).await;
        assert_eq!(verdict.unwrap(), self.copies[i].control.copy_name);
        socket
    }

    /// Waits until copy `i` hears that `device` is online somewhere.
    async fn wait_online(&self, i: usize, device: &Device) {
        let control = self.copies[i].control.clone();
        let id = device.id.clone();
        wait_until("a peer to tell of the device's session", LINKED, || {
            let (control, id) = (control.clone(), id.clone());
            async move { control.is_online(&id).then_some(()) }
        })
        .await
        .unwrap();
    }
}

fn message(from: &Device, seq: u64, body: serde_json::Value) -> LinkFrame {
    let from_role = link_client::role_of(from.kind);
    LinkFrame::Message { from: from.id.clone(), from_role, epoch: 9, seq, first_unacked: 1, body: body.into() }
}

#[tokio::test]
async fn a_host_and_a_client_on_different_copies_exchange_messages_both_ways() {
    let cluster = cluster(3).await;
    let host = cluster.pair(DeviceKind::Host, "box").await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut host_link = cluster.connect(0, &host).await;
    cluster.wait_online(2, &host).await;
    let mut client_link = cluster.connect(2, &client).await;
    // The client's presence comes from its own copy, which knows the host only from its peer.
    let LinkFrame::Presence { hosts } = next_frame(&mut client_link).await else { panic!("presence first") };
    assert_eq!(hosts, [HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: true }]);
    cluster.wait_online(0, &client).await;

    send(&mut client_link, &send_frame(&host.id, 1, json!({"prompt": "hi"}))).await;
    assert_eq!(next_frame(&mut host_link).await, message(&client, 1, json!({"prompt": "hi"})));
    send(&mut host_link, &LinkFrame::Ack { to: client.id.clone(), epoch: 9, seq: 1 }).await;
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::Acked { from: host.id.clone(), epoch: 9, seq: 1 });
    send(&mut host_link, &send_frame(&client.id, 1, json!("done"))).await;
    assert_eq!(next_frame(&mut client_link).await, message(&host, 1, json!("done")));
    send(&mut client_link, &LinkFrame::Ack { to: host.id.clone(), epoch: 9, seq: 1 }).await;
    assert_eq!(next_frame(&mut host_link).await, LinkFrame::Acked { from: client.id.clone(), epoch: 9, seq: 1 });
    let relayed_by_peer = |copy: &Copy| {
        copy.control
            .metrics
            .render_with(copy.control.sessions.counts())
            .contains("relayed_frames_total{path=\"peer\"} 2")
    };
    assert!(relayed_by_peer(&cluster.copies[0]) && relayed_by_peer(&cluster.copies[2]));

    // The host leaves: the client, on another copy, hears it.
    host_link.close(None).await.unwrap();
    let gone = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: false };
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::PresenceChanged { host: gone });
    send(&mut client_link, &send_frame(&host.id, 2, json!("anyone?"))).await;
    let offline =
        LinkFrame::Undeliverable { to: host.id.clone(), epoch: 9, seq: 2, reason: UndeliverableReason::Offline };
    assert_eq!(next_frame(&mut client_link).await, offline);
}

#[tokio::test]
async fn forgetting_on_one_copy_cuts_the_device_on_another_within_a_second() {
    let cluster = cluster(2).await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut link = cluster.connect(0, &client).await;
    let _presence = next_frame(&mut link).await;
    cluster.wait_online(1, &client).await;

    let started = Instant::now();
    agents_control::registry::forget(cluster.store.as_ref(), &SystemClock, &client.id).await.unwrap();
    cluster.copies[1].control.revoke(&client.id);
    let (code, reason) = next_close_within(&mut link, Duration::from_secs(1)).await;
    assert_eq!(code, CloseCode::Revoked.code(), "{reason}");
    assert!(started.elapsed() < Duration::from_secs(1), "cut after {:?}", started.elapsed());

    for copy in &cluster.copies {
        assert_eq!(connect_refused(copy.addr, &client).await.0, CloseCode::UnknownDevice.code());
    }
}

/// A forget written to the store alone, as `agents-control forget` writes it, then a recheck
/// asked of the one copy that holds neither device: the host is cut on its copy and the client
/// on the third copy hears it is gone, within a second, long before any refresh would. A
/// recheck of a paired device and one of a malformed id change nothing.
#[tokio::test]
async fn a_recheck_asked_of_one_copy_cuts_a_device_forgotten_in_the_store_on_every_copy() {
    let cluster = cluster(3).await;
    let host = cluster.pair(DeviceKind::Host, "box").await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut host_link = cluster.connect(0, &host).await;
    cluster.wait_online(2, &host).await;
    let mut client_link = cluster.connect(2, &client).await;
    let _presence = next_frame(&mut client_link).await;

    let (status, answer) =
        http_client::post_json(cluster.copies[1].addr, &format!("/v1/recheck/{}", host.id), vec![]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["paired"], true, "{answer}");
    let (status, answer) = http_client::post_json(cluster.copies[1].addr, "/v1/recheck/d00", vec![]).await;
    assert_eq!(status, 400, "{answer}");
    send(&mut host_link, &LinkFrame::Ping { t: 1 }).await;
    assert_eq!(next_frame(&mut host_link).await, LinkFrame::Pong { t: 1 }, "a paired host was cut");

    let started = Instant::now();
    agents_control::registry::forget(cluster.store.as_ref(), &SystemClock, &host.id).await.unwrap();
    let (status, answer) =
        http_client::post_json(cluster.copies[1].addr, &format!("/v1/recheck/{}", host.id), vec![]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"device_id": host.id, "paired": false, "copy": cluster.copies[1].control.copy_name}));
    let (code, reason) = next_close_within(&mut host_link, Duration::from_secs(1)).await;
    assert_eq!(code, CloseCode::Revoked.code(), "{reason}");
    // The host's own copy may tell its session ended (offline) before the third copy hears why.
    let gone = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: false, online: false };
    loop {
        let LinkFrame::PresenceChanged { host: changed } = next_frame(&mut client_link).await else {
            panic!("expected presence")
        };
        if changed == gone {
            break;
        }
        assert!(changed.paired && !changed.online, "{changed:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(1), "cut after {:?}", started.elapsed());
    send(&mut client_link, &send_frame(&host.id, 1, json!("there?"))).await;
    let unknown =
        LinkFrame::Undeliverable { to: host.id.clone(), epoch: 9, seq: 1, reason: UndeliverableReason::Unknown };
    assert_eq!(next_frame(&mut client_link).await, unknown);
}

#[tokio::test]
async fn a_device_connected_twice_keeps_only_its_newest_session() {
    let cluster = cluster(2).await;
    let host = cluster.pair(DeviceKind::Host, "box").await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut old = cluster.connect(0, &host).await;
    cluster.wait_online(1, &host).await;
    let mut new = cluster.connect(1, &host).await;
    let (code, _) = next_close(&mut old).await;
    assert_eq!(code, CloseCode::Replaced.code());

    // Traffic for the host now reaches the new session, from either copy.
    for (i, seq) in [(0, 1), (1, 2)] {
        let mut client_link = cluster.connect(i, &client).await;
        let _presence = next_frame(&mut client_link).await;
        send(&mut client_link, &send_frame(&host.id, seq, json!(seq))).await;
        assert_eq!(next_frame(&mut new).await, message(&client, seq, json!(seq)));
    }
}

#[tokio::test]
async fn a_copy_without_the_control_key_is_not_a_peer() {
    let cluster = cluster(2).await;
    // A stranger on the same bucket, with another key: it is listed but never linked.
    let stranger = start_copy(cluster.store.clone(), [99; 32]).await;
    let stranger_id = stranger.control.copy_name.clone();
    // Wait until both copies have tried the stranger (or it them) and been refused.
    let all = [cluster.copies[0].control.clone(), cluster.copies[1].control.clone(), stranger.control.clone()];
    wait_until("both copies to refuse the stranger", LINKED, || {
        let refused: u64 = all.iter().map(|c| c.metrics.peer_handshakes_refused.load(Ordering::Relaxed)).sum();
        async move { (refused >= 4).then_some(()) }
    })
    .await
    .unwrap();
    let control = cluster.copies[0].control.clone();
    assert_eq!(control.sessions.counts().peers, 1, "{stranger_id} must not be linked");
    assert_eq!(stranger.control.sessions.counts().peers, 0);

    // The handshake itself: a hello signed with another key is closed with 4002.
    let url = format!("ws://{}/v1/peer", cluster.copies[0].addr);
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let Some(Ok(Message::Text(text))) = socket.next().await else { panic!("a challenge") };
    let PeerFrame::PeerChallenge { copy, server_nonce, key, .. } = PeerFrame::decode(&text).unwrap() else {
        panic!("challenge")
    };
    let nonce = hyperhive_control_proto::encoding::encode(&[1u8; 32]);
    let wrong = ControlKey::from_seed([99; 32]);
    let my_key = hyperhive_control_proto::encoding::encode(&[9u8; 32]);
    let transcript = PeerTranscript {
        acceptor: &copy,
        acceptor_nonce: &server_nonce,
        acceptor_key: &key,
        dialer: "0badc0de",
        dialer_nonce: &nonce,
        dialer_key: &my_key,
    };
    let proof = peer_proof_message(PeerRole::Dialer, &transcript);
    let hello = PeerFrame::PeerHello {
        version: PEER_PROTOCOL_VERSION,
        copy: "0badc0de".into(),
        dialed: copy.clone(),
        peer_nonce: nonce,
        key: my_key.clone(),
        signature: wrong.sign(&proof),
    };
    socket.send(Message::text(hello.encode())).await.unwrap();
    let code = loop {
        match tokio::time::timeout(link_client::WAIT, socket.next()).await.unwrap() {
            Some(Ok(Message::Close(Some(frame)))) => break u16::from(frame.code),
            Some(Ok(_)) => continue,
            other => panic!("expected a close, got {other:?}"),
        }
    };
    assert_eq!(code, CloseCode::DeviceProofFailed.code());
}

#[tokio::test]
async fn shutdown_fails_readyz_then_says_going_away_then_leaves_the_membership() {
    let mut cluster = cluster(2).await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut link = cluster.connect(0, &client).await;
    let _presence = next_frame(&mut link).await;
    cluster.wait_online(1, &client).await;

    let copy = &mut cluster.copies[0];
    let control = copy.control.clone();
    copy.stop.take().unwrap().send(()).unwrap();
    wait_until("/readyz to fail", LINKED, || {
        let control = control.clone();
        async move { control.readiness().is_err().then_some(()) }
    })
    .await
    .unwrap();
    assert_eq!(cluster.store.list(records::MEMBERS).await.unwrap().len(), 2, "still a member while draining");
    let (code, reason) = next_close(&mut link).await;
    assert_eq!(code, CloseCode::GoingAway.code(), "{reason}");
    let copy = &mut cluster.copies[0];
    tokio::time::timeout(LINKED, &mut copy.task).await.unwrap().unwrap().unwrap();
    assert_eq!(cluster.store.list(records::MEMBERS).await.unwrap().len(), 1, "left the membership");
    // The surviving copy saw the link go and the device with it.
    let survivor = cluster.copies[1].control.clone();
    let id = client.id.clone();
    wait_until("the survivor to drop the link", LINKED, || {
        let (survivor, id) = (survivor.clone(), id.clone());
        async move { (survivor.sessions.counts().peers == 0 && !survivor.is_online(&id)).then_some(()) }
    })
    .await
    .unwrap();
}

/// Across copies a body travels as its sender wrote it (re-encoded, this one would be 108 KB and
/// close the peer link, taking every device it carries offline); one over the limit is answered
/// `too_large` by the sender's copy, and the peer link stays.
#[tokio::test]
async fn a_large_body_crosses_copies_as_written_and_one_over_the_limit_keeps_the_peer_link() {
    let cluster = cluster(2).await;
    let host = cluster.pair(DeviceKind::Host, "box").await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let mut host_link = cluster.connect(0, &host).await;
    cluster.wait_online(1, &host).await;
    let mut client_link = cluster.connect(1, &client).await;
    let _presence = next_frame(&mut client_link).await;

    relay_as_written_and_refuse_too_large(&mut client_link, &mut host_link, &host.id).await;
    client_link.send(raw_send(&host.id, 3, "3")).await.unwrap();
    assert_eq!(next_frame(&mut host_link).await, message(&client, 3, json!(3)));
    for copy in &cluster.copies {
        assert_eq!(copy.control.sessions.counts().peers, 1, "the peer link stayed up");
    }
}

/// Copy 0 has no peer URL (so it dials) and copy 1 is reached only through `mitm`, a man in
/// the middle on the path between them. A host is on copy 1, a client on copy 0, each seen by
/// the other copy.
struct OnPath {
    cluster: Cluster,
    mitm: WsMitm,
    host: Device,
    client: Device,
    host_link: Socket,
    client_link: Socket,
}

async fn on_path() -> OnPath {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(FileStore::open(dir.path()).unwrap());
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let listener = bind().await.unwrap();
    let mitm = WsMitm::start(listener.local_addr().unwrap()).await.unwrap();
    let reached = start_serving(store.clone(), SEED, listener, Some(format!("http://{}", mitm.addr()))).await;
    let dialing = start_serving(store.clone(), SEED, bind().await.unwrap(), None).await;
    let cluster = Cluster { _dir: dir, store, copies: vec![dialing, reached] };
    cluster.wait_linked(1).await;
    let host = cluster.pair(DeviceKind::Host, "box").await;
    let client = cluster.pair(DeviceKind::Client, "phone").await;
    let host_link = cluster.connect(1, &host).await;
    cluster.wait_online(0, &host).await;
    let mut client_link = cluster.connect(0, &client).await;
    let _presence = next_frame(&mut client_link).await;
    cluster.wait_online(1, &client).await;
    OnPath { cluster, mitm, host, client, host_link, client_link }
}

impl OnPath {
    /// Waits until the link through the man in the middle was dropped and dialed again, and
    /// both devices are seen across it again.
    async fn wait_relinked(&self, accepted_before: usize) {
        let mitm = &self.mitm;
        wait_until("the tampered link to be dropped and dialed again", LINKED, || async move {
            (mitm.accepted() > accepted_before && mitm.live_connections() == 1).then_some(())
        })
        .await
        .unwrap();
        self.cluster.wait_linked(1).await;
        self.cluster.wait_online(0, &self.host).await;
        self.cluster.wait_online(1, &self.client).await;
    }

    /// The client sends `body` as `seq`: it must be the host's next frame (so nothing forged
    /// or replayed reached the host before it), and the host's ack reaches the client (so
    /// neither session was cut).
    async fn relay_reaches_the_host_next(&mut self, seq: u64, body: serde_json::Value) {
        send(&mut self.client_link, &send_frame(&self.host.id, seq, body.clone())).await;
        assert_eq!(next_frame(&mut self.host_link).await, message(&self.client, seq, body));
        send(&mut self.host_link, &LinkFrame::Ack { to: self.client.id.clone(), epoch: 9, seq }).await;
        let acked = LinkFrame::Acked { from: self.host.id.clone(), epoch: 9, seq };
        // The client saw the host go offline and come back while the link was dialed again.
        let next = loop {
            match next_frame(&mut self.client_link).await {
                LinkFrame::PresenceChanged { .. } => continue,
                other => break other,
            }
        };
        assert_eq!(next, acked);
    }

    /// Injects `frame` as a peer frame toward one copy: the copy must drop the link rather than
    /// act on it, and relaying still works afterwards.
    async fn forged_frame_is_dropped(mut self, toward: Toward, frame: PeerFrame) {
        let before = self.mitm.accepted();
        assert_eq!(self.mitm.inject(toward, Message::text(frame.encode())).await, 1);
        self.wait_relinked(before).await;
        let receiver = &self.cluster.copies[if toward == Toward::Upstream { 1 } else { 0 }].control;
        assert_eq!(receiver.metrics.peer_frames_refused.load(Ordering::Relaxed), 1, "dropped as forged");
        self.relay_reaches_the_host_next(1, json!("real")).await;
    }
}

const MARKER: &str = "plaintext-marker-5f0c2a";

#[tokio::test]
async fn someone_on_the_path_between_copies_cannot_read_a_relayed_prompt() {
    let mut path = on_path().await;
    path.relay_reaches_the_host_next(1, json!({"prompt": MARKER})).await;
    send(&mut path.host_link, &send_frame(&path.client.id, 1, json!({"answer": MARKER}))).await;
    assert_eq!(next_frame(&mut path.client_link).await, message(&path.host, 1, json!({"answer": MARKER})));
    let seen = path.mitm.seen();
    assert!(seen.iter().any(|(t, _)| *t == Toward::Upstream) && seen.iter().any(|(t, _)| *t == Toward::Downstream));
    assert!(!path.mitm.saw(MARKER.as_bytes()), "the man in the middle read a relayed prompt");
    assert!(!path.mitm.saw(path.client.id.as_bytes()), "the man in the middle read a device id");
}

#[tokio::test]
async fn a_forward_injected_on_the_path_impersonates_no_client() {
    let path = on_path().await;
    let forged = message(&path.client, 1, json!({"prompt": "rm -rf /"}));
    let frame = PeerFrame::Forward { to: path.host.id.clone(), frame: Box::new(forged) };
    path.forged_frame_is_dropped(Toward::Upstream, frame).await;
}

#[tokio::test]
async fn a_session_opened_injected_on_the_path_hijacks_no_routing() {
    let path = on_path().await;
    let session =
        SessionInfo { device_id: path.host.id.clone(), kind: DeviceKind::Host, name: "box".into(), session: u64::MAX };
    path.forged_frame_is_dropped(Toward::Upstream, PeerFrame::SessionOpened { session }).await;
}

#[tokio::test]
async fn a_revoked_injected_on_the_path_cuts_no_device() {
    let path = on_path().await;
    let frame = PeerFrame::Revoked { device_id: path.client.id.clone() };
    path.forged_frame_is_dropped(Toward::Downstream, frame).await;
}

#[tokio::test]
async fn a_peer_frame_replayed_on_the_path_is_not_delivered_again() {
    let mut path = on_path().await;
    let mark = path.mitm.seen().len();
    path.relay_reaches_the_host_next(1, json!("once")).await;
    let recorded: Vec<Vec<u8>> =
        path.mitm.seen()[mark..].iter().filter(|(t, _)| *t == Toward::Upstream).map(|(_, p)| p.clone()).collect();
    assert!(!recorded.is_empty(), "the forward crossed the path");
    let before = path.mitm.accepted();
    for payload in recorded {
        let message = Message::text(String::from_utf8(payload).expect("frames are text"));
        path.mitm.inject(Toward::Upstream, message).await;
    }
    path.wait_relinked(before).await;
    path.relay_reaches_the_host_next(2, json!("twice?")).await;
}

#[tokio::test]
async fn a_copy_relayed_to_another_copy_is_not_taken_for_the_one_dialed() {
    // Copy a's bucket lists a copy "ffff..." whose peer URL leads to a man in the middle in
    // front of copy c (same control key, another bucket, so it never links to a by itself); the
    // man in the middle renames c as the copy dialed in everything it relays back.
    let cluster = cluster(1).await;
    let other_dir = tempfile::tempdir().unwrap();
    let c = start_copy(Arc::new(FileStore::open(other_dir.path()).unwrap()), SEED).await;
    let ghost = "ffffffffffffffff";
    let real = c.control.copy_name.clone();
    let mitm = WsMitm::rewriting(c.addr, move |toward, text| match toward {
        Toward::Downstream => text.replace(&real, ghost),
        Toward::Upstream => text,
    })
    .await
    .unwrap();
    let record = records::MemberRecord {
        schema: records::SCHEMA,
        copy_id: ghost.into(),
        name: "ghost".into(),
        peer_url: Some(format!("http://{}", mitm.addr())),
        heartbeat_at: records::timestamp(time::OffsetDateTime::now_utc()),
        write_id: records::write_id(),
    };
    cluster.store.create(&records::member_key(ghost), records::encode(&record)).await.unwrap();
    let a = cluster.copies[0].control.clone();
    let m = &mitm;
    wait_until("copy a to dial the ghost", LINKED, || {
        let linked = a.sessions.counts().peers > 0;
        async move { (linked || m.ended() >= 1).then_some(()) }
    })
    .await
    .unwrap();
    assert_eq!(a.sessions.counts().peers, 0, "copy a linked to copy c believing it was the ghost");
    assert_eq!(c.control.sessions.counts().peers, 0, "copy c linked to copy a through the relay");
    assert!(c.control.metrics.peer_handshakes_refused.load(Ordering::Relaxed) >= 1);
}
