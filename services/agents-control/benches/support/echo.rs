//! The baseline: a plain tokio-tungstenite server that echoes every text message, on a thread
//! and runtime of its own (as a copy has a process of its own), with the link's WebSocket
//! configuration on both ends.

use futures::{SinkExt, StreamExt};
use hyperhive_control_link::websocket_config;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// Starts the echo server; it runs until the process ends.
pub fn start() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    listener.set_nonblocking(true).expect("non-blocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).expect("a tokio listener");
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    let Ok(mut socket) =
                        tokio_tungstenite::accept_async_with_config(tcp, Some(websocket_config())).await
                    else {
                        return;
                    };
                    while let Some(Ok(message)) = socket.next().await {
                        if message.is_text() && socket.send(message).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
    });
    addr
}

/// Round trips of `text` to the echo server at `addr`: `warmup` unmeasured, then `samples`.
pub async fn round_trips(addr: SocketAddr, text: &str, warmup: usize, samples: usize) -> Vec<Duration> {
    let tcp = TcpStream::connect(addr).await.expect("the echo server listens");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    let (mut socket, _) =
        tokio_tungstenite::client_async_with_config(format!("ws://{addr}/"), tcp, Some(websocket_config()))
            .await
            .expect("the WebSocket upgrade");
    let mut measured = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let started = Instant::now();
        socket.send(Message::text(text)).await.expect("the echo link is open");
        loop {
            if socket.next().await.expect("the echo link is open").expect("a message").is_text() {
                break;
            }
        }
        if i >= warmup {
            measured.push(started.elapsed());
        }
    }
    measured
}
