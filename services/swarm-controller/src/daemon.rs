//! The daemon: connect to NATS, create what is missing, bind the socket, reconcile once, then
//! serve the API, watch hive statuses into the roster and reconcile periodically until shutdown.
//! It holds the job graph (`hyperhive-jobq`, in memory only) that `/api/jobq` serves.
//! The periodic pass also syncs the roster from every status (repairing a missed watch event),
//! makes every known tenant's durable consumers (also once at start, before serving) and retries the revocation of every `destroyed` agent not yet revoked. With a forge it runs
//! the forge pass too (objects, config pull requests, issues; see [`crate::forge`]).
//!
//! Every background task runs on one [`Tasks`]; whatever way `run` returns (a stop, or a start
//! step failing after others began), the tasks are stopped and the socket file is removed.
//!
//! [`Config`] is the daemon's whole configuration: the controller's own [`Settings`] and the
//! settings that load other modules' files (the secret store's key, the webhook secret, the UI's
//! quick links, provisioning, the host identity), all read and checked together.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyperhive_daemon::tasks::{STOP_WITHIN, Tasks};
use hyperhive_hive_proto::signing::DeploySigner;
use hyperhive_jobq::Jobq;
use hyperhive_nats_objects::{Buckets, SetupError};
use hyperhive_provision::forge::ForgejoClient;

use crate::nats::tenants::Accounts;

use crate::api::{self, App, AppParts, LinkReport};
use crate::clock::{Clock, JobqClock};
use crate::config::{Check, ConfigError, Loaded, Problems, Settings, vars};
use crate::feeds::FeedHub;
use crate::forge::config_prs::ConfigPrs;
use crate::forge::deliveries::Deliveries;
use crate::forge::issues::IssueReport;
use crate::forge::webhook_secret::WebhookSecret;
use crate::forge::{self, ForgeHub};
use crate::lifecycle::hive_pass::HivePass;
use crate::lifecycle::revoke::Revoker;
use crate::lifecycle::roster::{Roster, watch_statuses};
use crate::lifecycle::tenant_consumers::TenantConsumers;
use crate::lifecycle::wanted::WantedStore;
use crate::nats::{self, NatsError};
use crate::provision::env_secrets::EnvSecrets;
use crate::provision::health::HealthBoard;
use crate::provision::linked_accounts::LinkedAccounts;
use crate::provision::vault::Vault;
use crate::provision::{Adapters, ProvisionSettings, Provisioner};
use crate::remote::link::Link;
use crate::schedules::reconcile::Reconciler;
use crate::schedules::store::{Definitions, StoreError};
use crate::secrets::{SecretStore, SecretsKey};
use crate::socket::{self, SocketError};
use crate::ui::icons::IconStore;
use crate::ui::quick_links::{self, QuickLink};
use crate::work::last_turns::LastTurns;

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The controller's own settings (socket, NATS, reconcile interval, hive directory).
    pub settings: Settings,
    /// The key the secret store seals under, read from `SWARM_SECRETS_KEY_FILE` at start.
    pub secrets_key: Option<SecretsKey>,
    /// The key deploy messages are signed with, read from `SWARM_DEPLOY_KEY_FILE` at start.
    pub deploy_key: Option<Arc<DeploySigner>>,
    /// The systems agents are provisioned in and the credentials' lifetimes.
    pub provisioning: ProvisionSettings,
    /// The UI's quick links, from `SWARM_QUICK_LINKS_FILE` (none when it is not set).
    pub quick_links: Vec<QuickLink>,
    /// The forge webhook's secret, read from (or made in) `SWARM_STATE_DIR` at start.
    pub webhook_secret: Option<WebhookSecret>,
    /// The control plane this controller is a host of, when it was paired.
    pub remote: Option<RemoteSettings>,
}

/// Reaching the swarm through the control plane.
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// The host identity `swarm-controller pair` wrote.
    pub identity: hyperhive_control_link::Identity,
    /// Requests a second each client may send.
    pub rate: u32,
}

type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`Problems`]: every missing or malformed variable, one line each.
    pub fn from_env() -> Result<Loaded<Self>, Problems> {
        Self::from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Reads settings through `lookup` (the environment in production, a map in tests).
    ///
    /// # Errors
    /// [`Problems`]: every missing or malformed variable, one line each.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Loaded<Self>, Problems> {
        let lookup: Lookup = &lookup;
        let mut check = Check::default();
        let settings = Settings::check(lookup, &mut check);
        let secrets_key = check.ok(lookup(vars::SECRETS_KEY_FILE).map(|path| read_secrets_key(&path)).transpose());
        let deploy_key = check.ok(lookup(vars::DEPLOY_KEY_FILE).map(|path| read_deploy_key(&path)).transpose());
        let provisioning = ProvisionSettings::check(lookup, &mut check);
        let quick_links = check.ok(lookup(vars::QUICK_LINKS_FILE).map_or(Ok(Vec::new()), |p| read_quick_links(&p)));
        let webhook_secret = check.ok(lookup(vars::STATE_DIR).map(|path| read_webhook_secret(&path)).transpose());
        let remote = check.ok(read_remote(lookup));
        check.finish(|| {
            Some(Self {
                settings: settings?,
                secrets_key: secrets_key?,
                deploy_key: deploy_key?,
                provisioning: provisioning?,
                quick_links: quick_links?,
                webhook_secret: webhook_secret?,
                remote: remote?,
            })
        })
    }
}

fn read_quick_links(path: &str) -> Result<Vec<QuickLink>, ConfigError> {
    let problem = |what: String| ConfigError::new(vars::QUICK_LINKS_FILE, what);
    let text = std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read {path:?}: {e}")))?;
    quick_links::parse(&text).map_err(|e| problem(format!("{path}: {e}")))
}

/// The identity from `SWARM_CONTROL_IDENTITY` (which must then be there), else from the state
/// directory when `pair` wrote one; none means the controller is not a host.
fn read_remote(lookup: Lookup) -> Result<Option<RemoteSettings>, ConfigError> {
    use crate::remote::{DEFAULT_RATE, pair, vars as remote};
    let explicit = lookup(remote::CONTROL_IDENTITY);
    let (variable, path) = match (&explicit, lookup(vars::STATE_DIR)) {
        (Some(path), _) if path.trim().is_empty() => {
            return Err(ConfigError::new(
                remote::CONTROL_IDENTITY,
                "is empty; set it to the file `swarm-controller pair` wrote, or unset it",
            ));
        }
        (Some(path), _) => (remote::CONTROL_IDENTITY, PathBuf::from(path)),
        (None, Some(dir)) if Path::new(&dir).join(pair::IDENTITY_FILE).exists() => {
            (vars::STATE_DIR, Path::new(&dir).join(pair::IDENTITY_FILE))
        }
        (None, _) => return Ok(None),
    };
    let identity = pair::load_host_identity(&path).map_err(|e| ConfigError::new(variable, e))?;
    let rate = match lookup(remote::REMOTE_RATE) {
        None => DEFAULT_RATE,
        Some(text) => text.trim().parse::<u32>().ok().filter(|r| (1..=10_000).contains(r)).ok_or_else(|| {
            ConfigError::new(
                remote::REMOTE_RATE,
                format!("{text:?} is not a whole number of requests a second from 1 to 10000, e.g. 20"),
            )
        })?,
    };
    Ok(Some(RemoteSettings { identity, rate }))
}

fn read_secrets_key(path: &str) -> Result<SecretsKey, ConfigError> {
    if path.trim().is_empty() {
        return Err(ConfigError::new(
            vars::SECRETS_KEY_FILE,
            "is empty; set it to the file `swarm-controller secrets-key --out FILE` wrote, or unset it",
        ));
    }
    SecretsKey::load(Path::new(path)).map_err(|e| ConfigError::new(vars::SECRETS_KEY_FILE, e.to_string()))
}

fn read_deploy_key(path: &str) -> Result<Arc<DeploySigner>, ConfigError> {
    if path.trim().is_empty() {
        return Err(ConfigError::new(
            vars::DEPLOY_KEY_FILE,
            "is empty; set it to the file `swarm-controller deploy-key --out FILE` wrote, or unset it",
        ));
    }
    crate::lifecycle::deploy_key::load(Path::new(path))
        .map(Arc::new)
        .map_err(|e| ConfigError::new(vars::DEPLOY_KEY_FILE, e))
}

fn read_webhook_secret(path: &str) -> Result<WebhookSecret, ConfigError> {
    let dir = Path::new(path);
    if !dir.is_absolute() {
        return Err(ConfigError::new(
            vars::STATE_DIR,
            format!(
                "{path:?} is not an absolute path; set it to the controller's state directory, e.g. /var/lib/swarm-controller"
            ),
        ));
    }
    WebhookSecret::load_or_create(dir).map_err(|e| ConfigError::new(vars::STATE_DIR, e))
}

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
    run_with_tasks(config, clock, jobq, &Tasks::new(), shutdown).await
}

/// [`run_with_jobq`] with every background task on `tasks`, which are stopped (cancelled, then
/// waited for within [`STOP_WITHIN`]) before it returns, also when a start step fails after
/// others began; the socket file is gone by then too.
///
/// # Errors
/// [`StartError`] when it cannot start; once serving it only logs.
pub async fn run_with_tasks(
    config: Config,
    clock: Arc<dyn Clock>,
    jobq: Jobq,
    tasks: &Tasks,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let outcome = serve(config, clock, jobq, tasks, shutdown).await;
    tasks.stop(STOP_WITHIN).await;
    outcome
}

async fn serve(
    config: Config,
    clock: Arc<dyn Clock>,
    jobq: Jobq,
    tasks: &Tasks,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    // The socket first: a second controller, or a directory holding anything else, stops the
    // start before it touches NATS. Its file goes with `socket_file` on every return.
    let (listener, socket_file) = socket::bind(&config.settings.socket)?;
    let client = nats::connect(&config.settings.nats_url, config.settings.nats_creds.as_deref()).await?;
    tracing::info!(url = %config.settings.nats_url, "connected to NATS");
    if config.settings.hives.is_empty() {
        tracing::info!("no hives: SWARM_HIVES_FILE is not set or declares none");
    } else {
        tracing::info!(hives = config.settings.hives.len(), "hive directory read");
    }
    if config.settings.nats_dir.is_none() {
        tracing::info!("SWARM_NATS_DIR is not set: agents cannot be destroyed (their credentials cannot be revoked)");
    }
    let js = async_nats::jetstream::new(client.clone());
    let buckets = ensure_objects_patiently(&js, config.settings.nats_replicas).await?;
    let definitions = Definitions::new(js.clone(), buckets.definitions);
    let reconciler = Arc::new(Reconciler::new(js.clone(), definitions.clone(), buckets.agent_schedules));
    let first = reconciler.pass().await?;
    tracing::info!(?first, "first reconcile pass done");
    let hives = Arc::new(config.settings.hives);
    let roster = Roster::new(js.clone(), buckets.agents).minted_in(config.settings.nats_dir.clone());
    let wanted = WantedStore::new(js.clone(), buckets.agent_wanted);
    // One `Accounts` for every account change, so changes reach the server in order.
    let accounts =
        config.settings.nats_dir.clone().map(|dir| Arc::new(Accounts::new(dir, config.settings.nats_url.clone())));
    if let Some(accounts) = &accounts {
        // A creation's rewrite of the fragment is lost when the controller stops before it ran.
        accounts.fragment().catch_up().await;
        // A failure here is not fatal: the accounts keep what they granted, and each agent's
        // next credential renewal rewrites its account anyway.
        match accounts.refresh_grants().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(accounts = n, "accounts brought up to this build's grants and given to the server"),
            Err(e) => tracing::warn!("could not bring the accounts up to this build's grants: {e}"),
        }
    }
    // Every known tenant's consumers, before the API serves: a tenant waiting for its consumer
    // gets it now, and one a tenant remade under an older build is replaced now. Each reconcile
    // pass makes them again.
    let consumers = TenantConsumers {
        js: js.clone(),
        hives: hives.clone(),
        roster: roster.clone(),
        nats_dir: config.settings.nats_dir.clone(),
    };
    let made = consumers.pass().await;
    tracing::info!(?made, "tenant consumers checked");
    let hub = Arc::new(ForgeHub {
        secret: config.webhook_secret,
        config_prs: ConfigPrs::new(buckets.config_prs),
        issues: IssueReport::default(),
        taken: Deliveries::new(buckets.forge_deliveries.clone()),
        roster: roster.clone(),
    });
    if hub.secret.is_none() {
        tracing::info!("SWARM_STATE_DIR is not set: no webhook secret (POST /api/forge/webhook answers 503)");
    }
    match config.provisioning.forge.clone() {
        None => {
            tracing::info!(
                "the forge is not configured (SWARM_FORGE_URL): no forge objects, config pull requests or issue report"
            );
        }
        Some(settings) => {
            let client = ForgejoClient::new(&settings.url, settings.admin_token.clone())
                .map_err(|e| StartError::Provisioning(e.to_string()))?;
            tracing::info!(org = %settings.org, every = ?settings.reconcile_every, "forge passes enabled");
            tasks.spawn(forge::run_passes(hub.clone(), Arc::new(client), settings, clock.clone()));
        }
    }
    let configured = api::Configured {
        secret_store: config.secrets_key.is_some(),
        deploy_key: config.deploy_key.is_some(),
        nats_dir: accounts.is_some(),
    };
    let provisioner = match (config.secrets_key, &accounts, config.deploy_key) {
        (Some(key), Some(accounts), Some(deploy_key)) => {
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
                deploy_key,
                jobq: jobq.clone(),
                clock: clock.clone(),
                health: HealthBoard::default(),
            }))
        }
        _ => {
            tracing::info!(
                "agent creation is off: it needs SWARM_SECRETS_KEY_FILE, SWARM_NATS_DIR and SWARM_DEPLOY_KEY_FILE \
                 (POST /api/agents answers 503)"
            );
            None
        }
    };

    let feeds = Arc::new(FeedHub::new(js.clone()));
    let shutdown = {
        let feeds = feeds.clone();
        async move {
            shutdown.await;
            // Server-sent event routes never end by themselves; the server drains only once
            // they do.
            feeds.close();
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
        consumers: Some(consumers),
    };
    tasks.spawn(roster.clone().keep_index());
    let last_turns = LastTurns::default();
    tasks.spawn(last_turns.clone().follow(js.clone()));
    tasks.spawn(watch_statuses(buckets.hive_status, roster.clone(), hives.clone(), clock.clone()));
    let app = Arc::new(App::new(AppParts {
        client,
        definitions,
        reconciler: reconciler.clone(),
        clock,
        js: js.clone(),
        hives,
        roster,
        wanted,
        last_turns,
        revoker,
        jobq,
        linked: provisioner.clone().map(|p| Arc::new(LinkedAccounts::new(p))),
        env_secrets: provisioner.clone().map(|p| Arc::new(EnvSecrets::new(p))),
        feeds,
        icons: IconStore::new(buckets.icons),
        quick_links: Arc::new(config.quick_links),
        provisioner: provisioner.clone(),
        forge: hub,
        configured,
    }));
    let link = config.remote.map(|remote| {
        let link = Link::start(remote.identity, app.clone(), remote.rate);
        let _ = app.control_link.set(link.status.clone() as Arc<dyn LinkReport>);
        link
    });
    if link.is_none() {
        tracing::info!("not paired with a control plane: the API is reachable through the socket only");
    }
    tasks.spawn(reconcile_periodically(hive_pass, reconciler, config.settings.reconcile_every));
    if let Some(provisioner) = provisioner {
        tasks.spawn(provision_and_check(provisioner));
    }
    tracing::info!(socket = %config.settings.socket.display(), "serving the API");
    if let Some(gateway) = &config.settings.gateway {
        tracing::info!(user = %gateway.user, "the gateway's user names its SSO users, whose roles SWARM_GATEWAY_ROLES gives");
    }
    let access =
        socket::Access { roles: config.settings.socket_roles.clone(), gateway: config.settings.gateway.clone() };
    socket::serve(listener, api::routes(app), access, shutdown).await;
    if let Some(link) = link {
        link.stop().await;
    }
    // Removed before the tasks stop, so a client sees "not running" rather than "refused".
    drop(socket_file);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn loaded(pairs: &[(&str, &str)]) -> Result<Loaded<Config>, Problems> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_lookup(|name| env.get(name).cloned())
    }

    fn config(pairs: &[(&str, &str)]) -> Result<Config, Problems> {
        loaded(pairs).map(|loaded| loaded.config)
    }

    #[test]
    fn the_secrets_key_is_read_at_start_and_an_exposed_one_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let key = SecretsKey::generate();
        key.write_new(&path).unwrap();
        let shown = path.to_str().unwrap();
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        assert_eq!(config(&[url, (vars::SECRETS_KEY_FILE, shown)]).unwrap().secrets_key, Some(key));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = config(&[url, (vars::SECRETS_KEY_FILE, shown)]).unwrap_err().to_string();
        assert!(err.starts_with(vars::SECRETS_KEY_FILE) && err.contains("chmod 600"), "{err}");
    }

    #[test]
    fn the_state_dir_gets_a_webhook_secret_at_first_start_and_keeps_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        let shown = dir.path().to_str().unwrap();
        assert!(config(&[url]).unwrap().webhook_secret.is_none());
        let first = config(&[url, (vars::STATE_DIR, shown)]).unwrap().webhook_secret.unwrap();
        assert_eq!(config(&[url, (vars::STATE_DIR, shown)]).unwrap().webhook_secret, Some(first));
        let file = dir.path().join(crate::forge::webhook_secret::FILE_NAME);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = config(&[url, (vars::STATE_DIR, shown)]).unwrap_err().to_string();
        assert!(err.starts_with(vars::STATE_DIR) && err.contains("mode 640"), "{err}");
        let err = config(&[url, (vars::STATE_DIR, "var/lib/x")]).unwrap_err().to_string();
        assert!(err.starts_with(vars::STATE_DIR) && err.contains("absolute"), "{err}");
    }

    #[test]
    fn missing_or_bad_values_name_the_variable() {
        use crate::remote::vars as remote;
        let identities = tempfile::tempdir().unwrap();
        let host_identity =
            test_identity(identities.path(), "host.json", hyperhive_control_proto::DeviceKind::Host, 0o600);
        let client_identity =
            test_identity(identities.path(), "client.json", hyperhive_control_proto::DeviceKind::Client, 0o600);
        let open_identity =
            test_identity(identities.path(), "open.json", hyperhive_control_proto::DeviceKind::Host, 0o644);
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            (vec![], vars::NATS_URL, "not set"),
            (vec![(vars::NATS_URL, "http://x")], vars::NATS_URL, "not a NATS URL"),
            (vec![(vars::NATS_URL, "nats://")], vars::NATS_URL, "not a NATS URL"),
            (vec![url, (vars::SOCKET, "rel/c.sock")], vars::SOCKET, "absolute"),
            (vec![url, (vars::SOCKET, "/")], vars::SOCKET, "names no file"),
            (vec![url, (vars::NATS_CREDS, " ")], vars::NATS_CREDS, "empty"),
            (vec![url, (vars::RECONCILE_SECS, "0")], vars::RECONCILE_SECS, ">= 1"),
            (vec![url, (vars::NATS_REPLICAS, "0")], vars::NATS_REPLICAS, "1 to 5"),
            (vec![url, (vars::NATS_REPLICAS, "7")], vars::NATS_REPLICAS, "1 to 5"),
            (vec![url, (vars::NATS_REPLICAS, "three")], vars::NATS_REPLICAS, "three-node cluster"),
            (vec![(vars::NATS_URL, "nats://a:1,localhost:2")], vars::NATS_URL, "\"localhost:2\" is not a NATS URL"),
            (vec![url, (vars::RECONCILE_SECS, "1m")], vars::RECONCILE_SECS, ">= 1"),
            (vec![url, (vars::RECONCILE_SECS, "-3")], vars::RECONCILE_SECS, ">= 1"),
            (vec![url, (vars::SECRETS_KEY_FILE, "")], vars::SECRETS_KEY_FILE, "empty"),
            (vec![url, (vars::SECRETS_KEY_FILE, "/nonexistent/key")], vars::SECRETS_KEY_FILE, "cannot read"),
            (vec![url, (remote::CONTROL_IDENTITY, " ")], remote::CONTROL_IDENTITY, "empty"),
            (
                vec![url, (remote::CONTROL_IDENTITY, "/nonexistent/id.json")],
                remote::CONTROL_IDENTITY,
                "/nonexistent/id.json",
            ),
            (vec![url, (remote::CONTROL_IDENTITY, &client_identity)], remote::CONTROL_IDENTITY, "client's identity"),
            (vec![url, (remote::CONTROL_IDENTITY, &open_identity)], remote::CONTROL_IDENTITY, "chmod 600"),
            (
                vec![url, (remote::CONTROL_IDENTITY, &host_identity), (remote::REMOTE_RATE, "0")],
                remote::REMOTE_RATE,
                "1 to 10000",
            ),
            (
                vec![url, (remote::CONTROL_IDENTITY, &host_identity), (remote::REMOTE_RATE, "fast")],
                remote::REMOTE_RATE,
                "1 to 10000",
            ),
        ];
        for (env, variable, needle) in cases {
            let err = config(&env).unwrap_err().to_string();
            assert!(err.starts_with(variable), "{env:?}: {err}");
            assert!(err.contains(needle), "{env:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    /// An identity as pairing writes it (the pure halves of pairing, with the answer a control
    /// plane would give), saved with `mode`; returns its path.
    fn test_identity(dir: &Path, name: &str, kind: hyperhive_control_proto::DeviceKind, mode: u32) -> String {
        use hyperhive_control_proto::code::Code;
        use std::os::unix::fs::PermissionsExt;
        let control = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let code = Code {
            control_url: "https://control.example".into(),
            control_public_key: control.verifying_key().to_bytes(),
            pin: None,
            kind,
            secret: [1; hyperhive_control_proto::code::SECRET_LEN],
        };
        let (request, pending) = hyperhive_control_link::start_pairing(
            &code.to_token(),
            hyperhive_control_link::DeviceName::Chosen("c"),
            &mut rand::rng(),
        )
        .unwrap();
        let statement = hyperhive_control_proto::pair::device_statement("d0", kind, &request.public_key);
        let response = hyperhive_control_proto::pair::PairResponse {
            device_id: "d0".into(),
            kind,
            name: "c".into(),
            signature: hyperhive_control_proto::encoding::encode(
                &ed25519_dalek::Signer::sign(&control, &statement).to_bytes(),
            ),
            control_name: None,
        };
        let identity = pending.finish(&response).unwrap();
        let path = dir.join(name);
        identity.save(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    }

    #[test]
    fn every_bad_setting_of_every_part_is_reported_together() {
        use crate::provision::settings::vars as provision;
        use crate::remote::vars as remote;
        let problems = config(&[
            (vars::SOCKET, "rel/c.sock"),
            (vars::RECONCILE_SECS, "often"),
            (vars::SECRETS_KEY_FILE, "/nonexistent/key"),
            (vars::QUICK_LINKS_FILE, "/nonexistent/links.json"),
            (vars::STATE_DIR, "var/lib/x"),
            (provision::SSO_BRIDGE_URL, "http://127.0.0.1:1"),
            (provision::JOBQ_CONCURRENCY, "0"),
            (remote::CONTROL_IDENTITY, " "),
        ])
        .unwrap_err();
        let variables: Vec<&str> = problems.iter().map(ConfigError::variable).collect();
        for variable in [
            vars::SOCKET,
            vars::NATS_URL,
            vars::RECONCILE_SECS,
            vars::SECRETS_KEY_FILE,
            provision::SSO_BRIDGE_TOKEN_FILE,
            provision::JOBQ_CONCURRENCY,
            vars::QUICK_LINKS_FILE,
            vars::STATE_DIR,
            remote::CONTROL_IDENTITY,
        ] {
            assert!(variables.contains(&variable), "{variable} not in {problems}");
        }
        assert_eq!(problems.len(), 9, "{problems}");
    }

    #[test]
    fn an_old_variable_name_still_works_with_a_warning() {
        let old = loaded(&[(vars::NATS_URL, "nats://127.0.0.1:4222"), (vars::RECONCILE_SECS, "5")]).unwrap();
        assert_eq!(old.config.settings.reconcile_every, std::time::Duration::from_secs(5));
        assert!(
            old.warnings.iter().any(|w| w.contains(vars::RECONCILE_SECS) && w.contains("SWARM_RECONCILE_EVERY=5s"))
        );
    }
}
