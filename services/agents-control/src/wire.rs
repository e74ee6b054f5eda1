//! What the device link and the peer link share once a WebSocket is open: frames as text in
//! and out ([`wire`]), and the loop that answers incoming frames, sends what the copy queued
//! for the link, keeps it alive with application pings and notices a silent other side
//! ([`run`]). The links differ only in their frames and what they do with them.

use crate::sessions::Outgoing;
use futures::{Sink, SinkExt, Stream, StreamExt};
use hyperhive_control_proto::link::{CloseCode, DEAD_AFTER, LinkFrame, PING_INTERVAL, PeerFrame};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// How long one write may wait for the other side to take it. A side that stops reading (a
/// hung device, a peer stuck behind a full network path) fills the socket's buffers and a write
/// then waits for ever; past this deadline the link is dropped instead, so its task ends and
/// the copy forgets the session (a close it was told to send, `Replaced` or `Revoked`, cannot
/// reach such a side anyway). Well under [`DEAD_AFTER`]: a side that reads, even slowly, takes a
/// frame within milliseconds.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The other side did not take a write within [`WRITE_TIMEOUT`], or the socket broke.
#[derive(Debug)]
pub struct NotSent;

/// Sends `out` within [`WRITE_TIMEOUT`].
pub async fn send(sink: &mut (impl Sink<WireOut> + Unpin), out: WireOut) -> Result<(), NotSent> {
    send_all(sink, std::iter::once(out)).await
}

/// Sends every item of `outs` (in one flush) within [`WRITE_TIMEOUT`].
pub async fn send_all(
    sink: &mut (impl Sink<WireOut> + Unpin),
    outs: impl IntoIterator<Item = WireOut>,
) -> Result<(), NotSent> {
    let write = async {
        for out in outs {
            sink.feed(out).await.map_err(|_| NotSent)?;
        }
        sink.flush().await.map_err(|_| NotSent)
    };
    match timeout(WRITE_TIMEOUT, write).await {
        Ok(sent) => sent,
        Err(_) => {
            tracing::info!(secs = WRITE_TIMEOUT.as_secs(), "a link's other side took no write in time: dropping it");
            Err(NotSent)
        }
    }
}

/// What a link reads.
#[derive(Debug)]
pub enum WireIn {
    Text(String),
    Binary,
    /// A message over the socket's size cap (the one read error the other side can cause on
    /// purpose).
    TooLarge,
    /// The other side closed, or the socket broke.
    Closed,
    /// A WebSocket ping or pong: proof of life, nothing to do.
    Control,
}

/// What a link writes.
#[derive(Debug)]
pub enum WireOut {
    Text(String),
    Close(CloseCode, String),
}

/// A frame a link sends: its text, and the keepalive ping.
pub trait Frame {
    fn encode(&self) -> String;
    fn ping(t: u64) -> Self;
}

impl Frame for LinkFrame {
    fn encode(&self) -> String {
        LinkFrame::encode(self)
    }
    fn ping(t: u64) -> Self {
        LinkFrame::Ping { t }
    }
}

impl Frame for PeerFrame {
    fn encode(&self) -> String {
        PeerFrame::encode(self)
    }
    fn ping(t: u64) -> Self {
        PeerFrame::Ping { t }
    }
}

/// A socket as a sink of [`WireOut`] and a stream of [`WireIn`].
pub fn wire<S: AsyncRead + AsyncWrite + Unpin>(
    socket: WebSocketStream<S>,
) -> (impl Sink<WireOut> + Unpin, impl Stream<Item = WireIn> + Unpin) {
    let (sink, stream) = socket.split();
    let sink = sink.with(|out: WireOut| {
        futures::future::ready(Ok::<_, WsError>(match out {
            WireOut::Text(text) => Message::text(text),
            WireOut::Close(code, reason) => {
                Message::Close(Some(CloseFrame { code: code.code().into(), reason: reason.into() }))
            }
        }))
    });
    let stream = stream.map(|message| match message {
        Ok(Message::Text(text)) => WireIn::Text(text.as_str().to_owned()),
        Ok(Message::Binary(_)) => WireIn::Binary,
        Ok(Message::Close(_)) => WireIn::Closed,
        Ok(_) => WireIn::Control,
        Err(WsError::Capacity(CapacityError::MessageTooLong { .. })) => WireIn::TooLarge,
        Err(error) => {
            tracing::debug!(%error, "a link's socket failed");
            WireIn::Closed
        }
    });
    (Box::pin(sink), stream)
}

/// Runs an authenticated link until either side ends it: `answer` handles each text frame and
/// returns what to send back, `queue` holds what the copy sends. Returns the close to send, if
/// this side ends it (`None`: the other side left, the socket broke, or a write waited past
/// [`WRITE_TIMEOUT`]).
pub async fn run<F, A, Fut>(
    sink: &mut (impl Sink<WireOut> + Unpin),
    stream: &mut (impl Stream<Item = WireIn> + Unpin),
    queue: &mut mpsc::Receiver<Outgoing<F>>,
    max_frame_bytes: usize,
    mut answer: A,
) -> Option<(CloseCode, String)>
where
    F: Frame,
    A: FnMut(String) -> Fut,
    Fut: Future<Output = Option<F>>,
{
    let mut pings = tokio::time::interval_at(Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut heard = Instant::now();
    let mut ping_count: u64 = 0;
    loop {
        let out = tokio::select! {
            incoming = stream.next() => {
                heard = Instant::now();
                match incoming {
                    Some(WireIn::Text(text)) => answer(text).await,
                    Some(WireIn::Control) => None,
                    Some(WireIn::Binary) => {
                        return Some((CloseCode::UnsupportedData, "binary messages are not used: frames are JSON text".into()));
                    }
                    Some(WireIn::TooLarge) => {
                        return Some((CloseCode::TooLarge, format!("a frame exceeded {max_frame_bytes} bytes")));
                    }
                    Some(WireIn::Closed) | None => return None,
                }
            }
            outgoing = queue.recv() => match outgoing {
                Some(Outgoing::Frame(frame)) => Some(frame),
                Some(Outgoing::Close(code, reason)) => return Some((code, reason)),
                None => return None,
            },
            _ = pings.tick() => {
                if heard.elapsed() >= DEAD_AFTER {
                    return Some((CloseCode::Normal, format!("nothing heard for {}s", DEAD_AFTER.as_secs())));
                }
                ping_count += 1;
                Some(F::ping(ping_count))
            }
        };
        if let Some(frame) = out
            && send(sink, WireOut::Text(frame.encode())).await.is_err()
        {
            return None;
        }
    }
}
