//! One device's link spoken frame by frame (the handshake from control-link, then plain
//! frames), so a latency sample is the time of the frames themselves, with no client library
//! between the clock and the socket: the same footing as the echo baseline.

use futures::{SinkExt, StreamExt};
use hyperhive_control_link::handshake::answer_challenge;
use hyperhive_control_link::{Identity, websocket_config};
use hyperhive_control_proto::link::LinkFrame;
use std::net::SocketAddr;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

pub struct RawLink {
    socket: WebSocketStream<TcpStream>,
}

impl RawLink {
    /// Connects to the copy at `addr` and runs the handshake as `identity`; checks the copy's
    /// proof.
    pub async fn connect(addr: SocketAddr, identity: &Identity) -> RawLink {
        let tcp = TcpStream::connect(addr).await.expect("the copy listens");
        tcp.set_nodelay(true).expect("TCP_NODELAY");
        let url = format!("ws://{addr}/v1/link");
        let (socket, _) = tokio_tungstenite::client_async_with_config(url, tcp, Some(websocket_config()))
            .await
            .expect("the WebSocket upgrade");
        let mut link = RawLink { socket };
        let challenge = link.next_raw().await;
        let (hello, awaiting) =
            answer_challenge(&challenge, &identity.device_id, identity.device_key(), &mut rand::rng())
                .expect("a challenge");
        link.send(&hello).await;
        let welcome = link.next_raw().await;
        awaiting.verify_welcome(&welcome, &identity.control_key).expect("the copy proves the control key");
        link
    }

    pub async fn send(&mut self, frame: &LinkFrame) {
        self.socket.send(Message::text(frame.encode())).await.expect("the link is open");
    }

    async fn next_raw(&mut self) -> LinkFrame {
        loop {
            match self.socket.next().await.expect("the link is open").expect("a readable message") {
                Message::Text(text) => return LinkFrame::decode(&text).expect("a well-formed frame"),
                Message::Close(frame) => panic!("the copy closed the link: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// The next frame that is neither keepalive nor presence (pings are answered).
    pub async fn next(&mut self) -> LinkFrame {
        loop {
            match self.next_raw().await {
                LinkFrame::Ping { t } => self.send(&LinkFrame::Pong { t }).await,
                LinkFrame::Presence { .. } | LinkFrame::PresenceChanged { .. } | LinkFrame::Pong { .. } => {}
                frame => return frame,
            }
        }
    }
}
