//! The NATS connection: the hive's credential, its own inbox prefix (the only subscribe subject
//! it is granted), reconnects forever. Everything hive-c0re then does on NATS lies within
//! `hive_imports` (crates/nats-creds/src/permissions.rs): no `STREAM.INFO` (streams are opened
//! with `get_stream_no_info`), no consumer created (the controller makes `hive-<hive>` on each
//! stream; hive-c0re reads its info, pulls and acks), direct gets of its own agents' wanted keys, and puts to its own status key.

use std::path::Path;
use std::time::Duration;

use async_nats::{ConnectOptions, Event};
use hyperhive_hive_proto::HiveName;
use hyperhive_nats_objects::hive_inbox_prefix;
use tracing::{info, warn};

/// Requests (direct gets, publish acks) give up after this; a refused one shows up only as a
/// timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the client pings the server: a connection that answers no ping for three in a row
/// is dropped and dialled again, so a connection left mute by a network partition (its TCP
/// retransmissions backing off) costs at most about 30 s, not the client's default three minutes.
pub const PING_INTERVAL: Duration = Duration::from_secs(10);

/// Connects (retrying in the background until the server answers).
///
/// # Errors
/// An unreadable credential file.
pub async fn connect(hive: &HiveName, url: &str, creds: &Path) -> anyhow::Result<async_nats::Client> {
    let options = ConnectOptions::with_credentials_file(creds)
        .await
        .map_err(|e| anyhow::anyhow!("cannot read {} (HIVE_C0RE_NATS_CREDS): {e}", creds.display()))?
        .name(format!("hive-c0re {hive}"))
        .custom_inbox_prefix(hive_inbox_prefix(hive))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .ping_interval(PING_INTERVAL)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(|attempts| {
            Duration::from_millis(100 * 2u64.pow(u32::try_from(attempts.min(6)).unwrap_or(6)))
                .min(Duration::from_secs(5))
        })
        .event_callback(|event| async move {
            match event {
                Event::Connected => info!("connected to NATS"),
                Event::Disconnected => warn!("disconnected from NATS; reconnecting"),
                other => warn!("NATS: {other}"),
            }
        });
    Ok(options.connect(hyperhive_nats_creds::servers::server_list(url)).await?)
}
