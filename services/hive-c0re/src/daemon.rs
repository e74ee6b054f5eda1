//! Wiring: the state directory, the runner, the registry with its supervisors, the wanted-state
//! watcher, the deploy consumer and the status publisher, and the shutdown.
//!
//! On shutdown the process runner's agents are stopped (they would otherwise be orphans, ended
//! only by the next start's recovery); the systemd runner's units are left running under systemd
//! and adopted by the next start.

use std::future::Future;
use std::sync::Arc;

use async_nats::jetstream;
use hyperhive_daemon::tasks::{STOP_WITHIN, Tasks};
use tokio::sync::{Mutex, watch};
use tracing::{info, warn};

use crate::board::Board;
use crate::config::{Config, RunnerKind};
use crate::registry::Registry;
use crate::runner::Runner;
use crate::runner::process::ProcessRunner;
use crate::runner::systemd::SystemdRunner;
use crate::state::StateDir;
use crate::status::Publisher;

/// Runs hive-c0re until `shutdown` resolves.
///
/// # Errors
/// The state directory cannot be created, or the credential cannot be read.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let state = StateDir::open(&config.state_dir).map_err(|e| anyhow::anyhow!("HIVE_C0RE_STATE_DIR: {e}"))?;
    match config.runner {
        RunnerKind::Process => {
            let runner = ProcessRunner { bin: config.agent_bin.clone(), state: state.clone() };
            run_with(config, state, runner, shutdown).await
        }
        RunnerKind::Systemd => {
            let runner = SystemdRunner::new(config.agent_bin.clone());
            run_with(config, state, runner, shutdown).await
        }
    }
}

async fn run_with<R: Runner>(
    config: Config,
    state: StateDir,
    runner: R,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let started_at = crate::now();
    let client = crate::nats::connect(&config.hive, &config.nats_url, &config.nats_creds).await?;
    let js = jetstream::new(client);
    let board = Board::default();
    let (stop, stop_rx) = watch::channel(false);
    let registry =
        Registry::new(config.nats_url.clone(), config.declared, Arc::new(runner), state, board.clone(), stop_rx);
    let registry = Arc::new(Mutex::new(registry));
    let tasks = Tasks::new();
    tasks.spawn(crate::wanted::run(js.clone(), config.hive.clone(), registry.clone()));
    match config.deploy {
        Some(keys) => {
            info!(controller_keys = ?keys.controller, "deploy messages are read; only these keys' signatures are applied");
            tasks.spawn(crate::deploy::run(js.clone(), config.hive.clone(), keys, registry.clone()));
        }
        None => warn!(
            "no HIVE_C0RE_XKEY_FILE: deploy messages are not read (they wait in the stream); make a key with \
             `hive-c0re keygen --out FILE`, add its public key to the hive directory, set HIVE_C0RE_XKEY_FILE, \
             and pin the controller's deploy key in HIVE_C0RE_CONTROLLER_KEYS"
        ),
    }
    tasks.spawn(Publisher { js, hive: config.hive.clone(), board, every: config.status_every, started_at }.run());
    info!(hive = %config.hive, "hive-c0re started");
    shutdown.await;
    info!("stopping");
    // The watchers first, so no wanted state or deploy reaches the registry while it stops.
    tasks.stop(STOP_WITHIN).await;
    let _ = stop.send(true);
    registry.lock().await.join().await;
    Ok(())
}
