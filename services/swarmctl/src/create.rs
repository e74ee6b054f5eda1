//! `swarmctl agent create NAME --hive HIVE (--spec-file FILE | --turn-command CMD) [--wait]`:
//! asks the controller to create an agent, then (with `--wait`) follows its provisioning jobs
//! until every one has settled, and prints their table.

use std::path::PathBuf;
use std::time::Duration;

use hyper::http::Method;
use hyperhive_hive_proto::spec::AgentSpec;
use hyperhive_hive_proto::{AgentName, HiveName};
use hyperhive_swarm_api::agents::{AgentCreated, CreateAgentRequest};
use hyperhive_swarm_api::jobs::GraphSnapshot;
use hyperhive_swarm_api::paths;
use serde_json::Value;
use time::OffsetDateTime;

use super::client::{self, Api, CtlError};
use super::format::{pretty, pretty_answer};
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
    /// A label of the agent, KEY=VALUE (e.g. team=infra); repeated for several.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<crate::labels::Label>,
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
    fn spec(&self) -> Result<AgentSpec, CtlError> {
        let Some(path) = &self.spec_file else {
            return Ok(AgentSpec {
                turn_command: self.turn_command.clone().unwrap_or_default(),
                schedule_tick: None,
                turn_timeout: None,
                env: Default::default(),
            });
        };
        let text = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| CtlError::Usage(format!("reading the spec from stdin: {e}")))?
        } else {
            std::fs::read_to_string(path)
                .map_err(|e| CtlError::Usage(format!("reading the spec from {}: {e}", path.display())))?
        };
        // Here its shape; the controller checks the values (an empty command, a reserved variable).
        match serde_json::from_str::<Value>(&text) {
            Ok(spec @ Value::Object(_)) => serde_json::from_value(spec).map_err(|e| {
                CtlError::Usage(format!(
                    "{} is not an agent's spec: {e}; write it as {{\"turn_command\": \"claude -p\"}} with \
                     optional \"schedule_tick\", \"turn_timeout\" and \"env\"",
                    path.display()
                ))
            }),
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
    let labels = args.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect();
    let request =
        CreateAgentRequest { name: args.name.to_string(), hive: args.hive.to_string(), spec: args.spec()?, labels };
    let bytes = client::request(api, Method::POST, paths::AGENTS, None, Some(client::body(&request))).await?;
    let created: AgentCreated = client::answer(&bytes)?;
    let ids = created.jobs;
    let accepted = if args.json {
        pretty_answer(&bytes)?
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
    let (raw, graph) = settled(api, &args.name, &ids, args.timeout).await?;
    let unhappy: Vec<String> = graph
        .nodes
        .iter()
        .filter(|n| ids.iter().any(|id| n.id.as_str() == id.as_str()) && !n.state.lets_dependents_run())
        .map(|n| format!("{} {}", n.id, n.state))
        .collect();
    let shown = if args.json { pretty(&raw) } else { format!("{accepted}{}", table(&graph, now())) };
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

/// Asks for the agent's graph every [`WATCH_EVERY`] until every job in `ids` has settled;
/// returns the last answer as it came and as the graph.
async fn settled(
    api: &Api,
    agent: &AgentName,
    ids: &[String],
    timeout: Duration,
) -> Result<(Value, GraphSnapshot), CtlError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let path = paths::job_graph(Some(agent));
    loop {
        let bytes = client::request(api, Method::GET, &path, None, None).await?;
        let (raw, graph): (Value, GraphSnapshot) = (client::answer(&bytes)?, client::answer(&bytes)?);
        let settled =
            ids.iter().all(|id| graph.nodes.iter().any(|n| n.id.as_str() == id.as_str() && n.state.is_settled()));
        if settled {
            return Ok((raw, graph));
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
