//! swarmctl: drives swarm-controller's API over its unix socket, or through the control plane
//! with `--via`.
//!
//! A client of the controller, not a part of it: every request body and every answer it reads
//! is a type of `hyperhive-swarm-api`, the crate the controller's handlers use too, and every
//! path comes from its `paths`.
//!
//! # Layout
//! - [`client`]: where requests go (the socket, or [`remote`] through the control plane) and
//!   the one error type, [`CtlError`].
//! - One module per family of commands: `schedule` here, `hives` (hives, agents, wanted
//!   state), `accounts`, `secret`, `create`, `jobs`, `forge`, `terminal`, `doctor` (checks of a
//!   running swarm); `format` writes their tables,
//!   `sse` reads event streams.

mod audit;
pub mod client;
mod create;
mod doctor;
mod error;
mod forge;
mod format;
mod hives;
mod jobs;
mod labels;
mod linked;
pub mod remote;
mod secrets;
pub mod shared_link;
mod sse;
mod terminal;
mod untrusted;
mod work;

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use hyper::http::{Method, StatusCode};
use time::OffsetDateTime;

pub use client::{Api, CtlError};
pub use format::{format_every, parse_every};

use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_jobq::{Clock, JobId};
use hyperhive_schedule::instant::format_instant;
use hyperhive_schedule::whole_seconds_utc;
use hyperhive_swarm_api::DEFAULT_SOCKET;
use hyperhive_swarm_api::paths;
use hyperhive_swarm_api::schedules::{FiredSlots, NewScheduleRequest, SchedulePatchRequest, ScheduleView};

/// The `--help` heading of the options every command takes, listed apart from its own.
const GLOBAL: &str = "Global options (every command)";

/// Drives swarm-controller over its unix socket, or through the control plane.
#[derive(Debug, Parser)]
#[command(
    name = "swarmctl",
    version,
    about = "Drives swarm-controller's API over its unix socket (or from anywhere, through the control plane, with --via): scheduled prompts, hives, agents, their wanted state and terminals, the job graph, config pull requests and issues",
    after_help = "Every command prints a table (or text) by default and the API's JSON with --json; an \
error from the controller is printed as one line and swarmctl exits non-zero.\n\n\
With --via FILE (a client identity from `agents-control device pair CODE --identity FILE`) every \
command goes through the control plane to the controller, which must be paired as a host \
(`swarm-controller pair CODE`); output and exit codes are the same as on the socket."
)]
pub struct Cli {
    /// The controller's API socket.
    #[arg(
        long,
        global = true,
        env = "SWARM_CONTROLLER_SOCKET",
        default_value = DEFAULT_SOCKET,
        value_name = "PATH",
        help_heading = GLOBAL
    )]
    pub socket: PathBuf,
    /// Go through the control plane as the paired client whose identity is FILE, instead of
    /// the socket.
    #[arg(long, global = true, env = "SWARMCTL_VIA", value_name = "FILE", help_heading = GLOBAL)]
    pub via: Option<PathBuf>,
    /// With --via: the controller's host, by device id or name (default: the only host).
    #[arg(
        long = "host",
        global = true,
        env = "SWARMCTL_HOST",
        value_name = "ID|NAME",
        requires = "via",
        help_heading = GLOBAL
    )]
    pub host: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Top,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Top {
    /// Scheduled prompts.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Serve the --via identity's shared link to every swarmctl using it (started by swarmctl
    /// itself; see docs/swarm/remote.md).
    #[command(hide = true)]
    LinkAgent,
    /// Check the running swarm and say what to fix, one line per check (ok, PROBLEM, skipped):
    /// the controller answers, it is connected to NATS, every hive reports (a stale one is named
    /// with the age of its last status), the agents' credentials are healthy, the secret store's
    /// key and the deploy key are loaded, and the control link is up when paired. Exits 1 when a
    /// check fails.
    Doctor {
        /// Print {"ok", "checks": [{"check", "outcome", "detail"}]} instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// The hive directory (name, description, labels, xkey); `hives status` shows each hive's
    /// last status.
    Hives {
        /// `status [HIVE]`.
        #[command(subcommand)]
        command: Option<HivesCommand>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Follow an agent's terminal: what its turns print, as they print it, until interrupted
    /// (history first). A stream that ends early is resumed after the last event printed.
    Terminal {
        /// The agent.
        agent: AgentName,
        /// Start after this event id (as `--json` prints them) instead of the oldest kept.
        #[arg(long, value_name = "ID")]
        after: Option<u64>,
        /// One JSON line per event: {"id", "text"} (or "bytes", base64, for output that is not
        /// UTF-8); {"gap": {"from", "to"}} for events no longer kept.
        #[arg(long)]
        json: bool,
        /// Write the output exactly as the agent printed it, escape sequences and all. Without
        /// it, every control but newlines, tabs, carriage returns, backspace and colours is
        /// dropped: an agent's output cannot set your clipboard, retitle or redraw your terminal.
        #[arg(long, conflicts_with = "json")]
        raw: bool,
    },
    /// Give one or more agents a prompt now: it joins each agent's queue (after what waits
    /// there) with source operator:<who>. With --wait, return once the turns finished, exiting
    /// with the (first failed) turn's exit code: its own, 128+N for signal N, 124 timed out,
    /// 130 cancelled, 127 not started.
    Prompt {
        /// The agents.
        #[arg(required = true, value_name = "AGENT")]
        agents: Vec<AgentName>,
        #[command(flatten)]
        body: BodySource,
        /// The todo's id, for idempotency: sending the same id again queues nothing new.
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// Wait for the turns to finish.
        #[arg(long)]
        wait: bool,
        /// Wait, printing the agent's terminal meanwhile (one agent; history first).
        #[arg(long, conflicts_with = "json")]
        follow: bool,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// An agent's queue: `todos list AGENT` shows it oldest first (each todo's id, state, source,
    /// age and prompt), `todos rm AGENT ID` removes a waiting todo.
    #[command(subcommand)]
    Todos(TodosCommand),
    /// End an agent's running turn: its process group gets SIGTERM, then SIGKILL after 5 s; the
    /// todo ends cancelled and is not retried.
    Cancel {
        /// The agent.
        agent: AgentName,
        /// Only if this todo's turn is the one running.
        #[arg(long, value_name = "ID")]
        todo: Option<String>,
    },
    /// Every state-changing request the controller took, newest first: when, who (the socket
    /// user or the paired device), how it came, its role, what, and its status. Needs admin.
    Audit {
        /// Nothing older: a duration back (1h, 30m, 2d) or an RFC 3339 time.
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// How many (1 to 500).
        #[arg(long, default_value_t = 50, value_name = "N")]
        limit: usize,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// An agent's turn history, newest first: when each started, its todo, who asked (the
    /// schedule's name for a fired slot), how it ended and how long it took.
    Turns {
        /// The agent.
        agent: AgentName,
        /// Only turns that did not succeed.
        #[arg(long)]
        failed: bool,
        /// How many (1 to 500).
        #[arg(long, default_value_t = 20, value_name = "N")]
        limit: usize,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// One finished turn whole: its prompt and the last 16 KiB of its output (all of it with
    /// --full).
    Turn {
        /// The agent.
        agent: AgentName,
        /// The turn's todo id (see `swarmctl turns`).
        id: String,
        /// The whole output, from the relay's history (while it holds the turn: its last 1,000
        /// chunks per agent), instead of the record's last 16 KiB.
        #[arg(long, conflicts_with = "json")]
        full: bool,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every agent on the roster, by name: its hive, origin, wanted state (with its revision,
    /// or "default" when none was ever set) and actual state. Read a page at a time; with
    /// `--limit`, one page, and the command for the next is printed on standard error.
    Agents {
        /// Only agents with this label: KEY=VALUE, or KEY for any value; repeated, all must match.
        #[arg(long = "label", value_name = "KEY[=VALUE]")]
        labels: Vec<labels::Selector>,
        /// Only the agents of this hive.
        #[arg(long)]
        hive: Option<HiveName>,
        /// At most this many agents (1 to 1000), one page: those after `--after` by name.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: Option<u16>,
        /// Start after this agent, by name (the last one of the page before).
        #[arg(long, value_name = "AGENT")]
        after: Option<AgentName>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Change one agent.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// An agent's linked accounts (matrix, forge, GitHub): list, add (token from a file or
    /// stdin), rm (`--revoke` logs a matrix token out first).
    #[command(subcommand)]
    Accounts(linked::AccountsCommand),
    /// Secret variables of an agent's turns (or defaults of every agent): set (value on stdin,
    /// never on the command line), list (names and times, never values), rm.
    #[command(subcommand)]
    Secret(secrets::SecretCommand),
    /// Each agent's config pull request (the one of its config repository changed last): its
    /// number, state (open, closed, merged), whether it merges cleanly, title and URL.
    ConfigPrs {
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The open issues of the swarm's organisation, by repository and label.
    Issues {
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The job graph: each job's id, kind, agent, state (waiting, ready, running, retrying,
    /// succeeded, failed, blocked, cancelled), attempts, last error and age; `jobs retry ID`
    /// retries a failed job.
    #[command(args_conflicts_with_subcommands = true)]
    Jobs {
        /// `retry ID`.
        #[command(subcommand)]
        command: Option<JobsCommand>,
        /// Only this agent's jobs.
        #[arg(long, value_name = "NAME")]
        agent: Option<AgentName>,
        /// Redraw whenever the graph changes (asking every second) until interrupted.
        #[arg(long)]
        watch: bool,
        /// Print the API's JSON instead of a table (with --watch: one line per change).
        #[arg(long)]
        json: bool,
    },
}

/// `swarmctl jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Give a failed job a fresh set of attempts; the jobs it blocked wait for it again.
    Retry {
        /// The job's id (see `swarmctl jobs`).
        id: JobId,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `swarmctl todos ...`.
#[derive(Debug, Subcommand)]
pub enum TodosCommand {
    /// The queue, oldest first: waiting todos and the running one.
    List {
        /// The agent.
        agent: AgentName,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a waiting todo from an agent's queue (a running one is cancelled with `cancel`).
    Rm {
        /// The agent.
        agent: AgentName,
        /// The todo's id.
        id: String,
    },
}

/// `swarmctl hives ...`.
#[derive(Debug, Subcommand)]
pub enum HivesCommand {
    /// Each hive's last status: fresh, stale (older than 45 s) or never published, its age,
    /// version, load and number of agents.
    Status {
        /// Only this hive.
        hive: Option<HiveName>,
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `swarmctl agent ...`.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create an agent on a hive: the controller provisions its accounts and credentials (SSO,
    /// forge user, config repo and token, store certificate, matrix account, NATS credential) as
    /// jobs, declares it paused and deploys it; set it up with `swarmctl agent state`.
    Create(create::CreateArgs),
    /// Set AGENT's wanted state: up (runs and works), paused (runs, takes no todos, fires no
    /// slots), offline (stopped, state and credentials kept) or destroyed (stopped, state
    /// removed, credentials revoked; final, cannot be undone). The agent's hive is read from the
    /// roster (names are unique swarm-wide); `HIVE AGENT STATE`, the older form, is still taken.
    State {
        /// AGENT STATE, or HIVE AGENT STATE; STATE is up, offline, paused or destroyed.
        #[arg(num_args = 2..=3, value_name = "[HIVE] AGENT STATE", required = true)]
        words: Vec<String>,
        /// Change it only if its wanted state is still at this revision (see `swarmctl agents`).
        #[arg(long, value_name = "REV")]
        if_match: Option<u64>,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set or remove AGENT's labels (to find and group agents: `swarmctl agents --label
    /// team=infra`, the UI's filter): KEY=VALUE sets, KEY- removes; the others stay.
    Label {
        /// The agent.
        agent: AgentName,
        /// KEY=VALUE to set, KEY- to remove (keys: lower-case letters, digits, '.', '_', '-').
        #[arg(required = true, value_name = "KEY=VALUE|KEY-")]
        changes: Vec<labels::LabelChange>,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `[HIVE] AGENT STATE` of `agent state`, each checked.
fn state_words(words: &[String]) -> Result<(Option<HiveName>, AgentName, WantedState), CtlError> {
    let usage = |e: String| CtlError::Usage(format!("agent state: {e}; write `swarmctl agent state AGENT STATE`"));
    let Some((state, target)) = words.split_last() else { return Err(usage("no words given".into())) };
    let (hive, agent) = hives::agent_of(target)?;
    let state = state.parse().map_err(|e: hyperhive_hive_proto::wanted::UnknownState| usage(e.to_string()))?;
    Ok((hive, agent, state))
}

/// `swarmctl schedule ...`.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule and print it.
    Add(AddArgs),
    /// A table of every schedule: id, name, agents, interval or calendar, paused, next fire time
    /// (a calendar's in its zone). Agents not on the roster or destroyed are marked.
    List {
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Every field of one schedule, the body included, and its next fires (in its zone).
    Show {
        /// The schedule's name or id.
        #[arg(value_name = "NAME|ID")]
        id: String,
        /// Print the API's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change some fields; fails (and shows the current version) if someone else changed the
    /// schedule since it was read.
    Edit(EditArgs),
    /// Stop firing; slots that fall during the pause never fire.
    Pause {
        /// The schedule's name or id.
        #[arg(value_name = "NAME|ID")]
        id: String,
    },
    /// Fire again from now on.
    Resume {
        /// The schedule's name or id.
        #[arg(value_name = "NAME|ID")]
        id: String,
    },
    /// Delete the schedule.
    Rm {
        /// The schedule's name or id.
        #[arg(value_name = "NAME|ID")]
        id: String,
    },
}

/// Where a prompt body comes from.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct BodySource {
    /// The prompt text.
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// Read the prompt from FILE, or from stdin with `-`.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
}

/// `schedule add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// What people call it (1 to 100 characters, unique).
    #[arg(long)]
    pub name: String,
    /// An agent to prompt; repeat for more.
    #[arg(long = "agent", value_name = "AGENT", required = true)]
    pub agents: Vec<String>,
    #[command(flatten)]
    pub body: BodySource,
    /// First slot: an RFC 3339 instant or `now` (the default).
    #[arg(long, value_name = "RFC3339|now", default_value = "now")]
    pub anchor: String,
    /// Time between slots: 90s, 30m, 1h, 1d...
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_every,
        conflicts_with_all = ["once", "cron"],
        required_unless_present_any = ["once", "cron"]
    )]
    pub every: Option<u64>,
    /// Fire once, at the anchor.
    #[arg(long, conflicts_with = "cron")]
    pub once: bool,
    /// Fire on a calendar instead: a cron line of 5 fields ('0 9 * * 1-5': 09:00 on weekdays)
    /// or @hourly, @daily, @weekly, @monthly, @yearly; no slot before the anchor.
    #[arg(long, value_name = "CRON")]
    pub cron: Option<String>,
    /// The IANA time zone the calendar is read in (default UTC), e.g. Europe/Berlin.
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub tz: Option<String>,
    /// Accept agents that are not on the roster (yet); list and show mark them.
    #[arg(long)]
    pub allow_unknown_agent: bool,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    /// Print the API's JSON.
    #[arg(long)]
    pub json: bool,
}

/// `schedule edit`.
#[derive(Debug, Args)]
pub struct EditArgs {
    /// The schedule's name or id.
    #[arg(value_name = "NAME|ID")]
    pub id: String,
    /// New name.
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub body: BodySource,
    /// Replace the agent list; repeat for more.
    #[arg(long = "agent", value_name = "AGENT")]
    pub agents: Vec<String>,
    /// New anchor: an RFC 3339 instant or `now`.
    #[arg(long, value_name = "RFC3339|now")]
    pub anchor: Option<String>,
    /// New interval: 90s, 30m, 1h, 1d... (drops a calendar)
    #[arg(long, value_name = "DURATION", value_parser = parse_every, conflicts_with_all = ["once", "cron"])]
    pub every: Option<u64>,
    /// Make it a one-shot at the anchor (drops a calendar).
    #[arg(long, conflicts_with = "cron")]
    pub once: bool,
    /// New calendar: a cron line of 5 fields or an @name (drops the interval).
    #[arg(long, value_name = "CRON")]
    pub cron: Option<String>,
    /// New time zone of the calendar.
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// Accept added agents that are not on the roster.
    #[arg(long)]
    pub allow_unknown_agent: bool,
    /// Change it only if it is still at this revision (default: the revision swarmctl reads
    /// just before the change).
    #[arg(long, value_name = "N")]
    pub revision: Option<u64>,
    /// Print the API's JSON.
    #[arg(long)]
    pub json: bool,
}

impl BodySource {
    fn read(&self) -> Result<Option<String>, CtlError> {
        match (&self.body, &self.body_file) {
            (Some(text), _) => Ok(Some(text.clone())),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .map_err(|e| CtlError::Usage(format!("reading the body from stdin: {e}")))?;
                Ok(Some(text))
            }
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(Some)
                .map_err(|e| CtlError::Usage(format!("reading the body from {}: {e}", path.display()))),
            (None, None) => Ok(None),
        }
    }
}

fn anchor_value(anchor: &str, now: OffsetDateTime) -> String {
    if anchor == "now" {
        format_instant(now)
    } else {
        // The controller validates it and explains what is wrong.
        anchor.to_owned()
    }
}

fn parse_view(bytes: &[u8]) -> Result<ScheduleView, CtlError> {
    client::answer(bytes)
}

/// The schedule's path. An id is made by the controller of letters, digits, `-` and `_`: any
/// other is refused here, naming where ids are listed, rather than sent (encoded) to a 404.
fn schedule_path(id: &str) -> Result<String, CtlError> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(CtlError::Usage(format!("{id:?} is not a schedule id (see `swarmctl schedule list`)")));
    }
    Ok(paths::schedule(id))
}

/// The schedule a name or an id names, resolved here from the list (names are unique, so at
/// most one schedule has a given name; an id is matched first).
async fn resolve(api: &Api, name_or_id: &str) -> Result<ScheduleView, CtlError> {
    // What no schedule can be called (names are 1 to 100 characters without controls) is not
    // worth a request.
    let chars = name_or_id.chars().count();
    if chars == 0 || chars > 100 || name_or_id.chars().any(char::is_control) {
        return Err(CtlError::Usage(format!(
            "{name_or_id:?} is not a schedule name or id (see `swarmctl schedule list`)"
        )));
    }
    let bytes = client::request(api, Method::GET, paths::SCHEDULES, None, None).await?;
    let all: Vec<ScheduleView> = client::answer(&bytes)?;
    pick(all, name_or_id)
}

fn pick(all: Vec<ScheduleView>, name_or_id: &str) -> Result<ScheduleView, CtlError> {
    let by_id = all.iter().position(|v| v.definition.id == name_or_id);
    let by_name = || all.iter().position(|v| v.definition.name == name_or_id);
    match by_id.or_else(by_name) {
        Some(i) => Ok(all.into_iter().nth(i).expect("the position is in the list")),
        None => {
            Err(CtlError::Usage(format!("no schedule with id or name {name_or_id:?} (see `swarmctl schedule list`)")))
        }
    }
}

/// `schedule show`: [`format::details`], or with `json` the schedule with a `fired` field (null
/// when it could not be read).
fn shown(view: &ScheduleView, fired: &Result<FiredSlots, String>, json: bool, now: OffsetDateTime) -> String {
    if !json {
        return format::details(view, Some(fired), now);
    }
    let mut value = serde_json::to_value(view).expect("a view serializes");
    value["fired"] =
        fired.as_ref().ok().map_or(serde_json::Value::Null, |f| serde_json::to_value(f).expect("serializes"));
    format!("{}\n", serde_json::to_string_pretty(&value).expect("a value serializes"))
}

fn printed(view: &ScheduleView, json: bool, now: OffsetDateTime) -> String {
    if json {
        format!("{}\n", serde_json::to_string_pretty(view).expect("a view serializes"))
    } else {
        format::details(view, None, now)
    }
}

/// Runs one command and returns what it prints on success.
///
/// # Errors
/// [`CtlError`] with the message to print; the process then exits non-zero.
pub async fn run(cli: Cli, clock: &dyn Clock) -> Result<String, CtlError> {
    let api = match &cli.via {
        None => Api::Socket(cli.socket.clone()),
        Some(identity) if matches!(cli.command, Top::LinkAgent) => {
            shared_link::serve_detached(identity).await?;
            return Ok(String::new());
        }
        Some(identity) => {
            let home = remote::AgentHome::of_this_program();
            Api::Remote(remote::RemoteApi::connect_from(identity, cli.host.as_deref(), &home).await?)
        }
    };
    let api = &api;
    // Whole seconds, as the controller stamps its instants.
    let now = whole_seconds_utc(clock.now());
    let command = match cli.command {
        Top::Schedule(command) => command,
        Top::Hives { command: None, json } => return hives::list(api, json).await,
        Top::Hives { command: Some(HivesCommand::Status { hive, json }), .. } => {
            return hives::status(api, hive.as_ref(), json).await;
        }
        Top::Agents { labels, hive, limit, after, json } => {
            let listing = hives::Listing { hive, limit: limit.map(usize::from), after };
            return hives::agents(api, &listing, &labels, json).await;
        }
        Top::LinkAgent => return Err(CtlError::Remote("link-agent serves an identity's link: give --via FILE".into())),
        Top::Doctor { json } => {
            let shown = match &cli.via {
                None => cli.socket.display().to_string(),
                Some(identity) => format!("the control plane (as {})", identity.display()),
            };
            return doctor::doctor(api, &shown, json).await;
        }
        Top::Prompt { agents, body, id, wait, follow, json } => {
            let body = body
                .read()?
                .ok_or_else(|| CtlError::Usage("give the prompt with --body TEXT or --body-file FILE|-".into()))?;
            let wait = match (wait, follow) {
                (_, true) if agents.len() > 1 => {
                    return Err(CtlError::Usage("--follow follows one agent's terminal; name one agent".into()));
                }
                (_, true) => work::Wait::Follow,
                (true, false) => work::Wait::Finished,
                (false, false) => work::Wait::No,
            };
            return work::prompt(api, &agents, body, id, wait, json).await;
        }
        Top::Todos(TodosCommand::Rm { agent, id }) => return work::remove_todo(api, &agent, &id).await,
        Top::Todos(TodosCommand::List { agent, json }) => return work::list_todos(api, &agent, json).await,
        Top::Cancel { agent, todo } => return work::cancel(api, &agent, todo).await,
        Top::Turns { agent, failed, limit, json } => return work::turns(api, &agent, failed, limit, json).await,
        Top::Audit { since, limit, json } => {
            let since = since.map(|s| audit::parse_since(&s, clock.now())).transpose()?;
            return audit::audit(api, since, limit, json).await;
        }
        Top::Turn { agent, id, full, json } => {
            let shown = match (json, full) {
                (true, _) => work::TurnShown::Json,
                (false, true) => work::TurnShown::Full,
                (false, false) => work::TurnShown::Tail,
            };
            return work::turn(api, &agent, &id, shown).await;
        }
        Top::Accounts(command) => return linked::run(api, command).await,
        Top::Secret(command) => return secrets::run(api, command, std::io::stdin()).await,
        Top::ConfigPrs { json } => return forge::config_prs(api, json).await,
        Top::Issues { json } => return forge::issues(api, json).await,
        Top::Agent(AgentCommand::Create(args)) => {
            return create::create(api, &args, || clock.now()).await;
        }
        Top::Agent(AgentCommand::State { words, if_match, json }) => {
            let (hive, agent, state) = state_words(&words)?;
            let hive = hives::hive_of(api, hive, &agent).await?;
            return hives::set_state(api, &hive, &agent, state, if_match, json).await;
        }
        Top::Agent(AgentCommand::Label { agent, changes, json }) => {
            return labels::change(api, &agent, &changes, json).await;
        }
        Top::Jobs { command: Some(JobsCommand::Retry { id, json }), .. } => {
            return jobs::retry(api, &id, json).await;
        }
        Top::Jobs { command: None, agent, watch: false, json } => {
            return jobs::list(api, agent.as_ref(), json, now).await;
        }
        Top::Jobs { command: None, agent, watch: true, json } => {
            use std::io::IsTerminal;
            let clear = std::io::stdout().is_terminal();
            let mut out = std::io::stdout();
            jobs::watch(api, agent.as_ref(), json, clear, clock, &mut out, interrupted()).await?;
            return Ok(String::new());
        }
        Top::Terminal { agent, after, json, raw } => {
            let mut out = std::io::stdout();
            let shown = match (json, raw) {
                (true, _) => terminal::Shown::Json,
                (false, true) => terminal::Shown::Raw,
                (false, false) => terminal::Shown::Filtered,
            };
            terminal::follow(api, &agent, after, shown, &mut out, interrupted()).await?;
            return Ok(String::new());
        }
    };
    match command {
        ScheduleCommand::Add(args) => {
            let body = args
                .body
                .read()?
                .ok_or_else(|| CtlError::Usage("give the prompt with --body TEXT or --body-file FILE|-".into()))?;
            if args.tz.is_some() && args.cron.is_none() {
                return Err(CtlError::Usage(
                    "--tz goes with --cron: it is the time zone the calendar is read in".into(),
                ));
            }
            let request = NewScheduleRequest {
                name: args.name,
                agents: args.agents,
                body,
                anchor: anchor_value(&args.anchor, now),
                interval: if args.cron.is_some() { None } else { Some(args.every) },
                calendar: args.cron,
                tz: args.tz,
                paused: args.paused,
                allow_unknown_agents: args.allow_unknown_agent,
            };
            let bytes =
                client::request(api, Method::POST, paths::SCHEDULES, None, Some(client::body(&request))).await?;
            let view = parse_view(&bytes)?;
            Ok(printed(&view, args.json, now))
        }
        ScheduleCommand::List { json } => {
            let bytes = client::request(api, Method::GET, paths::SCHEDULES, None, None).await?;
            let all: Vec<ScheduleView> = client::answer(&bytes)?;
            if json {
                Ok(format!("{}\n", serde_json::to_string_pretty(&all).expect("views serialize")))
            } else {
                Ok(format::table(&all, now))
            }
        }
        ScheduleCommand::Show { id, json } => {
            let view = resolve(api, &id).await?;
            // What the agents fired is shown beside the schedule; when it cannot be read the
            // schedule is still shown, saying why.
            let fired = match client::request(api, Method::GET, &paths::schedule_fired(&view.definition.id), None, None)
                .await
            {
                Ok(bytes) => client::answer::<FiredSlots>(&bytes).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            Ok(shown(&view, &fired, json, now))
        }
        ScheduleCommand::Edit(args) => {
            let patch = SchedulePatchRequest {
                name: args.name.clone(),
                agents: (!args.agents.is_empty()).then(|| args.agents.clone()),
                body: args.body.read()?,
                anchor: args.anchor.as_deref().map(|anchor| anchor_value(anchor, now)),
                interval: match (args.every, args.once) {
                    (_, true) => Some(None),
                    (Some(every), false) => Some(Some(every)),
                    (None, false) => None,
                },
                calendar: args.cron.clone().map(Some),
                tz: args.tz.clone().map(Some),
                paused: None,
                allow_unknown_agents: args.allow_unknown_agent.then_some(true),
            };
            if patch.is_empty() {
                return Err(CtlError::Usage(
                    "nothing to change: give at least one of --name, --body, --body-file, --agent, --anchor, --every, --once, --cron, --tz".into(),
                ));
            }
            let view = change(api, &args.id, args.revision, &patch, now).await?;
            Ok(printed(&view, args.json, now))
        }
        ScheduleCommand::Pause { id } => {
            let pause = SchedulePatchRequest { paused: Some(true), ..Default::default() };
            let view = change(api, &id, None, &pause, now).await?;
            Ok(format!("paused schedule {}\n", view.definition.id))
        }
        ScheduleCommand::Resume { id } => {
            let resume = SchedulePatchRequest { paused: Some(false), ..Default::default() };
            let view = change(api, &id, None, &resume, now).await?;
            Ok(format!("resumed schedule {}\n", view.definition.id))
        }
        ScheduleCommand::Rm { id } => {
            let view = resolve(api, &id).await?;
            let id = &view.definition.id;
            client::request(api, Method::DELETE, &schedule_path(id)?, Some(view.revision), None).await?;
            Ok(format!("removed schedule {id} ({})\n", view.definition.name))
        }
    }
}

/// Resolves at Ctrl-C. Should the handler fail to install, Ctrl-C still ends the process
/// (abruptly).
async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// PATCHes with `If-Match: revision` (by default the revision read just before); a conflict
/// says so and shows the current version.
async fn change(
    api: &Api,
    id: &str,
    revision: Option<u64>,
    patch: &SchedulePatchRequest,
    now: OffsetDateTime,
) -> Result<ScheduleView, CtlError> {
    let current = resolve(api, id).await?;
    let view_id = current.definition.id.clone();
    let path = schedule_path(&view_id)?;
    let revision = revision.unwrap_or(current.revision);
    let result = client::request(api, Method::PATCH, &path, Some(revision), Some(client::body(patch))).await;
    match result {
        Ok(bytes) => parse_view(&bytes),
        // A 409 about another schedule (a rename onto its name) is shown as the API says it.
        Err(CtlError::Api { status: StatusCode::CONFLICT, message, current: Some(current) })
            if current.definition.id == view_id =>
        {
            Err(CtlError::Api {
                status: StatusCode::CONFLICT,
                message: format!(
                    "conflict: {message}\nthe current version is:\n{}",
                    format::details(&current, None, now)
                ),
                current: Some(current),
            })
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn add_needs_a_timing_and_a_body_source() {
        let base = ["swarmctl", "schedule", "add", "--name", "n", "--agent", "a", "--body", "b"];
        assert!(Cli::try_parse_from(base).is_err(), "neither --every nor --once");
        let both = [&base[..], &["--every", "1h", "--once"]].concat();
        assert!(Cli::try_parse_from(both).is_err());
        let two_bodies = [&base[..], &["--every", "1h", "--body-file", "-"]].concat();
        assert!(Cli::try_parse_from(two_bodies).is_err());
        let ok = [&base[..], &["--every", "1h"]].concat();
        assert!(Cli::try_parse_from(ok).is_ok());
        let cron = [&base[..], &["--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin"]].concat();
        assert!(Cli::try_parse_from(cron).is_ok());
        // (`--tz` without `--cron` is refused by `run`, before any request: clap lets a
        // requirement go when a conflicting flag is given.)
        for bad in [&["--cron", "@daily", "--every", "1h"][..], &["--cron", "@daily", "--once"]] {
            assert!(Cli::try_parse_from([&base[..], bad].concat()).is_err(), "{bad:?}");
        }
        let cron_every = [&base[..], &["--every", "0 9 * * 1-5"]].concat();
        let err = Cli::try_parse_from(cron_every).unwrap_err().to_string();
        assert!(err.contains("use --cron"), "{err}");
        let bad_every = [&base[..], &["--every", "1500ms"]].concat();
        let err = Cli::try_parse_from(bad_every).unwrap_err().to_string();
        assert!(err.contains("whole number of seconds"), "{err}");
    }

    #[test]
    fn a_missing_socket_says_the_controller_is_not_running() {
        let err = CtlError::NotRunning(PathBuf::from("/x/c.sock")).to_string();
        assert_eq!(err, "swarm-controller is not running at /x/c.sock (set --socket or SWARM_CONTROLLER_SOCKET)");
    }
}
