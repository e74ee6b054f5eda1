//! Caddy with a given Caddyfile, its admin API off and its data in a temp dir.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use crate::process::Process;
use crate::tools::{Tool, tool};

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running Caddy.
#[derive(Debug)]
pub struct Caddy {
    // Field order is drop order: Caddy is killed before its dir is removed.
    process: Process,
    /// Holds the Caddyfile and Caddy's data (its internal CA, certificates).
    dir: TempDir,
}

impl Caddy {
    /// Starts Caddy with `site_blocks` (one or more site blocks of a Caddyfile; take their ports
    /// from [`crate::ports::free_port`]) and waits until every port in `wait_ports` accepts connections.
    ///
    /// The kit adds the global options block: no admin endpoint (its fixed port 2019 would
    /// collide between parallel tests), no HTTP-to-HTTPS redirect listener (it binds the fixed
    /// port 80 for every TLS site), storage in the temp dir, and no attempt to install the
    /// internal CA into the system trust store. So `site_blocks` must not have a global block.
    ///
    /// # Errors
    /// When `caddy` is missing (run scripts/setup), rejects the config, or does not listen.
    pub async fn start(site_blocks: &str, wait_ports: &[u16]) -> anyhow::Result<Self> {
        let dir =
            tempfile::Builder::new().prefix("hyperhive-caddy-").tempdir().context("creating the Caddy temp dir")?;
        let caddyfile = format!(
            "{{\n\tadmin off\n\tpersist_config off\n\tskip_install_trust\n\tauto_https disable_redirects\n\tstorage file_system {}\n}}\n\n{site_blocks}\n",
            dir.path().join("data").display()
        );
        let caddyfile_path = dir.path().join("Caddyfile");
        std::fs::write(&caddyfile_path, caddyfile).context("writing the Caddyfile")?;
        let mut process = Process::builder(tool(Tool::Caddy)?)
            .arg("run")
            .arg("--config")
            .arg(&caddyfile_path)
            .arg("--adapter")
            .arg("caddyfile")
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("xdg-data"))
            .env("XDG_CONFIG_HOME", dir.path().join("xdg-config"))
            .start("caddy")?;
        for &port in wait_ports {
            process.wait_for_port(port, START_TIMEOUT).await?;
        }
        Ok(Self { process, dir })
    }

    /// The folder holding the Caddyfile and Caddy's data; with `tls internal`, the root
    /// certificate to trust is at `data/pki/authorities/local/root.crt` below it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The Caddy process.
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }
}
