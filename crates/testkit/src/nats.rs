//! `nats-server` with JetStream on a free loopback port.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::{Tool, tool};

/// How long a start may take before the test fails; it is usually well under a second.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `nats-server` with JetStream, its store in its own temp dir.
#[derive(Debug)]
pub struct Nats {
    // Field order is drop order: the server is killed before its dir is removed.
    process: Option<Process>,
    port: u16,
    /// Holds `nats.conf` and the JetStream store (`js/`); kept across [`Nats::start_again`].
    dir: TempDir,
}

impl Nats {
    /// Starts a server with JetStream and no authentication.
    ///
    /// # Errors
    /// When `nats-server` is missing (run scripts/setup) or does not become ready.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_config("").await
    }

    /// Starts a server whose config is the kit's `listen` and `jetstream` blocks followed by
    /// `extra` (operator, resolver, accounts, authorization...). `extra` must not set `listen`,
    /// `port` or `jetstream`. `max_file_store` is set, so what streams may reserve does not
    /// depend on the disk space free at the server's start (75% of which is the default).
    ///
    /// # Errors
    /// As [`Nats::start`]; a config the server rejects fails with its log.
    pub async fn start_with_config(extra: &str) -> anyhow::Result<Self> {
        let mut nats = Self::configured(extra)?;
        nats.start_again().await?;
        Ok(nats)
    }

    /// A server configured as [`Nats::start_with_config`] does, its port chosen and its config
    /// written, but not started: [`Nats::start_again`] starts it (a cluster's nodes are started
    /// together, each waiting for its peers' routes).
    pub(crate) fn configured(extra: &str) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("hyperhive-nats-").tempdir().context("creating the NATS temp dir")?;
        let port = free_port();
        let config = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{\n  store_dir: \"{}\"\n  max_file_store: 8GB\n}}\n{extra}\n",
            dir.path().join("js").display()
        );
        std::fs::write(dir.path().join("nats.conf"), config).context("writing nats.conf")?;
        Ok(Self { process: None, port, dir })
    }

    /// Starts the server again after [`Nats::stop`], on the same port with the same store.
    ///
    /// # Errors
    /// As [`Nats::start`].
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.process.is_none(), "nats-server is already running");
        let mut process = Process::builder(tool(Tool::NatsServer)?)
            .arg("--config")
            .arg(self.dir.path().join("nats.conf"))
            .start("nats-server")?;
        // "Server is ready" is logged after the client listener is up and JetStream is enabled.
        process.wait_for_log("Server is ready", START_TIMEOUT).await?;
        self.process = Some(process);
        Ok(())
    }

    /// Makes the running server load its configuration again (SIGHUP), e.g. after an included
    /// file changed, and waits until it says it did.
    ///
    /// # Errors
    /// When the server is not running, or does not confirm within the start timeout (its log
    /// then says why: a setting it cannot reload, a config it rejects).
    pub async fn reload(&self) -> anyhow::Result<()> {
        const RELOADED: &str = "Reloaded server configuration";
        let process = self.process.as_ref().context("nats-server is not running")?;
        let before = process.log().matches(RELOADED).count();
        process.signal(nix::sys::signal::Signal::SIGHUP)?;
        crate::wait::wait_until("nats-server to reload its configuration", START_TIMEOUT, || async {
            (process.log().matches(RELOADED).count() > before).then_some(())
        })
        .await
        .with_context(|| format!("nats-server did not reload; its log ends with:\n{}", process.log_tail(10)))
    }

    /// Stops the server at once (SIGKILL): clients see the connection drop.
    pub fn stop(&mut self) {
        self.process = None;
    }

    /// Whether the server was started and not stopped since.
    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir holding `nats.conf` and the JetStream store.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last `lines` lines of the running server's log (empty when it is not running).
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.as_ref().map(|process| process.log_tail(lines)).unwrap_or_default()
    }

    /// The running server process, if started.
    pub fn process(&mut self) -> Option<&mut Process> {
        self.process.as_mut()
    }
}
