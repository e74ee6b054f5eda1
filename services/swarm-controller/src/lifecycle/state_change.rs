//! Setting an agent's wanted state, whoever asks (the socket, the control plane): the agent must
//! be on the roster on the hive named, a destroyed agent stays destroyed, an `If-Match` must name
//! the current revision, the write is one compare-and-set (retried on a lost race only when the
//! caller named no revision), and `destroyed` then revokes the agent's NATS credentials.

use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::wanted::{Wanted, WantedState};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_schedule::instant::format_instant;

use crate::clock::Clock;
use crate::lifecycle::revoke::Revoker;
use crate::lifecycle::roster::Roster;
use crate::lifecycle::wanted::{Stored, WantedStore, WriteError};

/// How often a change is retried when another write slipped in between its read and its write
/// (only without `If-Match`; with it, the caller decides).
const CAS_ATTEMPTS: usize = 5;

/// Why a state change was refused or did not complete; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StateChangeError {
    /// The hive is not in the directory.
    #[error("no hive {0} in the hive directory (SWARM_HIVES_FILE); see GET /api/hives")]
    UnknownHive(HiveName),
    /// The agent is on the roster, on another hive.
    #[error("agent {agent} is on hive {actual}, not on hive {hive}; see GET /api/agents")]
    OnAnotherHive {
        /// The agent.
        agent: AgentName,
        /// The hive the request named.
        hive: HiveName,
        /// The hive it is on.
        actual: HiveName,
    },
    /// The agent is not on the roster.
    #[error("no agent {0} on the roster; see GET /api/agents")]
    NotOnRoster(AgentName),
    /// The request conflicts with what is stored, or cannot be done as configured; nothing was
    /// stored.
    #[error("{0}")]
    Conflict(String),
    /// NATS failed; the text says what is known of the write.
    #[error("{0}")]
    Unavailable(String),
    /// The state `destroyed` is stored, but revoking the credentials failed; the reconcile pass
    /// retries it.
    #[error(
        "the wanted state destroyed is recorded (revision {revision}), but revoking agent {agent}'s NATS \
         credentials failed ({reason}); the controller retries the revocation on its reconcile pass"
    )]
    RevocationPending {
        /// The agent.
        agent: AgentName,
        /// The revision the state was stored at.
        revision: u64,
        /// Why the revocation failed.
        reason: String,
    },
}

/// A change that was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChanged {
    /// The document as stored.
    pub wanted: Wanted,
    /// Its revision in `agent-wanted`.
    pub revision: u64,
}

/// The one writer of wanted state.
#[derive(Debug, Clone)]
pub struct StateChanger {
    /// The hive directory.
    pub hives: Arc<HiveDirectory>,
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// Revokes a destroyed agent's credentials; `None` without `SWARM_NATS_DIR`.
    pub revoker: Option<Arc<Revoker>>,
    /// `set_at`.
    pub clock: Arc<dyn Clock>,
}

impl StateChanger {
    /// Sets `agent`'s wanted state on `hive` to `state`, recorded as set by `set_by`.
    ///
    /// # Errors
    /// [`StateChangeError`]: nothing is stored unless it is
    /// [`StateChangeError::RevocationPending`] (the state is, its revocation is retried).
    pub async fn set(
        &self,
        hive: &HiveName,
        agent: &AgentName,
        state: WantedState,
        set_by: String,
        if_match: Option<u64>,
    ) -> Result<StateChanged, StateChangeError> {
        if !self.hives.contains_key(hive) {
            return Err(StateChangeError::UnknownHive(hive.clone()));
        }
        match self.roster.get(agent).await.map_err(unavailable)? {
            Some(entry) if &entry.hive == hive => {}
            Some(entry) => {
                return Err(StateChangeError::OnAnotherHive {
                    agent: agent.clone(),
                    hive: hive.clone(),
                    actual: entry.hive,
                });
            }
            None => return Err(StateChangeError::NotOnRoster(agent.clone())),
        }
        if state == WantedState::Destroyed && self.revoker.is_none() {
            return Err(StateChangeError::Conflict(format!(
                "cannot destroy agent {agent}: revoking its NATS credentials needs the directory \
                 `swarm-controller nats init` wrote; set SWARM_NATS_DIR to it and restart the \
                 controller (nothing was stored)"
            )));
        }
        let wanted = Wanted { state, set_at: format_instant(self.clock.now()), set_by };
        let revision = self.write(hive, agent, &wanted, if_match).await?;
        tracing::info!(%hive, %agent, %state, revision, set_by = %wanted.set_by, "wanted state set");
        if state == WantedState::Destroyed
            && let Some(revoker) = &self.revoker
            && let Err(err) = revoker.revoke(agent).await
        {
            tracing::warn!(%agent, %err, "revocation failed; the reconcile pass retries it");
            return Err(StateChangeError::RevocationPending {
                agent: agent.clone(),
                revision,
                reason: err.to_string(),
            });
        }
        Ok(StateChanged { wanted, revision })
    }

    /// One compare-and-set, retried on a lost race unless the caller named the revision.
    async fn write(
        &self,
        hive: &HiveName,
        agent: &AgentName,
        wanted: &Wanted,
        if_match: Option<u64>,
    ) -> Result<u64, StateChangeError> {
        for _ in 0..CAS_ATTEMPTS {
            let current = self.wanted.get(hive, agent).await.map_err(unavailable)?;
            check_current(hive, agent, current.as_ref(), if_match)?;
            match self.wanted.put(hive, agent, wanted, current.as_ref().map(|c| c.revision)).await {
                Ok(revision) => return Ok(revision),
                Err(WriteError::Conflict) if if_match.is_none() => continue,
                Err(WriteError::Conflict) => {
                    return Err(StateChangeError::Conflict(format!(
                        "the wanted state of {agent} on {hive} changed meanwhile; re-read it (GET /api/agents) and try again"
                    )));
                }
                Err(WriteError::Nats(err)) => return Err(unavailable(err)),
            }
        }
        Err(StateChangeError::Conflict(format!(
            "the wanted state of {agent} on {hive} keeps changing under this request; try again"
        )))
    }
}

fn unavailable(err: impl std::fmt::Display) -> StateChangeError {
    StateChangeError::Unavailable(crate::nats::what_to_do(&err.to_string()))
}

/// Refuses a change to a destroyed agent and an `If-Match` that is not the current revision.
fn check_current(
    hive: &HiveName,
    agent: &AgentName,
    current: Option<&Stored>,
    if_match: Option<u64>,
) -> Result<(), StateChangeError> {
    if let Some(current) = current
        && current.wanted.state == WantedState::Destroyed
    {
        return Err(StateChangeError::Conflict(format!(
            "agent {agent} on {hive} is destroyed, which is final (set by {} at {}); create a new \
             agent under another name",
            current.wanted.set_by, current.wanted.set_at
        )));
    }
    match (if_match, current) {
        (Some(expected), None) => Err(StateChangeError::Conflict(format!(
            "If-Match: {expected}, but no wanted state was ever stored for {agent} on {hive} (it \
             holds its default); send the change without If-Match"
        ))),
        (Some(expected), Some(current)) if current.revision != expected => Err(StateChangeError::Conflict(format!(
            "the wanted state of {agent} on {hive} is at revision {}, not {expected} (If-Match); \
             re-read it (GET /api/agents) and try again",
            current.revision
        ))),
        _ => Ok(()),
    }
}
