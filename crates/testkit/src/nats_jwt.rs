//! `nats-server` in decentralized JWT mode: the operator, the system account and the swarm account
//! from [`hyperhive_nats_creds::init`], the controller's credential, and agents' and hives'
//! credentials (each in an account of its own) minted on demand. The server includes the
//! fragment `init` wrote by path and runs the full account resolver with its directory in a temp
//! dir of its own (kept across [`Nats::start_again`]). A mint here that adds an account is followed
//! by a reload, as an operator using `nats agent-creds` may do; tests of accounts given to the
//! running server through the system account (what the controller does) use
//! `swarm_controller::accounts` instead. Every client must present a credential.

use std::path::{Path, PathBuf};

use anyhow::Context;
use hyperhive_nats_creds::{AgentName, DEFAULT_AGENT_TTL, HiveName, Minted, Validity, files};
use tempfile::TempDir;

use crate::nats::Nats;

/// A running JWT-mode `nats-server` and the directory `nats init` wrote for it.
#[derive(Debug)]
pub struct NatsJwt {
    // Field order is drop order: the server is stopped before its directories are removed.
    nats: Nats,
    creds: TempDir,
    /// The full resolver's directory: the server's own, kept across a restart.
    resolver: TempDir,
}

impl NatsJwt {
    /// Runs `init` into a temp dir and starts a server that includes its config fragment.
    ///
    /// # Errors
    /// When init fails, `nats-server` is missing (run scripts/setup) or rejects the config.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with_config("").await
    }

    /// [`NatsJwt::start`] with `extra` appended to the server's config (e.g. `http:` for the
    /// monitoring endpoint a benchmark reads).
    ///
    /// # Errors
    /// As [`NatsJwt::start`].
    pub async fn start_with_config(extra: &str) -> anyhow::Result<Self> {
        let creds = tempfile::Builder::new()
            .prefix("hyperhive-nats-creds-")
            .tempdir()
            .context("creating the credentials temp dir")?;
        let resolver = tempfile::Builder::new()
            .prefix("hyperhive-nats-resolver-")
            .tempdir()
            .context("creating the resolver temp dir")?;
        let summary = hyperhive_nats_creds::init_with_resolver_dir(creds.path(), resolver.path())?;
        // nats-server resolves `include` relative to the including file, which lies in the
        // server's own temp dir beside this one.
        let conf_name = summary.server_conf.file_name().context("the fragment has a file name")?;
        let creds_name = creds.path().file_name().context("the temp dir has a name")?;
        let include = Path::new("..").join(creds_name).join(conf_name);
        let nats = Nats::start_with_config(&format!("include \"{}\"\n{extra}", include.display())).await?;
        Ok(Self { nats, creds, resolver })
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

    /// The full resolver's directory, where the server keeps every account JWT it was given.
    pub fn resolver_dir(&self) -> &Path {
        self.resolver.path()
    }

    /// The controller's credential: everything inside the swarm account.
    pub fn controller_creds(&self) -> PathBuf {
        self.creds.path().join(files::CONTROLLER_CREDS)
    }

    /// A connection with the controller's credential: what an operator (or a test standing in
    /// for the controller) uses to reach every stream and bucket.
    ///
    /// # Errors
    /// When the credential cannot be read or the server refuses it.
    pub async fn controller_client(&self) -> anyhow::Result<async_nats::Client> {
        let options = async_nats::ConnectOptions::with_credentials_file(self.controller_creds()).await?;
        Ok(options.connect(self.url()).await?)
    }

    /// Mints `agent`'s credential (default lifetime), loads its account into the server if it
    /// is new, and returns the credential's path.
    ///
    /// # Errors
    /// An invalid agent name, a failed write, or a server that does not reload.
    pub async fn mint_agent(&self, agent: &str) -> anyhow::Result<PathBuf> {
        let name = AgentName::parse(agent)?;
        let out = self.creds_path(&format!("agent-{agent}"));
        let minted = hyperhive_nats_creds::mint_agent_creds(self.creds.path(), &name, DEFAULT_AGENT_TTL, &out)?;
        self.load(minted).await?;
        Ok(out)
    }

    /// Mints the credentials of many agents at once (one server reload for all), returning their
    /// paths in order.
    ///
    /// # Errors
    /// As [`NatsJwt::mint_agent`].
    pub async fn mint_agents(&self, agents: &[AgentName]) -> anyhow::Result<Vec<PathBuf>> {
        let outs: Vec<(AgentName, PathBuf)> =
            agents.iter().map(|a| (a.clone(), self.creds_path(&format!("agent-{a}")))).collect();
        let minted = hyperhive_nats_creds::mint_many_agent_creds(self.creds.path(), &outs, DEFAULT_AGENT_TTL)?;
        self.load(minted).await?;
        Ok(outs.into_iter().map(|(_, out)| out).collect())
    }

    /// Mints `agent`'s credential with an explicit validity (e.g. one already expired).
    ///
    /// # Errors
    /// As [`NatsJwt::mint_agent`].
    pub async fn mint_agent_with(&self, agent: &str, validity: Validity) -> anyhow::Result<PathBuf> {
        let name = AgentName::parse(agent)?;
        let out = self.creds_path(&format!("agent-{agent}"));
        let minted = hyperhive_nats_creds::write_agent_creds(self.creds.path(), &name, validity, &out)?;
        self.load(minted).await?;
        Ok(out)
    }

    /// Mints `hive`'s credential, allowed to queue todos for `agents`, and returns its path.
    ///
    /// # Errors
    /// As [`NatsJwt::mint_agent`].
    pub async fn mint_hive(&self, hive: &str, agents: &[&str]) -> anyhow::Result<PathBuf> {
        let name = HiveName::parse(hive)?;
        let agents = agents.iter().map(|a| AgentName::parse(a)).collect::<Result<Vec<_>, _>>()?;
        let out = self.creds_path(&format!("hive-{hive}"));
        let minted = hyperhive_nats_creds::mint_hive_creds(self.creds.path(), &name, &agents, DEFAULT_AGENT_TTL, &out)?;
        self.load(minted).await?;
        Ok(out)
    }

    /// Publishes `status` (a hive status document, JSON) as `hive`'s hive-c0re does: with the
    /// hive's own credential, on its own key of `hive-status`, waiting for the ack.
    ///
    /// # Errors
    /// Minting, connecting or the publish failed (a refused write is an error).
    pub async fn publish_as_hive(&self, hive: &str, status: Vec<u8>) -> anyhow::Result<()> {
        let name = HiveName::parse(hive)?;
        let creds = self.mint_hive(hive, &[]).await?;
        let client = async_nats::ConnectOptions::with_credentials_file(creds)
            .await?
            .custom_inbox_prefix(hyperhive_nats_creds::hive_inbox_prefix(&name))
            .connect(self.url())
            .await?;
        // The context (and so the connection) must outlive the ack.
        let js = async_nats::jetstream::new(client);
        let ack = js.publish(hyperhive_nats_creds::hive_status_subject(&name), status.into()).await?;
        ack.await?;
        Ok(())
    }

    /// A client signed in as `agent` (its credential minted first), with its own inbox prefix.
    ///
    /// # Errors
    /// Minting or connecting failed.
    pub async fn agent_client(&self, agent: &str) -> anyhow::Result<async_nats::Client> {
        let name = AgentName::parse(agent)?;
        let creds = self.mint_agent(agent).await?;
        Ok(async_nats::ConnectOptions::with_credentials_file(creds)
            .await?
            .custom_inbox_prefix(hyperhive_nats_creds::agent_inbox_prefix(&name))
            .connect(self.url())
            .await?)
    }

    async fn load(&self, minted: Minted) -> anyhow::Result<()> {
        if minted.changed_accounts() { self.nats.reload().await } else { Ok(()) }
    }

    fn creds_path(&self, name: &str) -> PathBuf {
        self.creds.path().join(format!("{name}.creds"))
    }
}
