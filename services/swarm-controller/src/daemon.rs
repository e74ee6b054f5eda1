//! The daemon: connect to NATS, create what is missing, bind the socket, reconcile once, then
//! serve the API and reconcile periodically until shutdown.

use std::future::Future;
use std::sync::Arc;

use crate::api::{self, App};
use crate::clock::Clock;
use crate::config::Config;
use crate::nats::{self, NatsError};
use crate::reconcile::Reconciler;
use crate::schedules::{Definitions, StoreError};
use crate::socket::{self, SocketError};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// NATS unreachable, credential refused, or objects misconfigured.
    #[error(transparent)]
    Nats(#[from] NatsError),
    /// The socket could not be set up.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The first reconcile pass could not read the buckets.
    #[error("first reconcile pass: {0}")]
    FirstPass(#[from] StoreError),
}

/// Runs the daemon until `shutdown` resolves, then drains requests and removes the socket.
///
/// # Errors
/// [`StartError`] when it cannot start; once serving it only logs.
pub async fn run(
    config: Config,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let client = nats::connect(&config.nats_url, config.nats_creds.as_deref()).await?;
    tracing::info!(url = %config.nats_url, "connected to NATS");
    let js = async_nats::jetstream::new(client.clone());
    let buckets = ensure_objects_patiently(&js).await?;
    let definitions = Definitions::new(js.clone(), buckets.definitions);
    let reconciler = Arc::new(Reconciler::new(js, definitions.clone(), buckets.agent_schedules));
    let listener = socket::bind(&config.socket)?;
    let first = reconciler.pass().await?;
    tracing::info!(?first, "first reconcile pass done");

    let periodic = tokio::spawn(reconcile_periodically(reconciler.clone(), config.reconcile_every));
    let app = Arc::new(App { client, definitions, reconciler, clock });
    tracing::info!(socket = %config.socket.display(), "serving the API");
    warp::serve(api::routes(app)).incoming(listener).graceful(shutdown).run().await;
    periodic.abort();
    socket::remove(&config.socket);
    tracing::info!("stopped");
    Ok(())
}

/// How long start-up keeps retrying JetStream set-up: a nats-server that was just started (by
/// the same boot, or a test) can refuse stream creation for a moment while JetStream comes up
/// in the account ("error creating store for stream", 10049).
const SETUP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

async fn ensure_objects_patiently(js: &async_nats::jetstream::Context) -> Result<nats::Buckets, NatsError> {
    let deadline = tokio::time::Instant::now() + SETUP_PATIENCE;
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        match nats::ensure_objects(js).await {
            Ok(buckets) => return Ok(buckets),
            // A misconfigured object stays misconfigured: report it at once.
            Err(err @ NatsError::Misconfigured(_)) => return Err(err),
            Err(err) if tokio::time::Instant::now() + pause > deadline => return Err(err),
            Err(err) => {
                tracing::warn!(%err, "JetStream set-up failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
}

async fn reconcile_periodically(reconciler: Arc<Reconciler>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate; the start already ran a pass
    loop {
        ticks.tick().await;
        match reconciler.pass().await {
            Ok(report) if report.written + report.removed + report.failed > 0 => {
                tracing::info!(?report, "reconcile pass repaired agent keys");
            }
            Ok(report) => tracing::debug!(?report, "reconcile pass: nothing to do"),
            Err(err) => tracing::warn!(%err, "reconcile pass failed; retrying at the next tick"),
        }
    }
}
