//! The device link `GET /v1/link` of one copy, served in process by warp on a loopback port
//! (a `file://` store), with real WebSocket clients running control-link's handshake.

mod link_client;

use agents_control::registry;
use agents_control::sessions::SESSION_QUEUE;
use agents_control::wire::WRITE_TIMEOUT;
use ed25519_dalek::SigningKey;
use futures::{SinkExt, StreamExt};
use hyperhive_control_link::handshake::{self, HandshakeError};
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::link::{
    CloseCode, ErrorCode, HostPresence, LinkFrame, MAX_FRAME_BYTES, UndeliverableReason,
};
use hyperhive_testkit::wait_until;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

use link_client::{
    Device, ServedCopy, Socket, WAIT, next_close, next_frame, raw_send, relay_as_written_and_refuse_too_large, send,
    send_frame,
};

const CONTROL_SEED: [u8; 32] = [7; 32];

type Copy = ServedCopy;

async fn copy_with_key(seed: [u8; 32]) -> Copy {
    ServedCopy::on_file_store(seed, false).await
}

/// The device's side of a copy in this file.
trait Connect {
    async fn open(&self) -> Socket;
    async fn try_connect(&self, device: &Device, control_seed: [u8; 32]) -> (Socket, Result<String, HandshakeError>);
    async fn connect(&self, device: &Device) -> Socket;
}

impl Connect for Copy {
    async fn open(&self) -> Socket {
        link_client::open(self.addr).await
    }

    async fn try_connect(&self, device: &Device, control_seed: [u8; 32]) -> (Socket, Result<String, HandshakeError>) {
        link_client::try_connect(self.addr, device, control_seed).await
    }

    async fn connect(&self, device: &Device) -> Socket {
        let (socket, verdict) = self.try_connect(device, CONTROL_SEED).await;
        assert_eq!(verdict.unwrap(), "cp1");
        socket
    }
}

#[tokio::test]
async fn a_device_that_just_paired_connects_before_the_next_registry_refresh() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let client = copy.pair_in_store_only(DeviceKind::Client, "new phone").await;
    assert!(copy.control.registry.active(&client.id).is_none(), "the registry must not know it yet");
    let _link = copy.connect(&client).await;
    assert!(copy.control.registry.active(&client.id).is_some());
}

#[tokio::test]
async fn a_host_and_a_client_exchange_messages_both_ways_with_acks() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let client = copy.pair(DeviceKind::Client, "phone").await;

    let mut client_link = copy.connect(&client).await;
    let offline = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: false };
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::Presence { hosts: vec![offline] });
    let mut host_link = copy.connect(&host).await;
    let online = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: true };
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::PresenceChanged { host: online });

    send(&mut client_link, &send_frame(&host.id, 1, serde_json::json!({"prompt": "hi"}))).await;
    // The host is told the client's role, from its code.
    let message = LinkFrame::Message {
        from: client.id.clone(),
        from_role: link_client::role_of(DeviceKind::Client),
        epoch: 9,
        seq: 1,
        first_unacked: 1,
        body: serde_json::json!({"prompt": "hi"}).into(),
    };
    assert_eq!(next_frame(&mut host_link).await, message);
    send(&mut host_link, &LinkFrame::Ack { to: client.id.clone(), epoch: 9, seq: 1 }).await;
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::Acked { from: host.id.clone(), epoch: 9, seq: 1 });

    send(&mut host_link, &send_frame(&client.id, 1, serde_json::json!("done"))).await;
    let LinkFrame::Message { from, from_role, body, .. } = next_frame(&mut client_link).await else {
        panic!("not a message")
    };
    assert_eq!((from.as_str(), from_role, body), (host.id.as_str(), None, serde_json::json!("done").into()));
    send(&mut client_link, &LinkFrame::Ack { to: host.id.clone(), epoch: 9, seq: 1 }).await;
    assert_eq!(next_frame(&mut host_link).await, LinkFrame::Acked { from: client.id.clone(), epoch: 9, seq: 1 });

    host_link.close(None).await.unwrap();
    let gone = HostPresence { device_id: host.id.clone(), name: "box".into(), paired: true, online: false };
    assert_eq!(next_frame(&mut client_link).await, LinkFrame::PresenceChanged { host: gone });
}

#[tokio::test]
async fn sends_that_cannot_be_relayed_are_reported_to_the_sender() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let other_client = copy.pair(DeviceKind::Client, "laptop").await;
    let mut client_link = copy.connect(&client).await;
    let _presence = next_frame(&mut client_link).await;
    let mut other_link = copy.connect(&other_client).await;
    let _presence = next_frame(&mut other_link).await;

    let cases = [
        (other_client.id.as_str(), UndeliverableReason::NotAllowed),
        (host.id.as_str(), UndeliverableReason::Offline),
        ("d00000000000000000000000000000000", UndeliverableReason::Unknown),
    ];
    for (seq, (to, reason)) in (1..).zip(cases) {
        send(&mut client_link, &send_frame(to, seq, serde_json::json!(1))).await;
        let expected = LinkFrame::Undeliverable { to: to.into(), epoch: 9, seq, reason };
        assert_eq!(next_frame(&mut client_link).await, expected);
    }
    // Nothing reached the other client: its next frame is the answer to its own ping.
    send(&mut other_link, &LinkFrame::Ping { t: 3 }).await;
    assert_eq!(next_frame(&mut other_link).await, LinkFrame::Pong { t: 3 });
}

#[tokio::test]
async fn forgetting_a_device_closes_its_session_and_it_cannot_reconnect() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut link = copy.connect(&client).await;
    let _presence = next_frame(&mut link).await;

    registry::forget(copy.store.as_ref(), copy.clock.as_ref(), &client.id).await.unwrap();
    copy.control.registry.refresh(copy.store.as_ref()).await.unwrap();
    assert_eq!(copy.control.sessions.close_forgotten(&copy.control.registry), 1);
    assert_eq!(next_close(&mut link).await.0, CloseCode::Revoked.code());

    let mut again = copy.open().await;
    let challenge = next_frame(&mut again).await;
    let (hello, _) = handshake::answer_challenge(&challenge, &client.id, &client.key, &mut rand::rng()).unwrap();
    send(&mut again, &hello).await;
    let (code, reason) = next_close(&mut again).await;
    assert_eq!(code, CloseCode::UnknownDevice.code());
    assert!(reason.contains("pair it again"), "{reason}");
}

#[tokio::test]
async fn a_copy_with_another_control_key_is_refused_by_the_device() {
    let impostor = copy_with_key([9; 32]).await;
    let host = impostor.pair(DeviceKind::Host, "box").await;
    let (_, verdict) = impostor.try_connect(&host, CONTROL_SEED).await;
    assert_eq!(verdict.unwrap_err().close_code(), CloseCode::ServerProofFailed);
}

#[tokio::test]
async fn a_device_that_fails_its_proof_is_refused() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let thief = Device { id: host.id.clone(), kind: host.kind, key: SigningKey::from_bytes(&[1; 32]) };
    let mut socket = copy.open().await;
    let challenge = next_frame(&mut socket).await;
    let (hello, _) = handshake::answer_challenge(&challenge, &thief.id, &thief.key, &mut rand::rng()).unwrap();
    send(&mut socket, &hello).await;
    assert_eq!(next_close(&mut socket).await.0, CloseCode::DeviceProofFailed.code());

    let mut socket = copy.open().await;
    let _challenge = next_frame(&mut socket).await;
    send(&mut socket, &LinkFrame::Ping { t: 1 }).await;
    let (code, reason) = next_close(&mut socket).await;
    assert_eq!(code, CloseCode::ProtocolViolation.code());
    assert!(reason.contains("expected hello"), "{reason}");
}

#[tokio::test]
async fn a_newer_session_of_a_device_replaces_the_older() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let mut older = copy.connect(&host).await;
    let mut newer = copy.connect(&host).await;
    assert_eq!(next_close(&mut older).await.0, CloseCode::Replaced.code());
    send(&mut newer, &LinkFrame::Ping { t: 5 }).await;
    assert_eq!(next_frame(&mut newer).await, LinkFrame::Pong { t: 5 });
    assert!(copy.control.sessions.is_online(&host.id));
}

#[tokio::test]
async fn garbage_frames_get_error_frames_and_the_link_stays() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let mut link = copy.connect(&host).await;
    let cases = [
        ("not json", ErrorCode::Malformed),
        (r#"{"type": "send", "to": 3}"#, ErrorCode::Malformed),
        (r#"{"type": "teleport"}"#, ErrorCode::UnknownType),
        (r#"{"type": "challenge", "version": 1, "server_nonce": "x"}"#, ErrorCode::NotAllowed),
    ];
    for (text, expected) in cases {
        link.send(Message::text(text)).await.unwrap();
        let LinkFrame::Error { code, message } = next_frame(&mut link).await else {
            panic!("no error frame for {text}")
        };
        assert_eq!(code, expected, "{text}: {message}");
    }
    send(&mut link, &LinkFrame::Request { id: 4, request: hyperhive_control_proto::link::Request::ListDevices }).await;
    let LinkFrame::RequestFailed { id: 4, error, retry: false } = next_frame(&mut link).await else {
        panic!("a host's request must be refused")
    };
    assert!(error.contains("hosts may not"), "{error}");
    send(&mut link, &LinkFrame::Ping { t: 2 }).await;
    assert_eq!(next_frame(&mut link).await, LinkFrame::Pong { t: 2 });

    link.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert_eq!(next_close(&mut link).await.0, CloseCode::UnsupportedData.code());

    let mut link = copy.connect(&host).await;
    link.send(Message::text("[".repeat(MAX_FRAME_BYTES + 1))).await.unwrap();
    let (code, _) = next_close(&mut link).await;
    assert_eq!(code, CloseCode::TooLarge.code());
}

#[tokio::test]
async fn plain_http_on_the_websocket_paths_gets_a_clear_400_and_other_routes_still_answer() {
    let copy = copy_with_key(CONTROL_SEED).await;
    for path in ["/v1/link", "/v1/peer"] {
        assert_eq!(hyperhive_testkit::process::http_status(copy.addr, path).await.unwrap(), 400, "{path}");
    }
    assert_eq!(hyperhive_testkit::process::http_status(copy.addr, "/healthz").await.unwrap(), 200);
    assert_eq!(hyperhive_testkit::process::http_status(copy.addr, "/v1/nothing").await.unwrap(), 404);
}

/// A body reaches its receiver as its sender wrote it: this one, decoded and encoded again,
/// would be 108 KB and close the receiver's link. A body over the limit is answered `too_large`
/// before anything is queued, and both links stay.
#[tokio::test]
async fn a_body_is_relayed_byte_for_byte_and_one_over_the_limit_is_refused() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut host_link = copy.connect(&host).await;
    let mut client_link = copy.connect(&client).await;
    let _presence = next_frame(&mut client_link).await;

    relay_as_written_and_refuse_too_large(&mut client_link, &mut host_link, &host.id).await;
    client_link.send(raw_send(&host.id, 3, "\"still here\"")).await.unwrap();
    let LinkFrame::Message { seq: 3, body, .. } = next_frame(&mut host_link).await else {
        panic!("not the next message")
    };
    assert_eq!(body.get(), "\"still here\"");
}

/// Authenticates `device` on a socket with a 4 KiB receive buffer that the test then never
/// reads, and has `client` send it 150 messages of 60 KB (more than every buffer on the way
/// holds): the copy's writes to it stall. With `fill_queue`, short messages follow until its
/// queue is full (the client hears `undeliverable`).
async fn stall(copy: &Copy, device: &Device, client_link: &mut Socket, fill_queue: bool) -> Socket {
    let socket = link_client::open_with_receive_buffer(copy.addr, 4096).await;
    let (stuck, verdict) = link_client::authenticate(socket, device, CONTROL_SEED).await;
    assert_eq!(verdict.unwrap(), "cp1");
    let large = format!("\"{}\"", "y".repeat(60_000));
    for seq in 1..=150 {
        client_link.send(raw_send(&device.id, seq, &large)).await.unwrap();
    }
    if fill_queue {
        for seq in 151..151 + SESSION_QUEUE as u64 + 10 {
            client_link.send(raw_send(&device.id, seq, "0")).await.unwrap();
        }
        while !matches!(next_frame(client_link).await, LinkFrame::Undeliverable { to, .. } if to == device.id) {}
    }
    stuck
}

/// Reads a link to its end; the close code, if it ended with one.
async fn read_to_end(socket: &mut Socket) -> Option<u16> {
    while let Some(message) = socket.next().await {
        match message {
            Ok(Message::Close(frame)) => return frame.map(|f| f.code.into()),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
    None
}

/// Waits for message `seq`, passing over the earlier ones still being relayed.
async fn wait_for_message(socket: &mut Socket, seq: u64) {
    while !matches!(next_frame(socket).await, LinkFrame::Message { seq: got, .. } if got == seq) {}
}

#[tokio::test]
async fn a_device_that_stops_reading_is_dropped_within_the_write_deadline_and_can_come_back() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut client_link = copy.connect(&client).await;
    let _presence = next_frame(&mut client_link).await;
    let mut stuck = stall(&copy, &host, &mut client_link, false).await;

    let control = copy.control.clone();
    let id = host.id.clone();
    wait_until("the copy to drop the device that stopped reading", WRITE_TIMEOUT + Duration::from_secs(5), || {
        let (control, id) = (control.clone(), id.clone());
        async move { (!control.sessions.is_online(&id)).then_some(()) }
    })
    .await
    .unwrap();
    let ended = tokio::time::timeout(WAIT, read_to_end(&mut stuck)).await.expect("the dropped socket ends");
    assert_eq!(ended, None, "dropped, not closed: no close frame could get through");

    let mut back = copy.connect(&host).await;
    client_link.send(raw_send(&host.id, 1_000, "\"back\"")).await.unwrap();
    wait_for_message(&mut back, 1_000).await;
}

/// A session replaced or revoked while its queue is full (its device reads slowly) still gets
/// its close once it reads again: lost, the link would only break off when its queue ran dry,
/// and a revoked device, not told it was revoked, would try to reconnect.
#[tokio::test]
async fn a_session_replaced_or_revoked_with_a_full_queue_still_gets_its_close() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let other = copy.pair(DeviceKind::Host, "other box").await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let mut client_link = copy.connect(&client).await;
    let _presence = next_frame(&mut client_link).await;

    let mut replaced = stall(&copy, &host, &mut client_link, true).await;
    let mut newer = copy.connect(&host).await;
    let ended = tokio::time::timeout(WRITE_TIMEOUT + WAIT, read_to_end(&mut replaced)).await.expect("the link ends");
    assert_eq!(ended, Some(CloseCode::Replaced.code()), "the older session is told why it ends");
    client_link.send(raw_send(&host.id, 2_000, "\"newer\"")).await.unwrap();
    wait_for_message(&mut newer, 2_000).await;

    let mut revoked = stall(&copy, &other, &mut client_link, true).await;
    registry::forget(copy.store.as_ref(), copy.clock.as_ref(), &other.id).await.unwrap();
    copy.control.revoke(&other.id);
    let ended = tokio::time::timeout(WRITE_TIMEOUT + WAIT, read_to_end(&mut revoked)).await.expect("the link ends");
    assert_eq!(ended, Some(CloseCode::Revoked.code()), "a revoked device is told, so it stops reconnecting");
}

/// A forget written by another copy whose word has not reached this one (no peer link, no
/// refresh since): the device proves its key and is still refused, from the store's record.
#[tokio::test]
async fn a_device_forgotten_elsewhere_is_refused_before_this_copy_hears_of_it() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let link = copy.connect(&host).await;
    drop(link);
    assert!(copy.control.registry.active(&host.id).is_some(), "this copy holds the host as paired");

    registry::forget(copy.store.as_ref(), copy.clock.as_ref(), &host.id).await.unwrap();
    assert!(copy.control.registry.active(&host.id).is_some(), "and has not heard of the forget");
    let mut again = copy.open().await;
    let challenge = next_frame(&mut again).await;
    let (hello, _) = handshake::answer_challenge(&challenge, &host.id, &host.key, &mut rand::rng()).unwrap();
    send(&mut again, &hello).await;
    let (code, reason) = next_close(&mut again).await;
    assert_eq!(code, CloseCode::UnknownDevice.code(), "{reason}");
    assert!(copy.control.registry.active(&host.id).is_none(), "the tombstone read is kept");
}

/// A copy that missed a forget (made in the store alone, and no recheck reached it) still holds
/// the host as paired; a client writing to it while it is offline must be told at once that it
/// no longer exists, never "offline, keep waiting". A host that is merely offline stays
/// `offline`.
#[tokio::test]
async fn a_message_to_a_device_forgotten_unheard_of_is_answered_unknown_not_offline() {
    let copy = copy_with_key(CONTROL_SEED).await;
    let client = copy.pair(DeviceKind::Client, "phone").await;
    let host = copy.pair(DeviceKind::Host, "box").await;
    let away = copy.pair(DeviceKind::Host, "spare").await;
    let mut link = copy.connect(&client).await;
    assert!(matches!(next_frame(&mut link).await, LinkFrame::Presence { .. }));

    send(&mut link, &send_frame(&away.id, 1, serde_json::json!("there?"))).await;
    let offline =
        LinkFrame::Undeliverable { to: away.id.clone(), epoch: 9, seq: 1, reason: UndeliverableReason::Offline };
    assert_eq!(next_frame(&mut link).await, offline);

    registry::forget(copy.store.as_ref(), copy.clock.as_ref(), &host.id).await.unwrap();
    assert!(copy.control.registry.active(&host.id).is_some(), "this copy has not heard of the forget");
    send(&mut link, &send_frame(&host.id, 1, serde_json::json!("there?"))).await;
    let unknown =
        LinkFrame::Undeliverable { to: host.id.clone(), epoch: 9, seq: 1, reason: UndeliverableReason::Unknown };
    assert_eq!(next_frame(&mut link).await, unknown);
    assert!(copy.control.registry.active(&host.id).is_none(), "the tombstone read is kept");
}
