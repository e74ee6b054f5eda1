//! `GET /api/audit[?limit&before&since]`: the audit log, newest first (admins only).

use hyperhive_swarm_api::audit::AuditPage;
use warp::http::StatusCode;
use warp::reply::Response;

use super::page::{Filter, PageQuery};
use super::{ApiError, json};
use crate::audit::AuditLog;

/// What the audit route needs.
#[derive(Debug, Clone)]
pub struct AuditApi {
    /// The log.
    pub log: AuditLog,
}

impl AuditApi {
    pub(super) async fn page(&self, query: &str) -> Result<Response, ApiError> {
        let query = PageQuery::parse(query, Filter::Since)?;
        let (entries, next_before) = self
            .log
            .page(query.before, query.limit, query.since)
            .await
            .map_err(|e| ApiError::Unavailable(crate::nats::what_to_do(&e.to_string())))?;
        Ok(json(StatusCode::OK, &AuditPage { entries, next_before }))
    }
}
