//! `agents-control serve`: prove the store, load the registry, serve HTTP, keep the registry
//! fresh and sweep codes in the background, and on shutdown fail `/readyz` before stopping.

use crate::control::Control;
use crate::membership::Membership;
use crate::{codes, http};
use hyperhive_object_store::probe;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// How often the registry is re-read (and the store's reachability checked).
pub const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// Codes are swept every this many refreshes.
const SWEEP_EVERY_REFRESHES: u32 = 15;
/// The membership heartbeat is written every this many refreshes.
const HEARTBEAT_EVERY_REFRESHES: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "the store {store} failed the conditional-write check: {failure}; run `agents-control store check --store {store}` for details"
    )]
    Probe { store: String, failure: probe::ProbeFailure },
    #[error("writing this copy's membership record to {store}: {error}")]
    Membership { store: String, error: hyperhive_object_store::StoreError },
    #[error("loading the registry from {store}: {error}")]
    Registry { store: String, error: crate::registry::RegistryError },
}

/// Runs a copy on `listener` until `shutdown` resolves, then fails `/readyz` for `drain`
/// (so the load balancer stops sending connections) and stops.
pub async fn run(
    control: Arc<Control>,
    membership: Arc<Membership>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> Result<(), ServeError> {
    let store = control.store.describe();
    probe::run(control.store.as_ref(), |_| {})
        .await
        .map_err(|failure| ServeError::Probe { store: store.clone(), failure })?;
    let devices = control
        .registry
        .refresh(control.store.as_ref())
        .await
        .map_err(|error| ServeError::Registry { store: store.clone(), error })?;
    membership
        .heartbeat(control.store.as_ref(), control.clock.as_ref())
        .await
        .map_err(|error| ServeError::Membership { store: store.clone(), error })?;
    tracing::info!(%store, devices, copy = membership.copy_id(), addr = ?listener.local_addr().ok(), "serving");

    let background = tokio::spawn(keep_fresh(control.clone(), membership.clone()));
    let draining = {
        let control = control.clone();
        async move {
            shutdown.await;
            tracing::info!(?drain, "shutting down: /readyz now fails");
            control.start_draining();
            tokio::time::sleep(drain).await;
        }
    };
    warp::serve(http::routes(control.clone())).incoming(listener).graceful(draining).run().await;
    background.abort();
    membership.leave(control.store.as_ref()).await;
    tracing::info!("stopped");
    Ok(())
}

/// Re-reads the registry every [`REFRESH_EVERY`], beats the membership heartbeat and sweeps
/// codes now and then. Failures are logged and leave the last good registry in place (known
/// devices keep working).
async fn keep_fresh(control: Arc<Control>, membership: Arc<Membership>) {
    let mut ticks = tokio::time::interval(REFRESH_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut count: u32 = 0;
    loop {
        ticks.tick().await;
        count = count.wrapping_add(1);
        if let Err(error) = control.registry.refresh(control.store.as_ref()).await {
            tracing::warn!(%error, "could not refresh the registry; serving the last one read");
            continue;
        }
        control.sessions.close_forgotten(&control.registry);
        if count.is_multiple_of(HEARTBEAT_EVERY_REFRESHES)
            && let Err(error) = membership.heartbeat(control.store.as_ref(), control.clock.as_ref()).await
        {
            tracing::warn!(%error, "could not write the membership heartbeat");
        }
        if count.is_multiple_of(SWEEP_EVERY_REFRESHES) {
            match codes::sweep(control.store.as_ref(), control.clock.as_ref()).await {
                Ok(swept) => control.metrics.record_sweep(swept),
                Err(error) => tracing::warn!(%error, "could not sweep codes"),
            }
        }
    }
}
