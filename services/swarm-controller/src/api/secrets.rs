//! The secret-variable routes: `GET /api/agents/{name}/secrets`,
//! `PUT|DELETE /api/agents/{name}/secrets/{VAR}`, `GET /api/secrets` and
//! `PUT|DELETE /api/secrets/{VAR}`. A value is the raw body of a `PUT` (any content type, at
//! most [`MAX_SECRET_VALUE_BYTES`]); no answer ever holds one. See
//! [`crate::provision::env_secrets`].

use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_json_body::BodyError;
use hyperhive_swarm_api::limits::MAX_SECRET_VALUE_BYTES;
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;

use super::{ApiError, json};
use crate::provision::env_secrets::{EnvSecretError, EnvSecrets};

impl From<EnvSecretError> for ApiError {
    fn from(err: EnvSecretError) -> Self {
        match err {
            EnvSecretError::BadRequest(m) => ApiError::BadRequest(m),
            EnvSecretError::NotFound(m) => ApiError::NotFound(m),
            EnvSecretError::Conflict(m) => ApiError::Conflict { message: m, current: None },
            EnvSecretError::Unavailable(m) => ApiError::Unavailable(m),
        }
    }
}

/// What the secret-variable routes need.
#[derive(Debug, Clone)]
pub struct SecretsApi {
    /// `None` without the secret store (no `SWARM_SECRETS_KEY_FILE` or `SWARM_NATS_DIR`).
    pub secrets: Option<Arc<EnvSecrets>>,
}

impl SecretsApi {
    fn secrets(&self) -> Result<&EnvSecrets, ApiError> {
        self.secrets.as_deref().ok_or_else(|| {
            ApiError::NotConfigured(
                "secret variables need the secret store: set SWARM_SECRETS_KEY_FILE, SWARM_NATS_DIR and \
                 SWARM_DEPLOY_KEY_FILE and restart the controller"
                    .into(),
            )
        })
    }

    pub(super) async fn list(&self, agent: Option<&str>) -> Result<Response, ApiError> {
        let listing = match agent {
            Some(agent) => self.secrets()?.list_agent(agent).await?,
            None => self.secrets()?.list_swarm().await?,
        };
        Ok(json(StatusCode::OK, &listing))
    }

    pub(super) async fn put<S, B>(
        &self,
        agent: Option<&str>,
        name: &str,
        headers: &HeaderMap,
        body: S,
    ) -> Result<Response, ApiError>
    where
        S: Stream<Item = Result<B, warp::Error>> + Send,
        B: Buf,
    {
        let secrets = self.secrets()?;
        let value = value_body(headers, body).await?;
        let changed = match agent {
            Some(agent) => secrets.set_agent(agent, name, &value).await?,
            None => secrets.set_swarm(name, &value).await?,
        };
        Ok(json(StatusCode::OK, &changed))
    }

    pub(super) async fn delete(&self, agent: Option<&str>, name: &str) -> Result<Response, ApiError> {
        let secrets = self.secrets()?;
        let changed = match agent {
            Some(agent) => secrets.remove_agent(agent, name).await?,
            None => secrets.remove_swarm(name).await?,
        };
        Ok(json(StatusCode::OK, &changed))
    }
}

/// A secret's value: the raw body, at most [`MAX_SECRET_VALUE_BYTES`] (else 413). The error
/// never quotes it.
async fn value_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::limited_body(headers, body, MAX_SECRET_VALUE_BYTES).await.map_err(|e| match e {
        BodyError::TooLarge { .. } => {
            ApiError::PayloadTooLarge(format!("{e}; a secret variable's value is at most 64 KiB"))
        }
        other => ApiError::BadRequest(other.to_string()),
    })
}
