//! `swarmctl prompt`, `todos`, `cancel`, `turns` and `turn`: giving agents work now, their queues,
//! cancelling a running turn, and what each turn did.

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use hyper::http::{Method, StatusCode};
use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::turns::{TurnOutcome, TurnRecord};
use hyperhive_swarm_api::paths;
use hyperhive_swarm_api::work::{
    CancelAccepted, CancelBody, PromptAccepted, PromptRequest, PromptsRequest, QueuedTodo, TurnView, TurnsPage,
};

use super::client::{self, Api, CtlError};
use super::format::{grid, or_dash, pretty_answer};
use super::untrusted;

/// How often `--wait` asks whether the turn finished.
const WAIT_EVERY: Duration = Duration::from_millis(250);

/// Whether `swarmctl prompt` returns at once, when the turns finished, or following the terminal
/// until then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// At once, once queued.
    No,
    /// Once every turn finished.
    Finished,
    /// Once the turn finished, its agent's terminal printed meanwhile (one agent only).
    Follow,
}

/// `swarmctl prompt AGENT...`: queues `body` for each agent; with `wait`, returns once every
/// turn finished, failing with the first failed turn's exit code.
///
/// # Errors
/// The API's refusal, or [`CtlError::TurnFailed`] for a failed turn when waiting.
pub async fn prompt(
    api: &Api,
    agents: &[AgentName],
    body: String,
    id: Option<String>,
    wait: Wait,
    json: bool,
) -> Result<String, CtlError> {
    let accepted: Vec<PromptAccepted> = match agents {
        [agent] => {
            let request = client::body(&PromptRequest { body, id });
            let bytes = client::request(api, Method::POST, &paths::agent_todos(agent), None, Some(request)).await?;
            vec![client::answer(&bytes)?]
        }
        _ => {
            let names = agents.iter().map(ToString::to_string).collect();
            let request = client::body(&PromptsRequest { agents: names, body, id });
            client::answer(&client::request(api, Method::POST, paths::TODOS, None, Some(request)).await?)?
        }
    };
    if wait == Wait::No {
        if json {
            return Ok(format!("{}\n", serde_json::to_string_pretty(&accepted).expect("answers serialize")));
        }
        let rows = accepted.iter().map(|a| {
            [a.agent.to_string(), a.id.clone(), if a.duplicate { "already queued".into() } else { "queued".into() }]
        });
        return Ok(grid(["AGENT", "TODO", "STATE"], rows));
    }
    let all_finished = async {
        let mut finished = Vec::new();
        for a in &accepted {
            finished.push(wait_for_turn(api, &a.agent, &a.id).await?);
        }
        Ok::<_, CtlError>(finished)
    };
    let finished = match (wait, agents) {
        (Wait::Follow, [agent]) => {
            let (done, ended) = tokio::sync::oneshot::channel::<()>();
            let mut stdout = std::io::stdout();
            let waiting = async {
                let finished = all_finished.await;
                let _ = done.send(());
                finished
            };
            let following = follow_until(
                api,
                agent,
                async {
                    let _ = ended.await;
                },
                &mut stdout,
            );
            let (finished, followed) = tokio::join!(waiting, following);
            followed?;
            finished?
        }
        _ => all_finished.await?,
    };
    let out = if json {
        format!("{}\n", serde_json::to_string_pretty(&finished).expect("turns serialize"))
    } else {
        finished.iter().map(|(agent, turn)| format!("{agent}: {}\n", summary(&turn.record))).collect()
    };
    match finished.iter().find(|(_, t)| t.record.outcome != TurnOutcome::Succeeded) {
        Some((agent, turn)) => Err(CtlError::TurnFailed {
            code: exit_code(&turn.record),
            message: format!("{out}{agent}'s turn {} did not succeed", turn.record.todo_id),
        }),
        None => Ok(out),
    }
}

/// Waits for `agent`'s turn of todo `id` to be in its history.
async fn wait_for_turn(api: &Api, agent: &AgentName, id: &str) -> Result<(AgentName, TurnView), CtlError> {
    let path = paths::agent_turn_record(agent, id);
    loop {
        match client::request(api, Method::GET, &path, None, None).await {
            Ok(bytes) => return Ok((agent.clone(), client::answer(&bytes)?)),
            Err(CtlError::Api { status: StatusCode::NOT_FOUND, .. }) => tokio::time::sleep(WAIT_EVERY).await,
            Err(e) => return Err(e),
        }
    }
}

/// The command's exit code for a turn: its own, 128 + a signal, 124 timed out (as timeout(1)),
/// 130 cancelled (as an interrupt), 127 not started (as a missing command).
pub fn exit_code(record: &TurnRecord) -> u8 {
    let clamp = |n: i32| u8::try_from(n.clamp(1, 255)).unwrap_or(1);
    match record.outcome {
        TurnOutcome::Succeeded => 0,
        TurnOutcome::TimedOut => 124,
        TurnOutcome::Cancelled => 130,
        TurnOutcome::NotStarted => 127,
        TurnOutcome::Failed => match (record.exit_code, record.signal) {
            (Some(code), _) => clamp(code),
            (None, Some(signal)) => clamp(128 + signal),
            (None, None) => 1,
        },
    }
}

/// One line: how a turn ended and how long it took.
fn summary(record: &TurnRecord) -> String {
    let how = match (record.outcome, record.exit_code, record.signal) {
        (TurnOutcome::Failed, Some(code), _) => format!("failed (exit {code})"),
        (TurnOutcome::Failed, None, Some(signal)) => format!("failed (signal {signal})"),
        (outcome, ..) => outcome.as_str().replace('_', " "),
    };
    format!("{} {how} in {:.1}s", record.todo_id, record.duration_ms as f64 / 1000.0)
}

/// `swarmctl todos list AGENT`: the queue, oldest first.
pub async fn list_todos(api: &Api, agent: &AgentName, json: bool) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::GET, &paths::agent_todos(agent), None, None).await?;
    if json {
        return pretty_answer(&bytes);
    }
    let queued: Vec<QueuedTodo> = client::answer(&bytes)?;
    let rows = queued.iter().map(|q| {
        [
            untrusted::cell(&q.id).into_owned(),
            format!("{:?}", q.state).to_lowercase(),
            untrusted::cell(&q.source).into_owned(),
            format!("{}s", q.age_seconds),
            or_dash(&untrusted::cell(&q.preview)),
        ]
    });
    Ok(grid(["TODO", "STATE", "SOURCE", "AGE", "PROMPT"], rows))
}

/// `swarmctl todos rm AGENT ID`.
pub async fn remove_todo(api: &Api, agent: &AgentName, id: &str) -> Result<String, CtlError> {
    client::request(api, Method::DELETE, &paths::agent_todo(agent, id), None, None).await?;
    Ok(format!("removed todo {id} from {agent}'s queue\n"))
}

/// `swarmctl cancel AGENT [--todo ID]`.
pub async fn cancel(api: &Api, agent: &AgentName, todo: Option<String>) -> Result<String, CtlError> {
    let body = todo.map(|todo_id| client::body(&CancelBody { todo_id }));
    let bytes = client::request(api, Method::POST, &paths::cancel_turn(agent), None, body).await?;
    let accepted: CancelAccepted = client::answer(&bytes)?;
    Ok(format!("cancelling {}'s turn of todo {}\n", accepted.agent, accepted.todo_id))
}

/// `swarmctl turns AGENT [--failed] [--limit N]`: the history, newest first.
pub async fn turns(api: &Api, agent: &AgentName, failed: bool, limit: usize, json: bool) -> Result<String, CtlError> {
    let path = format!("{}?limit={limit}{}", paths::agent_turns(agent), if failed { "&failed=true" } else { "" });
    let bytes = client::request(api, Method::GET, &path, None, None).await?;
    if json {
        return pretty_answer(&bytes);
    }
    let page: TurnsPage = client::answer(&bytes)?;
    let rows = page.turns.iter().map(|t| {
        let r = &t.record;
        let source = match &t.schedule_name {
            Some(name) => format!("schedule {}", untrusted::cell(name).into_owned()),
            None => untrusted::cell(&r.source).into_owned(),
        };
        [
            r.started_at.clone(),
            untrusted::cell(&r.todo_id).into_owned(),
            source,
            outcome_cell(r),
            format!("{:.1}s", r.duration_ms as f64 / 1000.0),
        ]
    });
    Ok(grid(["STARTED", "TODO", "SOURCE", "RESULT", "TOOK"], rows))
}

fn outcome_cell(r: &TurnRecord) -> String {
    match (r.outcome, r.exit_code, r.signal) {
        (TurnOutcome::Failed, Some(code), _) => format!("exit {code}"),
        (TurnOutcome::Failed, None, Some(signal)) => format!("signal {signal}"),
        (outcome, ..) => outcome.as_str().replace('_', " "),
    }
}

/// How `swarmctl turn` shows a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnShown {
    /// The record, its output's tail included.
    Tail,
    /// The record with the whole output from the relay's history.
    Full,
    /// The API's JSON.
    Json,
}

/// `swarmctl turn AGENT ID`: one turn whole, its output filtered like the terminal.
pub async fn turn(api: &Api, agent: &AgentName, id: &str, shown: TurnShown) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::GET, &paths::agent_turn_record(agent, id), None, None).await?;
    if shown == TurnShown::Json {
        return pretty_answer(&bytes);
    }
    let view: TurnView = client::answer(&bytes)?;
    let r = &view.record;
    let source = match &view.schedule_name {
        Some(name) => format!("{} (schedule {})", r.source, name),
        None => r.source.clone(),
    };
    let (output, about) = match shown {
        TurnShown::Full => {
            let whole = client::request(api, Method::GET, &paths::agent_turn_output(agent, id), None, None).await?;
            (String::from_utf8_lossy(&whole).into_owned(), " (all of it, from the relay's history)".to_owned())
        }
        _ if r.output_dropped > 0 => {
            let whole = if view.relay_output.is_some() { "; --full for all of it" } else { "" };
            (r.output.clone(), format!(" (the last of it; {} bytes before{whole})", r.output_dropped))
        }
        _ => (r.output.clone(), String::new()),
    };
    let mut text = format!(
        "todo:     {}\nsource:   {}\nstarted:  {}\nended:    {}\nresult:   {}\n\nprompt{}:\n{}\n\noutput{about}:\n",
        r.todo_id,
        source,
        r.started_at,
        r.ended_at,
        summary(r),
        if r.prompt_truncated { " (cut)" } else { "" },
        r.prompt,
    );
    text.push_str(&output);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // The prompt and the output are the agent's: shown as the terminal shows them.
    Ok(untrusted::TerminalFilter::default().filter(&text))
}

/// Follows `agent`'s terminal until `done` resolves.
pub async fn follow_until(
    api: &Api,
    agent: &AgentName,
    done: impl Future<Output = ()>,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    super::terminal::follow(api, agent, None, super::terminal::Shown::Filtered, out, done).await
}
