//! The request body of the swarm's small JSON APIs (swarm-controller's on its unix socket,
//! swarm-authelia-bridge's): it must be declared as JSON and be no larger than the API's cap,
//! which is checked on the declared length first and then on the bytes as they arrive, so a
//! client that lies about the length (or sends none) still cannot make the server buffer more.
//! Each API turns a [`BodyError`] into its own 415, 413 or 400 with its own wording. A refused
//! body is read on (up to a bound) and discarded, so a client still sending it reads the refusal.

use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use warp::http::HeaderMap;
use warp::http::header::{CONTENT_LENGTH, CONTENT_TYPE};

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body is not declared as `application/json`; carries the `Content-Type` sent.
    #[error("the body must be JSON sent with Content-Type: application/json (got {0:?})")]
    NotJson(String),
    /// The body is larger than the cap, by its declared length or by what arrived.
    #[error("the request body is larger than {} KiB", .max / 1024)]
    TooLarge { max: usize },
    /// Reading the body failed (the client went away mid-body, say).
    #[error("reading the request body failed: {0}")]
    Read(String),
}

/// The whole body of a request whose headers are `headers`, at most `max` bytes.
///
/// # Errors
/// [`BodyError`]: not declared as JSON, larger than `max`, or cut off.
pub async fn json_body<S, B>(headers: &HeaderMap, body: S, max: usize) -> Result<Bytes, BodyError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        drain(headers, std::pin::pin!(body), max).await;
        return Err(BodyError::NotJson(content_type.to_owned()));
    }
    limited_body(headers, body, max).await
}

/// The most a refused body is read past its refusal, as a multiple of the route's cap (and at
/// most [`DRAIN_MAX`]).
const DRAIN_FACTOR: usize = 4;
/// The most any refused body is read past its refusal.
const DRAIN_MAX: usize = 32 * 1024 * 1024;
/// How long a refused body may pause between chunks before it is abandoned.
const DRAIN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads and discards what is left of a refused body, so a client still sending it gets to read
/// the refusal rather than a connection closed under its write; up to a bound, after which the
/// connection is closed anyway.
async fn drain<S, B>(headers: &HeaderMap, mut body: std::pin::Pin<&mut S>, max: usize)
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let limit = max.saturating_mul(DRAIN_FACTOR).min(DRAIN_MAX);
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return;
    }
    let mut read = 0usize;
    while read <= limit {
        match tokio::time::timeout(DRAIN_PATIENCE, body.next()).await {
            Ok(Some(Ok(chunk))) => read += chunk.remaining(),
            _ => return,
        }
    }
}

/// The whole body, whatever its type, at most `max` bytes (for a route that checks the type
/// itself, e.g. an image upload).
///
/// # Errors
/// [`BodyError::TooLarge`] or [`BodyError::Read`].
pub async fn limited_body<S, B>(headers: &HeaderMap, body: S, max: usize) -> Result<Bytes, BodyError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    let mut body = std::pin::pin!(body);
    if declared.is_some_and(|n| n > max) {
        drain(headers, body.as_mut(), max).await;
        return Err(BodyError::TooLarge { max });
    }
    let mut buffer = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let mut chunk = chunk.map_err(|e| BodyError::Read(e.to_string()))?;
        if buffer.len() + chunk.remaining() > max {
            drain(headers, body.as_mut(), max).await;
            return Err(BodyError::TooLarge { max });
        }
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            buffer.extend_from_slice(piece);
            let n = piece.len();
            chunk.advance(n);
        }
    }
    Ok(buffer.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::HeaderValue;

    fn headers(content_type: &'static str, length: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(length) = length {
            headers.insert(CONTENT_LENGTH, HeaderValue::from_static(length));
        }
        headers
    }

    fn chunks(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, warp::Error>> + Send {
        futures::stream::iter(parts.iter().map(|p| Ok(Bytes::from_static(p))).collect::<Vec<_>>())
    }

    /// A body of `chunks` chunks of 1 KiB that counts how many were read.
    fn counted(
        chunks: usize,
    ) -> (impl Stream<Item = Result<Bytes, warp::Error>> + Send, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = read.clone();
        let stream = futures::stream::iter(0..chunks).map(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Bytes::from_static(&[b' '; 1024]))
        });
        (stream, read)
    }

    #[tokio::test]
    async fn a_refused_body_is_read_to_its_end_within_a_bound() {
        let (body, read) = counted(20);
        let refused = json_body(&headers("application/json", None), body, 4 * 1024).await;
        assert_eq!(refused, Err(BodyError::TooLarge { max: 4 * 1024 }));
        assert_eq!(read.load(std::sync::atomic::Ordering::Relaxed), 20, "drained, so the client reads the 413");
        let (body, read) = counted(12);
        assert!(matches!(json_body(&headers("text/plain", None), body, 4 * 1024).await, Err(BodyError::NotJson(_))));
        assert_eq!(read.load(std::sync::atomic::Ordering::Relaxed), 12);
        // Past four times the cap, the rest is left: the connection closes instead.
        let (body, read) = counted(1000);
        assert!(json_body(&headers("application/json", None), body, 4 * 1024).await.is_err());
        let taken = read.load(std::sync::atomic::Ordering::Relaxed);
        // The cap (4 chunks and the one past it), then four times the cap and the chunk past that.
        assert_eq!(taken, 5 + 17, "{taken} chunks read");
    }

    #[tokio::test]
    async fn a_json_body_within_the_cap_arrives_whole() {
        let body = json_body(&headers("application/json; charset=utf-8", None), chunks(&[b"{\"a\":", b"1}"]), 7).await;
        assert_eq!(body.unwrap(), Bytes::from_static(b"{\"a\":1}"));
        let upper = json_body(&headers("Application/JSON", Some("2")), chunks(&[b"{}"]), 2).await;
        assert_eq!(upper.unwrap(), Bytes::from_static(b"{}"));
    }

    #[tokio::test]
    async fn another_type_or_a_body_over_the_cap_is_refused() {
        let text = json_body(&headers("text/plain", None), chunks(&[b"{}"]), 64).await;
        assert_eq!(text, Err(BodyError::NotJson("text/plain".into())));
        let declared = json_body(&headers("application/json", Some("65")), chunks(&[b"{}"]), 64).await;
        assert_eq!(declared, Err(BodyError::TooLarge { max: 64 }));
        // A client that declares nothing (or too little) is stopped by what arrives.
        let streamed =
            json_body(&headers("application/json", Some("2")), chunks(&[b"{\"a\":", b"\"12345\"}"]), 8).await;
        assert_eq!(streamed, Err(BodyError::TooLarge { max: 8 }));
        assert_eq!(BodyError::TooLarge { max: 64 * 1024 }.to_string(), "the request body is larger than 64 KiB");
    }
}
