//! The `nats-server` config fragment: the operator, the system account, the full (directory)
//! account resolver, and a preload of every account the `nats init` directory holds.
//!
//! With the full resolver the server keeps every account JWT it is given in a directory of its
//! own and accepts new and changed accounts at run time from a system-account user
//! (`$SYS.REQ.CLAIMS.UPDATE`), so adding an agent needs no reload. The preload seeds that
//! directory at start: a server given a fresh directory (a new host, a lost disk) knows every
//! account minted up to the fragment's writing without any push. nats-server stores a preloaded
//! JWT only when it is not older than the one in its directory (`saveIfNewer` in its
//! `dirstore.go`), so a fragment older than what was pushed since never rolls an account back.

use std::fs;
use std::path::{Path, PathBuf};

use crate::creds;
use crate::error::CredsError;
use crate::files::{
    ACCOUNTS_DIR, CLUSTER_NODE_EXAMPLE, NO_JETSTREAM_JWT, OPERATOR_JWT, RESOLVER_DIR, SERVER_CONF, SWARM_JWT,
    SYSTEM_JWT,
};
use crate::minted::AccountJwt;

/// Where nats-server keeps its account JWTs when `nats init` is not told otherwise: beside the
/// JetStream store of a NixOS unit with `StateDirectory = "nats"` (nats-server creates it).
pub const DEFAULT_RESOLVER_DIR: &str = "/var/lib/nats/jwt";

/// How often servers of one cluster compare their account directories and fetch what they miss
/// (`interval` of the full resolver). A single server ignores it.
const RESOLVER_SYNC_INTERVAL: &str = "2m";

/// Checks that `dir` can stand in the fragment as the resolver's directory: an absolute path
/// (nats-server would resolve a relative one against its working directory, which a service
/// manager chooses) that needs no escaping in the config's quoted string.
pub(crate) fn check_resolver_dir(dir: &Path) -> Result<&str, CredsError> {
    let bad = |why| CredsError::BadResolverDir { dir: dir.to_path_buf(), why };
    let text = dir.to_str().ok_or_else(|| bad("it is not UTF-8"))?;
    if !dir.is_absolute() {
        return Err(bad("it is not absolute"));
    }
    if text.chars().any(|c| c == '"' || c == '\\' || c == '$' || c.is_control()) {
        return Err(bad("it holds a quote, a backslash, a '$' or a control character"));
    }
    Ok(text)
}

/// The resolver directory recorded in `dir` by `init`; a directory from an older `init` (which
/// wrote `resolver: MEMORY`) has none and gets [`DEFAULT_RESOLVER_DIR`].
pub(crate) fn resolver_dir(dir: &Path) -> Result<PathBuf, CredsError> {
    let path = dir.join(RESOLVER_DIR);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let recorded = PathBuf::from(text.trim());
            check_resolver_dir(&recorded)?;
            Ok(recorded)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PathBuf::from(DEFAULT_RESOLVER_DIR)),
        Err(e) => Err(CredsError::io("read", &path)(e)),
    }
}

/// Brings a directory from an older `init` (whose fragment ran `resolver: MEMORY` and which has
/// no `resolver-dir`) to the full resolver: records [`DEFAULT_RESOLVER_DIR`] and rewrites the
/// fragment. Every mint and revocation calls it, so the next one upgrades the directory.
pub(crate) fn upgrade(dir: &Path) -> Result<(), CredsError> {
    let path = dir.join(RESOLVER_DIR);
    if path.exists() {
        return Ok(());
    }
    creds::create_new(&path, &format!("{DEFAULT_RESOLVER_DIR}\n"), false)?;
    write(dir)
}

/// Every account JWT in `dir`: system, swarm, no-jetstream, then the tenants in name order.
pub(crate) fn all_accounts(dir: &Path) -> Result<Vec<AccountJwt>, CredsError> {
    account_paths(dir)?.iter().map(|path| AccountJwt::from_token(&read_jwt(path)?)).collect()
}

/// The files of [`all_accounts`], in that order.
fn account_paths(dir: &Path) -> Result<Vec<PathBuf>, CredsError> {
    let mut paths = vec![dir.join(SYSTEM_JWT), dir.join(SWARM_JWT), dir.join(NO_JETSTREAM_JWT)];
    let tenants_dir = dir.join(ACCOUNTS_DIR);
    let mut tenants: Vec<PathBuf> = fs::read_dir(&tenants_dir)
        .map_err(CredsError::io("read directory", &tenants_dir))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jwt"))
        .collect();
    tenants.sort();
    paths.extend(tenants);
    Ok(paths)
}

/// Whether the fragment was written after every account file last changed (by modification
/// time, strictly later, so a tie counts as behind). Reads file times only, never the JWTs.
pub(crate) fn is_current(dir: &Path) -> Result<bool, CredsError> {
    let modified = |path: &Path| {
        fs::metadata(path).and_then(|m| m.modified()).map_err(CredsError::io("read the modification time of", path))
    };
    let fragment = modified(&dir.join(SERVER_CONF))?;
    for path in account_paths(dir)? {
        if modified(&path)? >= fragment {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Writes the fragment from the operator JWT and every account JWT in `dir`, replacing the old
/// one atomically.
pub(crate) fn write(dir: &Path) -> Result<(), CredsError> {
    let operator = read_jwt(&dir.join(OPERATOR_JWT))?;
    let resolver_dir = resolver_dir(dir)?;
    let resolver_dir = check_resolver_dir(&resolver_dir)?;
    let accounts = all_accounts(dir)?;
    let system = accounts.iter().find(|a| a.name == "SYS").map(|a| a.account.as_str()).unwrap_or_default();
    let preload: String = accounts.iter().map(|a| format!("  # {}\n  {}: {}\n", a.name, a.account, a.jwt)).collect();
    let conf = format!(
        "# Written by `swarm-controller nats init` and rewritten when an account is added or changed:\n\
         # decentralized JWT auth for the swarm. Include it from a config that sets `listen` and\n\
         # `jetstream`. The resolver keeps every account in its directory, which the server must be\n\
         # able to create and write; the controller adds accounts to a running server through the\n\
         # system account, and the preload below gives a server with an empty directory every\n\
         # account known when this file was written.\n\
         operator: {operator}\n\
         system_account: {system}\n\
         resolver: {{\n  \
           type: full\n  \
           dir: \"{resolver_dir}\"\n  \
           allow_delete: false\n  \
           interval: \"{RESOLVER_SYNC_INTERVAL}\"\n\
         }}\n\
         resolver_preload: {{\n{preload}}}\n"
    );
    creds::replace_file(&dir.join(SERVER_CONF), &conf, false)
}

/// Writes [`CLUSTER_NODE_EXAMPLE`]: one node's whole config for a three-node cluster, with its
/// JetStream store beside the resolver's directory (so one state directory holds both).
pub(crate) fn write_cluster_node_example(dir: &Path, resolver_dir: &Path) -> Result<(), CredsError> {
    let store_dir = resolver_dir.parent().filter(|p| p != &Path::new("/")).unwrap_or(resolver_dir);
    let conf = format!(
        "# One node of a three-node NATS cluster for the swarm (written by `swarm-controller nats init`).\n\
         # Every node runs with the same {SERVER_CONF} (the same operator and accounts: copy it beside\n\
         # this file), so an account the controller adds on one node reaches all three. Copy this file\n\
         # to each node as its nats.conf, give each a server_name of its own and list the three nodes'\n\
         # cluster addresses under routes, then run the controller with SWARM_NATS_REPLICAS=3 and\n\
         # SWARM_NATS_URL listing the three client addresses (nats://nats1:4222,nats://nats2:4222,...).\n\
         server_name: \"nats1\"\n\
         listen: \"0.0.0.0:4222\"\n\
         jetstream {{\n  \
           store_dir: \"{store}\"\n  \
           max_file_store: 8GB\n\
         }}\n\
         cluster {{\n  \
           name: \"hyperhive\"\n  \
           listen: \"0.0.0.0:6222\"\n  \
           routes: [\n    \
             \"nats-route://nats1:6222\"\n    \
             \"nats-route://nats2:6222\"\n    \
             \"nats-route://nats3:6222\"\n  \
           ]\n\
         }}\n\
         include \"{SERVER_CONF}\"\n",
        store = store_dir.display()
    );
    creds::create_new(&dir.join(CLUSTER_NODE_EXAMPLE), &conf, false)
}

fn read_jwt(path: &Path) -> Result<String, CredsError> {
    Ok(fs::read_to_string(path).map_err(CredsError::io("read", path))?.trim().to_owned())
}
