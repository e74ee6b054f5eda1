//! `nats-server` in decentralized JWT mode (DESIGN 4.2): the operator, account and system
//! account from [`hyperhive_nats_creds::init`], the controller's credential, and agents'
//! least-privilege credentials minted on demand. Every client must present a credential.

use std::path::{Path, PathBuf};

use anyhow::Context;
use hyperhive_nats_creds::{AgentName, DEFAULT_AGENT_TTL, Validity, files};
use tempfile::TempDir;

use crate::nats::Nats;

/// A running JWT-mode `nats-server` and the directory `nats init` wrote for it.
#[derive(Debug)]
pub struct NatsJwt {
    // Field order is drop order: the server is stopped before the credentials are removed.
    nats: Nats,
    creds: TempDir,
}

impl NatsJwt {
    /// Runs `init` into a temp dir and starts a server with its config fragment.
    ///
    /// # Errors
    /// When init fails, `nats-server` is missing (run scripts/setup) or rejects the config.
    pub async fn start() -> anyhow::Result<Self> {
        let creds = tempfile::Builder::new()
            .prefix("hyperhive-nats-creds-")
            .tempdir()
            .context("creating the credentials temp dir")?;
        let summary = hyperhive_nats_creds::init(creds.path())?;
        let fragment = std::fs::read_to_string(&summary.server_conf)
            .with_context(|| format!("reading {}", summary.server_conf.display()))?;
        let nats = Nats::start_with_config(&fragment).await?;
        Ok(Self { nats, creds })
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.nats.url()
    }

    /// The server handle (to stop and start it again on the same port and store).
    pub fn nats(&mut self) -> &mut Nats {
        &mut self.nats
    }

    /// The directory `init` wrote (what `nats agent-creds --from` takes).
    pub fn creds_dir(&self) -> &Path {
        self.creds.path()
    }

    /// The controller's credential: everything inside the swarm account.
    pub fn controller_creds(&self) -> PathBuf {
        self.creds.path().join(files::CONTROLLER_CREDS)
    }

    /// Mints `agent`'s credential (default lifetime) and returns its path.
    ///
    /// # Errors
    /// An invalid agent name or a failed write.
    pub fn mint_agent(&self, agent: &str) -> anyhow::Result<PathBuf> {
        let name = AgentName::parse(agent)?;
        let out = self.agent_creds_path(agent);
        hyperhive_nats_creds::mint_agent_creds(self.creds.path(), &name, DEFAULT_AGENT_TTL, &out)?;
        Ok(out)
    }

    /// Mints `agent`'s credential with an explicit validity (e.g. one already expired).
    ///
    /// # Errors
    /// As [`NatsJwt::mint_agent`].
    pub fn mint_agent_with(&self, agent: &str, validity: Validity) -> anyhow::Result<PathBuf> {
        let name = AgentName::parse(agent)?;
        let out = self.agent_creds_path(agent);
        hyperhive_nats_creds::write_agent_creds(self.creds.path(), &name, validity, &out)?;
        Ok(out)
    }

    fn agent_creds_path(&self, agent: &str) -> PathBuf {
        self.creds.path().join(format!("agent-{agent}.creds"))
    }
}
