//! Who may reach what on the swarm's NATS (see docs/swarm/security.md).
//!
//! Every stream and KV bucket lives in the **swarm account**, whose only user is the controller.
//! Each agent and each hive has an **account of its own** that imports, one literal subject at a
//! time, exactly the swarm services it needs. Two properties follow, and the grants below rely on
//! them:
//! - JetStream answers a request on whatever reply subject the requester named. Answers to an
//!   imported service travel back on a server-made `_R_` subject and are delivered only inside
//!   the requester's own account, where nothing but its own imports and inbox exist. So a reply
//!   subject can no longer aim an answer at another agent's key, queue or definition.
//! - A tenant account has no JetStream of its own, so it can neither create streams nor fill the
//!   disk except through the swarm's streams, which carry per-subject limits.
//!
//! The user inside a tenant account is also limited by its JWT to the same subjects (and to its
//! own reply inbox for subscribe), so a mistake in one layer is caught by the other.
//!
//! Names contain no `.`, `*` or `>`, so each grant is literal in the tenant's name; the only
//! wildcards are the last tokens the server generates (ack subjects, inbox replies) and, for a
//! hive, the agent token under its own hive's prefix.

use hyperhive_nats_objects::{
    AGENT_SCHEDULES_BUCKET, AGENT_WANTED_BUCKET, DEPLOY_STREAM, HIVE_STATUS_BUCKET, TODO_STREAM, agent_cancel_subject,
    agent_durable_name, agent_inbox_prefix, agent_schedule_direct_get_subject, agent_terminal_subject,
    agent_turn_subject, agent_turns_subject, direct_get_subject, hive_durable_name, hive_inbox_prefix,
    hive_status_subject, kv_key_subject, kv_stream, todo_subject,
};
use hyperhive_schedule::{AgentName, HiveName};

use crate::jwt::{Permissions, ResponseType, ServiceExport};

/// `$JS.API.INFO`. nats-server gives every account without JetStream its own import of the
/// whole `$JS.API.>` (answering "JetStream not enabled"), unless the account already imports
/// this subject; that blanket import would shadow a tenant's literal imports of the swarm's
/// API subjects. So each tenant imports it, from an account without JetStream, whose answer
/// reveals nothing of the swarm's.
pub const JS_INFO: &str = "$JS.API.INFO";

/// The three subjects of a tenant's durable pull consumer: inspect it (binding to it, and the
/// client's check after a reconnect), pull from it and ack what it delivered. Never create,
/// update or delete: a tenant that could create its consumer could give it any configuration
/// under its own name and filter (a push consumer delivering into the swarm account, a threshold
/// that deletes it), so the controller makes it (`hyperhive_nats_objects::consumers`).
fn pull_consumer(stream: &str, durable: &str) -> [String; 3] {
    [
        format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
        format!("$JS.ACK.{stream}.{durable}.>"),
    ]
}

/// The swarm services `agent` imports: its own todo queue (add; consume and ack through the
/// consumer the controller made), its terminal and turn subjects, its own turn history (publish
/// only), and the direct get of its own schedules. No KV watch: that needs a consumer create.
pub fn agent_imports(agent: &AgentName) -> Vec<String> {
    let queue = todo_subject(agent);
    let mut subjects = vec![queue.clone()];
    subjects.extend(pull_consumer(TODO_STREAM, &agent_durable_name(agent)));
    subjects.extend([
        agent_terminal_subject(agent),
        agent_turn_subject(agent),
        agent_turns_subject(agent),
        agent_schedule_direct_get_subject(agent),
    ]);
    subjects
}

/// The swarm services `hive` imports: its own status key, its own agents' wanted keys (read by
/// direct get, watched through its own consumer filtered to its hive, which the controller made),
/// its own deploy queue (likewise), and the todo queues of the agents it runs.
pub fn hive_imports(hive: &HiveName, agents: &[AgentName]) -> Vec<String> {
    let durable = hive_durable_name(hive);
    let mut subjects = vec![hive_status_subject(hive), direct_get_subject(HIVE_STATUS_BUCKET, hive.as_str())];
    subjects.push(direct_get_subject(AGENT_WANTED_BUCKET, &format!("{hive}.*")));
    subjects.extend(pull_consumer(&kv_stream(AGENT_WANTED_BUCKET), &durable));
    subjects.extend(pull_consumer(DEPLOY_STREAM, &durable));
    subjects.extend(agents.iter().map(todo_subject));
    subjects
}

/// What the swarm account exports: every service any tenant may import, with the tenant's
/// token(s) as wildcards. A tenant account can import only what its operator-signed JWT lists, so
/// a public export reaches exactly the accounts the swarm's operator made for it.
pub fn swarm_exports() -> Vec<ServiceExport> {
    let one = |subject: String| ServiceExport { subject, response: ResponseType::Singleton };
    let consumers = |stream: &str| {
        let [info, next, ack] = pull_consumer(stream, "*");
        [one(info), ServiceExport { subject: next, response: ResponseType::Stream }, one(ack)]
    };
    let wanted = kv_stream(AGENT_WANTED_BUCKET);
    let mut exports = vec![
        one("todo.*".to_owned()),
        one("term.*".to_owned()),
        one("turn.*".to_owned()),
        one("turns.*".to_owned()),
        one(direct_get_subject(AGENT_SCHEDULES_BUCKET, "*")),
        one(kv_key_subject(HIVE_STATUS_BUCKET, "*")),
        one(direct_get_subject(HIVE_STATUS_BUCKET, "*")),
        one(direct_get_subject(AGENT_WANTED_BUCKET, "*.*")),
    ];
    exports.extend(consumers(TODO_STREAM));
    exports.extend(consumers(&wanted));
    exports.extend(consumers(DEPLOY_STREAM));
    exports
}

/// The subjects whose messages the swarm account sends into tenant accounts: each agent's cancel
/// requests (`cancel.<agent>`), which only the controller publishes.
pub fn swarm_stream_exports() -> Vec<String> {
    vec!["cancel.*".to_owned()]
}

/// The swarm subjects whose messages `agent`'s account receives: its own cancel requests.
pub fn agent_stream_imports(agent: &AgentName) -> Vec<String> {
    vec![agent_cancel_subject(agent)]
}

/// The user rights inside an account: publish only to its imports, subscribe only to its inbox.
fn tenant_permissions(imports: Vec<String>, inbox_prefix: String) -> Permissions {
    Permissions { publish_allow: imports, subscribe_allow: vec![format!("{inbox_prefix}.>")] }
}

/// The rights of `agent`'s user, and nothing broader: its inbox and its cancel requests for
/// subscribe.
pub fn agent_permissions(agent: &AgentName) -> Permissions {
    let mut permissions = tenant_permissions(agent_imports(agent), agent_inbox_prefix(agent));
    permissions.subscribe_allow.extend(agent_stream_imports(agent));
    permissions
}

/// The rights of `hive`'s user: its imports, except that its agents' todo queues are one
/// `todo.*` rather than one grant per agent. A client sends its user JWT in its CONNECT line,
/// which nats-server caps at 4 KiB by default, and a hive of a few dozen agents would not fit;
/// the account's imports, which name each agent, remain the boundary: a todo for any other agent
/// goes nowhere in the hive's account. It also lets a hive's agent set change without a new user
/// credential, which is why a hive with no agent yet gets it too: an agent added while the swarm
/// runs changes only the hive's account.
pub fn hive_permissions(hive: &HiveName) -> Permissions {
    let mut grants = hive_imports(hive, &[]);
    grants.push("todo.*".to_owned());
    tenant_permissions(grants, hive_inbox_prefix(hive))
}

/// Whether `subject` (possibly with wildcards) lies within `pattern`, by NATS matching rules:
/// `*` in the pattern covers one token, `>` the rest; a wildcard in `subject` is covered only by
/// the same or a broader wildcard.
pub fn subject_within(subject: &str, pattern: &str) -> bool {
    let mut subject = subject.split('.');
    let mut pattern = pattern.split('.');
    loop {
        match (subject.next(), pattern.next()) {
            (None, None) => return true,
            (Some(_), Some(">")) => return true,
            (Some(">"), Some(_)) | (None, Some(_)) | (Some(_), None) => return false,
            (Some(s), Some(p)) if p == "*" || p == s => {}
            (Some(_), Some(_)) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn the_agent_grant_is_exactly_this() {
        let p = agent_permissions(&agent("a"));
        assert_eq!(
            p.publish_allow,
            [
                "todo.a",
                "$JS.API.CONSUMER.INFO.TODO.agent-a",
                "$JS.API.CONSUMER.MSG.NEXT.TODO.agent-a",
                "$JS.ACK.TODO.agent-a.>",
                "term.a",
                "turn.a",
                "turns.a",
                "$JS.API.DIRECT.GET.KV_agent-schedules.$KV.agent-schedules.a",
            ]
        );
        assert_eq!(p.subscribe_allow, ["_INBOX_a.>", "cancel.a"]);
    }

    #[test]
    fn the_hive_grant_is_exactly_this() {
        let p = hive_permissions(&HiveName::parse("h").unwrap());
        assert_eq!(
            p.publish_allow,
            [
                "$KV.hive-status.h",
                "$JS.API.DIRECT.GET.KV_hive-status.$KV.hive-status.h",
                "$JS.API.DIRECT.GET.KV_agent-wanted.$KV.agent-wanted.h.*",
                "$JS.API.CONSUMER.INFO.KV_agent-wanted.hive-h",
                "$JS.API.CONSUMER.MSG.NEXT.KV_agent-wanted.hive-h",
                "$JS.ACK.KV_agent-wanted.hive-h.>",
                "$JS.API.CONSUMER.INFO.DEPLOY.hive-h",
                "$JS.API.CONSUMER.MSG.NEXT.DEPLOY.hive-h",
                "$JS.ACK.DEPLOY.hive-h.>",
                "todo.*",
            ]
        );
        assert_eq!(p.subscribe_allow, ["_INBOX_hive-h.>"]);
        assert_eq!(hive_imports(&HiveName::parse("h").unwrap(), &[agent("a")]).last().unwrap(), "todo.a");
    }

    /// A tenant that could create, update or delete its consumer could remake it as a push
    /// consumer delivering into the swarm account: no grant, and no export, reaches those.
    #[test]
    fn no_tenant_creates_updates_or_deletes_a_consumer() {
        let hive = HiveName::parse("h").unwrap();
        let mut grants = agent_permissions(&agent("a")).publish_allow;
        grants.extend(hive_permissions(&hive).publish_allow);
        grants.extend(hive_imports(&hive, &[agent("a")]));
        grants.extend(swarm_exports().into_iter().map(|e| e.subject));
        for forbidden in [
            "$JS.API.CONSUMER.CREATE.>",
            "$JS.API.CONSUMER.DURABLE.CREATE.>",
            "$JS.API.CONSUMER.DELETE.>",
            "$JS.API.CONSUMER.PAUSE.>",
            "$JS.API.CONSUMER.RESET.>",
            "$JS.API.CONSUMER.UNPIN.>",
        ] {
            for grant in &grants {
                assert!(
                    !subject_within(grant, forbidden) && !subject_within(forbidden, grant),
                    "{grant} reaches {forbidden}"
                );
            }
        }
    }

    #[test]
    fn subject_matching_follows_nats_rules() {
        assert!(subject_within("todo.a", "todo.*"));
        assert!(subject_within("$JS.ACK.TODO.agent-a.>", "$JS.ACK.TODO.*.>"));
        assert!(subject_within("a.b.c", "a.>"));
        assert!(!subject_within("a", "a.>"));
        assert!(!subject_within("todo.a.b", "todo.*"));
        assert!(!subject_within("todo.>", "todo.*"));
        assert!(!subject_within("todo.*", "todo.a"));
        assert!(subject_within("x.h.*", "x.*.*"));
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9-]{0,31}"
    }

    proptest! {
        /// Each grant is served by exactly one export (the server refuses an import no export
        /// covers), and every grant names its own tenant: no grant of one tenant lies within a
        /// grant of another.
        #[test]
        fn grants_are_exported_once_and_never_overlap(a in name(), b in name(), h in name(), g in name()) {
            prop_assume!(a != b && h != g);
            let (a, b) = (agent(&a), agent(&b));
            let (h, g) = (HiveName::parse(&h).unwrap(), HiveName::parse(&g).unwrap());
            let exports = swarm_exports();
            let grants_a = agent_imports(&a);
            let grants_h = hive_imports(&h, std::slice::from_ref(&a));
            for subject in grants_a.iter().chain(&grants_h) {
                let covering = exports.iter().filter(|e| subject_within(subject, &e.subject)).count();
                prop_assert_eq!(covering, 1, "{} is covered by {} exports", subject, covering);
            }
            for (mine, theirs) in [
                (&grants_a, agent_imports(&b)),
                (&grants_h, hive_imports(&g, std::slice::from_ref(&b))),
                (&grants_a, hive_imports(&g, std::slice::from_ref(&b))),
            ] {
                for own in mine {
                    for other in &theirs {
                        prop_assert!(!subject_within(own, other) && !subject_within(other, own), "{} ~ {}", own, other);
                    }
                }
            }
        }
    }
}
