//! The connect loop: holds a device's link for as long as it runs. It connects (TLS with the
//! identity's pin), runs the handshake, resends the outbox, relays the application's sends and
//! requests, acks and de-duplicates what arrives, answers keepalives, and after a lost
//! connection waits with the [`Backoff`] and connects again. It stops only on a close that says
//! not to reconnect (forgotten, refused proof, another protocol version).
//!
//! The application talks to it through two channels: [`Command`]s in, [`Event`]s out (the
//! device CLI prints the events as JSON lines and reads commands as JSON lines).

use crate::backoff::Backoff;
use crate::handshake::{HandshakeError, answer_challenge};
use crate::identity::Identity;
use crate::inbox::{Inbox, Receipt};
use crate::outbox::{FIRST_RETRY, Outbox};
use crate::transport::{Stream, Target};
use crate::websocket::websocket_config;
use futures::{SinkExt, StreamExt};
use hyperhive_control_proto::link::{
    Body, CloseCode, DEAD_AFTER, HANDSHAKE_TIMEOUT, HostPresence, LinkFrame, PING_INTERVAL, Reply, Request,
    UndeliverableReason,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCloseCode;

/// What the application asks of the link. As JSON (the device CLI's stdin), read it with
/// [`Command::parse`], which keeps a `send`'s body as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Send `body` to the device `to` (kept until its receiver acks it); at most
    /// [`hyperhive_control_proto::link::MAX_BODY_BYTES`] of JSON, else refused with an `error`
    /// event.
    Send { to: String, body: Body },
    /// A request (clients only); the answer is a `reply` or `request_failed` event with `id`.
    Request { id: u64, request: Request },
}

/// A `send` command as a plain struct, so its body keeps its text (see [`Body`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendCommand {
    #[serde(rename = "command")]
    _command: String,
    to: String,
    body: Body,
}

/// Just the tag, to choose how to read the rest.
#[derive(Deserialize)]
struct CommandTag {
    command: String,
}

impl Command {
    /// Reads one command from JSON text; a `send`'s body keeps the bytes written, so what the
    /// receiver gets is exactly what the application wrote (and as large).
    ///
    /// # Errors
    /// When the text is not a command; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Command, serde_json::Error> {
        if serde_json::from_str::<CommandTag>(text)?.command == "send" {
            let SendCommand { to, body, .. } = serde_json::from_str(text)?;
            return Ok(Command::Send { to, body });
        }
        serde_json::from_str(text)
    }
}

/// What the link tells the application.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The handshake succeeded with the copy named `copy` (both proofs held); `name` is the
    /// control plane's name (`AGENTS_CONTROL_NAME`), absent when it was given none.
    Connected {
        copy: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Hosts and their online state: every host after connecting (`changed: false`), or one
    /// host that changed (`changed: true`).
    Presence {
        hosts: Vec<HostPresence>,
        changed: bool,
    },
    /// A message from `from`, delivered exactly once and in order per sender; `body` is the
    /// JSON its sender wrote, byte for byte.
    Message {
        from: String,
        /// The role the control plane gives the sender (a client paired with one).
        from_role: Option<hyperhive_control_proto::role::Role>,
        body: Body,
    },
    /// `to` has received every message sent to it up to `seq`.
    Acked {
        to: String,
        seq: u64,
    },
    /// Message `seq` to `to` could not be relayed now; it is kept and sent again.
    Undeliverable {
        to: String,
        seq: u64,
        reason: UndeliverableReason,
    },
    Reply {
        id: u64,
        reply: Reply,
    },
    RequestFailed {
        id: u64,
        error: String,
        retry: bool,
    },
    /// Something went wrong that does not end the link (a refused command, an error frame).
    Error {
        message: String,
    },
    /// The connection was lost or refused; the next attempt comes after `after_ms`.
    Reconnecting {
        after_ms: u64,
        reason: String,
    },
}

/// Why the loop stopped for good.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Stopped(pub String);

/// How one connection ended.
enum Ended {
    Retry(String),
    Stop(String),
}

/// Holds the link until a close says not to reconnect.
pub async fn run(
    identity: &Identity,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
) -> Result<(), Stopped> {
    let target = Target::parse(&identity.control_url).map_err(|e| Stopped(e.to_string()))?;
    let mut state = State { outbox: Outbox::new(rand::random()), inbox: Inbox::new(), commands_open: true };
    // A Send rng, so the link can run on any runtime thread (`tokio::spawn`).
    let mut backoff = Backoff::new(StdRng::from_os_rng());
    loop {
        match connection(identity, &target, &mut state, &mut commands, &events, &mut backoff).await {
            Ended::Stop(reason) => return Err(Stopped(reason)),
            Ended::Retry(reason) => {
                let delay = backoff.next_delay();
                let after_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                let _ = events.send(Event::Reconnecting { after_ms, reason }).await;
                tokio::time::sleep(delay).await;
            }
        }
    }
}

struct State {
    outbox: Outbox,
    inbox: Inbox,
    commands_open: bool,
}

type Socket = WebSocketStream<Box<dyn Stream>>;

async fn next_text(socket: &mut Socket) -> Result<LinkFrame, Ended> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return LinkFrame::decode(&text).map_err(|e| Ended::Retry(format!("bad frame in the handshake: {e}")));
            }
            Some(Ok(Message::Close(frame))) => return Err(closed(frame.as_ref())),
            Some(Ok(_)) => continue,
            Some(Err(error)) => return Err(Ended::Retry(error.to_string())),
            None => return Err(Ended::Retry("the connection closed".into())),
        }
    }
}

fn closed(frame: Option<&CloseFrame>) -> Ended {
    let Some(frame) = frame else { return Ended::Retry("closed without a reason".into()) };
    let number = u16::from(frame.code);
    let reason = format!("closed by the control plane with {number}: {}", frame.reason);
    match CloseCode::from_code(number) {
        Some(code) if !code.reconnect() => Ended::Stop(reason),
        _ => Ended::Retry(reason),
    }
}

/// The copy's name and the control plane's, from the welcome.
async fn handshake(identity: &Identity, socket: &mut Socket) -> Result<(String, Option<String>), Ended> {
    let refuse = |error: HandshakeError| (error.close_code(), error.to_string());
    let challenge = next_text(socket).await?;
    let (hello, awaiting) = answer_challenge(&challenge, &identity.device_id, identity.device_key(), &mut rand::rng())
        .map_err(refuse)
        .map_err(|(code, reason)| end_for(code, reason))?;
    socket.send(Message::text(hello.encode())).await.map_err(|e| Ended::Retry(e.to_string()))?;
    let welcome = next_text(socket).await?;
    match awaiting.verify_welcome(&welcome, &identity.control_key) {
        Ok(copy) => {
            let name = match welcome {
                LinkFrame::Welcome { name, .. } => name,
                _ => None,
            };
            Ok((copy, name))
        }
        Err(error) => {
            let (code, reason) = refuse(error);
            let frame = CloseFrame { code: WsCloseCode::from(code.code()), reason: reason.clone().into() };
            let _ = socket.close(Some(frame)).await;
            Err(end_for(code, reason))
        }
    }
}

fn end_for(code: CloseCode, reason: String) -> Ended {
    if code.reconnect() { Ended::Retry(reason) } else { Ended::Stop(reason) }
}

async fn connection(
    identity: &Identity,
    target: &Target,
    state: &mut State,
    commands: &mut mpsc::Receiver<Command>,
    events: &mpsc::Sender<Event>,
    backoff: &mut Backoff<StdRng>,
) -> Ended {
    let stream = match target.connect(identity.pin).await {
        Ok(stream) => stream,
        Err(error) => return Ended::Retry(error.to_string()),
    };
    let url = target.ws_url("/v1/link");
    let mut socket = match tokio_tungstenite::client_async_with_config(url, stream, Some(websocket_config())).await {
        Ok((socket, _)) => socket,
        Err(error) => return Ended::Retry(format!("WebSocket upgrade: {error}")),
    };
    let (copy, name) = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(identity, &mut socket)).await {
        Ok(Ok(names)) => names,
        Ok(Err(ended)) => return ended,
        Err(_) => return Ended::Retry("the handshake did not finish in time".into()),
    };
    backoff.reset();
    let _ = events.send(Event::Connected { copy, name }).await;
    for frame in state.outbox.resend_all().into_iter().chain(state.inbox.acks()) {
        if let Err(error) = socket.send(Message::text(frame.encode())).await {
            return Ended::Retry(error.to_string());
        }
    }

    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut retries = tokio::time::interval(FIRST_RETRY);
    retries.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    let mut pings: u64 = 0;
    loop {
        let mut out: Vec<LinkFrame> = vec![];
        let mut event = None;
        tokio::select! {
            incoming = socket.next() => {
                heard = Instant::now();
                match incoming {
                    Some(Ok(Message::Text(text))) => match LinkFrame::decode(&text) {
                        Ok(frame) => event = on_frame(state, frame, &mut out),
                        Err(error) => {
                            let _ = events.send(Event::Error { message: format!("the control plane sent a bad frame: {error}") }).await;
                        }
                    },
                    Some(Ok(Message::Close(frame))) => return closed(frame.as_ref()),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Ended::Retry(error.to_string()),
                    None => return Ended::Retry("the connection closed".into()),
                }
            }
            command = commands.recv(), if state.commands_open => match command {
                Some(Command::Send { to, body }) => match state.outbox.push(&to, body) {
                    Ok(frame) => out.push(frame),
                    Err(refused) => {
                        let _ = events.send(Event::Error { message: refused.to_string() }).await;
                    }
                },
                Some(Command::Request { id, request }) => out.push(LinkFrame::Request { id, request }),
                None => state.commands_open = false,
            },
            _ = ticks.tick() => {
                if heard.elapsed() >= DEAD_AFTER {
                    return Ended::Retry(format!("nothing heard for {}s", DEAD_AFTER.as_secs()));
                }
                pings += 1;
                out.push(LinkFrame::Ping { t: pings });
            }
            _ = retries.tick() => out.extend(state.outbox.resend_stalled(Instant::now())),
        }
        for frame in out {
            if let Err(error) = socket.send(Message::text(frame.encode())).await {
                return Ended::Retry(error.to_string());
            }
        }
        // After the frames it caused: a message's ack is on the socket before the application
        // sees the message, so an application that exits once it has the last message it
        // wanted does not leave that message unacked (and resent to its next session).
        if let Some(event) = event {
            let _ = events.send(event).await;
        }
    }
}

/// Handles one frame from the control plane: frames to send back go to `out`, and the event
/// for the application is returned.
fn on_frame(state: &mut State, frame: LinkFrame, out: &mut Vec<LinkFrame>) -> Option<Event> {
    match frame {
        LinkFrame::Message { from, from_role, epoch, seq, first_unacked, body } => {
            let (receipt, ack) = state.inbox.receive(&from, epoch, seq, first_unacked);
            out.push(ack);
            (receipt == Receipt::Deliver).then_some(Event::Message { from, from_role, body })
        }
        LinkFrame::Acked { from, epoch, seq } => {
            out.extend(state.outbox.on_ack(&from, epoch, seq, Instant::now()));
            Some(Event::Acked { to: from, seq })
        }
        LinkFrame::Undeliverable { to, seq, reason, .. } => {
            if reason == UndeliverableReason::Unknown {
                state.outbox.unknown(&to);
            } else {
                state.outbox.undeliverable(&to, Instant::now());
            }
            Some(Event::Undeliverable { to, seq, reason })
        }
        LinkFrame::Presence { hosts } => Some(Event::Presence { hosts, changed: false }),
        LinkFrame::PresenceChanged { host } => {
            if host.online {
                out.extend(state.outbox.resend_to(&host.device_id));
            }
            Some(Event::Presence { hosts: vec![host], changed: true })
        }
        LinkFrame::Reply { id, reply } => Some(Event::Reply { id, reply }),
        LinkFrame::RequestFailed { id, error, retry } => Some(Event::RequestFailed { id, error, retry }),
        LinkFrame::Ping { t } => {
            out.push(LinkFrame::Pong { t });
            None
        }
        LinkFrame::Pong { .. } => None,
        LinkFrame::Error { code, message } => Some(Event::Error { message: format!("{code:?}: {message}") }),
        other => {
            Some(Event::Error { message: format!("the control plane sent an unexpected \"{}\"", other.type_name()) })
        }
    }
}

/// Applications hold many links, each on its own task: the link must be `Send`, which this
/// checks at compile time.
const _: () = {
    fn spawnable<F: std::future::Future + Send>(_: F) {}
    #[allow(dead_code)]
    fn link_is_send(identity: &Identity, commands: mpsc::Receiver<Command>, events: mpsc::Sender<Event>) {
        spawnable(run(identity, commands, events));
    }
};
