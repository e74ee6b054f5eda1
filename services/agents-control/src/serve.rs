//! `agents-control serve`: prove the store, load the registry, serve HTTP, keep the registry
//! fresh, link to the other copies and sweep codes in the background (each on its own task), and on shutdown fail
//! `/readyz`, close every link with "going away", then leave the membership.

use crate::cadence::{HEARTBEAT_EVERY_REFRESHES, REFRESH_EVERY, SWEEP_EVERY};
use crate::control::Control;
use crate::membership::Membership;
use crate::peers::Dialers;
use hyperhive_control_proto::link::CloseCode;
use hyperhive_daemon::tasks::{STOP_WITHIN, Tasks};
use hyperhive_object_store::probe;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// On shutdown, how long the links get to send their close frames.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

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

    let dialers = Arc::new(Dialers::default());
    let tasks = Tasks::new();
    tasks.spawn(keep_fresh(control.clone(), membership.clone(), dialers.clone()));
    tasks.spawn(sweep_codes(control.clone()));
    let draining = {
        let control = control.clone();
        let dialers = dialers.clone();
        async move {
            shutdown.await;
            // The order devices rely on: the load balancer stops sending new
            // connections, then every device is told to go (and reconnects elsewhere at once),
            // then this copy leaves the membership.
            tracing::info!(?drain, "shutting down: /readyz now fails");
            control.start_draining();
            tokio::time::sleep(drain).await;
            let counts = control.sessions.counts();
            tracing::info!(
                devices = counts.clients + counts.hosts,
                peers = counts.peers,
                "closing every link: going away"
            );
            control.sessions.close_all(CloseCode::GoingAway, "this copy is shutting down: reconnect to another");
            let deadline = Instant::now() + CLOSE_GRACE;
            while !control.sessions.counts().is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            dialers.stop_all();
        }
    };
    crate::server::serve(control.clone(), listener, draining).await;
    // The refresh stops before the dialers do, so it cannot start a new peer link behind them.
    tasks.stop(STOP_WITHIN).await;
    dialers.stop_all();
    membership.leave(control.store.as_ref()).await;
    tracing::info!("stopped");
    Ok(())
}

/// Re-reads the registry every [`REFRESH_EVERY`] and beats the membership heartbeat. Failures are logged and leave the last good registry in place (known
/// devices keep working).
async fn keep_fresh(control: Arc<Control>, membership: Arc<Membership>, dialers: Arc<Dialers>) {
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
        control.metrics.unreadable_records.store(control.registry.unreadable() as u64, Ordering::Relaxed);
        control.sessions.close_forgotten(&control.registry);
        if let Err(error) = dialers.refresh(&control, membership.peer_url().is_some()).await {
            tracing::warn!(%error, "could not read the membership; keeping the peer links as they are");
        }
        if count.is_multiple_of(HEARTBEAT_EVERY_REFRESHES)
            && let Err(error) = membership.heartbeat(control.store.as_ref(), control.clock.as_ref()).await
        {
            tracing::warn!(%error, "could not write the membership heartbeat");
        }
    }
}

/// Sweeps expired and redeemed codes every [`SWEEP_EVERY`], starting at once.
async fn sweep_codes(control: Arc<Control>) {
    let mut ticks = tokio::time::interval(SWEEP_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let paired = |id: &str| control.registry.holds(id);
        match control.codes.sweep(control.store.as_ref(), control.clock.as_ref(), paired).await {
            Ok(swept) => control.metrics.record_sweep(swept),
            Err(error) => tracing::warn!(%error, "could not sweep codes"),
        }
    }
}
