//! The exact rights of an agent's credential (DESIGN 4.2), and the names they refer to.
//!
//! Each grant is a literal subject (agent names contain no `.`, `*` or `>`), except the two
//! whose last tokens the server generates: the ack subjects of the agent's own consumer and
//! its own reply inbox. Never `$JS.>`, `$JS.API.>` or `_INBOX.>`: those would reach other
//! agents' keys and replies. No KV watch: its consumer-create subject names no key.

use hyperhive_schedule::{AGENT_SCHEDULES_BUCKET, AgentName, TODO_STREAM, todo_subject};
use serde::Serialize;

/// Publish and subscribe allow lists of a user JWT; everything else is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permissions {
    /// Subjects the user may publish to.
    pub publish_allow: Vec<String>,
    /// Subjects the user may subscribe to.
    pub subscribe_allow: Vec<String>,
}

/// `_INBOX_<agent>`: the agent's own reply inbox prefix (the client's custom inbox prefix).
pub fn agent_inbox_prefix(agent: &AgentName) -> String {
    format!("_INBOX_{agent}")
}

/// `agent-<agent>`: the agent's durable pull consumer on `TODO`, filtered on `todo.<agent>`.
pub fn agent_durable_name(agent: &AgentName) -> String {
    format!("agent-{agent}")
}

/// `$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.<agent>`: the direct get of the
/// agent's own key (empty payload; the reply's `Nats-Sequence` is the revision).
pub fn agent_schedule_direct_get_subject(agent: &AgentName) -> String {
    let bucket = AGENT_SCHEDULES_BUCKET;
    format!("$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{agent}")
}

/// `term.<agent>`: the agent's terminal output.
pub fn agent_terminal_subject(agent: &AgentName) -> String {
    format!("term.{agent}")
}

/// `turn.<agent>`: the agent's turn state.
pub fn agent_turn_subject(agent: &AgentName) -> String {
    format!("turn.{agent}")
}

/// The rights of `agent`'s credential, and nothing broader.
pub fn agent_permissions(agent: &AgentName) -> Permissions {
    let durable = agent_durable_name(agent);
    let queue = todo_subject(agent);
    let stream = TODO_STREAM;
    Permissions {
        publish_allow: vec![
            // Its own todo queue: add todos, create (idempotently) and inspect its consumer,
            // pull the next todo and ack it.
            queue.clone(),
            format!("$JS.API.CONSUMER.CREATE.{stream}.{durable}.{queue}"),
            format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
            format!("$JS.ACK.{stream}.{durable}.>"),
            // Its terminal output and turn state.
            agent_terminal_subject(agent),
            agent_turn_subject(agent),
            // Its own schedules, by direct get of its own key only.
            agent_schedule_direct_get_subject(agent),
        ],
        subscribe_allow: vec![format!("{}.>", agent_inbox_prefix(agent))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_is_exactly_this() {
        let a = AgentName::parse("a").unwrap();
        let p = agent_permissions(&a);
        assert_eq!(
            p.publish_allow,
            [
                "todo.a",
                "$JS.API.CONSUMER.CREATE.TODO.agent-a.todo.a",
                "$JS.API.CONSUMER.INFO.TODO.agent-a",
                "$JS.API.CONSUMER.MSG.NEXT.TODO.agent-a",
                "$JS.ACK.TODO.agent-a.>",
                "term.a",
                "turn.a",
                "$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.a",
            ]
        );
        assert_eq!(p.subscribe_allow, ["_INBOX_a.>"]);
    }

    #[test]
    fn no_grant_reaches_beyond_the_agent() {
        let a = AgentName::parse("a").unwrap();
        let p = agent_permissions(&a);
        for subject in p.publish_allow.iter().chain(&p.subscribe_allow) {
            assert!(!subject.contains('*'), "{subject}");
            // The only full wildcards sit under a prefix that names the agent.
            if let Some(prefix) = subject.strip_suffix(".>") {
                assert!(prefix.ends_with("agent-a") || prefix == "_INBOX_a", "{subject}");
            }
            assert!(subject.split('.').any(|t| t == "a" || t.ends_with("-a") || t.ends_with("_a")));
        }
    }
}
