//! Credential health: at start and every `SWARM_CREDENTIAL_CHECK_EVERY` (five minutes by
//! default), every provisioned agent's forge token and matrix account are checked against their
//! servers, and its store certificate and queue credential are renewed once two thirds of their
//! lifetime have passed.
//!
//! Every change runs as jobs in the graph: a renewal or a repair per credential, then one
//! `credentials` job that sends the agent's current secrets to its hive, sealed. A failed job is
//! retried with backoff and shows in the graph; the next pass queues new jobs only once an
//! agent's previous ones have settled. A check that gets no verdict (the server is down) is
//! reported as `unreachable` and repairs nothing: a token is only replaced when its server says
//! it is bad.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::roster::{Origin, RosterEntry, StepProgress};
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_jobq::{JobId, JobSpec, work};
use hyperhive_provision::forge::TokenCheck;
use hyperhive_provision::matrix::AccountCheck;
use hyperhive_schedule::instant::format_instant;
use serde::Serialize;

use super::error::StepError;
use super::keys::due;
use super::steps::Step;
use super::vault::Kind;
use super::{IdentityChange, Provisioner};

/// One credential of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Credential {
    /// The forge API token.
    ForgeToken,
    /// The matrix account and its access token.
    Matrix,
    /// The store certificate.
    StoreCert,
    /// The NATS credential.
    QueueCreds,
}

impl Credential {
    const ALL: [Credential; 4] =
        [Credential::ForgeToken, Credential::Matrix, Credential::StoreCert, Credential::QueueCreds];

    /// As in metrics labels and job kinds.
    pub fn name(self) -> &'static str {
        match self {
            Credential::ForgeToken => "forge-token",
            Credential::Matrix => "matrix",
            Credential::StoreCert => "store-cert",
            Credential::QueueCreds => "queue-creds",
        }
    }

    /// The provisioning step that made it (a credential whose step was skipped is not used).
    fn step(self) -> Step {
        match self {
            Credential::ForgeToken => Step::ForgeToken,
            Credential::Matrix => Step::Matrix,
            Credential::StoreCert => Step::StoreIdentity,
            Credential::QueueCreds => Step::QueueCredential,
        }
    }
}

/// What the last pass found about one credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Its server accepts it, or it is not due for renewal.
    Ok,
    /// Due for renewal: a renewal is queued.
    Renewing,
    /// Refused by its server: a repair is queued.
    Repairing,
    /// Its server could not be asked; it is asked again next pass.
    Unreachable,
    /// The swarm does not provision this kind of credential.
    NotUsed,
}

impl Verdict {
    /// As in the JSON and the metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Renewing => "renewing",
            Verdict::Repairing => "repairing",
            Verdict::Unreachable => "unreachable",
            Verdict::NotUsed => "not-used",
        }
    }
}

/// One agent's credential health, as `/api/agents/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentHealth {
    /// When the last pass checked the agent.
    pub checked_at: String,
    /// Per credential.
    pub credentials: BTreeMap<Credential, Verdict>,
    /// The job that sends renewed secrets to the hive, while one is queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct HealthMetrics {
    checks: Mutex<BTreeMap<(Credential, Verdict), u64>>,
    /// Renewal or repair jobs that succeeded, per credential.
    fixed: Mutex<BTreeMap<Credential, u64>>,
    /// Renewal, repair or delivery attempts that failed.
    pub failures: AtomicU64,
    /// Credentials messages sent.
    pub deliveries: AtomicU64,
    /// Passes run.
    pub passes: AtomicU64,
}

impl HealthMetrics {
    fn count_check(&self, credential: Credential, verdict: Verdict) {
        *self.checks.lock().expect("metrics lock").entry((credential, verdict)).or_default() += 1;
    }

    fn count_fixed(&self, credential: Credential) {
        *self.fixed.lock().expect("metrics lock").entry(credential).or_default() += 1;
    }

    /// Prometheus text.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP swarm_credential_checks_total Credential checks by credential and verdict.");
        let _ = writeln!(out, "# TYPE swarm_credential_checks_total counter");
        for ((credential, verdict), n) in self.checks.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "swarm_credential_checks_total{{credential=\"{}\",verdict=\"{}\"}} {n}",
                credential.name(),
                verdict.name()
            );
        }
        let _ = writeln!(out, "# HELP swarm_credential_renewals_total Renewals and repairs that succeeded.");
        let _ = writeln!(out, "# TYPE swarm_credential_renewals_total counter");
        for (credential, n) in self.fixed.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "swarm_credential_renewals_total{{credential=\"{}\"}} {n}", credential.name());
        }
        for (name, help, value) in [
            ("swarm_credential_failures_total", "Renewal, repair and delivery attempts that failed.", &self.failures),
            ("swarm_credential_deliveries_total", "Credentials messages sent to hives.", &self.deliveries),
            ("swarm_credential_passes_total", "Credential health passes run.", &self.passes),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
    }
}

/// Each agent's health from the last pass, and the metrics.
#[derive(Debug, Default)]
pub struct HealthBoard {
    agents: Mutex<BTreeMap<AgentName, AgentHealth>>,
    /// Counters.
    pub metrics: HealthMetrics,
    /// Numbers the jobs of each pass, so their ids are unique.
    pass: AtomicU64,
}

impl HealthBoard {
    /// The agent's health, if a pass checked it.
    pub fn get(&self, agent: &AgentName) -> Option<AgentHealth> {
        self.agents.lock().expect("health lock").get(agent).cloned()
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    /// Agents checked.
    pub checked: usize,
    /// Agents left alone because their previous jobs have not settled.
    pub busy: usize,
    /// Renewal and repair jobs queued.
    pub queued: usize,
}

/// Agents whose credentials a pass checks at once: each check asks the forge and the Matrix
/// server, so as many at once as the job graph runs steps (its bound is 8). One at a time, at 4
/// to 7 ms an agent, a pass over 100,000 agents would outlast its 5-minute interval; eight at
/// once it took 2.3 ms an agent on two cores shared with both servers (docs/scale.md).
const CHECKS_IN_FLIGHT: usize = 8;

impl Provisioner {
    /// Checks every provisioned agent once, [`CHECKS_IN_FLIGHT`] at a time, and queues what it
    /// needs.
    ///
    /// # Errors
    /// The roster or the wanted states could not be read (nothing is checked then).
    pub async fn check_all(self: &Arc<Self>) -> Result<PassReport, StepError> {
        self.check_all_at(CHECKS_IN_FLIGHT).await
    }

    /// [`Provisioner::check_all`] with `in_flight` agents checked at once (1: one after another,
    /// the baseline the provisioning benchmark measures against).
    ///
    /// # Errors
    /// As [`Provisioner::check_all`].
    pub async fn check_all_at(self: &Arc<Self>, in_flight: usize) -> Result<PassReport, StepError> {
        let roster = self.roster.list().await.map_err(|e| StepError::retryable(e.to_string()))?;
        let wanted = self.wanted.list().await.map_err(|e| StepError::retryable(e.to_string()))?;
        let pass = self.health.pass.fetch_add(1, Ordering::Relaxed) + 1;
        self.health.metrics.passes.fetch_add(1, Ordering::Relaxed);
        let mut report = PassReport::default();
        let mut due = Vec::new();
        for (agent, entry) in roster {
            let deployed = entry.origin == Origin::Created
                && entry.provisioning.get(Step::Deploy.name()).is_some_and(StepProgress::is_finished);
            let destroyed = wanted
                .get(&(entry.hive.clone(), agent.clone()))
                .is_some_and(|w| w.wanted.state == WantedState::Destroyed);
            if !deployed || destroyed {
                continue;
            }
            if self.delivery_pending(&agent) {
                report.busy += 1;
                continue;
            }
            due.push((agent, entry));
        }
        let checks = due.into_iter().map(|(agent, entry)| async move {
            let verdicts = self.check_agent(&agent, &entry).await;
            (agent, verdicts)
        });
        let mut checks = futures::stream::iter(checks).buffer_unordered(in_flight.max(1));
        while let Some((agent, verdicts)) = checks.next().await {
            report.checked += 1;
            let needed: Vec<Credential> = verdicts
                .iter()
                .filter(|(_, v)| matches!(v, Verdict::Renewing | Verdict::Repairing))
                .map(|(c, _)| *c)
                .collect();
            let delivery = if needed.is_empty() { None } else { Some(self.queue_fixes(&agent, &needed, pass)) };
            report.queued += needed.len();
            let health = AgentHealth {
                checked_at: format_instant(self.clock.now()),
                credentials: verdicts,
                delivery: delivery.map(|id| id.as_str().to_owned()),
            };
            self.health.agents.lock().expect("health lock").insert(agent, health);
        }
        Ok(report)
    }

    fn delivery_pending(&self, agent: &AgentName) -> bool {
        let pending = self.health.agents.lock().expect("health lock").get(agent).and_then(|h| h.delivery.clone());
        pending
            .and_then(|id| JobId::parse(&id).ok())
            .and_then(|id| self.jobq.state(&id))
            .is_some_and(|state| !state.is_settled())
    }

    async fn check_agent(&self, agent: &AgentName, entry: &RosterEntry) -> BTreeMap<Credential, Verdict> {
        let mut verdicts = BTreeMap::new();
        for credential in Credential::ALL {
            let used = matches!(entry.provisioning.get(credential.step().name()), Some(StepProgress::Done { .. }));
            let verdict = if used { self.check_one(agent, entry, credential).await } else { Verdict::NotUsed };
            if verdict != Verdict::NotUsed {
                self.health.metrics.count_check(credential, verdict);
            }
            if verdict == Verdict::Unreachable || verdict == Verdict::Repairing {
                tracing::warn!(%agent, credential = credential.name(), ?verdict, "credential check");
            }
            verdicts.insert(credential, verdict);
        }
        verdicts
    }

    async fn check_one(&self, agent: &AgentName, entry: &RosterEntry, credential: Credential) -> Verdict {
        let now = self.clock.now();
        match credential {
            Credential::StoreCert => {
                let due =
                    due(entry.identities.store_cert_expires_at.as_deref(), self.settings.store_cert_lifetime, now);
                if due { Verdict::Renewing } else { Verdict::Ok }
            }
            Credential::QueueCreds => {
                let due =
                    due(entry.identities.queue_creds_expires_at.as_deref(), self.settings.queue_creds_lifetime, now);
                if due { Verdict::Renewing } else { Verdict::Ok }
            }
            Credential::ForgeToken => {
                let Some(forge) = &self.adapters.forge else { return Verdict::NotUsed };
                let token = match self.vault.get(agent, Kind::ForgeToken).await {
                    Ok(Some(token)) => token,
                    Ok(None) => return Verdict::Repairing,
                    Err(_) => return Verdict::Unreachable,
                };
                match forge.check_token(&token).await {
                    Ok(TokenCheck::Valid { login }) if login == agent.as_str() => Verdict::Ok,
                    Ok(_) => Verdict::Repairing,
                    Err(_) => Verdict::Unreachable,
                }
            }
            Credential::Matrix => {
                let Some(matrix) = &self.adapters.matrix else { return Verdict::NotUsed };
                let token = match self.vault.get(agent, Kind::MatrixToken).await {
                    Ok(Some(token)) => token,
                    Ok(None) => return Verdict::Repairing,
                    Err(_) => return Verdict::Unreachable,
                };
                match matrix.whoami(&token).await {
                    Ok(AccountCheck::Valid { .. }) => Verdict::Ok,
                    Ok(_) => Verdict::Repairing,
                    Err(_) => Verdict::Unreachable,
                }
            }
        }
    }

    /// Queues one job per credential in `needed`, then the delivery job after them; returns the
    /// delivery job's id.
    fn queue_fixes(self: &Arc<Self>, agent: &AgentName, needed: &[Credential], pass: u64) -> JobId {
        let delivery_id = job_id(agent, "credentials", pass);
        let mut delivery = JobSpec::new(delivery_id.clone(), "credentials").agent(agent.as_str());
        for credential in needed {
            let kind = match credential {
                Credential::StoreCert | Credential::QueueCreds => format!("renew-{}", credential.name()),
                Credential::ForgeToken | Credential::Matrix => format!("repair-{}", credential.name()),
            };
            let id = job_id(agent, &kind, pass);
            let (me, name, credential) = (self.clone(), agent.clone(), *credential);
            let fix = work(move || {
                let (me, name) = (me.clone(), name.clone());
                async move { Ok(me.fix(&name, credential).await?) }
            });
            match self.jobq.add(JobSpec::new(id.clone(), kind).agent(agent.as_str()), fix) {
                Ok(()) => delivery = delivery.after(id),
                Err(err) => tracing::error!(%agent, %err, "cannot queue a credential job"),
            }
        }
        let (me, name) = (self.clone(), agent.clone());
        let send = work(move || {
            let (me, name) = (me.clone(), name.clone());
            async move {
                let revision = me.send_credentials(&name).await.inspect_err(|_| {
                    me.health.metrics.failures.fetch_add(1, Ordering::Relaxed);
                })?;
                me.health.metrics.deliveries.fetch_add(1, Ordering::Relaxed);
                tracing::info!(agent = %name, revision, "renewed credentials sent to the hive");
                Ok(())
            }
        });
        if let Err(err) = self.jobq.add(delivery, send) {
            tracing::error!(%agent, %err, "cannot queue the credentials delivery");
        }
        delivery_id
    }

    /// Renews or repairs one credential and records what changed in the roster.
    async fn fix(&self, agent: &AgentName, credential: Credential) -> Result<(), StepError> {
        let outcome = self.fix_inner(agent, credential).await;
        match &outcome {
            Ok(()) => self.health.metrics.count_fixed(credential),
            Err(error) => {
                self.health.metrics.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%agent, credential = credential.name(), %error, "credential renewal or repair failed");
            }
        }
        outcome
    }

    async fn fix_inner(&self, agent: &AgentName, credential: Credential) -> Result<(), StepError> {
        let identities = match credential {
            Credential::StoreCert => self.issue_store_cert(agent).await?,
            Credential::QueueCreds => {
                let entry = self.roster_entry(agent).await?;
                self.mint_queue_creds(agent, &entry.hive).await?
            }
            Credential::ForgeToken => {
                self.mint_forge_token(agent).await?;
                return Ok(());
            }
            Credential::Matrix => {
                self.repair_matrix(agent).await?;
                return Ok(());
            }
        };
        let change = IdentityChange(identities);
        self.roster.update(agent, |e| change.apply(&mut e.identities)).await.map(drop).map_err(StepError::retryable)
    }
}

fn job_id(agent: &AgentName, kind: &str, pass: u64) -> JobId {
    JobId::parse(&format!("{agent}.{kind}.{pass}")).expect("an agent name, a kind and a number make a job id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_are_the_json_names() {
        for verdict in [Verdict::Ok, Verdict::Renewing, Verdict::Repairing, Verdict::Unreachable, Verdict::NotUsed] {
            assert_eq!(serde_json::to_value(verdict).unwrap(), verdict.name());
        }
    }
}
