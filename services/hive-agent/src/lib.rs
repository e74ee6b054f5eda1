//! hive-agent: one agent's harness: its todo queue, its turns and its schedule
//! ticker, with its own least-privilege NATS credential and a local state db.
//!
//! # Layout
//! - [`config`]: settings from the environment.
//! - [`connect`]: the NATS connection, signing in with the credential file's current content.
//! - [`credential`]: reads and checks the agent's `.creds` file.
//! - [`creds_watch`]: follows the credential file and moves the connection to a renewed one.
//! - [`state`]: `state.db` (SQLite, WAL, migrations): fired slots, finished todos.
//! - [`ticker`]: reads the agent's schedules by direct get and fires due slots.
//! - [`consumer`]: the durable pull consumer, one todo at a time.
//! - [`lost_delivery`]: a todo handed to a pull request from before a reconnect, handed back.
//! - [`turn`]: runs the turn command.
//! - [`turn_env`]: the turn's secret variables, read from the agent's env file at each turn.
//! - [`feed`]: the turn's output and turn header, published for the agent's watchers.
//! - [`output_tail`]: the last of the turn's output, kept for its record.
//! - [`history`]: the record of each finished turn, on `turns.<agent>`.
//! - [`cancel`]: requests to cancel the running turn, on `cancel.<agent>`.
//! - [`pause`]: the pause file hive-c0re writes: while it exists, no todo and no slot.
//! - [`turn_file`]: `turn.json`, what the agent is doing, for hive-c0re to report.
//! - [`error`]: why the agent cannot start, and why a tick or a consumer pass failed.
//! - [`clock`]: the injected wall clock.

pub mod cancel;
pub mod clock;
pub mod config;
pub mod connect;
pub mod consumer;
pub mod credential;
pub mod creds_watch;
pub mod error;
pub mod feed;
pub mod history;
pub mod lost_delivery;
pub mod output_tail;
pub mod pause;
pub mod state;
pub mod supervisor;
pub mod ticker;
pub mod turn;
pub mod turn_env;
pub mod turn_file;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use hyperhive_daemon::tasks::{DropGuard, STOP_WITHIN, Tasks};
use tokio::sync::watch;

use crate::cancel::Cancels;
use crate::clock::Clock;
use crate::config::Config;
use crate::consumer::Consumer;
use crate::creds_watch::CredsWatch;
use crate::error::AgentError;
use crate::feed::Feed;
use crate::history::History;
use crate::pause::Pause;
use crate::state::State;
use crate::ticker::Ticker;
use crate::turn_file::TurnReporter;

/// A running agent. [`Agent::stop`] hands an unfinished todo back; dropping it only cancels
/// (a running turn is killed and its todo, not acked, comes back after the ack wait).
#[derive(Debug)]
pub struct Agent {
    /// The consumer alone: on stop it gets a grace to hand its todo back, while the tasks it
    /// publishes through (the feed) still run.
    consumer: Tasks,
    /// The ticker, the pause and credential watches, the feed.
    tasks: Tasks,
    ticks: watch::Receiver<u64>,
    stop: watch::Sender<bool>,
    /// A dropped agent stops at once.
    _cancel_on_drop: [DropGuard; 2],
}

/// How long [`Agent::stop`] waits for the consumer to hand back an unfinished todo.
const STOP_GRACE: Duration = Duration::from_secs(5);

impl Agent {
    /// Opens the state db, connects and starts the ticker and the consumer.
    ///
    /// # Errors
    /// [`AgentError`] saying what to fix.
    pub async fn start(config: Config, clock: Arc<dyn Clock>) -> Result<Self, AgentError> {
        let state = State::open(&config.state_dir)?;
        let (client, current) = connect::connect(&config).await?;
        let (renewals, renewed) = watch::channel(0);
        let tasks = Tasks::new();
        let consumer = Tasks::new();
        // From here on, a start step that fails stops what was already spawned.
        let _cancel_on_drop = [consumer.cancel_on_drop(), tasks.cancel_on_drop()];
        tasks.spawn(CredsWatch { path: config.creds.clone(), agent: config.name.clone(), renewals, current }.run());
        let js = jetstream::new(client.clone());
        let js_for_history = js.clone();
        let (ticks_tx, ticks) = watch::channel(0);
        let (stop, stop_rx) = watch::channel(false);
        let feed = Feed::start(client.clone(), &config.name, &tasks);
        let reporter = TurnReporter::new(&config.state_dir, feed.clone());
        let pause = Pause::new(config.pause_file.clone(), reporter.clone());
        tasks.spawn(pause.clone().watch());
        let message_id_key = state.message_id_key()?;
        let cancels = Cancels::default();
        tasks.spawn(cancels.clone().listen(client.clone(), config.name.clone()));
        tasks.spawn(
            Ticker {
                agent: config.name.clone(),
                js: js.clone(),
                message_id_key,
                state: state.clone(),
                clock: clock.clone(),
                period: config.schedule_tick,
                ticks: ticks_tx,
                older_streak: Default::default(),
                refused: Default::default(),
                pause: pause.clone(),
            }
            .run(),
        );
        consumer.spawn(
            Consumer {
                agent: config.name.clone(),
                client,
                renewed,
                js,
                state,
                clock,
                turn_command: config.turn_command.clone(),
                turn_timeout: config.turn_timeout,
                stop: stop_rx,
                pause,
                reporter,
                feed,
                history: History::new(js_for_history, &config.name),
                cancels,
            }
            .run(),
        );
        tracing::info!(agent = %config.name, tick = ?config.schedule_tick, "hive-agent started");
        Ok(Self { consumer, tasks, ticks, stop, _cancel_on_drop })
    }

    /// The number of finished schedule ticks (to wait for "n more ticks" in tests).
    pub fn ticks(&self) -> watch::Receiver<u64> {
        self.ticks.clone()
    }

    /// Stops the agent: a running turn is killed and its todo handed back (so it reruns at
    /// once, not after the ack wait), then the tasks end.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.consumer.stop_after(STOP_GRACE, STOP_WITHIN).await;
        self.tasks.stop(STOP_WITHIN).await;
    }
}
