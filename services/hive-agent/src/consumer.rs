//! The todo consumer: this agent's durable pull consumer `agent-<name>` on `TODO`,
//! filtered on `todo.<name>`, one todo at a time (`max_ack_pending` 1). The swarm-controller
//! makes it (`hyperhive_nats_objects::agent_consumer`); the agent binds to it, waiting while it
//! is not there yet, and only fetches and acks. Each todo runs one turn,
//! is recorded as finished, then acked; a redelivered finished todo is acked without a turn.
//! A turn past its timeout is killed and its todo recorded as finished (failed) and acked like
//! any other failed turn: a todo that hangs its turn would hang every retry too.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, message::Message};
use futures::StreamExt;
use hyperhive_nats_objects::consumers::AGENT_ACK_WAIT;
use hyperhive_nats_objects::{agent_consumer, agent_durable_name};
use hyperhive_schedule::{AgentName, Todo};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::cancel::Cancels;
use crate::clock::Clock;
use crate::error::{LoopError, nats};
use crate::feed::Feed;
use crate::history::{Ended, History, record_of};
use crate::lost_delivery::LostDeliveries;
use crate::output_tail::OutputTail;
use crate::pause::Pause;
use crate::state::State;
use crate::turn::{TurnEnd, TurnLimits, run_turn};
use crate::turn_file::TurnReporter;

/// How long the server waits for an ack before redelivering (the consumer's, as the controller
/// makes it); a running turn keeps extending it with progress acks every third of it.
const ACK_WAIT: Duration = AGENT_ACK_WAIT;
/// Each fetch (a pull request for one todo) lives this long, and the client gives up on it 5 s
/// later; a new one follows, so a pull lost in a server restart is replaced within 10 s. Short,
/// because a fetch is not watched by heartbeats (the client's fetch does not act on them), and
/// cheap: one request per agent every 5 s while idle.
const PULL_EXPIRES: Duration = Duration::from_secs(5);
/// How long the move to a renewed credential may take before the consumer fetches again anyway.
const RECONNECT_PATIENCE: Duration = Duration::from_secs(10);
/// Acks tried before giving up on confirmation (the todo is then redelivered after `ACK_WAIT`
/// and, being recorded as finished, acked without a turn).
const ACK_ATTEMPTS: u32 = 20;
/// Pause before binding to the consumer again or retrying an ack after an error (e.g. while NATS
/// restarts).
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// What the consumer needs.
#[derive(Debug)]
pub struct Consumer {
    pub(crate) agent: AgentName,
    /// The connection, moved to a renewed credential between two todos.
    pub(crate) client: async_nats::Client,
    /// Raised by the credential watch on each renewal.
    pub(crate) renewed: watch::Receiver<u64>,
    pub(crate) js: jetstream::Context,
    pub(crate) state: State,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) turn_command: String,
    /// How long a turn may run before it is killed.
    pub(crate) turn_timeout: Duration,
    /// Set once when the agent stops.
    pub(crate) stop: watch::Receiver<bool>,
    /// While paused, no todo is fetched.
    pub(crate) pause: Pause,
    /// Where the turn state is reported.
    pub(crate) reporter: TurnReporter,
    /// Where the turn's output goes (its terminal).
    pub(crate) feed: Feed,
    /// Where each finished turn is recorded.
    pub(crate) history: History,
    /// Requests to cancel a running turn.
    pub(crate) cancels: Cancels,
}

impl Consumer {
    /// Consumes until told to stop, binding to the consumer again after errors.
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
        // Bound, never created: the swarm-controller makes it (this credential may not), and
        // until it has, the agent waits here, saying so once.
        let mut stop = self.stop.clone();
        let own = agent_consumer(&self.agent);
        let consumer = tokio::select! {
            biased;
            () = stopped(&mut stop) => return Ok(()),
            bound = own.bind_when_made(&self.js) => {
                bound.map_err(nats("binding to its durable consumer"))?
            }
        };
        info!(consumer = %agent_durable_name(&self.agent), "consuming todos");
        let mut renewed = self.renewed.clone();
        let mut lost = LostDeliveries::new(self.agent.clone(), &self.client);
        loop {
            // One fetch of one todo at a time, and only while not paused: a pull request left
            // open across a pause would hand the agent a todo it must not take. Biased: once
            // stopping, no new fetch may take (and strand) a todo another agent should get.
            tokio::select! {
                biased;
                () = stopped(&mut stop) => return Ok(()),
                () = self.pause.wait_unpaused() => {}
            }
            // Checked right before the fetch, so a renewal that came during a pause is taken
            // up before the first fetch after it.
            if renewed.has_changed().unwrap_or(false) {
                renewed.borrow_and_update();
                self.reconnect().await;
            }
            // Only on a live connection: a pull made without one waits in the client and goes
            // out on the next connection, after its fetch has given up. A server other than the
            // consumer's leader (a cluster) may still hand that pull the next todo, which nobody
            // then reads, and with one todo in flight the queue stalls for the whole ack wait.
            tokio::select! {
                biased;
                () = stopped(&mut stop) => return Ok(()),
                () = connected(&self.client) => {}
            }
            lost.hand_back(&self.client, &consumer).await;
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .expires(PULL_EXPIRES)
                .messages()
                .await
                .map_err(nats("pulling todos"))?;
            let message = tokio::select! {
                biased;
                () = stopped(&mut stop) => return hand_back_pending(&mut batch).await,
                message = batch.next() => message,
            };
            let Some(message) = message else { continue };
            let message = message.map_err(nats("receiving a todo"))?;
            if self.pause.check() {
                // Paused while the fetch waited: handed back at once, first in line again
                // (one todo in flight), so it runs first on resume.
                message.double_ack_with(AckKind::Nak(None)).await.map_err(nats("handing back a todo while paused"))?;
                continue;
            }
            self.handle(message).await?;
        }
    }

    /// Moves the connection to the renewed credential, here where no pull is open and no todo is
    /// held: a todo the server sent on the old connection just as it closed would otherwise wait
    /// out the ack wait before it is sent again. (Paused or in a long turn, the agent does not
    /// come here; the server closing the old connection at its expiry moves it then, and the
    /// reconnect signs in with the file as it is.)
    async fn reconnect(&self) {
        if let Err(e) = self.client.force_reconnect().await {
            warn!("cannot reconnect with the renewed credential; the next reconnect will use it: {e}");
            return;
        }
        // The client handles its commands in order: this flush is answered on the new connection.
        if tokio::time::timeout(RECONNECT_PATIENCE, self.client.flush()).await.is_err() {
            warn!("the connection has not come back within {RECONNECT_PATIENCE:?} of the renewal; still trying");
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
        self.reporter.working(&todo);
        // The header leaves before the turn's processes are created, which blocks the (one)
        // runtime thread for a while: whoever watches sees the turn start when it does.
        tokio::task::yield_now().await;
        let result = self.run_turn_of(&message, &todo).await;
        self.reporter.finished(matches!(result, Ok(true)));
        result.map(drop)
    }

    /// Runs the todo's turn, records it as finished and acks it (or hands it back on a stop);
    /// `true` when the turn succeeded.
    async fn run_turn_of(&self, message: &Message, todo: &Todo) -> Result<bool, LoopError> {
        let tail = OutputTail::default();
        let limits = TurnLimits { timeout: self.turn_timeout, feed: &self.feed, tail: &tail };
        let started = self.clock.now();
        let turn = run_turn(&self.turn_command, &self.agent, todo, limits, self.cancels.requested(&todo.id));
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
                    return Ok(false);
                }
                _ = progress.tick() => {
                    if let Err(e) = message.ack_with(AckKind::Progress).await {
                        warn!(todo = %todo.id, "could not extend the todo's ack deadline: {e}");
                    }
                }
            }
        };
        let succeeded = matches!(status, Ok(TurnEnd::Exited(status)) if status.success());
        let end = status.as_ref().map(|end| *end).map_err(drop);
        let code = match status {
            Ok(TurnEnd::Exited(status)) if status.success() => {
                info!(todo = %todo.id, "turn finished");
                status.code()
            }
            Ok(TurnEnd::Cancelled) => {
                warn!(
                    todo = %todo.id,
                    "turn cancelled: it and every process it started were ended; the todo is recorded as \
                     finished (cancelled) and will not rerun"
                );
                None
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
        let ended = self.clock.now();
        // Recorded before the ack: a crash in between redelivers a todo that is then skipped.
        self.state.record_finished(&todo.id, ended, code)?;
        // Stored beside the queue, not in its way: while `TURNS` has no leader (a node of a
        // cluster just died) its retries would hold the next todo for seconds.
        let (history, record) = (self.history.clone(), record_of(todo, Ended { started, ended, end }, &tail));
        tokio::spawn(async move { history.record(&record).await });
        confirmed_ack(message, &todo.id).await?;
        Ok(succeeded)
    }
}

/// How often [`connected`] looks at the connection.
const CONNECTED_POLL: Duration = Duration::from_millis(100);

/// Returns once the client is connected (at once when it is).
async fn connected(client: &async_nats::Client) {
    while client.connection_state() != async_nats::connection::State::Connected {
        tokio::time::sleep(CONNECTED_POLL).await;
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
/// Stopping while a fetch is open: the server keeps that pull request until it expires and may
/// still send it a todo, which a gone agent would hold for the whole ack wait (60 s) before it
/// went to the next one. So the stop waits out the pull (its [`PULL_EXPIRES`], and a second for
/// the server's word that it expired) and hands back whatever it brings, first in line again.
async fn hand_back_pending<S, E>(batch: &mut S) -> Result<(), LoopError>
where
    S: futures::Stream<Item = Result<Message, E>> + Unpin,
{
    let drain = async {
        while let Some(item) = batch.next().await {
            if let Ok(message) = item {
                message.double_ack_with(AckKind::Nak(None)).await.map_err(nats("handing back a todo at stop"))?;
            }
        }
        Ok(())
    };
    tokio::time::timeout(PULL_EXPIRES + Duration::from_secs(1), drain).await.unwrap_or(Ok(()))
}
