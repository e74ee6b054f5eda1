//! The steps that issue an agent's keys: its store certificate (from the swarm's store CA) and
//! its NATS user credential (with the durable consumers it and its hive bind to). Neither is an account someone else could hold, so "looking before
//! creating" means: a stored one that is not due for renewal is kept; otherwise a new one is
//! issued (an unused older one simply expires).

use std::time::{Duration, SystemTime};

use hyperhive_hive_proto::roster::{Identities, RosterEntry};
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_provision::Secret;
use hyperhive_provision::store_ca::renew_due;
use hyperhive_schedule::instant::{format_instant, parse_instant};
use time::OffsetDateTime;

use super::error::StepError;
use super::settings::vars;
use super::vault::Kind;
use super::{IdentityChange, Outcome, Provisioner, not_configured};

/// Whether a credential of `lifetime` that expires at `expires_at` (RFC 3339, from the roster)
/// is due for renewal at `now`: two thirds of its lifetime have passed, or the record is missing
/// or unreadable.
pub fn due(expires_at: Option<&str>, lifetime: Duration, now: OffsetDateTime) -> bool {
    let Some(expires_at) = expires_at.and_then(|t| parse_instant(t).ok()) else { return true };
    let not_after = SystemTime::from(expires_at);
    let not_before = not_after.checked_sub(lifetime).unwrap_or(SystemTime::UNIX_EPOCH);
    renew_due(not_before, not_after, SystemTime::from(now))
}

impl Provisioner {
    pub(super) async fn store_identity(&self, agent: &AgentName, entry: &RosterEntry) -> Result<Outcome, StepError> {
        if self.settings.store_ca.is_none() {
            return Ok(not_configured(vars::STORE_CA_KEY_FILE));
        }
        let have = self.vault.get(agent, Kind::StoreCert).await?.is_some();
        let lifetime = self.settings.store_cert_lifetime;
        if have && !due(entry.identities.store_cert_expires_at.as_deref(), lifetime, self.clock.now()) {
            return Ok(Outcome::Done(IdentityChange::none()));
        }
        Ok(Outcome::Done(IdentityChange(self.issue_store_cert(agent).await?)))
    }

    /// Issues a new store certificate, stores it with its key, and returns the identities to
    /// record.
    pub(super) async fn issue_store_cert(&self, agent: &AgentName) -> Result<Identities, StepError> {
        let ca =
            self.settings.store_ca.as_ref().ok_or_else(|| StepError::permanent("the store CA is not configured"))?;
        let issued = ca.issue(agent, self.settings.store_cert_lifetime, SystemTime::from(self.clock.now()))?;
        // The key first: a certificate in the store always has its key.
        self.vault.put(agent, Kind::StoreKey, &issued.key_pem).await?;
        self.vault.put(agent, Kind::StoreCert, &Secret::new(issued.cert_pem)).await?;
        tracing::info!(%agent, serial = %issued.serial, "store certificate issued");
        Ok(Identities {
            store_cert_serial: Some(issued.serial),
            store_cert_expires_at: Some(format_instant(OffsetDateTime::from(issued.not_after))),
            ..Identities::default()
        })
    }

    pub(super) async fn queue_credential(&self, agent: &AgentName, entry: &RosterEntry) -> Result<Outcome, StepError> {
        let have = self.vault.get(agent, Kind::QueueCreds).await?.is_some();
        let lifetime = self.settings.queue_creds_lifetime;
        if have && !due(entry.identities.queue_creds_expires_at.as_deref(), lifetime, self.clock.now()) {
            return Ok(Outcome::Done(IdentityChange::none()));
        }
        Ok(Outcome::Done(IdentityChange(self.mint_queue_creds(agent, &entry.hive).await?)))
    }

    /// Mints a new NATS credential (creating the agent's account on the server the first time),
    /// stores it, and returns the identities to record.
    pub(super) async fn mint_queue_creds(&self, agent: &AgentName, hive: &HiveName) -> Result<Identities, StepError> {
        let credential = self.accounts.create_agent(hive, agent, self.settings.queue_creds_lifetime).await?;
        // The credential may bind to its consumer, never make it: the controller does, here, with
        // its hive's (a hive that had no account until now has none yet).
        let not_made =
            |e: hyperhive_nats_objects::SetupError| StepError::retryable(format!("the agent's NATS consumers: {e}"));
        crate::nats::consumers::ensure_agent(&self.js, agent).await.map_err(not_made)?;
        crate::nats::consumers::ensure_hive(&self.js, hive).await.map_err(not_made)?;
        self.vault.put(agent, Kind::QueueCreds, &Secret::new(credential.creds.expose())).await?;
        let out_of_range = || {
            StepError::permanent(format!(
                "the credential's expiry is out of range; check {}",
                vars::QUEUE_CREDS_LIFETIME
            ))
        };
        let expires = i64::try_from(credential.expires_at).map_err(|_| out_of_range())?;
        let expires = OffsetDateTime::from_unix_timestamp(expires).map_err(|_| out_of_range())?;
        tracing::info!(%agent, expires_at = %format_instant(expires), "queue credential minted");
        Ok(Identities { queue_creds_expires_at: Some(format_instant(expires)), ..Identities::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn due_after_two_thirds_of_the_lifetime_or_without_a_record() {
        let day = Duration::from_secs(86_400);
        let expires = "2026-01-02T00:00:00Z";
        assert!(!due(Some(expires), day, datetime!(2026-01-01 15:59:59 UTC)));
        assert!(due(Some(expires), day, datetime!(2026-01-01 16:00:00 UTC)));
        assert!(due(Some(expires), day, datetime!(2026-01-03 00:00:00 UTC)));
        assert!(due(None, day, datetime!(2026-01-01 00:00:00 UTC)));
        assert!(due(Some("garbage"), day, datetime!(2026-01-01 00:00:00 UTC)));
    }
}
