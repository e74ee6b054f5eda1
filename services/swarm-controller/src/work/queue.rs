//! An agent's queue, `todo.<agent>` in `TODO`: queuing a prompt, listing what waits, removing a
//! waiting todo. The stream is a work queue, so what is in it is exactly what is not yet done;
//! the agent's consumer says which of it was handed out (its running turn).

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use hyperhive_nats_objects::{TODO_STREAM, agent_durable_name, todo_subject};
use hyperhive_schedule::{AgentName, Todo};
use time::OffsetDateTime;

use super::{Unavailable, unavailable};

/// Why a todo was not queued.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    /// The agent's queue holds its limit.
    #[error(
        "the queue of {0} is full ({limit} todos waiting); wait for its turns to take some, or remove waiting ones \
         (swarmctl todos rm AGENT ID)",
        limit = hyperhive_nats_objects::limits::TODO_MAX_MSGS_PER_AGENT
    )]
    Full(AgentName),
    /// NATS did not store it.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// One todo in the queue.
#[derive(Debug, Clone)]
pub struct Queued {
    /// Its sequence in `TODO`.
    pub seq: u64,
    /// The todo.
    pub todo: Todo,
    /// When it was queued.
    pub queued_at: OffsetDateTime,
    /// Whether the agent has it (its turn runs).
    pub running: bool,
}

/// What removing a todo found.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// It waited and is gone.
    Removed,
    /// No todo of this id waits.
    NotQueued,
    /// The agent has it: its turn runs.
    Running,
}

/// Reads and writes agents' queues.
#[derive(Debug, Clone)]
pub struct Queues {
    js: jetstream::Context,
}

impl Queues {
    /// The queues in `js`'s `TODO`.
    pub fn new(js: jetstream::Context) -> Self {
        Self { js }
    }

    /// Queues `todo` for `agent`, once per id within the duplicate window; `true` when it was
    /// queued already.
    ///
    /// # Errors
    /// [`EnqueueError`].
    pub async fn enqueue(&self, agent: &AgentName, todo: &Todo) -> Result<bool, EnqueueError> {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("todo:{agent}:{}", todo.id).as_str());
        let payload: bytes::Bytes = serde_json::to_vec(todo).expect("a todo serializes").into();
        let failed = unavailable("queuing the todo");
        let ack = self
            .js
            .publish_with_headers(todo_subject(agent), headers, payload)
            .await
            .map_err(|e| failed(e.to_string()))?;
        match ack.await {
            Ok(ack) => Ok(ack.duplicate),
            Err(e) if e.to_string().contains("maximum messages per subject") => Err(EnqueueError::Full(agent.clone())),
            Err(e) => Err(failed(e.to_string()).into()),
        }
    }

    /// What `agent`'s queue holds, oldest first (at most its limit).
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn list(&self, agent: &AgentName) -> Result<Vec<Queued>, Unavailable> {
        let stream = self.stream().await?;
        let handed_out = self.handed_out(&stream, agent).await?;
        let subject = todo_subject(agent);
        let failed = unavailable("reading the queue");
        let mut queued = Vec::new();
        let mut from = 1;
        loop {
            let message =
                match stream.raw_message_builder().sequence(from).next_by_subject(subject.clone()).send().await {
                    Ok(message) => message,
                    Err(e) if e.kind() == stream::RawMessageErrorKind::NoMessageFound => break,
                    Err(e) => return Err(failed(e.to_string())),
                };
            from = message.sequence + 1;
            // A todo that is not one (never published by the swarm) is shown by its sequence.
            let todo = serde_json::from_slice(&message.payload).unwrap_or_else(|_| Todo {
                id: format!("seq-{}", message.sequence),
                source: "unknown".into(),
                body: String::from_utf8_lossy(&message.payload).into_owned(),
            });
            queued.push(Queued {
                seq: message.sequence,
                todo,
                queued_at: message.time,
                running: message.sequence <= handed_out,
            });
        }
        Ok(queued)
    }

    /// Removes the waiting todo `id` from `agent`'s queue.
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn remove(&self, agent: &AgentName, id: &str) -> Result<Removed, Unavailable> {
        let Some(found) = self.list(agent).await?.into_iter().find(|q| q.todo.id == id) else {
            return Ok(Removed::NotQueued);
        };
        if found.running {
            return Ok(Removed::Running);
        }
        let stream = self.stream().await?;
        match stream.delete_message(found.seq).await {
            Ok(_) => Ok(Removed::Removed),
            // Taken by the agent (and acked) between the listing and the delete.
            Err(e) if e.to_string().to_ascii_lowercase().contains("not found") => Ok(Removed::NotQueued),
            Err(e) => Err(unavailable("removing the todo")(e.to_string())),
        }
    }

    async fn stream(&self) -> Result<stream::Stream<()>, Unavailable> {
        self.js.get_stream_no_info(TODO_STREAM).await.map_err(|e| unavailable("opening TODO")(e.to_string()))
    }

    /// The last sequence the agent's consumer was handed: every message of its queue up to it that
    /// is still in the stream is its running turn's (0 when it has no consumer yet).
    async fn handed_out(&self, stream: &stream::Stream<()>, agent: &AgentName) -> Result<u64, Unavailable> {
        match stream.consumer_info(agent_durable_name(agent)).await {
            Ok(info) => Ok(info.delivered.stream_sequence),
            Err(e) if e.to_string().to_ascii_lowercase().contains("not found") => Ok(0),
            Err(e) => Err(unavailable("reading the agent's consumer")(e.to_string())),
        }
    }
}
