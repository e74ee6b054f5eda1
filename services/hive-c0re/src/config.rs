//! Configuration, read once at start from the environment (the NixOS module sets it). Every
//! setting is checked before anything starts, and every bad one is reported, one line each, so an
//! operator fixes them in one round.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyperhive_daemon::settings::{Check, Loaded, Problem, Problems, Renamed};
use hyperhive_hive_proto::signing::PinnedKeys;
use hyperhive_hive_proto::spec::{DeclaredAgent, parse_declared};
use hyperhive_hive_proto::status::STALE_AFTER;
use hyperhive_hive_proto::{AgentName, HiveName};
use nkeys::XKey;

/// Which runner starts the agents (see [`crate::runner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerKind {
    /// Child processes of hive-c0re.
    Process,
    /// Transient systemd units `hive-agent-<name>`.
    Systemd,
}

/// hive-c0re's settings, all checked.
#[derive(Debug)]
pub struct Config {
    /// `HIVE_C0RE_HIVE`.
    pub hive: HiveName,
    /// `HIVE_C0RE_NATS_URL`, also given to the agents.
    pub nats_url: String,
    /// `HIVE_C0RE_NATS_CREDS`: the hive's credential.
    pub nats_creds: PathBuf,
    /// `HIVE_C0RE_XKEY_FILE`, read, and `HIVE_C0RE_CONTROLLER_KEYS`: what the hive opens deploy
    /// messages with and whose signatures it accepts. Without them deploys are not read.
    pub deploy: Option<DeployKeys>,
    /// `HIVE_C0RE_STATE_DIR`.
    pub state_dir: PathBuf,
    /// `HIVE_C0RE_RUNNER`.
    pub runner: RunnerKind,
    /// `HIVE_C0RE_AGENTS_FILE`, parsed: the agents declared in the host's configuration.
    pub declared: BTreeMap<AgentName, DeclaredAgent>,
    /// `HIVE_C0RE_AGENT_BIN`: the hive-agent executable.
    pub agent_bin: PathBuf,
    /// `HIVE_C0RE_STATUS_EVERY`: how often the status is published when nothing changes.
    pub status_every: Duration,
}

/// The keys a hive reads deploy messages with.
#[derive(Debug)]
pub struct DeployKeys {
    /// The hive's own curve key, which the messages are sealed to.
    pub xkey: XKey,
    /// The controller deploy keys whose signature the hive accepts.
    pub controller: PinnedKeys,
}

/// `HIVE_C0RE_STATUS_EVERY` (a duration) and its old name `HIVE_C0RE_STATUS_SECS` (seconds),
/// read for one more release.
pub const STATUS_EVERY: Renamed = Renamed { name: "HIVE_C0RE_STATUS_EVERY", old: "HIVE_C0RE_STATUS_SECS" };

/// The default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/hive-c0re";
/// The default status interval, in seconds.
pub const DEFAULT_STATUS_SECS: u64 = 15;
/// The longest status interval, in seconds: the controller shows a status older than
/// [`STALE_AFTER`] (45 s) as stale, so a report must come well within it, with room for one
/// that is late or lost.
pub const MAX_STATUS_SECS: u64 = 30;

impl Config {
    /// Reads every setting through `var` (the process environment in production).
    ///
    /// # Errors
    /// One line per bad setting, saying what is wrong and how to fix it.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Loaded<Self>, Problems> {
        let mut check = Check::default();
        let mut problem = |variable: &'static str, line: String| check.problem(Problem::line(variable, line));

        let hive = match var("HIVE_C0RE_HIVE") {
            None => {
                problem(
                    "HIVE_C0RE_HIVE",
                    "HIVE_C0RE_HIVE is not set; set it to this hive's name (as in the swarm's hive directory)".into(),
                );
                None
            }
            Some(s) => HiveName::parse(&s).map_err(|e| problem("HIVE_C0RE_HIVE", format!("HIVE_C0RE_HIVE: {e}"))).ok(),
        };
        let nats_url = match var("HIVE_C0RE_NATS_URL") {
            None => {
                problem(
                    "HIVE_C0RE_NATS_URL",
                    "HIVE_C0RE_NATS_URL is not set; set it to the swarm's NATS server, e.g. nats://nats:4222".into(),
                );
                None
            }
            Some(s) => match hyperhive_nats_creds::servers::parse_server_urls(&s) {
                Ok(urls) => Some(urls),
                Err(e) => {
                    problem("HIVE_C0RE_NATS_URL", format!("HIVE_C0RE_NATS_URL {e}"));
                    None
                }
            },
        };
        let nats_creds = match var("HIVE_C0RE_NATS_CREDS") {
            None => {
                problem("HIVE_C0RE_NATS_CREDS", "HIVE_C0RE_NATS_CREDS is not set; set it to the hive's .creds file (`swarm-controller nats hive-creds`)".into());
                None
            }
            Some(s) => match hyperhive_nats_creds::read_creds_jwt(Path::new(&s)) {
                Ok(_) => Some(PathBuf::from(s)),
                Err(e) => {
                    problem("HIVE_C0RE_NATS_CREDS", format!("HIVE_C0RE_NATS_CREDS: {e}"));
                    None
                }
            },
        };
        let xkey = match var("HIVE_C0RE_XKEY_FILE") {
            None => None,
            Some(s) => read_xkey(Path::new(&s))
                .map_err(|e| problem("HIVE_C0RE_XKEY_FILE", format!("HIVE_C0RE_XKEY_FILE: {e}")))
                .ok(),
        };
        let controller_keys = match var("HIVE_C0RE_CONTROLLER_KEYS") {
            None => None,
            Some(s) => PinnedKeys::parse(&s)
                .map_err(|e| problem("HIVE_C0RE_CONTROLLER_KEYS", format!("HIVE_C0RE_CONTROLLER_KEYS: {e}")))
                .ok(),
        };
        // A hive that reads deploys pins who may send them: without a pinned key anyone who can
        // publish on its deploy subject could run code on it.
        if xkey.is_some() && var("HIVE_C0RE_CONTROLLER_KEYS").is_none() {
            problem(
                "HIVE_C0RE_CONTROLLER_KEYS",
                "HIVE_C0RE_CONTROLLER_KEYS is not set, though HIVE_C0RE_XKEY_FILE is: set it to the controller's \
                 public deploy key (printed by `swarm-controller deploy-key`), so the hive applies only deploys \
                 the controller signed"
                    .into(),
            );
        }
        let state_dir = PathBuf::from(var("HIVE_C0RE_STATE_DIR").unwrap_or_else(|| DEFAULT_STATE_DIR.into()));
        if !state_dir.is_absolute() {
            problem(
                "HIVE_C0RE_STATE_DIR",
                format!("HIVE_C0RE_STATE_DIR {:?} must be an absolute path", state_dir.display()),
            );
        }
        // systemd unless asked otherwise: under the process runner every agent runs as
        // hive-c0re's own user, so it can read the hive's keys and the other agents' secrets.
        let runner = match var("HIVE_C0RE_RUNNER").as_deref() {
            None | Some("systemd") => Some(RunnerKind::Systemd),
            Some("process") => Some(RunnerKind::Process),
            Some(other) => {
                problem(
                    "HIVE_C0RE_RUNNER",
                    format!("HIVE_C0RE_RUNNER {other:?} is not a runner; use process or systemd"),
                );
                None
            }
        };
        let declared = match var("HIVE_C0RE_AGENTS_FILE") {
            None => Some(BTreeMap::new()),
            Some(s) => match std::fs::read_to_string(&s) {
                Err(e) => {
                    problem("HIVE_C0RE_AGENTS_FILE", format!("HIVE_C0RE_AGENTS_FILE: cannot read {s}: {e}"));
                    None
                }
                Ok(text) => match parse_declared(&text) {
                    Err(e) => {
                        problem("HIVE_C0RE_AGENTS_FILE", format!("HIVE_C0RE_AGENTS_FILE {s}: {e}"));
                        None
                    }
                    Ok(declared) => {
                        let missing: Vec<String> = declared
                            .iter()
                            .filter(|(_, a)| !a.creds_file.is_file())
                            .map(|(name, a)| format!("agent {name}: creds_file {}", a.creds_file.display()))
                            .collect();
                        if missing.is_empty() {
                            Some(declared)
                        } else {
                            problem(
                                "HIVE_C0RE_AGENTS_FILE",
                                format!(
                                    "HIVE_C0RE_AGENTS_FILE {s}: no such file: {}; mint it with `swarm-controller nats agent-creds`",
                                    missing.join(", ")
                                ),
                            );
                            None
                        }
                    }
                },
            },
        };
        let agent_bin = match var("HIVE_C0RE_AGENT_BIN") {
            Some(s) => Some(PathBuf::from(s)),
            None => std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join("hive-agent"))),
        };
        let agent_bin = match agent_bin {
            Some(path) if path.is_file() => Some(path),
            Some(path) => {
                problem(
                    "HIVE_C0RE_AGENT_BIN",
                    format!(
                        "HIVE_C0RE_AGENT_BIN: {} is not a file; set it to the hive-agent executable (default: beside hive-c0re)",
                        path.display()
                    ),
                );
                None
            }
            None => {
                problem("HIVE_C0RE_AGENT_BIN", "HIVE_C0RE_AGENT_BIN is not set and hive-c0re's own path is unknown; set it to the hive-agent executable".into());
                None
            }
        };
        let status_every = status_every(&var, &mut check);
        if runner == Some(RunnerKind::Process) {
            check.warn(
                "HIVE_C0RE_RUNNER=process: every agent runs as hive-c0re's own user and can read the hive's keys \
                 and the other agents' secrets; use systemd (the default) on a hive whose agents you do not trust",
            );
        }
        check.finish(|| {
            Some(Self {
                hive: hive?,
                nats_url: nats_url?,
                nats_creds: nats_creds?,
                deploy: match (xkey, controller_keys) {
                    (Some(xkey), Some(controller)) => Some(DeployKeys { xkey, controller }),
                    _ => None,
                },
                state_dir,
                runner: runner?,
                declared: declared?,
                agent_bin: agent_bin?,
                status_every: status_every?,
            })
        })
    }
}

/// `HIVE_C0RE_STATUS_EVERY`, or the old `HIVE_C0RE_STATUS_SECS`: 1 s to [`MAX_STATUS_SECS`].
fn status_every(var: &impl Fn(&str) -> Option<String>, check: &mut Check) -> Option<Duration> {
    let every = check.duration_or_old_seconds(var, STATUS_EVERY, Duration::from_secs(DEFAULT_STATUS_SECS));
    let range = Duration::from_secs(1)..=Duration::from_secs(MAX_STATUS_SECS);
    let why = format!(
        "the controller shows a status older than {} s as stale, so reports must come more often",
        STALE_AFTER.as_secs()
    );
    let text = var(every.variable).unwrap_or_default();
    let old = every.old;
    every.check(
        check,
        |every| range.contains(&every),
        |every| {
            if old {
                format!(
                    "{} {text:?} must be a whole number of seconds from 1 to {MAX_STATUS_SECS}: {why} (default \
                     {DEFAULT_STATUS_SECS}); better, write {}={DEFAULT_STATUS_SECS}s",
                    STATUS_EVERY.old, STATUS_EVERY.name
                )
            } else {
                let parsed = every.value.as_ref().err().map(|e| format!("{e}; ")).unwrap_or_default();
                format!("{parsed}it must be from 1s to {MAX_STATUS_SECS}s: {why} (default {DEFAULT_STATUS_SECS}s)")
            }
        },
    )
}

/// Reads an xkey seed file (`hive-c0re keygen`). The error never holds the file's content.
///
/// # Errors
/// An unreadable file or one that holds no curve seed.
pub fn read_xkey(path: &Path) -> Result<XKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    XKey::from_seed(text.trim()).map_err(|_| {
        format!(
            "{} holds no xkey seed (SX...); make one with `hive-c0re keygen --out {}`",
            path.display(),
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_setting_is_reported_together() {
        let dir = tempfile::tempdir().unwrap();
        let bad_agents = dir.path().join("agents.json");
        std::fs::write(&bad_agents, "[]").unwrap();
        let bad_key = dir.path().join("key");
        std::fs::write(&bad_key, "SXnotakey").unwrap();
        let vars = BTreeMap::from([
            ("HIVE_C0RE_HIVE", "Bad.Hive".to_owned()),
            ("HIVE_C0RE_NATS_URL", "localhost:4222".to_owned()),
            ("HIVE_C0RE_NATS_CREDS", "/nonexistent.creds".to_owned()),
            ("HIVE_C0RE_XKEY_FILE", bad_key.display().to_string()),
            ("HIVE_C0RE_CONTROLLER_KEYS", "VNOTAKEY".to_owned()),
            ("HIVE_C0RE_STATE_DIR", "relative".to_owned()),
            ("HIVE_C0RE_RUNNER", "docker".to_owned()),
            ("HIVE_C0RE_AGENTS_FILE", bad_agents.display().to_string()),
            ("HIVE_C0RE_AGENT_BIN", "/nonexistent/hive-agent".to_owned()),
            ("HIVE_C0RE_STATUS_SECS", "0".to_owned()),
        ]);
        let problems = Config::from_env(|name| vars.get(name).cloned()).unwrap_err().lines();
        for (var, why) in [
            ("HIVE_C0RE_HIVE", "invalid hive name"),
            ("HIVE_C0RE_NATS_URL", "not a NATS URL"),
            ("HIVE_C0RE_NATS_CREDS", "nonexistent.creds"),
            ("HIVE_C0RE_XKEY_FILE", "holds no xkey seed"),
            ("HIVE_C0RE_CONTROLLER_KEYS", "not a controller deploy key"),
            ("HIVE_C0RE_STATE_DIR", "absolute"),
            ("HIVE_C0RE_RUNNER", "process or systemd"),
            ("HIVE_C0RE_AGENTS_FILE", "JSON object"),
            ("HIVE_C0RE_AGENT_BIN", "not a file"),
            ("HIVE_C0RE_STATUS_SECS", "from 1 to 30"),
        ] {
            assert!(
                problems.iter().any(|line| line.starts_with(var) && line.contains(why)),
                "{var} ({why}) not in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), 10, "{problems:#?}");
        assert!(!problems.iter().any(|l| l.contains("SXnotakey")), "a seed never appears in an error");
    }

    #[test]
    fn a_status_interval_that_leaves_no_room_before_stale_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("hive.creds");
        std::fs::write(&creds, "-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS USER JWT------\n").unwrap();
        let agent_bin = dir.path().join("hive-agent");
        std::fs::write(&agent_bin, "").unwrap();
        let with_interval = |secs: &str| {
            let vars = BTreeMap::from([
                ("HIVE_C0RE_HIVE", "h1".to_owned()),
                ("HIVE_C0RE_NATS_URL", "nats://127.0.0.1:4222".to_owned()),
                ("HIVE_C0RE_NATS_CREDS", creds.display().to_string()),
                ("HIVE_C0RE_STATE_DIR", dir.path().display().to_string()),
                ("HIVE_C0RE_AGENT_BIN", agent_bin.display().to_string()),
                ("HIVE_C0RE_STATUS_SECS", secs.to_owned()),
            ]);
            Config::from_env(|name| vars.get(name).cloned()).map(|loaded| loaded.config).map_err(|p| p.lines())
        };
        assert_eq!(with_interval("30").unwrap().status_every, Duration::from_secs(30));
        for secs in ["31", "60", "3600"] {
            let problems = with_interval(secs).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:#?}");
            let line = &problems[0];
            assert!(
                line.starts_with("HIVE_C0RE_STATUS_SECS")
                    && line.contains("from 1 to 30")
                    && line.contains("older than 45 s")
                    && !line.contains('\n'),
                "{line}"
            );
        }
    }

    #[test]
    fn a_declared_agent_without_its_credential_file_is_a_bad_setting() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents.json");
        std::fs::write(&agents, r#"{"a": {"spec": {"turn_command": "cat"}, "creds_file": "/nonexistent/a.creds"}}"#)
            .unwrap();
        let path = agents.display().to_string();
        let problems =
            Config::from_env(|name| (name == "HIVE_C0RE_AGENTS_FILE").then(|| path.clone())).unwrap_err().lines();
        assert!(
            problems
                .iter()
                .any(|l| l.starts_with("HIVE_C0RE_AGENTS_FILE")
                    && l.contains("agent a: creds_file /nonexistent/a.creds")),
            "{problems:#?}"
        );
    }

    #[test]
    fn the_required_settings_are_named_when_missing() {
        let problems = Config::from_env(|_| None).unwrap_err().lines();
        for var in ["HIVE_C0RE_HIVE is not set", "HIVE_C0RE_NATS_URL is not set", "HIVE_C0RE_NATS_CREDS is not set"] {
            assert!(problems.iter().any(|l| l.starts_with(var)), "{var} not in {problems:#?}");
        }
    }

    /// The settings every start needs, as files in `dir`.
    fn required(dir: &Path) -> BTreeMap<&'static str, String> {
        let creds = dir.join("hive.creds");
        std::fs::write(&creds, "-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS USER JWT------\n").unwrap();
        let agent_bin = dir.join("hive-agent");
        std::fs::write(&agent_bin, "").unwrap();
        BTreeMap::from([
            ("HIVE_C0RE_HIVE", "h1".to_owned()),
            ("HIVE_C0RE_NATS_URL", "nats://127.0.0.1:4222".to_owned()),
            ("HIVE_C0RE_NATS_CREDS", creds.display().to_string()),
            ("HIVE_C0RE_STATE_DIR", dir.display().to_string()),
            ("HIVE_C0RE_AGENT_BIN", agent_bin.display().to_string()),
        ])
    }

    #[test]
    fn agents_run_under_systemd_unless_the_process_runner_is_asked_for_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let vars = required(dir.path());
        let default = Config::from_env(|name| vars.get(name).cloned()).unwrap();
        assert_eq!(default.config.runner, RunnerKind::Systemd);
        assert!(default.warnings.is_empty(), "{:?}", default.warnings);
        let mut vars = required(dir.path());
        vars.insert("HIVE_C0RE_RUNNER", "process".to_owned());
        let process = Config::from_env(|name| vars.get(name).cloned()).unwrap();
        assert_eq!(process.config.runner, RunnerKind::Process);
        assert!(process.warnings.iter().any(|w| w.contains("can read the hive's keys")), "{:?}", process.warnings);
    }

    #[test]
    fn the_status_interval_is_a_duration_and_its_old_seconds_name_still_works() {
        let dir = tempfile::tempdir().unwrap();
        let with = |name: &'static str, value: &str| {
            let mut vars = required(dir.path());
            vars.insert(name, value.to_owned());
            Config::from_env(|name| vars.get(name).cloned())
        };
        let every = with("HIVE_C0RE_STATUS_EVERY", "5s").unwrap();
        assert_eq!(every.config.status_every, Duration::from_secs(5));
        assert!(every.warnings.is_empty(), "{:?}", every.warnings);
        let old = with("HIVE_C0RE_STATUS_SECS", "20").unwrap();
        assert_eq!(old.config.status_every, Duration::from_secs(20));
        assert!(
            old.warnings
                .iter()
                .any(|w| w.contains("HIVE_C0RE_STATUS_SECS") && w.contains("HIVE_C0RE_STATUS_EVERY=20s")),
            "{:?}",
            old.warnings
        );
        for (value, needle) in [("20", "not a duration"), ("31s", "from 1s to 30s"), ("500ms", "from 1s to 30s")] {
            let problems = with("HIVE_C0RE_STATUS_EVERY", value).unwrap_err().lines();
            assert_eq!(problems.len(), 1, "{problems:#?}");
            assert!(
                problems[0].starts_with("HIVE_C0RE_STATUS_EVERY: ") && problems[0].contains(needle),
                "{problems:#?}"
            );
        }
    }
}
