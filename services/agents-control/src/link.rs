//! The server side of the device link, `GET /v1/link` (`docs/control-plane/link-protocol.md`):
//! the mutual-auth handshake, then relaying `send` and `ack` between clients and hosts by
//! device id, presence for clients, keepalive, and an answer to every bad frame that never
//! ends the copy.

use crate::control::Control;
use crate::limits::Admitted;
use crate::records::{self, DeviceRecord};
use crate::registry::Known;
use crate::sessions::NotQueued;
use crate::wire::{self, WireIn, WireOut};
use ed25519_dalek::{Signature, VerifyingKey};
use futures::{Sink, SinkExt, Stream, StreamExt};
use hyperhive_control_proto::link::{
    Body, CloseCode, ErrorCode, FrameError, HANDSHAKE_TIMEOUT, LINK_PROTOCOL_VERSION, LinkFrame, MAX_BODY_BYTES,
    MAX_FRAME_BYTES, NONCE_LEN, UndeliverableReason, device_proof_message, presence_frames, server_proof_message,
};
use hyperhive_control_proto::{DeviceKind, encoding};
use rand::RngCore;
use std::net::IpAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;

/// How long a proven device's record may take to read again before its registry entry decides
/// (see [`still_paired`]): well within the handshake's own limit.
const CONFIRM_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// An authenticated device.
struct Device {
    id: String,
    kind: DeviceKind,
    name: String,
    /// A client's role, named to the hosts it sends to.
    role: Option<hyperhive_control_proto::role::Role>,
}

/// Why the handshake ended without a device; each is a close code and its reason.
struct Refusal(CloseCode, String);

/// Runs one link until either side ends it. `connection` is the connection's admission: it
/// stops counting against its address once the device has proven itself.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    socket: WebSocketStream<S>,
    control: Arc<Control>,
    connection: Arc<Admitted>,
) {
    let (mut sink, mut stream) = wire::wire(socket);
    let handshake = handshake(&mut sink, &mut stream, &control, connection.peer());
    let device = match timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(device)) => device,
        Ok(Err(Refusal(code, reason))) => {
            tracing::info!(code = code.code(), %reason, "link refused");
            let _ = wire::send(&mut sink, WireOut::Close(code, reason)).await;
            return;
        }
        Err(_) => {
            let reason = format!("the handshake did not finish within {}s", HANDSHAKE_TIMEOUT.as_secs());
            let _ = wire::send(&mut sink, WireOut::Close(CloseCode::HandshakeTimeout, reason)).await;
            return;
        }
    };
    connection.proven();
    let now_ms = u64::try_from(control.clock.now().unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    let (session, mut queue) = control.sessions.open(&device.id, device.kind, &device.name, now_ms);
    tracing::info!(device = %device.id, kind = %device.kind, session, "device connected");
    let presence = match device.kind {
        DeviceKind::Client => presence_frames(control.sessions.presence(&control.registry)),
        DeviceKind::Host => vec![],
    };
    let close = match wire::send_all(&mut sink, presence.iter().map(text)).await {
        Err(_) => None,
        Ok(()) => {
            let answer = |body: String| {
                let (control, device) = (&control, &device);
                async move { on_frame(control, device, session, &body).await }
            };
            wire::run(&mut sink, &mut stream, &mut queue, MAX_FRAME_BYTES, answer).await
        }
    };
    if let Some((code, reason)) = close {
        tracing::info!(device = %device.id, code = code.code(), %reason, "closing the link");
        let _ = wire::send(&mut sink, WireOut::Close(code, reason)).await;
    }
    control.sessions.close(&device.id, session);
    tracing::info!(device = %device.id, session, "device disconnected");
}

fn text(frame: &LinkFrame) -> WireOut {
    WireOut::Text(frame.encode())
}

fn error_frame(code: ErrorCode, message: impl Into<String>) -> LinkFrame {
    LinkFrame::Error { code, message: message.into() }
}

/// Challenge, hello, welcome. Anything else before the welcome is a refusal.
async fn handshake(
    sink: &mut (impl Sink<WireOut> + Unpin),
    stream: &mut (impl Stream<Item = WireIn> + Unpin),
    control: &Control,
    from: IpAddr,
) -> Result<Device, Refusal> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let server_nonce = encoding::encode(&nonce);
    let challenge = LinkFrame::Challenge { version: LINK_PROTOCOL_VERSION, server_nonce: server_nonce.clone() };
    sink.send(text(&challenge))
        .await
        .map_err(|_| Refusal(CloseCode::Normal, "the device left during the handshake".into()))?;
    let hello = loop {
        match stream.next().await {
            Some(WireIn::Control) => continue,
            Some(WireIn::Text(body)) => match LinkFrame::decode(&body) {
                Ok(hello @ LinkFrame::Hello { .. }) => break hello,
                Ok(other) => {
                    return Err(Refusal(
                        CloseCode::ProtocolViolation,
                        format!("expected hello, got \"{}\"", other.type_name()),
                    ));
                }
                Err(error) => {
                    return Err(Refusal(CloseCode::ProtocolViolation, format!("expected hello: {error}")));
                }
            },
            Some(WireIn::Binary | WireIn::TooLarge) => {
                return Err(Refusal(CloseCode::ProtocolViolation, "expected hello, a JSON text frame".into()));
            }
            Some(WireIn::Closed) | None => {
                return Err(Refusal(CloseCode::Normal, "the device left during the handshake".into()));
            }
        }
    };
    let LinkFrame::Hello { version, device_id, device_nonce, signature } = hello else { unreachable!("matched above") };
    if version != LINK_PROTOCOL_VERSION {
        return Err(Refusal(
            CloseCode::UnsupportedVersion,
            format!("this copy speaks link protocol version {LINK_PROTOCOL_VERSION}, the device {version}"),
        ));
    }
    let record = match device_for_hello(control, &device_id, Some(from)).await {
        Ok(Some(record)) => record,
        Ok(None) => {
            let reason = "unknown device: never paired, or forgotten; pair it again";
            return Err(Refusal(CloseCode::UnknownDevice, reason.into()));
        }
        Err(LookupRefused::Busy) => {
            let reason = "this copy is looking up too many unseen devices just now: try again shortly";
            return Err(Refusal(CloseCode::TryAgainLater, reason.into()));
        }
        Err(LookupRefused::Store(error)) => {
            tracing::warn!(device = %device_id, %error, "cannot check an unseen device while the store is unreachable");
            let reason = "the store is unreachable and this copy has not seen this device yet: try again";
            return Err(Refusal(CloseCode::TryAgainLater, reason.into()));
        }
    };
    verify_device(&record.public_key, &server_nonce, &device_nonce, &device_id, &signature)
        .map_err(|why| Refusal(CloseCode::DeviceProofFailed, format!("the device's signature {why}")))?;
    if !still_paired(control, &device_id).await {
        let reason = "unknown device: never paired, or forgotten; pair it again";
        return Err(Refusal(CloseCode::UnknownDevice, reason.into()));
    }
    let proof = control.key.sign(&server_proof_message(&device_nonce, &server_nonce, &device_id));
    let welcome = LinkFrame::Welcome { signature: proof, copy: control.copy_name.clone(), name: control.name.clone() };
    sink.send(text(&welcome))
        .await
        .map_err(|_| Refusal(CloseCode::Normal, "the device left during the handshake".into()))?;
    Ok(Device { id: record.id, kind: record.kind, name: record.name, role: record.role })
}

/// Whether the store still holds the proven device as paired, read once more before it is let
/// in: a forget made through another copy reaches this one over the peer links at once and at
/// the next refresh at the latest, but a peer link that is down or still forming (a copy just
/// restarted) would let a forgotten device in until then. Only a device that proved its key
/// costs this read, so a flood of hellos cannot make a copy read the store. When the store does
/// not answer within [`CONFIRM_WITHIN`], the copy's registry decides, as it does for relaying
/// while the bucket is away.
async fn still_paired(control: &Control, device_id: &str) -> bool {
    match timeout(CONFIRM_WITHIN, control.registry.fetch(control.store.as_ref(), device_id)).await {
        Ok(Ok(found)) => found.is_some(),
        Ok(Err(error)) => {
            tracing::debug!(device = %device_id, %error, "the store did not confirm a device; its registry entry stands");
            true
        }
        Err(_) => {
            tracing::debug!(device = %device_id, "the store was slow to confirm a device; its registry entry stands");
            true
        }
    }
}

fn verify_device(
    public_key: &str,
    server_nonce: &str,
    device_nonce: &str,
    device_id: &str,
    signature: &str,
) -> Result<(), String> {
    encoding::decode_exact::<NONCE_LEN>(device_nonce).map_err(|e| format!("nonce: {e}"))?;
    let key = encoding::decode_exact::<32>(public_key).map_err(|e| format!("check failed: stored key {e}"))?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| "check failed: the stored key is not an Ed25519 key")?;
    let signature = encoding::decode_exact::<64>(signature)?;
    key.verify_strict(&device_proof_message(server_nonce, device_nonce, device_id), &Signature::from_bytes(&signature))
        .map_err(|_| "does not verify with the key it paired with".to_owned())
}

/// Handles one text frame from an authenticated device; returns the answer to send, if any.
async fn on_frame(control: &Arc<Control>, device: &Device, session: u64, body: &str) -> Option<LinkFrame> {
    let frame = match LinkFrame::decode(body) {
        Ok(frame) => frame,
        Err(error @ FrameError::TooLarge { .. }) => return Some(error_frame(ErrorCode::Malformed, error.to_string())),
        Err(error) => return Some(error_frame(error.error_code(), error.to_string())),
    };
    match frame {
        LinkFrame::Send { to, epoch, seq, first_unacked, body } => {
            let reason = match relayable(control, device, &to, &body).await {
                Err(reason) => reason,
                Ok(()) => {
                    let message = LinkFrame::Message {
                        from: device.id.clone(),
                        from_role: device.role,
                        epoch,
                        seq,
                        first_unacked,
                        body,
                    };
                    match control.sessions.send(&to, message) {
                        Ok(route) => {
                            control.metrics.record_relay(route);
                            return None;
                        }
                        // A device this copy still held as paired may have been forgotten
                        // where this copy did not hear of it yet: the store says which.
                        Err(NotQueued::Offline) => {
                            if control.still_paired(&to).await {
                                UndeliverableReason::Offline
                            } else {
                                UndeliverableReason::Unknown
                            }
                        }
                        Err(NotQueued::Full) => UndeliverableReason::Offline,
                    }
                }
            };
            Some(LinkFrame::Undeliverable { to, epoch, seq, reason })
        }
        LinkFrame::Ack { to, epoch, seq } => {
            // A lost ack costs only a resend, which the receiver's inbox drops; so an ack
            // that cannot be relayed is dropped rather than reported.
            if relay_target(control, device, &to).await.is_ok()
                && let Ok(route) = control.sessions.send(&to, LinkFrame::Acked { from: device.id.clone(), epoch, seq })
            {
                control.metrics.record_relay(route);
            }
            None
        }
        LinkFrame::Ping { t } => Some(LinkFrame::Pong { t }),
        LinkFrame::Pong { .. } => None,
        LinkFrame::Error { code, message } => {
            tracing::info!(device = %device.id, ?code, %message, "the device reported an error");
            None
        }
        LinkFrame::Request { id, request } => {
            // A request may wait on the store; it runs on its own so relaying never waits for
            // it, and its answer goes through the session's queue like any other frame.
            let (control, device_id, kind, role) = (control.clone(), device.id.clone(), device.kind, device.role);
            tokio::spawn(async move {
                let answer = crate::requests::answer(&control, kind, &device_id, role, id, request).await;
                let pages = answer.len();
                if control.sessions.send_to_session(&device_id, session, answer) == Err(NotQueued::Full) {
                    let error = format!("the answer ({pages} frames) does not fit in this link's queue now: ask again");
                    let failed = LinkFrame::RequestFailed { id, error, retry: true };
                    let _ = control.sessions.send_to_session(&device_id, session, vec![failed]);
                }
            });
            None
        }
        other => Some(error_frame(
            ErrorCode::NotAllowed,
            format!("devices do not send \"{}\" after the handshake", other.type_name()),
        )),
    }
}

/// A body within [`MAX_BODY_BYTES`], checked before anything is queued: its `message` then fits
/// under every frame cap on the way (the receiver's, and a peer link's as a `forward`), where a
/// larger one would close that link, and with a peer link every device it carries.
async fn relayable(control: &Control, from: &Device, to: &str, body: &Body) -> Result<(), UndeliverableReason> {
    if body.get().len() > MAX_BODY_BYTES {
        return Err(UndeliverableReason::TooLarge);
    }
    relay_target(control, from, to).await
}

/// Clients talk to hosts and hosts to clients, and only to paired devices. A device this copy
/// has not read yet (paired since the last refresh) is known from the copy it is connected to,
/// or else from one read of its record.
async fn relay_target(control: &Control, from: &Device, to: &str) -> Result<(), UndeliverableReason> {
    let kind = match control.registry.active_kind(to).or_else(|| control.sessions.kind_of(to)) {
        Some(kind) => kind,
        None => match control.registry.active_or_fetch(control.store.as_ref(), to).await {
            Ok(Some(record)) => record.kind,
            Ok(None) => return Err(UndeliverableReason::Unknown),
            // Cannot tell now: the sender keeps the message and retries.
            Err(_) => return Err(UndeliverableReason::Offline),
        },
    };
    if kind == from.kind {
        return Err(UndeliverableReason::NotAllowed);
    }
    Ok(())
}

/// Why a hello's device could not be looked up now.
#[derive(Debug)]
enum LookupRefused {
    /// The lookup budget is spent: try again shortly.
    Busy,
    /// The store did not answer.
    Store(hyperhive_object_store::StoreError),
}

/// The device a hello names, before it has proven anything: from the registry when this copy
/// holds it, otherwise from at most one store read, made only if the id is not known to be
/// absent and the lookup budget allows it. `Ok(None)`: not a paired device.
async fn device_for_hello(
    control: &Control,
    id: &str,
    from: Option<IpAddr>,
) -> Result<Option<DeviceRecord>, LookupRefused> {
    match control.registry.known(id) {
        Known::Active(record) => return Ok(Some(record)),
        Known::Refused => return Ok(None),
        Known::Unseen => {}
    }
    let guards = &control.guards;
    let now = std::time::Instant::now();
    if guards.unknown.contains(id, now) {
        return Ok(None);
    }
    if !guards.lookups.take(from, now) {
        control.metrics.lookups_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Err(LookupRefused::Busy);
    }
    let found = control.registry.fetch(control.store.as_ref(), id).await.map_err(LookupRefused::Store)?;
    if found.is_none() && records::is_device_id(id) {
        guards.unknown.insert(id, std::time::Instant::now());
    }
    Ok(found)
}
