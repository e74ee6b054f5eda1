//! Synapse, a real Matrix homeserver, on SQLite on a free loopback port.
//!
//! The kit writes `homeserver.yaml` itself (rather than `--generate-config`, whose listeners and
//! defaults would then have to be overridden): one plain HTTP listener on 127.0.0.1 serving the
//! client and admin APIs, no federation, shared-secret registration with a random secret, every
//! rate limit lifted (so tests measure behaviour, not throttling), cheap password hashing, and
//! warnings-only logging. Synapse makes its signing key at first start. At start the kit
//! registers an admin account through the shared secret, for the admin API helpers.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::{Tool, tool};

/// Python imports and a fresh SQLite schema: about 4 s on an idle 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// One admin API call against a local server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The server name every test server has: user ids are `@localpart:hyperhive.test`.
const SERVER_NAME: &str = "hyperhive.test";
const ADMIN_LOCALPART: &str = "testkit-admin";

/// A running Synapse with an admin account. Its `Debug` leaves out the shared secret and the
/// admin's token.
pub struct Synapse {
    // Field order is drop order: Synapse is killed before its dir is removed.
    process: Process,
    port: u16,
    shared_secret: String,
    admin_token: String,
    http: reqwest::Client,
    /// Holds the config, the SQLite database, the media store and the signing key.
    dir: TempDir,
}

impl Synapse {
    /// Starts Synapse with the kit's configuration.
    ///
    /// # Errors
    /// When `synapse_homeserver` is missing (run scripts/setup), or it does not answer
    /// `/_matrix/client/versions` in time (the error carries its log).
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_config("").await
    }

    /// Starts Synapse with `extra` (YAML) as a second config file: Synapse merges config files in
    /// order, so a top-level key in `extra` replaces the kit's (e.g. `rc_login` to test throttling).
    ///
    /// # Errors
    /// As [`Synapse::start`]; a config Synapse rejects fails with its log.
    pub async fn start_with_config(extra: &str) -> anyhow::Result<Self> {
        let dir =
            tempfile::Builder::new().prefix("hyperhive-synapse-").tempdir().context("creating the Synapse temp dir")?;
        let port = free_port();
        let shared_secret = random_hex(32)?;
        std::fs::write(dir.path().join("homeserver.yaml"), homeserver_yaml(dir.path(), port, &shared_secret))
            .context("writing homeserver.yaml")?;
        std::fs::write(dir.path().join("log.yaml"), LOG_CONFIG).context("writing the Synapse log config")?;
        std::fs::write(dir.path().join("extra.yaml"), if extra.is_empty() { "{}\n" } else { extra })
            .context("writing the extra Synapse config")?;
        let mut process = Process::builder(tool(Tool::SynapseHomeserver)?)
            .arg("--config-path")
            .arg(dir.path().join("homeserver.yaml"))
            .arg("--config-path")
            .arg(dir.path().join("extra.yaml"))
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .start("synapse")?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        process.wait_for_http_ok(addr, "/_matrix/client/versions", START_TIMEOUT).await?;
        let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().context("building an HTTP client")?;
        let base_url = format!("http://127.0.0.1:{port}");
        let admin_token = register_admin(&http, &base_url, &shared_secret).await?;
        Ok(Self { process, port, shared_secret, admin_token, http, dir })
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server name in user ids (`@localpart:<server name>`).
    pub fn server_name(&self) -> &str {
        SERVER_NAME
    }

    /// The full user id of `localpart` on this server.
    pub fn user_id(&self, localpart: &str) -> String {
        format!("@{localpart}:{SERVER_NAME}")
    }

    /// The `registration_shared_secret` in its config.
    pub fn shared_secret(&self) -> &str {
        &self.shared_secret
    }

    /// Deactivates `user_id` through the admin API (its access tokens are deleted with it).
    ///
    /// # Errors
    /// When Synapse does not answer 200.
    pub async fn deactivate(&self, user_id: &str) -> anyhow::Result<()> {
        let url = format!("{}/_synapse/admin/v1/deactivate/{user_id}", self.base_url());
        self.admin_call(self.http.post(url).json(&json!({ "erase": false }))).await
    }

    /// Locks `user_id` through the admin API: its tokens stay but are refused until unlocked.
    ///
    /// # Errors
    /// When Synapse does not answer 200.
    pub async fn lock(&self, user_id: &str) -> anyhow::Result<()> {
        let url = format!("{}/_synapse/admin/v2/users/{user_id}", self.base_url());
        self.admin_call(self.http.put(url).json(&json!({ "locked": true }))).await
    }

    async fn admin_call(&self, request: reqwest::RequestBuilder) -> anyhow::Result<()> {
        let response = request.bearer_auth(&self.admin_token).send().await.context("calling the Synapse admin API")?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            bail!("the Synapse admin API answered {status}: {body}");
        }
        Ok(())
    }

    /// The folder with `homeserver.yaml`, the database and the signing key.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The Synapse process (e.g. to kill it and see what clients do then).
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }
}

impl std::fmt::Debug for Synapse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synapse")
            .field("process", &self.process)
            .field("port", &self.port)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// Registers the kit's admin through `/_synapse/admin/v1/register`; its access token.
async fn register_admin(http: &reqwest::Client, base_url: &str, shared_secret: &str) -> anyhow::Result<String> {
    let url = format!("{base_url}/_synapse/admin/v1/register");
    let nonce: Value = http.get(&url).send().await?.error_for_status()?.json().await.context("the nonce")?;
    let nonce = nonce["nonce"].as_str().context("no nonce in Synapse's answer")?.to_owned();
    let password = random_hex(16)?;
    // Synapse's shared-secret MAC: HMAC-SHA1 over nonce, user, password and "admin", NUL-separated.
    let message = format!("{nonce}\0{ADMIN_LOCALPART}\0{password}\0admin");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, shared_secret.as_bytes());
    let mac = hex(ring::hmac::sign(&key, message.as_bytes()).as_ref());
    let body = json!({ "nonce": nonce, "username": ADMIN_LOCALPART, "password": password, "admin": true, "mac": mac });
    let response = http.post(&url).json(&body).send().await.context("registering the admin")?;
    let status = response.status();
    let answer: Value = response.json().await.context("Synapse's answer to the admin registration")?;
    if !status.is_success() {
        bail!("registering the admin: Synapse answered {status}: {answer}");
    }
    answer["access_token"].as_str().map(str::to_owned).context("no access token for the admin")
}

fn homeserver_yaml(dir: &Path, port: u16, shared_secret: &str) -> String {
    let dir = dir.display();
    // A limit Synapse never reaches in a test.
    let lifted = "{per_second: 100000, burst_count: 1000000}";
    format!(
        r#"server_name: "{SERVER_NAME}"
pid_file: "{dir}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{dir}/homeserver.db"
media_store_path: "{dir}/media_store"
signing_key_path: "{dir}/signing.key"
log_config: "{dir}/log.yaml"
registration_shared_secret: "{shared_secret}"
enable_registration: false
report_stats: false
# No federation: no key servers, no other homeserver allowed.
trusted_key_servers: []
federation_domain_whitelist: []
suppress_key_server_warning: true
# The minimum cost bcrypt allows: tests register and log in many times.
bcrypt_rounds: 4
rc_message: {lifted}
rc_registration: {lifted}
rc_registration_token_validity: {lifted}
rc_login:
  address: {lifted}
  account: {lifted}
  failed_attempts: {lifted}
rc_admin_redaction: {lifted}
rc_joins:
  local: {lifted}
  remote: {lifted}
rc_3pid_validation: {lifted}
rc_invites:
  per_room: {lifted}
  per_user: {lifted}
"#
    )
}

/// Warnings and errors only, to stderr (which the kit captures into the process log).
const LOG_CONFIG: &str = r#"version: 1
formatters:
  plain:
    format: "%(asctime)s %(name)s %(levelname)s %(message)s"
handlers:
  console:
    class: logging.StreamHandler
    formatter: plain
root:
  level: WARNING
  handlers: [console]
disable_existing_loggers: false
"#;

fn random_hex(bytes: usize) -> anyhow::Result<String> {
    let mut buf = vec![0u8; bytes];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut buf)
        .map_err(|_| anyhow::anyhow!("the system random generator failed"))?;
    Ok(hex(&buf))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
