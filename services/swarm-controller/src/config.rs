//! The daemon's own settings, read once at start from the environment: where to serve, how to
//! reach NATS, how often to reconcile, the hive directory.
//!
//! This module is the configuration's floor: it imports nothing of the controller, and every
//! other module's settings report their problems with its [`ConfigError`]. The settings that load
//! a higher module's files (the secret store's key, the webhook secret, provisioning, the host
//! identity) are read beside these by the daemon's `Config` (in `daemon.rs`). Every problem is
//! reported at once, one line each naming the variable and what to write.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_hive_proto::directory::{HiveDirectory, parse_directory};
use hyperhive_swarm_api::roles::Role;

pub use hyperhive_daemon::settings::{Check, Loaded, Problem as ConfigError, Problems};

/// Where the API socket lives when `SWARM_CONTROLLER_SOCKET` is not set.
pub use hyperhive_swarm_api::DEFAULT_SOCKET;
/// How often the reconcile pass runs when `SWARM_RECONCILE_EVERY` is not set.
pub const DEFAULT_RECONCILE_EVERY: Duration = Duration::from_secs(60);

/// The environment variable names, documented in one place.
pub mod vars {
    use hyperhive_daemon::settings::Renamed;

    /// Path of the unix socket serving the HTTP API.
    pub const SOCKET: &str = "SWARM_CONTROLLER_SOCKET";
    /// NATS server URL (required).
    pub const NATS_URL: &str = "SWARM_NATS_URL";
    /// The controller's `.creds` file (optional: a NATS without JWT auth needs none).
    pub const NATS_CREDS: &str = "SWARM_NATS_CREDS";
    /// Time between reconcile passes (a duration: `60s`, `5m`).
    pub const RECONCILE_EVERY: &str = "SWARM_RECONCILE_EVERY";
    /// [`RECONCILE_EVERY`]'s old name, a whole number of seconds; read for one more release.
    pub const RECONCILE_SECS: &str = "SWARM_RECONCILE_SECS";
    /// The reconcile interval with its old name.
    pub const RECONCILE: Renamed = Renamed { name: RECONCILE_EVERY, old: RECONCILE_SECS };
    /// The hive directory, a JSON file (optional: without it the swarm has no hives).
    pub const HIVES_FILE: &str = "SWARM_HIVES_FILE";
    /// The directory `swarm-controller nats init` wrote (optional; needed to revoke a destroyed
    /// agent's credentials).
    pub const NATS_DIR: &str = "SWARM_NATS_DIR";
    /// The secret store's key file (optional; provisioning agents needs it).
    pub const SECRETS_KEY_FILE: &str = "SWARM_SECRETS_KEY_FILE";
    /// The deploy key's seed file (`swarm-controller deploy-key --out FILE`): signs every deploy
    /// and credentials message.
    pub const DEPLOY_KEY_FILE: &str = "SWARM_DEPLOY_KEY_FILE";
    /// The UI's quick links, a JSON file (optional).
    pub const QUICK_LINKS_FILE: &str = "SWARM_QUICK_LINKS_FILE";
    /// The controller's state directory, holding `webhook-secret` (optional; the forge webhook
    /// needs it).
    pub const STATE_DIR: &str = "SWARM_STATE_DIR";
    /// Copies of every stream and bucket the controller creates (default 1; 3 on a cluster).
    pub const NATS_REPLICAS: &str = "SWARM_NATS_REPLICAS";
    /// The socket's users' roles by unix group, `group=role,...` (optional: unset, every user
    /// who can reach the socket is admin).
    pub const SOCKET_ROLES: &str = "SWARM_SOCKET_ROLES";
    /// The unix user the hive-gateway's nginx runs as: on its connections the SSO user the
    /// gateway names (`Remote-User`, `Remote-Groups`) is the caller (optional; with
    /// [`GATEWAY_ROLES`]).
    pub const GATEWAY_USER: &str = "SWARM_GATEWAY_USER";
    /// The SSO users' roles by SSO group, `group=role,...` (with [`GATEWAY_USER`]).
    pub const GATEWAY_ROLES: &str = "SWARM_GATEWAY_ROLES";
}

/// The most replicas NATS keeps of a stream.
pub const MAX_NATS_REPLICAS: usize = 5;

/// The daemon's own settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The unix socket the API is served on.
    pub socket: PathBuf,
    /// The NATS server, e.g. `nats://127.0.0.1:4222`.
    pub nats_url: String,
    /// The controller's credential file, if NATS runs with JWT auth.
    pub nats_creds: Option<PathBuf>,
    /// Copies of every stream and bucket (1 on a single server, 3 on a three-node cluster).
    pub nats_replicas: usize,
    /// Time between reconcile passes.
    pub reconcile_every: Duration,
    /// The swarm's hives, from `SWARM_HIVES_FILE` (empty when it is not set).
    pub hives: HiveDirectory,
    /// The `nats init` directory holding the signing keys, if given.
    pub nats_dir: Option<PathBuf>,
    /// Which role a user connecting to the socket has.
    pub socket_roles: SocketRoles,
    /// The hive-gateway's user and the roles of the SSO users behind it, if it is set.
    pub gateway: Option<GatewayRoles>,
}

impl Settings {
    /// Reads every setting through `lookup` (the environment in production, a map in tests),
    /// reporting each bad one to `check`; `None` when any was bad.
    pub fn check(lookup: &dyn Fn(&str) -> Option<String>, check: &mut Check) -> Option<Self> {
        let socket = match lookup(vars::SOCKET) {
            None => Some(PathBuf::from(DEFAULT_SOCKET)),
            Some(path) => check.ok(parse_socket(&path)),
        };
        let nats_url = match lookup(vars::NATS_URL) {
            None => {
                check.report(vars::NATS_URL, "not set; set it to the NATS server, e.g. nats://127.0.0.1:4222");
                None
            }
            Some(url) => check.ok(parse_nats_url(&url)),
        };
        let nats_creds = match lookup(vars::NATS_CREDS) {
            None => Some(None),
            Some(path) if path.trim().is_empty() => {
                check.report(
                    vars::NATS_CREDS,
                    "is empty; set it to the controller's .creds file (from `swarm-controller nats init`) or unset it",
                );
                None
            }
            Some(path) => Some(Some(PathBuf::from(path))),
        };
        let nats_replicas = match lookup(vars::NATS_REPLICAS) {
            None => Some(1),
            Some(text) => check.ok(parse_replicas(&text)),
        };
        let reconcile_every = reconcile_every(lookup, check);
        let hives = match lookup(vars::HIVES_FILE) {
            None => Some(HiveDirectory::new()),
            Some(path) => check.ok(read_hives(&path)),
        };
        let nats_dir = match lookup(vars::NATS_DIR) {
            None => Some(None),
            Some(path) => check.ok(parse_nats_dir(&path)).map(Some),
        };
        let socket_roles = match lookup(vars::SOCKET_ROLES) {
            None => Some(SocketRoles::EveryoneAdmin),
            Some(text) => {
                check.ok(parse_group_roles(vars::SOCKET_ROLES, &text, "unix group", 32)).map(SocketRoles::ByGroup)
            }
        };
        let gateway = match (lookup(vars::GATEWAY_USER), lookup(vars::GATEWAY_ROLES)) {
            (None, None) => Some(None),
            (Some(user), Some(roles)) => {
                let user = check.ok(parse_gateway_user(&user));
                let roles = check.ok(parse_group_roles(vars::GATEWAY_ROLES, &roles, "SSO group", 64));
                Some(Some(GatewayRoles { uid: user.as_ref()?.0, user: user?.1, roles: roles? }))
            }
            (Some(_), None) => {
                check.report(
                    vars::GATEWAY_ROLES,
                    "not set, but SWARM_GATEWAY_USER is; set it to the SSO groups' roles, e.g. \
                     swarm-viewers=viewer,swarm-admins=admin, or unset SWARM_GATEWAY_USER",
                );
                None
            }
            (None, Some(_)) => {
                check.report(
                    vars::GATEWAY_USER,
                    "not set, but SWARM_GATEWAY_ROLES is; set it to the unix user the gateway's nginx runs as, \
                     e.g. nginx, or unset SWARM_GATEWAY_ROLES",
                );
                None
            }
        };
        Some(Self {
            socket: socket?,
            nats_url: nats_url?,
            nats_creds: nats_creds?,
            nats_replicas: nats_replicas?,
            reconcile_every: reconcile_every?,
            hives: hives?,
            nats_dir: nats_dir?,
            socket_roles: socket_roles?,
            gateway: gateway?,
        })
    }
}

/// Which role a user connecting to the socket has. Root and the controller's own user are
/// always admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketRoles {
    /// `SWARM_SOCKET_ROLES` unset: whoever can reach the socket is admin (the socket directory's
    /// mode and group are the only gate).
    EveryoneAdmin,
    /// Each user has the highest role of the groups listed that it is in; in none, no role.
    ByGroup(Vec<(String, Role)>),
}

impl SocketRoles {
    /// The role of the user `uid` in `groups`, or `None` when it has none.
    #[must_use]
    pub fn role_of(&self, uid: u32, groups: &[String]) -> Option<Role> {
        if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
            return Some(Role::Admin);
        }
        match self {
            SocketRoles::EveryoneAdmin => Some(Role::Admin),
            SocketRoles::ByGroup(table) => {
                table.iter().filter(|(group, _)| groups.contains(group)).map(|(_, role)| *role).max()
            }
        }
    }
}

/// The hive-gateway's unix user and the roles its SSO users have by their SSO groups
/// (`SWARM_GATEWAY_USER`, `SWARM_GATEWAY_ROLES`). A request on a connection from that user is
/// the SSO user the gateway names in `Remote-User`, never the gateway's own user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRoles {
    /// The gateway's uid, resolved once at start.
    pub uid: u32,
    /// Its name.
    pub user: String,
    /// Each SSO group listed and its role.
    pub roles: Vec<(String, Role)>,
}

impl GatewayRoles {
    /// The highest role of the listed groups among `groups`; `None` when it is in none.
    #[must_use]
    pub fn role_of(&self, groups: &[&str]) -> Option<Role> {
        self.roles.iter().filter(|(group, _)| groups.contains(&group.as_str())).map(|(_, role)| *role).max()
    }
}

/// `SWARM_GATEWAY_USER`: an existing user, neither root nor the controller's own (both are admin
/// on the socket, and a request of theirs without an SSO user would be refused).
fn parse_gateway_user(name: &str) -> Result<(u32, String), ConfigError> {
    let bad = |why: String| ConfigError::new(vars::GATEWAY_USER, why);
    let name = name.trim();
    let user = nix::unistd::User::from_name(name)
        .map_err(|e| bad(format!("cannot look up the user {name:?}: {e}")))?
        .ok_or_else(|| {
        bad(format!("no user {name:?} on this machine; set it to the user the gateway's nginx runs as"))
    })?;
    let uid = user.uid.as_raw();
    if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
        return Err(bad(format!(
            "{name} is root or the controller's own user, which are admin on the socket; run the gateway's nginx as a \
             user of its own (e.g. nginx) and name it here"
        )));
    }
    Ok((uid, user.name))
}

/// `group=role,...` (`variable`'s value): each group a `kind` name (letters, digits, `_`, `-`,
/// `.`, at most `longest`) named once; each role viewer, operator or admin.
fn parse_group_roles(
    variable: &'static str,
    text: &str,
    kind: &str,
    longest: usize,
) -> Result<Vec<(String, Role)>, ConfigError> {
    let bad = |why: String| {
        ConfigError::new(
            variable,
            format!("{why}; write group=role pairs, comma-separated, e.g. swarm-viewers=viewer,swarm-ops=operator"),
        )
    };
    let mut table: Vec<(String, Role)> = Vec::new();
    for pair in text.split(',').map(str::trim) {
        let (group, role) = pair.split_once('=').ok_or_else(|| bad(format!("{pair:?} has no '='")))?;
        let (group, role) = (group.trim(), role.trim());
        let name_ok = !group.is_empty()
            && group.len() <= longest
            && group.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !name_ok {
            return Err(bad(format!("{group:?} is not a {kind} name")));
        }
        let role: Role = role.parse().map_err(|e: hyperhive_swarm_api::roles::UnknownRole| bad(e.to_string()))?;
        if table.iter().any(|(seen, _)| seen == group) {
            return Err(bad(format!("group {group} is named twice")));
        }
        table.push((group.to_owned(), role));
    }
    Ok(table)
}

/// `SWARM_RECONCILE_EVERY`, or the old `SWARM_RECONCILE_SECS`: at least a second.
fn reconcile_every(lookup: &dyn Fn(&str) -> Option<String>, check: &mut Check) -> Option<Duration> {
    let every = check.duration_or_old_seconds(lookup, vars::RECONCILE, DEFAULT_RECONCILE_EVERY);
    every.check(
        check,
        |every| every >= Duration::from_secs(1),
        |every| match (&every.value, every.old) {
            // The old variable keeps its old message, so a unit file that set it reads the same.
            (_, true) => format!(
                "{:?} is not a whole number of seconds >= 1; write e.g. 60 (better: {}=60s)",
                lookup(every.variable).unwrap_or_default(),
                vars::RECONCILE_EVERY
            ),
            (Err(e), false) => e.clone(),
            (Ok(_), false) => "must be at least 1s; write e.g. 60s".to_owned(),
        },
    )
}

fn read_hives(path: &str) -> Result<HiveDirectory, ConfigError> {
    let problem = |what: String| ConfigError::new(vars::HIVES_FILE, what);
    if path.trim().is_empty() {
        return Err(problem("is empty; set it to the hive directory JSON file or unset it".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read {path}: {e}")))?;
    // One line: the parser's message may quote the file.
    parse_directory(&text).map_err(|e| problem(format!("{path}: {}", e.to_string().replace('\n', " "))))
}

fn parse_nats_dir(path: &str) -> Result<PathBuf, ConfigError> {
    let dir = Path::new(path);
    if !dir.is_absolute() {
        return Err(ConfigError::new(
            vars::NATS_DIR,
            format!("{path:?} is not an absolute path; set it to the directory `swarm-controller nats init` wrote"),
        ));
    }
    if !dir.join(hyperhive_nats_creds::files::OPERATOR_SEED).is_file() {
        return Err(ConfigError::new(
            vars::NATS_DIR,
            format!(
                "{path} holds no {}; set it to the directory `swarm-controller nats init` wrote",
                hyperhive_nats_creds::files::OPERATOR_SEED
            ),
        ));
    }
    Ok(dir.to_path_buf())
}

fn parse_socket(path: &str) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(ConfigError::new(
            vars::SOCKET,
            format!("{} is not an absolute path; use e.g. {DEFAULT_SOCKET}", path.display()),
        ));
    }
    if path.file_name().is_none() {
        return Err(ConfigError::new(
            vars::SOCKET,
            format!("{} names no file; use e.g. {DEFAULT_SOCKET}", path.display()),
        ));
    }
    Ok(path)
}

fn parse_nats_url(url: &str) -> Result<String, ConfigError> {
    hyperhive_nats_creds::servers::parse_server_urls(url).map_err(|e| ConfigError::new(vars::NATS_URL, e))
}

fn parse_replicas(text: &str) -> Result<usize, ConfigError> {
    text.trim().parse::<usize>().ok().filter(|n| (1..=MAX_NATS_REPLICAS).contains(n)).ok_or_else(|| {
        ConfigError::new(
            vars::NATS_REPLICAS,
            format!(
                "{text:?} is not a replica count from 1 to {MAX_NATS_REPLICAS}; write 1 for a single server, 3 for a \
                 three-node cluster"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn loaded(pairs: &[(&str, &str)]) -> Result<Loaded<Settings>, Problems> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let mut check = Check::default();
        let settings = Settings::check(&|name| env.get(name).cloned(), &mut check);
        check.finish(|| settings)
    }

    fn config(pairs: &[(&str, &str)]) -> Result<Settings, Problems> {
        loaded(pairs).map(|loaded| loaded.config)
    }

    #[test]
    fn default_socket_path_is_pinned() {
        assert_eq!(DEFAULT_SOCKET, "/run/swarm-controller/controller.sock");
        let c = config(&[(vars::NATS_URL, "nats://127.0.0.1:4222")]).unwrap();
        assert_eq!(c.socket, PathBuf::from("/run/swarm-controller/controller.sock"));
        assert_eq!(c.reconcile_every, Duration::from_secs(60));
        assert_eq!(c.nats_creds, None);
        assert!(c.hives.is_empty(), "no SWARM_HIVES_FILE: no hives");
        assert_eq!(c.nats_dir, None);
        assert_eq!(c.nats_replicas, 1);
        let cluster =
            config(&[(vars::NATS_URL, "nats://n1:4222, nats://n2:4222,nats://n3:4222"), (vars::NATS_REPLICAS, "3")])
                .unwrap();
        assert_eq!(cluster.nats_url, "nats://n1:4222,nats://n2:4222,nats://n3:4222");
        assert_eq!(cluster.nats_replicas, 3);
    }

    #[test]
    fn reads_the_hive_directory_and_the_nats_dir() {
        let dir = tempfile::tempdir().unwrap();
        let hives = dir.path().join("hives.json");
        std::fs::write(&hives, r#"{"h2": {}, "h1": {"description": "gpu", "labels": {"gpu": "yes"}}}"#).unwrap();
        let nats = dir.path().join("nats");
        hyperhive_nats_creds::init(&nats).unwrap();
        let c = config(&[
            (vars::NATS_URL, "nats://n:4222"),
            (vars::HIVES_FILE, hives.to_str().unwrap()),
            (vars::NATS_DIR, nats.to_str().unwrap()),
        ])
        .unwrap();
        let names: Vec<&str> = c.hives.keys().map(|h| h.as_str()).collect();
        assert_eq!(names, ["h1", "h2"]);
        assert_eq!(c.hives.values().next().unwrap().description, "gpu");
        assert_eq!(c.nats_dir, Some(nats));
    }

    #[test]
    fn a_bad_hive_directory_or_nats_dir_names_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let missing = dir.path().join("absent.json").to_str().unwrap().to_owned();
        let not_json = write("bad.json", "{\n  \"h\": ");
        let bad_name = write("name.json", r#"{"H": {}}"#);
        let bad_key = write("key.json", r#"{"h": {"xkey": "Xnope"}}"#);
        let empty_dir = dir.path().to_str().unwrap().to_owned();
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        type Case<'a> = (&'a str, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            (vars::HIVES_FILE, "", "empty"),
            (vars::HIVES_FILE, &missing, "cannot read"),
            (vars::HIVES_FILE, &not_json, "JSON object"),
            (vars::HIVES_FILE, &bad_name, "invalid hive name"),
            (vars::HIVES_FILE, &bad_key, "not a public curve key"),
            (vars::NATS_DIR, "relative/dir", "absolute"),
            (vars::NATS_DIR, &empty_dir, "operator.seed"),
        ];
        for (variable, value, needle) in cases {
            let err = config(&[url, (variable, value)]).unwrap_err().to_string();
            assert!(err.starts_with(variable), "{value:?}: {err}");
            assert!(err.contains(needle), "{value:?}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn reads_every_variable() {
        let c = config(&[
            (vars::SOCKET, "/tmp/x/c.sock"),
            (vars::NATS_URL, "nats://n:4222"),
            (vars::NATS_CREDS, "/etc/c.creds"),
            (vars::RECONCILE_SECS, "5"),
        ])
        .unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/x/c.sock"));
        assert_eq!(c.nats_url, "nats://n:4222");
        assert_eq!(c.nats_creds, Some(PathBuf::from("/etc/c.creds")));
        assert_eq!(c.reconcile_every, Duration::from_secs(5));
    }

    #[test]
    fn the_reconcile_interval_is_a_duration_and_its_old_seconds_name_still_works() {
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        let every = loaded(&[url, (vars::RECONCILE_EVERY, "5m")]).unwrap();
        assert_eq!(every.config.reconcile_every, Duration::from_secs(300));
        assert!(every.warnings.is_empty(), "{:?}", every.warnings);
        let old = loaded(&[url, (vars::RECONCILE_SECS, "90")]).unwrap();
        assert_eq!(old.config.reconcile_every, Duration::from_secs(90));
        assert_eq!(old.warnings.len(), 1, "{:?}", old.warnings);
        assert!(old.warnings[0].contains("SWARM_RECONCILE_EVERY=1m 30s"), "{:?}", old.warnings);
        for (value, needle) in [("60", "not a duration"), ("0s", "at least 1s"), ("soon", "like 30s")] {
            let err = config(&[url, (vars::RECONCILE_EVERY, value)]).unwrap_err().to_string();
            assert!(err.starts_with(vars::RECONCILE_EVERY) && err.contains(needle), "{value}: {err}");
        }
    }

    #[test]
    fn the_gateway_user_and_its_roles_are_read_together() {
        let url = (vars::NATS_URL, "nats://127.0.0.1:4222");
        assert_eq!(config(&[url]).unwrap().gateway, None);
        let both = [url, (vars::GATEWAY_USER, "nobody"), (vars::GATEWAY_ROLES, "ops=operator, sso-admins=admin")];
        // A run as `nobody` (as the build sandbox's check is rehearsed) is the controller's own
        // user, which is refused.
        if nix::unistd::geteuid().as_raw() == 65534 {
            assert!(config(&both).unwrap_err().to_string().contains("the controller's own user"));
            return;
        }
        let gateway = config(&both).unwrap().gateway.unwrap();
        assert_eq!((gateway.uid, gateway.user.as_str()), (65534, "nobody"));
        assert_eq!(gateway.role_of(&["users", "ops", "sso-admins"]), Some(Role::Admin));
        assert_eq!(gateway.role_of(&["ops"]), Some(Role::Operator));
        assert_eq!(gateway.role_of(&["users"]), None);
        let cases = [
            (vec![(vars::GATEWAY_USER, "nobody")], vars::GATEWAY_ROLES, "not set, but SWARM_GATEWAY_USER is"),
            (vec![(vars::GATEWAY_ROLES, "ops=operator")], vars::GATEWAY_USER, "not set, but SWARM_GATEWAY_ROLES is"),
            (vec![(vars::GATEWAY_USER, "root"), (vars::GATEWAY_ROLES, "ops=operator")], vars::GATEWAY_USER, "root"),
            (
                vec![(vars::GATEWAY_USER, "hyperhive-no-such-user"), (vars::GATEWAY_ROLES, "ops=operator")],
                vars::GATEWAY_USER,
                "no user \"hyperhive-no-such-user\"",
            ),
            (vec![(vars::GATEWAY_USER, "nobody"), (vars::GATEWAY_ROLES, "ops=boss")], vars::GATEWAY_ROLES, "boss"),
            (vec![(vars::GATEWAY_USER, "nobody"), (vars::GATEWAY_ROLES, "ops")], vars::GATEWAY_ROLES, "no '='"),
            (
                vec![(vars::GATEWAY_USER, "nobody"), (vars::GATEWAY_ROLES, "ops=viewer,ops=admin")],
                vars::GATEWAY_ROLES,
                "named twice",
            ),
            (
                vec![(vars::GATEWAY_USER, "nobody"), (vars::GATEWAY_ROLES, "a b=viewer")],
                vars::GATEWAY_ROLES,
                "group name",
            ),
        ];
        for (pairs, variable, needle) in cases {
            let mut pairs = pairs;
            pairs.push(url);
            let err = config(&pairs).unwrap_err().to_string();
            assert!(err.starts_with(variable) && err.contains(needle) && !err.contains('\n'), "{pairs:?}: {err}");
        }
    }

    #[test]
    fn every_bad_setting_is_reported_together() {
        let problems = config(&[
            (vars::SOCKET, "rel/c.sock"),
            (vars::NATS_URL, "http://x"),
            (vars::NATS_CREDS, " "),
            (vars::NATS_REPLICAS, "7"),
            (vars::RECONCILE_EVERY, "often"),
            (vars::HIVES_FILE, ""),
            (vars::NATS_DIR, "relative/dir"),
        ])
        .unwrap_err();
        let variables: Vec<&str> = problems.iter().map(ConfigError::variable).collect();
        assert_eq!(
            variables,
            [
                vars::SOCKET,
                vars::NATS_URL,
                vars::NATS_CREDS,
                vars::NATS_REPLICAS,
                vars::RECONCILE_EVERY,
                vars::HIVES_FILE,
                vars::NATS_DIR
            ],
            "{problems}"
        );
        for line in problems.lines() {
            assert!(!line.contains('\n') && variables.iter().any(|v| line.starts_with(v)), "{line}");
        }
    }
}
