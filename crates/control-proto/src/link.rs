//! The frames of the device link (`GET /v1/link`) and of the link between copies
//! (`GET /v1/peer`). The flow, every frame and every field is written down in
//! `docs/control-plane/link-protocol.md`; this module is its typed form.
//!
//! Every frame is one WebSocket text message holding one JSON object whose `type` field names
//! the frame. Receivers decode with [`LinkFrame::decode`] or [`PeerFrame::decode`], which check
//! the size before parsing and never panic (a property test feeds them arbitrary input): an
//! oversized frame, malformed JSON, a missing or unknown `type` and a known type with bad fields
//! each get their own [`FrameError`], so a receiver can answer with an error frame or a close
//! code instead of dying.
//!
//! # Handshake (device link)
//! The server speaks first with a challenge holding a fresh nonce. The device answers with its
//! own nonce and the device key's signature over [`device_proof_message`]; the server answers
//! with the control key's signature over [`server_proof_message`].
//!
//! # Handshake (between copies)
//! The accepting copy's challenge names it and carries a nonce and an ephemeral X25519 key; the
//! dialing copy answers with the same of its own and the control key's signature over
//! [`peer_proof_message`] in the [`PeerRole::Dialer`] role; the acceptor answers with its
//! signature in the [`PeerRole::Acceptor`] role. Both sign the whole [`PeerTranscript`]: both
//! copy ids (so a relay to another copy fails), both nonces (no replay on another connection)
//! and both ephemeral keys (so the signatures vouch for the session keys derived from them,
//! which seal every later frame).
//!
//! Every message the control key or a device key signs starts with its own line naming the
//! protocol, its version and the role (`hyperhive link device v1`, `hyperhive link server v1`,
//! `hyperhive peer v2 dialer`, `hyperhive peer v2 acceptor`, `hyperhive device v1`, ...), so a
//! signature made in one role never verifies in another.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::DeviceKind;

/// The version of the device link protocol; both sides send it in the handshake and a
/// mismatch is closed with [`CloseCode::UnsupportedVersion`].
pub const LINK_PROTOCOL_VERSION: u32 = 2;

/// The version of the protocol between copies (`/v1/peer`), checked the same way. Version 2
/// seals every frame after the handshake; copies of version 1 and 2 do not link.
pub const PEER_PROTOCOL_VERSION: u32 = 2;

/// The largest frame either side accepts, in bytes of JSON text. Relayed bodies are small
/// control messages (a prompt, a terminal chunk); 64 KiB bounds the memory a hostile peer can
/// make a receiver hold while decoding, and is the WebSocket message cap devices set.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;

/// The largest `body` of a `send`, in bytes of JSON text as the sender wrote it. The copy relays
/// those bytes unchanged in a `message`, whose other fields take well under 1 KiB (two device
/// ids of at most 64 bytes, three numbers, the field names), so any body up to this size reaches
/// its receiver in a frame under [`MAX_FRAME_BYTES`]. A larger body is refused by the sender's
/// outbox, and answered `undeliverable` with [`UndeliverableReason::TooLarge`] by the copy.
pub const MAX_BODY_BYTES: usize = MAX_FRAME_BYTES - 1024;

/// The largest frame on `/v1/peer`: a `forward` wraps one link frame of up to
/// [`MAX_FRAME_BYTES`] with its envelope, and `sessions` lists are sent in chunks of
/// [`SESSIONS_PER_FRAME`] so they stay under it too.
pub const MAX_PEER_FRAME_BYTES: usize = MAX_FRAME_BYTES + 4 * 1024;

/// Sessions listed in one `sessions` frame (about 100 bytes each).
pub const SESSIONS_PER_FRAME: usize = 256;

/// Hosts listed in one `presence` frame: a host with the longest name (64 characters of up to
/// 4 bytes, escaped) takes under 400 bytes, so a frame stays well under [`MAX_FRAME_BYTES`].
/// The list at connect is as many `presence` frames as it takes ([`presence_frames`]).
pub const HOSTS_PER_PRESENCE: usize = 150;

/// Devices listed in one `devices` reply: a device with the longest name takes under 450 bytes
/// (its kind besides what a host's presence holds), so a page stays well under
/// [`MAX_FRAME_BYTES`]. A longer list is as many replies as it takes ([`devices_replies`]).
pub const DEVICES_PER_REPLY: usize = 120;

/// Bytes of randomness in every handshake nonce (base64url on the wire).
pub const NONCE_LEN: usize = 32;

/// Each side sends an application `ping` this often (besides WebSocket pings, which some load
/// balancers ignore): well under the 60 s after which many proxies cut idle connections.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// A side that hears nothing for this long treats the connection as dead (three missed pings),
/// so a device notices a dead copy within seconds and reconnects.
pub const DEAD_AFTER: Duration = Duration::from_secs(15);

/// The handshake must finish within this; the server closes with [`CloseCode::HandshakeTimeout`].
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A frame on `/v1/link`, in either direction (the doc says which side sends which).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum LinkFrame {
    /// Server, first frame on a new connection.
    Challenge {
        version: u32,
        /// [`NONCE_LEN`] random bytes, base64url.
        server_nonce: String,
    },
    /// Device, answering the challenge.
    Hello {
        version: u32,
        device_id: String,
        /// [`NONCE_LEN`] random bytes, base64url.
        device_nonce: String,
        /// The device key's signature over [`device_proof_message`], base64url.
        signature: String,
    },
    /// Server, after the device's proof holds: the control key's proof.
    Welcome {
        /// The control key's signature over [`server_proof_message`], base64url.
        signature: String,
        /// The name of the copy the device is connected to (for logs and status).
        copy: String,
        /// The control plane's name (`AGENTS_CONTROL_NAME`), the one windows and phones show;
        /// absent when the control plane was given none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Device to server: relay `body` to the device `to`. `seq` counts from 1 in each stream, a
    /// stream being one sender's messages to one receiver since the sender's outbox was made;
    /// `epoch` (random) names the stream.
    Send {
        to: String,
        epoch: u64,
        seq: u64,
        /// The oldest seq of this stream the sender still holds unacked (at most `seq`). A
        /// receiver that does not know the stream (its first message, or the receiver
        /// restarted) starts it only there, so a message lost at a stream's start is noticed.
        first_unacked: u64,
        /// At most [`MAX_BODY_BYTES`].
        body: Body,
    },
    /// Server to device: a relayed message from the device `from`, its `body` the bytes the
    /// sender wrote. `from_role` is the role the sender's code gave it, when the sender is a
    /// client paired with one (a client paired before roles existed has none).
    Message {
        from: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_role: Option<crate::role::Role>,
        epoch: u64,
        seq: u64,
        first_unacked: u64,
        body: Body,
    },
    /// Device to server: every message from `to` in stream `epoch` up to and including `seq`
    /// has reached the application (a cumulative, end-to-end ack).
    Ack {
        to: String,
        epoch: u64,
        seq: u64,
    },
    /// Server to device: the device `from` acked this stream up to `seq`.
    Acked {
        from: String,
        epoch: u64,
        seq: u64,
    },
    /// Server to device: the message could not be relayed. The sender keeps it and sends it
    /// again when the target is back (it is never silently dropped).
    Undeliverable {
        to: String,
        epoch: u64,
        seq: u64,
        reason: UndeliverableReason,
    },
    /// Server to client: every host with its online state (at connect).
    Presence {
        hosts: Vec<HostPresence>,
    },
    /// Server to client: one host changed (paired, connected, disconnected, forgotten).
    PresenceChanged {
        host: HostPresence,
    },
    /// Client to server: a request; answered by `reply` or `request_failed` with the same id.
    Request {
        id: u64,
        request: Request,
    },
    /// Server to client.
    Reply {
        id: u64,
        reply: Reply,
    },
    /// Server to client: the request was refused; `retry` says whether trying again later can
    /// help (the store is unreachable) or not (the device may not make it, bad arguments).
    RequestFailed {
        id: u64,
        error: String,
        retry: bool,
    },
    /// Either side, every few seconds; the other answers `pong` with the same `t`.
    Ping {
        t: u64,
    },
    Pong {
        t: u64,
    },
    /// Either side: something the receiver sent was refused; the connection stays open.
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Decoding only: a `type` this version does not know. [`LinkFrame::decode`] turns it into
    /// [`FrameError::UnknownType`], so it never reaches a receiver; never send it.
    #[serde(other)]
    Unknown,
}

/// A frame on `/v1/peer`, between two copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum PeerFrame {
    /// Accepting copy, first frame.
    PeerChallenge {
        version: u32,
        /// The accepting copy's id: the dialer checks it is the copy it meant to dial.
        copy: String,
        /// [`NONCE_LEN`] random bytes, base64url.
        server_nonce: String,
        /// The accepting copy's ephemeral X25519 public key for this link, base64url.
        key: String,
    },
    /// Dialing copy: its id, the id of the copy it dialed, its nonce and ephemeral key, and
    /// the control key's signature over [`peer_proof_message`] as [`PeerRole::Dialer`].
    PeerHello {
        version: u32,
        copy: String,
        dialed: String,
        peer_nonce: String,
        key: String,
        signature: String,
    },
    /// Accepting copy: the control key's signature over [`peer_proof_message`] as
    /// [`PeerRole::Acceptor`]. Every later frame in both directions is sealed.
    PeerWelcome {
        signature: String,
    },
    /// Every device session on the sending copy (at link-up).
    Sessions {
        sessions: Vec<SessionInfo>,
    },
    /// A device connected to the sending copy (a newer session replaces any older one).
    SessionOpened {
        session: SessionInfo,
    },
    /// A device's session on the sending copy ended.
    SessionClosed {
        device_id: String,
        session: u64,
    },
    /// A link frame for the device `to`, connected to the receiving copy (one hop: the
    /// receiver never forwards it again). Carries `message`, `acked` or `undeliverable`.
    Forward {
        to: String,
        frame: Box<LinkFrame>,
    },
    /// A device was forgotten: close its sessions now and refuse it from now on.
    Revoked {
        device_id: String,
    },
    /// A device paired through the sending copy: its record as the store now holds it (JSON,
    /// docs/control-plane/store.md) and the store's version of it, so the receiver knows the
    /// device at once instead of at its next refresh of the registry.
    Paired {
        record: String,
        version: String,
    },
    Ping {
        t: u64,
    },
    Pong {
        t: u64,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Decoding only, as [`LinkFrame::Unknown`].
    #[serde(other)]
    Unknown,
}

/// A relayed message's body: any JSON value, kept as the exact text its sender wrote. A copy
/// relays these bytes unchanged, so a message is the same size (and the same JSON: `1e5` stays
/// `1e5`) at its receiver as at its sender, and a body the sender checked against
/// [`MAX_BODY_BYTES`] cannot grow past the frame cap on the way.
///
/// serde cannot keep raw text inside internally tagged enums, so frames holding a body are
/// decoded only by [`LinkFrame::decode`] and [`PeerFrame::decode`], never by `serde_json`
/// directly.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Body(Box<RawValue>);

impl Body {
    /// Checks that `text` is one JSON value and keeps it as written (without surrounding
    /// whitespace).
    pub fn parse(text: &str) -> Result<Body, serde_json::Error> {
        RawValue::from_string(text.trim().to_owned()).map(Body)
    }

    /// The JSON text, as its sender wrote it.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl From<serde_json::Value> for Body {
    fn from(value: serde_json::Value) -> Body {
        Body(serde_json::value::to_raw_value(&value).expect("a JSON value always serializes"))
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

/// `send` and `message` as plain structs: their bodies keep their text here, where the tagged
/// enum would re-encode them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendFields {
    #[serde(rename = "type")]
    _type: String,
    to: String,
    epoch: u64,
    seq: u64,
    first_unacked: u64,
    body: Body,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageFields {
    #[serde(rename = "type")]
    _type: String,
    from: String,
    #[serde(default)]
    from_role: Option<crate::role::Role>,
    epoch: u64,
    seq: u64,
    first_unacked: u64,
    body: Body,
}

/// `forward` with its link frame still as text, decoded by [`LinkFrame::decode`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardFields<'a> {
    #[serde(rename = "type")]
    _type: String,
    to: String,
    #[serde(borrow)]
    frame: &'a RawValue,
}

/// Why a message was not relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UndeliverableReason {
    /// The target is paired but connected to no copy.
    Offline,
    /// No paired device has that id.
    Unknown,
    /// Clients talk to hosts and hosts to clients, never client to client or host to host.
    NotAllowed,
    /// The body is over [`MAX_BODY_BYTES`]: it will never be relayed, however often it is sent.
    TooLarge,
}

/// A host as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostPresence {
    pub device_id: String,
    pub name: String,
    /// False once the host is forgotten (and then it is gone from later lists).
    pub paired: bool,
    pub online: bool,
}

/// A device session as copies tell each other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionInfo {
    pub device_id: String,
    pub kind: DeviceKind,
    /// The name the device paired with (for the presence clients on other copies see before
    /// their registry has the device).
    pub name: String,
    /// Milliseconds since the Unix epoch when the session was authenticated, then a tiebreak:
    /// the greater value is the newer session, which is the one kept.
    pub session: u64,
}

/// What a client may ask of the control plane over its link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Request {
    /// Make a pairing code for a new client or host.
    MakeCode {
        kind: DeviceKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Seconds the code stays valid; the control plane's default (600) when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_secs: Option<u64>,
    },
    ListDevices,
    ForgetDevice {
        device_id: String,
    },
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Reply {
    Code {
        code: String,
        /// RFC 3339.
        expires_at: String,
    },
    /// One page of the list: a list of more than [`DEVICES_PER_REPLY`] devices is answered
    /// with as many `devices` replies of the same id as it takes, every one but the last with
    /// `more: true` ([`devices_replies`]).
    Devices {
        devices: Vec<DeviceInfo>,
        /// True when the store was unreachable and the list is the copy's in-memory registry.
        from_memory: bool,
        /// More pages of this list follow.
        #[serde(default)]
        more: bool,
    },
    Forgotten {
        device_id: String,
    },
}

/// One paired device in a `devices` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    pub device_id: String,
    pub kind: DeviceKind,
    pub name: String,
    pub online: bool,
}

/// What an `error` frame is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// Not JSON, or a known type with missing or wrong fields.
    Malformed,
    /// A `type` the receiver does not know (a newer peer); the frame was ignored.
    UnknownType,
    /// A frame the sender may not send in this state or role (a host sending `request`).
    NotAllowed,
}

/// WebSocket close codes the control plane and devices use, with the reason text beside them.
/// 1000-1011 are the standard codes; 4000-4999 are private to this protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseCode {
    Normal,
    /// The copy is shutting down: reconnect at once (to another copy).
    GoingAway,
    /// A binary message: every frame is JSON text.
    UnsupportedData,
    /// A frame exceeded [`MAX_FRAME_BYTES`].
    TooLarge,
    /// The copy failed internally; reconnect.
    Internal,
    /// The copy cannot answer now (the store is unreachable and it has not seen this device
    /// yet): reconnect, to it or another copy.
    TryAgainLater,
    /// The handshake did not finish in time.
    HandshakeTimeout,
    /// The device id is not in the registry (never paired, or forgotten): pair again.
    UnknownDevice,
    /// The device's signature over the server nonce did not verify.
    DeviceProofFailed,
    /// The server's signature did not verify with the control key from the code: this is not
    /// the control plane the device paired with. Sent by devices.
    ServerProofFailed,
    /// The device was forgotten while connected.
    Revoked,
    /// A newer session of the same device connected (here or on another copy).
    Replaced,
    /// The other side speaks another [`LINK_PROTOCOL_VERSION`].
    UnsupportedVersion,
    /// The first frames were not the handshake.
    ProtocolViolation,
}

impl CloseCode {
    pub fn code(self) -> u16 {
        match self {
            CloseCode::Normal => 1000,
            CloseCode::GoingAway => 1001,
            CloseCode::UnsupportedData => 1003,
            CloseCode::TooLarge => 1009,
            CloseCode::Internal => 1011,
            CloseCode::TryAgainLater => 1013,
            CloseCode::HandshakeTimeout => 4000,
            CloseCode::UnknownDevice => 4001,
            CloseCode::DeviceProofFailed => 4002,
            CloseCode::ServerProofFailed => 4003,
            CloseCode::Revoked => 4004,
            CloseCode::Replaced => 4005,
            CloseCode::UnsupportedVersion => 4006,
            CloseCode::ProtocolViolation => 4007,
        }
    }

    /// Every code, to map a received number back ([`CloseCode::from_code`]).
    const ALL: [CloseCode; 14] = [
        CloseCode::Normal,
        CloseCode::GoingAway,
        CloseCode::UnsupportedData,
        CloseCode::TooLarge,
        CloseCode::Internal,
        CloseCode::TryAgainLater,
        CloseCode::HandshakeTimeout,
        CloseCode::UnknownDevice,
        CloseCode::DeviceProofFailed,
        CloseCode::ServerProofFailed,
        CloseCode::Revoked,
        CloseCode::Replaced,
        CloseCode::UnsupportedVersion,
        CloseCode::ProtocolViolation,
    ];

    pub fn from_code(code: u16) -> Option<CloseCode> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// Whether a device should reconnect after this close, or stop and tell its user.
    pub fn reconnect(self) -> bool {
        !matches!(
            self,
            CloseCode::UnknownDevice
                | CloseCode::DeviceProofFailed
                | CloseCode::ServerProofFailed
                | CloseCode::Revoked
                | CloseCode::UnsupportedVersion
        )
    }
}

/// Why a frame was not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes: send smaller messages")]
    TooLarge { len: usize, max: usize },
    #[error("frame is not a JSON object with a string \"type\" field: {0}")]
    NotAFrame(String),
    #[error("unknown frame type \"{0}\" (this side speaks link protocol version {LINK_PROTOCOL_VERSION})")]
    UnknownType(String),
    #[error("frame \"{kind}\" is malformed: {detail}")]
    Malformed { kind: String, detail: String },
}

impl FrameError {
    /// The error code to answer with in an `error` frame ([`FrameError::TooLarge`] closes the
    /// connection with [`CloseCode::TooLarge`] instead).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            FrameError::UnknownType(_) => ErrorCode::UnknownType,
            _ => ErrorCode::Malformed,
        }
    }
}

/// Just the `type` field, to tell an unknown type from a malformed known one.
#[derive(Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: String,
}

/// How one frame family decodes the types whose text the tagged enum would not keep: `None`
/// for every other type.
type DecodeRaw<F> = fn(kind: &str, text: &str) -> Option<Result<F, String>>;

/// The shared decoding of both frame families: size first, then JSON, then the type.
fn decode_frame<F: DeserializeOwned>(
    text: &str,
    max: usize,
    is_unknown: fn(&F) -> bool,
    decode_raw: DecodeRaw<F>,
) -> Result<F, FrameError> {
    if text.len() > max {
        return Err(FrameError::TooLarge { len: text.len(), max });
    }
    let kind = serde_json::from_str::<TypeOnly>(text).map_err(|e| FrameError::NotAFrame(e.to_string()))?.kind;
    if let Some(decoded) = decode_raw(&kind, text) {
        return decoded.map_err(|detail| FrameError::Malformed { kind, detail });
    }
    let is_unknown_kind =
        || serde_json::from_value::<F>(serde_json::json!({ "type": kind })).is_ok_and(|frame| is_unknown(&frame));
    match serde_json::from_str::<F>(text) {
        Ok(frame) if !is_unknown(&frame) => Ok(frame),
        Ok(_) => Err(FrameError::UnknownType(kind)),
        Err(_) if is_unknown_kind() => Err(FrameError::UnknownType(kind)),
        Err(e) => Err(FrameError::Malformed { kind, detail: e.to_string() }),
    }
}

impl LinkFrame {
    /// Decodes one received text message. Never panics, whatever `text` holds.
    pub fn decode(text: &str) -> Result<LinkFrame, FrameError> {
        decode_frame(text, MAX_FRAME_BYTES, |f| matches!(f, LinkFrame::Unknown), LinkFrame::decode_raw)
    }

    fn decode_raw(kind: &str, text: &str) -> Option<Result<LinkFrame, String>> {
        let decoded = match kind {
            "send" => serde_json::from_str::<SendFields>(text).map(|f| LinkFrame::Send {
                to: f.to,
                epoch: f.epoch,
                seq: f.seq,
                first_unacked: f.first_unacked,
                body: f.body,
            }),
            "message" => serde_json::from_str::<MessageFields>(text).map(|f| LinkFrame::Message {
                from: f.from,
                from_role: f.from_role,
                epoch: f.epoch,
                seq: f.seq,
                first_unacked: f.first_unacked,
                body: f.body,
            }),
            _ => return None,
        };
        Some(decoded.map_err(|e| e.to_string()))
    }

    /// The JSON text to send.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("link frames always serialize to JSON")
    }

    /// The frame's `type`, for logs and error messages.
    pub fn type_name(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "unknown".into())
    }
}

impl PeerFrame {
    /// Decodes one received text message. Never panics, whatever `text` holds.
    pub fn decode(text: &str) -> Result<PeerFrame, FrameError> {
        decode_frame(text, MAX_PEER_FRAME_BYTES, |f| matches!(f, PeerFrame::Unknown), PeerFrame::decode_raw)
    }

    fn decode_raw(kind: &str, text: &str) -> Option<Result<PeerFrame, String>> {
        if kind != "forward" {
            return None;
        }
        let decoded = serde_json::from_str::<ForwardFields>(text).map_err(|e| e.to_string()).and_then(|f| {
            let frame = LinkFrame::decode(f.frame.get()).map_err(|e| format!("frame: {e}"))?;
            Ok(PeerFrame::Forward { to: f.to, frame: Box::new(frame) })
        });
        Some(decoded)
    }

    /// The JSON text to send.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("peer frames always serialize to JSON")
    }
}

/// `items` cut into pages of at most `per_page`; one empty page when there are none, so a list
/// is always answered.
fn pages<T: Clone>(items: &[T], per_page: usize) -> Vec<Vec<T>> {
    if items.is_empty() {
        return vec![vec![]];
    }
    items.chunks(per_page).map(<[T]>::to_vec).collect()
}

/// The `presence` frames that tell a client every host at connect: one frame when there are
/// none, else chunks of [`HOSTS_PER_PRESENCE`].
pub fn presence_frames(hosts: Vec<HostPresence>) -> Vec<LinkFrame> {
    pages(&hosts, HOSTS_PER_PRESENCE).into_iter().map(|hosts| LinkFrame::Presence { hosts }).collect()
}

/// The `reply` frames answering `list_devices` request `id`: pages of at most
/// [`DEVICES_PER_REPLY`], all but the last marked `more`, so each stays under the frame cap.
pub fn devices_replies(id: u64, devices: &[DeviceInfo], from_memory: bool) -> Vec<LinkFrame> {
    let pages = pages(devices, DEVICES_PER_REPLY);
    let last = pages.len() - 1;
    pages
        .into_iter()
        .enumerate()
        .map(|(n, devices)| LinkFrame::Reply { id, reply: Reply::Devices { devices, from_memory, more: n < last } })
        .collect()
}

/// The bytes a device signs with its device key to answer a challenge.
pub fn device_proof_message(server_nonce: &str, device_nonce: &str, device_id: &str) -> Vec<u8> {
    format!("hyperhive link device v{LINK_PROTOCOL_VERSION}\n{server_nonce}\n{device_nonce}\n{device_id}").into_bytes()
}

/// The bytes the accepting side of a device link signs with the control key: the device's
/// nonce first, so it proves possession of the key to that device, bound to this connection's
/// server nonce and to the device id it authenticated. Device links only: copies sign
/// [`peer_proof_message`].
pub fn server_proof_message(connecting_nonce: &str, server_nonce: &str, identity: &str) -> Vec<u8> {
    format!("hyperhive link server v1\n{connecting_nonce}\n{server_nonce}\n{identity}").into_bytes()
}

/// Which end of a link between copies signs a [`peer_proof_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRole {
    Dialer,
    Acceptor,
}

/// Everything both copies say in the handshake of a link between them, as it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTranscript<'a> {
    pub acceptor: &'a str,
    pub acceptor_nonce: &'a str,
    pub acceptor_key: &'a str,
    pub dialer: &'a str,
    pub dialer_nonce: &'a str,
    pub dialer_key: &'a str,
}

impl PeerTranscript<'_> {
    /// The fields, each as its length in bytes, a colon and the field, so no choice of
    /// field values can make two different transcripts encode alike.
    pub fn encode(&self) -> Vec<u8> {
        let fields =
            [self.acceptor, self.acceptor_nonce, self.acceptor_key, self.dialer, self.dialer_nonce, self.dialer_key];
        let mut out = Vec::new();
        for field in fields {
            out.extend_from_slice(format!("{}:{field}\n", field.len()).as_bytes());
        }
        out
    }
}

/// The bytes a copy signs with the control key in the handshake between copies: a line naming
/// the protocol, its version and the signer's role, then the whole transcript.
pub fn peer_proof_message(role: PeerRole, transcript: &PeerTranscript<'_>) -> Vec<u8> {
    let role = match role {
        PeerRole::Dialer => "dialer",
        PeerRole::Acceptor => "acceptor",
    };
    let mut message = format!("hyperhive peer v{PEER_PROTOCOL_VERSION} {role}\n").into_bytes();
    message.extend(transcript.encode());
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn samples() -> Vec<LinkFrame> {
        vec![
            LinkFrame::Challenge { version: 1, server_nonce: "bm9uY2U".into() },
            LinkFrame::Hello {
                version: 1,
                device_id: "d1".into(),
                device_nonce: "bg".into(),
                signature: "c2ln".into(),
            },
            LinkFrame::Welcome { signature: "c2ln".into(), copy: "cp1".into(), name: None },
            LinkFrame::Welcome { signature: "c2ln".into(), copy: "cp1".into(), name: Some("home".into()) },
            LinkFrame::Send {
                to: "h1".into(),
                epoch: 7,
                seq: 3,
                first_unacked: 2,
                body: json!({"prompt": "hi"}).into(),
            },
            LinkFrame::Message {
                from: "c1".into(),
                from_role: Some(crate::role::Role::Operator),
                epoch: 7,
                seq: 3,
                first_unacked: 2,
                body: json!([1, 2]).into(),
            },
            LinkFrame::Message {
                from: "h1".into(),
                from_role: None,
                epoch: 7,
                seq: 3,
                first_unacked: 2,
                body: json!(1).into(),
            },
            LinkFrame::Ack { to: "c1".into(), epoch: 7, seq: 3 },
            LinkFrame::Acked { from: "h1".into(), epoch: 7, seq: 3 },
            LinkFrame::Undeliverable { to: "h1".into(), epoch: 7, seq: 3, reason: UndeliverableReason::Offline },
            LinkFrame::Undeliverable { to: "h1".into(), epoch: 7, seq: 3, reason: UndeliverableReason::TooLarge },
            LinkFrame::Presence {
                hosts: vec![HostPresence { device_id: "h1".into(), name: "box".into(), paired: true, online: false }],
            },
            LinkFrame::Request {
                id: 1,
                request: Request::MakeCode { kind: DeviceKind::Host, name: None, ttl_secs: Some(60) },
            },
            LinkFrame::Request { id: 2, request: Request::ListDevices },
            LinkFrame::Reply { id: 2, reply: Reply::Devices { devices: vec![], from_memory: true, more: false } },
            LinkFrame::RequestFailed { id: 3, error: "store unavailable: try again".into(), retry: true },
            LinkFrame::Ping { t: 9 },
            LinkFrame::Error { code: ErrorCode::UnknownType, message: "x".into() },
        ]
    }

    #[test]
    fn every_sample_frame_round_trips() {
        for frame in samples() {
            let text = frame.encode();
            assert_eq!(LinkFrame::decode(&text).unwrap(), frame, "{text}");
        }
        let forward = PeerFrame::Forward { to: "c1".into(), frame: Box::new(samples()[5].clone()) };
        assert_eq!(PeerFrame::decode(&forward.encode()).unwrap(), forward);
    }

    #[test]
    fn a_body_is_relayed_as_its_sender_wrote_it() {
        // Decoded as a JSON value and encoded again, `1e5` would become `100000.0`: the frame
        // would grow by half on its way and could pass the cap its sender checked.
        let body = r#"[1e5, 1E5 ,{"a" : -0.0}]"#;
        let send = format!(r#"{{"type":"send","to":"h1","epoch":1,"seq":1,"first_unacked":1,"body":{body}}}"#);
        let LinkFrame::Send { to, epoch, seq, first_unacked, body: decoded } = LinkFrame::decode(&send).unwrap() else {
            panic!("not a send")
        };
        assert_eq!(decoded.get(), body);
        let message =
            LinkFrame::Message { from: "c1".into(), from_role: None, epoch, seq, first_unacked, body: decoded };
        let text = message.encode();
        assert!(text.ends_with(&format!(r#""body":{body}}}"#)), "{text}");
        let forward = PeerFrame::Forward { to, frame: Box::new(message.clone()) }.encode();
        assert!(forward.contains(body), "{forward}");
        let PeerFrame::Forward { frame, .. } = PeerFrame::decode(&forward).unwrap() else { panic!("not a forward") };
        assert_eq!(*frame, message);
        assert_eq!(Body::parse(" 1e5\n").unwrap().get(), "1e5");
        assert!(Body::parse("1e5 2").is_err(), "one JSON value");
        // A malformed body or inner frame is a malformed frame, as for every other type.
        let bad = r#"{"type":"send","to":"h1","epoch":1,"seq":1,"first_unacked":1,"body":[1,}"#;
        assert!(matches!(LinkFrame::decode(bad), Err(FrameError::NotAFrame(_) | FrameError::Malformed { .. })));
        let extra = r#"{"type":"message","from":"h1","epoch":1,"seq":1,"first_unacked":1,"body":1,"x":2}"#;
        assert!(matches!(LinkFrame::decode(extra), Err(FrameError::Malformed { kind, .. }) if kind == "message"));
        let inner = r#"{"type":"forward","to":"c1","frame":{"type":"message","from":"h1"}}"#;
        let err = PeerFrame::decode(inner).unwrap_err();
        assert!(
            matches!(&err, FrameError::Malformed { kind, detail } if kind == "forward" && detail.contains("epoch")),
            "{err}"
        );
    }

    #[test]
    fn a_message_with_the_largest_body_fits_in_a_frame() {
        let body = Body::parse(&format!("\"{}\"", "x".repeat(MAX_BODY_BYTES - 2))).unwrap();
        let longest_id = "d".repeat(64);
        let message = LinkFrame::Message {
            from_role: None,
            from: longest_id.clone(),
            epoch: u64::MAX,
            seq: u64::MAX,
            first_unacked: u64::MAX,
            body,
        };
        assert!(message.encode().len() <= MAX_FRAME_BYTES, "{} bytes", message.encode().len());
        let forward = PeerFrame::Forward { to: longest_id, frame: Box::new(message) };
        assert!(forward.encode().len() <= MAX_PEER_FRAME_BYTES);
    }

    #[test]
    fn a_long_device_list_is_answered_in_pages_that_fit() {
        let name: String = "\u{1F41D}\"".repeat(32);
        let devices: Vec<DeviceInfo> = (0..1_000)
            .map(|i| DeviceInfo {
                device_id: format!("d{i:032x}"),
                kind: DeviceKind::Client,
                name: name.clone(),
                online: true,
            })
            .collect();
        let frames = devices_replies(7, &devices, true);
        assert_eq!(frames.len(), 1_000usize.div_ceil(DEVICES_PER_REPLY));
        let mut listed = vec![];
        for (n, frame) in frames.iter().enumerate() {
            let text = frame.encode();
            assert!(text.len() <= MAX_FRAME_BYTES, "{} bytes", text.len());
            let LinkFrame::Reply { id: 7, reply: Reply::Devices { devices, from_memory: true, more } } =
                LinkFrame::decode(&text).unwrap()
            else {
                panic!("not a devices reply")
            };
            assert_eq!(more, n + 1 < frames.len());
            listed.extend(devices);
        }
        assert_eq!(listed, devices);
        assert_eq!(
            devices_replies(1, &[], false),
            [LinkFrame::Reply { id: 1, reply: Reply::Devices { devices: vec![], from_memory: false, more: false } }]
        );
    }

    #[test]
    fn the_wire_form_is_the_documented_one() {
        let frame = LinkFrame::Send { to: "h1".into(), epoch: 5, seq: 1, first_unacked: 1, body: json!("x").into() };
        assert_eq!(
            serde_json::to_value(&frame).unwrap(),
            json!({"type": "send", "to": "h1", "epoch": 5, "seq": 1, "first_unacked": 1, "body": "x"})
        );
        let request = LinkFrame::Request { id: 4, request: Request::ForgetDevice { device_id: "c2".into() } };
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"type": "request", "id": 4, "request": {"op": "forget_device", "device_id": "c2"}})
        );
    }

    #[test]
    fn each_kind_of_bad_input_gets_its_own_error() {
        assert!(matches!(LinkFrame::decode("{"), Err(FrameError::NotAFrame(_))));
        assert!(matches!(LinkFrame::decode(r#"{"to": "x"}"#), Err(FrameError::NotAFrame(_))));
        assert_eq!(
            LinkFrame::decode(r#"{"type": "teleport", "to": "x"}"#),
            Err(FrameError::UnknownType("teleport".into()))
        );
        let err = LinkFrame::decode(r#"{"type": "ack", "to": "x", "epoch": 1}"#).unwrap_err();
        assert!(
            matches!(&err, FrameError::Malformed { kind, detail } if kind == "ack" && detail.contains("seq")),
            "{err}"
        );
        assert!(matches!(
            LinkFrame::decode(r#"{"type": "ping", "t": 1, "extra": 2}"#),
            Err(FrameError::Malformed { .. })
        ));
        // A peer frame is not a link frame.
        assert_eq!(
            LinkFrame::decode(r#"{"type": "revoked", "device_id": "x"}"#),
            Err(FrameError::UnknownType("revoked".into()))
        );
    }

    #[test]
    fn an_oversized_frame_is_refused_before_parsing() {
        let text = format!(r#"{{"type":"ping","t":1,"pad":"{}"}}"#, "a".repeat(MAX_FRAME_BYTES));
        assert_eq!(LinkFrame::decode(&text), Err(FrameError::TooLarge { len: text.len(), max: MAX_FRAME_BYTES }));
        let deep = format!("{}{}", "[".repeat(MAX_FRAME_BYTES / 2), "]".repeat(MAX_FRAME_BYTES / 2));
        assert!(LinkFrame::decode(&deep).is_err());
    }

    #[test]
    fn close_codes_map_back_and_say_whether_to_reconnect() {
        for code in CloseCode::ALL {
            assert_eq!(CloseCode::from_code(code.code()), Some(code));
        }
        assert_eq!(CloseCode::from_code(1234), None);
        assert!(CloseCode::GoingAway.reconnect());
        assert!(CloseCode::Replaced.reconnect());
        assert!(!CloseCode::Revoked.reconnect());
        assert!(!CloseCode::ServerProofFailed.reconnect());
    }

    fn transcript(fields: &[String; 6]) -> PeerTranscript<'_> {
        PeerTranscript {
            acceptor: &fields[0],
            acceptor_nonce: &fields[1],
            acceptor_key: &fields[2],
            dialer: &fields[3],
            dialer_nonce: &fields[4],
            dialer_key: &fields[5],
        }
    }

    /// The first line of a signed message: what the signature is about.
    fn role_line(message: &[u8]) -> &[u8] {
        message.split(|b| *b == b'\n').next().unwrap()
    }

    proptest! {
        /// A signature is made over one role's message: whatever the fields hold, no two roles'
        /// messages are alike, and each starts with its own versioned role line.
        #[test]
        fn proof_messages_of_different_roles_never_coincide(
            fields in prop::array::uniform6(".{0,12}"),
            other in prop::array::uniform6(".{0,12}"),
        ) {
            let (t, u) = (transcript(&fields), transcript(&other));
            let messages = [
                device_proof_message(&fields[0], &fields[1], &fields[2]),
                server_proof_message(&fields[0], &fields[1], &fields[2]),
                peer_proof_message(PeerRole::Dialer, &t),
                peer_proof_message(PeerRole::Acceptor, &u),
                crate::pair::device_statement(&fields[0], DeviceKind::Host, &fields[1]),
                crate::pair::proof_message(&fields[0], &fields[1], &fields[2], false),
                crate::pair::proof_message(&fields[0], &fields[1], &fields[2], true),
            ];
            for (i, a) in messages.iter().enumerate() {
                for b in &messages[i + 1..] {
                    prop_assert_ne!(a, b);
                }
            }
            let lines: Vec<&[u8]> = messages.iter().map(|m| role_line(m)).collect();
            let (dialer, acceptor) = (format!("hyperhive peer v{PEER_PROTOCOL_VERSION} dialer"), format!("hyperhive peer v{PEER_PROTOCOL_VERSION} acceptor"));
            prop_assert_eq!(lines[2], dialer.as_bytes());
            prop_assert_eq!(lines[3], acceptor.as_bytes());
        }

        /// Two different transcripts never encode alike (the fields are length-prefixed, so a
        /// separator inside a field cannot move a boundary).
        #[test]
        fn transcripts_encode_one_to_one(a in prop::array::uniform6(".{0,6}"), b in prop::array::uniform6(".{0,6}")) {
            prop_assert_eq!(transcript(&a).encode() == transcript(&b).encode(), a == b);
        }
    }

    /// Arbitrary JSON-ish text near the frame shapes, so the decoder's deeper paths are hit too.
    fn frame_like_text() -> impl Strategy<Value = String> {
        let kinds = prop::sample::select(vec![
            "challenge",
            "hello",
            "welcome",
            "send",
            "message",
            "ack",
            "acked",
            "undeliverable",
            "presence",
            "request",
            "reply",
            "ping",
            "error",
            "forward",
            "sessions",
            "nope",
        ]);
        (kinds, any::<String>(), any::<i64>()).prop_map(|(kind, s, n)| {
            format!(r#"{{"type":"{kind}","to":{s:?},"epoch":{n},"seq":{n},"body":{s:?},"request":{{"op":{s:?}}},"frame":{{"type":"{kind}"}}}}"#)
        })
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_text_never_panics(text in any::<String>()) {
            let _ = LinkFrame::decode(&text);
            let _ = PeerFrame::decode(&text);
        }

        #[test]
        fn decoding_frame_like_text_never_panics(text in frame_like_text()) {
            let _ = LinkFrame::decode(&text);
            let _ = PeerFrame::decode(&text);
        }

        #[test]
        fn decoding_arbitrary_bytes_as_text_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = LinkFrame::decode(&text);
        }
    }

    #[test]
    fn presence_of_many_hosts_with_the_longest_names_fits_in_frames() {
        let name: String = "\u{1F41D}\"".repeat(32); // 64 characters, 4-byte ones and quotes
        let hosts: Vec<HostPresence> = (0..1_000)
            .map(|i| HostPresence { device_id: format!("d{i:032x}"), name: name.clone(), paired: true, online: true })
            .collect();
        let frames = presence_frames(hosts.clone());
        assert_eq!(frames.len(), 1_000usize.div_ceil(HOSTS_PER_PRESENCE));
        let mut listed = vec![];
        for frame in frames {
            let text = frame.encode();
            assert!(text.len() <= MAX_FRAME_BYTES, "{} bytes", text.len());
            let LinkFrame::Presence { hosts } = LinkFrame::decode(&text).unwrap() else { panic!("not presence") };
            listed.extend(hosts);
        }
        assert_eq!(listed, hosts);
        assert_eq!(presence_frames(vec![]), [LinkFrame::Presence { hosts: vec![] }]);
    }
}
