//! The API's accept loop on the socket: each connection's requests carry its [`Caller`], the user
//! the kernel names as the peer of that connection with the role `SWARM_SOCKET_ROLES` gives it,
//! for the API to check and to record as who acted. On a connection of the hive-gateway's user
//! (`SWARM_GATEWAY_USER`), and there only, each request's caller is the SSO user the gateway
//! names in its headers, with the role `SWARM_GATEWAY_ROLES` gives its groups. A connection whose
//! first request is a relay watcher's is answered without hyper ([`super::event_stream`]).

use std::future::Future;
use std::io;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use warp::Filter;
use warp::http::{HeaderMap, Version};
use warp::reply::Response;

use super::event_stream::{self, First, Replayed};
use crate::api::Caller;
use crate::config::{GatewayRoles, SocketRoles};

/// Who the socket's callers are: the roles of its users, and the gateway whose SSO users are
/// named by its headers.
#[derive(Debug, Clone)]
pub struct Access {
    /// Each socket user's role.
    pub roles: SocketRoles,
    /// The gateway's user and its SSO users' roles, if one is set.
    pub gateway: Option<GatewayRoles>,
}

/// How long the loop waits after an accept error that is not one connection's (out of file
/// descriptors): the condition is the process's, and retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Serves `filter` on `listener` until `shutdown` completes, then waits for open connections to
/// finish (as warp's graceful server does).
pub async fn serve<F>(listener: UnixListener, filter: F, access: Access, shutdown: impl Future<Output = ()>)
where
    F: Filter<Extract = (Response,), Error = warp::Rejection> + Clone + Send + Sync + 'static,
{
    let graceful = GracefulShutdown::new();
    // Tells connections still waiting for their first request that the server stops: until
    // hyper or the event stream has one, nothing else would close it, and the graceful shutdown
    // waits for every connection.
    let (stopping, stop_seen) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let mut stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "accepting a connection on the socket failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let watcher = graceful.watcher();
        let service = TowerToHyperService::new(warp::service(filter.clone()));
        let access = access.clone();
        let mut stop_seen = stop_seen.clone();
        tokio::spawn(async move {
            // Boxed, as each branch below: the task keeps the size of its largest state for the
            // connection's whole life, and a relay watcher's connection lives for hours.
            let Some((uid, caller)) = Box::pin(peer(&stream, &access.roles)).await else { return };
            // The gateway's headers are read on its own connections only; anyone else's are
            // ignored.
            let gateway = access.gateway.filter(|gateway| gateway.uid == uid);
            let caller_of = move |headers: &HeaderMap| match &gateway {
                Some(gateway) => Caller::behind_gateway(gateway, headers),
                None => caller.clone(),
            };
            let first = tokio::select! {
                first = Box::pin(event_stream::first_request(&mut stream)) => first,
                _ = stop_seen.wait_for(|stopping| *stopping) => First::Gone,
            };
            drop(stop_seen);
            match first {
                First::Gone => {}
                First::EventStream(mut request) => {
                    let caller = caller_of(request.headers());
                    request.extensions_mut().insert(caller);
                    // Held until the answer ends, so that a graceful shutdown waits for it as
                    // for hyper's connections (the feeds end their streams at shutdown).
                    let _watched = watcher;
                    let chunked = request.version() == Version::HTTP_11;
                    let answer = Box::pin(service.call(request));
                    Box::pin(event_stream::serve(stream, chunked, answer)).await;
                }
                First::Other(read) => {
                    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                        let caller = caller_of(request.headers());
                        request.extensions_mut().insert(caller);
                        // hyper keeps room for one request's future per connection as long as
                        // the connection lives; the API's is about 11 KiB. Boxed, that room is a
                        // pointer and the future's memory goes when its answer starts.
                        Box::pin(service.call(request))
                    });
                    // HTTP/1.1 only (swarmctl, nginx and curl speak it): a server that also
                    // detects HTTP/2 reads the request's first 24 bytes apart, and hyper then
                    // doubles the connection's read buffer to 16 KiB.
                    let io = TokioIo::new(Replayed::new(read, stream));
                    let connection = http1::Builder::new().serve_connection(io, service);
                    if let Err(e) = Box::pin(watcher.watch(connection)).await {
                        tracing::debug!(error = %e, "a socket connection ended with an error");
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    graceful.shutdown().await;
}

/// The connection's peer's uid and the caller it is, or `None` (logged) when the kernel cannot
/// say: such a connection is closed unanswered rather than served as nobody.
async fn peer(stream: &UnixStream, roles: &SocketRoles) -> Option<(u32, Caller)> {
    let credentials = stream
        .peer_cred()
        .inspect_err(|e| tracing::warn!(error = %e, "no peer credentials on a socket connection; closing it"))
        .ok()?;
    Some((credentials.uid(), Caller::local(credentials.uid(), roles).await))
}

/// An error of one connection (it went away before it was taken), not of the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
