//! The issue report: the open issues of the swarm organisation's repositories, in memory. The
//! periodic listing rebuilds it (also at start); `issues` deliveries keep it current in
//! between, under the same ordering rule as `config-prs` (a state older than the one held is
//! dropped). A delivery taken while a listing runs is kept over the listing's older view of
//! that issue, so a listing never undoes a newer delivery.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Instant;

use hyperhive_provision::forge::{Issue, SwarmForge};
pub use hyperhive_swarm_api::forge::{IssueView, RepoView, ReportView, UNLABELLED};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The state a `deleted` delivery leaves an issue in (held, so a late `opened` stays out).
const DELETED: &str = "deleted";

/// An issue as held, and when a delivery put it there (`None`: a listing did).
#[derive(Debug, Clone)]
struct Entry {
    issue: Issue,
    delivered: Option<Instant>,
}

#[derive(Debug, Default)]
struct Held {
    /// By `owner/name`, then issue number. Closed and deleted issues are kept (as such) so that
    /// a late `opened` cannot bring them back; the report shows open ones only.
    repos: BTreeMap<String, BTreeMap<i64, Entry>>,
    /// When the last listing finished (RFC 3339), if one has.
    listed_at: Option<String>,
}

/// The report, shared by the API and the passes.
#[derive(Debug, Default)]
pub struct IssueReport {
    held: RwLock<Held>,
}

fn instant(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// How the report shows an issue the forge listed or delivered.
fn issue_view(issue: &Issue) -> IssueView {
    IssueView {
        number: issue.number,
        title: issue.title.clone(),
        url: issue.html_url.clone(),
        updated: issue.updated_at.clone(),
    }
}

impl IssueReport {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Held> {
        self.held.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the issue of a delivery; whether the report changed.
    pub fn apply(&self, repo: &str, action: &str, mut issue: Issue) -> bool {
        let deleted = action == "deleted";
        if deleted {
            issue.state = DELETED.into();
        }
        let mut held = self.write();
        let issues = held.repos.entry(repo.to_owned()).or_default();
        let newer = issues.get(&issue.number).is_none_or(|old| {
            instant(&issue.updated_at) > instant(&old.issue.updated_at) || (deleted && old.issue.state != DELETED)
        });
        if newer {
            issues.insert(issue.number, Entry { issue, delivered: Some(Instant::now()) });
        }
        newer
    }

    /// Replaces the report with a listing that started at `started`, keeping what deliveries
    /// brought since then wherever it is not older than the listing's view.
    pub fn replace(&self, repos: BTreeMap<String, Vec<Issue>>, started: Instant, listed_at: String) {
        let mut held = self.write();
        let mut fresh: BTreeMap<String, BTreeMap<i64, Entry>> = repos
            .into_iter()
            .map(|(repo, issues)| {
                (repo, issues.into_iter().map(|issue| (issue.number, Entry { issue, delivered: None })).collect())
            })
            .collect();
        for (repo, issues) in std::mem::take(&mut held.repos) {
            for (number, entry) in issues {
                if entry.delivered.is_none_or(|at| at < started) {
                    continue;
                }
                let listed = fresh.entry(repo.clone()).or_default();
                let keep = listed.get(&number).is_none_or(|l| {
                    instant(&entry.issue.updated_at) >= instant(&l.issue.updated_at) || entry.issue.state == DELETED
                });
                if keep {
                    listed.insert(number, entry);
                }
            }
        }
        held.repos = fresh;
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
                let mut open: Vec<&Issue> = issues.values().map(|e| &e.issue).filter(|i| i.state == "open").collect();
                if open.is_empty() {
                    return None;
                }
                open.sort_by_key(|i| std::cmp::Reverse(i.number));
                let mut labels: BTreeMap<String, Vec<IssueView>> = BTreeMap::new();
                for issue in &open {
                    let names: Vec<&str> = if issue.labels.is_empty() {
                        vec![UNLABELLED]
                    } else {
                        issue.labels.iter().map(String::as_str).collect()
                    };
                    for name in names {
                        labels.entry(name.to_owned()).or_default().push(issue_view(issue));
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
    let started = Instant::now();
    let mut repos = BTreeMap::new();
    let mut count = 0;
    for repo in forge.org_repos(org).await.map_err(|e| e.to_string())? {
        let issues = forge.open_issues(&repo.owner, &repo.name).await.map_err(|e| e.to_string())?;
        count += issues.len();
        repos.insert(repo.full_name, issues);
    }
    report.replace(repos, started, now.format(&Rfc3339).unwrap_or_default());
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
        assert!(report.apply("o/r", "deleted", issue(2, "open", "2026-11-30T10:00:01Z", &[])));
        assert!(!report.apply("o/r", "opened", issue(2, "open", "2026-11-30T10:00:01Z", &[])), "late");
        assert_eq!(report.view().repos, []);
    }

    #[test]
    fn a_listing_keeps_deliveries_taken_while_it_ran_but_drops_older_ones() {
        let report = IssueReport::default();
        assert!(report.apply("o/r", "opened", issue(1, "open", "2026-11-30T10:00:00Z", &[])));
        let started = Instant::now();
        assert!(report.apply("o/r", "opened", issue(2, "open", "2026-11-30T10:00:05Z", &[])));
        assert!(report.apply("o/r", "closed", issue(3, "closed", "2026-11-30T10:00:06Z", &[])));
        // The listing saw neither 2 (too early) nor 3 closed, and 1 no longer (closed since).
        let listed = BTreeMap::from([("o/r".to_owned(), vec![issue(3, "open", "2026-11-30T10:00:01Z", &[])])]);
        report.replace(listed, started, "2026-11-30T10:00:07Z".into());
        let view = report.view();
        let numbers: Vec<i64> = view.repos[0].labels[UNLABELLED].iter().map(|i| i.number).collect();
        assert_eq!(numbers, [2], "1 dropped with the listing, 2 kept, 3 stays closed");
        assert_eq!(view.listed_at.as_deref(), Some("2026-11-30T10:00:07Z"));
    }
}
