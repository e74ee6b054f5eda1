//! The stand-in's memory of what the swarm-wide routes touch: organisations' teams, labels and
//! webhooks, repositories' pull requests, issues and collaborators, and the deliveries sent to
//! webhooks; with the JSON the forge shows of them (`Team`, `Label`, `Hook`, `PullRequest`,
//! `Issue` of the v1 document).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::state::{State, repo_key};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Team {
    pub id: i64,
    /// The organisation's lower-case name.
    pub org: String,
    pub name: String,
    pub permission: String,
    pub includes_all_repositories: bool,
    pub can_create_org_repo: bool,
    pub units: Vec<String>,
    /// Lower-case logins.
    pub members: Vec<String>,
}

/// Where a label lives: `org:<name>` or `repo:<owner>/<name>`, lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Label {
    pub id: i64,
    pub scope: String,
    pub name: String,
    pub color: String,
    pub description: String,
}

/// An organisation webhook, secret included (a test may read and change it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInHook {
    pub id: i64,
    /// The organisation's lower-case name.
    pub org: String,
    pub kind: String,
    pub url: String,
    pub content_type: String,
    pub secret: String,
    pub events: Vec<String>,
    pub active: bool,
}

/// A pull request of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInPull {
    pub id: i64,
    /// Lower-case `owner/name` of its repository.
    pub repo: String,
    pub number: i64,
    pub title: String,
    /// `open` or `closed`.
    pub state: String,
    pub merged: bool,
    pub mergeable: bool,
    pub head_ref: String,
    pub head_sha: String,
    /// Lower-case login of its author.
    pub user: String,
    /// Seconds since the epoch, from the stand-in's clock, which never hands out a second twice.
    pub created: i64,
    pub updated: i64,
}

/// An issue of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInIssue {
    pub id: i64,
    pub repo: String,
    pub number: i64,
    pub title: String,
    pub state: String,
    pub labels: Vec<String>,
    pub user: String,
    pub created: i64,
    pub updated: i64,
}

/// One webhook delivery as it was sent: a test may send it again ([`super::ForgeStandIn::send`]),
/// or change it before sending it itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The uuid in `X-Forgejo-Delivery`/`X-Gitea-Delivery`.
    pub id: String,
    pub hook_id: i64,
    pub url: String,
    /// `pull_request`, `issues` or `push`.
    pub event: String,
    /// Every header sent, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The receiver's status, or `None` when it did not answer.
    pub status: Option<u16>,
}

#[derive(Debug, Default)]
pub(super) struct SwarmState {
    pub teams: Vec<Team>,
    pub labels: Vec<Label>,
    pub hooks: Vec<StandInHook>,
    pub pulls: Vec<StandInPull>,
    pub issues: Vec<StandInIssue>,
    /// By repository key: the last index given to an issue or pull (they share numbers).
    pub last_index: BTreeMap<String, i64>,
    /// By repository key: lower-case login -> permission.
    pub collaborators: BTreeMap<String, BTreeMap<String, String>>,
    pub deliveries: Vec<Delivery>,
    /// While set, changes queue their deliveries in `held` instead of sending them (a forge
    /// whose webhook queue is stuck).
    pub deliveries_held: bool,
    pub held: Vec<Delivery>,
    /// The last instant handed out by [`SwarmState::tick`].
    last_tick: i64,
}

impl SwarmState {
    /// "Now" for a change, in whole seconds like the forge's timestamps, but strictly after the
    /// previous change's: two changes in one second would otherwise carry the same
    /// `updated_at`, and tests of ordering need to tell them apart.
    pub fn tick(&mut self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_tick = now.max(self.last_tick + 1);
        self.last_tick
    }

    pub fn next_index(&mut self, repo: &str) -> i64 {
        let index = self.last_index.entry(repo.to_owned()).or_insert(0);
        *index += 1;
        *index
    }
}

/// RFC 3339 in UTC, as the forge writes `updated_at`.
pub(super) fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

impl State {
    /// Adds the organisation `name` (in the users' namespace, never signing in) with its
    /// `Owners` team, `owner` its member, as the forge does when one is created; returns its key.
    pub fn insert_org(&mut self, name: &str, full_name: &str, visibility: &str, owner: &str) -> String {
        let password: String = rand::random::<[u8; 16]>().iter().map(|b| format!("{b:02x}")).collect();
        let email = format!("{}@org.stand-in.invalid", name.to_ascii_lowercase());
        self.insert_user(name, &email, &password, false);
        let key = name.to_ascii_lowercase();
        if let Some(org) = self.users.get_mut(&key) {
            org.is_org = true;
            org.full_name = full_name.to_owned();
            org.visibility = visibility.to_owned();
        }
        let owners = Team {
            id: self.next_id(),
            org: key.clone(),
            name: "Owners".into(),
            permission: "owner".into(),
            includes_all_repositories: true,
            can_create_org_repo: true,
            units: super::routes_swarm::UNITS.iter().map(|u| (*u).to_owned()).collect(),
            members: vec![owner.to_ascii_lowercase()],
        };
        self.swarm.teams.push(owners);
        key
    }

    /// `Organization`.
    pub fn org_json(&self, org: &super::state::User) -> Value {
        json!({
            "id": org.id,
            "name": org.login,
            "username": org.login,
            "full_name": org.full_name,
            "email": "",
            "avatar_url": format!("{}/avatars/{}", self.base, org.id),
            "description": "",
            "website": "",
            "location": "",
            "visibility": org.visibility,
            "repo_admin_change_team_access": false,
        })
    }

    /// `Team`.
    pub fn team_json(&self, team: &Team) -> Value {
        let org = self.user(&team.org).map(|o| self.org_json(o));
        json!({
            "id": team.id,
            "name": team.name,
            "description": "",
            "organization": org,
            "includes_all_repositories": team.includes_all_repositories,
            "permission": team.permission,
            "units": team.units,
            "can_create_org_repo": team.can_create_org_repo,
        })
    }

    /// `Label`.
    pub fn label_json(&self, label: &Label) -> Value {
        json!({
            "id": label.id,
            "name": label.name,
            "exclusive": false,
            "is_archived": false,
            "color": label.color,
            "description": label.description,
            "url": format!("{}/api/v1/labels/{}", self.base, label.id),
        })
    }

    /// `Hook`: `config` holds the URL and content type, never the secret.
    pub fn hook_json(hook: &StandInHook) -> Value {
        json!({
            "id": hook.id,
            "type": hook.kind,
            "branch_filter": "",
            "config": { "url": hook.url, "content_type": hook.content_type, "http_method": "post" },
            "events": hook.events,
            "authorization_header": "",
            "active": hook.active,
            "updated_at": "2026-01-01T00:00:00Z",
            "created_at": "2026-01-01T00:00:00Z",
        })
    }

    fn login_json(&self, login: &str) -> Value {
        match self.user(login) {
            Some(user) => self.user_json(user, None),
            None => json!({ "id": 0, "login": login }),
        }
    }

    fn repo_value(&self, key: &str) -> Value {
        let (owner, name) = key.split_once('/').unwrap_or((key, ""));
        self.repo(owner, name).map_or(Value::Null, |r| self.repo_json(r, None))
    }

    /// `PullRequest`.
    pub fn pull_json(&self, pull: &StandInPull) -> Value {
        let repo = self.repo_value(&pull.repo);
        let full_name = repo["full_name"].as_str().unwrap_or(&pull.repo).to_owned();
        let base_branch = repo["default_branch"].as_str().unwrap_or("main").to_owned();
        let closed = (pull.state == "closed").then(|| rfc3339(pull.updated));
        json!({
            "id": pull.id,
            "url": format!("{}/{}/pulls/{}", self.base, full_name, pull.number),
            "number": pull.number,
            "user": self.login_json(&pull.user),
            "title": pull.title,
            "body": "",
            "labels": [],
            "milestone": null,
            "assignee": null,
            "assignees": null,
            "state": pull.state,
            "is_locked": false,
            "comments": 0,
            "html_url": format!("{}/{}/pulls/{}", self.base, full_name, pull.number),
            "diff_url": format!("{}/{}/pulls/{}.diff", self.base, full_name, pull.number),
            "patch_url": format!("{}/{}/pulls/{}.patch", self.base, full_name, pull.number),
            "mergeable": pull.mergeable,
            "merged": pull.merged,
            "merged_at": if pull.merged { closed.clone() } else { None },
            "merge_commit_sha": null,
            "merged_by": null,
            "base": { "label": base_branch, "ref": base_branch, "sha": "0".repeat(40), "repo_id": repo["id"], "repo": repo },
            "head": { "label": pull.head_ref, "ref": pull.head_ref, "sha": pull.head_sha, "repo_id": repo["id"], "repo": repo },
            "merge_base": "0".repeat(40),
            "due_date": null,
            "created_at": rfc3339(pull.created),
            "updated_at": rfc3339(pull.updated),
            "closed_at": closed,
        })
    }

    /// `Issue`; its labels are looked up by name among the repository's and its organisation's.
    pub fn issue_json(&self, issue: &StandInIssue) -> Value {
        let (owner, name) = issue.repo.split_once('/').unwrap_or((&issue.repo, ""));
        let scopes = [format!("repo:{}", issue.repo), format!("org:{owner}")];
        let labels: Vec<Value> = issue
            .labels
            .iter()
            .filter_map(|n| self.swarm.labels.iter().find(|l| scopes.contains(&l.scope) && l.name == *n))
            .map(|l| self.label_json(l))
            .collect();
        let full_name = self.repo(owner, name).map_or(issue.repo.clone(), |r| format!("{}/{}", r.owner, r.name));
        json!({
            "id": issue.id,
            "url": format!("{}/api/v1/repos/{}/issues/{}", self.base, full_name, issue.number),
            "html_url": format!("{}/{}/issues/{}", self.base, full_name, issue.number),
            "number": issue.number,
            "user": self.login_json(&issue.user),
            "original_author": "",
            "title": issue.title,
            "body": "",
            "ref": "",
            "labels": labels,
            "milestone": null,
            "assignee": null,
            "assignees": null,
            "state": issue.state,
            "is_locked": false,
            "comments": 0,
            "created_at": rfc3339(issue.created),
            "updated_at": rfc3339(issue.updated),
            "closed_at": (issue.state == "closed").then(|| rfc3339(issue.updated)),
            "due_date": null,
            "pull_request": null,
            "repository": { "id": 0, "name": name, "owner": owner, "full_name": full_name },
        })
    }

    /// Whether `login` may read `owner/name`: administrators, its owner, its collaborators, and
    /// members of a team of its organisation that reaches every repository.
    pub fn may_read_repo(&self, login: &str, owner: &str, name: &str) -> bool {
        let login = login.to_ascii_lowercase();
        let key = repo_key(owner, name);
        self.user(&login).is_some_and(|u| u.is_admin)
            || owner.eq_ignore_ascii_case(&login)
            || self.swarm.collaborators.get(&key).is_some_and(|c| c.contains_key(&login))
            || self.swarm.teams.iter().any(|t| {
                t.org == owner.to_ascii_lowercase() && t.includes_all_repositories && t.members.contains(&login)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
        assert_eq!(rfc3339(951_825_599), "2000-02-29T11:59:59Z");
    }

    #[test]
    fn the_clock_never_hands_out_one_second_twice() {
        let mut state = SwarmState::default();
        let first = state.tick();
        assert!(state.tick() > first && state.tick() > first + 1);
    }
}
