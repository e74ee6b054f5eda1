//! hive-c0re's own state directory (`HIVE_C0RE_STATE_DIR`):
//!
//! ```text
//! records/<agent>.json           what this hive knows of the agent: its last wanted state and,
//!                                for a deployed agent, its spec and last applied revision (0600)
//! agents/<agent>/state/          the agent's HIVE_AGENT_STATE_DIR (process runner)
//! agents/<agent>/secrets/        0700: nats.creds and the deploy's other secret files (0600),
//!                                and agent.env, the agent's secret variables (0600); for a
//!                                declared agent also swarm.env, those the swarm sent (0600)
//! agents/<agent>/agent.log       the agent's stdout and stderr (process runner)
//! agents/<agent>/pid             "<pid> <start time>" of the running agent (process runner)
//! pause/<agent>                  the agent's pause file (present while wanted paused)
//! ```
//!
//! Records are written before the message that caused them is acked, so a crash redelivers
//! rather than loses a change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::wanted::Wanted;
use serde::{Deserialize, Serialize};

use crate::files;

/// The secret file holding the agent's NATS credential.
pub const CREDS_FILE: &str = "nats.creds";

/// What this hive knows of one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRecord {
    /// The last wanted state received, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted: Option<Wanted>,
    /// Its revision in `agent-wanted` (0: not known, as in records written before it was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wanted_revision: u64,
    /// For a deployed agent: its spec and last applied revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed: Option<Deployed>,
    /// For a declared agent: the last credentials revision applied (its secret variables; 0:
    /// none yet).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub env_revision: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A deployed agent's spec and the last revision applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deployed {
    /// How to run it.
    pub spec: AgentSpec,
    /// The last deploy or credentials revision applied.
    pub revision: u64,
}

/// The state directory's layout.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Creates the directories (the root and `pause/` 0755, so agents under systemd's
    /// DynamicUser can reach their pause file; everything holding secrets is 0700 below it).
    /// The root and `pause/` are set to 0755 whatever made them and whatever the umask (the
    /// NixOS unit runs with `UMask=0077`): an agent that cannot see its pause file would take it
    /// for absent and go on working while paused.
    ///
    /// # Errors
    /// A directory that cannot be created or set.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let dir = Self { root: root.to_path_buf() };
        files::make_dir(root, 0o755)?;
        files::set_mode(root, 0o755)?;
        files::make_dir(&dir.root.join("records"), 0o700)?;
        files::make_dir(&dir.root.join("agents"), 0o700)?;
        files::make_dir(&dir.pause_dir(), 0o755)?;
        files::set_mode(&dir.pause_dir(), 0o755)?;
        Ok(dir)
    }

    /// `pause/`.
    pub fn pause_dir(&self) -> PathBuf {
        self.root.join("pause")
    }

    /// `pause/<agent>`.
    pub fn pause_file(&self, agent: &AgentName) -> PathBuf {
        self.pause_dir().join(agent.as_str())
    }

    /// `agents/<agent>/`: everything of the agent that `destroyed` removes.
    pub fn agent_dir(&self, agent: &AgentName) -> PathBuf {
        self.root.join("agents").join(agent.as_str())
    }

    /// `agents/<agent>/secrets/`.
    pub fn secrets_dir(&self, agent: &AgentName) -> PathBuf {
        self.agent_dir(agent).join("secrets")
    }

    /// Every agent with a directory under `agents/`.
    pub fn agent_dirs(&self) -> Vec<AgentName> {
        let Ok(entries) = std::fs::read_dir(self.root.join("agents")) else { return Vec::new() };
        entries.flatten().filter_map(|e| AgentName::parse(e.file_name().to_str()?).ok()).collect()
    }

    fn record_path(&self, agent: &AgentName) -> PathBuf {
        self.root.join("records").join(format!("{agent}.json"))
    }

    /// Every record, by agent. A record that cannot be read is skipped with a warning: the
    /// agent's wanted state is read again from NATS at start, and a deploy can be sent again.
    pub fn records(&self) -> BTreeMap<AgentName, AgentRecord> {
        let mut out = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(self.root.join("records")) else { return out };
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(agent) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| AgentName::parse(n).ok())
            else {
                continue;
            };
            match std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<AgentRecord>(&b).map_err(|e| e.to_string()))
            {
                Ok(record) => {
                    out.insert(agent, record);
                }
                Err(e) => tracing::warn!("ignoring the unreadable record {}: {e}", path.display()),
            }
        }
        out
    }

    /// Writes `agent`'s record durably.
    ///
    /// # Errors
    /// The I/O error.
    pub fn save(&self, agent: &AgentName, record: &AgentRecord) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(record).expect("a record serializes");
        files::replace(&self.record_path(agent), &bytes, files::PRIVATE)
    }

    /// Replaces the agent's secret files with `files` (name -> content), each 0600 in a 0700
    /// directory; files of an earlier deploy not named again are removed.
    ///
    /// # Errors
    /// The I/O error (it names the file, never the content).
    pub fn write_secrets(&self, agent: &AgentName, secrets: &BTreeMap<String, String>) -> std::io::Result<()> {
        let dir = self.secrets_dir(agent);
        files::make_dir(&dir, 0o700)?;
        for (name, content) in secrets {
            files::replace(&dir.join(name), content.as_bytes(), files::PRIVATE)?;
        }
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !secrets.contains_key(&name) {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }
}

impl StateDir {
    /// The agent's env file: its secret variables ([`hyperhive_hive_proto::env_secrets`]).
    pub fn env_file(&self, agent: &AgentName) -> PathBuf {
        self.secrets_dir(agent).join(hyperhive_hive_proto::env_secrets::ENV_FILE)
    }

    /// A declared agent's variables from the swarm (as its last `credentials` message gave
    /// them), kept apart from its env file so the host's `environmentFile` can be merged in again.
    pub fn swarm_env_file(&self, agent: &AgentName) -> PathBuf {
        self.secrets_dir(agent).join("swarm.env")
    }

    /// The variables [`StateDir::write_swarm_env`] wrote (none when there is no file).
    ///
    /// # Errors
    /// The file cannot be read or does not parse; the message names it, never a value.
    pub fn read_swarm_env(&self, agent: &AgentName) -> std::io::Result<BTreeMap<String, String>> {
        let path = self.swarm_env_file(agent);
        match std::fs::read(&path) {
            Ok(bytes) => hyperhive_hive_proto::env_secrets::parse(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }

    /// Replaces a declared agent's variables from the swarm with `vars` (0600).
    ///
    /// # Errors
    /// The I/O error (it names the file, never a value).
    pub fn write_swarm_env(&self, agent: &AgentName, vars: &BTreeMap<String, String>) -> std::io::Result<()> {
        files::make_dir(&self.secrets_dir(agent), 0o700)?;
        let text = hyperhive_hive_proto::env_secrets::render(vars);
        files::replace(&self.swarm_env_file(agent), text.as_bytes(), files::PRIVATE)
    }

    /// Replaces the agent's env file with `vars` (0600 in its 0700 secrets directory), leaving
    /// its other secret files alone.
    ///
    /// # Errors
    /// The I/O error (it names the file, never a value).
    pub fn write_env(&self, agent: &AgentName, vars: &BTreeMap<String, String>) -> std::io::Result<()> {
        files::make_dir(&self.secrets_dir(agent), 0o700)?;
        let text = hyperhive_hive_proto::env_secrets::render(vars);
        files::replace(&self.env_file(agent), text.as_bytes(), files::PRIVATE)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn agents_of_other_users_can_reach_their_pause_files_whatever_made_the_directories() {
        let root = tempfile::tempdir().unwrap();
        // As a umask of 0077 (the NixOS unit's) leaves them.
        for dir in [root.path().to_path_buf(), root.path().join("pause")] {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let dir = StateDir::open(root.path()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(root.path()), 0o755);
        assert_eq!(mode(&dir.pause_dir()), 0o755);
        assert_eq!(mode(&root.path().join("agents")), 0o700);
        assert_eq!(mode(&root.path().join("records")), 0o700);
    }

    #[test]
    fn records_round_trip_and_secrets_are_private_and_replaced() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDir::open(root.path()).unwrap();
        let a = AgentName::parse("a").unwrap();
        let record = AgentRecord {
            wanted: None,
            wanted_revision: 3,
            deployed: Some(Deployed {
                spec: AgentSpec {
                    turn_command: "cat".into(),
                    schedule_tick: None,
                    turn_timeout: None,
                    env: BTreeMap::new(),
                },
                revision: 4,
            }),
            env_revision: 0,
        };
        dir.save(&a, &record).unwrap();
        assert_eq!(dir.records(), BTreeMap::from([(a.clone(), record)]));

        dir.write_secrets(&a, &BTreeMap::from([(CREDS_FILE.into(), "one".into()), ("token".into(), "t".into())]))
            .unwrap();
        dir.write_secrets(&a, &BTreeMap::from([(CREDS_FILE.into(), "two".into())])).unwrap();
        let creds = dir.secrets_dir(&a).join(CREDS_FILE);
        assert_eq!(std::fs::read_to_string(&creds).unwrap(), "two");
        assert!(!dir.secrets_dir(&a).join("token").exists(), "a secret not sent again is removed");
        assert_eq!(std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(dir.secrets_dir(&a)).unwrap().permissions().mode() & 0o777, 0o700);

        // Writing one file never clobbers a neighbour named like its temp file.
        let names = BTreeMap::from([("k.json".into(), "json".into()), ("k.tmp".into(), "tmp".into())]);
        dir.write_secrets(&a, &names).unwrap();
        for (name, content) in &names {
            assert_eq!(&std::fs::read_to_string(dir.secrets_dir(&a).join(name)).unwrap(), content);
        }
    }
}
