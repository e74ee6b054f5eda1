//! `POST /api/agents`: create an agent through the job graph.

use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;

use super::{ApiError, json};
use crate::provision::Provisioner;
use crate::provision::{CreateError, CreateRequest};

/// The answer to a create: what to watch.
#[derive(Debug, Serialize)]
struct Created {
    agent: String,
    hive: String,
    /// The provisioning jobs, in the order they may run.
    jobs: Vec<String>,
    /// Where the graph of this agent's jobs is served.
    graph: String,
}

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        let message = err.to_string();
        match err {
            CreateError::Invalid(_) => ApiError::BadRequest(message),
            CreateError::UnknownHive(_) => ApiError::NotFound(message),
            CreateError::HiveWithoutXkey(_) | CreateError::Taken(_) => ApiError::Conflict { message, current: None },
            CreateError::NotConfigured(_) | CreateError::Store(_) => ApiError::Unavailable(message),
        }
    }
}

/// What `POST /api/agents` needs.
#[derive(Debug, Clone)]
pub struct CreationApi {
    /// The hive directory (a new agent's hive must be in it, with an xkey).
    pub directory: Arc<HiveDirectory>,
    /// Creates agents; `None` without the secret store's key or the NATS directory.
    pub provisioner: Option<Arc<Provisioner>>,
}

impl CreationApi {
    /// Checks the request, then (provisioning being configured) stores the agent and queues its
    /// jobs: 202 with their ids.
    pub(super) async fn create_agent(&self, body: &[u8]) -> Result<Response, ApiError> {
        let valid = CreateRequest::parse(body)?.validate(&self.directory)?;
        let provisioner = self.provisioner.as_ref().ok_or_else(|| {
            CreateError::NotConfigured(
                "this controller cannot create agents: it needs SWARM_SECRETS_KEY_FILE (the secret store's \
                 key) and SWARM_NATS_DIR (the NATS signing keys); set both and restart it (nothing was stored)"
                    .into(),
            )
        })?;
        let (agent, hive) = (valid.name.to_string(), valid.hive.to_string());
        let jobs = provisioner.create(valid).await?;
        let created = Created {
            graph: format!("/api/jobq/graph?agent={agent}"),
            jobs: jobs.iter().map(|id| id.as_str().to_owned()).collect(),
            agent,
            hive,
        };
        Ok(json(StatusCode::ACCEPTED, &created))
    }
}
