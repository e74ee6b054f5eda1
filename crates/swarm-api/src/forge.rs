//! The forge's state as `GET /api/config-prs`, `GET /api/agents/{agent}/config-pr` and
//! `GET /api/issues` answer it (docs/swarm/forge.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The group of issues without a label in [`RepoView::labels`].
pub const UNLABELLED: &str = "(no label)";

/// An agent's config pull request: the one of its config repository most recently changed, as
/// the controller stores it in `config-prs` and serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigPr {
    pub agent: String,
    /// `owner/name` of the config repository.
    pub repo: String,
    pub number: i64,
    pub title: String,
    pub url: String,
    /// `open`, `closed` or `merged`.
    pub state: String,
    /// The head commit.
    pub head: String,
    /// The head branch.
    pub head_ref: String,
    /// `null` while the forge has not computed it.
    pub mergeable: Option<bool>,
    /// RFC 3339, the forge's `updated_at`.
    pub updated: String,
}

/// `GET /api/issues`: the open issues of the swarm organisation's repositories.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReportView {
    /// When the last listing finished; `null` before the first.
    pub listed_at: Option<String>,
    /// Open issues in all.
    pub total: usize,
    pub repos: Vec<RepoView>,
}

/// One repository's open issues, grouped by label (an issue with two labels is in both).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RepoView {
    pub repo: String,
    pub total: usize,
    /// Label name -> its issues, newest first; [`UNLABELLED`] for issues without one.
    pub labels: BTreeMap<String, Vec<IssueView>>,
}

/// One open issue.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IssueView {
    pub number: i64,
    pub title: String,
    pub url: String,
    pub updated: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_pr_reads_as_docs_swarm_forge_md_shows_it() {
        let pr: ConfigPr = serde_json::from_value(json!({
            "agent": "alpha", "repo": "swarm/alpha-config", "number": 7, "title": "Bump the model",
            "url": "https://forge/swarm/alpha-config/pulls/7", "state": "open", "head": "abc123",
            "head_ref": "bump", "mergeable": null, "updated": "2026-12-01T09:00:00Z"
        }))
        .unwrap();
        assert_eq!((pr.number, pr.mergeable, pr.state.as_str()), (7, None, "open"));
        // A field the controller stopped sending fails here, not as a silent "-" in a table.
        let mut missing = serde_json::to_value(&pr).unwrap();
        missing.as_object_mut().unwrap().remove("head_ref");
        assert!(serde_json::from_value::<ConfigPr>(missing).is_err());
    }

    #[test]
    fn the_issue_report_round_trips() {
        let report = ReportView {
            listed_at: None,
            total: 1,
            repos: vec![RepoView {
                repo: "swarm/app".into(),
                total: 1,
                labels: BTreeMap::from([(
                    UNLABELLED.to_owned(),
                    vec![IssueView {
                        number: 3,
                        title: "t".into(),
                        url: "u".into(),
                        updated: "2026-12-01T09:00:00Z".into(),
                    }],
                )]),
            }],
        };
        let text = serde_json::to_value(&report).unwrap();
        assert_eq!(text["repos"][0]["labels"]["(no label)"][0]["number"], 3);
        assert_eq!(serde_json::from_value::<ReportView>(text).unwrap(), report);
    }
}
