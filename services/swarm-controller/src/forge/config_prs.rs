//! `config-prs`: per agent, the pull request of its config repository most recently changed,
//! written from webhook deliveries and from the periodic listing.
//!
//! Ordering: a state is written only when its `updated_at` is later than the stored one's, so
//! a delivery that arrives late (or is sent again) never overwrites a newer state. The forge's
//! timestamps have whole seconds: of two states of one second, the listing's replaces the
//! webhook's (it read the forge itself) but a webhook's never replaces a stored one. Each write
//! is a compare-and-set on the key's revision, so two writers racing cannot lose the newer
//! state either.

use async_nats::jetstream::kv;
use hyperhive_hive_proto::AgentName;
use hyperhive_nats_objects::CONFIG_PRS_BUCKET;
use hyperhive_provision::forge::{PullFilter, PullRequest, SwarmForge};
pub use hyperhive_swarm_api::forge::ConfigPr;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::lifecycle::roster::Roster;
use crate::provision::identities::config_repo_agent;

/// Compare-and-set attempts before a write gives up (another writer kept winning).
const CAS_ATTEMPTS: usize = 5;

/// The stored form of `pull` of `agent`'s repository `repo`.
pub fn from_pull(agent: &AgentName, repo: &str, pull: &PullRequest) -> ConfigPr {
    let state = if pull.merged { "merged" } else { pull.state.as_str() };
    ConfigPr {
        agent: agent.to_string(),
        repo: repo.to_owned(),
        number: pull.number,
        title: pull.title.clone(),
        url: pull.html_url.clone(),
        state: state.to_owned(),
        head: pull.head_sha.clone(),
        head_ref: pull.head_ref.clone(),
        mergeable: pull.mergeable,
        updated: pull.updated_at.clone(),
    }
}

/// Where a state comes from (it decides ties, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Webhook,
    Listing,
}

/// What [`ConfigPrs::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Written,
    /// The stored state is the same, or newer.
    Kept,
}

fn instant(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// Whether `new` from `source` replaces `old`.
fn replaces(old: &ConfigPr, new: &ConfigPr, source: Source) -> bool {
    if old == new {
        return false;
    }
    match (instant(&old.updated), instant(&new.updated)) {
        (Some(old_at), Some(new_at)) => new_at > old_at || (new_at == old_at && source == Source::Listing),
        // A stored state without a readable time is replaced by one with.
        (None, Some(_)) => true,
        (_, None) => false,
    }
}

/// The `config-prs` bucket.
#[derive(Debug, Clone)]
pub struct ConfigPrs {
    kv: kv::Store,
}

impl ConfigPrs {
    pub fn new(kv: kv::Store) -> Self {
        Self { kv }
    }

    /// The state of `agent`, if any.
    ///
    /// # Errors
    /// NATS errors or an unreadable value, as text.
    pub async fn get(&self, agent: &AgentName) -> Result<Option<ConfigPr>, String> {
        Ok(self.entry(agent).await?.map(|(pr, _)| pr))
    }

    async fn entry(&self, agent: &AgentName) -> Result<Option<(ConfigPr, u64)>, String> {
        let entry = self.kv.entry(agent.as_str()).await.map_err(|e| format!("reading {CONFIG_PRS_BUCKET}: {e}"))?;
        match entry {
            Some(entry) if entry.operation == kv::Operation::Put => {
                let pr = serde_json::from_slice(&entry.value)
                    .map_err(|e| format!("{CONFIG_PRS_BUCKET} value of {agent} is unreadable: {e}"))?;
                Ok(Some((pr, entry.revision)))
            }
            _ => Ok(None),
        }
    }

    /// Every agent's state, sorted by agent.
    ///
    /// # Errors
    /// NATS errors, as text; an unreadable value is logged and left out.
    pub async fn list(&self, js: &async_nats::jetstream::Context) -> Result<Vec<ConfigPr>, String> {
        let entries = crate::nats::scan_bucket(js, CONFIG_PRS_BUCKET).await.map_err(|e| e.to_string())?;
        let mut all: Vec<ConfigPr> = entries
            .into_iter()
            .filter_map(|kv| match serde_json::from_slice(&kv.value) {
                Ok(pr) => Some(pr),
                Err(error) => {
                    tracing::error!(key = %kv.key, %error, "skipping an unreadable config-prs value");
                    None
                }
            })
            .collect();
        all.sort_by(|a: &ConfigPr, b| a.agent.cmp(&b.agent));
        Ok(all)
    }

    /// Stores `pr` for its agent unless the stored state is as new or newer.
    ///
    /// # Errors
    /// NATS errors, or another writer winning every attempt, as text.
    pub async fn apply(&self, agent: &AgentName, pr: &ConfigPr, source: Source) -> Result<Applied, String> {
        let value: bytes::Bytes = serde_json::to_vec(pr).map_err(|e| e.to_string())?.into();
        for _ in 0..CAS_ATTEMPTS {
            let written = match self.entry(agent).await? {
                Some((old, _)) if !replaces(&old, pr, source) => return Ok(Applied::Kept),
                Some((_, revision)) => self.kv.update(agent.as_str(), value.clone(), revision).await.is_ok(),
                None => self.kv.create(agent.as_str(), value.clone()).await.is_ok(),
            };
            if written {
                return Ok(Applied::Written);
            }
        }
        Err(format!(
            "{CONFIG_PRS_BUCKET} {agent}: another writer won {CAS_ATTEMPTS} times in a row; retried at the next pass"
        ))
    }
}

/// The agent whose config repository `owner/repo` is, if the roster says so.
///
/// # Errors
/// The roster could not be read.
pub async fn agent_of(roster: &Roster, owner: &str, repo: &str) -> Result<Option<AgentName>, String> {
    let Some(agent) = config_repo_agent(repo) else { return Ok(None) };
    let full_name = format!("{owner}/{repo}");
    let entry = roster.get(&agent).await?;
    let recorded = entry.and_then(|e| e.identities.config_repo);
    Ok(recorded.is_some_and(|r| r.eq_ignore_ascii_case(&full_name)).then_some(agent))
}

/// What one listing pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ListingReport {
    pub agents: usize,
    pub written: usize,
    pub failed: usize,
}

/// Lists the pull requests of every agent's config repository and applies the most recently
/// changed one of each: what a lost or late delivery left out is healed here.
///
/// # Errors
/// The roster could not be read; a failure for one agent is counted and logged.
pub async fn heal(forge: &dyn SwarmForge, roster: &Roster, store: &ConfigPrs) -> Result<ListingReport, String> {
    let mut report = ListingReport::default();
    for (agent, entry) in roster.list().await.map_err(|e| e.to_string())? {
        let Some(full_name) = entry.identities.config_repo else { continue };
        let Some((owner, repo)) = full_name.split_once('/') else { continue };
        report.agents += 1;
        let outcome = async {
            let pulls = forge.pulls(owner, repo, PullFilter::All).await.map_err(|e| e.to_string())?;
            let newest = pulls.iter().max_by_key(|p| instant(&p.updated_at));
            match newest {
                Some(pull) => store.apply(&agent, &from_pull(&agent, &full_name, pull), Source::Listing).await,
                None => Ok(Applied::Kept),
            }
        };
        match outcome.await {
            Ok(Applied::Written) => report.written += 1,
            Ok(Applied::Kept) => {}
            Err(error) => {
                report.failed += 1;
                tracing::warn!(%agent, %error, "listing the config repository's pull requests failed");
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pr(updated: &str, title: &str) -> ConfigPr {
        ConfigPr {
            agent: "a".into(),
            repo: "swarm/a-config".into(),
            number: 1,
            title: title.into(),
            url: String::new(),
            state: "open".into(),
            head: String::new(),
            head_ref: String::new(),
            mergeable: None,
            updated: updated.into(),
        }
    }

    #[test]
    fn only_a_newer_state_replaces_and_the_listing_wins_a_tie() {
        let old = pr("2026-11-30T10:00:00Z", "old");
        let newer = pr("2026-11-30T10:00:01Z", "new");
        let same_second = pr("2026-11-30T10:00:00Z", "other");
        assert!(replaces(&old, &newer, Source::Webhook));
        assert!(!replaces(&newer, &old, Source::Webhook) && !replaces(&newer, &old, Source::Listing));
        assert!(!replaces(&old, &same_second, Source::Webhook));
        assert!(replaces(&old, &same_second, Source::Listing));
        assert!(!replaces(&old, &old.clone(), Source::Listing), "nothing to write");
        assert!(!replaces(&old, &pr("2026-11-30T11:00:00+02:00", "x"), Source::Webhook), "offsets are honoured");
        assert!(!replaces(&old, &pr("yesterday", "x"), Source::Listing));
    }
}
