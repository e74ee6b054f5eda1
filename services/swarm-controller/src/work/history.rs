//! An agent's turn history, `turns.<agent>` in `TURNS`: at most a few hundred records per agent
//! (the stream's per-subject limit), read by direct get in sequence order.

use async_nats::jetstream::{self, stream};
use hyperhive_hive_proto::turns::{TurnOutcome, TurnRecord};
use hyperhive_nats_objects::{TURNS_STREAM, agent_turns_subject};
use hyperhive_schedule::AgentName;

use super::{Unavailable, unavailable};

/// A record and its sequence in `TURNS`.
pub type Stored = (u64, TurnRecord);

/// Reads agents' turn histories.
#[derive(Debug, Clone)]
pub struct Histories {
    js: jetstream::Context,
}

impl Histories {
    /// The histories in `js`'s `TURNS`.
    pub fn new(js: jetstream::Context) -> Self {
        Self { js }
    }

    /// Every record of `agent`, oldest first. (A record that does not parse, which only a
    /// hostile agent writes, is left out.)
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn all(&self, agent: &AgentName) -> Result<Vec<Stored>, Unavailable> {
        let stream = self.stream().await?;
        let subject = agent_turns_subject(agent);
        let failed = unavailable("reading the turn history");
        let mut records = Vec::new();
        let mut from = 1;
        loop {
            let message = match stream.direct_get_next_for_subject(subject.clone(), Some(from)).await {
                Ok(message) => message,
                Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => break,
                Err(e) => return Err(failed(e.to_string())),
            };
            from = message.sequence + 1;
            if let Ok(record) = serde_json::from_slice(&message.payload) {
                records.push((message.sequence, record));
            }
        }
        Ok(records)
    }

    /// Up to `limit` records of `agent` before sequence `before` (all when `None`), newest first,
    /// only failed ones (anything but succeeded) when `failed`; and the `before` of the next page.
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn page(
        &self,
        agent: &AgentName,
        before: Option<u64>,
        limit: usize,
        failed: bool,
    ) -> Result<(Vec<Stored>, Option<u64>), Unavailable> {
        let mut older: Vec<Stored> = self
            .all(agent)
            .await?
            .into_iter()
            .filter(|(seq, record)| {
                before.is_none_or(|b| *seq < b) && (!failed || record.outcome != TurnOutcome::Succeeded)
            })
            .collect();
        older.reverse();
        let more = older.len() > limit;
        older.truncate(limit);
        let next = more.then(|| older.last().map(|(seq, _)| *seq)).flatten();
        Ok((older, next))
    }

    /// `agent`'s record of the todo `id` (the latest, should an agent have written two).
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn find(&self, agent: &AgentName, id: &str) -> Result<Option<Stored>, Unavailable> {
        Ok(self.all(agent).await?.into_iter().rev().find(|(_, record)| record.todo_id == id))
    }

    /// `agent`'s latest record.
    ///
    /// # Errors
    /// [`Unavailable`].
    pub async fn last(&self, agent: &AgentName) -> Result<Option<Stored>, Unavailable> {
        let stream = self.stream().await?;
        match stream.direct_get_last_for_subject(agent_turns_subject(agent)).await {
            Ok(message) => Ok(serde_json::from_slice(&message.payload).ok().map(|r| (message.sequence, r))),
            Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => Ok(None),
            Err(e) => Err(unavailable("reading the last turn")(e.to_string())),
        }
    }

    async fn stream(&self) -> Result<stream::Stream<()>, Unavailable> {
        self.js.get_stream_no_info(TURNS_STREAM).await.map_err(|e| unavailable("opening TURNS")(e.to_string()))
    }
}
