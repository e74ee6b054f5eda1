//! `POST /api/agents/{name}/todos`, `POST /api/todos`, `GET /api/agents/{name}/todos`,
//! `DELETE /api/agents/{name}/todos/{id}` and `POST /api/agents/{name}/turn/cancel`: prompts
//! queued now, an agent's queue, and cancelling its running turn (see [`crate::work`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use hyperhive_schedule::{AgentName, Todo};
use hyperhive_swarm_api::work::{
    CancelAccepted, CancelBody, MAX_PROMPT_BYTES, PromptAccepted, PromptRequest, PromptsRequest, QueuedState,
    QueuedTodo,
};
use warp::http::StatusCode;
use warp::reply::Response;

use super::ui::known_agent;
use super::{ApiError, json};
use crate::clock::Clock;
use crate::lifecycle::roster::Roster;
use crate::work::cancel;
use crate::work::queue::{EnqueueError, Queues, Removed};

/// The longest todo id an operator may choose.
const MAX_TODO_ID: usize = 128;
/// The most agents one `POST /api/todos` names.
const MAX_AGENTS_AT_ONCE: usize = 1000;
/// What a refused prompt body is told to send.
const SEND_PROMPT: &str = r#"send {"body": "the prompt"} with an optional "id" for idempotency"#;

/// What the prompt and queue routes need.
#[derive(Debug, Clone)]
pub struct TodosApi {
    /// Only agents on the roster get prompts.
    pub roster: Roster,
    /// The agents' queues.
    pub queues: Queues,
    /// Reads turn headers, for the running todo.
    pub js: async_nats::jetstream::Context,
    /// Publishes cancel requests.
    pub client: async_nats::Client,
    /// The age of queued todos.
    pub clock: Arc<dyn Clock>,
}

impl TodosApi {
    pub(super) async fn prompt(&self, name: &str, set_by: String, body: &[u8]) -> Result<Response, ApiError> {
        let request: PromptRequest = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("malformed request body: {e}; {SEND_PROMPT}")))?;
        let todo = self.todo(&set_by, request.body, request.id)?;
        let agent = known_agent(&self.roster, name).await?;
        let accepted = self.enqueue(&agent, &todo).await?;
        Ok(json(StatusCode::ACCEPTED, &accepted))
    }

    pub(super) async fn prompt_many(&self, set_by: String, body: &[u8]) -> Result<Response, ApiError> {
        let request: PromptsRequest = serde_json::from_slice(body).map_err(|e| {
            ApiError::BadRequest(format!(
                r#"malformed request body: {e}; send {{"agents": ["name", ...], "body": "the prompt"}} with an optional "id""#
            ))
        })?;
        if request.agents.is_empty() || request.agents.len() > MAX_AGENTS_AT_ONCE {
            return Err(ApiError::BadRequest(format!(
                "`agents` names 1 to {MAX_AGENTS_AT_ONCE} agents, not {}",
                request.agents.len()
            )));
        }
        let todo = self.todo(&set_by, request.body, request.id)?;
        // Every agent is checked before any queue gets the prompt, so a typo queues nothing.
        let mut agents = BTreeSet::new();
        for name in &request.agents {
            let agent = known_agent(&self.roster, name).await?;
            if !agents.insert(agent.clone()) {
                return Err(ApiError::BadRequest(format!("`agents` names {agent} twice")));
            }
        }
        let mut accepted = Vec::new();
        for agent in &agents {
            accepted.push(self.enqueue(agent, &todo).await?);
        }
        Ok(json(StatusCode::ACCEPTED, &accepted))
    }

    pub(super) async fn list(&self, name: &str) -> Result<Response, ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let now = self.clock.now();
        let queued: Vec<QueuedTodo> = self
            .queues
            .list(&agent)
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))?
            .into_iter()
            .map(|q| QueuedTodo {
                preview: q.todo.body.lines().next().unwrap_or("").chars().take(200).collect(),
                bytes: q.todo.body.len(),
                id: q.todo.id,
                source: q.todo.source,
                queued_at: hyperhive_schedule::format_instant(q.queued_at),
                age_seconds: u64::try_from((now - q.queued_at).whole_seconds()).unwrap_or(0),
                state: if q.running { QueuedState::Running } else { QueuedState::Waiting },
            })
            .collect();
        Ok(json(StatusCode::OK, &queued))
    }

    pub(super) async fn remove(&self, name: &str, id: &str) -> Result<Response, ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let id = decoded(id)?;
        match self.queues.remove(&agent, &id).await.map_err(|e| ApiError::Unavailable(e.to_string()))? {
            Removed::Removed => Ok(json(StatusCode::OK, &serde_json::json!({"agent": agent, "removed": id}))),
            Removed::NotQueued => Err(ApiError::NotFound(format!(
                "no todo {id:?} waits in the queue of {agent} (GET /api/agents/{agent}/todos lists it; a finished \
                 one is in its turns)"
            ))),
            Removed::Running => Err(ApiError::Conflict {
                message: format!(
                    "todo {id:?} is {agent}'s running turn; cancel it with POST /api/agents/{agent}/turn/cancel"
                ),
                current: None,
            }),
        }
    }

    pub(super) async fn cancel(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let wanted: Option<CancelBody> = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            Some(serde_json::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!(
                    r#"malformed request body: {e}; send nothing, or {{"todo_id": "..."}} to cancel only that todo's turn"#
                ))
            })?)
        };
        let agent = known_agent(&self.roster, name).await?;
        let running = cancel::running_todo(&self.js, &agent).await.map_err(|e| ApiError::Unavailable(e.to_string()))?;
        let conflict = |message| ApiError::Conflict { message, current: None };
        let todo_id = match (running, wanted) {
            (None, _) => return Err(conflict(format!("{agent} is not running a turn; nothing to cancel"))),
            (Some(running), Some(wanted)) if running != wanted.todo_id => {
                return Err(conflict(format!(
                    "{agent} is running todo {running:?}, not {:?}; nothing was cancelled",
                    wanted.todo_id
                )));
            }
            (Some(running), _) => running,
        };
        cancel::request(&self.client, &agent, &todo_id).await.map_err(|e| ApiError::Unavailable(e.to_string()))?;
        tracing::info!(%agent, todo = %todo_id, "turn cancel requested");
        Ok(json(StatusCode::ACCEPTED, &CancelAccepted { agent, todo_id }))
    }

    /// The todo a prompt request makes: its body checked, its id the one given (checked) or a
    /// new one, its source the operator who sent it (`set_by`).
    fn todo(&self, set_by: &str, body: String, id: Option<String>) -> Result<Todo, ApiError> {
        if body.trim().is_empty() {
            return Err(ApiError::BadRequest(format!("the prompt is empty; {SEND_PROMPT}")));
        }
        if body.len() > MAX_PROMPT_BYTES {
            return Err(ApiError::PayloadTooLarge(format!(
                "the prompt is {} bytes; a prompt is at most {MAX_PROMPT_BYTES} bytes",
                body.len()
            )));
        }
        let id = match id {
            Some(id) => check_todo_id(id)?,
            None => format!("prompt-{}", crate::schedules::store::new_id()),
        };
        Ok(Todo { id, source: format!("operator:{set_by}"), body })
    }

    async fn enqueue(&self, agent: &AgentName, todo: &Todo) -> Result<PromptAccepted, ApiError> {
        let duplicate = self.queues.enqueue(agent, todo).await.map_err(|e| match e {
            EnqueueError::Full(_) => ApiError::TooManyRequests { message: e.to_string(), retry_after: 60 },
            EnqueueError::Unavailable(e) => ApiError::Unavailable(e.to_string()),
        })?;
        tracing::info!(%agent, todo = %todo.id, source = %todo.source, duplicate, "prompt queued");
        Ok(PromptAccepted { agent: agent.clone(), id: todo.id.clone(), source: todo.source.clone(), duplicate })
    }
}

/// A todo id an operator chose: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
fn check_todo_id(id: String) -> Result<String, ApiError> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
    if id.is_empty() || id.len() > MAX_TODO_ID || !id.bytes().all(ok) {
        return Err(ApiError::BadRequest(format!(
            "a todo id is 1 to {MAX_TODO_ID} of A-Z, a-z, 0-9, '.', '_', ':' and '-' (e.g. release-notes-42), not {:?}",
            id.chars().take(64).collect::<String>()
        )));
    }
    Ok(id)
}

/// A path segment percent-decoded (clients encode ids, which may hold `:`).
pub(super) fn decoded(segment: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::BadRequest("the id in the path is not UTF-8 once percent-decoded".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn todo_ids_are_checked() {
        for ok in ["a", "release-notes-42", "schedule:abc:bee:2026-12-02T09:00:00Z", &"x".repeat(128)] {
            assert_eq!(check_todo_id(ok.to_owned()).unwrap(), ok);
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129), "a\n"] {
            assert!(check_todo_id(bad.to_owned()).is_err(), "{bad:?}");
        }
        assert_eq!(decoded("schedule%3Aabc").unwrap(), "schedule:abc");
        assert!(decoded("%FF").is_err());
    }
}
