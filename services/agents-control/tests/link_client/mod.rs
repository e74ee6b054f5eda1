//! In-process tests of `/v1/link`: one copy served on a loopback port with a fake clock
//! ([`ServedCopy`]), and a device's side: pairing straight through the store, the handshake
//! with control-link, and reading frames with deadlines.

#![allow(dead_code)] // each test file uses a different part

use agents_control::clock::{Clock, FakeClock};
use agents_control::codes::{self, CodeRequest, Issuer};
use agents_control::control::Control;
use agents_control::key::ControlKey;
use agents_control::pairing;
use ed25519_dalek::SigningKey;
use futures::{SinkExt, StreamExt};
use hyperhive_control_link::handshake::{self, HandshakeError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{LinkFrame, MAX_BODY_BYTES, UndeliverableReason};
use hyperhive_control_proto::pair::PairRequest;
use hyperhive_object_store::Store;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use time::macros::datetime;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub const WAIT: Duration = Duration::from_secs(5);

/// One copy serving on a loopback port, its clock standing at 2026-11-30 04:00 UTC.
pub struct ServedCopy {
    _dir: Option<tempfile::TempDir>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<FakeClock>,
    pub control: Arc<Control>,
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ServedCopy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ServedCopy {
    /// A copy named `cp1` with the control key of `seed` on `store` (`dir` is kept while it
    /// runs); `public` gives it its public address (its own loopback URL), needed to make codes.
    pub async fn start(store: Arc<dyn Store>, dir: Option<tempfile::TempDir>, seed: [u8; 32], public: bool) -> Self {
        let clock = Arc::new(FakeClock::at(datetime!(2026-11-30 04:00 UTC)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut control = Control::new(store.clone(), ControlKey::from_seed(seed), clock.clone()).with_copy_name("cp1");
        if public {
            control = control.with_public_address(format!("http://{addr}"), None);
        }
        let control = Arc::new(control);
        let server = tokio::spawn(agents_control::server::serve(control.clone(), listener, std::future::pending()));
        ServedCopy { _dir: dir, store, clock, control, addr, server }
    }

    /// The same on a fresh `file://` store.
    pub async fn on_file_store(seed: [u8; 32], public: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(hyperhive_object_store::file::FileStore::open(dir.path()).unwrap());
        Self::start(store, Some(dir), seed, public).await
    }

    /// Pairs as another copy would: the record is in the store, this copy's registry has not
    /// been refreshed since.
    pub async fn pair_in_store_only(&self, kind: DeviceKind, name: &str) -> Device {
        pair(self.store.as_ref(), self.clock.as_ref(), &self.control.key, kind, name).await
    }

    /// Pairs and refreshes this copy's registry.
    pub async fn pair(&self, kind: DeviceKind, name: &str) -> Device {
        let device = self.pair_in_store_only(kind, name).await;
        self.control.registry.refresh(self.store.as_ref()).await.unwrap();
        device
    }

    /// Pairs a client whose code gave it `role`, and refreshes this copy's registry.
    pub async fn pair_client_as(&self, role: hyperhive_control_proto::role::Role, name: &str) -> Device {
        let device =
            pair_as(self.store.as_ref(), self.clock.as_ref(), &self.control.key, DeviceKind::Client, name, Some(role))
                .await;
        self.control.registry.refresh(self.store.as_ref()).await.unwrap();
        device
    }
}

/// A paired device: its id, kind and key.
#[derive(Clone)]
pub struct Device {
    pub id: String,
    pub kind: DeviceKind,
    pub key: SigningKey,
}

/// The role [`pair`] gives a device of `kind`: operator for a client, none for a host.
pub fn role_of(kind: DeviceKind) -> Option<hyperhive_control_proto::role::Role> {
    (kind == DeviceKind::Client).then_some(hyperhive_control_proto::role::Role::Operator)
}

/// Makes a code and redeems it, as a copy serving `/v1/pair` would; a client's code gives it the
/// operator role.
pub async fn pair(store: &dyn Store, clock: &dyn Clock, key: &ControlKey, kind: DeviceKind, name: &str) -> Device {
    pair_as(store, clock, key, kind, name, role_of(kind)).await
}

/// [`pair`] with the code giving `role` (a client's; `None` for a host).
pub async fn pair_as(
    store: &dyn Store,
    clock: &dyn Clock,
    key: &ControlKey,
    kind: DeviceKind,
    name: &str,
    role: Option<hyperhive_control_proto::role::Role>,
) -> Device {
    let issuer = Issuer { key: key.clone(), control_url: "http://127.0.0.1:1".into(), pin: None };
    let request = CodeRequest { kind, name: None, role, ttl: codes::DEFAULT_TTL, made_by: "test".into() };
    let code = codes::make_code(store, clock, &issuer, &request).await.unwrap();
    let device_key = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let request = PairRequest::sign(&code.to_token(), &device_key, name);
    let response = pairing::redeem(store, clock, key, &request).await.unwrap().response;
    Device { id: response.device_id, kind, key: device_key }
}

pub async fn open(addr: SocketAddr) -> Socket {
    let url = format!("ws://{addr}/v1/link");
    let config = hyperhive_control_link::websocket_config();
    let (socket, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), false).await.unwrap();
    socket
}

/// Connects and runs the device's half of the handshake against `control_seed`'s key;
/// the verdict is the copy's name or why the copy's proof failed.
pub async fn try_connect(
    addr: SocketAddr,
    device: &Device,
    control_seed: [u8; 32],
) -> (Socket, Result<String, HandshakeError>) {
    authenticate(open(addr).await, device, control_seed).await
}

/// A socket whose kernel receive buffer is `bytes` (set before connecting): a device that stops
/// reading on it makes the copy's writes stall after little data.
pub async fn open_with_receive_buffer(addr: SocketAddr, bytes: u32) -> Socket {
    let tcp = tokio::net::TcpSocket::new_v4().unwrap();
    tcp.set_recv_buffer_size(bytes).unwrap();
    let stream = tcp.connect(addr).await.unwrap();
    let url = format!("ws://{addr}/v1/link");
    let config = hyperhive_control_link::websocket_config();
    let (socket, _) =
        tokio_tungstenite::client_async_with_config(url, MaybeTlsStream::Plain(stream), Some(config)).await.unwrap();
    socket
}

/// The device's half of the handshake on an open socket, as [`try_connect`].
pub async fn authenticate(
    mut socket: Socket,
    device: &Device,
    control_seed: [u8; 32],
) -> (Socket, Result<String, HandshakeError>) {
    let challenge = next_frame(&mut socket).await;
    let (hello, awaiting) = handshake::answer_challenge(&challenge, &device.id, &device.key, &mut rand::rng()).unwrap();
    send(&mut socket, &hello).await;
    let welcome = next_frame(&mut socket).await;
    let verdict = awaiting.verify_welcome(&welcome, &SigningKey::from_bytes(&control_seed).verifying_key());
    (socket, verdict)
}

/// Runs the device's half of the handshake and expects the copy to refuse it; returns the
/// close code and reason.
pub async fn connect_refused(addr: SocketAddr, device: &Device) -> (u16, String) {
    let mut socket = open(addr).await;
    let challenge = next_frame(&mut socket).await;
    let (hello, _) = handshake::answer_challenge(&challenge, &device.id, &device.key, &mut rand::rng()).unwrap();
    send(&mut socket, &hello).await;
    next_close(&mut socket).await
}

pub async fn send(socket: &mut Socket, frame: &LinkFrame) {
    socket.send(Message::text(frame.encode())).await.unwrap();
}

/// The next frame that is not a keepalive ping. Pings are answered, as a device does, so a link
/// waiting long (on a frozen store) is not closed for silence.
pub async fn next_frame_within(socket: &mut Socket, within: Duration) -> LinkFrame {
    loop {
        let message = tokio::time::timeout(within, socket.next()).await.expect("a frame in time");
        match message.expect("the link is open").expect("a readable message") {
            Message::Text(text) => match LinkFrame::decode(&text).unwrap() {
                LinkFrame::Ping { t } => send(socket, &LinkFrame::Pong { t }).await,
                frame => return frame,
            },
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => continue,
        }
    }
}

pub async fn next_frame(socket: &mut Socket) -> LinkFrame {
    next_frame_within(socket, WAIT).await
}

/// Waits up to `within` for the server's close; returns its code and reason.
pub async fn next_close_within(socket: &mut Socket, within: Duration) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let message = tokio::time::timeout_at(deadline, socket.next()).await.expect("a close in time");
        match message {
            Some(Ok(Message::Close(Some(frame)))) => return (frame.code.into(), frame.reason.to_string()),
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}

pub async fn next_close(socket: &mut Socket) -> (u16, String) {
    next_close_within(socket, WAIT).await
}

/// A `send` in stream 9 with `first_unacked` 1.
pub fn send_frame(to: &str, seq: u64, body: serde_json::Value) -> LinkFrame {
    LinkFrame::Send { to: to.into(), epoch: 9, seq, first_unacked: 1, body: body.into() }
}

/// 12,000 numbers written `1e5`: 48,001 bytes of JSON as written, 108,001 once decoded and
/// encoded again (`100000.0`), which no link carries.
pub fn numbers_written_short() -> String {
    format!("[{}]", vec!["1e5"; 12_000].join(","))
}

/// The text of a `send` whose body is `body` exactly as given.
pub fn raw_send(to: &str, seq: u64, body: &str) -> Message {
    Message::text(format!(r#"{{"type":"send","to":"{to}","epoch":9,"seq":{seq},"first_unacked":1,"body":{body}}}"#))
}

/// `client` sends the host `host_id` the body of [`numbers_written_short`] in seq 1, which must
/// arrive exactly as written, then a body under the frame cap but over the body limit in seq 2,
/// which must be answered `too_large` at once.
pub async fn relay_as_written_and_refuse_too_large(client: &mut Socket, host: &mut Socket, host_id: &str) {
    let numbers = numbers_written_short();
    client.send(raw_send(host_id, 1, &numbers)).await.unwrap();
    let text = next_text(host).await;
    assert!(text.ends_with(&format!(r#""body":{numbers}}}"#)), "{} bytes: {}", text.len(), &text[..100]);

    let over = format!("\"{}\"", "x".repeat(MAX_BODY_BYTES - 1));
    client.send(raw_send(host_id, 2, &over)).await.unwrap();
    let refused =
        LinkFrame::Undeliverable { to: host_id.into(), epoch: 9, seq: 2, reason: UndeliverableReason::TooLarge };
    assert_eq!(next_frame(client).await, refused);
}

/// The next text frame, undecoded (pings are answered as [`next_frame_within`] does).
pub async fn next_text(socket: &mut Socket) -> String {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next()).await.expect("a frame in time");
        match message.expect("the link is open").expect("a readable message") {
            Message::Text(text) => match LinkFrame::decode(&text) {
                Ok(LinkFrame::Ping { t }) => send(socket, &LinkFrame::Pong { t }).await,
                _ => return text.as_str().to_owned(),
            },
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => continue,
        }
    }
}
