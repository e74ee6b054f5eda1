//! The request body of the swarm's small JSON APIs (swarm-controller's on its unix socket,
//! swarm-authelia-bridge's): it must be declared as JSON and be no larger than the API's cap,
//! which is checked on the declared length first and then on the bytes as they arrive, so a
//! client that lies about the length (or sends none) still cannot make the server buffer more.
//! Each API turns a [`BodyError`] into its own 415, 413 or 400 with its own wording.

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
        return Err(BodyError::NotJson(content_type.to_owned()));
    }
    limited_body(headers, body, max).await
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
    if declared.is_some_and(|n| n > max) {
        return Err(BodyError::TooLarge { max });
    }
    let mut body = std::pin::pin!(body);
    let mut buffer = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let mut chunk = chunk.map_err(|e| BodyError::Read(e.to_string()))?;
        if buffer.len() + chunk.remaining() > max {
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
