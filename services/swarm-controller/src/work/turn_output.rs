//! A finished turn's whole terminal output, from `RELAY` while it still holds it: the chunks on
//! `term.<agent>` after the turn's `working` header on `turn.<agent>` and before the header that
//! follows it. The agent publishes headers and chunks from one queue on one connection, so their
//! sequences bracket the turn. The turn record keeps only the output's tail; this is the rest,
//! for as long as the relay's limits keep it (1,000 messages per subject, 256 MiB in all).

use async_nats::jetstream::{self, stream};
use hyperhive_hive_proto::feed::{RelayState, TurnHeader};
use hyperhive_nats_objects::{RELAY_STREAM, agent_terminal_subject, agent_turn_subject};
use hyperhive_schedule::AgentName;

use super::{Unavailable, unavailable};

/// Where a turn's output lies in `RELAY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The sequence of the turn's `working` header: its chunks come after it.
    pub after: u64,
    /// The sequence of the next header, when there is one: its chunks come before it.
    pub before: Option<u64>,
}

/// Reads turns' outputs from `RELAY`.
#[derive(Debug, Clone)]
pub struct TurnOutputs {
    js: jetstream::Context,
}

impl TurnOutputs {
    /// The outputs in `js`'s `RELAY`.
    pub fn new(js: jetstream::Context) -> Self {
        Self { js }
    }

    /// Where the output of `agent`'s last turn of todo `todo_id` lies (a todo whose agent died
    /// mid-turn runs again), or `None` when `RELAY` no longer holds its `working` header (its
    /// output is gone, or going).
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn span(&self, agent: &AgentName, todo_id: &str) -> Result<Option<Span>, Unavailable> {
        let stream = self.stream().await?;
        let subject = agent_turn_subject(agent);
        let mut span: Option<Span> = None;
        let mut from = 1;
        while let Some((sequence, payload)) = next(&stream, &subject, from).await? {
            from = sequence + 1;
            let header = serde_json::from_slice::<TurnHeader>(&payload).ok();
            let this_turn =
                header.is_some_and(|h| h.state == RelayState::Working && h.todo_id.as_deref() == Some(todo_id));
            match &mut span {
                // A header repeated while the turn runs (its pause file changed, say).
                Some(Span { before: None, .. }) if this_turn => {}
                // The first header of anything else: the turn ended there.
                Some(open @ Span { before: None, .. }) => open.before = Some(sequence),
                _ if this_turn => span = Some(Span { after: sequence, before: None }),
                _ => {}
            }
        }
        Ok(span)
    }

    /// The chunks of `agent`'s terminal inside `span`, concatenated.
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn read(&self, agent: &AgentName, span: Span) -> Result<Vec<u8>, Unavailable> {
        let stream = self.stream().await?;
        let subject = agent_terminal_subject(agent);
        let mut output = Vec::new();
        let mut from = span.after + 1;
        while let Some((sequence, payload)) = next(&stream, &subject, from).await? {
            if span.before.is_some_and(|before| sequence > before) {
                break;
            }
            output.extend_from_slice(&payload);
            from = sequence + 1;
        }
        Ok(output)
    }

    async fn stream(&self) -> Result<stream::Stream<()>, Unavailable> {
        self.js.get_stream_no_info(RELAY_STREAM).await.map_err(|e| unavailable("opening RELAY")(e.to_string()))
    }
}

/// The first message on `subject` at or after sequence `from`, or `None` when there is none.
async fn next(
    stream: &stream::Stream<()>,
    subject: &str,
    from: u64,
) -> Result<Option<(u64, bytes::Bytes)>, Unavailable> {
    match stream.direct_get_next_for_subject(subject.to_owned(), Some(from)).await {
        Ok(message) => Ok(Some((message.sequence, message.payload))),
        Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => Ok(None),
        Err(e) => Err(unavailable("reading RELAY")(e.to_string())),
    }
}
