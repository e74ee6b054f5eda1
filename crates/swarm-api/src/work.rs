//! Giving agents work now and reading what they did: the prompt bodies and answers, an agent's
//! queue as listed, and its turn history.

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::turns::TurnRecord;
use serde::{Deserialize, Serialize};

/// The longest prompt, in bytes: what a todo holds with its id and source inside the queue's
/// message limit.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// The body of `POST /api/agents/{name}/todos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRequest {
    /// The prompt, given to the turn on stdin.
    pub body: String,
    /// The todo's id, for idempotency: the same id queues one todo however often it is sent
    /// (within two minutes; a finished id never runs again). Made by the controller when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// The body of `POST /api/todos`: one prompt for several agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptsRequest {
    /// The agents (at least one, each once).
    pub agents: Vec<String>,
    /// The prompt.
    pub body: String,
    /// The todo's id in every agent's queue (each agent's queue is its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A queued prompt (202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptAccepted {
    /// The agent.
    pub agent: AgentName,
    /// The todo's id: its turn's id in the history.
    pub id: String,
    /// `operator:<who>`.
    pub source: String,
    /// Whether this id was queued already (the queue kept the first).
    pub duplicate: bool,
}

/// Whether a queued todo is waiting or already handed to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuedState {
    /// Waiting its turn.
    Waiting,
    /// Handed to the agent: its turn is running.
    Running,
}

/// One todo in `GET /api/agents/{name}/todos`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedTodo {
    /// The todo's id.
    pub id: String,
    /// Who asked.
    pub source: String,
    /// The prompt's first line, at most 200 characters.
    pub preview: String,
    /// The prompt's size in bytes.
    pub bytes: usize,
    /// When it was queued (RFC 3339).
    pub queued_at: String,
    /// How long ago, in seconds.
    pub age_seconds: u64,
    /// Waiting or running.
    pub state: QueuedState,
}

/// The answer to `POST /api/agents/{name}/turn/cancel` (202): the turn asked to end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelAccepted {
    /// The agent.
    pub agent: AgentName,
    /// The running turn's todo.
    pub todo_id: String,
}

/// The optional body of `POST /api/agents/{name}/turn/cancel`: cancel only if this todo's turn
/// is the one running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// The todo whose turn to cancel.
    pub todo_id: String,
}

/// One turn as the API shows it: the agent's record, its place in the history, and the name of
/// the schedule that fired it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnView {
    /// Its sequence in the history: `?before=` takes it to page back.
    pub seq: u64,
    /// The record, flattened beside `seq`.
    #[serde(flatten)]
    pub record: TurnRecord,
    /// The firing schedule's name, when `source` is `schedule:<id>` and it still exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_name: Option<String>,
    /// Where the turn's whole output is (`GET /api/agents/{name}/turns/{id}/output`) while the
    /// relay's history still holds it; given for one turn asked by its id, not in pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_output: Option<String>,
}

/// `GET /api/agents/{name}/turns`: the newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnsPage {
    /// The turns.
    pub turns: Vec<TurnView>,
    /// `?before=` for the next page, when there are older turns.
    pub next_before: Option<u64>,
}

/// An agent's last finished turn, as `GET /api/agents` shows it beside the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastTurn {
    /// Its todo.
    pub todo_id: String,
    /// Who asked.
    pub source: String,
    /// How it ended.
    pub outcome: hyperhive_hive_proto::turns::TurnOutcome,
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When it ended (RFC 3339).
    pub ended_at: String,
}

impl From<&TurnRecord> for LastTurn {
    fn from(r: &TurnRecord) -> Self {
        Self {
            todo_id: r.todo_id.clone(),
            source: r.source.clone(),
            outcome: r.outcome,
            exit_code: r.exit_code,
            ended_at: r.ended_at.clone(),
        }
    }
}
