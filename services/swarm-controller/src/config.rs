//! The daemon's configuration, read once at start from the environment.
//!
//! Every variable is parsed here, so a missing or malformed value stops the daemon with one line
//! naming the variable and saying how to fix it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_hive_proto::directory::{HiveDirectory, parse_directory};

use crate::forge::webhook_secret::WebhookSecret;
use crate::provision::ProvisionSettings;
use crate::secrets::SecretsKey;
use crate::ui::quick_links::{self, QuickLink};

/// Where the API socket lives when `SWARM_CONTROLLER_SOCKET` is not set.
pub use hyperhive_swarm_api::DEFAULT_SOCKET;
/// How often the reconcile pass runs when `SWARM_RECONCILE_SECS` is not set.
pub const DEFAULT_RECONCILE_SECS: u64 = 60;

/// The environment variable names, documented in one place.
pub mod vars {
    /// Path of the unix socket serving the HTTP API.
    pub const SOCKET: &str = "SWARM_CONTROLLER_SOCKET";
    /// NATS server URL (required).
    pub const NATS_URL: &str = "SWARM_NATS_URL";
    /// The controller's `.creds` file (optional: a NATS without JWT auth needs none).
    pub const NATS_CREDS: &str = "SWARM_NATS_CREDS";
    /// Seconds between reconcile passes.
    pub const RECONCILE_SECS: &str = "SWARM_RECONCILE_SECS";
    /// The hive directory, a JSON file (optional: without it the swarm has no hives).
    pub const HIVES_FILE: &str = "SWARM_HIVES_FILE";
    /// The directory `swarm-controller nats init` wrote (optional; needed to revoke a destroyed
    /// agent's credentials).
    pub const NATS_DIR: &str = "SWARM_NATS_DIR";
    /// The secret store's key file (optional; provisioning agents needs it).
    pub const SECRETS_KEY_FILE: &str = "SWARM_SECRETS_KEY_FILE";
    /// The UI's quick links, a JSON file (optional).
    pub const QUICK_LINKS_FILE: &str = "SWARM_QUICK_LINKS_FILE";
    /// The controller's state directory, holding `webhook-secret` (optional; the forge webhook
    /// needs it).
    pub const STATE_DIR: &str = "SWARM_STATE_DIR";
    /// Copies of every stream and bucket the controller creates (default 1; 3 on a cluster).
    pub const NATS_REPLICAS: &str = "SWARM_NATS_REPLICAS";
}

/// The most replicas NATS keeps of a stream.
pub const MAX_NATS_REPLICAS: usize = 5;

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The unix socket the API is served on.
    pub socket: PathBuf,
    /// The NATS server, e.g. `nats://127.0.0.1:4222`.
    pub nats_url: String,
    /// The controller's credential file, if NATS runs with JWT auth.
    pub nats_creds: Option<PathBuf>,
    /// Copies of every stream and bucket (1 on a single server, 3 on a three-node cluster).
    pub nats_replicas: usize,
    /// Time between reconcile passes.
    pub reconcile_every: Duration,
    /// The swarm's hives, from `SWARM_HIVES_FILE` (empty when it is not set).
    pub hives: HiveDirectory,
    /// The `nats init` directory holding the signing keys, if given.
    pub nats_dir: Option<PathBuf>,
    /// The key the secret store seals under, read from `SWARM_SECRETS_KEY_FILE` at start.
    pub secrets_key: Option<SecretsKey>,
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

/// A missing or malformed setting; the message names the variable and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct ConfigError {
    variable: &'static str,
    problem: String,
}

impl ConfigError {
    pub(crate) fn new(variable: &'static str, problem: impl Into<String>) -> Self {
        Self { variable, problem: problem.into() }
    }
}

impl Config {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] for the first missing or malformed variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Reads settings through `lookup` (the environment in production, a map in tests).
    ///
    /// # Errors
    /// [`ConfigError`] for the first missing or malformed variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let socket = match lookup(vars::SOCKET) {
            None => PathBuf::from(DEFAULT_SOCKET),
            Some(path) => parse_socket(&path)?,
        };
        let nats_url = match lookup(vars::NATS_URL) {
            None => {
                return Err(ConfigError::new(
                    vars::NATS_URL,
                    "not set; set it to the NATS server, e.g. nats://127.0.0.1:4222",
                ));
            }
            Some(url) => parse_nats_url(&url)?,
        };
        let nats_creds = match lookup(vars::NATS_CREDS) {
            None => None,
            Some(path) if path.trim().is_empty() => {
                return Err(ConfigError::new(
                    vars::NATS_CREDS,
                    "is empty; set it to the controller's .creds file (from `swarm-controller nats init`) or unset it",
                ));
            }
            Some(path) => Some(PathBuf::from(path)),
        };
        let nats_replicas = match lookup(vars::NATS_REPLICAS) {
            None => 1,
            Some(text) => parse_replicas(&text)?,
        };
        let reconcile_every = match lookup(vars::RECONCILE_SECS) {
            None => Duration::from_secs(DEFAULT_RECONCILE_SECS),
            Some(secs) => parse_reconcile_secs(&secs)?,
        };
        let hives = match lookup(vars::HIVES_FILE) {
            None => HiveDirectory::new(),
            Some(path) => read_hives(&path)?,
        };
        let nats_dir = match lookup(vars::NATS_DIR) {
            None => None,
            Some(path) => Some(parse_nats_dir(&path)?),
        };
        let secrets_key = match lookup(vars::SECRETS_KEY_FILE) {
            None => None,
            Some(path) => Some(read_secrets_key(&path)?),
        };
        let provisioning = ProvisionSettings::from_lookup(&lookup)?;
        let quick_links = match lookup(vars::QUICK_LINKS_FILE) {
            None => Vec::new(),
            Some(path) => read_quick_links(&path)?,
        };
        let webhook_secret = match lookup(vars::STATE_DIR) {
            None => None,
            Some(path) => Some(read_webhook_secret(&path)?),
        };
        let remote = read_remote(&lookup)?;
        Ok(Self {
            socket,
            nats_url,
            nats_creds,
            nats_replicas,
            reconcile_every,
            hives,
            nats_dir,
            secrets_key,
            provisioning,
            quick_links,
            webhook_secret,
            remote,
        })
    }
}

fn read_hives(path: &str) -> Result<HiveDirectory, ConfigError> {
    let problem = |what: String| ConfigError::new(vars::HIVES_FILE, what);
    if path.trim().is_empty() {
        return Err(problem("is empty; set it to the hive directory JSON file or unset it".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read {path}: {e}")))?;
    // One line: the parser's message may quote the file.
    parse_directory(&text).map_err(|e| problem(format!("{path}: {}", e.to_string().replace('\n', " "))))
}

fn read_quick_links(path: &str) -> Result<Vec<QuickLink>, ConfigError> {
    let problem = |what: String| ConfigError::new(vars::QUICK_LINKS_FILE, what);
    let text = std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read {path:?}: {e}")))?;
    quick_links::parse(&text).map_err(|e| problem(format!("{path}: {e}")))
}

/// The identity from `SWARM_CONTROL_IDENTITY` (which must then be there), else from the state
/// directory when `pair` wrote one; none means the controller is not a host.
fn read_remote(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<RemoteSettings>, ConfigError> {
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

fn parse_nats_dir(path: &str) -> Result<PathBuf, ConfigError> {
    let dir = Path::new(path);
    if !dir.is_absolute() {
        return Err(ConfigError::new(
            vars::NATS_DIR,
            format!("{path:?} is not an absolute path; set it to the directory `swarm-controller nats init` wrote"),
        ));
    }
    if !dir.join(hyperhive_nats_creds::files::OPERATOR_SEED).is_file() {
        return Err(ConfigError::new(
            vars::NATS_DIR,
            format!(
                "{path} holds no {}; set it to the directory `swarm-controller nats init` wrote",
                hyperhive_nats_creds::files::OPERATOR_SEED
            ),
        ));
    }
    Ok(dir.to_path_buf())
}

fn parse_socket(path: &str) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(ConfigError::new(
            vars::SOCKET,
            format!("{} is not an absolute path; use e.g. {DEFAULT_SOCKET}", path.display()),
        ));
    }
    if path.file_name().is_none() {
        return Err(ConfigError::new(
            vars::SOCKET,
            format!("{} names no file; use e.g. {DEFAULT_SOCKET}", path.display()),
        ));
    }
    Ok(path)
}

fn parse_nats_url(url: &str) -> Result<String, ConfigError> {
    hyperhive_nats_creds::servers::parse_server_urls(url).map_err(|e| ConfigError::new(vars::NATS_URL, e))
}

fn parse_replicas(text: &str) -> Result<usize, ConfigError> {
    text.trim().parse::<usize>().ok().filter(|n| (1..=MAX_NATS_REPLICAS).contains(n)).ok_or_else(|| {
        ConfigError::new(
            vars::NATS_REPLICAS,
            format!(
                "{text:?} is not a replica count from 1 to {MAX_NATS_REPLICAS}; write 1 for a single server, 3 for a \
                 three-node cluster"
            ),
        )
    })
}

fn parse_reconcile_secs(secs: &str) -> Result<Duration, ConfigError> {
    match secs.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(Duration::from_secs(n)),
        _ => Err(ConfigError::new(
            vars::RECONCILE_SECS,
            format!("{secs:?} is not a whole number of seconds >= 1; write e.g. 60"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_lookup(|name| env.get(name).cloned())
    }

    #[test]
    fn default_socket_path_is_pinned() {
        assert_eq!(DEFAULT_SOCKET, "/run/swarm-controller/controller.sock");
        let c = config(&[(vars::NATS_URL, "nats://127.0.0.1:4222")]).unwrap();
        assert_eq!(c.socket, PathBuf::from("/run/swarm-controller/controller.sock"));
        assert_eq!(c.reconcile_every, Duration::from_secs(60));
        assert_eq!(c.nats_creds, None);
        assert!(c.hives.is_empty(), "no SWARM_HIVES_FILE: no hives");
        assert_eq!(c.nats_dir, None);
        assert_eq!(c.nats_replicas, 1);
        let cluster =
            config(&[(vars::NATS_URL, "nats://n1:4222, nats://n2:4222,nats://n3:4222"), (vars::NATS_REPLICAS, "3")])
                .unwrap();
        assert_eq!(cluster.nats_url, "nats://n1:4222,nats://n2:4222,nats://n3:4222");
        assert_eq!(cluster.nats_replicas, 3);
    }

    #[test]
    fn reads_the_hive_directory_and_the_nats_dir() {
        let dir = tempfile::tempdir().unwrap();
        let hives = dir.path().join("hives.json");
        std::fs::write(&hives, r#"{"h2": {}, "h1": {"description": "gpu", "labels": {"gpu": "yes"}}}"#).unwrap();
        let nats = dir.path().join("nats");
        hyperhive_nats_creds::init(&nats).unwrap();
        let c = config(&[
            (vars::NATS_URL, "nats://n:4222"),
            (vars::HIVES_FILE, hives.to_str().unwrap()),
            (vars::NATS_DIR, nats.to_str().unwrap()),
        ])
        .unwrap();
        let names: Vec<&str> = c.hives.keys().map(|h| h.as_str()).collect();
        assert_eq!(names, ["h1", "h2"]);
        assert_eq!(c.hives.values().next().unwrap().description, "gpu");
        assert_eq!(c.nats_dir, Some(nats));
    }

    #[test]
    fn a_bad_hive_directory_or_nats_dir_names_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let missing = dir.path().join("absent.json").to_str().unwrap().to_owned();
        let not_json = write("bad.json", "{\n  \"h\": ");
        let bad_name = write("name.json", r#"{"H": {}}"#);
        let bad_key = write("key.json", r#"{"h": {"xkey": "Xnope"}}"#);
        let empty_dir = dir.path().to_str().unwrap().to_owned();
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        type Case<'a> = (&'a str, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            (vars::HIVES_FILE, "", "empty"),
            (vars::HIVES_FILE, &missing, "cannot read"),
            (vars::HIVES_FILE, &not_json, "JSON object"),
            (vars::HIVES_FILE, &bad_name, "invalid hive name"),
            (vars::HIVES_FILE, &bad_key, "not a public curve key"),
            (vars::NATS_DIR, "relative/dir", "absolute"),
            (vars::NATS_DIR, &empty_dir, "operator.seed"),
        ];
        for (variable, value, needle) in cases {
            let err = config(&[url, (variable, value)]).unwrap_err().to_string();
            assert!(err.starts_with(variable), "{value:?}: {err}");
            assert!(err.contains(needle), "{value:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn reads_every_variable() {
        let c = config(&[
            (vars::SOCKET, "/tmp/x/c.sock"),
            (vars::NATS_URL, "nats://n:4222"),
            (vars::NATS_CREDS, "/etc/c.creds"),
            (vars::RECONCILE_SECS, "5"),
        ])
        .unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/x/c.sock"));
        assert_eq!(c.nats_url, "nats://n:4222");
        assert_eq!(c.nats_creds, Some(PathBuf::from("/etc/c.creds")));
        assert_eq!(c.reconcile_every, Duration::from_secs(5));
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
        let (request, pending) =
            hyperhive_control_link::start_pairing(&code.to_token(), "c", &mut rand::rng()).unwrap();
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
}
