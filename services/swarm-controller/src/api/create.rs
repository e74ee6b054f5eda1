//! `POST /api/agents`: create an agent through the job graph.

use hyperhive_swarm_api::agents::AgentCreated;
use hyperhive_swarm_api::paths;
use warp::http::StatusCode;
use warp::reply::Response;

use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;

use super::{ApiError, json};
use crate::provision::Provisioner;
use crate::provision::request::CreateChecks;
use crate::provision::{CreateError, CreateRequest};

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        let message = err.to_string();
        match err {
            CreateError::Invalid(_) => ApiError::BadRequest(message),
            CreateError::UnknownHive(_) => ApiError::NotFound(message),
            CreateError::HiveWithoutXkey(_) | CreateError::Taken(_) => ApiError::Conflict { message, current: None },
            CreateError::NotConfigured(_) => ApiError::NotConfigured(message),
            CreateError::Store(_) => ApiError::Unavailable(message),
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
                 key), SWARM_NATS_DIR (the NATS signing keys) and SWARM_DEPLOY_KEY_FILE (the key its hives \
                 pin); set them and restart it (nothing was stored)"
                    .into(),
            )
        })?;
        let (name, hive) = (valid.name.clone(), valid.hive.to_string());
        let jobs = provisioner.create(valid).await?;
        let created = AgentCreated {
            graph: paths::job_graph(Some(&name)),
            jobs: jobs.iter().map(|id| id.as_str().to_owned()).collect(),
            agent: name.to_string(),
            hive,
        };
        Ok(json(StatusCode::ACCEPTED, &created))
    }
}
