//! The daemon: connect to NATS, create what is missing, bind the socket, reconcile once, then
//! serve the API, watch hive statuses into the roster and reconcile periodically until shutdown.
//! It holds the job graph (`hive-jobq`, in memory only) that `/api/jobq` serves.
//! The periodic pass also syncs the roster from every status (repairing a missed watch event)
//! and retries the revocation of every `destroyed` agent not yet revoked. With a forge it runs
//! the forge pass too (objects, config pull requests, issues; see [`crate::forge`]).

use std::future::Future;
use std::sync::Arc;

use hive_jobq::Jobq;
use hyperhive_nats_objects::{Buckets, SetupError};
use hyperhive_provision::forge::ForgejoClient;

use crate::nats::tenants::Accounts;

use crate::api::{self, App, AppParts};
use crate::clock::{Clock, JobqClock};
use crate::config::Config;
use crate::feeds::FeedHub;
use crate::forge::config_prs::ConfigPrs;
use crate::forge::issues::IssueReport;
use crate::forge::webhook::SeenDeliveries;
use crate::forge::{self, ForgeHub};
use crate::lifecycle::hive_pass::HivePass;
use crate::lifecycle::revoke::Revoker;
use crate::lifecycle::roster::{Roster, watch_statuses};
use crate::lifecycle::wanted::WantedStore;
use crate::linked::service::LinkedAccounts;
use crate::nats::{self, NatsError};
use crate::provision::health::HealthBoard;
use crate::provision::vault::Vault;
use crate::provision::{Adapters, Provisioner};
use crate::remote::link::Link;
use crate::schedules::reconcile::Reconciler;
use crate::schedules::store::{Definitions, StoreError};
use crate::secrets::SecretStore;
use crate::socket::{self, SocketError};
use crate::ui::icons::IconStore;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// NATS unreachable, credential refused, or objects misconfigured.
    #[error(transparent)]
    Nats(#[from] NatsError),
    /// The socket could not be set up.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The first reconcile pass could not read the buckets.
    #[error("first reconcile pass: {0}")]
    FirstPass(#[from] StoreError),
    /// A provisioning or forge client could not be built from its settings.
    #[error("provisioning: {0}")]
    Provisioning(String),
}

/// Runs the daemon until `shutdown` resolves, then drains requests and removes the socket. The
/// job graph starts empty, with `SWARM_JOBQ_*`'s settings, and stops with the daemon.
///
/// # Errors
/// [`StartError`] when it cannot start; once serving it only logs.
pub async fn run(
    config: Config,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let jobq = Jobq::builder(config.provisioning.jobq.clone())
        .clock(Arc::new(JobqClock(clock.clone())))
        .start()
        .expect("the job queue settings are checked when they are read");
    let outcome = run_with_jobq(config, clock, jobq.clone(), shutdown).await;
    jobq.shutdown().await;
    outcome
}

/// [`run`] serving a job graph the caller made and keeps (tests add jobs to it; the daemon
/// neither adds to it nor stops it).
///
/// # Errors
/// [`StartError`] when it cannot start; once serving it only logs.
pub async fn run_with_jobq(
    config: Config,
    clock: Arc<dyn Clock>,
    jobq: Jobq,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let client = nats::connect(&config.nats_url, config.nats_creds.as_deref()).await?;
    tracing::info!(url = %config.nats_url, "connected to NATS");
    if config.hives.is_empty() {
        tracing::info!("no hives: SWARM_HIVES_FILE is not set or declares none");
    } else {
        tracing::info!(hives = config.hives.len(), "hive directory read");
    }
    if config.nats_dir.is_none() {
        tracing::info!("SWARM_NATS_DIR is not set: agents cannot be destroyed (their credentials cannot be revoked)");
    }
    let js = async_nats::jetstream::new(client.clone());
    let buckets = ensure_objects_patiently(&js, config.nats_replicas).await?;
    let definitions = Definitions::new(js.clone(), buckets.definitions);
    let reconciler = Arc::new(Reconciler::new(js.clone(), definitions.clone(), buckets.agent_schedules));
    let listener = socket::bind(&config.socket)?;
    let first = reconciler.pass().await?;
    tracing::info!(?first, "first reconcile pass done");
    let hives = Arc::new(config.hives);
    let roster = Roster::new(js.clone(), buckets.agents);
    let wanted = WantedStore::new(js.clone(), buckets.agent_wanted);
    // One `Accounts` for every account change, so changes reach the server in order.
    let accounts = config.nats_dir.map(|dir| Arc::new(Accounts::new(dir, config.nats_url.clone())));
    let hub = Arc::new(ForgeHub {
        secret: config.webhook_secret,
        config_prs: ConfigPrs::new(buckets.config_prs),
        issues: IssueReport::default(),
        seen: SeenDeliveries::default(),
        roster: roster.clone(),
    });
    if hub.secret.is_none() {
        tracing::info!("SWARM_STATE_DIR is not set: no webhook secret (POST /api/forge/webhook answers 503)");
    }
    let forge_passes = match config.provisioning.forge.clone() {
        None => {
            tracing::info!(
                "the forge is not configured (SWARM_FORGE_URL): no forge objects, config pull requests or issue report"
            );
            None
        }
        Some(settings) => {
            let client = ForgejoClient::new(&settings.url, settings.admin_token.clone())
                .map_err(|e| StartError::Provisioning(e.to_string()))?;
            tracing::info!(org = %settings.org, every = ?settings.reconcile_every, "forge passes enabled");
            Some(tokio::spawn(forge::run_passes(hub.clone(), Arc::new(client), settings, clock.clone())))
        }
    };
    let provisioner = match (config.secrets_key, &accounts) {
        (Some(key), Some(accounts)) => {
            let adapters = Adapters::from_settings(&config.provisioning).map_err(StartError::Provisioning)?;
            tracing::info!(?adapters, "agent provisioning enabled");
            Some(Arc::new(Provisioner {
                settings: config.provisioning,
                adapters,
                vault: Vault::new(SecretStore::new(buckets.secrets, key)),
                accounts: accounts.clone(),
                roster: roster.clone(),
                wanted: wanted.clone(),
                js: js.clone(),
                hives: hives.clone(),
                jobq: jobq.clone(),
                clock: clock.clone(),
                health: HealthBoard::default(),
            }))
        }
        _ => {
            tracing::info!(
                "agent creation is off: it needs SWARM_SECRETS_KEY_FILE and SWARM_NATS_DIR (POST /api/agents answers 503)"
            );
            None
        }
    };

    let relay = Arc::new(FeedHub::new(js.clone()));
    let shutdown = {
        let relay = relay.clone();
        async move {
            shutdown.await;
            // Server-sent event routes never end by themselves; the server drains only once
            // they do.
            relay.close();
        }
    };
    let revoker = accounts.map(|accounts| Arc::new(Revoker::with_accounts(accounts)));
    let hive_pass = HivePass {
        js: js.clone(),
        hives: hives.clone(),
        roster: roster.clone(),
        wanted: wanted.clone(),
        revoker: revoker.clone(),
        clock: clock.clone(),
    };
    let watch = tokio::spawn(watch_statuses(buckets.hive_status, roster.clone(), hives.clone(), clock.clone()));
    let app = Arc::new(App::new(AppParts {
        client,
        definitions,
        reconciler: reconciler.clone(),
        clock: clock.clone(),
        js: js.clone(),
        hives,
        roster,
        wanted,
        revoker,
        jobq,
        linked: provisioner.clone().map(|p| Arc::new(LinkedAccounts::new(p))),
        feeds: relay.clone(),
        icons: IconStore::new(buckets.icons),
        quick_links: Arc::new(config.quick_links),
        provisioner: provisioner.clone(),
        forge: hub,
    }));
    let link = config.remote.map(|remote| {
        let link = Link::start(remote.identity, app.clone(), remote.rate);
        let _ = app.control_link.set(link.status.clone() as Arc<dyn crate::api::LinkReport>);
        link
    });
    if link.is_none() {
        tracing::info!("not paired with a control plane: the API is reachable through the socket only");
    }
    let periodic = tokio::spawn(reconcile_periodically(hive_pass, reconciler, config.reconcile_every));
    let health = provisioner.map(|p| tokio::spawn(provision_and_check(p)));
    tracing::info!(socket = %config.socket.display(), "serving the API");
    warp::serve(api::routes(app)).incoming(listener).graceful(shutdown).run().await;
    if let Some(link) = link {
        link.stop().await;
    }
    periodic.abort();
    watch.abort();
    if let Some(passes) = forge_passes {
        passes.abort();
    }
    if let Some(health) = health {
        health.abort();
    }
    socket::remove(&config.socket);
    tracing::info!("stopped");
    Ok(())
}

/// How long start-up keeps retrying JetStream set-up: a nats-server that was just started (by
/// the same boot, or a test) can refuse stream creation for a moment while JetStream comes up
/// in the account ("error creating store for stream", 10049).
const SETUP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

async fn ensure_objects_patiently(js: &async_nats::jetstream::Context, replicas: usize) -> Result<Buckets, NatsError> {
    let deadline = tokio::time::Instant::now() + SETUP_PATIENCE;
    let mut pause = std::time::Duration::from_millis(50);
    loop {
        match hyperhive_nats_objects::ensure_replicated_objects(js, replicas).await {
            Ok(buckets) => return Ok(buckets),
            // A misconfigured object stays misconfigured: report it at once.
            Err(err @ SetupError::Misconfigured(_)) => return Err(err.into()),
            Err(err) if tokio::time::Instant::now() + pause > deadline => return Err(err.into()),
            Err(err) => {
                tracing::warn!(%err, "JetStream set-up failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
}

/// Resumes the provisioning of every agent left unfinished, then runs the credential health
/// pass at once and every `SWARM_CREDENTIAL_CHECK_EVERY`. A resume that could not read the
/// roster is tried again before each pass until it succeeds.
async fn provision_and_check(provisioner: Arc<Provisioner>) {
    let mut resumed = false;
    let mut ticks = tokio::time::interval(provisioner.settings.check_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !resumed {
            match provisioner.resume().await {
                Ok(count) => {
                    resumed = true;
                    if count > 0 {
                        tracing::info!(resumed = count, "provisioning resumed");
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "cannot read the roster to resume provisioning; retrying at the next pass")
                }
            }
        }
        match provisioner.check_all().await {
            Ok(report) if report.queued > 0 => tracing::info!(?report, "credential pass queued renewals or repairs"),
            Ok(report) => tracing::debug!(?report, "credential pass: all healthy"),
            Err(err) => tracing::warn!(%err, "credential pass failed; retrying at the next tick"),
        }
    }
}

async fn reconcile_periodically(hive_pass: HivePass, reconciler: Arc<Reconciler>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the start already ran the schedules pass, but the hive pass
    // (roster from statuses written while the controller was down, revocations left undone)
    // runs at once.
    ticks.tick().await;
    hive_pass.run().await;
    loop {
        ticks.tick().await;
        hive_pass.run().await;
        match reconciler.pass().await {
            Ok(report) if report.written + report.removed + report.failed > 0 => {
                tracing::info!(?report, "reconcile pass repaired agent keys");
            }
            Ok(report) => tracing::debug!(?report, "reconcile pass: nothing to do"),
            Err(err) => tracing::warn!(%err, "reconcile pass failed; retrying at the next tick"),
        }
    }
}
