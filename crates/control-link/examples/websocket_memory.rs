//! Memory per WebSocket connection with the link's configuration against tungstenite's
//! defaults, measured in the same run (not a test: it holds thousands of sockets).
//!
//! Each configuration runs in its own child process (so one run's freed memory cannot hide the
//! other's), opens N loopback connections (server and client ends, both with that
//! configuration), exchanges one small frame on each so the buffers are in use, and reports the
//! growth of its resident set divided by N.
//!
//! Run: `cargo run --release -p hyperhive-control-link --example websocket_memory -- 2000`

use std::process::Command;

use futures::{SinkExt, StreamExt};
use hyperhive_control_link::websocket_config;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{accept_async_with_config, client_async_with_config};

fn resident_bytes() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).ok_or_else(|| anyhow::anyhow!("short statm"))?.parse()?;
    Ok(pages * 4096)
}

/// Opens `n` connections with `config` and returns the resident growth per connection (both
/// ends of it), in bytes.
async fn measure(n: usize, config: WebSocketConfig) -> anyhow::Result<u64> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let before = resident_bytes()?;
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let accept = async {
            let (tcp, _) = listener.accept().await?;
            anyhow::Ok(accept_async_with_config(tcp, Some(config)).await?)
        };
        let connect = async {
            let tcp = TcpStream::connect(addr).await?;
            anyhow::Ok(client_async_with_config(format!("ws://{addr}/v1/link"), tcp, Some(config)).await?.0)
        };
        let (mut server, mut client) = tokio::try_join!(accept, connect)?;
        client.send(Message::text(r#"{"type":"ping","t":1}"#)).await?;
        server.next().await.ok_or_else(|| anyhow::anyhow!("closed"))??;
        held.push((server, client));
    }
    let after = resident_bytes()?;
    drop(held);
    Ok(after.saturating_sub(before) / n as u64)
}

fn child(n: usize, which: &str) -> anyhow::Result<u64> {
    let output = Command::new(std::env::current_exe()?).arg(n.to_string()).arg(which).output()?;
    anyhow::ensure!(output.status.success(), "{which}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8(output.stdout)?.trim().parse()?)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(Ok(2000), |a| a.parse())?;
    if let Some(which) = args.get(2) {
        let config = if which == "link" { websocket_config() } else { WebSocketConfig::default() };
        let per_connection =
            tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(measure(n, config))?;
        println!("{per_connection}");
        return Ok(());
    }
    let default = child(n, "default")?;
    let link = child(n, "link")?;
    println!("{n} loopback WebSocket connections, resident growth per connection (server and client end):");
    println!("  tungstenite defaults: {:>7.1} KiB", default as f64 / 1024.0);
    println!("  link configuration:   {:>7.1} KiB", link as f64 / 1024.0);
    println!("  ratio (link / default): {:.3}", link as f64 / default as f64);
    Ok(())
}
