//! The `/api/schedules` handlers: validate, one compare-and-set on the definition, then bring
//! the affected agents' keys up to date.
//!
//! Names are unique: a create or a rename takes one lock (one controller serves a swarm) and
//! checks the definitions the reconciler holds (current after every change) before its
//! compare-and-set. Agents a change adds must be on the
//! roster unless the request allows unknown agents; every schedule shown carries what the
//! roster says of each of its agents.

use std::collections::BTreeMap;

use warp::http::StatusCode;
use warp::reply::Response;

use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_schedule::AgentName;
use hyperhive_swarm_api::schedules::{AgentStatus, ScheduleDeleted, Stamp};
use time::OffsetDateTime;

use std::sync::Arc;

use super::{ApiError, json};
use crate::clock::Clock;
use crate::definition::{DefinitionRules, NewSchedule, ScheduleDefinition, SchedulePatch, ScheduleView};
use crate::lifecycle::roster::Roster;
use crate::lifecycle::wanted::WantedStore;
use crate::schedules::reconcile::Reconciler;
use crate::schedules::store::Definitions;
use crate::schedules::store::{Revisioned, StoreError, new_id};

/// How often a change is retried when another change to the same schedule slipped in between its
/// read and its write (only without `If-Match`; with it, the client decides).
const CAS_ATTEMPTS: usize = 5;

/// `r` as shown at `now`: its document, its revision and when it fires next.
fn view(r: Revisioned, now: OffsetDateTime) -> ScheduleView {
    let next_fire = r.definition.next_fire(now).map(Stamp);
    ScheduleView { definition: r.definition, revision: r.revision, agent_status: BTreeMap::new(), next_fire }
}

/// What the roster says of every agent it has: destroyed (its wanted state) or known.
type RosterStatus = BTreeMap<AgentName, AgentStatus>;

/// `r` as shown, each of its agents marked from `roster` (unknown when absent). With no roster
/// (it could not be read) the marks are left out rather than guessed.
fn marked(r: Revisioned, roster: Option<&RosterStatus>, now: OffsetDateTime) -> ScheduleView {
    let mut shown = view(r, now);
    if let Some(roster) = roster {
        shown.agent_status = shown
            .definition
            .agents
            .iter()
            .map(|a| (a.clone(), roster.get(a).copied().unwrap_or(AgentStatus::Unknown)))
            .collect();
    }
    shown
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no schedule with id {id:?}"))
}

/// What the schedule routes need.
#[derive(Debug, Clone)]
pub struct SchedulesApi {
    /// `schedule-definitions`.
    pub definitions: Definitions,
    /// The writer of `agent-schedules`.
    pub reconciler: Arc<Reconciler>,
    /// `not_before` stamps.
    pub clock: Arc<dyn Clock>,
    /// `agents`: which agents exist.
    pub roster: Roster,
    /// `agent-wanted`: which of them are destroyed.
    pub wanted: WantedStore,
    /// Held by creates and renames, so two cannot both take a free name.
    pub names: Arc<tokio::sync::Mutex<()>>,
}

impl SchedulesApi {
    pub(super) async fn list(&self) -> Result<Response, ApiError> {
        let roster = self.roster_status().await;
        let now = self.clock.now();
        let all: Vec<ScheduleView> =
            self.definitions.list().await?.into_iter().map(|r| marked(r, roster.as_ref(), now)).collect();
        Ok(json(StatusCode::OK, &all))
    }

    pub(super) async fn get(&self, id: &str) -> Result<Response, ApiError> {
        let current = self.definitions.get(id).await?.ok_or_else(|| not_found(id))?;
        Ok(json(StatusCode::OK, &self.marked_one(current).await))
    }

    /// Every roster agent's status, or `None` (logged) when a bucket cannot be read.
    async fn roster_status(&self) -> Option<RosterStatus> {
        let read = async {
            let roster = self.roster.list().await?;
            let wanted = self.wanted.list().await?;
            Ok::<_, crate::nats::NatsError>((roster, wanted))
        };
        match read.await {
            Ok((roster, wanted)) => Some(
                roster
                    .into_iter()
                    .map(|(agent, entry)| {
                        let destroyed = wanted
                            .get(&(entry.hive.clone(), agent.clone()))
                            .is_some_and(|w| w.wanted.state == WantedState::Destroyed);
                        (agent, if destroyed { AgentStatus::Destroyed } else { AgentStatus::Known })
                    })
                    .collect(),
            ),
            Err(err) => {
                tracing::warn!(%err, "reading the roster for schedule views failed; showing no agent status");
                None
            }
        }
    }

    /// Refuses `agents` not on the roster.
    async fn check_on_roster(&self, agents: &[AgentName]) -> Result<(), ApiError> {
        for agent in agents {
            let entry = self
                .roster
                .get(agent)
                .await
                .map_err(|e| ApiError::Unavailable(format!("reading the roster failed: {e}")))?;
            if entry.is_none() {
                return Err(ApiError::BadRequest(format!(
                    "agents: {agent} is not on the roster (the agents bucket; see `swarmctl agents`); \
                     name an agent the swarm knows, or send \"allow_unknown_agents\": true \
                     (swarmctl --allow-unknown-agent) to schedule it anyway"
                )));
            }
        }
        Ok(())
    }

    /// Refuses `name` when another schedule has it, naming that schedule.
    async fn check_name_free(&self, name: &str, id: &str) -> Result<(), ApiError> {
        let Some(existing) = self.reconciler.named(name, id).await else {
            return Ok(());
        };
        let current = match self.definitions.get(&existing).await {
            Ok(Some(current)) => Some(Box::new(self.marked_one(current).await)),
            _ => None,
        };
        Err(ApiError::Conflict {
            message: format!(
                "a schedule named {name:?} exists already (id {existing}); names are unique: pick \
                 another name, or change that schedule"
            ),
            current,
        })
    }

    /// `r` as shown, its agents marked by one roster read (and one wanted-state read) each: no
    /// bucket scan, so a single answer costs a few key reads.
    async fn marked_one(&self, r: Revisioned) -> ScheduleView {
        let mut statuses = RosterStatus::new();
        for agent in &r.definition.agents {
            let status = match self.roster.get(agent).await {
                Ok(None) => AgentStatus::Unknown,
                Ok(Some(entry)) => match self.wanted.get(&entry.hive, agent).await {
                    Ok(Some(w)) if w.wanted.state == WantedState::Destroyed => AgentStatus::Destroyed,
                    Ok(_) => AgentStatus::Known,
                    Err(err) => return self.unmarked(r, &err),
                },
                Err(err) => return self.unmarked(r, &err),
            };
            statuses.insert(agent.clone(), status);
        }
        marked(r, Some(&statuses), self.clock.now())
    }

    fn unmarked(&self, r: Revisioned, err: &str) -> ScheduleView {
        tracing::warn!(%err, "reading the roster for a schedule view failed; showing no agent status");
        view(r, self.clock.now())
    }

    pub(super) async fn create(&self, body: &[u8]) -> Result<Response, ApiError> {
        let new = NewSchedule::from_json(body)?;
        if !new.allow_unknown_agents {
            self.check_on_roster(&new.agents).await?;
        }
        let _names = self.names.lock().await;
        self.check_name_free(&new.name, "").await?;
        let now = self.clock.now();
        for _ in 0..CAS_ATTEMPTS {
            let definition = ScheduleDefinition::create(new_id(), new.clone(), now);
            self.reconciler.check_fits(&definition).await.map_err(ApiError::BadRequest)?;
            match self.definitions.create(&definition).await {
                Ok(revision) => {
                    tracing::info!(id = %definition.id, name = %definition.name, agents = definition.agents.len(), "schedule created");
                    self.update_agents(&definition.id).await;
                    let created = Revisioned { definition, revision };
                    return Ok(json(StatusCode::CREATED, &self.marked_one(created).await));
                }
                // 64 random bits collided: draw another id.
                Err(StoreError::Conflict { .. }) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(ApiError::Unavailable("could not find an unused schedule id; try again".into()))
    }

    pub(super) async fn patch(&self, id: &str, if_match: Option<u64>, body: &[u8]) -> Result<Response, ApiError> {
        let patch = SchedulePatch::from_json(body)?;
        let _names = match patch.name {
            Some(_) => Some(self.names.lock().await),
            None => None,
        };
        for _ in 0..CAS_ATTEMPTS {
            let current = self.definitions.get(id).await?.ok_or_else(|| not_found(id))?;
            self.check_revision(if_match, &current).await?;
            let next = current.definition.patched(patch.clone(), self.clock.now())?;
            if next == current.definition {
                return Ok(json(StatusCode::OK, &self.marked_one(current).await));
            }
            if next.name != current.definition.name {
                self.check_name_free(&next.name, id).await?;
            }
            if !next.allow_unknown_agents {
                let added: Vec<AgentName> =
                    next.agents.iter().filter(|a| !current.definition.agents.contains(a)).cloned().collect();
                self.check_on_roster(&added).await?;
            }
            self.reconciler.check_fits(&next).await.map_err(ApiError::BadRequest)?;
            match self.definitions.update(&next, current.revision).await {
                Ok(revision) => {
                    tracing::info!(id, revision, "schedule changed");
                    self.update_agents(id).await;
                    let changed = Revisioned { definition: next, revision };
                    return Ok(json(StatusCode::OK, &self.marked_one(changed).await));
                }
                Err(StoreError::Conflict { .. }) if if_match.is_none() => continue,
                Err(StoreError::Conflict { .. }) => return Err(self.conflict(id, current.revision).await),
                Err(err) => return Err(err.into()),
            }
        }
        Err(self.conflict(id, 0).await)
    }

    pub(super) async fn delete(&self, id: &str, if_match: Option<u64>) -> Result<Response, ApiError> {
        for _ in 0..CAS_ATTEMPTS {
            let current = self.definitions.get(id).await?.ok_or_else(|| not_found(id))?;
            self.check_revision(if_match, &current).await?;
            match self.definitions.delete(id, current.revision).await {
                Ok(()) => {
                    tracing::info!(id, "schedule deleted");
                    self.update_agents(id).await;
                    return Ok(json(StatusCode::OK, &ScheduleDeleted { id: id.to_owned(), deleted: true }));
                }
                Err(StoreError::Conflict { .. }) if if_match.is_none() => continue,
                Err(StoreError::Conflict { .. }) => return Err(self.conflict(id, current.revision).await),
                Err(err) => return Err(err.into()),
            }
        }
        Err(self.conflict(id, 0).await)
    }

    /// Writes the keys of the schedule's agents. A failure here leaves the definition changed and
    /// the keys behind; the reconcile pass repairs them, so the request still succeeds.
    async fn update_agents(&self, id: &str) {
        match self.reconciler.schedule_changed(id).await {
            Ok(report) => tracing::debug!(id, ?report, "agent keys updated"),
            Err(err) => tracing::warn!(id, %err, "updating agent keys failed; the reconcile pass will repair them"),
        }
    }

    /// A 409 when `current` is not at the `If-Match` revision, carrying it as it is.
    async fn check_revision(&self, if_match: Option<u64>, current: &Revisioned) -> Result<(), ApiError> {
        match if_match {
            Some(expected) if expected != current.revision => Err(ApiError::Conflict {
                message: format!(
                    "schedule {} is at revision {}, not {expected} (If-Match); re-read it and apply \
                         your change again",
                    current.definition.id, current.revision
                ),
                current: Some(Box::new(self.marked_one(current.clone()).await)),
            }),
            _ => Ok(()),
        }
    }

    /// A 409 carrying the schedule as it is now.
    async fn conflict(&self, id: &str, based_on: u64) -> ApiError {
        match self.definitions.get(id).await {
            Ok(Some(current)) => ApiError::Conflict {
                message: format!(
                    "schedule {id} was changed by someone else (you had revision {based_on}, it is \
                     now at {}); re-read it and apply your change again",
                    current.revision
                ),
                current: Some(Box::new(self.marked_one(current).await)),
            },
            Ok(None) => not_found(id),
            Err(err) => err.into(),
        }
    }
}
