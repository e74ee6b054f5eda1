//! `swarmctl config-prs` and `swarmctl issues`: each agent's config pull request and the open
//! issues of the swarm's organisation. Tables by default, the API's JSON with `--json`.

use hyper::http::Method;
use hyperhive_swarm_api::forge::{ConfigPr, ReportView};
use hyperhive_swarm_api::paths;

use super::client::{self, Api, CtlError};
use super::format::{grid, or_dash, pretty_answer};

/// `swarmctl config-prs`: AGENT, PR, STATE, MERGEABLE, TITLE, UPDATED, URL.
pub async fn config_prs(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::GET, paths::CONFIG_PRS, None, None).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let all: Vec<ConfigPr> = client::answer(&bytes)?;
    let table = all.iter().map(|pr| {
        let mergeable = match pr.mergeable {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        [
            or_dash(&pr.agent),
            format!("#{}", pr.number),
            or_dash(&pr.state),
            mergeable.to_owned(),
            or_dash(&pr.title),
            or_dash(&pr.updated),
            or_dash(&pr.url),
        ]
    });
    Ok(grid(["AGENT", "PR", "STATE", "MERGEABLE", "TITLE", "UPDATED", "URL"], table))
}

/// `swarmctl issues`: REPO, LABEL, ISSUE, TITLE, UPDATED; one line per issue and label.
pub async fn issues(api: &Api, as_json: bool) -> Result<String, CtlError> {
    let bytes = client::request(api, Method::GET, paths::ISSUES, None, None).await?;
    if as_json {
        return pretty_answer(&bytes);
    }
    let report: ReportView = client::answer(&bytes)?;
    let mut lines = Vec::new();
    for repo in &report.repos {
        for (label, issues) in &repo.labels {
            for issue in issues {
                lines.push([
                    or_dash(&repo.repo),
                    label.clone(),
                    format!("#{}", issue.number),
                    or_dash(&issue.title),
                    or_dash(&issue.updated),
                ]);
            }
        }
    }
    let listed = match &report.listed_at {
        Some(at) => format!("listed at {at}"),
        None => "not listed yet".to_owned(),
    };
    Ok(format!("{}open: {}; {listed}\n", grid(["REPO", "LABEL", "ISSUE", "TITLE", "UPDATED"], lines), report.total))
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
