//! Configuration, read once at start from the environment (flags mirror it for local runs).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use hyperhive_hive_proto::agent_files::PAUSE_FILE_VAR;
use hyperhive_schedule::AgentName;

/// How one agent runs. Every setting is required except the tick and the turn timeout.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// The agent's name (^[a-z][a-z0-9-]{0,31}$): its queue `todo.<name>`, its key in
    /// `agent-schedules`, its inbox prefix `_INBOX_<name>`.
    #[arg(long = "name", env = "HIVE_AGENT_NAME", value_parser = parse_name)]
    pub name: AgentName,
    /// NATS server URL, e.g. nats://127.0.0.1:4222.
    #[arg(long = "nats-url", env = "HIVE_AGENT_NATS_URL", value_parser = parse_nats_url)]
    pub nats_url: String,
    /// The agent's `.creds` file, made by `swarm-controller nats agent-creds`.
    #[arg(long = "creds", env = "HIVE_AGENT_CREDS")]
    pub creds: PathBuf,
    /// Directory holding `state.db` (SQLite, WAL): fired slots and finished todos. Created if
    /// absent.
    #[arg(long = "state-dir", env = "HIVE_AGENT_STATE_DIR")]
    pub state_dir: PathBuf,
    /// How often the agent reads its schedules and fires due slots (e.g. 10s, 500ms).
    #[arg(long = "schedule-tick", env = "HIVE_AGENT_SCHEDULE_TICK", default_value = "10s",
          value_parser = parse_tick)]
    pub schedule_tick: Duration,
    /// The turn: run through `sh -c` with the todo body on stdin and HIVE_AGENT_NAME,
    /// HIVE_TODO_ID and HIVE_TODO_SOURCE in its environment.
    #[arg(long = "turn-command", env = "HIVE_AGENT_TURN_COMMAND", value_parser = parse_command)]
    pub turn_command: String,
    /// How long one turn may run (e.g. 1h, 90m). A turn still running then is killed with every
    /// process it started, and its todo is recorded as finished (failed) and acked, so it does
    /// not rerun.
    #[arg(long = "turn-timeout", env = "HIVE_AGENT_TURN_TIMEOUT", default_value = "1h",
          value_parser = parse_turn_timeout)]
    pub turn_timeout: Duration,
    /// An absolute path (set by hive-c0re): while a file exists there the agent takes no todo
    /// and fires no slot; a turn already running finishes. Unset: never paused.
    #[arg(long = "pause-file", env = PAUSE_FILE_VAR, value_parser = parse_pause_file)]
    pub pause_file: Option<PathBuf>,
}

/// Clap names only the flag in its error; the variable is what an operator actually set.
fn parse_name(s: &str) -> Result<AgentName, String> {
    AgentName::parse(s).map_err(|e| format!("{e} (HIVE_AGENT_NAME or --name)"))
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
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. {example}"))
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
        config: Config,
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
        Cli::try_parse_from(base.iter().chain(args)).map(|c| c.config).map_err(|e| e.to_string())
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
        ] {
            let err = parse(args).unwrap_err();
            assert!(err.contains(why), "{args:?}: {err}");
        }
    }
}
