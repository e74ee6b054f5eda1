//! `GET /api/overview`: the swarm in counts. It reads the roster and every agent's last turn
//! from the controller's memory and the hives' statuses once (each agent's activity and each
//! hive's freshness), so its cost grows with the swarm only in memory and its body not at all.

use std::collections::BTreeMap;

use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_swarm_api::overview::{Activity, FAILED_TURNS_LISTED, FailedTurn, Overview, is_failure};
use warp::http::StatusCode;
use warp::reply::Response;

use super::hives::unavailable;
use super::{ApiError, json};
use crate::clock::Clock;
use crate::lifecycle::hives::{freshness, read_all};
use crate::lifecycle::roster::Roster;
use crate::work::last_turns::LastTurns;

/// What the overview needs.
#[derive(Debug, Clone)]
pub struct OverviewApi {
    /// `agents`, with its index.
    pub roster: Roster,
    /// Reads `hive-status`.
    pub js: async_nats::jetstream::Context,
    /// Every agent's last turn.
    pub last_turns: LastTurns,
    /// The hive directory: the hives counted.
    pub directory: Arc<HiveDirectory>,
    /// The age of hive statuses.
    pub clock: Arc<dyn Clock>,
}

impl OverviewApi {
    /// `GET /api/overview`.
    pub(super) async fn overview(&self) -> Result<Response, ApiError> {
        let agents = self.agents().await?;
        let statuses = read_all(&self.js).await.map_err(unavailable)?;
        let mut overview = Overview {
            agents: agents.len() as u64,
            activity: BTreeMap::new(),
            last_turns: BTreeMap::new(),
            no_turn_yet: 0,
            failed_turns: Vec::new(),
            hives_fresh: 0,
            hives_stale: Vec::new(),
        };
        let now = self.clock.now();
        for hive in self.directory.keys() {
            match freshness(statuses.get(hive), now) {
                (_, true) => overview.hives_stale.push(hive.clone()),
                (_, false) => overview.hives_fresh += 1,
            }
        }
        let mut failed = Vec::new();
        self.last_turns
            .read(|last_turns| {
                for (agent, hive) in agents {
                    let status = statuses.get(&hive).and_then(|s| s.agents.get(&agent));
                    *overview.activity.entry(Activity::of(status)).or_default() += 1;
                    let Some(latest) = last_turns.get(&agent) else {
                        overview.no_turn_yet += 1;
                        continue;
                    };
                    *overview.last_turns.entry(latest.turn.outcome).or_default() += 1;
                    if is_failure(latest.turn.outcome) {
                        failed.push((latest.sequence, FailedTurn { agent, turn: latest.turn.clone() }));
                    }
                }
            })
            .ok_or_else(|| {
                ApiError::Unavailable(
                    "the controller is still reading the agents' turn histories (it does at start and after \
                     losing NATS); try again in a few seconds"
                        .into(),
                )
            })?;
        failed.sort_unstable_by_key(|(sequence, _)| std::cmp::Reverse(*sequence));
        overview.failed_turns = failed.into_iter().take(FAILED_TURNS_LISTED).map(|(_, turn)| turn).collect();
        Ok(json(StatusCode::OK, &overview))
    }

    /// Every agent on the roster with its hive, from the roster's index (the bucket when the
    /// index does not follow it).
    async fn agents(&self) -> Result<Vec<(AgentName, HiveName)>, ApiError> {
        let pairs = |all: &BTreeMap<AgentName, hyperhive_hive_proto::roster::RosterEntry>| {
            all.iter().map(|(name, entry)| (name.clone(), entry.hive.clone())).collect()
        };
        match self.roster.index().read(pairs) {
            Some(agents) => Ok(agents),
            None => Ok(pairs(&self.roster.list().await.map_err(unavailable)?)),
        }
    }
}
