//! The path of every route swarmctl calls, built in one place so the client's paths and the
//! routes the controller serves are written down once (the routes themselves are listed in
//! the controller's API module).
//!
//! A segment taken from input (a schedule id, an account name) is percent-encoded: whatever it
//! holds, it stays one segment, so `../hives` or `a/b` can never reach another route. Names the
//! swarm checked already ([`AgentName`], [`HiveName`], [`JobId`]) encode to themselves.

use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_jobq::JobId;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Every byte but RFC 3986's unreserved ones (letters, digits, `-`, `.`, `_`, `~`) is encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `text` as one path segment. `.` and `..` are encoded too: as a whole segment they would
/// move up the path.
fn segment(text: &str) -> String {
    match text {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => utf8_percent_encode(text, SEGMENT).to_string(),
    }
}

/// `GET`, `POST /api/schedules`.
pub const SCHEDULES: &str = "/api/schedules";
/// `GET /api/hives`.
pub const HIVES: &str = "/api/hives";
/// `GET /api/hives/status`.
pub const HIVE_STATUSES: &str = "/api/hives/status";
/// `GET /healthz`.
pub const HEALTHZ: &str = "/healthz";
/// `GET /api/agents/status`.
pub const AGENTS_STATUS: &str = "/api/agents/status";
/// `GET`, `POST /api/agents`.
pub const AGENTS: &str = "/api/agents";
/// `GET /api/overview`.
pub const OVERVIEW: &str = "/api/overview";
/// `POST /api/todos`.
pub const TODOS: &str = "/api/todos";
/// `GET /api/jobq/graph`.
pub const JOB_GRAPH: &str = "/api/jobq/graph";
/// `GET /api/audit`.
pub const AUDIT: &str = "/api/audit";
/// `GET /api/config-prs`.
pub const CONFIG_PRS: &str = "/api/config-prs";
/// `GET /api/issues`.
pub const ISSUES: &str = "/api/issues";
/// `GET /api/secrets`.
pub const SECRETS: &str = "/api/secrets";

/// `PUT`, `DELETE /api/secrets/{VAR}`.
pub fn swarm_secret(var: &str) -> String {
    format!("{SECRETS}/{}", segment(var))
}

/// `GET list?limit=&after=&hive=`: one page, in name order, of an agent list ([`AGENTS`] or
/// [`AGENTS_STATUS`]).
pub fn agents_page(list: &str, limit: usize, after: Option<&AgentName>, hive: Option<&HiveName>) -> String {
    let mut path = format!("{list}?limit={limit}");
    if let Some(after) = after {
        path.push_str(&format!("&after={}", segment(after.as_str())));
    }
    if let Some(hive) = hive {
        path.push_str(&format!("&hive={}", segment(hive.as_str())));
    }
    path
}

/// `GET /api/agents/{name}`: one agent as the list shows it.
pub fn agent(agent: &AgentName) -> String {
    format!("{AGENTS}/{}", segment(agent.as_str()))
}

/// `PATCH /api/agents/{name}/labels`.
pub fn agent_labels(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/labels", segment(agent.as_str()))
}

/// `GET /api/agents/{name}/secrets`.
pub fn agent_secrets(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/secrets", segment(agent.as_str()))
}

/// `PUT`, `DELETE /api/agents/{name}/secrets/{VAR}`.
pub fn agent_secret(agent: &AgentName, var: &str) -> String {
    format!("{}/{}", agent_secrets(agent), segment(var))
}

/// `GET`, `PATCH`, `DELETE /api/schedules/{id}`.
pub fn schedule(id: &str) -> String {
    format!("{SCHEDULES}/{}", segment(id))
}

/// `GET /api/schedules/{id}/fired`.
pub fn schedule_fired(id: &str) -> String {
    format!("{}/fired", schedule(id))
}

/// `GET`, `POST /api/agents/{name}/todos`.
pub fn agent_todos(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/todos", segment(agent.as_str()))
}

/// `DELETE /api/agents/{name}/todos/{id}`.
pub fn agent_todo(agent: &AgentName, id: &str) -> String {
    format!("{}/{}", agent_todos(agent), segment(id))
}

/// `POST /api/agents/{name}/turn/cancel`.
pub fn cancel_turn(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/turn/cancel", segment(agent.as_str()))
}

/// `GET /api/agents/{name}/turns`.
pub fn agent_turns(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/turns", segment(agent.as_str()))
}

/// `GET /api/agents/{name}/turns/{id}`.
pub fn agent_turn_record(agent: &AgentName, id: &str) -> String {
    format!("{}/{}", agent_turns(agent), segment(id))
}

/// `GET /api/agents/{name}/turns/{id}/output`.
pub fn agent_turn_output(agent: &AgentName, id: &str) -> String {
    format!("{}/output", agent_turn_record(agent, id))
}

/// `GET /api/hives/{hive}/status`.
pub fn hive_status(hive: &HiveName) -> String {
    format!("{HIVES}/{}/status", segment(hive.as_str()))
}

/// `/api/hives/{hive}/agents/{agent}`, the stem of an agent's routes on its hive.
fn agent_on_hive(hive: &HiveName, agent: &AgentName) -> String {
    format!("{HIVES}/{}/agents/{}", segment(hive.as_str()), segment(agent.as_str()))
}

/// `PUT /api/hives/{hive}/agents/{agent}/state`.
pub fn agent_state(hive: &HiveName, agent: &AgentName) -> String {
    format!("{}/state", agent_on_hive(hive, agent))
}

/// `GET /api/hives/{hive}/agents/{agent}/linked-accounts`.
pub fn linked_accounts(hive: &HiveName, agent: &AgentName) -> String {
    format!("{}/linked-accounts", agent_on_hive(hive, agent))
}

/// `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/matrix-accounts/{name}`.
pub fn matrix_account(hive: &HiveName, agent: &AgentName, name: &str) -> String {
    format!("{}/matrix-accounts/{}", agent_on_hive(hive, agent), segment(name))
}

/// `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/forge-accounts/{label}`.
pub fn forge_account(hive: &HiveName, agent: &AgentName, label: &str) -> String {
    format!("{}/forge-accounts/{}", agent_on_hive(hive, agent), segment(label))
}

/// `PUT`, `DELETE /api/hives/{hive}/agents/{agent}/github-account`.
pub fn github_account(hive: &HiveName, agent: &AgentName) -> String {
    format!("{}/github-account", agent_on_hive(hive, agent))
}

/// `GET /api/agents/{name}/terminal`: the agent's turn output as server-sent events.
pub fn terminal(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/terminal", segment(agent.as_str()))
}

/// `GET /api/agents/{name}/turn`: the agent's turn header as server-sent events.
pub fn turn(agent: &AgentName) -> String {
    format!("{AGENTS}/{}/turn", segment(agent.as_str()))
}

/// `GET /api/jobq/graph`, or `?agent=NAME` for one agent's jobs.
pub fn job_graph(agent: Option<&AgentName>) -> String {
    match agent {
        Some(agent) => format!("{JOB_GRAPH}?agent={}", segment(agent.as_str())),
        None => JOB_GRAPH.to_owned(),
    }
}

/// `POST /api/jobq/jobs/{id}/retry`.
pub fn job_retry(id: &JobId) -> String {
    format!("/api/jobq/jobs/{}/retry", segment(id.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hive() -> HiveName {
        HiveName::parse("h1").unwrap()
    }

    fn agent() -> AgentName {
        AgentName::parse("alpha").unwrap()
    }

    #[test]
    fn every_path_is_the_route_the_controller_serves() {
        let job = JobId::parse("alpha.forge-user").unwrap();
        let built = [
            schedule("0f3a-b_c"),
            hive_status(&hive()),
            agent_state(&hive(), &agent()),
            linked_accounts(&hive(), &agent()),
            matrix_account(&hive(), &agent(), "ops"),
            forge_account(&hive(), &agent(), "work"),
            github_account(&hive(), &agent()),
            terminal(&agent()),
            turn(&agent()),
            job_graph(Some(&agent())),
            job_graph(None),
            job_retry(&job),
        ];
        assert_eq!(
            built,
            [
                "/api/schedules/0f3a-b_c",
                "/api/hives/h1/status",
                "/api/hives/h1/agents/alpha/state",
                "/api/hives/h1/agents/alpha/linked-accounts",
                "/api/hives/h1/agents/alpha/matrix-accounts/ops",
                "/api/hives/h1/agents/alpha/forge-accounts/work",
                "/api/hives/h1/agents/alpha/github-account",
                "/api/agents/alpha/terminal",
                "/api/agents/alpha/turn",
                "/api/jobq/graph?agent=alpha",
                "/api/jobq/graph",
                "/api/jobq/jobs/alpha.forge-user/retry",
            ]
        );
    }

    #[test]
    fn a_segment_from_input_stays_one_segment() {
        assert_eq!(schedule("a/b"), "/api/schedules/a%2Fb");
        assert_eq!(schedule("../hives"), "/api/schedules/..%2Fhives");
        assert_eq!(schedule(".."), "/api/schedules/%2E%2E");
        assert_eq!(schedule("."), "/api/schedules/%2E");
        assert_eq!(schedule("x?y=1#z"), "/api/schedules/x%3Fy%3D1%23z");
        assert_eq!(schedule("a b%"), "/api/schedules/a%20b%25");
        assert_eq!(schedule("é"), "/api/schedules/%C3%A9");
        assert_eq!(schedule(""), "/api/schedules/");
        assert_eq!(
            matrix_account(&hive(), &agent(), "x/../y"),
            "/api/hives/h1/agents/alpha/matrix-accounts/x%2F..%2Fy"
        );
        assert_eq!(forge_account(&hive(), &agent(), "a\nb"), "/api/hives/h1/agents/alpha/forge-accounts/a%0Ab");
        for path in [schedule("a/b/../c?d"), matrix_account(&hive(), &agent(), "../../x")] {
            let tail = path.rsplit_once('/').unwrap().1;
            assert!(tail.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{path}");
        }
    }
}
