//! Configuration, read once at start from the environment (flags mirror it for local runs).
//! Clap reads the text; [`Settings::check`] checks all of it, so every bad setting is reported
//! at once, each naming its variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use hyperhive_daemon::settings::{Check, Loaded, Problem, Problems};
use hyperhive_hive_proto::agent_files::PAUSE_FILE_VAR;
use hyperhive_schedule::AgentName;

/// How one agent runs, as given: flags, or the variables they mirror. Text until
/// [`Settings::check`] checks all of it together, so every bad setting is reported at once.
/// Every setting is required except the tick, the turn timeout and the pause file.
#[derive(Debug, Clone, Default, Args)]
pub struct Settings {
    /// The agent's name (^[a-z][a-z0-9-]{0,31}$): its queue `todo.<name>`, its key in
    /// `agent-schedules`, its inbox prefix `_INBOX_<name>`.
    #[arg(long = "name", env = "HIVE_AGENT_NAME", value_name = "NAME")]
    pub name: Option<String>,
    /// NATS server URL, e.g. nats://127.0.0.1:4222.
    #[arg(long = "nats-url", env = "HIVE_AGENT_NATS_URL", value_name = "URL")]
    pub nats_url: Option<String>,
    /// The agent's `.creds` file, made by `swarm-controller nats agent-creds`.
    #[arg(long = "creds", env = "HIVE_AGENT_CREDS", value_name = "FILE")]
    pub creds: Option<PathBuf>,
    /// Directory holding `state.db` (SQLite, WAL): fired slots and finished todos. Created if
    /// absent.
    #[arg(long = "state-dir", env = "HIVE_AGENT_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// How often the agent reads its schedules and fires due slots (a duration: 10s, 500ms).
    #[arg(long = "schedule-tick", env = "HIVE_AGENT_SCHEDULE_TICK", default_value = "10s", value_name = "DURATION")]
    pub schedule_tick: String,
    /// The turn: run through `sh -c` with the todo body on stdin and HIVE_AGENT_NAME,
    /// HIVE_TODO_ID and HIVE_TODO_SOURCE in its environment.
    #[arg(long = "turn-command", env = "HIVE_AGENT_TURN_COMMAND", value_name = "COMMAND")]
    pub turn_command: Option<String>,
    /// How long one turn may run (a duration: 1h, 90m). A turn still running then is killed
    /// with every process it started, and its todo is recorded as finished (failed) and acked,
    /// so it does not rerun.
    #[arg(long = "turn-timeout", env = "HIVE_AGENT_TURN_TIMEOUT", default_value = "1h", value_name = "DURATION")]
    pub turn_timeout: String,
    /// An absolute path (set by hive-c0re): while a file exists there the agent takes no todo
    /// and fires no slot; a turn already running finishes. Unset: never paused.
    #[arg(long = "pause-file", env = PAUSE_FILE_VAR, value_name = "FILE")]
    pub pause_file: Option<PathBuf>,
    /// The pid of the hive-c0re that started this agent as its child (set by its process
    /// runner): the agent stops when that process ends, and does not start without it. Unset:
    /// the agent runs on its own (a systemd unit).
    #[arg(long = "supervisor-pid", env = "HIVE_AGENT_SUPERVISOR_PID", value_name = "PID")]
    pub supervisor_pid: Option<String>,
}

/// How one agent runs, checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// `HIVE_AGENT_NAME`.
    pub name: AgentName,
    /// `HIVE_AGENT_NATS_URL`.
    pub nats_url: String,
    /// `HIVE_AGENT_CREDS`.
    pub creds: PathBuf,
    /// `HIVE_AGENT_STATE_DIR`.
    pub state_dir: PathBuf,
    /// `HIVE_AGENT_SCHEDULE_TICK`.
    pub schedule_tick: Duration,
    /// `HIVE_AGENT_TURN_COMMAND`.
    pub turn_command: String,
    /// `HIVE_AGENT_TURN_TIMEOUT`.
    pub turn_timeout: Duration,
    /// `HIVE_AGENT_PAUSE_FILE`.
    pub pause_file: Option<PathBuf>,
    /// `HIVE_AGENT_SUPERVISOR_PID`.
    pub supervisor_pid: Option<i32>,
}

impl Settings {
    /// Checks every setting.
    ///
    /// # Errors
    /// [`Problems`]: one line per bad setting, naming its variable and what to write.
    pub fn check(self) -> Result<Loaded<Config>, Problems> {
        let mut check = Check::default();
        let mut required = |variable: &'static str, flag: &str, what: &str, value: Option<String>| {
            if value.is_none() {
                check.report(variable, format!("not set; set it (or {flag}) to {what}"));
            }
            value
        };
        let name = required("HIVE_AGENT_NAME", "--name", "the agent's name", self.name);
        let nats_url =
            required("HIVE_AGENT_NATS_URL", "--nats-url", "the NATS server, e.g. nats://127.0.0.1:4222", self.nats_url);
        let creds = required("HIVE_AGENT_CREDS", "--creds", "the agent's .creds file", self.creds.map(path_text));
        let state_dir = required(
            "HIVE_AGENT_STATE_DIR",
            "--state-dir",
            "the agent's state directory",
            self.state_dir.map(path_text),
        );
        let turn_command = required(
            "HIVE_AGENT_TURN_COMMAND",
            "--turn-command",
            "the shell command that runs a turn",
            self.turn_command,
        );
        let name = name.and_then(|s| check.ok(parse_name(&s).map_err(|e| Problem::new("HIVE_AGENT_NAME", e))));
        let nats_url =
            nats_url.and_then(|s| check.ok(parse_nats_url(&s).map_err(|e| Problem::new("HIVE_AGENT_NATS_URL", e))));
        let turn_command = turn_command
            .and_then(|s| check.ok(parse_command(&s).map_err(|e| Problem::new("HIVE_AGENT_TURN_COMMAND", e))));
        let schedule_tick =
            check.ok(parse_tick(&self.schedule_tick).map_err(|e| Problem::new("HIVE_AGENT_SCHEDULE_TICK", e)));
        let turn_timeout =
            check.ok(parse_turn_timeout(&self.turn_timeout).map_err(|e| Problem::new("HIVE_AGENT_TURN_TIMEOUT", e)));
        let pause_file = match self.pause_file {
            None => Some(None),
            Some(path) => {
                check.ok(parse_pause_file(&path_text(path)).map(Some).map_err(|e| Problem::new(PAUSE_FILE_VAR, e)))
            }
        };
        let supervisor_pid = match self.supervisor_pid {
            None => Some(None),
            Some(text) => {
                check.ok(parse_pid(&text).map(Some).map_err(|e| Problem::new("HIVE_AGENT_SUPERVISOR_PID", e)))
            }
        };
        check.finish(|| {
            Some(Config {
                name: name?,
                nats_url: nats_url?,
                creds: PathBuf::from(creds?),
                state_dir: PathBuf::from(state_dir?),
                schedule_tick: schedule_tick?,
                turn_command: turn_command?,
                turn_timeout: turn_timeout?,
                pause_file: pause_file?,
                supervisor_pid: supervisor_pid?,
            })
        })
    }
}

/// A process id: a whole number above 1 (pid 1 supervises everything, so naming it says nothing).
fn parse_pid(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i32>() {
        Ok(pid) if pid > 1 => Ok(pid),
        _ => Err(format!("{text:?} is not a process id; it is set by hive-c0re's process runner, unset it otherwise")),
    }
}

fn path_text(path: PathBuf) -> String {
    path.to_string_lossy().into_owned()
}

fn parse_name(s: &str) -> Result<AgentName, String> {
    AgentName::parse(s).map_err(|e| e.to_string())
}

fn parse_nats_url(s: &str) -> Result<String, String> {
    hyperhive_nats_creds::servers::parse_server_urls(s)
}

fn parse_tick(s: &str) -> Result<Duration, String> {
    let tick = parse_duration(s, "10s or 500ms")?;
    if tick < Duration::from_millis(10) || tick > Duration::from_secs(3600) {
        return Err(format!("{s:?} is out of range; the tick must be between 10ms and 1h"));
    }
    Ok(tick)
}

/// The longest turn timeout: a week. Longer is surely a typo, and keeps the deadline far from
/// what a timer can represent.
const MAX_TURN_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

fn parse_turn_timeout(s: &str) -> Result<Duration, String> {
    let timeout = parse_duration(s, "1h or 90m")?;
    if timeout < Duration::from_secs(1) || timeout > MAX_TURN_TIMEOUT {
        return Err(format!(
            "{s:?} is out of range; the turn timeout (HIVE_AGENT_TURN_TIMEOUT) must be between 1s and 7days"
        ));
    }
    Ok(timeout)
}

fn parse_duration(s: &str, example: &str) -> Result<Duration, String> {
    hyperhive_daemon::settings::parse_duration(s).map_err(|e| format!("{e}; here e.g. {example}"))
}

/// Relative would depend on the working directory, which differs between the process runner and
/// systemd, so the agent and hive-c0re could look at different files.
fn parse_pause_file(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if !path.is_absolute() {
        return Err(format!(
            "{s:?} is not an absolute path; {PAUSE_FILE_VAR} must be absolute, e.g. /var/lib/hive-c0re/pause/NAME"
        ));
    }
    Ok(path)
}

fn parse_command(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("the turn command is empty; give the shell command that runs a turn".into());
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(args_override_self = true)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    fn parse(args: &[&str]) -> Result<Config, String> {
        let base = [
            "hive-agent",
            "--name",
            "a",
            "--nats-url",
            "nats://127.0.0.1:4222",
            "--creds",
            "/c",
            "--state-dir",
            "/s",
            "--turn-command",
            "cat",
        ];
        let settings = Cli::try_parse_from(base.iter().chain(args)).map_err(|e| e.to_string())?.settings;
        settings.check().map(|loaded| loaded.config).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(parse(&[]).unwrap().schedule_tick, Duration::from_secs(10));
        assert_eq!(parse(&["--schedule-tick", "250ms"]).unwrap().schedule_tick, Duration::from_millis(250));
        assert_eq!(parse(&[]).unwrap().turn_timeout, Duration::from_secs(3600));
        assert_eq!(parse(&["--turn-timeout", "90m"]).unwrap().turn_timeout, Duration::from_secs(5400));
        assert_eq!(parse(&[]).unwrap().pause_file, None);
        assert_eq!(parse(&["--pause-file", "/p/a"]).unwrap().pause_file, Some(PathBuf::from("/p/a")));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        for (args, why) in [
            (&["--name", "Bad.Name"][..], "invalid agent name"),
            (&["--nats-url", "localhost:4222"], "not a NATS URL"),
            (&["--schedule-tick", "soon"], "not a duration"),
            (&["--schedule-tick", "0s"], "between 10ms and 1h"),
            (&["--turn-command", "  "], "turn command is empty"),
            (&["--turn-timeout", "forever"], "not a duration"),
            (&["--turn-timeout", "500ms"], "between 1s and 7days"),
            (&["--turn-timeout", "8days"], "HIVE_AGENT_TURN_TIMEOUT"),
            (&["--pause-file", "pause/a"], "HIVE_AGENT_PAUSE_FILE must be absolute"),
            (&["--supervisor-pid", "1"], "HIVE_AGENT_SUPERVISOR_PID"),
            (&["--supervisor-pid", "c0re"], "HIVE_AGENT_SUPERVISOR_PID"),
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(why), "{args:?}: {err}");
        }
    }

    #[test]
    fn every_bad_setting_is_reported_together() {
        let settings = Settings {
            name: Some("Bad.Name".into()),
            nats_url: None,
            creds: Some("/c".into()),
            state_dir: None,
            schedule_tick: "soon".into(),
            turn_command: Some(" ".into()),
            turn_timeout: "8days".into(),
            pause_file: Some("relative".into()),
            supervisor_pid: Some("0".into()),
        };
        let problems = settings.check().unwrap_err();
        let variables: Vec<&str> = problems.iter().map(Problem::variable).collect();
        assert_eq!(
            variables,
            [
                "HIVE_AGENT_NATS_URL",
                "HIVE_AGENT_STATE_DIR",
                "HIVE_AGENT_NAME",
                "HIVE_AGENT_TURN_COMMAND",
                "HIVE_AGENT_SCHEDULE_TICK",
                "HIVE_AGENT_TURN_TIMEOUT",
                PAUSE_FILE_VAR,
                "HIVE_AGENT_SUPERVISOR_PID"
            ],
            "{problems}"
        );
        assert!(problems.to_string().contains("HIVE_AGENT_NATS_URL: not set; set it (or --nats-url)"), "{problems}");
    }
}
