//! The `/api/schedules` handlers: validate, one compare-and-set on the definition, then bring
//! the affected agents' keys up to date.

use warp::http::StatusCode;
use warp::reply::Response;

use hyperhive_swarm_api::schedules::ScheduleDeleted;

use std::sync::Arc;

use super::{ApiError, json};
use crate::clock::Clock;
use crate::definition::{DefinitionRules, NewSchedule, ScheduleDefinition, SchedulePatch, ScheduleView};
use crate::schedules::reconcile::Reconciler;
use crate::schedules::store::Definitions;
use crate::schedules::store::{Revisioned, StoreError, new_id};

/// How often a change is retried when another change to the same schedule slipped in between its
/// read and its write (only without `If-Match`; with it, the client decides).
const CAS_ATTEMPTS: usize = 5;

fn view(r: Revisioned) -> ScheduleView {
    ScheduleView { definition: r.definition, revision: r.revision }
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
}

impl SchedulesApi {
    pub(super) async fn list(&self) -> Result<Response, ApiError> {
        let all: Vec<ScheduleView> = self.definitions.list().await?.into_iter().map(view).collect();
        Ok(json(StatusCode::OK, &all))
    }

    pub(super) async fn get(&self, id: &str) -> Result<Response, ApiError> {
        let current = self.definitions.get(id).await?.ok_or_else(|| not_found(id))?;
        Ok(json(StatusCode::OK, &view(current)))
    }

    pub(super) async fn create(&self, body: &[u8]) -> Result<Response, ApiError> {
        let new = NewSchedule::from_json(body)?;
        let now = self.clock.now();
        for _ in 0..CAS_ATTEMPTS {
            let definition = ScheduleDefinition::create(new_id(), new.clone(), now);
            self.reconciler.check_fits(&definition).await.map_err(ApiError::BadRequest)?;
            match self.definitions.create(&definition).await {
                Ok(revision) => {
                    tracing::info!(id = %definition.id, name = %definition.name, agents = definition.agents.len(), "schedule created");
                    self.update_agents(&definition.id).await;
                    let created = Revisioned { definition, revision };
                    return Ok(json(StatusCode::CREATED, &view(created)));
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
        for _ in 0..CAS_ATTEMPTS {
            let current = self.definitions.get(id).await?.ok_or_else(|| not_found(id))?;
            check_revision(if_match, &current)?;
            let next = current.definition.patched(patch.clone(), self.clock.now());
            if next == current.definition {
                return Ok(json(StatusCode::OK, &view(current)));
            }
            self.reconciler.check_fits(&next).await.map_err(ApiError::BadRequest)?;
            match self.definitions.update(&next, current.revision).await {
                Ok(revision) => {
                    tracing::info!(id, revision, "schedule changed");
                    self.update_agents(id).await;
                    let changed = Revisioned { definition: next, revision };
                    return Ok(json(StatusCode::OK, &view(changed)));
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
            check_revision(if_match, &current)?;
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

    /// A 409 carrying the schedule as it is now.
    async fn conflict(&self, id: &str, based_on: u64) -> ApiError {
        match self.definitions.get(id).await {
            Ok(Some(current)) => ApiError::Conflict {
                message: format!(
                    "schedule {id} was changed by someone else (you had revision {based_on}, it is \
                     now at {}); re-read it and apply your change again",
                    current.revision
                ),
                current: Some(Box::new(view(current))),
            },
            Ok(None) => not_found(id),
            Err(err) => err.into(),
        }
    }
}

fn check_revision(if_match: Option<u64>, current: &Revisioned) -> Result<(), ApiError> {
    match if_match {
        Some(expected) if expected != current.revision => Err(ApiError::Conflict {
            message: format!(
                "schedule {} is at revision {}, not {expected} (If-Match); re-read it and apply \
                 your change again",
                current.definition.id, current.revision
            ),
            current: Some(Box::new(view(current.clone()))),
        }),
        _ => Ok(()),
    }
}
