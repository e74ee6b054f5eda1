//! Handing a provisioned agent to its hive: the wanted state `paused` (so it starts without
//! taking todos until someone sets it `up`), then the sealed deploy message; later, sealed
//! `credentials` messages carrying renewed secrets.
//!
//! Revisions: the first deploy is always revision 1, so sending it again (a controller that died
//! after sending, before recording) repeats the same message, which JetStream's duplicate window
//! and the hive's per-revision check both absorb. Each credentials message raises the roster's
//! `revision` first and uses the new value, so no two messages about an agent share one.

use hyperhive_hive_proto::deploy::{DeployKind, Payload};
use hyperhive_hive_proto::wanted::{Wanted, WantedState};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_schedule::instant::format_instant;

use super::error::StepError;
use super::{IdentityChange, Outcome, Provisioner};
use crate::lifecycle::wanted::WriteError;

/// `set_by` of the wanted state provisioning declares.
pub const SET_BY: &str = "provisioning";
/// The revision of an agent's first deploy message.
const FIRST_REVISION: u64 = 1;

impl Provisioner {
    /// Declares `paused` unless a wanted state was declared already (by an earlier run, or by
    /// someone who set the agent's state meanwhile: theirs stands).
    pub(super) async fn declare_paused(&self, agent: &AgentName, hive: &HiveName) -> Result<Outcome, StepError> {
        let wanted =
            Wanted { state: WantedState::Paused, set_at: format_instant(self.clock.now()), set_by: SET_BY.into() };
        match self.wanted.put(hive, agent, &wanted, None).await {
            Ok(_) | Err(WriteError::Conflict) => Ok(Outcome::Done(IdentityChange::none())),
            Err(WriteError::Nats(err)) => Err(StepError::retryable(err)),
        }
    }

    pub(super) async fn deploy(&self, agent: &AgentName) -> Result<Outcome, StepError> {
        let entry = self
            .roster
            .update(agent, |e| e.revision = e.revision.max(FIRST_REVISION))
            .await
            .map_err(StepError::retryable)?;
        let spec = entry.spec.clone().ok_or_else(|| {
            StepError::permanent(format!(
                "agent {agent} has no spec on the roster; only agents created through POST /api/agents are deployed"
            ))
        })?;
        let payload = Payload {
            kind: DeployKind::Deploy,
            hive: entry.hive.clone(),
            agent: agent.clone(),
            revision: FIRST_REVISION,
            spec: Some(spec),
            secrets: self.vault.bundle(agent, self.store_ca_pem()).await?,
        };
        crate::lifecycle::deploy::send(&self.js, &self.hives, &self.deploy_key, &payload).await?;
        Ok(Outcome::Done(IdentityChange::none()))
    }

    /// Sends the agent's current secrets to its hive as a `credentials` message under a new
    /// revision.
    ///
    /// # Errors
    /// The roster, the secret store or the send failed; nothing is half applied on the hive
    /// (it applies a message whole or not at all).
    pub async fn send_credentials(&self, agent: &AgentName) -> Result<u64, StepError> {
        let entry = self
            .roster
            .update(agent, |e| e.revision = e.revision.max(FIRST_REVISION) + 1)
            .await
            .map_err(StepError::retryable)?;
        let payload = Payload {
            kind: DeployKind::Credentials,
            hive: entry.hive.clone(),
            agent: agent.clone(),
            revision: entry.revision,
            spec: None,
            secrets: self.vault.bundle(agent, self.store_ca_pem()).await?,
        };
        crate::lifecycle::deploy::send(&self.js, &self.hives, &self.deploy_key, &payload).await?;
        Ok(entry.revision)
    }

    fn store_ca_pem(&self) -> Option<&str> {
        self.settings.store_ca.as_ref().map(|ca| ca.cert_pem())
    }
}

impl Provisioner {
    /// Queues job `id` sending `agent`'s current secrets to its hive as a `credentials` message
    /// (`what` names the change in the log); the job graph retries it with backoff while the
    /// queue or the hive's key is unavailable.
    pub fn queue_credentials(
        self: &std::sync::Arc<Self>,
        id: hyperhive_jobq::JobId,
        agent: &AgentName,
        what: &'static str,
    ) {
        let (provisioner, name) = (self.clone(), agent.clone());
        let send = hyperhive_jobq::work(move || {
            let (provisioner, name) = (provisioner.clone(), name.clone());
            async move {
                let revision = provisioner.send_credentials(&name).await?;
                tracing::info!(agent = %name, revision, "{what} sent to the hive");
                Ok(())
            }
        });
        if let Err(err) = self.jobq.add(hyperhive_jobq::JobSpec::new(id, "credentials").agent(agent.as_str()), send) {
            tracing::error!(%agent, %err, "cannot queue the delivery of {what}");
        }
    }
}
