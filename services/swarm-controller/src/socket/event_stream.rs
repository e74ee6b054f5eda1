//! A relay watcher's connection answered without hyper's HTTP/1 server, so that a watcher costs
//! what it holds rather than the two 8 KiB buffers hyper keeps for every connection's life.
//!
//! Each connection's first request head is read here, into a buffer that grows only as far as
//! the head does. A `GET` of an event stream (an agent's terminal or turn headers: routes that
//! answer for hours) with nothing after its head is answered here: the same API (routes, caller,
//! role) is called with the parsed request, and its answer is written with chunked framing on a
//! connection that closes when the answer ends. Every other connection goes to hyper as it came,
//! the bytes read so far replayed first ([`Replayed`]).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::UnixStream;
use warp::http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use warp::http::{HeaderName, HeaderValue, Method, Request, Version};
use warp::reply::Response;

use crate::api::routes::{self, Found, RouteId};

/// The longest request head read here; a longer one goes to hyper, whose limits answer it.
const LONGEST_HEAD: usize = 64 * 1024;
/// The first read's room, grown by as much again while the head is not complete: a head is
/// usually a few hundred bytes.
const READ_STEP: usize = 1024;
/// The most header lines a head answered here may have.
const MOST_HEADERS: usize = 64;

/// A request answered here: no body.
pub type EventStreamRequest = Request<Empty<Bytes>>;

/// What a connection's first request is.
#[derive(Debug)]
pub enum First {
    /// A `GET` of an event stream, parsed.
    EventStream(EventStreamRequest),
    /// Anything else, for hyper, with the bytes read so far.
    Other(Bytes),
    /// The peer closed or failed before sending a whole head.
    Gone,
}

/// Reads `stream`'s first request head.
pub async fn first_request(stream: &mut UnixStream) -> First {
    let mut read = BytesMut::with_capacity(READ_STEP);
    loop {
        match stream.read_buf(&mut read).await {
            Ok(0) | Err(_) => return First::Gone,
            Ok(_) => {}
        }
        match parse(&read) {
            Parsed::Partial if read.len() < LONGEST_HEAD => read.reserve(READ_STEP),
            Parsed::EventStream(request) => return First::EventStream(*request),
            Parsed::Partial | Parsed::Other => return First::Other(read.freeze()),
        }
    }
}

enum Parsed {
    Partial,
    EventStream(Box<EventStreamRequest>),
    Other,
}

/// `bytes` as a request answered here, a head still incomplete, or anything else. Synchronous,
/// so its header table never lives in a connection's task.
fn parse(bytes: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MOST_HEADERS];
    let mut head = httparse::Request::new(&mut headers);
    let length = match head.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Other,
    };
    let (Some("GET"), Some(path), Some(minor)) = (head.method, head.path, head.version) else { return Parsed::Other };
    // Anything after the head (a body, a pipelined request) is hyper's to read.
    if length != bytes.len() || !is_event_stream(path) {
        return Parsed::Other;
    }
    let mut request = Request::builder().method(Method::GET).uri(path).version(match minor {
        0 => Version::HTTP_10,
        _ => Version::HTTP_11,
    });
    for header in head.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes());
        if matches!(&name, Ok(n) if n == CONTENT_LENGTH || n == TRANSFER_ENCODING) {
            return Parsed::Other;
        }
        let (Ok(name), Ok(value)) = (name, HeaderValue::from_bytes(header.value)) else { return Parsed::Other };
        request = request.header(name, value);
    }
    request.body(Empty::new()).map_or(Parsed::Other, |request| Parsed::EventStream(Box::new(request)))
}

/// Whether `GET target` is one of the API's event streams.
fn is_event_stream(target: &str) -> bool {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    matches!(routes::find(&Method::GET, path), Found::Route(RouteId::Terminal | RouteId::Turn, _))
}

/// Answers a request on `stream` with `answer`'s response, until the answer ends or the peer
/// goes; `chunked`: the peer speaks HTTP/1.1 (an HTTP/1.0 answer ends at the close).
///
/// `answer` comes boxed: an argument is kept in this future for its whole life, and the API's
/// future is about 11 KiB, which a watcher would then hold for hours.
pub async fn serve<A>(mut stream: UnixStream, chunked: bool, answer: Pin<Box<A>>)
where
    A: std::future::Future<Output = Result<Response, Infallible>> + ?Sized,
{
    let Ok(response) = answer.await;
    let (parts, mut body) = response.into_parts();
    if stream.write_all(&head(&parts, chunked)).await.is_err() {
        return;
    }
    let (mut reader, mut writer) = stream.split();
    // The peer sends nothing more; a read returns only when it closes (or sends what is ignored).
    let mut ignored = [0u8; 16];
    loop {
        tokio::select! {
            frame = body.frame() => match frame {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    if !data.has_remaining() {
                        continue;
                    }
                    if writer.write_all(&chunk(data, chunked)).await.is_err() {
                        return;
                    }
                }
                Some(Err(err)) => {
                    // Left without its last chunk, so the peer sees the answer cut, not ended.
                    tracing::debug!(%err, "an event stream failed");
                    return;
                }
                None => {
                    if chunked {
                        let _ = writer.write_all(b"0\r\n\r\n").await;
                    }
                    return;
                }
            },
            read = reader.read(&mut ignored) => if matches!(read, Ok(0) | Err(_)) {
                return;
            },
        }
    }
}

/// The answer's head: its status and headers, with the framing this server uses.
fn head(parts: &warp::http::response::Parts, chunked: bool) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    let reason = parts.status.canonical_reason().unwrap_or("");
    head.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", parts.status.as_u16()).as_bytes());
    for (name, value) in &parts.headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if chunked {
        head.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    head.extend_from_slice(b"connection: close\r\n\r\n");
    head
}

/// `data` framed as one chunk (as it is, for an HTTP/1.0 peer, whose answer ends at the close).
fn chunk(mut data: impl Buf, chunked: bool) -> Vec<u8> {
    let mut framed = Vec::with_capacity(data.remaining() + 12);
    if chunked {
        framed.extend_from_slice(format!("{:x}\r\n", data.remaining()).as_bytes());
    }
    while data.has_remaining() {
        let piece = data.chunk();
        framed.extend_from_slice(piece);
        let read = piece.len();
        data.advance(read);
    }
    if chunked {
        framed.extend_from_slice(b"\r\n");
    }
    framed
}

/// A connection whose first bytes were read already: they are read again first, then the rest.
#[derive(Debug)]
pub struct Replayed {
    read: Bytes,
    stream: UnixStream,
}

impl Replayed {
    /// `stream`, from which `read` was read.
    pub fn new(read: Bytes, stream: UnixStream) -> Self {
        Self { read, stream }
    }
}

impl AsyncRead for Replayed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.read.is_empty() {
            return Pin::new(&mut self.stream).poll_read(cx, buf);
        }
        let n = self.read.len().min(buf.remaining());
        buf.put_slice(&self.read.split_to(n));
        if self.read.is_empty() {
            // The buffer's memory goes with its last byte.
            self.read = Bytes::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Replayed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered_here(head: &str) -> bool {
        matches!(parse(head.as_bytes()), Parsed::EventStream(_))
    }

    #[test]
    fn only_a_whole_bodiless_get_of_an_event_stream_is_answered_here() {
        assert!(answered_here("GET /api/agents/bee/terminal HTTP/1.1\r\nhost: x\r\nlast-event-id: 7\r\n\r\n"));
        assert!(answered_here("GET /api/agents/bee/turn?x=1 HTTP/1.0\r\n\r\n"));
        assert!(!answered_here("GET /api/agents/bee HTTP/1.1\r\n\r\n"), "not a stream");
        assert!(!answered_here("HEAD /api/agents/bee/terminal HTTP/1.1\r\n\r\n"), "not a GET");
        assert!(!answered_here("GET /api/agents/bee/terminal HTTP/1.1\r\ncontent-length: 2\r\n\r\nhi"), "a body");
        assert!(!answered_here("GET /api/agents/bee/terminal HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"), "pipelined");
        assert!(!answered_here("GET /api/agents/bee/terminal HTTP/1.1\r\nbad header\r\n\r\n"), "malformed");
        assert!(matches!(parse(b"GET /api/agents/bee/terminal HTTP/1.1\r\nhost: x\r\n"), Parsed::Partial));
    }

    #[test]
    fn the_parsed_request_keeps_its_target_version_and_headers() {
        let Parsed::EventStream(request) =
            parse(b"GET /api/agents/bee/terminal?from=3 HTTP/1.1\r\nLast-Event-ID: 7\r\nX-A: 1\r\n\r\n")
        else {
            panic!("answered here")
        };
        assert_eq!(request.uri(), "/api/agents/bee/terminal?from=3");
        assert_eq!(request.version(), Version::HTTP_11);
        assert_eq!(request.headers()["last-event-id"], "7");
        assert_eq!(request.headers()["x-a"], "1");
    }

    #[test]
    fn a_chunk_is_framed_with_its_length_in_hex() {
        assert_eq!(chunk(Bytes::from_static(b"data: hello world\n\n"), true), b"13\r\ndata: hello world\n\n\r\n");
        assert_eq!(chunk(Bytes::from_static(b"raw"), false), b"raw");
    }
}
