//! `swarm-controller init`: every key, credential and secret a new swarm needs, made in one go
//! into one directory, with a note of which host and which NixOS option (or variable) takes each
//! file. It calls the same library functions as the single-purpose commands (`nats init`,
//! `nats agent-creds`, `nats hive-creds`, `secrets-key`, `deploy-key`, `store-ca`, hive-c0re's
//! `keygen`), so what it makes is what they make. It also makes the control plane's key (what
//! agents-control's copies share, for reaching the swarm from afar); the rest of the control
//! plane's setup needs it running (the bucket's keys come from the bucket's provider, and the
//! controller pairs with a code only a running copy makes).
//!
//! Nothing is ever overwritten: every top-level entry it would write is checked before anything
//! is written, and when a step fails after writing began, what it wrote is removed again, so a
//! run either makes the whole directory or leaves it as it found it.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hyperhive_schedule::{AgentName, HiveName};
use rand::RngCore;
use serde::Serialize;

/// The NATS directory (`nats init`'s), below the output directory.
pub const NATS_DIR: &str = "nats";
/// The controller host's own secrets, below the output directory.
pub const CONTROLLER_DIR: &str = "controller";
/// One directory per hive, below the output directory.
pub const HIVES_DIR: &str = "hives";
/// The human summary.
pub const README: &str = "README.txt";
/// The machine-readable summary.
pub const LAYOUT: &str = "layout.json";
/// The secret store's key, in [`CONTROLLER_DIR`].
pub const SECRETS_KEY: &str = "swarm-secrets.key";
/// The deploy key, in [`CONTROLLER_DIR`].
pub const DEPLOY_KEY: &str = "swarm-deploy.key";
/// The SSO bridge's bearer token, in [`CONTROLLER_DIR`].
pub const SSO_TOKEN: &str = "sso-bridge.token";
/// The control plane's own files, below the output directory.
pub const CONTROL_PLANE_DIR: &str = "control-plane";
/// The control key every agents-control copy shares (32 raw bytes), in [`CONTROL_PLANE_DIR`].
pub const CONTROL_KEY: &str = "agents-control.key";

/// Every top-level entry a run writes: all of them must be absent before it starts.
const TOP_LEVEL: [&str; 6] = [NATS_DIR, CONTROLLER_DIR, CONTROL_PLANE_DIR, HIVES_DIR, README, LAYOUT];

/// One hive of the new swarm and the agents it runs (static agents, with credentials made now).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiveSpec {
    /// The hive.
    pub hive: HiveName,
    /// Its agents.
    pub agents: Vec<AgentName>,
}

/// Reads every `--hive HIVE[:AGENT,AGENT...]`, refusing a bad name or one given twice (an agent
/// belongs to one hive).
///
/// # Errors
/// One line naming the value and what is wrong with it.
pub fn parse_hives(values: &[String]) -> Result<Vec<HiveSpec>, String> {
    let mut hives = Vec::new();
    let mut hive_names = BTreeSet::new();
    let mut agent_names = BTreeSet::new();
    for value in values {
        let (hive, agents) = value.split_once(':').unwrap_or((value, ""));
        let hive = HiveName::parse(hive).map_err(|e| format!("--hive {value:?}: {e}"))?;
        if !hive_names.insert(hive.clone()) {
            return Err(format!("--hive {value:?}: hive {hive} is given twice"));
        }
        let mut list = Vec::new();
        for agent in agents.split(',').filter(|a| !a.is_empty()) {
            let agent = AgentName::parse(agent).map_err(|e| format!("--hive {value:?}: {e}"))?;
            if !agent_names.insert(agent.clone()) {
                return Err(format!("--hive {value:?}: agent {agent} is given twice (an agent runs on one hive)"));
            }
            list.push(agent);
        }
        hives.push(HiveSpec { hive, agents: list });
    }
    Ok(hives)
}

/// Where one file (or directory) goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The path, relative to the output directory.
    pub path: String,
    /// The host it goes to: `controller host`, `NATS host`, `SSO host`, `every control-plane
    /// host` or `hive <name>`.
    pub host: String,
    /// The NixOS option that takes it.
    pub option: String,
    /// The environment variable the daemon reads it from.
    pub env: String,
    /// Whether it is a secret (mode 0600, or a 0700 directory of secrets).
    pub secret: bool,
}

/// One public key and where it is pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublicKey {
    /// What it is.
    pub what: String,
    /// The key.
    pub key: String,
    /// The host(s) it goes to.
    pub host: String,
    /// The NixOS option that takes it.
    pub option: String,
    /// The environment variable.
    pub env: String,
}

/// What a run made: `layout.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Every file, with its host and option.
    pub files: Vec<Placement>,
    /// The public keys to put into configurations.
    pub public_keys: Vec<PublicKey>,
    /// The controller's public deploy key (`V...`).
    pub deploy_key: String,
    /// Each hive's public xkey (`X...`) and its agents.
    pub hives: Vec<HiveLayout>,
    /// How long the agents' and hives' NATS credentials are valid, in seconds.
    pub credential_ttl_secs: u64,
}

/// One hive in [`Layout`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HiveLayout {
    /// The hive.
    pub hive: String,
    /// Its public xkey.
    pub xkey: String,
    /// Its agents.
    pub agents: Vec<String>,
}

/// What `init` is asked to do.
#[derive(Debug, Clone)]
pub struct InitRequest {
    /// The output directory (absent, empty, or without any entry a run writes).
    pub out: PathBuf,
    /// The hives and their agents.
    pub hives: Vec<HiveSpec>,
    /// nats-server's resolver directory on the NATS host.
    pub resolver_dir: PathBuf,
    /// The agents' and hives' NATS credential lifetime.
    pub ttl: Duration,
    /// The store CA's common name.
    pub ca_name: String,
}

/// Makes everything into `request.out` and returns what went where.
///
/// # Errors
/// One line: an entry that exists (nothing is written then), or the step that failed (what was
/// written by then is removed).
pub fn run(request: &InitRequest) -> Result<Layout, String> {
    let out = &request.out;
    if out.exists() && !out.is_dir() {
        return Err(format!("{} exists and is not a directory", out.display()));
    }
    if let Some(existing) = TOP_LEVEL.iter().map(|name| out.join(name)).find(|p| p.symlink_metadata().is_ok()) {
        return Err(format!("{} exists; refusing to overwrite anything (nothing was written)", existing.display()));
    }
    let created_out = !out.exists();
    if created_out {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    }
    match write_all(request) {
        Ok(layout) => Ok(layout),
        Err(error) => {
            // Every entry of TOP_LEVEL was absent at the start, so all that is there now is ours.
            for name in TOP_LEVEL {
                let path = out.join(name);
                let _ = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            }
            if created_out {
                let _ = fs::remove_dir(out);
            }
            Err(format!("{error} (nothing was kept)"))
        }
    }
}

fn private_dir(path: &Path) -> Result<(), String> {
    fs::DirBuilder::new().mode(0o700).create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// Writes `text` to a new file with `mode`.
fn new_file(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    crate::files::create_new(path, text.as_bytes(), mode).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn write_all(request: &InitRequest) -> Result<Layout, String> {
    let out = &request.out;
    let mut files = Vec::new();
    let mut place = |path: String, host: &str, option: &str, env: &str, secret: bool| {
        files.push(Placement { path, host: host.into(), option: option.into(), env: env.into(), secret });
    };
    const CONTROLLER: &str = "services.hyperhive.deploy.swarm-controller";
    const HIVE: &str = "services.hyperhive.deploy.hive-controller";

    // NATS: the operator, the accounts, the server's fragment, the controller's credential.
    let nats = out.join(NATS_DIR);
    private_dir(&nats)?;
    hyperhive_nats_creds::init_with_resolver_dir(&nats, &request.resolver_dir).map_err(|e| e.to_string())?;
    use hyperhive_nats_creds::files::{CONTROLLER_CREDS, SERVER_CONF};
    place(format!("{NATS_DIR}/"), "controller host", &format!("{CONTROLLER}.nats.signingDir"), "SWARM_NATS_DIR", true);
    place(
        format!("{NATS_DIR}/{CONTROLLER_CREDS}"),
        "controller host",
        &format!("{CONTROLLER}.nats.credentialsFile"),
        "SWARM_NATS_CREDS",
        true,
    );
    place(format!("{NATS_DIR}/{SERVER_CONF}"), "NATS host", "services.hyperhive.deploy.nats.fragment", "-", false);

    // The controller's own keys.
    let controller = out.join(CONTROLLER_DIR);
    private_dir(&controller)?;
    crate::secrets::SecretsKey::generate().write_new(&controller.join(SECRETS_KEY)).map_err(|e| e.to_string())?;
    place(
        format!("{CONTROLLER_DIR}/{SECRETS_KEY}"),
        "controller host",
        &format!("{CONTROLLER}.secretsKeyFile"),
        "SWARM_SECRETS_KEY_FILE",
        true,
    );
    let deploy_key = crate::lifecycle::deploy_key::write_new(&controller.join(DEPLOY_KEY))?;
    place(
        format!("{CONTROLLER_DIR}/{DEPLOY_KEY}"),
        "controller host",
        &format!("{CONTROLLER}.deployKeyFile"),
        "SWARM_DEPLOY_KEY_FILE",
        true,
    );
    let ca = hyperhive_provision::store_ca::write_ca_files(&controller, &request.ca_name, SystemTime::now())
        .map_err(|e| e.to_string())?;
    let name = |p: &Path| p.file_name().unwrap_or_default().to_string_lossy().into_owned();
    place(
        format!("{CONTROLLER_DIR}/{}", name(&ca.key_file)),
        "controller host",
        &format!("{CONTROLLER}.provisioning.storeCa.keyFile"),
        "SWARM_STORE_CA_KEY_FILE",
        true,
    );
    place(
        format!("{CONTROLLER_DIR}/{}", name(&ca.cert_file)),
        "controller host",
        &format!("{CONTROLLER}.provisioning.storeCa.certFile (and every store that accepts agents' certificates)"),
        "SWARM_STORE_CA_CERT_FILE",
        false,
    );
    let mut token = [0u8; 32];
    rand::rng().fill_bytes(&mut token);
    new_file(&controller.join(SSO_TOKEN), &format!("{}\n", STANDARD.encode(token)), 0o600)?;
    place(
        format!("{CONTROLLER_DIR}/{SSO_TOKEN}"),
        "controller host",
        &format!("{CONTROLLER}.provisioning.sso.tokenFile"),
        "SWARM_SSO_BRIDGE_TOKEN_FILE",
        true,
    );
    place(
        format!("{CONTROLLER_DIR}/{SSO_TOKEN}"),
        "SSO host",
        "services.hyperhive.deploy.authelia-bridge.tokenFile",
        "AUTHELIA_BRIDGE_TOKEN_FILE",
        true,
    );

    // The control plane's key: the Ed25519 seed every agents-control copy signs with.
    let control_plane = out.join(CONTROL_PLANE_DIR);
    private_dir(&control_plane)?;
    let mut control_key = [0u8; 32];
    rand::rng().fill_bytes(&mut control_key);
    let key_path = control_plane.join(CONTROL_KEY);
    crate::files::create_new(&key_path, &control_key, 0o600)
        .map_err(|e| format!("cannot write {}: {e}", key_path.display()))?;
    place(
        format!("{CONTROL_PLANE_DIR}/{CONTROL_KEY}"),
        "every control-plane host",
        "services.hyperhive.deploy.agents-control.keyFile",
        "AGENTS_CONTROL_KEY_FILE",
        true,
    );

    // Each hive: its directory, its agents' credentials, its own credential and its xkey.
    let hives_dir = out.join(HIVES_DIR);
    private_dir(&hives_dir)?;
    let mut agent_files = Vec::new();
    for spec in &request.hives {
        private_dir(&hives_dir.join(spec.hive.as_str()))?;
        for agent in &spec.agents {
            agent_files.push((agent.clone(), hives_dir.join(spec.hive.as_str()).join(format!("agent-{agent}.creds"))));
        }
    }
    if !agent_files.is_empty() {
        hyperhive_nats_creds::mint_many_agent_creds(&nats, &agent_files, request.ttl).map_err(|e| e.to_string())?;
    }
    let mut hives = Vec::new();
    let mut public_keys = vec![PublicKey {
        what: "the controller's deploy key".into(),
        key: deploy_key.clone(),
        host: "every hive".into(),
        option: format!("{HIVE}.controllerKeys"),
        env: "HIVE_C0RE_CONTROLLER_KEYS".into(),
    }];
    for spec in &request.hives {
        let hive = spec.hive.as_str();
        let dir = hives_dir.join(hive);
        let host = format!("hive {hive}");
        hyperhive_nats_creds::mint_hive_creds(
            &nats,
            &spec.hive,
            &spec.agents,
            request.ttl,
            &dir.join(format!("{hive}.creds")),
        )
        .map_err(|e| e.to_string())?;
        place(
            format!("{HIVES_DIR}/{hive}/{hive}.creds"),
            &host,
            &format!("{HIVE}.nats.credentialsFile"),
            "HIVE_C0RE_NATS_CREDS",
            true,
        );
        let xkey = write_xkey(&dir.join(format!("{hive}.xk")))?;
        place(format!("{HIVES_DIR}/{hive}/{hive}.xk"), &host, &format!("{HIVE}.xkeyFile"), "HIVE_C0RE_XKEY_FILE", true);
        for agent in &spec.agents {
            place(
                format!("{HIVES_DIR}/{hive}/agent-{agent}.creds"),
                &host,
                &format!("services.hyperhive.agents.{agent}.credentialsFile"),
                "HIVE_AGENT_CREDS",
                true,
            );
        }
        public_keys.push(PublicKey {
            what: format!("hive {hive}'s xkey"),
            key: xkey.clone(),
            host: "controller host".into(),
            option: format!("services.hyperhive.swarm.hives.{hive}.xkey"),
            env: "SWARM_HIVES_FILE".into(),
        });
        hives.push(HiveLayout {
            hive: hive.to_owned(),
            xkey,
            agents: spec.agents.iter().map(ToString::to_string).collect(),
        });
    }

    let layout = Layout { files, public_keys, deploy_key, hives, credential_ttl_secs: request.ttl.as_secs() };
    let json = serde_json::to_string_pretty(&layout).map_err(|e| format!("cannot write {LAYOUT}: {e}"))?;
    new_file(&out.join(LAYOUT), &format!("{json}\n"), 0o644)?;
    new_file(&out.join(README), &describe(&layout, out), 0o644)?;
    Ok(layout)
}

/// A new hive xkey seed in `path` (0600), as `hive-c0re keygen` writes it; returns its public key.
fn write_xkey(path: &Path) -> Result<String, String> {
    let key = nkeys::XKey::new();
    let seed = key.seed().map_err(|e| format!("cannot encode a new xkey: {e}"))?;
    new_file(path, &format!("{seed}\n"), 0o600)?;
    Ok(key.public_key())
}

/// What goes where, as text: what `init` prints and `README.txt` holds. Public keys and paths
/// only, never a secret.
#[must_use]
pub fn describe(layout: &Layout, out: &Path) -> String {
    let mut text = format!(
        "A new swarm's keys and credentials, in {}. Copy each file to its host (secrets mode 0600, owned by \
         root; the nats/ directory owned by the user swarm-controller, mode 0700) and keep this directory \
         offline: nats/operator.seed signs every account.\n\nFiles:\n",
        out.display()
    );
    let width = layout.files.iter().map(|f| f.path.len()).max().unwrap_or(0);
    for file in &layout.files {
        let env = if file.env == "-" { String::new() } else { format!(" ({})", file.env) };
        text.push_str(&format!("  {:width$} -> {}: {}{env}\n", file.path, file.host, file.option));
    }
    text.push_str("\nPublic keys:\n");
    for key in &layout.public_keys {
        text.push_str(&format!("  {}: {}\n    -> {}: {} ({})\n", key.what, key.key, key.host, key.option, key.env));
    }
    text.push_str(&format!(
        "\nThe agents' and hives' NATS credentials are valid for {}; give the NATS host nats/nats-server.conf \
         (it preloads every account). Then check the running swarm with `swarmctl doctor`.\n\nTo reach the swarm \
         from afar, run agents-control (docs/control-plane/README.md) with control-plane/agents-control.key on \
         every copy, then pair the controller: `swarm-controller pair CODE` with a code from `agents-control code \
         --host --name swarm`, and each operator's machine with a code from `agents-control code --client`.\n",
        humantime::format_duration(Duration::from_secs(layout.credential_ttl_secs))
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn hives_are_read_with_their_agents() {
        let hives = parse_hives(&strings(&["h1:alice,bob", "h2", "h3:"])).unwrap();
        let agents: Vec<Vec<String>> =
            hives.iter().map(|h| h.agents.iter().map(ToString::to_string).collect()).collect();
        assert_eq!(agents, vec![vec!["alice".to_owned(), "bob".into()], vec![], vec![]]);
        assert_eq!(hives[1].hive.as_str(), "h2");
    }

    #[test]
    fn bad_or_repeated_names_are_refused_naming_the_value() {
        for (values, needle) in [
            (vec!["Bad"], "\"Bad\""),
            (vec!["h1:Alice"], "\"h1:Alice\""),
            (vec!["h1", "h1"], "given twice"),
            (vec!["h1:a", "h2:a"], "agent a is given twice"),
            (vec!["h1:a,a"], "agent a is given twice"),
        ] {
            let err = parse_hives(&strings(&values)).unwrap_err();
            assert!(err.contains(needle), "{values:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
