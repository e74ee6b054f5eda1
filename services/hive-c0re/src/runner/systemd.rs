//! The systemd runner: each agent a transient unit `hive-agent-<name>` started with
//! `systemd-run`, hardened as modules/hive-agent.nix hardens a declared agent's unit (dynamic
//! user, `StateDirectory=hive-agent-<name>`, strict protection), its secrets copied into that
//! state directory before each start and after each renewal ([`super::unit_credentials`]), so a
//! renewal needs no restart. hive-c0re watches it with `systemctl show` and stops it with
//! `systemctl stop`; when hive-c0re stops, the units keep running and are adopted on its next
//! start. Run on a real systemd by tests/nixos/swarm.nix on the hosts of tests/nixos/hosts.

use std::path::PathBuf;
use std::time::Duration;

use hyperhive_hive_proto::AgentName;
use tokio::process::Command;

use super::unit_credentials::{self, NATS_CREDS};
use super::{Exit, Launch, Runner, Running, StartError};

/// How often a unit's state is read while it runs.
const POLL: Duration = Duration::from_secs(1);

/// Starts agents as transient systemd units.
#[derive(Debug, Clone)]
pub struct SystemdRunner {
    /// The hive-agent executable.
    pub bin: PathBuf,
    /// Where systemd keeps state directories (`/var/lib`); a dynamic user's lives under its
    /// `private/`.
    pub state_root: PathBuf,
}

/// A unit being watched.
#[derive(Debug)]
pub struct SystemdAgent {
    unit: String,
    exit: Option<Exit>,
}

/// `hive-agent-<name>`: the same unit name a declared agent gets from the NixOS module.
pub fn unit_name(agent: &AgentName) -> String {
    format!("hive-agent-{agent}")
}

/// `/var/lib/hive-agent-<name>`: the unit's `StateDirectory`, as the unit sees it.
pub fn state_dir(agent: &AgentName) -> PathBuf {
    PathBuf::from(format!("/var/lib/{}", unit_name(agent)))
}

impl SystemdRunner {
    /// The runner of a NixOS host: state directories under `/var/lib`.
    pub fn new(bin: PathBuf) -> Self {
        Self { bin, state_root: PathBuf::from("/var/lib") }
    }

    /// Where the unit's state directory really is: a dynamic user's lives under
    /// `<state_root>/private` (root's, 0700), and `/var/lib/hive-agent-<name>` only links to it.
    pub fn private_state_dir(&self, agent: &AgentName) -> PathBuf {
        self.state_root.join("private").join(unit_name(agent))
    }
}

/// The hardening of modules/lib.nix `serviceConfig` with modules/hive-agent.nix's overrides
/// (turn commands are often JIT runtimes and read /proc), minus `Restart`: hive-c0re restarts.
const HARDENING: &[&str] = &[
    "DynamicUser=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "DevicePolicy=closed",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "ProtectProc=invisible",
    "ProcSubset=all",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "MemoryDenyWriteExecute=no",
    "RemoveIPC=yes",
    "UMask=0077",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
    "SystemCallArchitectures=native",
    "SystemCallFilter=@system-service",
    "SystemCallFilter=~@privileged",
    "SystemCallFilter=~@resources",
];

/// The `systemd-run` arguments that start `launch` running `bin`.
pub fn systemd_run_args(launch: &Launch, bin: &str) -> Vec<String> {
    let unit = unit_name(&launch.agent);
    let state = state_dir(&launch.agent).display().to_string();
    let mut args = vec![
        format!("--unit={unit}"),
        format!("--description=hyperhive agent {} (hive-agent)", launch.agent),
        "--service-type=exec".to_owned(),
        "--quiet".to_owned(),
    ];
    let mut property = |p: String| args.push(format!("--property={p}"));
    for p in HARDENING {
        property((*p).to_owned());
    }
    property(format!("StateDirectory={unit}"));
    property(format!("WorkingDirectory={state}"));
    let secrets = format!("{state}/{}", unit_credentials::DIR);
    for (name, value) in launch.env(&format!("{secrets}/{NATS_CREDS}"), &state, &secrets) {
        args.push(format!("--setenv={name}={value}"));
    }
    args.push(format!("--setenv=HOME={state}"));
    args.push("--".to_owned());
    args.push(bin.to_owned());
    args
}

/// The unit's `ActiveState` and how its main process last ended.
async fn show(unit: &str) -> Option<(String, Exit)> {
    let out = Command::new("systemctl")
        .args(["show", unit, "--property=ActiveState,ExecMainCode,ExecMainStatus"])
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('='))).unwrap_or("").to_owned()
    };
    let status = field("ExecMainStatus").parse().ok();
    // ExecMainCode is the siginfo code: 1 exited, 2 killed, 3 dumped core.
    let exit = match field("ExecMainCode").as_str() {
        "2" | "3" => Exit { code: None, signal: status },
        _ => Exit { code: status, signal: None },
    };
    Some((field("ActiveState"), exit))
}

impl Runner for SystemdRunner {
    type Running = SystemdAgent;
    const STOP_ON_SHUTDOWN: bool = false;

    fn refresh_secrets(&self, launch: &Launch) -> std::io::Result<()> {
        let mut sources = vec![(NATS_CREDS.to_owned(), launch.creds.as_path())];
        sources.extend(launch.secret_files.iter().map(|(name, path)| (name.clone(), path.as_path())));
        let mut files = unit_credentials::read_sources(&sources)?;
        if let Some(env_file) = &launch.env_file {
            // Not written yet (no secret variable was ever sent): an empty one, so the unit's
            // copy exists and a later one replaces it in place.
            let bytes = match std::fs::read(env_file) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    hyperhive_hive_proto::env_secrets::render(&Default::default()).into_bytes()
                }
                read => read.map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", env_file.display())))?,
            };
            files.push((hyperhive_hive_proto::env_secrets::ENV_FILE.to_owned(), bytes));
        }
        unit_credentials::stage(&self.private_state_dir(&launch.agent), &files)
    }

    async fn recover(&self, agent: &AgentName) -> Option<SystemdAgent> {
        let unit = unit_name(agent);
        let (active, _) = show(&unit).await?;
        matches!(active.as_str(), "active" | "activating" | "reloading").then(|| {
            tracing::info!(agent = %agent, %unit, "adopting the unit still running");
            SystemdAgent { unit, exit: None }
        })
    }

    async fn start(&self, launch: &Launch) -> Result<SystemdAgent, StartError> {
        let unit = unit_name(&launch.agent);
        self.refresh_secrets(launch).map_err(|e| StartError {
            agent: launch.agent.clone(),
            why: format!("cannot copy its secrets into its state directory: {e}"),
        })?;
        // A failed transient unit stays loaded and would block a new one of the same name.
        let _ = Command::new("systemctl").args(["reset-failed", &unit]).output().await;
        let out = Command::new("systemd-run")
            .args(systemd_run_args(launch, &self.bin.display().to_string()))
            .output()
            .await
            .map_err(|e| StartError { agent: launch.agent.clone(), why: format!("cannot run systemd-run: {e}") })?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            return Err(StartError { agent: launch.agent.clone(), why: format!("systemd-run: {why}") });
        }
        Ok(SystemdAgent { unit, exit: None })
    }

    fn agent_state_dir(&self, agent: &AgentName) -> PathBuf {
        state_dir(agent)
    }

    async fn remove_agent(&self, agent: &AgentName) {
        // A dynamic user's StateDirectory lives under /var/lib/private, reached by a symlink.
        let _ = std::fs::remove_dir_all(self.private_state_dir(agent));
        let _ = std::fs::remove_file(state_dir(agent));
    }

    async fn log_tail(&self, agent: &AgentName) -> Vec<String> {
        let Ok(out) = Command::new("journalctl")
            .args(["-u", &unit_name(agent), "-n", "50", "-o", "cat", "--no-pager"])
            .output()
            .await
        else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&out.stdout);
        hyperhive_hive_proto::status::log_tail(text.lines())
    }
}

impl Running for SystemdAgent {
    async fn exited(&mut self) -> Exit {
        loop {
            if let Some(exit) = self.exit {
                return exit;
            }
            if let Some((active, exit)) = show(&self.unit).await
                && matches!(active.as_str(), "inactive" | "failed")
            {
                self.exit = Some(exit);
                continue;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn stop(self) {
        let _ = Command::new("systemctl").args(["stop", &self.unit]).output().await;
        let _ = Command::new("systemctl").args(["reset-failed", &self.unit]).output().await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use hyperhive_hive_proto::spec::AgentSpec;

    use super::*;

    #[test]
    fn a_renewal_reaches_the_unit_state_directory_without_a_restart() {
        let host = tempfile::tempdir().unwrap();
        let secrets = host.path().join("hive-c0re/agents/bee/secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(secrets.join("nats.creds"), "creds-1").unwrap();
        std::fs::write(secrets.join("token"), "t0ken").unwrap();
        let runner = SystemdRunner { bin: "/bin/false".into(), state_root: host.path().join("lib") };
        let launch = Launch {
            agent: AgentName::parse("bee").unwrap(),
            nats_url: "nats://nats:4222".into(),
            creds: secrets.join("nats.creds"),
            secret_files: vec![("token".into(), secrets.join("token"))],
            env_file: Some(secrets.join(hyperhive_hive_proto::env_secrets::ENV_FILE)),
            pause_file: host.path().join("pause/bee"),
            spec: AgentSpec {
                turn_command: "true".into(),
                schedule_tick: None,
                turn_timeout: None,
                env: BTreeMap::new(),
            },
        };
        runner.refresh_secrets(&launch).unwrap();
        let staged = host.path().join("lib/private/hive-agent-bee").join(unit_credentials::DIR);
        assert_eq!(std::fs::read_to_string(staged.join(NATS_CREDS)).unwrap(), "creds-1");
        assert_eq!(std::fs::read_to_string(staged.join("token")).unwrap(), "t0ken");
        let env_secrets = |text: &str| hyperhive_hive_proto::env_secrets::parse(text.as_bytes()).unwrap();
        let staged_env = staged.join(hyperhive_hive_proto::env_secrets::ENV_FILE);
        assert!(
            env_secrets(&std::fs::read_to_string(&staged_env).unwrap()).is_empty(),
            "no env file yet: an empty one"
        );
        std::fs::write(secrets.join("nats.creds"), "creds-2").unwrap();
        let vars = BTreeMap::from([("API_TOKEN".to_owned(), "v2".to_owned())]);
        std::fs::write(launch.env_file.as_ref().unwrap(), hyperhive_hive_proto::env_secrets::render(&vars)).unwrap();
        runner.refresh_secrets(&launch).unwrap();
        assert_eq!(std::fs::read_to_string(staged.join(NATS_CREDS)).unwrap(), "creds-2");
        assert_eq!(env_secrets(&std::fs::read_to_string(&staged_env).unwrap()), vars);
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = std::fs::metadata(&staged_env).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o400, "only the unit's own user reads it");
        assert_eq!(meta.uid(), std::fs::metadata(staged.parent().unwrap()).unwrap().uid());
        // The unit reads them where its environment says.
        let args = systemd_run_args(&launch, "/bin/false");
        assert!(args.contains(&format!("--setenv=HIVE_AGENT_CREDS=/var/lib/hive-agent-bee/credentials/{NATS_CREDS}")));
        std::fs::remove_file(secrets.join("token")).unwrap();
        let err = runner.refresh_secrets(&launch).unwrap_err();
        assert!(err.to_string().contains("token"), "{err}");
    }

    #[test]
    fn the_systemd_run_command_is_exactly_this() {
        let launch = Launch {
            agent: AgentName::parse("bee").unwrap(),
            nats_url: "nats://nats:4222".into(),
            creds: "/var/lib/hive-c0re/agents/bee/secrets/nats.creds".into(),
            secret_files: vec![("token".into(), "/var/lib/hive-c0re/agents/bee/secrets/token".into())],
            env_file: Some("/var/lib/hive-c0re/agents/bee/secrets/agent.env".into()),
            pause_file: "/var/lib/hive-c0re/pause/bee".into(),
            spec: AgentSpec {
                turn_command: "claude -p".into(),
                schedule_tick: Some("10s".into()),
                turn_timeout: None,
                env: BTreeMap::from([("MODEL".into(), "opus".into())]),
            },
        };
        let expected = [
            "--unit=hive-agent-bee",
            "--description=hyperhive agent bee (hive-agent)",
            "--service-type=exec",
            "--quiet",
            "--property=DynamicUser=yes",
            "--property=CapabilityBoundingSet=",
            "--property=AmbientCapabilities=",
            "--property=NoNewPrivileges=yes",
            "--property=ProtectSystem=strict",
            "--property=ProtectHome=yes",
            "--property=PrivateTmp=yes",
            "--property=PrivateDevices=yes",
            "--property=DevicePolicy=closed",
            "--property=ProtectKernelTunables=yes",
            "--property=ProtectKernelModules=yes",
            "--property=ProtectKernelLogs=yes",
            "--property=ProtectControlGroups=yes",
            "--property=ProtectClock=yes",
            "--property=ProtectHostname=yes",
            "--property=ProtectProc=invisible",
            "--property=ProcSubset=all",
            "--property=RestrictNamespaces=yes",
            "--property=RestrictRealtime=yes",
            "--property=RestrictSUIDSGID=yes",
            "--property=LockPersonality=yes",
            "--property=MemoryDenyWriteExecute=no",
            "--property=RemoveIPC=yes",
            "--property=UMask=0077",
            "--property=RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
            "--property=SystemCallArchitectures=native",
            "--property=SystemCallFilter=@system-service",
            "--property=SystemCallFilter=~@privileged",
            "--property=SystemCallFilter=~@resources",
            "--property=StateDirectory=hive-agent-bee",
            "--property=WorkingDirectory=/var/lib/hive-agent-bee",
            "--setenv=HIVE_AGENT_NAME=bee",
            "--setenv=HIVE_AGENT_NATS_URL=nats://nats:4222",
            "--setenv=HIVE_AGENT_CREDS=/var/lib/hive-agent-bee/credentials/nats-creds",
            "--setenv=HIVE_AGENT_STATE_DIR=/var/lib/hive-agent-bee",
            "--setenv=HIVE_AGENT_TURN_COMMAND=claude -p",
            "--setenv=HIVE_AGENT_PAUSE_FILE=/var/lib/hive-c0re/pause/bee",
            "--setenv=HIVE_AGENT_SCHEDULE_TICK=10s",
            "--setenv=HIVE_AGENT_SECRETS_DIR=/var/lib/hive-agent-bee/credentials",
            "--setenv=HIVE_AGENT_ENV_FILE=/var/lib/hive-agent-bee/credentials/agent.env",
            "--setenv=MODEL=opus",
            "--setenv=HOME=/var/lib/hive-agent-bee",
            "--",
            "/nix/store/x-hyperhive/bin/hive-agent",
        ];
        assert_eq!(systemd_run_args(&launch, "/nix/store/x-hyperhive/bin/hive-agent"), expected);
    }
}
