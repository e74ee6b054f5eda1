//! `swarmctl jobs [--agent NAME] [--watch] [--json]` and `swarmctl jobs retry ID`: the job graph
//! as a table (ID, KIND, AGENT, STATE, ATTEMPTS, LAST ERROR, AGE), redrawn on change with
//! `--watch`, and retrying a failed job.

use std::future::Future;
use std::io::Write;

use std::time::Duration;

use hyper::http::Method;
use hyperhive_hive_proto::AgentName;
use hyperhive_jobq::Clock;
use hyperhive_swarm_api::jobs::{GraphSnapshot, JobId, JobState, Node};
use hyperhive_swarm_api::paths;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::client::{self, Api, CtlError};
use super::format::{grid, pretty, pretty_answer};

/// How often `--watch` asks the controller.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);
/// The longest last error shown in the table (the JSON has all of it).
const ERROR_WIDTH: usize = 60;

async fn fetch(api: &Api, agent: Option<&AgentName>) -> Result<Value, CtlError> {
    client::answer(&client::request(api, Method::GET, &paths::job_graph(agent), None, None).await?)
}

fn typed(value: &Value) -> Result<GraphSnapshot, CtlError> {
    GraphSnapshot::deserialize(value)
        .map_err(|e| CtlError::Protocol(format!("unexpected answer from swarm-controller: {e}")))
}

/// `swarmctl jobs`: the table, or the API's JSON.
pub async fn list(
    api: &Api,
    agent: Option<&AgentName>,
    as_json: bool,
    now: OffsetDateTime,
) -> Result<String, CtlError> {
    let graph = fetch(api, agent).await?;
    if as_json {
        return Ok(pretty(&graph));
    }
    Ok(table(&typed(&graph)?, now))
}

/// `swarmctl jobs --watch`: prints the graph, then again each time it changes (asking every
/// [`WATCH_EVERY`]), until `stop` resolves. On a terminal (`clear`) each frame replaces the
/// last and the ages tick; otherwise frames are printed one after another, only on a change,
/// separated by a blank line (with `--json`: one line of JSON per change).
///
/// # Errors
/// When the first request fails; later failures are printed and the watch goes on.
pub async fn watch(
    api: &Api,
    agent: Option<&AgentName>,
    as_json: bool,
    clear: bool,
    clock: &dyn Clock,
    out: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<(), CtlError> {
    let mut stop = std::pin::pin!(stop);
    let mut shown: Option<String> = None;
    let mut first = true;
    loop {
        match fetch(api, agent).await {
            Ok(graph) => {
                // The generation moves with any job's change, another agent's too: compare
                // what is shown. On a terminal the table itself, so the ages tick.
                let jobs = serde_json::json!([graph["nodes"], graph["edges"]]).to_string();
                let (frame, key) = if as_json {
                    (format!("{graph}\n"), jobs)
                } else {
                    let text = table(&typed(&graph)?, clock.now());
                    let key = if clear { text.clone() } else { jobs };
                    (text, key)
                };
                if shown.as_ref() != Some(&key) {
                    let frame = match (clear && !as_json, first) {
                        (true, _) => {
                            format!("\x1b[H\x1b[2J{frame}\n(every {}s; Ctrl-C to stop)\n", WATCH_EVERY.as_secs())
                        }
                        (false, true) => frame,
                        (false, false) if as_json => frame,
                        (false, false) => format!("\n{frame}"),
                    };
                    write(out, &frame)?;
                    shown = Some(key);
                }
            }
            Err(err) if first => return Err(err),
            Err(err) => {
                let line = format!("swarmctl: {err} (still watching)\n");
                if shown.as_ref() != Some(&line) {
                    write(out, &line)?;
                    shown = Some(line);
                }
            }
        }
        first = false;
        tokio::select! {
            () = &mut stop => return Ok(()),
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
}

fn write(out: &mut dyn Write, text: &str) -> Result<(), CtlError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CtlError::Usage(format!("writing the output: {e}")))
}

/// `swarmctl jobs retry ID`.
pub async fn retry(api: &Api, id: &JobId, as_json: bool) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::POST, &paths::job_retry(id), None, None).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let job: Node = client::answer(&bytes)?;
    Ok(format!("retrying job {id}: {}, with a fresh set of attempts\n", job.state))
}

/// The table, in the order the jobs were added.
pub fn table(graph: &GraphSnapshot, now: OffsetDateTime) -> String {
    let rows = graph.nodes.iter().map(|n| {
        [
            n.id.to_string(),
            n.kind.clone(),
            n.agent.clone().unwrap_or_else(|| "-".into()),
            state(n, now),
            n.attempts.to_string(),
            n.last_error.as_deref().map_or_else(|| "-".into(), one_line),
            age(n.created_at, now),
        ]
    });
    grid(["ID", "KIND", "AGENT", "STATE", "ATTEMPTS", "LAST ERROR", "AGE"], rows)
}

/// The state; a retrying job with the time left before its next attempt, a skipped one with
/// why it had nothing to do (so nobody takes it for work done).
fn state(node: &Node, now: OffsetDateTime) -> String {
    match (node.state, node.next_attempt_at, &node.skipped_because) {
        (JobState::Retrying, Some(at), _) => format!("retrying in {}", span(at - now)),
        (JobState::Skipped, _, Some(reason)) => format!("skipped ({})", one_line(reason)),
        (state, _, _) => state.to_string(),
    }
}

fn age(since: OffsetDateTime, now: OffsetDateTime) -> String {
    span(now - since)
}

/// A duration in its largest whole unit: 45s, 12m, 3h, 2d (0s when negative).
fn span(d: time::Duration) -> String {
    let secs = d.whole_seconds().max(0);
    match secs {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3_600 => format!("{}h", s / 3_600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// An error on one line of at most [`ERROR_WIDTH`] characters, control characters (which could
/// move a terminal's cursor) replaced by spaces.
fn one_line(error: &str) -> String {
    let clean: String = error.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if clean.chars().count() <= ERROR_WIDTH {
        return clean;
    }
    let cut: String = clean.chars().take(ERROR_WIDTH - 3).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-30 12:00:00 UTC);

    fn node(id: &str, state: JobState) -> Node {
        Node {
            id: JobId::parse(id).unwrap(),
            kind: "forge-user".into(),
            agent: Some("alpha".into()),
            state,
            attempts: 0,
            last_error: None,
            next_attempt_at: None,
            created_at: NOW - time::Duration::seconds(90),
            started_at: None,
            finished_at: None,
            skipped_because: None,
        }
    }

    #[test]
    fn the_table_shows_each_job_on_one_line() {
        let mut retrying = node("alpha.forge-user", JobState::Retrying);
        retrying.attempts = 2;
        retrying.last_error = Some("forge answered 502:\n\x1b[31mBad Gateway".into());
        retrying.next_attempt_at = Some(NOW + time::Duration::seconds(4));
        let mut orphan = node("cleanup", JobState::Waiting);
        orphan.agent = None;
        orphan.created_at = NOW - time::Duration::hours(50);
        let mut skipped = node("alpha.matrix", JobState::Skipped);
        skipped.attempts = 1;
        skipped.skipped_because = Some("SWARM_MATRIX_URL is not set".into());
        let graph = GraphSnapshot { generation: 1, nodes: vec![retrying, orphan, skipped], edges: vec![] };
        let shown = table(&graph, NOW);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines,
            [
                "ID                KIND        AGENT  STATE                                  ATTEMPTS  LAST ERROR                            AGE",
                "alpha.forge-user  forge-user  alpha  retrying in 4s                         2         forge answered 502:  [31mBad Gateway  1m",
                "cleanup           forge-user  -      waiting                                0         -                                     2d",
                "alpha.matrix      forge-user  alpha  skipped (SWARM_MATRIX_URL is not set)  1         -                                     1m",
            ]
        );
    }

    #[test]
    fn long_errors_and_spans_are_shortened() {
        assert_eq!(one_line(&"x".repeat(100)), format!("{}...", "x".repeat(57)));
        assert_eq!(one_line("a\tb\r\nc"), "a b  c");
        let spans: Vec<String> =
            [-5, 0, 59, 60, 3_599, 3_600, 86_399, 86_400].map(|s| span(time::Duration::seconds(s))).into();
        assert_eq!(spans, ["0s", "0s", "59s", "1m", "59m", "1h", "23h", "1d"]);
    }
}
