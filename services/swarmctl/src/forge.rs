//! `swarmctl config-prs` and `swarmctl issues`: each agent's config pull request and the open
//! issues of the swarm's organisation. Tables by default, the API's JSON with `--json`.

use hyper::http::Method;
use hyperhive_swarm_api::paths;
use serde_json::Value;

use super::client::{self, Api, CtlError};
use super::format::grid;
use super::hives::{parse, pretty, rows, text};

/// `swarmctl config-prs`: AGENT, PR, STATE, MERGEABLE, TITLE, UPDATED, URL.
pub async fn config_prs(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let all = parse(&client::request(api, Method::GET, paths::CONFIG_PRS, None, None).await?)?;
    if as_json {
        return Ok(pretty(&all));
    }
    let table = rows(&all).iter().map(|pr| {
        let mergeable = match pr["mergeable"].as_bool() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        [
            text(&pr["agent"]),
            format!("#{}", text(&pr["number"])),
            text(&pr["state"]),
            mergeable.to_owned(),
            text(&pr["title"]),
            text(&pr["updated"]),
            text(&pr["url"]),
        ]
    });
    Ok(grid(["AGENT", "PR", "STATE", "MERGEABLE", "TITLE", "UPDATED", "URL"], table))
}

/// `swarmctl issues`: REPO, LABEL, ISSUE, TITLE, UPDATED; one line per issue and label.
pub async fn issues(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let report = parse(&client::request(api, Method::GET, paths::ISSUES, None, None).await?)?;
    if as_json {
        return Ok(pretty(&report));
    }
    let mut lines = Vec::new();
    for repo in rows(&report["repos"]) {
        let Some(labels) = repo["labels"].as_object() else { continue };
        for (label, issues) in labels {
            for issue in rows(issues) {
                lines.push([
                    text(&repo["repo"]),
                    label.clone(),
                    format!("#{}", text(&issue["number"])),
                    text(&issue["title"]),
                    text(&issue["updated"]),
                ]);
            }
        }
    }
    let listed = match &report["listed_at"] {
        Value::String(at) => format!("listed at {at}"),
        _ => "not listed yet".to_owned(),
    };
    let total = report["total"].as_u64().unwrap_or_default();
    Ok(format!("{}open: {total}; {listed}\n", grid(["REPO", "LABEL", "ISSUE", "TITLE", "UPDATED"], lines)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_commands_parse() {
        use clap::Parser;
        for args in [["swarmctl", "config-prs", "--json"], ["swarmctl", "issues", "--json"]] {
            super::super::Cli::try_parse_from(args).unwrap();
        }
    }
}
