//! `swarmctl terminal AGENT`: follows an agent's terminal (what its turns print) until
//! interrupted, over the socket or through the control plane. When the stream ends early (the
//! controller restarted, a slow reader was dropped, the control plane lost a copy) it resumes
//! after the last event it printed: nothing is missed, nothing printed twice.

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hyperhive_hive_proto::AgentName;
use hyperhive_swarm_api::paths;
use serde_json::{Value, json};

use super::client::{self, Api, CtlError};
use super::sse::{SseEvent, SseParser};
use super::untrusted::TerminalFilter;

/// How the events are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The output with every control but layout and colour dropped (the default).
    Filtered,
    /// The output exactly as printed (`--raw`).
    Raw,
    /// One JSON line per event (`--json`).
    Json,
}

/// The controller sends a comment every 15 s; a stream silent for longer than this is dead.
const SILENT_FOR: Duration = Duration::from_secs(40);

/// The first wait before resuming; it doubles up to [`MAX_RESUME_WAIT`].
const FIRST_RESUME_WAIT: Duration = Duration::from_millis(250);
const MAX_RESUME_WAIT: Duration = Duration::from_secs(5);

/// Prints `agent`'s terminal after event `after` (all the history the swarm keeps when `None`)
/// to `out` until `stop` resolves: the text as it was printed (filtered unless [`Shown::Raw`]),
/// or one line per event (`{"id", "text"}` or `{"id", "bytes"}`; `{"gap": {...}}` for events no
/// longer kept).
///
/// # Errors
/// The API's refusal (an unknown agent), or output that cannot be written.
pub async fn follow(
    api: &Api,
    agent: &AgentName,
    after: Option<u64>,
    shown: Shown,
    out: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<(), CtlError> {
    let mut stop = std::pin::pin!(stop);
    // One filter across resumes: a sequence cut by a reconnect is still dropped whole.
    let mut printer = Printer { shown, filter: TerminalFilter::default() };
    let path = paths::terminal(agent);
    let mut last = after;
    let mut wait = FIRST_RESUME_WAIT;
    loop {
        let why = tokio::select! {
            () = &mut stop => return Ok(()),
            ended = read_stream(api, &path, &mut last, &mut printer, out, &mut wait) => ended?,
        };
        let after = last.map_or_else(|| "the start".to_owned(), |id| format!("event {id}"));
        eprintln!("swarmctl: the terminal stream ended ({why}); resuming after {after} in {wait:?}");
        tokio::select! {
            () = &mut stop => return Ok(()),
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(MAX_RESUME_WAIT);
    }
}

/// Reads one stream until it ends; returns why it ended (an API refusal is an error).
async fn read_stream(
    api: &Api,
    path: &str,
    last: &mut Option<u64>,
    printer: &mut Printer,
    out: &mut dyn Write,
    wait: &mut Duration,
) -> Result<String, CtlError> {
    let mut body = match client::stream(api, path, *last).await {
        Ok(body) => body,
        Err(e @ CtlError::Api { .. }) => return Err(e),
        Err(e) => return Ok(e.to_string()),
    };
    let mut parser = SseParser::default();
    loop {
        let piece = match tokio::time::timeout(SILENT_FOR, body.next()).await {
            Err(_) => return Ok(format!("nothing for {}s", SILENT_FOR.as_secs())),
            Ok(None) => return Ok("the controller ended it".into()),
            Ok(Some(Err(e))) => return Ok(e.to_string()),
            Ok(Some(Ok(piece))) => piece,
        };
        *wait = FIRST_RESUME_WAIT;
        for event in parser.push(&piece) {
            printer.print(&event, out)?;
            if event.id.is_some() {
                *last = event.id;
            }
        }
    }
}

/// Writes events as [`Shown`] says.
struct Printer {
    shown: Shown,
    filter: TerminalFilter,
}

impl Printer {
    fn print(&mut self, event: &SseEvent, out: &mut dyn Write) -> Result<(), CtlError> {
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        let as_json = self.shown == Shown::Json;
        let written = match (event.event.as_str(), as_json) {
            ("term", true) => {
                let mut line = json!({"id": event.id});
                for key in ["text", "bytes"] {
                    if let Some(value) = data.get(key) {
                        line[key] = value.clone();
                    }
                }
                writeln!(out, "{line}")
            }
            ("term", false) => {
                let bytes = match data["text"].as_str() {
                    Some(text) => text.as_bytes().to_vec(),
                    None => data["bytes"].as_str().and_then(|b| STANDARD.decode(b).ok()).unwrap_or_default(),
                };
                if self.shown == Shown::Raw {
                    out.write_all(&bytes)
                } else {
                    out.write_all(self.filter.filter(&String::from_utf8_lossy(&bytes)).as_bytes())
                }
            }
            ("gap", true) => writeln!(out, "{}", json!({"gap": data})),
            ("gap", false) => {
                eprintln!(
                    "swarmctl: events {} to {} are no longer kept; output is missing here",
                    data["from"], data["to"]
                );
                Ok(())
            }
            _ => Ok(()),
        };
        written.and_then(|()| out.flush()).map_err(|e| CtlError::Usage(format!("writing the terminal: {e}")))
    }
}
