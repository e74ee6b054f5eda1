//! `/api/jobq`: the job graph as JSON, and retrying a failed job (`docs/swarm/jobq.md`).

use hyperhive_hive_proto::AgentName;
use hyperhive_jobq::{JobId, Jobq, RetryError};
use warp::http::StatusCode;
use warp::reply::Response;

use super::{ApiError, json};

/// The longest query parameter name echoed back in an error.
const MAX_ECHO: usize = 64;

/// What the job graph routes need.
#[derive(Debug, Clone)]
pub struct JobsApi {
    /// The job graph (in memory only).
    pub jobq: Jobq,
}

impl JobsApi {
    /// `GET /api/jobq/graph[?agent=NAME]`: every job and dependency, or one agent's jobs and
    /// the dependencies among them. An agent with no jobs gets an empty graph, not a 404: its
    /// jobs may simply not be added yet.
    pub(super) fn jobq_graph(&self, query: &str) -> Result<Response, ApiError> {
        let agent = agent_filter(query)?;
        let snapshot = self.jobq.snapshot();
        let snapshot = match agent {
            Some(agent) => snapshot.for_agent(agent.as_str()),
            None => snapshot,
        };
        Ok(json(StatusCode::OK, &snapshot))
    }

    /// `POST /api/jobq/jobs/{id}/retry`: a failed job gets a fresh set of attempts and the jobs
    /// it blocked wait for it again. 202 with the job as it is now (ready, or already running).
    pub(super) fn jobq_retry(&self, id: &str) -> Result<Response, ApiError> {
        let id = JobId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        self.jobq.retry(&id).map_err(|err| match err {
            RetryError::UnknownJob(_) => {
                ApiError::NotFound(format!("no job {id} in the job graph; see GET /api/jobq/graph"))
            }
            RetryError::NotFailed { .. } => ApiError::Conflict { message: err.to_string(), current: None },
            RetryError::Stopped(_) => ApiError::Unavailable(format!("{err}; the controller is shutting down")),
        })?;
        tracing::info!(job = %id, "job retried through the API");
        match self.jobq.node(&id) {
            Some(node) => Ok(json(StatusCode::ACCEPTED, &node)),
            // Retried, then removed by its owner in between: the retry was still accepted.
            None => Ok(json(StatusCode::ACCEPTED, &serde_json::json!({"id": id}))),
        }
    }
}

/// `?agent=NAME`, at most once; any other parameter is refused so a typo is not silently
/// ignored (an ignored filter would show every agent's jobs).
fn agent_filter(query: &str) -> Result<Option<AgentName>, ApiError> {
    let mut agent = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "agent" if agent.is_some() => {
                return Err(ApiError::BadRequest("give ?agent= at most once".into()));
            }
            "agent" => {
                let name = AgentName::parse(value)
                    .map_err(|e| ApiError::BadRequest(format!("the agent filter (?agent=): {e}")))?;
                agent = Some(name);
            }
            other => {
                let shown: String = other.chars().take(MAX_ECHO).collect();
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {shown:?}; GET /api/jobq/graph takes only ?agent=NAME"
                )));
            }
        }
    }
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(err: ApiError) -> String {
        match err {
            ApiError::BadRequest(m) => m,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn the_agent_filter_takes_one_valid_name() {
        assert_eq!(agent_filter("").unwrap(), None);
        assert_eq!(agent_filter("agent=alpha").unwrap().unwrap().as_str(), "alpha");
        assert_eq!(agent_filter("&agent=alpha&").unwrap().unwrap().as_str(), "alpha");
        let bad = message(agent_filter("agent=Alpha").unwrap_err());
        assert!(bad.starts_with("the agent filter (?agent=): invalid agent name \"Alpha\""), "{bad}");
        let empty = message(agent_filter("agent").unwrap_err());
        assert!(empty.contains("it is empty"), "{empty}");
        assert_eq!(message(agent_filter("agent=a&agent=b").unwrap_err()), "give ?agent= at most once");
        let unknown = message(agent_filter("agnet=a").unwrap_err());
        assert_eq!(unknown, "unknown query parameter \"agnet\"; GET /api/jobq/graph takes only ?agent=NAME");
    }
}
