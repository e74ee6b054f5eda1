//! The HTTP server of a copy. Each TCP connection is one hyper HTTP/1 connection; WebSocket
//! upgrades of `/v1/link` and `/v1/peer` are answered here, and every other request goes to
//! the warp routes of [`crate::http`].
//!
//! The upgrades are done here rather than with warp's `ws()` because warp cannot size
//! tungstenite's read buffer, and its default (128 KiB, zero-filled on the first read) would be
//! most of every idle device's memory; [`hyperhive_control_link::websocket_config`] sizes it
//! for small frames.

use crate::control::Control;
use crate::http::{ClientAddress, MAX_BODY, json_error};
use crate::limits::{Admitted, Full};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::upgrade::OnUpgrade;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use warp::Reply;
use warp::reply::Response;

/// A WebSocket a device or a peer opened to this copy.
pub type ServerSocket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// How long to wait before accepting again after the listener failed (out of file descriptors:
/// retrying at once would spin).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `control` on `listener` until `shutdown` resolves; then stops accepting and waits for
/// the plain HTTP requests in flight (upgraded links are closed by their own tasks).
///
/// Every connection is admitted by the copy's [`crate::limits::Gate`] first (one past a limit is
/// closed at once, before anything is read), and must send each request's head, then its body,
/// within the request timeout: a slow or silent client otherwise holds a socket and its buffers
/// for as long as it likes.
pub async fn serve(control: Arc<Control>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let routes = crate::http::routes(control.clone());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let request_timeout = control.guards.limits.request_timeout;
    loop {
        let (stream, admitted) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match control.guards.gate.admit(peer.ip()) {
                    Ok(admitted) => (stream, admitted),
                    Err(full) => {
                        let counter = match full {
                            Full::Copy => &control.metrics.connections_refused_copy,
                            Full::Address => &control.metrics.connections_refused_address,
                        };
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::debug!(?full, %peer, "closed a connection past a limit");
                        continue;
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let routes = TowerToHyperService::new(warp::service(routes.clone()));
        let control = control.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let (control, routes, admitted) = (control.clone(), routes.clone(), admitted.clone());
            async move { Ok::<_, Infallible>(route(control, routes, admitted, request).await) }
        });
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
            builder.http1().timer(TokioTimer::new()).header_read_timeout(request_timeout);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Which WebSocket a path is.
#[derive(Debug, Clone, Copy)]
enum Socket {
    Link,
    Peer,
}

async fn route<S>(control: Arc<Control>, routes: S, admitted: Arc<Admitted>, request: Request<Incoming>) -> Response
where
    S: hyper::service::Service<Request<http_body_util::Full<Bytes>>, Response = Response, Error = Infallible>,
{
    let socket = match request.uri().path() {
        "/v1/link" => Socket::Link,
        "/v1/peer" => Socket::Peer,
        _ => {
            let mut request = match read_body(&control, request).await {
                Ok(request) => request,
                Err(refusal) => return refusal,
            };
            request.extensions_mut().insert(ClientAddress(admitted.peer()));
            return routes.call(request).await.unwrap_or_else(|never| match never {});
        }
    };
    upgrade(control, socket, request, admitted)
}

/// Reads a request's body whole, at most [`MAX_BODY`] bytes and within the request timeout
/// (hyper's header timeout covers only the head: a body sent a byte at a time would otherwise
/// hold its connection for ever).
async fn read_body(
    control: &Control,
    request: Request<Incoming>,
) -> Result<Request<http_body_util::Full<Bytes>>, Response> {
    let timeout = control.guards.limits.request_timeout;
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY as usize);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(body)) => Ok(Request::from_parts(parts, http_body_util::Full::new(body.to_bytes()))),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            Err(json_error(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is larger than {MAX_BODY} bytes")))
        }
        Ok(Err(error)) => Err(json_error(StatusCode::BAD_REQUEST, format!("reading the request body failed: {error}"))),
        Err(_) => {
            control.metrics.requests_timed_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Err(json_error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {}s: send it whole", timeout.as_secs_f64()),
            ))
        }
    }
}

/// Checks the upgrade request (RFC 6455 4.2.1), answers 101 and starts the socket's task once
/// hyper hands over the connection. The socket's task holds the connection's admission until it
/// ends; a device link releases its address's share once the device has proven itself.
fn upgrade(control: Arc<Control>, socket: Socket, mut request: Request<Incoming>, admitted: Arc<Admitted>) -> Response {
    let key = match check_upgrade(request.method(), request.headers()) {
        Ok(key) => key,
        Err(problem) => {
            let path = request.uri().path();
            return json_error(
                StatusCode::BAD_REQUEST,
                format!("{path} is a WebSocket: {problem} (see docs/control-plane/link-protocol.md)"),
            );
        }
    };
    tokio::spawn(socket_task(hyper::upgrade::on(&mut request), socket, control, admitted));
    let mut response = warp::reply::with_status(warp::reply(), StatusCode::SWITCHING_PROTOCOLS).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, HeaderValue::from_str(&key).expect("base64 is a valid header value"));
    response
}

/// Serves one upgraded socket. This future is what every connected device holds for as long as
/// it stays connected, so it is kept to the device link's own state: the link between copies
/// (its handshake and sealing state, three times the size) runs boxed, and there are only a
/// few of those.
async fn socket_task(upgrading: OnUpgrade, socket: Socket, control: Arc<Control>, admitted: Arc<Admitted>) {
    let upgraded = match upgrading.await {
        Ok(upgraded) => upgraded,
        Err(error) => {
            tracing::debug!(%error, "the WebSocket upgrade did not complete");
            return;
        }
    };
    let io = TokioIo::new(upgraded);
    match socket {
        Socket::Link => {
            let config = hyperhive_control_link::websocket_config();
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            crate::link::serve(socket, control, admitted).await;
        }
        Socket::Peer => {
            let config = crate::peer_link::websocket_config();
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            Box::pin(crate::peer_link::accept(socket, control)).await;
            drop(admitted);
        }
    }
}

/// The `Sec-WebSocket-Accept` value for a valid upgrade request, or what is wrong with it.
fn check_upgrade(method: &Method, headers: &HeaderMap) -> Result<String, &'static str> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if method != Method::GET {
        return Err("use GET");
    }
    if !has_token(header::CONNECTION, "upgrade") || !has_token(header::UPGRADE, "websocket") {
        return Err("send Connection: Upgrade and Upgrade: websocket");
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()) != Some("13") {
        return Err("send Sec-WebSocket-Version: 13");
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY).ok_or("send a Sec-WebSocket-Key")?;
    Ok(derive_accept_key(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (header::HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
    }

    /// Every connected device holds one of these for as long as it is connected (the idle
    /// memory per device the benchmark measures): with the peer link's future inside, it was
    /// 4.9 KiB against the device link's 1.6 KiB.
    #[test]
    fn a_socket_task_is_no_larger_than_the_device_link_needs() {
        use crate::clock::SystemClock;
        use crate::key::ControlKey;
        use crate::limits::Gate;
        use hyperhive_object_store::file::FileStore;

        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FileStore::open(dir.path()).unwrap());
        let control = Arc::new(Control::new(store, ControlKey::from_seed([1; 32]), Arc::new(SystemClock)));
        let admitted = Arc::new(Gate::new(1, 1)).admit([127, 0, 0, 1].into()).unwrap();
        let upgrading = hyper::upgrade::on(Request::new(()));
        let task = socket_task(upgrading, Socket::Link, control, admitted);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 2048, "a socket task takes {size} bytes");
    }

    #[test]
    fn upgrade_requests_are_checked_and_answered_with_the_rfc_accept_key() {
        let good = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        // The example of RFC 6455 section 1.3.
        assert_eq!(check_upgrade(&Method::GET, &headers(&good)).unwrap(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(check_upgrade(&Method::POST, &headers(&good)), Err("use GET"));
        assert!(check_upgrade(&Method::GET, &headers(&good[1..])).unwrap_err().contains("Connection"));
        let old_version = [good[0], good[1], ("sec-websocket-version", "8"), good[3]];
        assert!(check_upgrade(&Method::GET, &headers(&old_version)).unwrap_err().contains("13"));
        assert!(check_upgrade(&Method::GET, &headers(&good[..3])).unwrap_err().contains("Key"));
    }
}
