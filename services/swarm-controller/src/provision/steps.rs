//! The nine steps of provisioning an agent, their names (as recorded in the roster and shown in
//! the job graph) and the order they run in.
//!
//! ```text
//! sso ─────────────┐
//! forge-user ─┬─ config-repo ─┤
//!             └─ forge-token ─┤
//! store-identity ──┤
//! matrix ──────────┼─ declare-paused ── deploy
//! queue-credential ┘
//! ```
//! Steps without an edge between them run at once (within the graph's concurrency bound).

use hyperhive_hive_proto::AgentName;
use hyperhive_jobq::JobId;

/// One provisioning step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// The SSO user, through swarm-authelia-bridge.
    Sso,
    /// The forge user.
    ForgeUser,
    /// The agent's config repository, generated from the template.
    ConfigRepo,
    /// The agent's X.509 client certificate from the store CA.
    StoreIdentity,
    /// The agent's forge API token.
    ForgeToken,
    /// The agent's matrix account.
    Matrix,
    /// The agent's NATS user credential.
    QueueCredential,
    /// The wanted state `paused`, so the agent starts without taking todos.
    DeclarePaused,
    /// The sealed deploy message to its hive.
    Deploy,
}

impl Step {
    /// Every step, dependencies before dependents.
    pub const ALL: [Step; 9] = [
        Step::Sso,
        Step::ForgeUser,
        Step::ConfigRepo,
        Step::StoreIdentity,
        Step::ForgeToken,
        Step::Matrix,
        Step::QueueCredential,
        Step::DeclarePaused,
        Step::Deploy,
    ];

    /// The name in the roster, the job graph's `kind` and the job id's suffix.
    pub fn name(self) -> &'static str {
        match self {
            Step::Sso => "sso",
            Step::ForgeUser => "forge-user",
            Step::ConfigRepo => "config-repo",
            Step::StoreIdentity => "store-identity",
            Step::ForgeToken => "forge-token",
            Step::Matrix => "matrix",
            Step::QueueCredential => "queue-credential",
            Step::DeclarePaused => "declare-paused",
            Step::Deploy => "deploy",
        }
    }

    /// The steps that must have succeeded first.
    pub fn after(self) -> &'static [Step] {
        match self {
            Step::Sso | Step::ForgeUser | Step::StoreIdentity | Step::Matrix | Step::QueueCredential => &[],
            Step::ConfigRepo | Step::ForgeToken => &[Step::ForgeUser],
            Step::DeclarePaused => &[
                Step::Sso,
                Step::ConfigRepo,
                Step::StoreIdentity,
                Step::ForgeToken,
                Step::Matrix,
                Step::QueueCredential,
            ],
            Step::Deploy => &[Step::DeclarePaused],
        }
    }

    /// The step's job id for `agent`: `<agent>.<step>`.
    pub fn job_id(self, agent: &AgentName) -> JobId {
        JobId::parse(&format!("{agent}.{}", self.name())).expect("an agent name and a step name make a valid job id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dependency_comes_earlier_and_every_step_leads_to_the_deploy() {
        for (i, step) in Step::ALL.iter().enumerate() {
            for dep in step.after() {
                let j = Step::ALL.iter().position(|s| s == dep).unwrap();
                assert!(j < i, "{} runs after {}", step.name(), dep.name());
            }
        }
        // Every step but the deploy is (transitively) a dependency of the deploy.
        let mut reached = vec![Step::Deploy];
        let mut i = 0;
        while i < reached.len() {
            for dep in reached[i].after() {
                if !reached.contains(dep) {
                    reached.push(*dep);
                }
            }
            i += 1;
        }
        assert_eq!(reached.len(), Step::ALL.len());
    }

    #[test]
    fn job_ids_are_the_agent_and_the_step() {
        let agent = AgentName::parse("alpha-1").unwrap();
        assert_eq!(Step::ConfigRepo.job_id(&agent).as_str(), "alpha-1.config-repo");
        let longest = AgentName::parse(&"a".repeat(hyperhive_schedule::name::MAX_NAME_LEN)).unwrap();
        for step in Step::ALL {
            step.job_id(&longest);
        }
    }
}
