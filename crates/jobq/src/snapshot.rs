//! The graph as `GET /api/jobq/graph` serves it: every job with its state and timings, and one
//! edge per dependency.
//!
//! # Format
//! ```json
//! {
//!   "generation": 12,
//!   "nodes": [
//!     {"id": "alpha.sso", "kind": "sso", "agent": "alpha", "state": "succeeded", "attempts": 1,
//!      "last_error": null, "next_attempt_at": null, "created_at": "2026-11-30T12:00:00Z",
//!      "started_at": "2026-11-30T12:00:00Z", "finished_at": "2026-11-30T12:00:01Z"},
//!     {"id": "alpha.forge-user", "kind": "forge-user", "agent": "alpha", "state": "retrying",
//!      "attempts": 2, "last_error": "forge answered 502", "next_attempt_at": "2026-11-30T12:00:05Z",
//!      "created_at": "2026-11-30T12:00:00Z", "started_at": "2026-11-30T12:00:02Z", "finished_at": null}
//!   ],
//!   "edges": [{"from": "alpha.sso", "to": "alpha.forge-user"}]
//! }
//! ```
//! Nodes come in the order they were added (which is a topological order: a job's dependencies
//! exist before it), edges in the order of their `to` node, then of its dependencies. An edge
//! goes from the dependency to the job that waits for it.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::clock::rfc3339;
use crate::job::{JobId, JobState};

/// The whole graph at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphSnapshot {
    /// Grows by at least one with every change (see [`crate::Jobq::subscribe`]); equal
    /// generations mean equal graphs.
    pub generation: u64,
    /// Every job.
    pub nodes: Vec<Node>,
    /// Every dependency.
    pub edges: Vec<Edge>,
}

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Its id.
    pub id: JobId,
    /// What its work does.
    pub kind: String,
    /// The agent it works for.
    pub agent: Option<String>,
    /// Where it is in its life.
    pub state: JobState,
    /// Attempts started since it was added or last retried by hand.
    pub attempts: u32,
    /// The error of its latest failed attempt; cleared when an attempt succeeds.
    pub last_error: Option<String>,
    /// When `retrying`: when the next attempt starts.
    #[serde(with = "rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    /// When it was added.
    #[serde(with = "rfc3339")]
    pub created_at: OffsetDateTime,
    /// When its latest attempt started.
    #[serde(with = "rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    /// When it settled (succeeded, skipped, failed, blocked or cancelled); cleared when it
    /// wakes again.
    #[serde(with = "rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    /// When `skipped`: why there was nothing to do (which setting would enable its work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_because: Option<String>,
}

/// `to` runs only after `from` succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// The dependency.
    pub from: JobId,
    /// The job that depends on it.
    pub to: JobId,
}

impl GraphSnapshot {
    /// Only the jobs for `agent`, and the edges between two of them (an edge to or from another
    /// agent's job, or a job for no agent, is left out with that job).
    #[must_use]
    pub fn for_agent(&self, agent: &str) -> Self {
        let nodes: Vec<Node> = self.nodes.iter().filter(|n| n.agent.as_deref() == Some(agent)).cloned().collect();
        let kept: std::collections::HashSet<&JobId> = nodes.iter().map(|n| &n.id).collect();
        let edges = self.edges.iter().filter(|e| kept.contains(&e.from) && kept.contains(&e.to)).cloned().collect();
        Self { generation: self.generation, nodes, edges }
    }

    /// The node `id`.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id.as_str() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn node(id: &str, agent: Option<&str>) -> Node {
        Node {
            id: JobId::parse(id).unwrap(),
            kind: "k".into(),
            agent: agent.map(str::to_owned),
            state: JobState::Waiting,
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
            created_at: datetime!(2026-11-30 12:00:00 UTC),
            started_at: None,
            finished_at: None,
            skipped_because: None,
        }
    }

    fn edge(from: &str, to: &str) -> Edge {
        Edge { from: JobId::parse(from).unwrap(), to: JobId::parse(to).unwrap() }
    }

    #[test]
    fn the_json_shape_round_trips() {
        let mut retrying = node("a.forge-user", Some("a"));
        retrying.state = JobState::Retrying;
        retrying.attempts = 2;
        retrying.last_error = Some("forge answered 502".into());
        retrying.next_attempt_at = Some(datetime!(2026-11-30 12:00:05.25 UTC));
        retrying.started_at = Some(datetime!(2026-11-30 12:00:02 UTC));
        let snapshot =
            GraphSnapshot { generation: 3, nodes: vec![retrying], edges: vec![edge("a.sso", "a.forge-user")] };
        let value = serde_json::to_value(&snapshot).unwrap();
        assert_eq!(
            value,
            json!({
                "generation": 3,
                "nodes": [{
                    "id": "a.forge-user", "kind": "k", "agent": "a", "state": "retrying", "attempts": 2,
                    "last_error": "forge answered 502", "next_attempt_at": "2026-11-30T12:00:05.25Z",
                    "created_at": "2026-11-30T12:00:00Z", "started_at": "2026-11-30T12:00:02Z",
                    "finished_at": null
                }],
                "edges": [{"from": "a.sso", "to": "a.forge-user"}]
            })
        );
        assert_eq!(serde_json::from_value::<GraphSnapshot>(value).unwrap(), snapshot);
    }

    #[test]
    fn a_bad_id_or_time_does_not_deserialize() {
        let mut value = serde_json::to_value(node("a.sso", None)).unwrap();
        value["created_at"] = json!("yesterday");
        assert!(serde_json::from_value::<Node>(value.clone()).is_err());
        value["created_at"] = json!("2026-11-30T12:00:00Z");
        value["id"] = json!("A");
        assert!(serde_json::from_value::<Node>(value).is_err());
    }

    #[test]
    fn the_agent_filter_keeps_that_agents_jobs_and_the_edges_among_them() {
        let snapshot = GraphSnapshot {
            generation: 9,
            nodes: vec![node("root", None), node("a.1", Some("a")), node("a.2", Some("a")), node("b.1", Some("b"))],
            edges: vec![edge("root", "a.1"), edge("a.1", "a.2"), edge("a.2", "b.1")],
        };
        let a = snapshot.for_agent("a");
        let ids: Vec<&str> = a.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["a.1", "a.2"]);
        assert_eq!(a.edges, [edge("a.1", "a.2")]);
        assert_eq!(a.generation, 9);
        assert!(snapshot.for_agent("c").nodes.is_empty());
        assert_eq!(snapshot.node("b.1").unwrap().agent.as_deref(), Some("b"));
    }
}
