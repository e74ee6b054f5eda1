//! `nats-server` in decentralized JWT mode: the operator, the system account and the swarm account
//! from [`hyperhive_nats_creds::init`], the controller's credential, and agents' and hives'
//! credentials (each in an account of its own) minted on demand. The server includes the
//! fragment `init` wrote by path and runs the full account resolver with its directory in a temp
//! dir of its own (kept across [`Nats::start_again`]). A mint here that adds an account is followed
//! by a reload, as an operator using `nats agent-creds` may do; tests of accounts given to the
//! running server through the system account (what the controller does) use
//! `swarm_controller::accounts` instead. Every client must present a credential.
//!
//! [`NatsJwt::start_cluster`] starts the same as a JetStream cluster of `n` nodes (routes on
//! loopback, server names `n0`, `n1`...): one `init`, every node with its own store and its own
//! resolver directory. Node 0 includes the fragment `init` wrote; every other node includes a copy
//! of it in its own temp dir whose `dir:` names its own resolver directory, rewritten before
//! every reload and restart. Nodes can be killed and started again one by one
//! ([`NatsJwt::stop_node`], [`NatsJwt::start_node_again`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use hyperhive_nats_creds::{AgentName, DEFAULT_AGENT_TTL, HiveName, Minted, Validity, files};
use tempfile::TempDir;

use crate::nats::Nats;
use crate::ports::free_port;

/// How long a cluster may take to elect its JetStream meta leader (or a restarted node to rejoin).
const JETSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one `$JS.API.INFO` request waits for its answer while the kit polls.
const JS_INFO_TIMEOUT: Duration = Duration::from_secs(1);
/// The cluster's name (every node the same).
const CLUSTER_NAME: &str = "hyperhive-test";
/// The copy of the fragment a node after the first includes, in its own temp dir.
const NODE_FRAGMENT: &str = "auth.conf";
/// The stream the kit creates and deletes to learn that the cluster places streams on every node.
const PLACEMENT_PROBE: &str = "TESTKIT_PLACEMENT_PROBE";

/// One server of the cluster (the only one of [`NatsJwt::start`]).
#[derive(Debug)]
struct Node {
    // Field order is drop order: the server is stopped before its resolver directory is removed.
    nats: Nats,
    /// The node's own resolver directory; `None` for node 0, which uses `NatsJwt::resolver`.
    resolver: Option<TempDir>,
}

/// A running JWT-mode `nats-server` (or cluster of them) and the directory `nats init` wrote for it.
#[derive(Debug)]
pub struct NatsJwt {
    // Field order is drop order: the servers are stopped before their directories are removed.
    nodes: Vec<Node>,
    creds: TempDir,
    /// The full resolver's directory of node 0: the server's own, kept across a restart.
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
        Self::start_nodes(1, extra).await
    }

    /// Starts `n` nodes (at least one) as one JetStream cluster with JWT auth as
    /// [`NatsJwt::start`]'s, all at once, and waits until JetStream answers through the cluster
    /// (its meta leader is elected). [`NatsJwt::url`] then lists every node.
    ///
    /// # Errors
    /// As [`NatsJwt::start`], or JetStream not answering within 30 s.
    pub async fn start_cluster(n: usize) -> anyhow::Result<Self> {
        let nats = Self::start_nodes(n, "").await?;
        if n > 1 {
            let client = nats.controller_client().await?;
            wait_for_jetstream("the cluster's JetStream to answer", &client).await?;
            nats.wait_for_meta_peers().await?;
        }
        Ok(nats)
    }

    async fn start_nodes(n: usize, extra: &str) -> anyhow::Result<Self> {
        anyhow::ensure!(n >= 1, "a cluster has at least one node");
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
        let route_ports = distinct_free_ports(if n > 1 { n } else { 0 });
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let mut config = format!("server_name: \"{}\"\n", node_name(i));
            if n > 1 {
                let routes: Vec<String> = (0..n)
                    .filter(|&j| j != i)
                    .map(|j| format!("\"nats-route://127.0.0.1:{}\"", route_ports[j]))
                    .collect();
                config.push_str(&format!(
                    "cluster {{\n  name: \"{CLUSTER_NAME}\"\n  listen: \"127.0.0.1:{}\"\n  routes: [{}]\n}}\n",
                    route_ports[i],
                    routes.join(", ")
                ));
            }
            let (own_include, own_resolver) = if i == 0 {
                (include.clone(), None)
            } else {
                let dir = tempfile::Builder::new()
                    .prefix("hyperhive-nats-resolver-")
                    .tempdir()
                    .context("creating a node's resolver temp dir")?;
                (PathBuf::from(NODE_FRAGMENT), Some(dir))
            };
            config.push_str(&format!("include \"{}\"\n{extra}", own_include.display()));
            nodes.push(Node { nats: Nats::configured(&config)?, resolver: own_resolver });
        }
        let mut nats = Self { nodes, creds, resolver };
        nats.write_node_fragments()?;
        // Together: a node of a cluster may wait for its peers' routes before it is ready.
        futures::future::try_join_all(nats.nodes.iter_mut().map(|node| node.nats.start_again())).await?;
        Ok(nats)
    }

    /// Every node's URL, comma-separated (`nats://127.0.0.1:PORT` for one server), as the `nats`
    /// CLI and `hyperhive_nats_creds::servers::parse_server_urls` write a cluster. async-nats 0.49's
    /// `connect(&str)` parses one URL only (a list fails: "NATS server URL is invalid"), so a
    /// client of a cluster connects with [`NatsJwt::urls`] (or splits this at the commas).
    pub fn url(&self) -> String {
        self.urls().join(",")
    }

    /// Every node's URL (what async-nats's `connect` takes to fail over between them).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|node| node.nats.url()).collect()
    }

    /// Node `i`'s URL.
    ///
    /// # Panics
    /// When there is no node `i`.
    pub fn node_url(&self, i: usize) -> String {
        self.nodes[i].nats.url()
    }

    /// How many nodes there are (1 for [`NatsJwt::start`]).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node `i`'s server name (`n0`, `n1`...).
    pub fn node_name(&self, i: usize) -> String {
        node_name(i)
    }

    /// The node whose server name is `name`.
    pub fn node_of_server_name(&self, name: &str) -> Option<usize> {
        let i: usize = name.strip_prefix('n')?.parse().ok()?;
        (i < self.nodes.len() && node_name(i) == name).then_some(i)
    }

    /// The node `client` is connected to (from the server's INFO).
    pub fn connected_node(&self, client: &async_nats::Client) -> Option<usize> {
        self.node_of_server_name(&client.server_info().server_name)
    }

    /// The node leading `stream`'s Raft group, as the stream's info says; `None` when the info
    /// cannot be had (no quorum, no answer) or names no leader.
    pub async fn stream_leader(&self, js: &async_nats::jetstream::Context, stream: &str) -> Option<usize> {
        let info = js.get_stream(stream).await.ok()?.info().await.ok()?.clone();
        self.node_of_server_name(info.cluster.as_ref()?.leader.as_deref()?)
    }

    /// Kills node `i` at once (SIGKILL); its store and resolver directory are kept.
    ///
    /// # Panics
    /// When there is no node `i`.
    pub fn stop_node(&mut self, i: usize) {
        self.nodes[i].nats.stop();
    }

    /// Whether node `i` runs (was started and not stopped since).
    ///
    /// # Panics
    /// When there is no node `i`.
    pub fn node_running(&self, i: usize) -> bool {
        self.nodes[i].nats.is_running()
    }

    /// Starts node `i` again after [`NatsJwt::stop_node`] (same port, store and resolver
    /// directory, the current accounts) and, in a cluster, waits until a client connected to that
    /// node alone gets an answer from JetStream (it has rejoined the cluster).
    ///
    /// # Errors
    /// The node is running, does not start, or JetStream does not answer through it in 30 s.
    pub async fn start_node_again(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(i < self.nodes.len(), "there is no node {i}");
        self.write_node_fragments()?;
        self.nodes[i].nats.start_again().await?;
        if self.nodes.len() > 1 {
            let client = self.controller_client_at(i).await?;
            wait_for_jetstream(&format!("JetStream to answer through the restarted node {i}"), &client).await?;
            self.wait_for_meta_peers().await?;
        }
        Ok(())
    }

    /// Waits until the JetStream meta leader counts every running node as a current peer: before
    /// that, an R`n` stream may be refused ("no suitable peers for placement") although
    /// JetStream answers. Asks `$SYS.REQ.SERVER.PING.JSZ` (the meta leader alone answers) as the
    /// system account.
    async fn wait_for_meta_peers(&self) -> anyhow::Result<()> {
        let creds = hyperhive_nats_creds::system_creds(self.creds.path())?;
        let client = async_nats::ConnectOptions::with_credentials_file(creds).await?.connect(self.urls()).await?;
        let running: Vec<String> =
            (0..self.nodes.len()).filter(|&i| self.nodes[i].nats.is_running()).map(node_name).collect();
        let last = std::sync::Mutex::new(String::new());
        let waited =
            crate::wait::wait_until("the meta leader to count every running node current", JETSTREAM_TIMEOUT, || {
                let ask = client.request("$SYS.REQ.SERVER.PING.JSZ", r#"{"leader_only":true}"#.into());
                let (running, last) = (&running, &last);
                async move {
                    let reply = tokio::time::timeout(JS_INFO_TIMEOUT, ask).await.ok()?.ok()?;
                    *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        String::from_utf8_lossy(&reply.payload).into_owned();
                    let jsz: serde_json::Value = serde_json::from_slice(&reply.payload).ok()?;
                    let meta = &jsz["data"]["meta_cluster"];
                    let leader = meta["leader"].as_str()?;
                    let replicas = meta["replicas"].as_array()?;
                    let current = |name: &str| {
                        name == leader
                            || replicas
                                .iter()
                                .any(|r| r["name"] == name && r["current"] == true && r["offline"] != true)
                    };
                    running.iter().all(|name| current(name)).then_some(())
                }
            })
            .await;
        let last = last.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        waited.with_context(|| format!("the meta leader's last answer: {last}"))?;
        self.wait_for_credential_on_running_nodes().await?;
        self.wait_for_placement(running.len()).await
    }

    /// Waits until every running node takes the controller's credential, each asked alone: in a
    /// loaded run a node has refused it ("authorization violation") just after the meta leader
    /// counted it current, and every later connection of a test may land on any node. When one
    /// never does, the error carries that node's log (the server says there why it refused).
    async fn wait_for_credential_on_running_nodes(&self) -> anyhow::Result<()> {
        for i in (0..self.nodes.len()).filter(|&i| self.nodes[i].nats.is_running()) {
            let what = format!("node {i} to take the controller's credential");
            crate::wait::wait_until_ok(&what, JETSTREAM_TIMEOUT, || async {
                self.controller_client_at(i).await.map_err(|e| format!("{e:#}"))
            })
            .await
            .with_context(|| format!("node {i}'s log ends with:\n{}", self.nodes[i].nats.log_tail(20)))?;
        }
        Ok(())
    }

    /// Waits until the cluster places a stream on `replicas` nodes: the meta leader may count a
    /// node current before it has that node's statistics, and refuses placement on it ("peer
    /// offline") until then. Creates and deletes a probe stream until the creation is taken.
    async fn wait_for_placement(&self, replicas: usize) -> anyhow::Result<()> {
        let js = async_nats::jetstream::new(self.controller_client().await?);
        let probe = async_nats::jetstream::stream::Config {
            name: PLACEMENT_PROBE.to_owned(),
            subjects: vec![format!("testkit.{PLACEMENT_PROBE}")],
            num_replicas: replicas,
            storage: async_nats::jetstream::stream::StorageType::File,
            max_bytes: 1024,
            ..Default::default()
        };
        crate::wait::wait_until_ok(
            "the cluster to place a stream on every running node",
            JETSTREAM_TIMEOUT,
            || async {
                match tokio::time::timeout(JS_INFO_TIMEOUT, js.create_stream(probe.clone())).await {
                    Ok(created) => created.map(drop).map_err(|e| e.to_string()),
                    Err(_) => Err(format!("no answer within {JS_INFO_TIMEOUT:?}")),
                }
            },
        )
        .await?;
        js.delete_stream(PLACEMENT_PROBE).await.context("deleting the placement probe stream")?;
        Ok(())
    }

    /// A connection with the controller's credential to node `i` only (servers the node
    /// advertises are ignored, so the client never fails over to another).
    ///
    /// # Errors
    /// When the credential cannot be read or the node refuses it (or is down).
    pub async fn controller_client_at(&self, i: usize) -> anyhow::Result<async_nats::Client> {
        let url = self.nodes.get(i).with_context(|| format!("there is no node {i}"))?.nats.url();
        let options = async_nats::ConnectOptions::with_credentials_file(self.controller_creds()).await?;
        Ok(options.ignore_discovered_servers().connect(url).await?)
    }

    /// Node 0's server handle (to stop it and start it again on the same port and store; in a
    /// cluster prefer [`NatsJwt::stop_node`] and [`NatsJwt::start_node_again`]).
    /// The server handle (to stop and start it again on the same port and store).
    pub fn nats(&mut self) -> &mut Nats {
        &mut self.nodes[0].nats
    }

    /// The directory `init` wrote (what `nats agent-creds --from` takes).
    pub fn creds_dir(&self) -> &Path {
        self.creds.path()
    }

    /// The full resolver's directory, where the server (node 0) keeps every account JWT it was given.
    pub fn resolver_dir(&self) -> &Path {
        self.resolver.path()
    }

    /// Node `i`'s resolver directory.
    ///
    /// # Panics
    /// When there is no node `i`.
    pub fn node_resolver_dir(&self, i: usize) -> &Path {
        self.nodes[i].resolver.as_ref().map_or(self.resolver.path(), TempDir::path)
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
        Ok(options.connect(self.urls()).await?)
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
    /// hive's own credential, minted for the agents the status names (a hive runs the agents it
    /// was minted for), on its own key of `hive-status`, waiting for the ack.
    ///
    /// # Errors
    /// Minting, connecting or the publish failed (a refused write is an error).
    pub async fn publish_as_hive(&self, hive: &str, status: Vec<u8>) -> anyhow::Result<()> {
        let name = HiveName::parse(hive)?;
        let document: serde_json::Value = serde_json::from_slice(&status).unwrap_or_default();
        // Names that are no agent's (a hostile status) cannot be minted for: left out.
        let agents: Vec<&str> = document["agents"]
            .as_object()
            .map(|a| a.keys().map(String::as_str).filter(|n| AgentName::parse(n).is_ok()).collect())
            .unwrap_or_default();
        let creds = self.mint_hive(hive, &agents).await?;
        let client = async_nats::ConnectOptions::with_credentials_file(creds)
            .await?
            .custom_inbox_prefix(hyperhive_nats_objects::hive_inbox_prefix(&name))
            .connect(self.urls())
            .await?;
        // The context (and so the connection) must outlive the ack.
        let js = async_nats::jetstream::new(client);
        let ack = js.publish(hyperhive_nats_objects::hive_status_subject(&name), status.into()).await?;
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
            .custom_inbox_prefix(hyperhive_nats_objects::agent_inbox_prefix(&name))
            .connect(self.urls())
            .await?)
    }

    /// Makes every running node load the fragment again (SIGHUP), each node after the first from
    /// a fresh copy: after a change to the `init` directory made outside the kit (a revocation).
    ///
    /// # Errors
    /// A copy cannot be written, or a node does not confirm the reload.
    pub async fn reload(&self) -> anyhow::Result<()> {
        self.write_node_fragments()?;
        for node in self.nodes.iter().filter(|node| node.nats.is_running()) {
            node.nats.reload().await?;
        }
        Ok(())
    }

    async fn load(&self, minted: Minted) -> anyhow::Result<()> {
        if minted.changed_accounts() { self.reload().await } else { Ok(()) }
    }

    /// Writes each node's (after the first) copy of the fragment, its resolver `dir:` its own.
    fn write_node_fragments(&self) -> anyhow::Result<()> {
        if self.nodes.len() < 2 {
            return Ok(());
        }
        let path = self.creds.path().join(files::SERVER_CONF);
        let fragment = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let own_dir = format!("dir: \"{}\"", self.resolver.path().display());
        anyhow::ensure!(
            fragment.matches(&own_dir).count() == 1,
            "the fragment {} does not name the resolver directory once as {own_dir}",
            path.display()
        );
        for node in &self.nodes[1..] {
            let dir = node.resolver.as_ref().context("a node after the first has its own resolver directory")?;
            let copy = fragment.replace(&own_dir, &format!("dir: \"{}\"", dir.path().display()));
            let target = node.nats.dir().join(NODE_FRAGMENT);
            // Written whole, then renamed: a node reloading meanwhile reads the old or the new one.
            let partial = node.nats.dir().join(format!("{NODE_FRAGMENT}.partial"));
            std::fs::write(&partial, copy).with_context(|| format!("writing {}", partial.display()))?;
            std::fs::rename(&partial, &target).with_context(|| format!("renaming to {}", target.display()))?;
        }
        Ok(())
    }

    fn creds_path(&self, name: &str) -> PathBuf {
        self.creds.path().join(format!("{name}.creds"))
    }
}

/// Node `i`'s server name.
fn node_name(i: usize) -> String {
    format!("n{i}")
}

/// `n` free loopback ports, no two the same.
fn distinct_free_ports(n: usize) -> Vec<u16> {
    let mut ports: Vec<u16> = Vec::with_capacity(n);
    while ports.len() < n {
        let port = free_port();
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    ports
}

/// Polls `$JS.API.INFO` through `client` until JetStream answers (a cluster's meta leader is
/// elected and the client's server reaches it).
async fn wait_for_jetstream(what: &str, client: &async_nats::Client) -> anyhow::Result<()> {
    let js = async_nats::jetstream::new(client.clone());
    crate::wait::wait_until(what, JETSTREAM_TIMEOUT, || {
        let js = js.clone();
        // The client's request timeout (10 s by default), not the context's, bounds an API
        // request: one sent before the meta leader is elected gets no answer.
        async move { tokio::time::timeout(JS_INFO_TIMEOUT, js.query_account()).await.ok()?.ok() }
    })
    .await
    .map(drop)
}
