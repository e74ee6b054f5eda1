//! The linked-account routes under `/api/hives/{hive}/agents/{agent}/`: `linked-accounts`
//! (GET), `matrix-accounts/{name}` and `forge-accounts/{label}` (PUT, DELETE) and
//! `github-account` (PUT, DELETE). See [`crate::linked`].

use warp::http::StatusCode;
use warp::reply::Response;

use std::sync::Arc;

use super::{ApiError, json};
use crate::linked::account::Kind;
use crate::provision::linked_accounts::{self as service, LinkError, LinkedAccounts};

impl From<LinkError> for ApiError {
    fn from(err: LinkError) -> Self {
        match err {
            LinkError::BadRequest(m) => ApiError::BadRequest(m),
            LinkError::NotFound(m) => ApiError::NotFound(m),
            LinkError::Conflict(m) => ApiError::Conflict { message: m, current: None },
            LinkError::Upstream(m) => ApiError::BadGateway(m),
            LinkError::Unavailable(m) => ApiError::Unavailable(m),
        }
    }
}

/// What the linked-account routes need.
#[derive(Debug, Clone)]
pub struct LinkedApi {
    /// Accounts operators link to created agents; `None` without provisioning.
    pub linked: Option<Arc<LinkedAccounts>>,
}

impl LinkedApi {
    fn linked(&self) -> Result<&LinkedAccounts, ApiError> {
        self.linked.as_deref().ok_or_else(|| {
            ApiError::NotConfigured(
                "linked accounts need the secret store: set SWARM_SECRETS_KEY_FILE, SWARM_NATS_DIR and \
                 SWARM_DEPLOY_KEY_FILE and restart the controller"
                    .into(),
            )
        })
    }

    pub(super) async fn list_linked(&self, hive: &str, agent: &str) -> Result<Response, ApiError> {
        let listing = self.linked()?.list(hive, agent).await?;
        Ok(json(StatusCode::OK, &listing))
    }

    pub(super) async fn put_linked(
        &self,
        hive: &str,
        agent: &str,
        kind: Kind,
        name: Option<&str>,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let slot = service::slot(kind, name)?;
        let changed = self.linked()?.link(hive, agent, &slot, body).await?;
        Ok(json(StatusCode::OK, &changed))
    }

    pub(super) async fn delete_linked(
        &self,
        hive: &str,
        agent: &str,
        kind: Kind,
        name: Option<&str>,
        query: &str,
    ) -> Result<Response, ApiError> {
        let revoke = revoke_flag(kind, query)?;
        let slot = service::slot(kind, name)?;
        let changed = self.linked()?.unlink(hive, agent, &slot, revoke).await?;
        Ok(json(StatusCode::OK, &changed))
    }
}

/// `?revoke=true|false` (matrix only); any other query is refused rather than ignored.
fn revoke_flag(kind: Kind, query: &str) -> Result<bool, ApiError> {
    let mut revoke = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("revoke", "true")) if kind == Kind::Matrix => revoke = true,
            Some(("revoke", "false")) => revoke = false,
            Some(("revoke", "true")) => {
                return Err(ApiError::BadRequest("?revoke=true applies to matrix accounts only".into()));
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query {pair:?}: a DELETE of a linked account takes only ?revoke=true (matrix accounts)"
                )));
            }
        }
    }
    Ok(revoke)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_matrix_delete_takes_revoke() {
        assert!(revoke_flag(Kind::Matrix, "revoke=true").unwrap());
        assert!(!revoke_flag(Kind::Matrix, "").unwrap());
        assert!(!revoke_flag(Kind::Forge, "revoke=false").unwrap());
        for (kind, query) in [(Kind::Forge, "revoke=true"), (Kind::Matrix, "revoke=yes"), (Kind::Matrix, "force=1")] {
            assert!(revoke_flag(kind, query).is_err(), "{query}");
        }
    }
}
