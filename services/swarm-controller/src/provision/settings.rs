//! Provisioning's settings: which external systems an agent is provisioned in, their secret
//! files (read once at start), and the lifetimes of the credentials the controller renews.
//!
//! Each system is optional: a swarm without a forge skips the forge steps (recorded as
//! `skipped` in the roster, naming the variable that would enable them). A system's URL without
//! its secret file, or a secret file without its URL, is a configuration error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyperhive_jobq::JobqConfig;
use hyperhive_provision::Secret;
use hyperhive_provision::store_ca::StoreCa;

use crate::config::{Check, ConfigError};

/// The environment variable names.
pub mod vars {
    /// swarm-authelia-bridge's base URL.
    pub const SSO_BRIDGE_URL: &str = "SWARM_SSO_BRIDGE_URL";
    /// The bridge's bearer token, in a file.
    pub const SSO_BRIDGE_TOKEN_FILE: &str = "SWARM_SSO_BRIDGE_TOKEN_FILE";
    /// The forge's base URL.
    pub const FORGE_URL: &str = "SWARM_FORGE_URL";
    /// A forge admin token, in a file.
    pub const FORGE_ADMIN_TOKEN_FILE: &str = "SWARM_FORGE_ADMIN_TOKEN_FILE";
    /// `owner/name` of the template every agent's config repository is generated from.
    pub const FORGE_TEMPLATE_REPO: &str = "SWARM_FORGE_TEMPLATE_REPO";
    /// The swarm's organisation on the forge (agents' config repositories, the webhook);
    /// defaults to the template repository's owner.
    pub const FORGE_ORG: &str = "SWARM_FORGE_ORG";
    /// The public URL of `POST /api/forge/webhook`, which the organisation's webhook calls
    /// (optional: without it no webhook is made and only the periodic listing updates).
    pub const FORGE_WEBHOOK_URL: &str = "SWARM_FORGE_WEBHOOK_URL";
    /// Time between passes over the swarm's forge objects and listings.
    pub const FORGE_RECONCILE_EVERY: &str = "SWARM_FORGE_RECONCILE_EVERY";
    /// Synapse's client API base URL.
    pub const MATRIX_URL: &str = "SWARM_MATRIX_URL";
    /// Synapse's `registration_shared_secret`, in a file.
    pub const MATRIX_SHARED_SECRET_FILE: &str = "SWARM_MATRIX_SHARED_SECRET_FILE";
    /// The store CA's private key (PEM, 0600).
    pub const STORE_CA_KEY_FILE: &str = "SWARM_STORE_CA_KEY_FILE";
    /// The store CA's certificate (PEM).
    pub const STORE_CA_CERT_FILE: &str = "SWARM_STORE_CA_CERT_FILE";
    /// Lifetime of an agent's store certificate.
    pub const STORE_CERT_LIFETIME: &str = "SWARM_STORE_CERT_LIFETIME";
    /// Lifetime of an agent's NATS credential.
    pub const QUEUE_CREDS_LIFETIME: &str = "SWARM_QUEUE_CREDS_LIFETIME";
    /// Time between credential health passes.
    pub const CREDENTIAL_CHECK_EVERY: &str = "SWARM_CREDENTIAL_CHECK_EVERY";
    /// Job graph: attempts in flight at once.
    pub const JOBQ_CONCURRENCY: &str = "SWARM_JOBQ_CONCURRENCY";
    /// Job graph: attempts per job before it fails.
    pub const JOBQ_MAX_ATTEMPTS: &str = "SWARM_JOBQ_MAX_ATTEMPTS";
}

/// Default lifetime of store certificates and queue credentials.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Default time between credential health passes.
pub const DEFAULT_CHECK_EVERY: Duration = Duration::from_secs(5 * 60);
/// Default time between forge passes (objects, pull requests, issues).
pub const DEFAULT_FORGE_RECONCILE_EVERY: Duration = Duration::from_secs(5 * 60);
/// The longest secret file read (a token or a shared secret is far smaller).
const MAX_SECRET_FILE: u64 = 16 * 1024;

/// swarm-authelia-bridge.
#[derive(Debug, Clone)]
pub struct SsoSettings {
    /// Base URL.
    pub url: String,
    /// Bearer token.
    pub token: Secret,
}

/// The forge.
#[derive(Debug, Clone)]
pub struct ForgeSettings {
    /// Base URL.
    pub url: String,
    /// Admin token.
    pub admin_token: Secret,
    /// The template repository's owner.
    pub template_owner: String,
    /// The template repository's name.
    pub template_name: String,
    /// The swarm's organisation: agents' config repositories live in it, and its webhook
    /// covers them.
    pub org: String,
    /// The public URL of `POST /api/forge/webhook`, if the forge can reach the controller.
    pub webhook_url: Option<String>,
    /// Time between forge passes.
    pub reconcile_every: Duration,
}

/// Synapse.
#[derive(Debug, Clone)]
pub struct MatrixSettings {
    /// Client API base URL.
    pub url: String,
    /// `registration_shared_secret`.
    pub shared_secret: Secret,
}

/// Everything provisioning reads from the environment.
#[derive(Debug, Clone)]
pub struct ProvisionSettings {
    /// The SSO bridge, if configured.
    pub sso: Option<SsoSettings>,
    /// The forge, if configured.
    pub forge: Option<ForgeSettings>,
    /// Synapse, if configured.
    pub matrix: Option<MatrixSettings>,
    /// The store CA, loaded, if configured.
    pub store_ca: Option<Arc<StoreCa>>,
    /// Lifetime of a store certificate.
    pub store_cert_lifetime: Duration,
    /// Lifetime of a queue credential.
    pub queue_creds_lifetime: Duration,
    /// Time between credential health passes.
    pub check_every: Duration,
    /// The job graph's settings.
    pub jobq: JobqConfig,
}

impl Default for ProvisionSettings {
    fn default() -> Self {
        Self {
            sso: None,
            forge: None,
            matrix: None,
            store_ca: None,
            store_cert_lifetime: DEFAULT_LIFETIME,
            queue_creds_lifetime: DEFAULT_LIFETIME,
            check_every: DEFAULT_CHECK_EVERY,
            jobq: JobqConfig::default(),
        }
    }
}

impl ProvisionSettings {
    /// Reads the settings through `lookup`, reporting every bad one to `check`; `None` when any
    /// was bad.
    pub fn check(lookup: &dyn Fn(&str) -> Option<String>, check: &mut Check) -> Option<Self> {
        let sso = check.ok(pair(lookup, vars::SSO_BRIDGE_URL, vars::SSO_BRIDGE_TOKEN_FILE));
        let forge = check.ok(forge(lookup));
        let matrix = check.ok(pair(lookup, vars::MATRIX_URL, vars::MATRIX_SHARED_SECRET_FILE));
        let store_ca = check.ok(store_ca(lookup));
        let store_cert_lifetime = check.ok(store_cert_lifetime(lookup));
        let queue_creds_lifetime = check.ok(duration(lookup, vars::QUEUE_CREDS_LIFETIME, DEFAULT_LIFETIME));
        let check_every = check.ok(duration(lookup, vars::CREDENTIAL_CHECK_EVERY, DEFAULT_CHECK_EVERY));
        let concurrency = check.ok(number(lookup, vars::JOBQ_CONCURRENCY, hyperhive_jobq::MAX_CONCURRENCY));
        let max_attempts = usize::try_from(hyperhive_jobq::MAX_ATTEMPTS).unwrap_or(usize::MAX);
        let max_attempts = check.ok(number(lookup, vars::JOBQ_MAX_ATTEMPTS, max_attempts));
        let mut jobq = JobqConfig::default();
        if let Some(n) = concurrency? {
            jobq.max_concurrency = n;
        }
        if let Some(n) = max_attempts? {
            jobq.max_attempts = u32::try_from(n).unwrap_or(hyperhive_jobq::MAX_ATTEMPTS);
        }
        Some(Self {
            sso: sso?.map(|(url, token)| SsoSettings { url, token }),
            forge: forge?,
            matrix: matrix?.map(|(url, shared_secret)| MatrixSettings { url, shared_secret }),
            store_ca: store_ca?,
            store_cert_lifetime: store_cert_lifetime?,
            queue_creds_lifetime: queue_creds_lifetime?,
            check_every: check_every?,
            jobq,
        })
    }
}

type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn forge(lookup: Lookup) -> Result<Option<ForgeSettings>, ConfigError> {
    let Some((url, admin_token)) = pair(lookup, vars::FORGE_URL, vars::FORGE_ADMIN_TOKEN_FILE)? else {
        let forge_only =
            [vars::FORGE_TEMPLATE_REPO, vars::FORGE_ORG, vars::FORGE_WEBHOOK_URL, vars::FORGE_RECONCILE_EVERY];
        if let Some(var) = forge_only.into_iter().find(|var| lookup(var).is_some()) {
            return Err(ConfigError::new(var, format!("is set but {} is not; set both or neither", vars::FORGE_URL)));
        }
        return Ok(None);
    };
    let (template_owner, template_name) = template_repo(lookup(vars::FORGE_TEMPLATE_REPO))?;
    let org = match lookup(vars::FORGE_ORG) {
        None => template_owner.clone(),
        Some(org) => forge_org(&org)?,
    };
    let webhook_url = lookup(vars::FORGE_WEBHOOK_URL).map(|url| webhook_url(&url)).transpose()?;
    let reconcile_every = duration(lookup, vars::FORGE_RECONCILE_EVERY, DEFAULT_FORGE_RECONCILE_EVERY)?;
    Ok(Some(ForgeSettings { url, admin_token, template_owner, template_name, org, webhook_url, reconcile_every }))
}

fn store_ca(lookup: Lookup) -> Result<Option<Arc<StoreCa>>, ConfigError> {
    match (lookup(vars::STORE_CA_KEY_FILE), lookup(vars::STORE_CA_CERT_FILE)) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(missing_partner(vars::STORE_CA_CERT_FILE, vars::STORE_CA_KEY_FILE)),
        (None, Some(_)) => Err(missing_partner(vars::STORE_CA_KEY_FILE, vars::STORE_CA_CERT_FILE)),
        (Some(key), Some(cert)) => StoreCa::load(Path::new(&key), Path::new(&cert))
            .map(|ca| Some(Arc::new(ca)))
            .map_err(|e| ConfigError::new(vars::STORE_CA_KEY_FILE, e.to_string().replace('\n', " "))),
    }
}

fn store_cert_lifetime(lookup: Lookup) -> Result<Duration, ConfigError> {
    let lifetime = duration(lookup, vars::STORE_CERT_LIFETIME, DEFAULT_LIFETIME)?;
    let (min, max) = (hyperhive_provision::store_ca::MIN_LIFETIME, hyperhive_provision::store_ca::MAX_LIFETIME);
    if !(min..=max).contains(&lifetime) {
        return Err(ConfigError::new(
            vars::STORE_CERT_LIFETIME,
            format!("a store certificate lives from {}s to {}s, e.g. 24h", min.as_secs(), max.as_secs()),
        ));
    }
    Ok(lifetime)
}

/// A job graph setting: a whole number from 1 to `max`, when set.
fn number(lookup: Lookup, var: &'static str, max: usize) -> Result<Option<usize>, ConfigError> {
    let Some(text) = lookup(var) else { return Ok(None) };
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
        _ => Err(ConfigError::new(var, format!("{text:?} is not a whole number from 1 to {max}"))),
    }
}

fn missing_partner(missing: &'static str, given: &str) -> ConfigError {
    ConfigError::new(missing, format!("not set, but {given} is; set both or neither"))
}

/// A base URL and the secret file that goes with it: both or neither.
fn pair(
    lookup: Lookup,
    url_var: &'static str,
    file_var: &'static str,
) -> Result<Option<(String, Secret)>, ConfigError> {
    match (lookup(url_var), lookup(file_var)) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(missing_partner(file_var, url_var)),
        (None, Some(_)) => Err(missing_partner(url_var, file_var)),
        (Some(url), Some(file)) => Ok(Some((base_url(url_var, &url)?, read_secret_file(file_var, &file)?))),
    }
}

fn base_url(var: &'static str, url: &str) -> Result<String, ConfigError> {
    let url = url.trim();
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') && !url.contains(char::is_whitespace) => {
            Ok(url.trim_end_matches('/').to_owned())
        }
        _ => Err(ConfigError::new(var, format!("{url:?} is not an http(s) URL; e.g. https://forge.example"))),
    }
}

/// Reads a secret from a file its group and others cannot read; the value is never quoted.
fn read_secret_file(var: &'static str, path: &str) -> Result<Secret, ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let problem = |what: String| ConfigError::new(var, what);
    if path.trim().is_empty() {
        return Err(problem("is empty; set it to the file holding the secret".into()));
    }
    let meta = std::fs::metadata(path).map_err(|e| problem(format!("cannot read {path}: {e}")))?;
    if meta.mode() & 0o077 != 0 {
        return Err(problem(format!(
            "{path} can be read by its group or others (mode {:o}); chmod 600 it",
            meta.mode() & 0o777
        )));
    }
    if meta.len() > MAX_SECRET_FILE {
        return Err(problem(format!("{path} is larger than {MAX_SECRET_FILE} bytes; it should hold one secret")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read {path}: {e}")))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(problem(format!("{path} is empty; it must hold the secret")));
    }
    Ok(Secret::new(secret))
}

fn template_repo(value: Option<String>) -> Result<(String, String), ConfigError> {
    let var = vars::FORGE_TEMPLATE_REPO;
    let Some(value) = value else {
        return Err(ConfigError::new(
            var,
            format!("not set, but {} is; name the template repository as owner/name", vars::FORGE_URL),
        ));
    };
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match value.split_once('/') {
        Some((owner, name)) if ok(owner) && ok(name) => Ok((owner.to_owned(), name.to_owned())),
        _ => Err(ConfigError::new(var, format!("{value:?} is not owner/name, e.g. swarm/agent-config-template"))),
    }
}

fn forge_org(org: &str) -> Result<String, ConfigError> {
    hyperhive_provision::forge::names::check_user_name(org.trim())
        .map(|()| org.trim().to_owned())
        .map_err(|e| ConfigError::new(vars::FORGE_ORG, format!("{e}; name the swarm's organisation, e.g. swarm")))
}

fn webhook_url(url: &str) -> Result<String, ConfigError> {
    let url = url.trim();
    hyperhive_provision::forge::names::check_hook_url(url).map_err(|e| ConfigError::new(vars::FORGE_WEBHOOK_URL, e))?;
    if !url.ends_with("/api/forge/webhook") {
        return Err(ConfigError::new(
            vars::FORGE_WEBHOOK_URL,
            format!("{url:?} does not end with /api/forge/webhook, the route the controller serves"),
        ));
    }
    Ok(url.to_owned())
}

fn duration(lookup: Lookup, var: &'static str, default: Duration) -> Result<Duration, ConfigError> {
    let Some(text) = lookup(var) else { return Ok(default) };
    match hyperhive_daemon::settings::parse_duration(&text) {
        Ok(d) if d >= Duration::from_secs(1) => Ok(d),
        _ => Err(ConfigError::new(var, format!("{text:?} is not a duration of at least 1s, e.g. 90s, 30m, 24h or 7d"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::fs::PermissionsExt;

    fn settings(pairs: &[(&str, &str)]) -> Result<ProvisionSettings, crate::config::Problems> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let mut check = Check::default();
        let settings = ProvisionSettings::check(&|name: &str| env.get(name).cloned(), &mut check);
        check.finish(|| settings).map(|loaded| loaded.config)
    }

    fn secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.to_str().unwrap().to_owned()
    }

    #[test]
    fn nothing_set_means_nothing_configured_and_the_defaults() {
        let s = settings(&[]).unwrap();
        assert!(s.sso.is_none() && s.forge.is_none() && s.matrix.is_none() && s.store_ca.is_none());
        assert_eq!(s.store_cert_lifetime, Duration::from_secs(86_400));
        assert_eq!(s.queue_creds_lifetime, Duration::from_secs(86_400));
        assert_eq!(s.check_every, Duration::from_secs(300));
    }

    #[test]
    fn every_system_is_read_with_its_secret_file() {
        let dir = tempfile::tempdir().unwrap();
        let token = secret_file(dir.path(), "t", "tok-1\n", 0o600);
        let ca =
            hyperhive_provision::store_ca::write_ca_files(dir.path(), "swarm store CA", std::time::SystemTime::now())
                .unwrap();
        let s = settings(&[
            (vars::SSO_BRIDGE_URL, "http://127.0.0.1:9091/"),
            (vars::SSO_BRIDGE_TOKEN_FILE, &token),
            (vars::FORGE_URL, "https://forge.example"),
            (vars::FORGE_ADMIN_TOKEN_FILE, &token),
            (vars::FORGE_TEMPLATE_REPO, "swarm/agent-template"),
            (vars::MATRIX_URL, "http://127.0.0.1:8008"),
            (vars::MATRIX_SHARED_SECRET_FILE, &token),
            (vars::STORE_CA_KEY_FILE, ca.key_file.to_str().unwrap()),
            (vars::STORE_CA_CERT_FILE, ca.cert_file.to_str().unwrap()),
            (vars::STORE_CERT_LIFETIME, "90s"),
            (vars::QUEUE_CREDS_LIFETIME, "2h"),
            (vars::CREDENTIAL_CHECK_EVERY, "10s"),
            (vars::JOBQ_CONCURRENCY, "3"),
            (vars::JOBQ_MAX_ATTEMPTS, "2"),
        ])
        .unwrap();
        let sso = s.sso.unwrap();
        assert_eq!((sso.url.as_str(), sso.token.expose()), ("http://127.0.0.1:9091", "tok-1"));
        let forge = s.forge.unwrap();
        assert_eq!((forge.template_owner.as_str(), forge.template_name.as_str()), ("swarm", "agent-template"));
        assert_eq!((forge.org.as_str(), forge.webhook_url.as_deref()), ("swarm", None), "the template's owner");
        assert_eq!(forge.reconcile_every, Duration::from_secs(300));
        assert!(s.matrix.is_some() && s.store_ca.is_some());
        assert_eq!(s.store_cert_lifetime, Duration::from_secs(90));
        assert_eq!(s.queue_creds_lifetime, Duration::from_secs(7200));
        assert_eq!(s.check_every, Duration::from_secs(10));
        assert_eq!((s.jobq.max_concurrency, s.jobq.max_attempts), (3, 2));
    }

    #[test]
    fn half_configured_systems_and_bad_values_name_the_variable_without_quoting_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let token = secret_file(dir.path(), "t", "hunter2-secret", 0o600);
        let open = secret_file(dir.path(), "o", "hunter2-secret", 0o644);
        let empty = secret_file(dir.path(), "e", "\n", 0o600);
        let url = "http://127.0.0.1:1";
        // A configured forge with one more variable.
        let forge_with = |var: &'static str, value: &'static str| {
            vec![
                (vars::FORGE_URL, url),
                (vars::FORGE_ADMIN_TOKEN_FILE, token.as_str()),
                (vars::FORGE_TEMPLATE_REPO, "a/b"),
                (var, value),
            ]
        };
        type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            (vec![(vars::SSO_BRIDGE_URL, url)], vars::SSO_BRIDGE_TOKEN_FILE, "set both"),
            (vec![(vars::MATRIX_SHARED_SECRET_FILE, &token)], vars::MATRIX_URL, "set both"),
            (
                vec![(vars::SSO_BRIDGE_URL, "ftp://x"), (vars::SSO_BRIDGE_TOKEN_FILE, &token)],
                vars::SSO_BRIDGE_URL,
                "http(s) URL",
            ),
            (
                vec![(vars::SSO_BRIDGE_URL, url), (vars::SSO_BRIDGE_TOKEN_FILE, &open)],
                vars::SSO_BRIDGE_TOKEN_FILE,
                "chmod 600",
            ),
            (
                vec![(vars::SSO_BRIDGE_URL, url), (vars::SSO_BRIDGE_TOKEN_FILE, &empty)],
                vars::SSO_BRIDGE_TOKEN_FILE,
                "empty",
            ),
            (
                vec![(vars::SSO_BRIDGE_URL, url), (vars::SSO_BRIDGE_TOKEN_FILE, "/nonexistent")],
                vars::SSO_BRIDGE_TOKEN_FILE,
                "cannot read",
            ),
            (
                vec![(vars::FORGE_URL, url), (vars::FORGE_ADMIN_TOKEN_FILE, &token)],
                vars::FORGE_TEMPLATE_REPO,
                "owner/name",
            ),
            (
                vec![(vars::FORGE_URL, url), (vars::FORGE_ADMIN_TOKEN_FILE, &token), (vars::FORGE_TEMPLATE_REPO, "x")],
                vars::FORGE_TEMPLATE_REPO,
                "owner/name",
            ),
            (vec![(vars::FORGE_TEMPLATE_REPO, "a/b")], vars::FORGE_TEMPLATE_REPO, "set both"),
            (vec![(vars::FORGE_ORG, "swarm")], vars::FORGE_ORG, "set both"),
            (vec![(vars::FORGE_WEBHOOK_URL, "https://x/api/forge/webhook")], vars::FORGE_WEBHOOK_URL, "set both"),
            (forge_with(vars::FORGE_ORG, "-x"), vars::FORGE_ORG, "must start with"),
            (forge_with(vars::FORGE_WEBHOOK_URL, "ftp://x/api/forge/webhook"), vars::FORGE_WEBHOOK_URL, "http(s) URL"),
            (forge_with(vars::FORGE_WEBHOOK_URL, "https://x/hook"), vars::FORGE_WEBHOOK_URL, "/api/forge/webhook"),
            (forge_with(vars::FORGE_RECONCILE_EVERY, "0s"), vars::FORGE_RECONCILE_EVERY, "at least 1s"),
            (vec![(vars::STORE_CA_KEY_FILE, "/k")], vars::STORE_CA_CERT_FILE, "set both"),
            (vec![(vars::STORE_CERT_LIFETIME, "0s")], vars::STORE_CERT_LIFETIME, "at least 1s"),
            (vec![(vars::QUEUE_CREDS_LIFETIME, "soon")], vars::QUEUE_CREDS_LIFETIME, "duration"),
            (vec![(vars::STORE_CERT_LIFETIME, "400d")], vars::STORE_CERT_LIFETIME, "lives from"),
            (vec![(vars::CREDENTIAL_CHECK_EVERY, "")], vars::CREDENTIAL_CHECK_EVERY, "duration"),
            (vec![(vars::JOBQ_CONCURRENCY, "0")], vars::JOBQ_CONCURRENCY, "from 1 to 1024"),
            (vec![(vars::JOBQ_MAX_ATTEMPTS, "101")], vars::JOBQ_MAX_ATTEMPTS, "from 1 to 100"),
            (vec![(vars::JOBQ_MAX_ATTEMPTS, "two")], vars::JOBQ_MAX_ATTEMPTS, "whole number"),
        ];
        for (env, variable, needle) in cases {
            let err = settings(&env).unwrap_err().to_string();
            assert!(err.starts_with(variable), "{env:?}: {err}");
            assert!(err.contains(needle), "{env:?}: {err}");
            assert!(!err.contains("hunter2") && !err.contains('\n'), "{err}");
        }
    }
}
