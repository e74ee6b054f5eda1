//! `GET /api/agents/{name}/turns` and `GET /api/agents/{name}/turns/{id}`: an agent's turn
//! history, newest first, each turn with the name of the schedule that fired it; and
//! `GET /api/schedules/{id}/fired`, the latest slot of a schedule each agent's history records.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use hyperhive_hive_proto::turns::MAX_OUTPUT_BYTES;
use hyperhive_schedule::{AgentName, fired_slot, format_instant};
use hyperhive_swarm_api::paths;
use hyperhive_swarm_api::schedules::{FiredSlot, FiredSlots};
use hyperhive_swarm_api::work::{LastTurn, TurnView, TurnsPage};
use warp::http::header::CONTENT_TYPE;
use warp::http::{HeaderValue, StatusCode};
use warp::reply::Response;

use super::page::{Filter, PageQuery};
use super::todos::decoded;
use super::ui::known_agent;
use super::{ApiError, json};
use crate::lifecycle::roster::Roster;
use crate::schedules::store::Definitions;
use crate::work::Unavailable;
use crate::work::history::{Histories, Stored};
use crate::work::turn_output::TurnOutputs;

/// How many agents' histories `fired` reads at once.
const HISTORIES_AT_ONCE: usize = 8;

/// What the history routes need.
#[derive(Debug, Clone)]
pub struct TurnsApi {
    /// Only agents on the roster have a history here.
    pub roster: Roster,
    /// The histories.
    pub histories: Histories,
    /// The schedules, for the names of the ones that fired turns.
    pub definitions: Definitions,
    /// The turns' whole outputs, from the relay's history.
    pub outputs: TurnOutputs,
}

impl TurnsApi {
    pub(super) async fn list(&self, name: &str, query: &str) -> Result<Response, ApiError> {
        let query = PageQuery::parse(query, Filter::Failed)?;
        let agent = known_agent(&self.roster, name).await?;
        let (turns, next_before) = self
            .histories
            .page(&agent, query.before, query.limit, query.failed)
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        let names = self.schedule_names().await;
        let turns = turns.into_iter().map(|stored| view(stored, &names)).collect();
        Ok(json(StatusCode::OK, &TurnsPage { turns, next_before }))
    }

    pub(super) async fn get(&self, name: &str, id: &str) -> Result<Response, ApiError> {
        let (agent, id, stored) = self.finished(name, id).await?;
        let mut shown = view(stored, &self.schedule_names().await);
        let span = self.outputs.span(&agent, &id).await.map_err(|e| ApiError::Unavailable(e.to_string()))?;
        shown.relay_output = span.map(|_| paths::agent_turn_output(&agent, &id));
        Ok(json(StatusCode::OK, &shown))
    }

    /// The turn's whole output as the relay's history holds it, as bytes.
    pub(super) async fn output(&self, name: &str, id: &str) -> Result<Response, ApiError> {
        let (agent, id, _) = self.finished(name, id).await?;
        let unavailable = |e: crate::work::Unavailable| ApiError::Unavailable(e.to_string());
        let Some(span) = self.outputs.span(&agent, &id).await.map_err(unavailable)? else {
            return Err(ApiError::NotFound(format!(
                "the relay's history no longer holds the output of {agent}'s turn of todo {id:?}; its record keeps \
                 the last {} KiB ({})",
                MAX_OUTPUT_BYTES / 1024,
                paths::agent_turn_record(&agent, &id)
            )));
        };
        let output = self.outputs.read(&agent, span).await.map_err(unavailable)?;
        let mut response = Response::new(output.into());
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        Ok(response)
    }

    /// `agent`'s finished turn of todo `id` (decoded), or a 404 saying why there is none.
    async fn finished(&self, name: &str, id: &str) -> Result<(AgentName, String, Stored), ApiError> {
        let agent = known_agent(&self.roster, name).await?;
        let id = decoded(id)?;
        match self.histories.find(&agent, &id).await.map_err(|e| ApiError::Unavailable(e.to_string()))? {
            Some(stored) => Ok((agent, id, stored)),
            None => Err(ApiError::NotFound(format!(
                "{agent} has no finished turn of todo {id:?} (still queued or running, never queued, or older than its \
                 history keeps)"
            ))),
        }
    }

    /// Per agent of schedule `id`, its latest slot recorded in its history. The agents' histories
    /// are read a few at a time.
    pub(super) async fn fired(&self, id: &str) -> Result<Response, ApiError> {
        let schedule =
            self.definitions.get(id).await?.ok_or_else(|| ApiError::NotFound(format!("no schedule with id {id:?}")))?;
        let latest = |agent: AgentName| async move {
            let records = self.histories.all(&agent).await?;
            let fired = records
                .iter()
                .filter_map(|(_, record)| fired_slot(&record.todo_id, &agent, id).map(|slot| (slot, record)))
                .max_by_key(|(slot, _)| *slot)
                .map(|(slot, record)| FiredSlot { slot: format_instant(slot), turn: LastTurn::from(record) });
            Ok::<_, Unavailable>((agent, fired))
        };
        let agents = futures::stream::iter(schedule.definition.agents.into_iter().map(latest))
            .buffer_unordered(HISTORIES_AT_ONCE)
            .try_collect()
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        Ok(json(StatusCode::OK, &FiredSlots { agents }))
    }

    /// Schedule id -> name; empty when the definitions cannot be read (the turns are still shown).
    async fn schedule_names(&self) -> HashMap<String, String> {
        match self.definitions.list().await {
            Ok(all) => all.into_iter().map(|r| (r.definition.id.clone(), r.definition.name.clone())).collect(),
            Err(e) => {
                tracing::warn!("turns shown without schedule names: {e}");
                HashMap::new()
            }
        }
    }
}

fn view((seq, record): Stored, names: &HashMap<String, String>) -> TurnView {
    let schedule_name = record.source.strip_prefix("schedule:").and_then(|id| names.get(id)).cloned();
    TurnView { seq, record, schedule_name, relay_output: None }
}
