//! `/api/hives`: the hive directory and each hive's last status with its age.

use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::status::HiveStatus;
use hyperhive_swarm_api::hives::{HiveStatusView, HiveView};
use warp::http::StatusCode;
use warp::reply::Response;

use std::collections::BTreeSet;
use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;

use super::{ApiError, json};
use crate::clock::Clock;
use crate::lifecycle::hives::{freshness, read_all, read_of};

/// What the hive routes need.
#[derive(Debug, Clone)]
pub struct HivesApi {
    /// The hive directory.
    pub directory: Arc<HiveDirectory>,
    /// Reads `hive-status`.
    pub js: async_nats::jetstream::Context,
    /// The age of hive statuses.
    pub clock: Arc<dyn Clock>,
}

impl HivesApi {
    pub(super) fn list_hives(&self) -> Response {
        // The directory is a sorted map: the list is sorted by name.
        let hives: Vec<HiveView> = self
            .directory
            .iter()
            .map(|(name, entry)| HiveView {
                name: name.clone(),
                description: entry.description.clone(),
                labels: entry.labels.clone(),
                xkey: entry.xkey.clone(),
            })
            .collect();
        json(StatusCode::OK, &hives)
    }

    pub(super) async fn hive_statuses(&self) -> Result<Response, ApiError> {
        Ok(json(StatusCode::OK, &self.status_views().await?))
    }

    /// One hive's status, read by its key alone.
    pub(super) async fn hive_status(&self, hive: &str) -> Result<Response, ApiError> {
        let name = self.known_hive(hive)?;
        let mut statuses = read_of(&self.js, BTreeSet::from([name.clone()])).await.map_err(unavailable)?;
        Ok(json(StatusCode::OK, &self.status_view(name.clone(), statuses.remove(&name))))
    }

    /// Every hive of the directory with its status (hives not in the directory are left out).
    async fn status_views(&self) -> Result<Vec<HiveStatusView>, ApiError> {
        let mut statuses = read_all(&self.js).await.map_err(unavailable)?;
        Ok(self.directory.keys().map(|hive| self.status_view(hive.clone(), statuses.remove(hive))).collect())
    }

    fn status_view(&self, hive: HiveName, status: Option<HiveStatus>) -> HiveStatusView {
        let (age_secs, stale) = freshness(status.as_ref(), self.clock.now());
        HiveStatusView { hive, status, age_secs, stale }
    }

    /// `hive` parsed and in the directory: 400 for a malformed name, 404 for an unknown hive.
    pub(super) fn known_hive(&self, hive: &str) -> Result<HiveName, ApiError> {
        let name = parse_hive(hive)?;
        self.check_hive(&name)?;
        Ok(name)
    }

    /// 404 for a hive not in the directory.
    pub(super) fn check_hive(&self, hive: &HiveName) -> Result<(), ApiError> {
        if self.directory.contains_key(hive) {
            return Ok(());
        }
        Err(ApiError::NotFound(format!("no hive {hive} in the hive directory (SWARM_HIVES_FILE); see GET /api/hives")))
    }
}

/// 400 for a malformed hive name.
pub(super) fn parse_hive(hive: &str) -> Result<HiveName, ApiError> {
    HiveName::parse(hive).map_err(|e| ApiError::BadRequest(e.to_string()))
}

pub(super) fn unavailable(err: impl std::fmt::Display) -> ApiError {
    ApiError::Unavailable(crate::nats::what_to_do(&err.to_string()))
}
