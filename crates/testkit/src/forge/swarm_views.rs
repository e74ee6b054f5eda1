//! The stand-in's swarm-wide objects as its routes make and show them: an organisation made with
//! its `Owners` team, the JSON the forge shows of organisations, teams, labels, webhooks, pull
//! requests and issues (`Organization`, `Team`, `Label`, `Hook`, `PullRequest`, `Issue` of the
//! v1 document), and who may read a repository.

use serde_json::{Value, json};

use super::state::{State, User, repo_key};
use super::swarm_state::{Label, StandInHook, StandInIssue, StandInPull, Team, UNITS, rfc3339};

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
            units: UNITS.iter().map(|u| (*u).to_owned()).collect(),
            members: vec![owner.to_ascii_lowercase()],
        };
        self.swarm.teams.push(owners);
        key
    }

    /// `Organization`.
    pub fn org_json(&self, org: &User) -> Value {
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
