//! The issue report: the open issues of the swarm organisation's repositories, in memory. The
//! periodic listing rebuilds it whole (also at start); `issues` deliveries keep it current in
//! between, under the same ordering rule as `config-prs` (a state older than the one held is
//! dropped). A delivery racing a listing may be undone by it; the next listing heals that.

use std::collections::BTreeMap;
use std::sync::RwLock;

use hyperhive_provision::forge::{Issue, SwarmForge};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The group of issues without a label.
pub const UNLABELLED: &str = "(no label)";

#[derive(Debug, Default)]
struct Held {
    /// By `owner/name`, then issue number. Closed issues are kept (as closed) so that a late
    /// `opened` cannot bring them back; the report shows open ones only.
    repos: BTreeMap<String, BTreeMap<i64, Issue>>,
    /// When the last listing finished (RFC 3339), if one has.
    listed_at: Option<String>,
}

/// The report, shared by the API and the passes.
#[derive(Debug, Default)]
pub struct IssueReport {
    held: RwLock<Held>,
}

/// `GET /api/issues`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ReportView {
    /// When the last listing finished; `null` before the first.
    pub listed_at: Option<String>,
    /// Open issues in all.
    pub total: usize,
    pub repos: Vec<RepoView>,
}

/// One repository's open issues, grouped by label (an issue with two labels is in both).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RepoView {
    pub repo: String,
    pub total: usize,
    /// Label name -> its issues, newest first; [`UNLABELLED`] for issues without one.
    pub labels: BTreeMap<String, Vec<IssueView>>,
}

#[derive(Debug, Serialize, PartialEq, Eq, Clone)]
pub struct IssueView {
    pub number: i64,
    pub title: String,
    pub url: String,
    pub updated: String,
}

fn instant(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

impl IssueReport {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Held> {
        self.held.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the issue of a delivery; whether the report changed. `deleted` removes it.
    pub fn apply(&self, repo: &str, action: &str, issue: Issue) -> bool {
        let mut held = self.write();
        let issues = held.repos.entry(repo.to_owned()).or_default();
        if action == "deleted" {
            return issues.remove(&issue.number).is_some();
        }
        let newer = issues.get(&issue.number).is_none_or(|old| instant(&issue.updated_at) > instant(&old.updated_at));
        if newer {
            issues.insert(issue.number, issue);
        }
        newer
    }

    /// Replaces the whole report with a listing.
    pub fn replace(&self, repos: BTreeMap<String, Vec<Issue>>, listed_at: String) {
        let mut held = self.write();
        held.repos = repos
            .into_iter()
            .map(|(repo, issues)| (repo, issues.into_iter().map(|i| (i.number, i)).collect()))
            .collect();
        held.listed_at = Some(listed_at);
    }

    /// The open issues, by repository and label.
    pub fn view(&self) -> ReportView {
        let held = self.held.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut total = 0;
        let repos = held
            .repos
            .iter()
            .filter_map(|(repo, issues)| {
                let mut open: Vec<&Issue> = issues.values().filter(|i| i.state == "open").collect();
                if open.is_empty() {
                    return None;
                }
                open.sort_by_key(|i| std::cmp::Reverse(i.number));
                let mut labels: BTreeMap<String, Vec<IssueView>> = BTreeMap::new();
                for issue in &open {
                    let view = IssueView {
                        number: issue.number,
                        title: issue.title.clone(),
                        url: issue.html_url.clone(),
                        updated: issue.updated_at.clone(),
                    };
                    let names: Vec<&str> = if issue.labels.is_empty() {
                        vec![UNLABELLED]
                    } else {
                        issue.labels.iter().map(String::as_str).collect()
                    };
                    for name in names {
                        labels.entry(name.to_owned()).or_default().push(view.clone());
                    }
                }
                total += open.len();
                Some(RepoView { repo: repo.clone(), total: open.len(), labels })
            })
            .collect();
        ReportView { listed_at: held.listed_at.clone(), total, repos }
    }
}

/// Lists the open issues of every repository of `org` into `report`.
///
/// # Errors
/// A listing failed; the report keeps what it held.
pub async fn rebuild(
    forge: &dyn SwarmForge,
    org: &str,
    report: &IssueReport,
    now: OffsetDateTime,
) -> Result<usize, String> {
    let mut repos = BTreeMap::new();
    let mut count = 0;
    for repo in forge.org_repos(org).await.map_err(|e| e.to_string())? {
        let issues = forge.open_issues(&repo.owner, &repo.name).await.map_err(|e| e.to_string())?;
        count += issues.len();
        repos.insert(repo.full_name, issues);
    }
    report.replace(repos, now.format(&Rfc3339).unwrap_or_default());
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(number: i64, state: &str, updated: &str, labels: &[&str]) -> Issue {
        Issue {
            number,
            title: format!("issue {number}"),
            html_url: String::new(),
            state: state.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            updated_at: updated.into(),
        }
    }

    #[test]
    fn grouped_by_repository_and_label_and_an_old_state_never_returns() {
        let report = IssueReport::default();
        assert!(report.apply("o/r", "opened", issue(1, "open", "2026-11-30T10:00:00Z", &["bug", "agent"])));
        assert!(report.apply("o/r", "opened", issue(2, "open", "2026-11-30T10:00:01Z", &[])));
        let view = report.view();
        assert_eq!((view.total, view.repos.len(), view.repos[0].total), (2, 1, 2));
        let labels: Vec<&str> = view.repos[0].labels.keys().map(String::as_str).collect();
        assert_eq!(labels, ["(no label)", "agent", "bug"]);
        assert!(report.apply("o/r", "closed", issue(1, "closed", "2026-11-30T10:00:02Z", &["bug"])));
        assert!(!report.apply("o/r", "opened", issue(1, "open", "2026-11-30T10:00:00Z", &["bug"])), "late");
        assert_eq!(report.view().total, 1);
        assert!(report.apply("o/r", "deleted", issue(2, "open", "", &[])));
        assert_eq!(report.view().repos, []);
    }
}
