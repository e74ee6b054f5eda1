//! The swarm-wide forge objects and what the controller learns from the forge
//! (docs/swarm/forge.md).
//!
//! - [`webhook_secret`]: the webhook secret in the state directory.
//! - [`objects`]: the organisation, the agents' team, the labels, the webhook (reconciled).
//! - [`webhook`]: a delivery's headers and payload.
//! - [`deliveries`]: `forge-deliveries`, the deliveries taken.
//! - [`config_prs`]: `config-prs`, each agent's config pull request, and its listing.
//! - [`issues`]: the issue report, in memory, and its listing.
//!
//! [`ForgeHub`] is what the API and the periodic pass share; [`run_passes`] is that pass.

pub mod config_prs;
pub mod deliveries;
pub mod issues;
pub mod objects;
pub mod webhook;
pub mod webhook_secret;

use std::sync::Arc;

use hyperhive_provision::forge::SwarmForge;

use crate::clock::Clock;
use crate::lifecycle::roster::Roster;
use crate::provision::settings::ForgeSettings;
use config_prs::{ConfigPrs, Source};
use deliveries::Deliveries;
use issues::IssueReport;
use webhook::Event;
use webhook_secret::WebhookSecret;

/// What the forge routes and passes share.
#[derive(Debug)]
pub struct ForgeHub {
    /// `None` without `SWARM_STATE_DIR`: deliveries are refused with 503.
    pub secret: Option<WebhookSecret>,
    pub config_prs: ConfigPrs,
    pub issues: IssueReport,
    /// Deliveries applied, by their body: a replay is taken once.
    pub taken: Deliveries,
    /// Which repositories are agents' config repositories.
    pub roster: Roster,
}

/// What a delivery changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A state was written (a config pull request, or the issue report).
    Applied,
    /// Nothing to change: an older or equal state, a repository that is no agent's config
    /// repository, or an event the swarm does not act on.
    Ignored,
}

impl ForgeHub {
    /// Applies what a delivery says.
    ///
    /// # Errors
    /// NATS errors, as text (the delivery may be sent again).
    pub async fn apply(&self, event: Event) -> Result<Outcome, String> {
        match event {
            Event::Pull { owner, repo, pull } => {
                let Some(agent) = config_prs::agent_of(&self.roster, &owner, &repo).await? else {
                    return Ok(Outcome::Ignored);
                };
                let pr = config_prs::from_pull(&agent, &format!("{owner}/{repo}"), &pull);
                Ok(match self.config_prs.apply(&agent, &pr, Source::Webhook).await? {
                    config_prs::Applied::Written => Outcome::Applied,
                    config_prs::Applied::Kept => Outcome::Ignored,
                })
            }
            Event::Issue { owner, repo, action, issue } => {
                let changed = self.issues.apply(&format!("{owner}/{repo}"), &action, issue);
                Ok(if changed { Outcome::Applied } else { Outcome::Ignored })
            }
            Event::Ignored(_) => Ok(Outcome::Ignored),
        }
    }
}

/// The forge pass, at once and then every `settings.reconcile_every`: the swarm's objects,
/// then the listings of config pull requests and open issues (which heal lost or late
/// deliveries). Each part's failure is logged and retried at the next pass.
pub async fn run_passes(
    hub: Arc<ForgeHub>,
    forge: Arc<dyn SwarmForge>,
    settings: ForgeSettings,
    clock: Arc<dyn Clock>,
) {
    let hook = match (&settings.webhook_url, &hub.secret) {
        (Some(url), Some(secret)) => Some(objects::WantedHook { url: url.clone(), secret: secret.hook_secret() }),
        (Some(_), None) => {
            tracing::warn!("SWARM_FORGE_WEBHOOK_URL is set but SWARM_STATE_DIR is not: no webhook without a secret");
            None
        }
        (None, _) => {
            tracing::info!("SWARM_FORGE_WEBHOOK_URL is not set: no webhook; the periodic listing alone updates");
            None
        }
    };
    let mut ticks = tokio::time::interval(settings.reconcile_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let members: Vec<String> = match hub.roster.list().await {
            Ok(roster) => roster.values().filter_map(|e| e.identities.forge_user.clone()).collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the roster; the forge pass is retried at the next tick");
                continue;
            }
        };
        match objects::pass(forge.as_ref(), &settings.org, &members, hook.as_ref()).await {
            Ok(report) if report.created.is_empty() && report.changed.is_empty() => {
                tracing::debug!("forge objects: nothing to make")
            }
            Ok(report) => tracing::info!(created = ?report.created, changed = ?report.changed, "forge objects pass"),
            Err(error) => tracing::warn!(%error, "forge objects pass failed; retrying at the next tick"),
        }
        match config_prs::heal(forge.as_ref(), &hub.roster, &hub.config_prs).await {
            Ok(report) if report.written > 0 || report.failed > 0 => {
                tracing::info!(?report, "config pull requests listed")
            }
            Ok(report) => tracing::debug!(?report, "config pull requests listed: nothing new"),
            Err(error) => tracing::warn!(%error, "listing config pull requests failed; retrying at the next tick"),
        }
        let now = clock.now();
        match issues::rebuild(forge.as_ref(), &settings.org, &hub.issues, now).await {
            Ok(count) => tracing::debug!(open = count, "issue report rebuilt"),
            Err(error) => tracing::warn!(%error, "listing open issues failed; retrying at the next tick"),
        }
    }
}
