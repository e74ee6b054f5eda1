//! The link's WebSocket configuration on a real loopback connection: frames up to the
//! protocol's cap pass both ways, a larger one is refused by the receiver instead of being
//! buffered whole.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use hyperhive_control_link::websocket::{READ_BUFFER_BYTES, websocket_config};
use hyperhive_control_proto::link::MAX_FRAME_BYTES;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::{Error, Message, error::CapacityError};
use tokio_tungstenite::{WebSocketStream, accept_async_with_config, client_async_with_config};

const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// A connected (server, client) pair, both with the link's configuration.
async fn pair() -> anyhow::Result<(WebSocketStream<TcpStream>, WebSocketStream<TcpStream>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = async {
        let (tcp, _) = listener.accept().await?;
        anyhow::Ok(accept_async_with_config(tcp, Some(websocket_config())).await?)
    };
    let client = async {
        let tcp = TcpStream::connect(addr).await?;
        let (ws, _) = client_async_with_config(format!("ws://{addr}/v1/link"), tcp, Some(websocket_config())).await?;
        anyhow::Ok(ws)
    };
    let (server, client) = tokio::time::timeout(STEP_TIMEOUT, async { tokio::try_join!(server, client) }).await??;
    Ok((server, client))
}

async fn next(ws: &mut WebSocketStream<TcpStream>) -> Option<Result<Message, Error>> {
    tokio::time::timeout(STEP_TIMEOUT, ws.next()).await.expect("a frame or an error within the timeout")
}

#[tokio::test]
async fn frames_up_to_the_cap_pass_both_ways() -> anyhow::Result<()> {
    let (mut server, mut client) = pair().await?;
    // Larger than the read buffer, so it takes several reads: small buffers cost no capacity.
    let largest = "x".repeat(MAX_FRAME_BYTES);
    assert!(largest.len() > READ_BUFFER_BYTES);
    client.send(Message::text(largest.clone())).await?;
    assert_eq!(next(&mut server).await.unwrap()?, Message::text(largest.clone()));
    server.send(Message::text(largest.clone())).await?;
    assert_eq!(next(&mut client).await.unwrap()?, Message::text(largest));
    Ok(())
}

#[tokio::test]
async fn a_frame_over_the_cap_is_refused_by_the_receiver() -> anyhow::Result<()> {
    let (mut server, mut client) = pair().await?;
    client.send(Message::text("x".repeat(MAX_FRAME_BYTES + 1))).await?;
    match next(&mut server).await {
        Some(Err(Error::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
            assert_eq!((size, max_size), (MAX_FRAME_BYTES + 1, MAX_FRAME_BYTES));
        }
        other => panic!("expected the oversized frame to be refused, got {other:?}"),
    }
    Ok(())
}
