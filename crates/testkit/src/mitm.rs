//! A WebSocket man in the middle for tests of links between copies: it accepts a WebSocket,
//! opens one to the upstream with the same path, and relays every message both ways while
//! recording each payload (unmasked, as anyone on the path can read it). On command it injects
//! a message into the live connections, and it may rewrite text on the way (an on-path
//! attacker changing unsigned fields).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Which way a message travels through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toward {
    /// From the side that connected to the proxy to the upstream server.
    Upstream,
    /// From the upstream server back to the side that connected.
    Downstream,
}

/// Rewrites the text of each relayed text message.
pub type Rewrite = dyn Fn(Toward, String) -> String + Send + Sync;

type ToClient = SplitSink<WebSocketStream<TcpStream>, Message>;
type ToServer = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// The sending halves of one relayed connection, shared with [`WsMitm::inject`].
#[derive(Debug)]
struct Live {
    to_client: tokio::sync::Mutex<ToClient>,
    to_server: tokio::sync::Mutex<ToServer>,
}

#[derive(Default)]
struct State {
    seen: Mutex<Vec<(Toward, Vec<u8>)>>,
    live: Mutex<Vec<Arc<Live>>>,
    accepted: AtomicUsize,
    ended: AtomicUsize,
}

/// A recording, injecting WebSocket proxy on a free loopback port in front of one upstream.
/// Dropping it closes the listener and every connection through it.
pub struct WsMitm {
    addr: SocketAddr,
    state: Arc<State>,
    accept_task: JoinHandle<()>,
}

impl std::fmt::Debug for WsMitm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsMitm").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl WsMitm {
    /// Starts a proxy that relays unchanged to `upstream`.
    ///
    /// # Errors
    /// When it cannot bind a loopback port.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        Self::rewriting(upstream, |_, text| text).await
    }

    /// Starts a proxy that passes each relayed text message through `rewrite`.
    ///
    /// # Errors
    /// When it cannot bind a loopback port.
    pub async fn rewriting(
        upstream: SocketAddr,
        rewrite: impl Fn(Toward, String) -> String + Send + Sync + 'static,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the WebSocket proxy")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let accept_task = tokio::spawn(accept_loop(listener, upstream, Arc::clone(&state), Arc::new(rewrite)));
        Ok(Self { addr, state, accept_task })
    }

    /// The address to connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every payload relayed so far, in order, with its direction.
    pub fn seen(&self) -> Vec<(Toward, Vec<u8>)> {
        self.state.seen.lock().expect("seen lock").clone()
    }

    /// Whether any relayed payload contained `needle`.
    pub fn saw(&self, needle: &[u8]) -> bool {
        self.seen().iter().any(|(_, payload)| payload.windows(needle.len()).any(|w| w == needle))
    }

    /// How many connections the proxy has accepted since it started.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// How many accepted connections have ended (closed by either side, or never relayed).
    pub fn ended(&self) -> usize {
        self.state.ended.load(Ordering::SeqCst)
    }

    /// How many relayed connections are open now.
    pub fn live_connections(&self) -> usize {
        self.state.live.lock().expect("live lock").len()
    }

    /// Sends `message` on every open connection in the direction `toward`, as if the other end
    /// had sent it. Returns on how many connections it was sent.
    pub async fn inject(&self, toward: Toward, message: Message) -> usize {
        let live = self.state.live.lock().expect("live lock").clone();
        let mut sent = 0;
        for connection in live {
            let result = match toward {
                Toward::Upstream => connection.to_server.lock().await.send(message.clone()).await,
                Toward::Downstream => connection.to_client.lock().await.send(message.clone()).await,
            };
            sent += usize::from(result.is_ok());
        }
        sent
    }
}

impl Drop for WsMitm {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

fn unlimited() -> WebSocketConfig {
    WebSocketConfig::default().max_message_size(None).max_frame_size(None)
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, state: Arc<State>, rewrite: Arc<Rewrite>) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((client, _)) = listener.accept().await {
        state.accepted.fetch_add(1, Ordering::SeqCst);
        let state = Arc::clone(&state);
        let rewrite = Arc::clone(&rewrite);
        connections.spawn(async move {
            relay(client, upstream, &state, rewrite).await;
            state.ended.fetch_add(1, Ordering::SeqCst);
        });
    }
}

// The handshake callback's error type is tungstenite's, whatever its size.
#[allow(clippy::result_large_err)]
async fn relay(client: TcpStream, upstream: SocketAddr, state: &State, rewrite: Arc<Rewrite>) {
    let mut path = String::from("/");
    let keep_path = |request: &Request, response: Response| {
        path = request.uri().path().to_owned();
        Ok(response)
    };
    let Ok(client) = tokio_tungstenite::accept_hdr_async_with_config(client, keep_path, Some(unlimited())).await else {
        return;
    };
    let url = format!("ws://{upstream}{path}");
    let Ok((server, _)) = tokio_tungstenite::connect_async_with_config(url, Some(unlimited()), false).await else {
        return;
    };
    let (to_client, from_client) = client.split();
    let (to_server, from_server) = server.split();
    let live = Arc::new(Live { to_client: to_client.into(), to_server: to_server.into() });
    state.live.lock().expect("live lock").push(Arc::clone(&live));
    tokio::select! {
        () = pump(from_client, &live, Toward::Upstream, state, rewrite.as_ref()) => {}
        () = pump(from_server, &live, Toward::Downstream, state, rewrite.as_ref()) => {}
    }
    state.live.lock().expect("live lock").retain(|other| !Arc::ptr_eq(other, &live));
    let _ = live.to_client.lock().await.close().await;
    let _ = live.to_server.lock().await.close().await;
}

/// Relays one direction until its source ends or its destination fails.
async fn pump<S>(mut from: SplitStream<S>, live: &Live, toward: Toward, state: &State, rewrite: &Rewrite)
where
    SplitStream<S>: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    while let Some(Ok(message)) = from.next().await {
        let message = match message {
            Message::Text(text) => Message::text(rewrite(toward, text.as_str().to_owned())),
            Message::Frame(_) => continue,
            other => other,
        };
        if matches!(message, Message::Text(_) | Message::Binary(_)) {
            state.seen.lock().expect("seen lock").push((toward, message.clone().into_data().to_vec()));
        }
        let closing = matches!(message, Message::Close(_));
        let sent = match toward {
            Toward::Upstream => live.to_server.lock().await.send(message).await,
            Toward::Downstream => live.to_client.lock().await.send(message).await,
        };
        if sent.is_err() || closing {
            return;
        }
    }
}
