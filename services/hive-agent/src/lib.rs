//! hive-agent: one agent's harness (DESIGN 4.5): its todo queue, its turns and its schedule
//! ticker, with its own least-privilege NATS credential and a local state db.
//!
//! # Layout
//! - [`config`]: settings from the environment.
//! - [`connect`]: the NATS connection and credential checks.
//! - [`state`]: `state.db` (SQLite, WAL, migrations): fired slots, finished todos.
//! - [`ticker`]: reads the agent's schedules by direct get and fires due slots.
//! - [`consumer`]: the durable pull consumer, one todo at a time.
//! - [`turn`]: runs the turn command.
//! - [`error`]: why a tick or a consumer pass failed.
//! - [`clock`]: the injected wall clock.

pub mod clock;
pub mod config;
pub mod connect;
pub mod consumer;
pub mod error;
pub mod state;
pub mod ticker;
pub mod turn;

use std::sync::Arc;

use async_nats::jetstream;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::Config;
use crate::consumer::Consumer;
use crate::state::{State, StateError};
use crate::ticker::Ticker;

/// Why the agent cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The credential file is missing, malformed or expired.
    #[error("credential: {0}")]
    Creds(String),
    /// The NATS connection could not be set up.
    #[error("NATS: {0}")]
    Nats(String),
    /// The state db could not be opened.
    #[error(transparent)]
    State(#[from] StateError),
}

/// A running agent; dropping it stops the ticker and the consumer (a running turn is killed
/// and its todo, not acked, comes back).
#[derive(Debug)]
pub struct Agent {
    tasks: JoinSet<()>,
    ticks: watch::Receiver<u64>,
}

impl Agent {
    /// Opens the state db, connects and starts the ticker and the consumer.
    ///
    /// # Errors
    /// [`AgentError`] saying what to fix.
    pub async fn start(config: Config, clock: Arc<dyn Clock>) -> Result<Self, AgentError> {
        let state = State::open(&config.state_dir)?;
        let client = connect::connect(&config).await?;
        let js = jetstream::new(client);
        let (ticks_tx, ticks) = watch::channel(0);
        let mut tasks = JoinSet::new();
        tasks.spawn(
            Ticker {
                agent: config.name.clone(),
                js: js.clone(),
                state: state.clone(),
                clock: clock.clone(),
                period: config.schedule_tick,
                ticks: ticks_tx,
                older_streak: Default::default(),
            }
            .run(),
        );
        tasks.spawn(
            Consumer { agent: config.name.clone(), js, state, clock, turn_command: config.turn_command.clone() }.run(),
        );
        tracing::info!(agent = %config.name, tick = ?config.schedule_tick, "hive-agent started");
        Ok(Self { tasks, ticks })
    }

    /// The number of finished schedule ticks (to wait for "n more ticks" in tests).
    pub fn ticks(&self) -> watch::Receiver<u64> {
        self.ticks.clone()
    }

    /// Stops the agent and waits for its tasks to end.
    pub async fn stop(mut self) {
        self.tasks.shutdown().await;
    }
}
