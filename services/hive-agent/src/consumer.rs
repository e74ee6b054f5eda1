//! The todo consumer: this agent's durable pull consumer `agent-<name>` on `TODO`,
//! filtered on `todo.<name>`, one todo at a time (`max_ack_pending` 1). Each todo runs one turn,
//! is recorded as finished, then acked; a redelivered finished todo is acked without a turn.
//! A turn past its timeout is killed and its todo recorded as finished (failed) and acked like
//! any other failed turn: a todo that hangs its turn would hang every retry too.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer::pull, message::Message};
use futures::StreamExt;
use hyperhive_nats_creds::agent_durable_name;
use hyperhive_schedule::{AgentName, TODO_STREAM, Todo, todo_subject};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::error::{LoopError, nats};
use crate::state::State;
use crate::turn::{TurnEnd, run_turn};

/// How long the server waits for an ack before redelivering; a running turn keeps extending
/// it with progress acks every third of it.
const ACK_WAIT: Duration = Duration::from_secs(60);
/// Each pull request lives this long; a new one follows, so a pull lost in a server restart is
/// replaced within this time at the latest.
const PULL_EXPIRES: Duration = Duration::from_secs(20);
/// The server's idle heartbeat on a pending pull: two missed ones end the stream with an error
/// and the consumer is re-created (the client's default, 15 s, makes a restart cost 30 s).
const PULL_HEARTBEAT: Duration = Duration::from_secs(5);
/// Acks tried before giving up on confirmation (the todo is then redelivered after `ACK_WAIT`
/// and, being recorded as finished, acked without a turn).
const ACK_ATTEMPTS: u32 = 20;
/// Pause before re-creating the consumer or retrying an ack after an error (e.g. while NATS
/// restarts).
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// What the consumer needs.
#[derive(Debug)]
pub struct Consumer {
    pub(crate) agent: AgentName,
    pub(crate) js: jetstream::Context,
    pub(crate) state: State,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) turn_command: String,
    /// How long a turn may run before it is killed.
    pub(crate) turn_timeout: Duration,
    /// Set once when the agent stops.
    pub(crate) stop: watch::Receiver<bool>,
}

impl Consumer {
    /// Consumes until told to stop, re-creating the consumer after errors.
    pub async fn run(self) {
        let mut stop = self.stop.clone();
        loop {
            if let Err(e) = self.consume().await {
                warn!("todo consumer stopped, retrying in {RETRY_DELAY:?}: {e}");
            }
            tokio::select! {
                () = stopped(&mut stop) => return,
                () = tokio::time::sleep(RETRY_DELAY) => {}
            }
        }
    }

    async fn consume(&self) -> Result<(), LoopError> {
        let stream = self.js.get_stream_no_info(TODO_STREAM).await.map_err(nats("opening the TODO stream"))?;
        // Created through `$JS.API.CONSUMER.CREATE.TODO.<durable>.todo.<agent>`, the only
        // consumer-create subject this agent's credential grants; idempotent with the same config.
        let consumer = stream
            .create_consumer(pull::Config {
                durable_name: Some(agent_durable_name(&self.agent)),
                filter_subject: todo_subject(&self.agent),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: ACK_WAIT,
                max_ack_pending: 1,
                ..Default::default()
            })
            .await
            .map_err(nats("creating its durable consumer"))?;
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(1)
            .expires(PULL_EXPIRES)
            .heartbeat(PULL_HEARTBEAT)
            .messages()
            .await
            .map_err(nats("pulling todos"))?;
        info!(consumer = %agent_durable_name(&self.agent), "consuming todos");
        let mut stop = self.stop.clone();
        loop {
            let message = tokio::select! {
                () = stopped(&mut stop) => return Ok(()),
                message = messages.next() => message,
            };
            let Some(message) = message else { return Ok(()) };
            self.handle(message.map_err(nats("receiving a todo"))?).await?;
        }
    }

    async fn handle(&self, message: Message) -> Result<(), LoopError> {
        let todo: Todo = match serde_json::from_slice(&message.payload) {
            Ok(todo) => todo,
            Err(e) => {
                error!(
                    subject = %message.subject,
                    "dropping a todo that is not JSON {{\"id\",\"source\",\"body\"}}: {e}"
                );
                // Terminated, not acked for a retry: it can never become valid.
                message.ack_with(AckKind::Term).await.map_err(nats("terminating a malformed todo"))?;
                return Ok(());
            }
        };
        if self.state.is_finished(&todo.id)? {
            info!(todo = %todo.id, "todo already finished, acking the redelivery without a turn");
            confirmed_ack(&message, &todo.id).await?;
            return Ok(());
        }
        info!(todo = %todo.id, source = %todo.source, "turn started");
        let turn = run_turn(&self.turn_command, &self.agent, &todo, self.turn_timeout);
        tokio::pin!(turn);
        let mut progress = tokio::time::interval(ACK_WAIT / 3);
        progress.tick().await;
        let mut stop = self.stop.clone();
        let status = loop {
            tokio::select! {
                status = &mut turn => break status,
                () = stopped(&mut stop) => {
                    // Stopping mid-turn: the turn is dropped, which kills it and every process
                    // it started, and the todo handed back at once rather than after the ack
                    // wait; it is not finished, so it reruns.
                    info!(todo = %todo.id, "stopping: turn killed, todo handed back");
                    message
                        .double_ack_with(AckKind::Nak(None))
                        .await
                        .map_err(nats("handing back an unfinished todo"))?;
                    return Ok(());
                }
                _ = progress.tick() => {
                    if let Err(e) = message.ack_with(AckKind::Progress).await {
                        warn!(todo = %todo.id, "could not extend the todo's ack deadline: {e}");
                    }
                }
            }
        };
        let code = match status {
            Ok(TurnEnd::Exited(status)) if status.success() => {
                info!(todo = %todo.id, "turn finished");
                status.code()
            }
            Ok(TurnEnd::TimedOut) => {
                error!(
                    todo = %todo.id,
                    timeout = %humantime::format_duration(self.turn_timeout),
                    "turn ran past its timeout (HIVE_AGENT_TURN_TIMEOUT): it and every process it \
                     started were killed; the todo is recorded as finished (failed) and will not rerun"
                );
                None
            }
            Ok(TurnEnd::Exited(status)) => {
                match status.code() {
                    Some(code) => warn!(todo = %todo.id, code, "turn exited with a non-zero code"),
                    None => warn!(todo = %todo.id, "turn was killed by a signal ({status})"),
                }
                status.code()
            }
            Err(e) => {
                error!(todo = %todo.id, "turn could not run `sh -c` (HIVE_AGENT_TURN_COMMAND): {e}");
                None
            }
        };
        // Recorded before the ack: a crash in between redelivers a todo that is then skipped.
        self.state.record_finished(&todo.id, self.clock.now(), code)?;
        confirmed_ack(&message, &todo.id).await?;
        Ok(())
    }
}

/// Resolves once the agent is stopping. (The read guard `wait_for` returns is dropped here, so
/// the futures that select on this stay `Send`.)
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await.map(drop);
}

/// Acks and waits for the server to confirm, retrying across a reconnect. A plain ack lost in a
/// server restart would leave the todo pending, and with one todo in flight the whole queue
/// would wait `ACK_WAIT` for its redelivery.
async fn confirmed_ack(message: &Message, todo_id: &str) -> Result<(), LoopError> {
    let mut attempt = 0;
    loop {
        match message.double_ack().await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < ACK_ATTEMPTS => {
                attempt += 1;
                warn!(todo = %todo_id, attempt, "ack not confirmed, retrying: {e}");
                tokio::time::sleep(RETRY_DELAY).await;
            }
            Err(e) => return Err(nats("acking a todo")(e)),
        }
    }
}
