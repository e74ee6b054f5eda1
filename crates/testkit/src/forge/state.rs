//! The stand-in's memory: users, tokens, repositories, and the JSON it shows of them (the
//! `User`, `Repository` and `AccessToken` definitions of the v1 document, field names and types
//! as documented).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// What the stand-in has been asked to create or delete, counted so that a test can prove
/// nothing happened twice. Objects the test set up itself (`add_*`) are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub users_created: usize,
    pub users_deleted: usize,
    pub repos_generated: usize,
    pub tokens_minted: usize,
    pub tokens_deleted: usize,
    pub orgs_created: usize,
    pub teams_created: usize,
    pub team_members_added: usize,
    pub labels_created: usize,
    pub hooks_created: usize,
    pub hooks_edited: usize,
    pub hooks_deleted: usize,
    pub collaborators_set: usize,
    /// Every HTTP request, answered or not.
    pub requests: usize,
}

#[derive(Debug, Clone)]
pub(super) struct User {
    pub id: i64,
    pub login: String,
    pub email: String,
    pub full_name: String,
    pub password: String,
    pub is_admin: bool,
    pub must_change_password: bool,
    pub visibility: String,
    /// An organisation: it shares the users' namespace but never signs in.
    pub is_org: bool,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub id: i64,
    /// The owner's login, lower case.
    pub owner: String,
    pub name: String,
    pub value: String,
    pub scopes: Vec<String>,
}

/// A repository of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInRepo {
    pub id: i64,
    pub owner: String,
    pub name: String,
    pub private: bool,
    pub template: bool,
    pub empty: bool,
    pub default_branch: String,
    /// Its `README.md`, the one file the stand-in keeps: the one `auto_init` writes, or the
    /// template's when generated with git content.
    pub readme: Option<String>,
}

#[derive(Debug)]
pub(super) struct State {
    /// By lower-case login: the forge's names are case-insensitive.
    pub users: BTreeMap<String, User>,
    pub tokens: Vec<Token>,
    /// By lower-case `owner/name`.
    pub repos: BTreeMap<String, StandInRepo>,
    next_id: i64,
    pub counts: Counts,
    /// Answer 503 to everything.
    pub down: bool,
    /// Answer every success with a body that is not the documented JSON.
    pub malformed: bool,
    /// `MAX_RESPONSE_ITEMS`: the largest page a list answers.
    pub max_page: usize,
    /// `http://127.0.0.1:<port>`, for the URLs inside answers.
    pub base: String,
    /// Lower-case user names someone else takes just before the next request to create them is
    /// answered (see [`super::ForgeStandIn::take_name_before_create`]).
    pub taken_before_create: BTreeSet<String>,
    /// Organisations' teams, labels, webhooks; repositories' pulls, issues, collaborators.
    pub swarm: super::swarm_state::SwarmState,
}

/// The forge's defaults for `[api] DEFAULT_PAGING_NUM` and `MAX_RESPONSE_ITEMS`.
pub(super) const DEFAULT_PAGE: usize = 30;
pub(super) const MAX_PAGE: usize = 50;

impl State {
    pub fn new(base: String) -> Self {
        Self {
            users: BTreeMap::new(),
            tokens: Vec::new(),
            repos: BTreeMap::new(),
            next_id: 1,
            counts: Counts::default(),
            down: false,
            malformed: false,
            max_page: MAX_PAGE,
            base,
            taken_before_create: BTreeSet::new(),
            swarm: super::swarm_state::SwarmState::default(),
        }
    }

    pub fn next_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn user(&self, login: &str) -> Option<&User> {
        self.users.get(&login.to_ascii_lowercase())
    }

    pub fn insert_user(&mut self, login: &str, email: &str, password: &str, is_admin: bool) -> &User {
        let id = self.next_id();
        let user = User {
            id,
            login: login.to_owned(),
            email: email.to_owned(),
            full_name: String::new(),
            password: password.to_owned(),
            is_admin,
            must_change_password: false,
            visibility: "public".into(),
            is_org: false,
        };
        self.users.entry(login.to_ascii_lowercase()).or_insert(user)
    }

    pub fn insert_token(&mut self, owner: &str, name: &str, scopes: Vec<String>) -> Token {
        let token = Token {
            id: self.next_id(),
            owner: owner.to_ascii_lowercase(),
            name: name.to_owned(),
            value: token_value(),
            scopes,
        };
        self.tokens.push(token.clone());
        token
    }

    pub fn repo(&self, owner: &str, name: &str) -> Option<&StandInRepo> {
        self.repos.get(&repo_key(owner, name))
    }

    pub fn insert_repo(&mut self, owner: &str, name: &str, private: bool, template: bool, empty: bool) -> StandInRepo {
        let repo = StandInRepo {
            id: self.next_id(),
            owner: self.user(owner).map_or_else(|| owner.to_owned(), |u| u.login.clone()),
            name: name.to_owned(),
            private,
            template,
            empty,
            default_branch: "main".into(),
            readme: None,
        };
        self.repos.insert(repo_key(owner, name), repo.clone());
        repo
    }

    /// `User`, as `viewer` sees it: the forge shows the email only to the user and to admins.
    pub fn user_json(&self, user: &User, viewer: Option<&User>) -> Value {
        let sees_email = viewer.is_some_and(|v| v.is_admin || v.id == user.id);
        json!({
            "id": user.id,
            "login": user.login,
            "login_name": "",
            "source_id": 0,
            "full_name": user.full_name,
            "email": if sees_email { user.email.as_str() } else { "" },
            "avatar_url": format!("{}/avatars/{}", self.base, user.id),
            "html_url": format!("{}/{}", self.base, user.login),
            "language": "",
            "is_admin": user.is_admin,
            "last_login": "0001-01-01T00:00:00Z",
            "created": "2026-01-01T00:00:00Z",
            "restricted": false,
            "active": true,
            "prohibit_login": false,
            "location": "",
            "website": "",
            "description": "",
            "visibility": user.visibility,
            "followers_count": 0,
            "following_count": 0,
            "starred_repos_count": 0,
            "username": user.login,
        })
    }

    /// `Repository`, as `viewer` sees it.
    pub fn repo_json(&self, repo: &StandInRepo, viewer: Option<&User>) -> Value {
        let owner = match self.user(&repo.owner) {
            Some(user) => self.user_json(user, viewer),
            None => json!({ "id": 0, "login": repo.owner }),
        };
        let is_owner = viewer.is_some_and(|v| v.is_admin || v.login.eq_ignore_ascii_case(&repo.owner));
        let mut repo_json = json!({
            "id": repo.id,
            "owner": owner,
            "name": repo.name,
            "full_name": format!("{}/{}", repo.owner, repo.name),
            "description": "",
            "empty": repo.empty,
            "private": repo.private,
            "fork": false,
            "template": repo.template,
            "parent": null,
            "mirror": false,
            "size": 0,
            "language": "",
            "languages_url": format!("{}/api/v1/repos/{}/{}/languages", self.base, repo.owner, repo.name),
            "html_url": format!("{}/{}/{}", self.base, repo.owner, repo.name),
            "url": format!("{}/api/v1/repos/{}/{}", self.base, repo.owner, repo.name),
            "link": "",
            "ssh_url": format!("git@127.0.0.1:{}/{}.git", repo.owner, repo.name),
            "clone_url": format!("{}/{}/{}.git", self.base, repo.owner, repo.name),
            "original_url": "",
            "website": "",
        });
        // Two literals: one would exceed the json! macro's recursion limit.
        let more = json!({
            "stars_count": 0,
            "forks_count": 0,
            "watchers_count": 0,
            "open_issues_count": 0,
            "open_pr_counter": 0,
            "release_counter": 0,
            "default_branch": repo.default_branch,
            "archived": false,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "archived_at": "1970-01-01T00:00:00Z",
            "permissions": { "admin": is_owner, "push": is_owner, "pull": true },
            "has_issues": true,
            "has_wiki": true,
            "has_pull_requests": true,
            "has_projects": true,
            "has_releases": true,
            "has_packages": true,
            "has_actions": false,
            "internal": false,
            "object_format_name": "sha1",
        });
        if let (Value::Object(first), Value::Object(second)) = (&mut repo_json, more) {
            first.extend(second);
        }
        repo_json
    }
}

/// `AccessToken`; `sha1` (the value) is shown only in the answer to its creation.
pub(super) fn token_json(token: &Token, show_value: bool) -> Value {
    json!({
        "id": token.id,
        "name": token.name,
        "sha1": if show_value { token.value.as_str() } else { "" },
        "token_last_eight": &token.value[token.value.len() - 8..],
        "scopes": token.scopes,
    })
}

pub(super) fn repo_key(owner: &str, name: &str) -> String {
    format!("{}/{}", owner.to_ascii_lowercase(), name.to_ascii_lowercase())
}

/// 40 hex characters, the shape of the forge's token values.
fn token_value() -> String {
    rand::random::<[u8; 20]>().iter().map(|b| format!("{b:02x}")).collect()
}
