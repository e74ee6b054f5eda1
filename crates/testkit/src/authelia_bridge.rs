//! `swarm-authelia-bridge` on a free loopback port, with its users file and token file in a temp
//! dir.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::project_binary;

/// How long the bridge may take to answer `/healthz` after start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What to start the bridge with.
#[derive(Debug)]
pub struct AutheliaBridgeBuilder {
    binary: PathBuf,
    users: Option<String>,
    managed_group: Option<String>,
}

/// A running bridge; dropping it stops it and removes its directory.
#[derive(Debug)]
pub struct AutheliaBridge {
    process: Process,
    port: u16,
    token: String,
    users_file: PathBuf,
    dir: TempDir,
}

impl AutheliaBridgeBuilder {
    /// The users file's text at start (by default there is no file).
    pub fn users(mut self, text: &str) -> Self {
        self.users = Some(text.to_owned());
        self
    }

    /// `AUTHELIA_BRIDGE_MANAGED_GROUP` (by default the bridge's own default).
    pub fn managed_group(mut self, group: &str) -> Self {
        self.managed_group = Some(group.to_owned());
        self
    }

    /// Starts it and waits until `/healthz` answers 200.
    ///
    /// # Errors
    /// When the files cannot be made, or the bridge does not come up.
    pub async fn start(self) -> anyhow::Result<AutheliaBridge> {
        let dir = tempfile::Builder::new().prefix("hyperhive-authelia-bridge-").tempdir().context("temp dir")?;
        let authelia = dir.path().join("authelia");
        std::fs::create_dir(&authelia).context("creating the users file's directory")?;
        let users_file = authelia.join("users_database.yml");
        if let Some(users) = &self.users {
            std::fs::write(&users_file, users).context("writing the users file")?;
        }
        let token = format!("test-token-{:016x}", rand_u64());
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, format!("{token}\n")).context("writing the token file")?;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).context("chmod token")?;
        let port = free_port();
        let mut builder = Process::builder(&self.binary)
            .env("AUTHELIA_BRIDGE_LISTEN", format!("127.0.0.1:{port}"))
            .env("AUTHELIA_BRIDGE_USERS_FILE", &users_file)
            .env("AUTHELIA_BRIDGE_TOKEN_FILE", &token_file)
            .env("RUST_LOG", "info")
            .env_remove("AUTHELIA_BRIDGE_MANAGED_GROUP");
        if let Some(group) = &self.managed_group {
            builder = builder.env("AUTHELIA_BRIDGE_MANAGED_GROUP", group);
        }
        let mut process = builder.start("authelia-bridge")?;
        process.wait_for_http_ok(SocketAddr::from(([127, 0, 0, 1], port)), "/healthz", START_TIMEOUT).await?;
        Ok(AutheliaBridge { process, port, token, users_file, dir })
    }
}

/// 64 random bits without a random-number crate: the standard library's per-process seeded hasher.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.finish()
}

impl AutheliaBridge {
    /// A builder for the binary at `binary` (a test of the bridge's own package passes
    /// `env!("CARGO_BIN_EXE_swarm-authelia-bridge")`).
    pub fn builder(binary: impl AsRef<Path>) -> AutheliaBridgeBuilder {
        AutheliaBridgeBuilder { binary: binary.as_ref().to_path_buf(), users: None, managed_group: None }
    }

    /// A builder for the workspace's built `swarm-authelia-bridge`.
    ///
    /// # Errors
    /// When it has not been built.
    pub fn from_workspace() -> anyhow::Result<AutheliaBridgeBuilder> {
        Ok(Self::builder(project_binary("swarm-authelia-bridge")?))
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The users file (it may not exist yet).
    pub fn users_file(&self) -> &Path {
        &self.users_file
    }

    /// The temp dir holding the users file's directory and the token file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process.
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }
}
