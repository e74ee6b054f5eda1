//! The periodic hive pass: adds to the roster every agent of every hive status (repairing a
//! missed watch event), makes every known tenant's durable consumers (see
//! [`crate::nats::consumers`]), and revokes every `destroyed` agent whose revocation is not done yet and
//! whom the roster has on the hive the wanted state names.
//! Failures are logged and retried at the next pass.

use std::sync::Arc;

use hyperhive_hive_proto::directory::HiveDirectory;
use hyperhive_hive_proto::wanted::WantedState;

use crate::clock::Clock;
use crate::lifecycle::hives::read_all;
use crate::lifecycle::revoke::Revoker;
use crate::lifecycle::roster::Roster;
use crate::lifecycle::tenant_consumers::{PassReport, TenantConsumers};
use crate::lifecycle::wanted::WantedStore;

/// What the pass reads and repairs.
#[derive(Debug, Clone)]
pub struct HivePass {
    /// Reads `hive-status`.
    pub js: async_nats::jetstream::Context,
    /// The hive directory: statuses of hives outside it add nothing.
    pub hives: Arc<HiveDirectory>,
    /// `agents`.
    pub roster: Roster,
    /// `agent-wanted`.
    pub wanted: WantedStore,
    /// Revokes destroyed agents; `None` without `SWARM_NATS_DIR`.
    pub revoker: Option<Arc<Revoker>>,
    /// A new roster entry's creation time.
    pub clock: Arc<dyn Clock>,
    /// Makes the tenants' consumers; `None`: this pass makes none.
    pub consumers: Option<TenantConsumers>,
}

impl HivePass {
    /// One pass.
    pub async fn run(&self) {
        match read_all(&self.js).await {
            Ok(statuses) => match self.roster.sync_all(&self.hives, statuses.values(), self.clock.as_ref()).await {
                Ok(report) if report.added > 0 => tracing::info!(?report, "roster pass added agents"),
                Ok(report) => tracing::debug!(?report, "roster pass: nothing to add"),
                Err(err) => tracing::warn!(%err, "roster pass failed; retrying at the next tick"),
            },
            Err(err) => tracing::warn!(%err, "reading hive statuses failed; retrying at the next tick"),
        }
        // After the roster sync, so an agent a status just added gets its consumer in this pass.
        if let Some(consumers) = &self.consumers {
            let report = consumers.pass().await;
            if report == PassReport::default() {
                tracing::debug!("tenant consumers: all as configured");
            } else {
                tracing::info!(?report, "tenant consumers made or replaced");
            }
        }
        let Some(revoker) = &self.revoker else { return };
        let wanted = match self.wanted.list().await {
            Ok(wanted) => wanted,
            Err(err) => {
                tracing::warn!(%err, "reading wanted states failed; revocations retried at the next tick");
                return;
            }
        };
        let destroyed = wanted.iter().filter(|(_, s)| s.wanted.state == WantedState::Destroyed);
        for ((hive, agent), _) in destroyed {
            if revoker.is_done(agent).await {
                continue;
            }
            // A credential is revoked for good: only when the controller's own roster has the
            // agent on the hive whose key says destroyed (a key under another hive, written by
            // mistake or by a leaked credential, must not cut off an agent that lives elsewhere).
            // One read per agent still to revoke, not a scan of the roster at every pass.
            let on_roster = match self.roster.get(agent).await {
                Ok(entry) => entry.map(|e| e.hive),
                Err(err) => {
                    tracing::warn!(%hive, %agent, %err, "reading the roster failed; revocation retried at the next tick");
                    continue;
                }
            };
            if on_roster.as_ref() != Some(hive) {
                tracing::warn!(
                    %hive, %agent, on_roster = ?on_roster.map(|h| h.to_string()),
                    "a destroyed wanted state for an agent the roster does not have on that hive; not revoked"
                );
                continue;
            }
            match revoker.revoke(agent).await {
                Ok(()) => tracing::info!(%hive, %agent, "revocation of a destroyed agent done by the reconcile pass"),
                Err(err) => tracing::warn!(%hive, %agent, %err, "revocation failed; retrying at the next tick"),
            }
        }
    }
}
