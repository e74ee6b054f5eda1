//! The names of the swarm's streams, KV buckets, subjects and consumers (docs/architecture.md,
//! "Who writes which NATS object").
//!
//! Names contain no `.`, `*` or `>` (agent and hive names are checked by their types), so every
//! subject built here is literal in the tenant's name.

use hyperhive_schedule::{AgentName, HiveName};

/// KV bucket: schedule id -> one schedule document (the controller only).
pub const SCHEDULE_DEFINITIONS_BUCKET: &str = "schedule-definitions";
/// KV bucket with direct get allowed: agent name -> that agent's schedules.
pub const AGENT_SCHEDULES_BUCKET: &str = "agent-schedules";
/// KV bucket: `<hive>` -> that hive's last published status (written by its hive-c0re).
pub const HIVE_STATUS_BUCKET: &str = "hive-status";
/// KV bucket: `<hive>.<agent>` -> the agent's wanted state (written by the controller).
pub const AGENT_WANTED_BUCKET: &str = "agent-wanted";
/// KV bucket: agent name -> its roster entry (the controller only).
pub const AGENTS_BUCKET: &str = "agents";
/// KV bucket: record key -> a sealed secret (the controller only).
pub const SWARM_SECRETS_BUCKET: &str = "swarm-secrets";
/// KV bucket: agent name -> its uploaded icon (PNG).
pub const AGENT_ICONS_BUCKET: &str = "agent-icons";
/// KV bucket: agent name -> its config repository's pull request.
pub const CONFIG_PRS_BUCKET: &str = "config-prs";
/// KV bucket: the SHA-256 of a forge webhook delivery's signed body -> its event, once applied
/// (the controller only), so a delivery sent again is taken once, across restarts.
pub const FORGE_DELIVERIES_BUCKET: &str = "forge-deliveries";

/// Every KV bucket the swarm makes, as `ensure_objects` makes them.
pub const BUCKETS: [&str; 9] = [
    SCHEDULE_DEFINITIONS_BUCKET,
    AGENT_SCHEDULES_BUCKET,
    HIVE_STATUS_BUCKET,
    AGENT_WANTED_BUCKET,
    AGENTS_BUCKET,
    SWARM_SECRETS_BUCKET,
    AGENT_ICONS_BUCKET,
    CONFIG_PRS_BUCKET,
    FORGE_DELIVERIES_BUCKET,
];

/// Work-queue stream of every agent's todos, on `todo.<agent>`.
pub const TODO_STREAM: &str = "TODO";
/// Work-queue stream of deploy messages, on `deploy.<hive>`.
pub const DEPLOY_STREAM: &str = "DEPLOY";
/// Stream of every agent's recent terminal output and turn headers, on `term.<agent>` and
/// `turn.<agent>`, oldest dropped first: the agents' terminal feeds.
pub const RELAY_STREAM: &str = "RELAY";
/// Stream of every agent's turn history, on `turns.<agent>`: one record per finished turn,
/// kept per agent up to a count and an age.
pub const TURNS_STREAM: &str = "TURNS";
/// Stream of every state-changing request the controller took, on [`AUDIT_SUBJECT`]: who, what,
/// and how it ended. Only the controller writes and reads it.
pub const AUDIT_STREAM: &str = "AUDIT";
/// The subject of [`AUDIT_STREAM`].
pub const AUDIT_SUBJECT: &str = "audit.requests";

/// `todo.<agent>`: the agent's queue subject.
pub fn todo_subject(agent: &AgentName) -> String {
    format!("todo.{agent}")
}

/// `deploy.<hive>`: the hive's deploy subject.
pub fn deploy_subject(hive: &HiveName) -> String {
    format!("deploy.{hive}")
}

/// `term.<agent>`: the agent's terminal output.
pub fn agent_terminal_subject(agent: &AgentName) -> String {
    format!("term.{agent}")
}

/// `turn.<agent>`: the agent's turn state.
pub fn agent_turn_subject(agent: &AgentName) -> String {
    format!("turn.{agent}")
}

/// `turns.<agent>`: the agent's turn history (one record per finished turn).
pub fn agent_turns_subject(agent: &AgentName) -> String {
    format!("turns.{agent}")
}

/// `cancel.<agent>`: requests to cancel the agent's running turn (the controller publishes, the
/// agent subscribes).
pub fn agent_cancel_subject(agent: &AgentName) -> String {
    format!("cancel.{agent}")
}

/// `KV_<bucket>`: the stream behind a KV bucket.
pub fn kv_stream(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// `$KV.<bucket>.<key>`: the subject a KV key's values are stored on.
pub fn kv_key_subject(bucket: &str, key: &str) -> String {
    format!("$KV.{bucket}.{key}")
}

/// Whether a KV message read from its stream (a direct get, a raw get, a consumer) marks its key
/// removed: its `KV-Operation` header says `DEL` or `PURGE`.
pub fn kv_removal(headers: &async_nats::HeaderMap) -> bool {
    headers.get("KV-Operation").is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"))
}

/// `$KV.agent-wanted.<hive>.*`: the wanted state of every agent of `hive`.
pub fn hive_wanted_filter(hive: &HiveName) -> String {
    kv_key_subject(AGENT_WANTED_BUCKET, &format!("{hive}.*"))
}

/// `$KV.hive-status.<hive>`: where the hive publishes its status.
pub fn hive_status_subject(hive: &HiveName) -> String {
    kv_key_subject(HIVE_STATUS_BUCKET, hive.as_str())
}

/// `$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>`: the direct get of one key (empty payload;
/// the reply's `Nats-Sequence` is the revision).
pub fn direct_get_subject(bucket: &str, key: &str) -> String {
    format!("$JS.API.DIRECT.GET.{}.{}", kv_stream(bucket), kv_key_subject(bucket, key))
}

/// The direct get of the agent's own key in `agent-schedules`.
pub fn agent_schedule_direct_get_subject(agent: &AgentName) -> String {
    direct_get_subject(AGENT_SCHEDULES_BUCKET, agent.as_str())
}

/// `_INBOX_<agent>`: the agent's own reply inbox prefix (the client's custom inbox prefix).
pub fn agent_inbox_prefix(agent: &AgentName) -> String {
    format!("_INBOX_{agent}")
}

/// `_INBOX_hive-<hive>`: the hive's own reply inbox prefix.
pub fn hive_inbox_prefix(hive: &HiveName) -> String {
    format!("_INBOX_hive-{hive}")
}

/// `agent-<agent>`: the agent's durable pull consumer on `TODO`, filtered on `todo.<agent>`.
pub fn agent_durable_name(agent: &AgentName) -> String {
    format!("agent-{agent}")
}

/// `hive-<hive>`: the hive's durable consumers on `DEPLOY` (filtered on `deploy.<hive>`) and on
/// `KV_agent-wanted` (filtered on its own agents' keys).
pub fn hive_durable_name(hive: &HiveName) -> String {
    format!("hive-{hive}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_as_documented() {
        let agent = AgentName::parse("bee-1").unwrap();
        let hive = HiveName::parse("hive1").unwrap();
        assert_eq!(todo_subject(&agent), "todo.bee-1");
        assert_eq!(deploy_subject(&hive), "deploy.hive1");
        assert_eq!(agent_terminal_subject(&agent), "term.bee-1");
        assert_eq!(agent_turn_subject(&agent), "turn.bee-1");
        assert_eq!(agent_turns_subject(&agent), "turns.bee-1");
        assert_eq!(agent_cancel_subject(&agent), "cancel.bee-1");
        assert_eq!(hive_wanted_filter(&hive), "$KV.agent-wanted.hive1.*");
        assert_eq!(hive_status_subject(&hive), "$KV.hive-status.hive1");
        assert_eq!(
            agent_schedule_direct_get_subject(&agent),
            "$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.bee-1"
        );
        assert_eq!(agent_inbox_prefix(&agent), "_INBOX_bee-1");
        assert_eq!(hive_inbox_prefix(&hive), "_INBOX_hive-hive1");
        assert_eq!(agent_durable_name(&agent), "agent-bee-1");
        assert_eq!(hive_durable_name(&hive), "hive-hive1");
    }
}
