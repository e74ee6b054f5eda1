//! HTTP/1.1 over the controller's unix socket.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::http::{Method, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::UnixStream;

use crate::definition::ScheduleView;

/// A failed swarmctl command; the message is what the user sees.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Nothing listens at the socket.
    #[error(
        "swarm-controller is not running at {} (set --socket or SWARM_CONTROLLER_SOCKET)",
        .0.display()
    )]
    NotRunning(PathBuf),
    /// The socket exists but cannot be used (permissions...).
    #[error("cannot reach swarm-controller at {}: {}", .0.display(), .1)]
    Unreachable(PathBuf, io::Error),
    /// The API said no.
    #[error("{message}")]
    Api {
        /// The HTTP status.
        status: StatusCode,
        /// The API's error message.
        message: String,
        /// On a conflict: the schedule as it is now.
        current: Option<Box<ScheduleView>>,
    },
    /// The conversation itself failed.
    #[error("talking to swarm-controller: {0}")]
    Protocol(String),
    /// Bad command-line input the parser could not catch.
    #[error("{0}")]
    Usage(String),
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    #[serde(default)]
    current: Option<Box<ScheduleView>>,
}

/// Sends `request` over the socket (adding `Host`) and returns the status and body.
///
/// # Errors
/// [`CtlError::NotRunning`] when nothing listens, [`CtlError::Protocol`] when HTTP fails.
pub async fn send(socket: &Path, mut request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), CtlError> {
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
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| protocol(&e))?.to_bytes();
    Ok((status, bytes))
}

/// Sends one request and returns the body of a 2xx answer.
///
/// # Errors
/// [`CtlError::NotRunning`] when nothing listens, [`CtlError::Api`] for an API error.
pub async fn request(
    socket: &Path,
    method: Method,
    path: &str,
    if_match: Option<u64>,
    body: Option<Vec<u8>>,
) -> Result<Bytes, CtlError> {
    // Recorded as who set a wanted state; other routes ignore it.
    let mut builder = Request::builder().method(method).uri(path).header("x-set-by", "swarmctl");
    if let Some(revision) = if_match {
        builder = builder.header(header::IF_MATCH, revision.to_string());
    }
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| CtlError::Protocol(e.to_string()))?;
    let (status, bytes) = send(socket, request).await?;
    if status.is_success() {
        return Ok(bytes);
    }
    let (message, current) = match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(body) => (body.error, body.current),
        Err(_) => (format!("swarm-controller answered {status}: {}", String::from_utf8_lossy(&bytes)), None),
    };
    Err(CtlError::Api { status, message, current })
}
