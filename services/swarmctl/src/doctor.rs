//! `swarmctl doctor`: checks a running swarm through the controller's API and says what to fix,
//! one line per check. It reads only viewer routes (`/healthz`, `/api/hives/status`,
//! `/api/agents/status`), so any user of the socket (or paired client) may run it; a check that
//! fails makes swarmctl exit non-zero, so scripts can run it after a deploy.

use hyper::http::Method;
use hyperhive_swarm_api::hives::HiveStatusView;
use hyperhive_swarm_api::paths;
use serde::Serialize;
use serde_json::Value;

use super::client::{self, Api, CtlError};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Nothing to fix.
    Ok,
    /// Something to fix; the detail says what.
    Problem,
    /// Not checked, because an earlier check failed.
    Skipped,
}

/// One check's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked.
    pub check: &'static str,
    /// How it came out.
    pub outcome: Outcome,
    /// What was found, and what to do about a problem.
    pub detail: String,
}

fn check(check: &'static str, outcome: Outcome, detail: impl Into<String>) -> Check {
    Check { check, outcome, detail: detail.into() }
}

/// The whole report, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Whether every check passed.
    pub ok: bool,
    /// Every check, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// One line per check: `ok`, `PROBLEM` or `skipped`, the check, what was found.
    pub fn text(&self) -> String {
        let width = self.checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
        self.checks
            .iter()
            .map(|c| {
                let outcome = match c.outcome {
                    Outcome::Ok => "ok",
                    Outcome::Problem => "PROBLEM",
                    Outcome::Skipped => "skipped",
                };
                format!("{outcome:<7}  {:<width$}  {}\n", c.check, c.detail)
            })
            .collect()
    }
}

/// Runs every check against `api` (`shown`: where it is, for the first line).
pub async fn diagnose(api: &Api, shown: &str) -> Report {
    let mut checks = Vec::new();
    let health = match client::request(api, Method::GET, paths::HEALTHZ, None, None).await {
        Ok(bytes) => {
            checks.push(check("controller", Outcome::Ok, format!("answering at {shown}")));
            let health: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let server = health["nats_server"].as_str().unwrap_or("?");
            checks.push(check("nats", Outcome::Ok, format!("the controller is connected (server {server})")));
            Some(health)
        }
        Err(CtlError::Api { message, .. }) => {
            checks.push(check("controller", Outcome::Ok, format!("answering at {shown}")));
            checks.push(check(
                "nats",
                Outcome::Problem,
                format!("{message}: check nats-server and the controller's SWARM_NATS_URL and SWARM_NATS_CREDS"),
            ));
            None
        }
        Err(error) => {
            checks.push(check("controller", Outcome::Problem, error.to_string()));
            let rest = ["nats", "hives", "agents", "secret store", "deploy key", "control link"];
            checks.extend(rest.map(|name| check(name, Outcome::Skipped, "the controller cannot be reached")));
            return finish(checks);
        }
    };

    if health.is_some() {
        checks.push(hives(api).await);
        checks.push(agents(api).await);
    } else {
        // Both read NATS through the controller: they would only wait for its timeouts.
        checks.push(check("hives", Outcome::Skipped, "the controller is not connected to NATS"));
        checks.push(check("agents", Outcome::Skipped, "the controller is not connected to NATS"));
    }
    let configured = health.as_ref().map(|h| &h["configured"]);
    checks.push(configured_check(
        configured,
        "secret store",
        "secret_store",
        "the secret store's key is loaded",
        "no secret store key: agents cannot be created nor secrets set; set \
         services.hyperhive.deploy.swarm-controller.secretsKeyFile (SWARM_SECRETS_KEY_FILE)",
    ));
    checks.push(configured_check(
        configured,
        "deploy key",
        "deploy_key",
        "the deploy key is loaded",
        "no deploy key: nothing can be deployed to the hives; set \
         services.hyperhive.deploy.swarm-controller.deployKeyFile (SWARM_DEPLOY_KEY_FILE)",
    ));
    checks.push(match &health {
        None => check("control link", Outcome::Skipped, "the controller is not connected to NATS"),
        Some(health) => control_link(&health["control_link"]),
    });
    finish(checks)
}

fn finish(checks: Vec<Check>) -> Report {
    Report { ok: checks.iter().all(|c| c.outcome == Outcome::Ok), checks }
}

/// Every hive in the directory has a fresh status.
async fn hives(api: &Api) -> Check {
    let statuses: Vec<HiveStatusView> = match client::request(api, Method::GET, paths::HIVE_STATUSES, None, None)
        .await
        .and_then(|b| client::answer(&b))
    {
        Ok(statuses) => statuses,
        Err(error) => return check("hives", Outcome::Problem, format!("cannot read the hives' status: {error}")),
    };
    if statuses.is_empty() {
        return check(
            "hives",
            Outcome::Problem,
            "the hive directory is empty: declare the hives in services.hyperhive.swarm.hives (SWARM_HIVES_FILE)",
        );
    }
    let troubles: Vec<String> = statuses
        .iter()
        .filter(|s| s.stale)
        .map(|s| match s.age_secs {
            Some(age) => format!("{} is stale (last status {age}s ago)", s.hive),
            None => format!("{} never reported", s.hive),
        })
        .collect();
    if troubles.is_empty() {
        return check("hives", Outcome::Ok, format!("{} reporting", statuses.len()));
    }
    check(
        "hives",
        Outcome::Problem,
        format!(
            "{}: is hive-c0re running there, with its NATS credential (HIVE_C0RE_NATS_CREDS)?",
            troubles.join("; ")
        ),
    )
}

/// Every created agent's credentials are accepted (a renewal under way is fine).
async fn agents(api: &Api) -> Check {
    let live = match crate::hives::agent_pages(api, paths::AGENTS_STATUS, &crate::hives::Listing::default()).await {
        Ok((live, _)) => live,
        Err(error) => return check("agents", Outcome::Problem, format!("cannot read the agents' status: {error}")),
    };
    let mut checked = 0;
    let mut troubles = Vec::new();
    for agent in &live {
        let Some(credentials) = agent["credentials"]["credentials"].as_object() else { continue };
        checked += 1;
        let name = agent["name"].as_str().unwrap_or("?");
        for (kind, verdict) in credentials {
            let verdict = verdict.as_str().unwrap_or("?");
            if matches!(verdict, "repairing" | "unreachable") {
                troubles.push(format!("{name}'s {kind} credential is {verdict}"));
            }
        }
    }
    if troubles.is_empty() {
        return check(
            "agents",
            Outcome::Ok,
            format!("{} on the roster, credentials healthy ({checked} checked by the controller)", live.len()),
        );
    }
    check("agents", Outcome::Problem, format!("{} (see `swarmctl jobs` and the controller's log)", troubles.join("; ")))
}

fn configured_check(configured: Option<&Value>, name: &'static str, field: &str, ok: &str, missing: &str) -> Check {
    match configured.map(|c| &c[field]) {
        None => check(name, Outcome::Skipped, "the controller is not connected to NATS"),
        Some(Value::Bool(true)) => check(name, Outcome::Ok, ok),
        Some(Value::Bool(false)) => check(name, Outcome::Problem, missing),
        Some(_) => check(name, Outcome::Problem, "the controller does not say (an older version?)"),
    }
}

/// The link to the control plane, when the controller is paired.
fn control_link(link: &Value) -> Check {
    if link.is_null() {
        return check("control link", Outcome::Ok, "not paired: the API is reachable through the socket only");
    }
    let state = link["state"].as_str().unwrap_or("?");
    let error = link["error"].as_str().map(|e| format!(" ({e})")).unwrap_or_default();
    match state {
        "up" => check("control link", Outcome::Ok, format!("up, through {}", link["copy"].as_str().unwrap_or("?"))),
        "stopped" => check(
            "control link",
            Outcome::Problem,
            format!("stopped{error}: the control plane forgot this host; pair it again (`swarm-controller pair CODE`)"),
        ),
        _ => check(
            "control link",
            Outcome::Problem,
            format!("{state}{error}: check that the control plane is reachable from the controller"),
        ),
    }
}

/// `swarmctl doctor`: the report as text or JSON; [`CtlError::Unhealthy`] (which prints it and
/// exits 1) when a check failed.
///
/// # Errors
/// [`CtlError::Unhealthy`] with the report.
pub async fn doctor(api: &Api, shown: &str, as_json: bool) -> Result<String, CtlError> {
    let report = diagnose(api, shown).await;
    let text = if as_json {
        format!("{}\n", serde_json::to_string_pretty(&report).expect("a report serializes"))
    } else {
        report.text()
    };
    if report.ok {
        Ok(text)
    } else {
        let problems = report.checks.iter().filter(|c| c.outcome == Outcome::Problem).count();
        Err(CtlError::Unhealthy { report: text, problems })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_control_link_is_fine_unpaired_or_up_and_a_problem_otherwise() {
        assert_eq!(control_link(&Value::Null).outcome, Outcome::Ok);
        assert_eq!(control_link(&json!({"state": "up", "device_id": "d", "copy": "cp1"})).outcome, Outcome::Ok);
        let connecting = control_link(&json!({"state": "connecting", "device_id": "d", "error": "refused"}));
        assert_eq!(connecting.outcome, Outcome::Problem);
        assert!(connecting.detail.contains("refused"), "{}", connecting.detail);
        assert!(control_link(&json!({"state": "stopped", "device_id": "d"})).detail.contains("pair it again"));
    }

    #[test]
    fn a_missing_key_names_the_option_and_variable_to_set() {
        let configured = json!({"secret_store": false, "deploy_key": true});
        let missing =
            configured_check(Some(&configured), "secret store", "secret_store", "ok", "set SWARM_SECRETS_KEY_FILE");
        assert_eq!((missing.outcome, missing.detail.as_str()), (Outcome::Problem, "set SWARM_SECRETS_KEY_FILE"));
        assert_eq!(configured_check(Some(&configured), "deploy key", "deploy_key", "ok", "x").outcome, Outcome::Ok);
        assert_eq!(configured_check(Some(&json!({})), "deploy key", "deploy_key", "ok", "x").outcome, Outcome::Problem);
    }

    #[test]
    fn the_report_is_one_line_per_check_and_ok_only_when_all_are() {
        let report = finish(vec![check("a", Outcome::Ok, "fine"), check("bb", Outcome::Problem, "fix it")]);
        assert!(!report.ok);
        assert_eq!(report.text(), "ok       a   fine\nPROBLEM  bb  fix it\n");
        assert!(finish(vec![check("a", Outcome::Ok, "fine")]).ok);
    }
}
