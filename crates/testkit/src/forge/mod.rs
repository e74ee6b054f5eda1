//! A stand-in for a Forgejo/Gitea server's v1 REST API, in process, on a loopback port.
//!
//! No forge installs on the machines the tests run on, so this answers the operations the
//! forge adapter (`hyperhive_provision::forge`) calls, checking what the real server checks.
//! It is a stand-in: it keeps everything in memory, has no git content and no web UI. What it
//! checks, and where each rule comes from (the operation ids and definitions of the OpenAPI
//! document `templates/swagger/v1_json.tmpl`, the route guards of `routers/api/v1/api.go` for
//! what the document leaves out, and the handlers named below):
//!
//! - **Authentication** (`securityDefinitions`, and `parseToken` of `services/auth/oauth2.go`):
//!   the deprecated `token`/`access_token` query parameters (looked at first), then
//!   `Authorization: token <t>` (or `bearer`), then `BasicAuth`. An unknown token, an unknown
//!   user or a wrong password is 401 "invalid username, password or token" on every route (as
//!   current Gitea; older versions let an unknown token through as anonymous). A user
//!   created without `must_change_password: false` is refused everywhere with 403 "You must
//!   change your password" (the forge's sign-in check). `Sudo`/`sudo` lets an administrator act
//!   as another user; anyone else gets 403.
//! - **Token scopes** (`tokenRequiresScopes`): a token must hold `all`, or `write:<category>`,
//!   or for GET `read:<category>`: `admin` for `/admin/*`, `user` for `/user` and `/users/*`,
//!   `repository` for `/repos/*`; 403 otherwise.
//! - `adminCreateUser` (`POST /admin/users`, `CreateUserOption`): site administrator only (403),
//!   401 anonymous; `username` and `email` required, username format and at most 40 characters,
//!   email format, `visibility` one of public/limited/private (all 422 "[Field]: rule"); a
//!   password shorter than 8 is 400; reserved names, a taken name or email 422; 201 `User`.
//!   `must_change_password` defaults to true as on the forge.
//! - `adminDeleteUser` (`DELETE /admin/users/{username}`): 204; 404; 422 for oneself or a user
//!   who still owns repositories.
//! - `userGet` (`GET /users/{username}`): 200 `User` (email shown to administrators and the user
//!   only), 404. `userGetCurrent` (`GET /user`): 200 `User`, 401 anonymous.
//! - `userGetTokens`, `userCreateToken`, `userDeleteAccessToken` (`/users/{username}/tokens`):
//!   the user themself or an administrator (403), over basic auth only (401 "auth required").
//!   Listing pages with `page`/`limit` (limit cut to `MAX_RESPONSE_ITEMS`, 50, or what
//!   [`ForgeStandIn::set_max_page`] says) and sets `X-Total-Count`; creating needs `name` (422),
//!   refuses a taken name (400), unknown scopes (400) and no scope (400), and answers 201
//!   `AccessToken` with the value in `sha1` (only then); deleting takes an id or a name (a
//!   `{token}` that parses as an integer is an id), 404 for none, 422 for several.
//! - `repoGet` (`GET /repos/{owner}/{repo}`): 200 `Repository`, 404 (also for a private one the
//!   caller may not see).
//! - `generateRepo` (`POST /repos/{template_owner}/{template_repo}/generate`,
//!   `GenerateRepoOption`): 404 unknown template, 401 anonymous, `owner`/`name` required and
//!   name format (422), 422 "this is not a template repo", 422 "must select at least one
//!   template item", 404 `{"error": ...}` for an unknown owner, 403 for a non-administrator
//!   generating for another user, 409 for a taken name, 201 `Repository`.
//! - Error bodies are `APIError` (`{"message", "url"}`), 404 adds `errors`.
//! - **Organisations** share the users' namespace and never sign in. `orgCreate` (`POST /orgs`,
//!   `CreateOrgOption`): `username` `Required;Username;MaxSize(40)`, `full_name`
//!   `MaxSize(100)`, `visibility` `In(,public,limited,private)` (422 `[Field]: rule`), a taken
//!   or reserved name 422; 201 `Organization`, the doer the member of its `Owners` team
//!   (`routers/api/v1/org/org.go`). `orgGet`: 404 for a user, and for a private organisation to
//!   a non-member.
//! - **Teams** (`routers/api/v1/org/team.go`): `orgListTeams` members only (`reqOrgMembership`,
//!   403 "Must be an organization member"); `orgCreateTeam` owners only (`reqOrgOwnership`, 403
//!   "Must be an organization owner"), `CreateTeamOption` `name`
//!   `Required;AlphaDashDot;MaxSize(255)`, `permission` `In(read,write,admin)`, known `units`,
//!   a taken name 422 "team already exists"; `orgListTeamMembers`; `orgAddTeamMember` 204, 404
//!   for an unknown user, 422 for an organisation.
//! - **Labels** (`routers/api/v1/org/label.go`, `routers/api/v1/repo/label.go`): an
//!   organisation's read by members and written by owners; a repository's read by whoever sees
//!   it and written by its owner, administrators and write collaborators; `CreateLabelOption`
//!   `name` and `color` `Required`, the colour three or six hex digits (`NormalizeColor`, 422
//!   "invalid color"); two labels of one name are allowed, as on the forge.
//! - **Organisation webhooks** (`routers/api/v1/org/hook.go`, `routers/api/v1/utils/hook.go`):
//!   owners only; `CreateHookOption` `type` and `config` `Required`, then `checkCreateHookOption`:
//!   a known type (the stand-in sends only the forge's own payloads, so `forgejo` and `gitea`;
//!   422 "Invalid hook type: …"), `config.url` and `config.content_type` present (422 "Missing
//!   config option: url"), the content type `json` or `form` (422 "Invalid content type"), no
//!   events meaning `push`; `editHook`: each config key given replaces its value, the events are
//!   set anew (none means `push`), `active` when given; 200; delete 204, 404. `Hook` never shows
//!   the secret.
//! - **Lists of a repository** (`repoListPullRequests`, `issueListIssues`, `orgListRepos`):
//!   private repositories are 404 to whoever may not read them (their owner, administrators,
//!   collaborators, members of a team of the organisation reaching every repository may);
//!   `state` `open` (default), `closed` or `all` (422 else); newest first; paged. Issues and
//!   pull requests share a repository's numbers.
//! - `createCurrentUserRepo` (`POST /user/repos`, `CreateRepoOption`): `name`
//!   `Required;AlphaDashDot;MaxSize(100)`, `description` `MaxSize(2048)` (422), reserved names
//!   422, a taken name 409; 201 `Repository`, with the README `auto_init` writes.
//!   `repoGetContents` (`GET /repos/{owner}/{repo}/contents/{filepath}`): that README, 404 for
//!   anything else (the stand-in keeps no other content). `repoListCollaborators`: paged users.
//! - `repoAddCollaborator` (`PUT /repos/{owner}/{repo}/collaborators/{collaborator}`):
//!   repository administrators (403), a user (404) not an organisation (422), `permission`
//!   `In(read,write,admin)` (422), 204.
//! - **Deliveries** (`services/webhook/deliver.go`, payloads of `modules/structs/hook.go`): see
//!   `deliver`; each change a test makes sends one `POST` per active organisation hook of the
//!   repository's owner whose events take it, signed with the hook's secret.
//!
//! For tests it also: counts what it was asked to create, edit and delete ([`Counts`]), answers
//! 503 to everything while [`ForgeStandIn::set_down`], lets someone else take a user name just
//! before the controller creates it ([`ForgeStandIn::take_name_before_create`]), answers every success with a body that is
//! not the documented JSON while [`ForgeStandIn::set_malformed`], lets a test set up users,
//! organisations, templates, repositories and tokens, or revoke a token, directly, and change
//! pull requests, issues and webhooks as a person would (`control`).

mod checks;
mod control;
mod deliver;
mod http;
mod routes;
mod routes_repos;
mod routes_swarm;
mod rules;
mod state;
mod swarm_state;
mod swarm_views;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::Context;
use warp::Filter;
use warp::http::{HeaderMap, Method};

pub use control::PullChange;
pub use deliver::signature;
pub use state::{Counts, StandInRepo};
pub use swarm_state::{Delivery, StandInHook, StandInIssue, StandInPull};

use http::Request;
use state::State;

/// The site administrator every stand-in starts with.
pub const ADMIN_USER: &str = "forge-admin";
const ADMIN_PASSWORD: &str = "forge-admin-password";

/// A running stand-in forge; stops when dropped.
#[derive(Debug)]
pub struct ForgeStandIn {
    addr: SocketAddr,
    admin_token: String,
    state: Arc<Mutex<State>>,
    server: tokio::task::JoinHandle<()>,
}

/// A user made as the forge's command line makes one ([`ForgeStandIn::create_user`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    pub login: String,
    pub email: String,
    pub password: String,
    pub is_admin: bool,
    pub must_change_password: bool,
}

/// What a test may check of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFacts {
    pub login: String,
    pub email: String,
    pub full_name: String,
    pub is_admin: bool,
    pub must_change_password: bool,
    pub visibility: String,
}

impl ForgeStandIn {
    /// Starts the stand-in on a free loopback port, with the administrator [`ADMIN_USER`]
    /// holding one token of scope `all` ([`ForgeStandIn::admin_token`]).
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start() -> anyhow::Result<Self> {
        // Bound here and handed to the server, so no other socket can take the port between.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding the forge stand-in")?;
        let addr = listener.local_addr().context("the forge stand-in's address")?;
        let mut state = State::new(format!("http://{addr}"));
        state.insert_user(ADMIN_USER, "forge-admin@stand-in.invalid", ADMIN_PASSWORD, true);
        let admin_token = state.insert_token(ADMIN_USER, "stand-in-admin", vec!["all".into()]).value;
        Self::serve(listener, state, admin_token)
    }

    /// Serves a fresh forge on `listener`, with no user at all (as a forge just installed: its
    /// administrator is made with [`ForgeStandIn::create_user`], as `forgejo admin user create`
    /// does), its links made from `root_url` (the forge's `ROOT_URL`). For the `forge-stand-in`
    /// program; [`ForgeStandIn::admin_token`] is empty.
    ///
    /// # Errors
    /// When the listener's address cannot be read.
    pub fn serve_fresh(listener: tokio::net::TcpListener, root_url: &str) -> anyhow::Result<Self> {
        Self::serve(listener, State::new(root_url.trim_end_matches('/').to_owned()), String::new())
    }

    fn serve(listener: tokio::net::TcpListener, state: State, admin_token: String) -> anyhow::Result<Self> {
        let addr = listener.local_addr().context("the forge stand-in's address")?;
        let state = Arc::new(Mutex::new(state));
        let shared = state.clone();
        let route = warp::method()
            .and(warp::path::full())
            .and(warp::query::raw().or(warp::any().map(String::new)).unify())
            .and(warp::header::headers_cloned())
            .and(warp::body::bytes())
            .map(
                move |method: Method,
                      path: warp::path::FullPath,
                      query: String,
                      headers: HeaderMap,
                      body: bytes::Bytes| {
                    let request = Request::new(method, path.as_str(), &query, headers, body.to_vec());
                    routes::answer(&mut lock(&shared), &request).into_response()
                },
            );
        let server = tokio::spawn(warp::serve(route).incoming(listener).run());
        Ok(Self { addr, admin_token, state, server })
    }

    /// Creates a user as the forge's command line does (`forgejo admin user create`): the same
    /// name rules as the API, a taken name or email refused; `must_change_password` as given.
    ///
    /// # Errors
    /// The forge's message for a name, email or password it refuses.
    pub fn create_user(&self, new: &NewUser) -> Result<(), String> {
        let mut state = lock(&self.state);
        if !rules::valid_username(&new.login) || new.login.len() > 40 {
            return Err(format!("name is invalid [{}]", new.login));
        }
        if new.password.len() < 8 {
            return Err("password is too short".into());
        }
        if state.user(&new.login).is_some() {
            return Err(format!("user already exists [name: {}]", new.login));
        }
        if state.users.values().any(|u| u.email.eq_ignore_ascii_case(&new.email)) {
            return Err(format!("e-mail already in use [email: {}]", new.email));
        }
        state.insert_user(&new.login, &new.email, &new.password, new.is_admin);
        if let Some(user) = state.users.get_mut(&new.login.to_ascii_lowercase()) {
            user.must_change_password = new.must_change_password;
        }
        Ok(())
    }

    /// The forge's base URL, `http://127.0.0.1:<port>` (the API is under `/api/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A token of [`ADMIN_USER`] with scope `all`.
    pub fn admin_token(&self) -> String {
        self.admin_token.clone()
    }

    /// Adds a user who may sign in with `password` at once.
    pub fn add_user(&self, name: &str, password: &str, is_admin: bool) {
        let email = format!("{}@stand-in.invalid", name.to_ascii_lowercase());
        lock(&self.state).insert_user(name, &email, password, is_admin);
    }

    /// Sets whether `name` must change their password before any API call.
    pub fn set_must_change_password(&self, name: &str, must: bool) {
        if let Some(user) = lock(&self.state).users.get_mut(&name.to_ascii_lowercase()) {
            user.must_change_password = must;
        }
    }

    /// Adds a token for `user` and returns its value.
    pub fn add_token(&self, user: &str, name: &str, scopes: &[&str]) -> String {
        lock(&self.state).insert_token(user, name, scopes.iter().map(|s| (*s).to_owned()).collect()).value
    }

    /// Adds a public template repository `owner/name` with content, and its owner if absent.
    pub fn add_template(&self, owner: &str, name: &str) {
        self.add_repo(owner, name, true, false);
    }

    /// Adds a repository `owner/name` with content, and its owner if absent.
    pub fn add_repo(&self, owner: &str, name: &str, template: bool, private: bool) {
        let mut state = lock(&self.state);
        if state.user(owner).is_none() {
            let email = format!("{}@stand-in.invalid", owner.to_ascii_lowercase());
            state.insert_user(owner, &email, "owner-password-not-for-tests", false);
        }
        state.insert_repo(owner, name, private, template, false);
    }

    /// Deletes `user`'s token called `name` as if someone revoked it; whether there was one.
    pub fn revoke_token(&self, user: &str, name: &str) -> bool {
        let mut state = lock(&self.state);
        let owner = user.to_ascii_lowercase();
        let before = state.tokens.len();
        state.tokens.retain(|t| !(t.owner == owner && t.name == name));
        state.tokens.len() != before
    }

    /// Someone else takes the user name `name` just before the next request to create it is
    /// answered: an account of that name, with a password no test knows, is made first, so the
    /// request meets the forge's 422 "user already exists" (as when a person signs up with the
    /// name between a look-up that found nothing and the create).
    pub fn take_name_before_create(&self, name: &str) {
        lock(&self.state).taken_before_create.insert(name.to_ascii_lowercase());
    }

    /// While `down`, every request is answered 503 (as a proxy in front of a stopped forge).
    pub fn set_down(&self, down: bool) {
        lock(&self.state).down = down;
    }

    /// While `on`, every success is answered with a body that is not the documented JSON.
    pub fn set_malformed(&self, on: bool) {
        lock(&self.state).malformed = on;
    }

    /// The largest page a list answers (`MAX_RESPONSE_ITEMS`; 50 by default).
    pub fn set_max_page(&self, items: usize) {
        lock(&self.state).max_page = items.max(1);
    }

    /// What has been created and deleted through the API, and how many requests came.
    pub fn counts(&self) -> Counts {
        lock(&self.state).counts
    }

    /// The user `name`, if there is one.
    pub fn user(&self, name: &str) -> Option<UserFacts> {
        lock(&self.state).user(name).map(|u| UserFacts {
            login: u.login.clone(),
            email: u.email.clone(),
            full_name: u.full_name.clone(),
            is_admin: u.is_admin,
            must_change_password: u.must_change_password,
            visibility: u.visibility.clone(),
        })
    }

    /// The repository `owner/name`, if there is one.
    pub fn repo(&self, owner: &str, name: &str) -> Option<StandInRepo> {
        lock(&self.state).repo(owner, name).cloned()
    }

    /// The names of `user`'s tokens, oldest first.
    pub fn token_names(&self, user: &str) -> Vec<String> {
        let owner = user.to_ascii_lowercase();
        lock(&self.state).tokens.iter().filter(|t| t.owner == owner).map(|t| t.name.clone()).collect()
    }

    /// The scopes of `user`'s token `name`.
    pub fn token_scopes(&self, user: &str, name: &str) -> Option<Vec<String>> {
        let owner = user.to_ascii_lowercase();
        lock(&self.state).tokens.iter().find(|t| t.owner == owner && t.name == name).map(|t| t.scopes.clone())
    }
}

impl Drop for ForgeStandIn {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The state stays consistent even if a test thread panicked while holding it: every change is
/// made under one lock, and a panicking test fails anyway.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}
