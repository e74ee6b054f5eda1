//! Wiring: bind, serve until shutdown, stop.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;

use crate::api::{self, App};
use crate::config::Config;
use crate::password::Hasher;
use crate::users_file::UsersFile;

/// Serves until `shutdown` completes, then finishes the requests in flight (a write in progress
/// completes, so the file is never left half replaced by a stop).
///
/// # Errors
/// When the address cannot be bound.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (AUTHELIA_BRIDGE_LISTEN)", config.listen))?;
    let users = UsersFile::new(config.users_file);
    // Say at start when the file is already unusable, rather than at the first request.
    if let Err(e) = users.read().await {
        tracing::warn!("{e}");
    }
    tracing::info!(
        listen = %config.listen,
        users_file = %users.path().display(),
        managed_group = %config.managed_group,
        "serving"
    );
    let app =
        Arc::new(App { token: config.token, users, managed_group: config.managed_group, hasher: Hasher::default() });
    warp::serve(api::routes(app)).incoming(listener).graceful(shutdown).run().await;
    tracing::info!("stopped");
    Ok(())
}
