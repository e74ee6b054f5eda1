//! Where swarmctl's requests go: HTTP/1.1 over the controller's unix socket, or through the
//! control plane to the controller as a host ([`super::remote`]). Every verb goes through
//! [`request`] or [`stream`] here, so both ways give the same output and exit codes.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use hyper::http::{Method, StatusCode, header};
use hyper_util::rt::TokioIo;
use hyperhive_swarm_api::error::ErrorBody;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;

pub use super::error::CtlError;
use super::remote::{RemoteApi, RemoteBody};

/// The way to the controller's API.
#[derive(Debug)]
pub enum Api {
    /// Its unix socket.
    Socket(PathBuf),
    /// Through the control plane, as a paired client.
    Remote(RemoteApi),
}

/// A response body being read piece by piece (an event stream).
#[derive(Debug)]
pub enum BodyReader {
    Socket(Incoming),
    Remote(RemoteBody),
}

impl BodyReader {
    /// The next piece; `None` at the end.
    ///
    /// # Errors
    /// When the connection or the stream failed.
    pub async fn next(&mut self) -> Option<Result<Bytes, CtlError>> {
        match self {
            BodyReader::Socket(body) => loop {
                match body.frame().await? {
                    Ok(frame) => {
                        if let Ok(data) = frame.into_data() {
                            return Some(Ok(data));
                        }
                    }
                    Err(e) => return Some(Err(CtlError::Protocol(e.to_string()))),
                }
            },
            BodyReader::Remote(body) => body.next().await,
        }
    }
}

impl Api {
    /// Sends `request` and returns the status, the headers' content type and the body reader.
    async fn open(&self, request: Request<Full<Bytes>>) -> Result<(StatusCode, BodyReader), CtlError> {
        match self {
            Api::Socket(socket) => {
                let (status, body) = open_on_socket(socket, request).await?;
                Ok((status, BodyReader::Socket(body)))
            }
            Api::Remote(remote) => {
                let (status, body) = remote.open(request).await?;
                Ok((status, BodyReader::Remote(body)))
            }
        }
    }
}

async fn open_on_socket(socket: &Path, mut request: Request<Full<Bytes>>) -> Result<(StatusCode, Incoming), CtlError> {
    let stream = UnixStream::connect(socket).await.map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => CtlError::NotRunning(socket.to_owned()),
        _ => CtlError::Unreachable(socket.to_owned(), e),
    })?;
    let protocol = |e: &dyn std::fmt::Display| CtlError::Protocol(e.to_string());
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| protocol(&e))?;
    tokio::spawn(connection);
    request.headers_mut().insert(header::HOST, header::HeaderValue::from_static("swarm-controller"));
    let response = sender.send_request(request).await.map_err(|e| protocol(&e))?;
    Ok((response.status(), response.into_body()))
}

/// Sends `request` over the socket and returns the status and the whole body.
///
/// # Errors
/// [`CtlError::NotRunning`] when nothing listens, [`CtlError::Protocol`] when HTTP fails.
pub async fn send(socket: &Path, request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), CtlError> {
    exchange(&Api::Socket(socket.to_owned()), request).await
}

/// Sends `request` either way and returns the status and the whole body.
///
/// # Errors
/// [`CtlError::NotRunning`] when nothing listens, [`CtlError::Remote`] when the control plane
/// fails, [`CtlError::Protocol`] when HTTP fails.
pub async fn exchange(api: &Api, request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), CtlError> {
    let (status, mut body) = api.open(request).await?;
    let mut bytes = Vec::new();
    while let Some(piece) = body.next().await {
        bytes.extend_from_slice(&piece?);
    }
    Ok((status, Bytes::from(bytes)))
}

fn build(
    method: Method,
    path: &str,
    if_match: Option<u64>,
    last_event_id: Option<u64>,
    body: Option<Vec<u8>>,
) -> Result<Request<Full<Bytes>>, CtlError> {
    // Recorded as who set a wanted state; other routes ignore it.
    let mut builder = Request::builder().method(method).uri(path).header("x-set-by", "swarmctl");
    if let Some(revision) = if_match {
        builder = builder.header(header::IF_MATCH, revision.to_string());
    }
    if let Some(id) = last_event_id {
        builder = builder.header("last-event-id", id.to_string());
    }
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    builder.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| CtlError::Protocol(e.to_string()))
}

/// A request body as the API reads it.
pub fn body(request: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(request).expect("the API's request types serialize")
}

/// An answer read as the API's type `T`.
///
/// # Errors
/// [`CtlError::Protocol`] when it is not one (a controller of another version).
pub fn answer<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CtlError> {
    serde_json::from_slice(bytes)
        .map_err(|e| CtlError::Protocol(format!("unexpected answer from swarm-controller: {e}")))
}

/// The API's error for a status that is not a success.
fn api_error(status: StatusCode, bytes: &[u8]) -> CtlError {
    let (message, current) = match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => (body.error, body.current),
        Err(_) => (format!("swarm-controller answered {status}: {}", String::from_utf8_lossy(bytes)), None),
    };
    CtlError::Api { status, message, current }
}

/// Sends one request and returns the body of a 2xx answer.
///
/// # Errors
/// [`CtlError::NotRunning`] when nothing listens, [`CtlError::Api`] for an API error.
pub async fn request(
    api: &Api,
    method: Method,
    path: &str,
    if_match: Option<u64>,
    body: Option<Vec<u8>>,
) -> Result<Bytes, CtlError> {
    let (status, bytes) = exchange(api, build(method, path, if_match, None, body)?).await?;
    if status.is_success() {
        return Ok(bytes);
    }
    Err(api_error(status, &bytes))
}

/// Opens an event stream (`GET path`, resuming after `last_event_id`) and returns its body.
///
/// # Errors
/// As [`request`]: an answer that is not a success is the API's error.
pub async fn stream(api: &Api, path: &str, last_event_id: Option<u64>) -> Result<BodyReader, CtlError> {
    let (status, mut body) = api.open(build(Method::GET, path, None, last_event_id, None)?).await?;
    if status.is_success() {
        return Ok(body);
    }
    let mut bytes = Vec::new();
    while let Some(piece) = body.next().await {
        bytes.extend_from_slice(&piece?);
    }
    Err(api_error(status, &bytes))
}
