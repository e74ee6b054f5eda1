//! The link between two copies, `GET /v1/peer` (`docs/control-plane/link-protocol.md`): both
//! sides prove they hold the control key and agree on the link's keys ([`crate::peer_crypto`]);
//! from then on every frame is sealed. Each tells the other which devices are connected to it,
//! forwards link frames for devices connected to the other (one hop), and passes on
//! revocations. One task runs each link, accepted ([`accept`]) or dialed ([`dial`]).

use crate::control::Control;
use crate::peer_crypto::{self, Ephemeral, Opener, Sealer};
use crate::wire::{self, WireIn, WireOut};
use futures::{Sink, SinkExt, Stream, StreamExt};
use hyperhive_control_link::transport::Target;
use hyperhive_control_proto::encoding;
use hyperhive_control_proto::link::{
    CloseCode, ErrorCode, HANDSHAKE_TIMEOUT, LinkFrame, MAX_PEER_FRAME_BYTES, NONCE_LEN, PEER_PROTOCOL_VERSION,
    PeerFrame, PeerRole, PeerTranscript, UndeliverableReason, peer_proof_message,
};
use rand::RngCore;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Why a link ended before it was up, or could not be dialed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PeerError(String);

/// The WebSocket settings of both ends: sealed frames of up to [`MAX_PEER_FRAME_BYTES`].
pub fn websocket_config() -> WebSocketConfig {
    let max = peer_crypto::sealed_len(MAX_PEER_FRAME_BYTES);
    hyperhive_control_link::websocket_config().max_message_size(Some(max)).max_frame_size(Some(max))
}

/// The keys of an established link: what it sends, what it receives.
type LinkKeys = (Sealer, Opener);

/// Serves a link another copy dialed.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(socket: WebSocketStream<S>, control: Arc<Control>) {
    let (mut sink, mut stream) = wire::wire(socket);
    match timeout(HANDSHAKE_TIMEOUT, accept_handshake(&mut sink, &mut stream, &control)).await {
        Ok(Ok((peer, keys))) => run(sink, stream, control, peer, keys).await,
        Ok(Err((code, reason))) => {
            control.metrics.peer_handshakes_refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(code = code.code(), %reason, "peer link refused");
            let _ = sink.send(WireOut::Close(code, reason)).await;
        }
        Err(_) => {
            let reason = format!("the handshake did not finish within {}s", HANDSHAKE_TIMEOUT.as_secs());
            let _ = sink.send(WireOut::Close(CloseCode::HandshakeTimeout, reason)).await;
        }
    }
}

/// Dials the copy `peer` (as its membership record names it) at `peer_url` and runs the link
/// until it ends. An error means it never came up.
pub async fn dial(control: Arc<Control>, peer: &str, peer_url: &str) -> Result<(), PeerError> {
    let target = Target::parse(peer_url).map_err(|e| PeerError(format!("peer URL of copy {peer}: {e}")))?;
    let stream = target.connect(None).await.map_err(|e| PeerError(e.to_string()))?;
    let url = target.ws_url("/v1/peer");
    let upgrade = tokio_tungstenite::client_async_with_config(&url, stream, Some(websocket_config()));
    let (socket, _) = timeout(HANDSHAKE_TIMEOUT, upgrade)
        .await
        .map_err(|_| PeerError(format!("{url}: no WebSocket upgrade within {}s", HANDSHAKE_TIMEOUT.as_secs())))?
        .map_err(|e| PeerError(format!("{url}: {e}")))?;
    let (mut sink, mut stream) = wire::wire(socket);
    let handshake = dial_handshake(&mut sink, &mut stream, &control, peer);
    match timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(keys)) => {
            run(sink, stream, control, peer.to_owned(), keys).await;
            Ok(())
        }
        Ok(Err(error)) => {
            control.metrics.peer_handshakes_refused.fetch_add(1, Ordering::Relaxed);
            let _ = sink.send(WireOut::Close(CloseCode::ProtocolViolation, error.0.clone())).await;
            Err(PeerError(format!("{url}: {error}")))
        }
        Err(_) => {
            Err(PeerError(format!("{url}: the handshake did not finish within {}s", HANDSHAKE_TIMEOUT.as_secs())))
        }
    }
}

fn fresh_nonce() -> String {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    encoding::encode(&nonce)
}

/// The next frame of the handshake, skipping WebSocket pings.
async fn next_frame(stream: &mut (impl Stream<Item = WireIn> + Unpin)) -> Result<PeerFrame, String> {
    loop {
        match stream.next().await {
            Some(WireIn::Control) => continue,
            Some(WireIn::Text(text)) => return PeerFrame::decode(&text).map_err(|e| e.to_string()),
            Some(WireIn::Binary) => return Err("a binary message: frames are JSON text".into()),
            Some(WireIn::TooLarge) => return Err(format!("a frame over {MAX_PEER_FRAME_BYTES} bytes")),
            Some(WireIn::Closed) | None => return Err("the other copy left during the handshake".into()),
        }
    }
}

/// A copy id as membership records hold it: short, lowercase, no separators.
fn valid_copy_id(copy: &str) -> bool {
    !copy.is_empty()
        && copy.len() <= 64
        && copy.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn version_mismatch(theirs: u32) -> String {
    format!("this copy speaks peer protocol version {PEER_PROTOCOL_VERSION}, the other {theirs}: upgrade every copy")
}

async fn accept_handshake(
    sink: &mut (impl Sink<WireOut> + Unpin),
    stream: &mut (impl Stream<Item = WireIn> + Unpin),
    control: &Control,
) -> Result<(String, LinkKeys), (CloseCode, String)> {
    let me = control.copy_name.as_str();
    let server_nonce = fresh_nonce();
    let ephemeral = Ephemeral::generate();
    let my_key = ephemeral.public().to_owned();
    let challenge = PeerFrame::PeerChallenge {
        version: PEER_PROTOCOL_VERSION,
        copy: me.to_owned(),
        server_nonce: server_nonce.clone(),
        key: my_key.clone(),
    };
    let left = || (CloseCode::Normal, "the other copy left during the handshake".to_owned());
    sink.send(WireOut::Text(challenge.encode())).await.map_err(|_| left())?;
    let hello =
        next_frame(stream).await.map_err(|e| (CloseCode::ProtocolViolation, format!("expected peer_hello: {e}")))?;
    let PeerFrame::PeerHello { version, copy, dialed, peer_nonce, key, signature } = hello else {
        return Err((CloseCode::ProtocolViolation, "expected peer_hello".into()));
    };
    if version != PEER_PROTOCOL_VERSION {
        return Err((CloseCode::UnsupportedVersion, version_mismatch(version)));
    }
    if !valid_copy_id(&copy) || copy == me {
        return Err((CloseCode::ProtocolViolation, format!("{copy:?} is not another copy's id")));
    }
    if dialed != me {
        let reason = format!(
            "copy {copy} dialed copy {dialed:?} but reached copy {me}: its membership record of {dialed:?} leads here (a stale record, or a relay on the path)"
        );
        return Err((CloseCode::ProtocolViolation, reason));
    }
    let transcript = PeerTranscript {
        acceptor: me,
        acceptor_nonce: &server_nonce,
        acceptor_key: &my_key,
        dialer: &copy,
        dialer_nonce: &peer_nonce,
        dialer_key: &key,
    };
    if encoding::decode_exact::<NONCE_LEN>(&peer_nonce).is_err()
        || !control.key.verifies(&peer_proof_message(PeerRole::Dialer, &transcript), &signature)
    {
        let reason =
            "the peer's signature does not verify with the control key: it is not a copy of this control plane";
        return Err((CloseCode::DeviceProofFailed, reason.into()));
    }
    let keys = ephemeral
        .link_keys(&transcript, PeerRole::Acceptor, &peer_crypto::link_secret(&control.key))
        .map_err(|e| (CloseCode::ProtocolViolation, e.to_string()))?;
    let signature = control.key.sign(&peer_proof_message(PeerRole::Acceptor, &transcript));
    sink.send(WireOut::Text(PeerFrame::PeerWelcome { signature }.encode())).await.map_err(|_| left())?;
    Ok((copy, keys))
}

async fn dial_handshake(
    sink: &mut (impl Sink<WireOut> + Unpin),
    stream: &mut (impl Stream<Item = WireIn> + Unpin),
    control: &Control,
    expected: &str,
) -> Result<LinkKeys, PeerError> {
    let PeerFrame::PeerChallenge { version, copy, server_nonce, key } = next_frame(stream).await.map_err(PeerError)?
    else {
        return Err(PeerError("expected peer_challenge".into()));
    };
    if version != PEER_PROTOCOL_VERSION {
        return Err(PeerError(version_mismatch(version)));
    }
    if copy != expected {
        return Err(PeerError(format!("the peer answers as copy {copy}, its membership record says {expected}")));
    }
    let me = control.copy_name.as_str();
    let peer_nonce = fresh_nonce();
    let ephemeral = Ephemeral::generate();
    let my_key = ephemeral.public().to_owned();
    let transcript = PeerTranscript {
        acceptor: expected,
        acceptor_nonce: &server_nonce,
        acceptor_key: &key,
        dialer: me,
        dialer_nonce: &peer_nonce,
        dialer_key: &my_key,
    };
    let signature = control.key.sign(&peer_proof_message(PeerRole::Dialer, &transcript));
    let hello = PeerFrame::PeerHello {
        version,
        copy: me.to_owned(),
        dialed: expected.to_owned(),
        peer_nonce: peer_nonce.clone(),
        key: my_key.clone(),
        signature,
    };
    sink.send(WireOut::Text(hello.encode()))
        .await
        .map_err(|_| PeerError("the peer left during the handshake".into()))?;
    let PeerFrame::PeerWelcome { signature } = next_frame(stream).await.map_err(PeerError)? else {
        return Err(PeerError("expected peer_welcome".into()));
    };
    if !control.key.verifies(&peer_proof_message(PeerRole::Acceptor, &transcript), &signature) {
        return Err(PeerError("the peer did not prove the control key: it is not a copy of this control plane".into()));
    }
    ephemeral
        .link_keys(&transcript, PeerRole::Dialer, &peer_crypto::link_secret(&control.key))
        .map_err(|e| PeerError(e.to_string()))
}

/// The socket failed while sending (what failed is logged where the socket is read).
#[derive(Debug)]
struct SendFailed;

/// The link's sink with every frame sealed (closes stay as they are).
fn sealing(sink: impl Sink<WireOut> + Unpin, mut sealer: Sealer) -> impl Sink<WireOut, Error = SendFailed> + Unpin {
    sink.sink_map_err(|_| SendFailed).with(move |out: WireOut| {
        std::future::ready(Ok::<_, SendFailed>(match out {
            WireOut::Text(frame) => WireOut::Text(sealer.seal(&frame)),
            close @ WireOut::Close(..) => close,
        }))
    })
}

/// The link's stream with every frame opened. A frame that does not open ends the stream: the
/// link is dropped rather than trusted further.
fn opening(
    stream: impl Stream<Item = WireIn> + Unpin,
    mut opener: Opener,
    control: Arc<Control>,
    peer: String,
) -> impl Stream<Item = WireIn> + Unpin {
    stream.map(move |incoming| match incoming {
        WireIn::Text(sealed) => opener.open(&sealed).map_or_else(
            |error| {
                control.metrics.peer_frames_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, %error, "dropping the peer link");
                WireIn::Closed
            },
            WireIn::Text,
        ),
        other => other,
    })
}

/// Takes the link's devices offline however the link task ends (even when it is aborted).
struct Attached {
    control: Arc<Control>,
    peer: String,
    link: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.control.sessions.detach_peer(&self.peer, self.link);
        tracing::info!(peer = %self.peer, "peer link down");
    }
}

/// Runs an authenticated link until either side ends it.
async fn run(
    sink: impl Sink<WireOut> + Unpin,
    stream: impl Stream<Item = WireIn> + Unpin,
    control: Arc<Control>,
    peer: String,
    (sealer, opener): LinkKeys,
) {
    let (link, mut queue) = control.sessions.attach_peer(&peer, control.clock.now());
    let _attached = Attached { control: control.clone(), peer: peer.clone(), link };
    tracing::info!(%peer, "peer link up");
    let mut sink = sealing(sink, sealer);
    let mut stream = opening(stream, opener, control.clone(), peer.clone());
    let answer = |text: String| {
        // Every frame, pings and pongs included, is proof that the peer is alive now.
        control.sessions.peer_heard(&peer, link, control.clock.now());
        std::future::ready(match PeerFrame::decode(&text) {
            Ok(frame) => on_frame(&control, &peer, frame),
            Err(error) => Some(PeerFrame::Error { code: error.error_code(), message: error.to_string() }),
        })
    };
    let close = wire::run(&mut sink, &mut stream, &mut queue, MAX_PEER_FRAME_BYTES, answer).await;
    if let Some((code, reason)) = close {
        tracing::info!(%peer, code = code.code(), %reason, "closing the peer link");
        let _ = sink.send(WireOut::Close(code, reason)).await;
    }
}

/// Handles one frame from a peer; returns the answer to send back, if any.
fn on_frame(control: &Control, peer: &str, frame: PeerFrame) -> Option<PeerFrame> {
    let sessions = &control.sessions;
    match frame {
        PeerFrame::Sessions { sessions: listed } => {
            for info in listed {
                sessions.peer_session_opened(peer, info);
            }
            None
        }
        PeerFrame::SessionOpened { session } => {
            sessions.peer_session_opened(peer, session);
            None
        }
        PeerFrame::SessionClosed { device_id, session } => {
            sessions.peer_session_closed(peer, &device_id, session);
            None
        }
        PeerFrame::Forward { to, frame } => match *frame {
            frame @ (LinkFrame::Message { .. } | LinkFrame::Acked { .. } | LinkFrame::Undeliverable { .. }) => {
                match sessions.deliver_forwarded(&to, frame) {
                    // The sender's copy routed to a session here that a forget just ended: the
                    // sender must hear that the device is gone, not that it is away.
                    Some(PeerFrame::Forward { to: sender, frame })
                        if control.registry.known(&to) == crate::registry::Known::Refused =>
                    {
                        let frame = match *frame {
                            LinkFrame::Undeliverable { to, epoch, seq, .. } => {
                                LinkFrame::Undeliverable { to, epoch, seq, reason: UndeliverableReason::Unknown }
                            }
                            other => other,
                        };
                        Some(PeerFrame::Forward { to: sender, frame: Box::new(frame) })
                    }
                    answer => answer,
                }
            }
            other => Some(PeerFrame::Error {
                code: ErrorCode::NotAllowed,
                message: format!("only message, acked and undeliverable are forwarded, not \"{}\"", other.type_name()),
            }),
        },
        PeerFrame::Revoked { device_id } => {
            tracing::info!(%peer, device = %device_id, "a peer forgot a device");
            control.revoked_by_peer(&device_id);
            None
        }
        PeerFrame::Paired { record, version } => {
            if let Err(error) = control.paired_by_peer(&record, &version) {
                tracing::warn!(%peer, %error, "a peer's paired device is not one this copy reads; it waits for the refresh");
            }
            None
        }
        // A frame a newer peer sends that this build does not know: what it tells, the
        // refresh of the registry tells later.
        PeerFrame::Unknown => None,
        PeerFrame::Ping { t } => Some(PeerFrame::Pong { t }),
        PeerFrame::Pong { t } => {
            control.peer_confirmations.answered(peer, t);
            None
        }
        PeerFrame::Error { code, message } => {
            tracing::warn!(%peer, ?code, %message, "the peer reported an error");
            None
        }
        _ => Some(PeerFrame::Error {
            code: ErrorCode::NotAllowed,
            message: "handshake frames are not sent on an established link".into(),
        }),
    }
}
