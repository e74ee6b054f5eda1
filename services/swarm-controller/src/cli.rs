//! The `swarm-controller` command line: the daemon (default) and the NATS credential helpers.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hyperhive_nats_creds::Minted;
use hyperhive_schedule::{AgentName, HiveName};

/// The swarm-level daemon: schedules in NATS, an HTTP API on a unix socket. Every bad setting is
/// reported at start, one line each; durations are written like `30s` or `5m`.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "The swarm-level daemon: schedules in NATS, an HTTP API on a unix socket",
    after_help = "With no subcommand (or `serve`) it runs the daemon, configured only by the environment:\n  \
SWARM_CONTROLLER_SOCKET  unix socket of the API (default /run/swarm-controller/controller.sock);\n                           \
its directory must hold nothing else\n  \
SWARM_NATS_URL           NATS server, e.g. nats://127.0.0.1:4222, or a cluster's nodes separated by\n                           \
commas (required)\n  \
SWARM_NATS_CREDS         the controller's .creds file from `nats init` (optional)\n  \
SWARM_NATS_REPLICAS      copies of every stream and bucket: 1 (default, one server) or 3 (a cluster)\n  \
SWARM_RECONCILE_EVERY    time between reconcile passes, e.g. 60s or 5m (default 60s); the old\n                           \
SWARM_RECONCILE_SECS (whole seconds) is read, with a warning, for this release\n  \
SWARM_HIVES_FILE         the hive directory, JSON {\"<hive>\": {description, labels, xkey}} (optional;\n                           \
without it the swarm has no hives)\n  \
SWARM_NATS_DIR           the directory `nats init` wrote (optional; needed to destroy an agent,\n                           \
which revokes its credentials)\n  \
SWARM_SECRETS_KEY_FILE   the secret store's key, from `swarm-controller secrets-key` (optional;\n                           \
needed to provision agents)\n  \
SWARM_STATE_DIR          the state directory; holds webhook-secret, made at first start (optional;\n                           \
needed for the forge webhook)\n  \
SWARM_FORGE_*            the forge and the swarm's organisation on it (docs/swarm/forge.md)\n  \
SWARM_CONTROL_IDENTITY   the host identity `pair` wrote (default: control-identity.json in\n                           \
SWARM_STATE_DIR, when there); with one the daemon holds a link to the control plane\n  \
SWARM_REMOTE_RATE        requests a second each control-plane client may send (default 20)\n  \
RUST_LOG                 log filter (default info)"
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (the default).
    Serve,
    /// Make every key, credential and secret a new swarm needs, in one directory: the NATS
    /// operator and accounts (nats/, with controller.creds and nats-server.conf), the secret
    /// store's key, the deploy key, the store CA and the SSO bridge's token (controller/), and per
    /// hive its NATS credential, its xkey and its agents' credentials (hives/HIVE/). Secrets are
    /// 0600, directories 0700. It prints (and writes to README.txt and layout.json) which host and
    /// which NixOS option or variable takes each file, and the public keys to pin. Refuses to
    /// overwrite: when any entry it would write exists, nothing is written.
    Init {
        /// The directory to write (created if absent; may exist if it holds none of nats/,
        /// controller/, hives/, README.txt, layout.json).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// A hive and the agents it runs, e.g. `--hive hive1:alice,bob` (repeat for each hive;
        /// `--hive hive2` for a hive with no agents yet). Names match ^[a-z][a-z0-9-]{0,31}$ and an
        /// agent belongs to one hive.
        #[arg(long = "hive", value_name = "HIVE[:AGENT,AGENT...]", required = true)]
        hives: Vec<String>,
        /// Where nats-server keeps the account JWTs it is given, on the NATS host (absolute).
        #[arg(long, value_name = "PATH", default_value = hyperhive_nats_creds::DEFAULT_RESOLVER_DIR)]
        resolver_dir: PathBuf,
        /// How long the hives' and agents' NATS credentials are valid, e.g. 30d, 12h, 90m.
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_ttl)]
        ttl: Duration,
        /// The store CA certificate's common name.
        #[arg(long, value_name = "NAME", default_value = "hyperhive store CA")]
        ca_name: String,
    },
    /// Make NATS credentials for the swarm.
    #[command(subcommand)]
    Nats(NatsCommand),
    /// Write a new key for the secret store (KV `swarm-secrets`) to FILE, mode 0600, for
    /// SWARM_SECRETS_KEY_FILE. Refuses to replace an existing file: every stored secret is sealed
    /// under the key, and a lost key loses them all, so keep a copy offline.
    SecretsKey {
        /// The file to write (must not exist).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Write a new deploy key to FILE (mode 0600, for SWARM_DEPLOY_KEY_FILE) and print its public
    /// key, which every hive pins (HIVE_C0RE_CONTROLLER_KEYS); with --public, print the public key
    /// of an existing key file. Refuses to replace a file: hives apply only deploys this key signed.
    #[command(group = clap::ArgGroup::new("file").required(true))]
    DeployKey {
        /// The file to write (must not exist).
        #[arg(long, value_name = "FILE", group = "file")]
        out: Option<PathBuf>,
        /// An existing key file whose public key to print.
        #[arg(long, value_name = "FILE", group = "file")]
        public: Option<PathBuf>,
    },
    /// Pair this controller with a control plane as a host, once: redeems CODE (from
    /// `agents-control code --host`) and writes the identity (mode 0600) to --identity, else
    /// SWARM_CONTROL_IDENTITY, else control-identity.json in SWARM_STATE_DIR. The daemon then
    /// holds a link to the control plane and answers paired clients (`swarmctl --via`) with the
    /// socket's rights.
    Pair {
        /// The host code.
        code: String,
        /// The name clients see for this host (`swarmctl --via ... --host NAME`). Absent: the
        /// name the code suggests (`agents-control code --host --name NAME`), else
        /// "swarm-controller".
        #[arg(long)]
        name: Option<String>,
        /// Where to write the identity (must not exist).
        #[arg(long, value_name = "FILE")]
        identity: Option<PathBuf>,
    },
    /// Make the swarm's store CA: store-ca.key (mode 0600, for SWARM_STORE_CA_KEY_FILE) and
    /// store-ca.pem (its certificate, for SWARM_STORE_CA_CERT_FILE and for every server that
    /// should accept agents' store certificates) in DIR. Refuses to replace either file.
    StoreCa {
        /// Directory to write into (created if absent).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// The CA certificate's common name.
        #[arg(long, value_name = "NAME", default_value = "hyperhive store CA")]
        name: String,
    },
}

/// Runs `swarm-controller init`: what went where on standard output, the same in DIR/README.txt.
///
/// # Errors
/// One line: a bad name, an entry that exists (nothing written), or the step that failed.
pub fn init(
    out: PathBuf,
    hives: &[String],
    resolver_dir: PathBuf,
    ttl: Duration,
    ca_name: String,
) -> Result<(), String> {
    let hives = crate::init::parse_hives(hives)?;
    let request = crate::init::InitRequest { out, hives, resolver_dir, ttl, ca_name };
    let layout = crate::init::run(&request)?;
    print!("{}", crate::init::describe(&layout, &request.out));
    Ok(())
}

/// Runs `swarm-controller store-ca --out-dir DIR`.
///
/// # Errors
/// The files could not be written (or exist), or the name is unusable.
pub fn write_store_ca(out_dir: &std::path::Path, name: &str) -> Result<(), String> {
    std::fs::create_dir_all(out_dir).map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let files = hyperhive_provision::store_ca::write_ca_files(out_dir, name, std::time::SystemTime::now())
        .map_err(|e| e.to_string())?;
    println!(
        "wrote the store CA's key to {} (mode 0600; set SWARM_STORE_CA_KEY_FILE to it) and its certificate to {} \
         (SWARM_STORE_CA_CERT_FILE, and the CA servers trust for agents' certificates)",
        files.key_file.display(),
        files.cert_file.display()
    );
    Ok(())
}

/// Runs `swarm-controller secrets-key --out FILE`.
///
/// # Errors
/// The file could not be written (or exists).
pub fn write_secrets_key(out: &std::path::Path) -> Result<(), String> {
    crate::secrets::SecretsKey::generate().write_new(out).map_err(|e| e.to_string())?;
    println!("wrote a new secret-store key to {} (mode 0600); set SWARM_SECRETS_KEY_FILE to it", out.display());
    Ok(())
}

/// Runs `swarm-controller deploy-key --out FILE` or `--public FILE`: the public key on standard
/// output (alone, for scripts), what to do with it on standard error.
///
/// # Errors
/// The file could not be written (or exists), or read as a deploy key.
pub fn deploy_key(out: Option<&std::path::Path>, public: Option<&std::path::Path>) -> Result<(), String> {
    use crate::lifecycle::deploy_key;
    let key = match (out, public) {
        (Some(out), _) => {
            let key = deploy_key::write_new(out)?;
            eprintln!(
                "wrote a new deploy key to {} (mode 0600); set SWARM_DEPLOY_KEY_FILE to it and pin the public key \
                 below on every hive (HIVE_C0RE_CONTROLLER_KEYS)",
                out.display()
            );
            key
        }
        (None, Some(file)) => deploy_key::load(file)?.public_key(),
        (None, None) => return Err("give --out FILE (a new key) or --public FILE (an existing one)".into()),
    };
    println!("{key}");
    Ok(())
}

/// `swarm-controller nats ...`.
#[derive(Debug, Subcommand)]
pub enum NatsCommand {
    /// Write the operator, system and swarm account keys and JWTs, a nats-server config fragment
    /// (the full account resolver, keeping its JWTs in --resolver-dir, with every account
    /// preloaded), controller.creds, system.creds (a system-account user, to give the running
    /// server new and revoked accounts) and an empty accounts/ directory into DIR (secrets 0600);
    /// refuses to overwrite. Keep DIR offline: its operator.seed signs every agent's and hive's
    /// account.
    Init {
        /// Directory to write into (created if absent; must not already hold these files).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Where nats-server keeps the account JWTs it is given, on the NATS host: an absolute
        /// path it may create and write (kept across restarts).
        #[arg(long, value_name = "PATH", default_value = hyperhive_nats_creds::DEFAULT_RESOLVER_DIR)]
        resolver_dir: PathBuf,
    },
    /// Give the running nats-server every account in DIR, as DIR's system user (what a server
    /// needs after `agent-creds` or `hive-creds` changed an account, instead of a reload).
    PushAccounts {
        /// The directory `nats init` wrote.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// The NATS server, e.g. nats://127.0.0.1:4222.
        #[arg(long, value_name = "URL")]
        url: String,
    },
    /// Mint AGENT's credential, in an account of its own that reaches only its own todo queue,
    /// inbox, terminal and turn subjects and the direct get of its own agent-schedules key. A new
    /// agent's account is added to DIR's nats-server.conf; the running server must be given it
    /// (`nats push-accounts`, a reload or a restart).
    AgentCreds {
        /// The agent's name (^[a-z][a-z0-9-]{0,31}$).
        agent: AgentName,
        /// The directory `nats init` wrote.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Where to write the .creds file (mode 0600, replaced if present).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// How long the credential is valid, e.g. 30d, 12h, 90m.
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_ttl)]
        ttl: Duration,
    },
    /// Mint HIVE's credential (for its hive-c0re), in an account of its own that reaches only its
    /// own hive-status key, its own agents' agent-wanted keys (read and watched through its own
    /// consumer), its own deploy queue, and the todo queues of the agents named with --agent.
    /// A new or changed account is written to DIR's nats-server.conf; the running server must be
    /// given it (`nats push-accounts`, a reload or a restart).
    HiveCreds {
        /// The hive's name (^[a-z][a-z0-9-]{0,31}$).
        hive: HiveName,
        /// The directory `nats init` wrote.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Where to write the .creds file (mode 0600, replaced if present).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// An agent this hive runs, whose todo queue it may publish to (repeat for each).
        #[arg(long = "agent", value_name = "AGENT")]
        agents: Vec<AgentName>,
        /// How long the credential is valid, e.g. 30d, 12h, 90m.
        #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = parse_ttl)]
        ttl: Duration,
    },
}

impl NatsCommand {
    /// Runs the command, printing what it wrote.
    ///
    /// # Errors
    /// The credential library's error, as one line.
    pub fn run(self) -> Result<(), String> {
        match self {
            Self::Init { out, resolver_dir } => {
                let summary =
                    hyperhive_nats_creds::init_with_resolver_dir(&out, &resolver_dir).map_err(|e| e.to_string())?;
                println!("wrote the swarm's NATS credentials to {}", out.display());
                println!("  nats-server config fragment: {}", summary.server_conf.display());
                println!("  resolver directory (on the NATS host): {}", resolver_dir.display());
                println!(
                    "  a cluster node's whole config: {} (copy to each of three nodes with the fragment; \
                     fill in server_name and routes)",
                    out.join(hyperhive_nats_creds::files::CLUSTER_NODE_EXAMPLE).display()
                );
                println!("  controller credential:       {}", summary.controller_creds.display());
                println!(
                    "  system user credential:      {} (adds and revokes accounts; SWARM_NATS_DIR={})",
                    out.join(hyperhive_nats_creds::files::SYSTEM_CREDS).display(),
                    out.display()
                );
                println!("  swarm account:               {}", summary.swarm_account);
            }
            Self::PushAccounts { from, url } => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("starting tokio: {e}"))?;
                let accounts = crate::nats::tenants::Accounts::new(from, url.clone());
                let pushed = runtime.block_on(accounts.push_all()).map_err(|e| e.to_string())?;
                println!("gave {url} all {pushed} accounts");
            }
            Self::AgentCreds { agent, from, out, ttl } => {
                let minted =
                    hyperhive_nats_creds::mint_agent_creds(&from, &agent, ttl, &out).map_err(|e| e.to_string())?;
                report_minted(&format!("agent {agent}"), &from, &out, ttl, minted);
            }
            Self::HiveCreds { hive, from, out, agents, ttl } => {
                let minted = hyperhive_nats_creds::mint_hive_creds(&from, &hive, &agents, ttl, &out)
                    .map_err(|e| e.to_string())?;
                report_minted(&format!("hive {hive}"), &from, &out, ttl, minted);
            }
        }
        Ok(())
    }
}

fn report_minted(who: &str, from: &std::path::Path, out: &std::path::Path, ttl: Duration, minted: Minted) {
    println!("wrote {who}'s credential to {} (valid for {})", out.display(), humantime::format_duration(ttl));
    if minted.changed_accounts() {
        println!(
            "{who}'s account was written to {}: give it to the running nats-server before the \
             credential is used (`swarm-controller nats push-accounts --from {} --url URL`, or \
             reload or restart nats-server with the new file)",
            from.join(hyperhive_nats_creds::files::SERVER_CONF).display(),
            from.display()
        );
    }
}

/// A credential lifetime: a humantime duration of at least one second.
fn parse_ttl(s: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 30d, 12h or 90m"))?;
    if ttl < Duration::from_secs(1) {
        return Err(format!("{s:?} is shorter than one second"));
    }
    Ok(ttl)
}

/// Runs `swarm-controller pair CODE`.
///
/// # Errors
/// A line saying what is wrong (no place for the identity, a client code, a refused pairing).
pub fn pair(code: &str, name: Option<&str>, identity: Option<&std::path::Path>) -> Result<(), String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let path = crate::remote::pair::identity_path(identity, lookup)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting tokio: {e}"))?;
    let name = match name {
        Some(name) => hyperhive_control_link::DeviceName::Chosen(name),
        None => hyperhive_control_link::DeviceName::Default(crate::remote::pair::DEFAULT_NAME),
    };
    let paired = runtime.block_on(crate::remote::pair::pair(code, name, &path))?;
    println!(
        "paired as host {} ({}) with {}; wrote {} (mode 0600). Start (or restart) the daemon: it holds the link \
         while the identity is there",
        paired.device_id,
        paired.name,
        paired.control_url,
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_commands() {
        let cli = Cli::try_parse_from(["swarm-controller"]).unwrap();
        assert!(cli.command.is_none());
        let cli = Cli::try_parse_from(["swarm-controller", "nats", "init", "--out", "/d"]).unwrap();
        match cli.command {
            Some(Command::Nats(NatsCommand::Init { resolver_dir, .. })) => {
                assert_eq!(resolver_dir, PathBuf::from(hyperhive_nats_creds::DEFAULT_RESOLVER_DIR));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["swarm-controller", "nats", "agent-creds", "a1", "--from", "/d", "--out", "/f"])
            .unwrap();
        match cli.command {
            Some(Command::Nats(NatsCommand::AgentCreds { agent, ttl, .. })) => {
                assert_eq!(agent.as_str(), "a1");
                assert_eq!(ttl, Duration::from_secs(30 * 24 * 3600));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_bad_agents_and_ttls_clearly() {
        let bad_agent =
            Cli::try_parse_from(["swarm-controller", "nats", "agent-creds", "Bad", "--from", "/d", "--out", "/f"])
                .unwrap_err()
                .to_string();
        assert!(bad_agent.contains("invalid agent name"), "{bad_agent}");
        for ttl in ["soon", "0s", "500ms"] {
            let err = Cli::try_parse_from([
                "swarm-controller",
                "nats",
                "agent-creds",
                "a",
                "--from",
                "/d",
                "--out",
                "/f",
                "--ttl",
                ttl,
            ])
            .unwrap_err()
            .to_string();
            assert!(err.contains(ttl), "{err}");
        }
    }
}
