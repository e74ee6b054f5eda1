//! `swarmctl hives`, `hives status`, `agents` and `agent state`: the hive directory, hive status,
//! the roster and wanted state. Tables by default, the API's JSON with `--json`.

use hyper::http::Method;
use hyperhive_hive_proto::wanted::WantedState;
use hyperhive_hive_proto::{AgentName, HiveName};
use serde_json::{Value, json};

use super::client::{self, Api, CtlError};
use super::format::grid;

pub(super) fn parse(bytes: &[u8]) -> Result<Value, CtlError> {
    serde_json::from_slice(bytes)
        .map_err(|e| CtlError::Protocol(format!("unexpected answer from swarm-controller: {e}")))
}

pub(super) fn pretty(value: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(value).expect("a JSON value serializes"))
}

/// A JSON string field, or `-` when absent or null.
pub(super) fn text(value: &Value) -> String {
    match value {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "-".into(),
    }
}

pub(super) fn rows(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// `swarmctl hives`: NAME, DESCRIPTION, LABELS, XKEY.
pub async fn list(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let hives = parse(&client::request(api, Method::GET, "/api/hives", None, None).await?)?;
    if as_json {
        return Ok(pretty(&hives));
    }
    let table = rows(&hives).iter().map(|h| {
        let labels: Vec<String> = h["labels"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
            .unwrap_or_default();
        [
            text(&h["name"]),
            text(&h["description"]),
            if labels.is_empty() { "-".into() } else { labels.join(",") },
            text(&h["xkey"]),
        ]
    });
    Ok(grid(["NAME", "DESCRIPTION", "LABELS", "XKEY"], table))
}

/// `swarmctl hives status [HIVE]`: HIVE, STATE (fresh, stale, never), AGE, VERSION, LOAD, AGENTS.
pub async fn status(api: &Api, hive: Option<&HiveName>, as_json: bool) -> Result<String, CtlError> {
    let path = match hive {
        Some(hive) => format!("/api/hives/{hive}/status"),
        None => "/api/hives/status".into(),
    };
    let answer = parse(&client::request(api, Method::GET, &path, None, None).await?)?;
    if as_json {
        return Ok(pretty(&answer));
    }
    let all = if hive.is_some() { vec![answer] } else { rows(&answer).to_vec() };
    let table = all.iter().map(|s| {
        let status = &s["status"];
        let state = match (status.is_null(), s["stale"].as_bool()) {
            (true, _) => "never",
            (false, Some(false)) => "fresh",
            (false, _) => "stale",
        };
        let load = status["load"].as_array().map_or("-".into(), |l| {
            l.iter().map(|x| format!("{:.2}", x.as_f64().unwrap_or_default())).collect::<Vec<_>>().join(" ")
        });
        let agents = status["agents"].as_object().map_or("-".into(), |a| a.len().to_string());
        let age = s["age_secs"].as_u64().map_or("-".into(), |a| format!("{a}s"));
        [text(&s["hive"]), state.into(), age, text(&status["version"]), load, agents]
    });
    Ok(grid(["HIVE", "STATE", "AGE", "VERSION", "LOAD", "AGENTS"], table))
}

/// `swarmctl agents`: NAME, HIVE, ORIGIN, WANTED, ACTUAL, RESTARTS.
pub async fn agents(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let agents = parse(&client::request(api, Method::GET, "/api/agents", None, None).await?)?;
    if as_json {
        return Ok(pretty(&agents));
    }
    let table = rows(&agents).iter().map(|a| {
        let wanted = match a["wanted"]["revision"].as_u64() {
            Some(revision) => format!("{} (rev {revision})", text(&a["wanted"]["state"])),
            None => format!("{} (default)", text(&a["wanted"]["state"])),
        };
        [
            text(&a["name"]),
            text(&a["hive"]),
            text(&a["origin"]),
            wanted,
            text(&a["actual"]["actual"]),
            text(&a["actual"]["restarts"]),
        ]
    });
    Ok(grid(["NAME", "HIVE", "ORIGIN", "WANTED", "ACTUAL", "RESTARTS"], table))
}

/// `swarmctl agent state HIVE AGENT STATE [--if-match REV]`.
pub async fn set_state(
    api: &Api,
    hive: &HiveName,
    agent: &AgentName,
    state: WantedState,
    if_match: Option<u64>,
    as_json: bool,
) -> Result<String, CtlError> {
    let path = format!("/api/hives/{hive}/agents/{agent}/state");
    let body = json!({"state": state}).to_string().into_bytes();
    let answer = parse(&client::request(api, Method::PUT, &path, if_match, Some(body)).await?)?;
    if as_json {
        return Ok(pretty(&answer));
    }
    Ok(format!(
        "{hive}/{agent}: wanted state {} (revision {}, set by {} at {})\n",
        text(&answer["state"]),
        text(&answer["revision"]),
        text(&answer["set_by"]),
        text(&answer["set_at"])
    ))
}
