//! A TCP proxy for fault tests: it passes traffic, stalls it, strands the connections open, or
//! cuts every connection, on command, while the test runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with traffic right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Forward bytes both ways.
    Pass,
    /// Hold everything: connections stay open, no byte moves, new connections are accepted but
    /// not forwarded. Looks like a frozen peer or a black-holed route.
    Stall,
    /// Close every live connection and close new ones at once. Looks like a dead peer.
    Cut,
    /// Hold the connections accepted before the `n`th (counting from 0) and forward the others:
    /// a network back after a partition, whose connections from before it stay silent, as a TCP
    /// connection does for up to two minutes while its retransmissions back off, or for good when
    /// the peer lost it.
    Strand(u64),
}

/// A TCP proxy on a free loopback port in front of one upstream address.
///
/// Dropping it closes the listener and every connection through it.
#[derive(Debug)]
pub struct ChaosProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    live: Arc<AtomicUsize>,
    /// Connections accepted so far, each numbered in accept order.
    accepted: Arc<AtomicU64>,
    accept_task: JoinHandle<()>,
}

impl ChaosProxy {
    /// Starts a proxy that forwards to `upstream`.
    ///
    /// # Errors
    /// When it cannot bind a loopback port.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the chaos proxy")?;
        let addr = listener.local_addr()?;
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let live = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let accept_task =
            tokio::spawn(accept_loop(listener, upstream, mode_rx, Arc::clone(&live), Arc::clone(&accepted)));
        Ok(Self { addr, mode, live, accepted, accept_task })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Forwards traffic (the initial mode; also ends a stall, a strand or a cut).
    pub fn pass(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    /// Holds all traffic until [`ChaosProxy::pass`] or [`ChaosProxy::cut`].
    pub fn stall(&self) {
        self.mode.send_replace(Mode::Stall);
    }

    /// Holds every connection open now, for good (until [`ChaosProxy::pass`] or
    /// [`ChaosProxy::cut`]), and forwards the ones made from now on: the network is back, but a
    /// client that keeps its old connection hears nothing on it. What a peer's silence costs a
    /// client is then how long it takes to notice and dial again.
    pub fn strand(&self) {
        self.mode.send_replace(Mode::Strand(self.accepted.load(Ordering::SeqCst)));
    }

    /// Closes every live connection and closes new ones until [`ChaosProxy::pass`].
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }

    /// How many connections are open through the proxy now.
    pub fn live_connections(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        // Connection tasks end when they see the mode channel close.
        self.mode.send_replace(Mode::Cut);
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mode: watch::Receiver<Mode>,
    live: Arc<AtomicUsize>,
    accepted: Arc<AtomicU64>,
) {
    while let Ok((client, _)) = listener.accept().await {
        if *mode.borrow() == Mode::Cut {
            drop(client);
            continue;
        }
        let number = accepted.fetch_add(1, Ordering::SeqCst);
        let mode = mode.clone();
        let live = Arc::clone(&live);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else { return };
            // Each read is written on at once: with Nagle's algorithm a small write waits for the
            // peer's delayed ACK (about 40 ms), which turned every NATS request through the proxy
            // into a 40 ms one.
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            live.fetch_add(1, Ordering::SeqCst);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::join!(
                pump(client_read, server_write, mode.clone(), number),
                pump(server_read, client_write, mode, number)
            );
            live.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Copies one direction of connection `number`, obeying the mode. Returns when the source ends,
/// the destination fails, or the proxy cuts or is dropped; dropping the halves closes the socket.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>, number: u64) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !wait_for_pass(&mut mode, number).await {
            return;
        }
        tokio::select! {
            read = from.read(&mut buf) => {
                let n = match read {
                    Ok(0) | Err(_) => {
                        let _ = to.shutdown().await;
                        return;
                    }
                    Ok(n) => n,
                };
                // A stall that began while this read was pending holds the bytes read.
                if !wait_for_pass(&mut mode, number).await || to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
            changed = mode.changed() => {
                if changed.is_err() || *mode.borrow() == Mode::Cut {
                    return;
                }
            }
        }
    }
}

/// Waits while the proxy stalls or strands connection `number`; `false` when the connection must
/// close instead.
async fn wait_for_pass(mode: &mut watch::Receiver<Mode>, number: u64) -> bool {
    loop {
        match *mode.borrow_and_update() {
            Mode::Pass => return true,
            Mode::Cut => return false,
            Mode::Strand(first_passing) if number >= first_passing => return true,
            Mode::Stall | Mode::Strand(_) => {}
        }
        if mode.changed().await.is_err() {
            return false;
        }
    }
}
