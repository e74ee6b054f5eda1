//! `swarmctl agent create NAME --hive HIVE (--spec-file FILE | --turn-command CMD) [--wait]`:
//! asks the controller to create an agent, then (with `--wait`) follows its provisioning jobs
//! until every one has settled, and prints their table.

use std::path::PathBuf;
use std::time::Duration;

use hive_jobq::JobState;
use hyper::http::Method;
use hyperhive_hive_proto::{AgentName, HiveName};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::client::{self, Api, CtlError};
use super::hives::{parse, pretty};
use super::jobs::{WATCH_EVERY, table};

/// `swarmctl agent create`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The new agent's name: a lowercase letter, then up to 31 lowercase letters, digits or '-'.
    pub name: AgentName,
    /// The hive to run it on (see `swarmctl hives`).
    #[arg(long)]
    pub hive: HiveName,
    /// The agent's spec as JSON, e.g. {"turn_command": "claude -p", "env": {"LANG": "C.UTF-8"}};
    /// `-` reads standard input.
    #[arg(long, value_name = "FILE", conflicts_with = "turn_command", required_unless_present = "turn_command")]
    pub spec_file: Option<PathBuf>,
    /// Instead of --spec-file: the command each turn runs (the todo on its stdin).
    #[arg(long, value_name = "CMD")]
    pub turn_command: Option<String>,
    /// Follow the provisioning jobs until all have settled; exit non-zero if any failed.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (e.g. 90s, 10m).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Print the API's JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    match s.parse::<humantime::Duration>() {
        Ok(d) if !Duration::from(d).is_zero() => Ok(d.into()),
        _ => Err(format!("{s:?} is not a duration like 90s or 10m")),
    }
}

impl CreateArgs {
    fn spec(&self) -> Result<Value, CtlError> {
        let Some(path) = &self.spec_file else {
            return Ok(json!({"turn_command": self.turn_command.clone().unwrap_or_default()}));
        };
        let text = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| CtlError::Usage(format!("reading the spec from stdin: {e}")))?
        } else {
            std::fs::read_to_string(path)
                .map_err(|e| CtlError::Usage(format!("reading the spec from {}: {e}", path.display())))?
        };
        // The controller checks the spec's fields; here only that it is a JSON object.
        match serde_json::from_str::<Value>(&text) {
            Ok(spec @ Value::Object(_)) => Ok(spec),
            Ok(_) | Err(_) => Err(CtlError::Usage(format!(
                "{} is not a JSON object; write the spec as {{\"turn_command\": \"claude -p\"}}",
                path.display()
            ))),
        }
    }
}

/// Runs `agent create`; returns what to print.
///
/// # Errors
/// [`CtlError`]: the API's refusal, or (with `--wait`) a job that failed or the timeout.
pub async fn create(api: &Api, args: &CreateArgs, now: impl Fn() -> OffsetDateTime) -> Result<String, CtlError> {
    let body = json!({"name": args.name, "hive": args.hive, "spec": args.spec()?});
    let answer =
        parse(&client::request(api, Method::POST, "/api/agents", None, Some(body.to_string().into_bytes())).await?)?;
    let ids: Vec<String> =
        answer["jobs"].as_array().into_iter().flatten().filter_map(|j| j.as_str().map(str::to_owned)).collect();
    let accepted = if args.json {
        pretty(&answer)
    } else {
        format!("agent {} on hive {}: {} provisioning jobs queued\n", args.name, args.hive, ids.len())
    };
    if !args.wait {
        let hint = if args.json {
            String::new()
        } else {
            format!("follow them: swarmctl jobs --agent {} --watch\n", args.name)
        };
        return Ok(format!("{accepted}{hint}"));
    }
    let graph = settled(api, &args.name, &ids, args.timeout).await?;
    let nodes = graph["nodes"].as_array().cloned().unwrap_or_default();
    let unhappy: Vec<String> = nodes
        .iter()
        .filter(|n| ids.iter().any(|id| n["id"] == id.as_str()) && n["state"] != JobState::Succeeded.as_str())
        .map(|n| format!("{} {}", n["id"].as_str().unwrap_or("?"), n["state"].as_str().unwrap_or("?")))
        .collect();
    let shown = if args.json {
        pretty(&graph)
    } else {
        let snapshot = serde::Deserialize::deserialize(&graph)
            .map_err(|e| CtlError::Protocol(format!("unexpected answer from swarm-controller: {e}")))?;
        format!("{accepted}{}", table(&snapshot, now()))
    };
    if unhappy.is_empty() {
        return Ok(shown);
    }
    Err(CtlError::Usage(format!(
        "{shown}provisioning of {} did not finish: {}; see `swarmctl jobs --agent {}`, fix the cause and \
         `swarmctl jobs retry ID`",
        args.name,
        unhappy.join(", "),
        args.name
    )))
}

/// Asks for the agent's graph every [`WATCH_EVERY`] until every job in `ids` has settled.
async fn settled(api: &Api, agent: &AgentName, ids: &[String], timeout: Duration) -> Result<Value, CtlError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let path = format!("/api/jobq/graph?agent={agent}");
    loop {
        let graph = parse(&client::request(api, Method::GET, &path, None, None).await?)?;
        let nodes = graph["nodes"].as_array().cloned().unwrap_or_default();
        let settled = ids.iter().all(|id| {
            nodes.iter().any(|n| {
                n["id"] == id.as_str() && n["state"].as_str().and_then(parse_state).is_some_and(JobState::is_settled)
            })
        });
        if settled {
            return Ok(graph);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CtlError::Usage(format!(
                "agent {agent}'s provisioning has not finished after {}; it goes on in the controller: \
                 swarmctl jobs --agent {agent} --watch",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

fn parse_state(s: &str) -> Option<JobState> {
    serde_json::from_value(Value::String(s.to_owned())).ok()
}
