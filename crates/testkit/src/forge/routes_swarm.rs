//! The swarm-wide operations the stand-in answers, checked as the forge checks them (the
//! module doc of [`super`] lists each rule and its source): organisations, their teams,
//! labels and webhooks; repositories' labels, pull requests, issues and collaborators.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use warp::http::{Method, StatusCode};

use super::checks::{
    bind, check_alpha_dash_dot, check_profile, check_username, context_user, invalid, paged, visible_repo,
};
use super::http::{Doer, Reply, Request, empty, error, json_reply, not_found, require_scope, require_signed};
use super::rules;
use super::state::{State, User, repo_key};
use super::swarm_state::{Label, StandInHook, Team, UNITS};

/// The webhook types the forge delivers to (`IsValidHookTaskType`); the stand-in only sends the
/// forge's own JSON payloads, so it takes only its own types.
const HOOK_TYPES: &[&str] = &["forgejo", "gitea"];

pub(super) fn route(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    segments: &[&str],
) -> Result<Reply, Reply> {
    match (&request.method, segments) {
        (&Method::POST, ["orgs"]) => create_org(state, request, doer),
        (&Method::GET, ["orgs", org]) => get_org(state, request, doer, org),
        (&Method::GET, ["orgs", org, "teams"]) => list_teams(state, request, doer, org),
        (&Method::POST, ["orgs", org, "teams"]) => create_team(state, request, doer, org),
        (&Method::GET, ["teams", id, "members"]) => list_members(state, request, doer, id),
        (&Method::PUT, ["teams", id, "members", user]) => add_member(state, request, doer, id, user),
        (&Method::GET, ["orgs", org, "labels"]) => list_labels(state, request, doer, LabelOwner::Org(org)),
        (&Method::POST, ["orgs", org, "labels"]) => create_label(state, request, doer, LabelOwner::Org(org)),
        (&Method::GET, ["repos", owner, repo, "labels"]) => {
            list_labels(state, request, doer, LabelOwner::Repo(owner, repo))
        }
        (&Method::POST, ["repos", owner, repo, "labels"]) => {
            create_label(state, request, doer, LabelOwner::Repo(owner, repo))
        }
        (&Method::GET, ["orgs", org, "hooks"]) => list_hooks(state, request, doer, org),
        (&Method::POST, ["orgs", org, "hooks"]) => create_hook(state, request, doer, org),
        (&Method::PATCH, ["orgs", org, "hooks", id]) => edit_hook(state, request, doer, org, id),
        (&Method::DELETE, ["orgs", org, "hooks", id]) => delete_hook(state, request, doer, org, id),
        (&Method::GET, ["orgs", org, "repos"]) => list_org_repos(state, request, doer, org),
        (&Method::GET, ["repos", owner, repo, "pulls"]) => list_pulls(state, request, doer, (owner, repo)),
        (&Method::GET, ["repos", owner, repo, "issues"]) => list_issues(state, request, doer, (owner, repo)),
        (&Method::PUT, ["repos", owner, repo, "collaborators", user]) => {
            add_collaborator(state, request, doer, owner, repo, user)
        }
        _ => super::routes_repos::route(state, request, doer, segments),
    }
}

/// `orgAssignment`: the `{org}` of the path must be an organisation (a user is 404).
fn context_org<'a>(state: &'a State, name: &str) -> Result<&'a User, Reply> {
    state.user(name).filter(|u| u.is_org).ok_or_else(|| not_found(state, "GetOrgByName", ""))
}

/// What a doer must be in an organisation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// In its `Owners` team (`reqOrgOwnership`).
    Owner,
    /// In any of its teams (`reqOrgMembership`).
    Member,
}

/// Whether `doer` is an administrator or has `role` in `org`.
fn has_role(state: &State, doer: &User, org: &str, role: Role) -> bool {
    let org = org.to_ascii_lowercase();
    let login = doer.login.to_ascii_lowercase();
    doer.is_admin
        || state
            .swarm
            .teams
            .iter()
            .any(|t| t.org == org && (role == Role::Member || t.permission == "owner") && t.members.contains(&login))
}

/// `reqOrgOwnership` or `reqOrgMembership`: 403 "Must be an organization owner" (or member)
/// for anyone else.
fn require_role<'a>(state: &'a State, doer: Option<&Doer>, org: &str, role: Role) -> Result<&'a User, Reply> {
    let user = require_signed(state, doer)?;
    context_org(state, org)?;
    if has_role(state, user, org, role) {
        return Ok(user);
    }
    let what = if role == Role::Owner { "owner" } else { "member" };
    Err(error(state, StatusCode::FORBIDDEN, &format!("Must be an organization {what}")))
}

#[derive(Deserialize)]
struct CreateOrgOption {
    username: Option<String>,
    full_name: Option<String>,
    visibility: Option<String>,
}

/// `POST /orgs` (orgCreate): 201 Organization, 403, 422. The doer becomes its owner (the
/// forge's `Owners` team, made with the organisation).
fn create_org(state: &mut State, request: &Request, doer: Option<&Doer>) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    let creator = require_signed(state, doer)?.clone();
    let form: CreateOrgOption = bind(state, &request.body)?;
    let name = form.username.unwrap_or_default();
    let visibility = form.visibility.unwrap_or_default();
    let full_name = form.full_name.unwrap_or_default();
    // username `Required;Username;MaxSize(40)`, full_name `MaxSize(100)`, visibility
    // `In(,public,limited,private)`.
    check_username(state, "UserName", &name)?;
    check_profile(state, &full_name, &visibility)?;
    rules::usable_user_name(&name).map_err(|m| error(state, StatusCode::UNPROCESSABLE_ENTITY, &m))?;
    if state.user(&name).is_some() {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("user already exists [name: {name}]")));
    }
    let visibility = if visibility.is_empty() { "public" } else { visibility.as_str() };
    let key = state.insert_org(&name, &full_name, visibility, &creator.login);
    state.counts.orgs_created += 1;
    Ok(json_reply(StatusCode::CREATED, &state.org_json(&state.users[&key])))
}

/// `GET /orgs/{org}` (orgGet): 200 Organization; a private one is 404 to non-members.
fn get_org(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    let found = context_org(state, org)?;
    let viewer = doer.and_then(|d| state.user(&d.user));
    if found.visibility != "public" && !viewer.is_some_and(|v| has_role(state, v, org, Role::Member)) {
        return Err(not_found(state, "GetOrgByName", ""));
    }
    Ok(json_reply(StatusCode::OK, &state.org_json(found)))
}

/// `GET /orgs/{org}/teams` (orgListTeams): members only; paged.
fn list_teams(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Member)?;
    let org = org.to_ascii_lowercase();
    let teams: Vec<Value> = state.swarm.teams.iter().filter(|t| t.org == org).map(|t| state.team_json(t)).collect();
    Ok(paged(state, request, teams))
}

#[derive(Deserialize)]
struct CreateTeamOption {
    name: Option<String>,
    permission: Option<String>,
    #[serde(default)]
    includes_all_repositories: bool,
    #[serde(default)]
    can_create_org_repo: bool,
    units: Option<Vec<String>>,
}

/// `POST /orgs/{org}/teams` (orgCreateTeam): owners only; 201 Team, 422 for a bad or taken name.
fn create_team(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Owner)?;
    let form: CreateTeamOption = bind(state, &request.body)?;
    let name = form.name.unwrap_or_default();
    let permission = form.permission.unwrap_or_default();
    // name `Required;AlphaDashDot;MaxSize(255)`, permission `In(read,write,admin)`.
    check_alpha_dash_dot(state, "Name", &name, 255)?;
    if !["read", "write", "admin"].contains(&permission.as_str()) {
        return Err(invalid(state, "Permission", "In"));
    }
    let units = form.units.unwrap_or_default();
    if let Some(unknown) = units.iter().find(|u| !UNITS.contains(&u.as_str())) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("unknown unit: {unknown}")));
    }
    let org_key = org.to_ascii_lowercase();
    if state.swarm.teams.iter().any(|t| t.org == org_key && t.name.eq_ignore_ascii_case(&name)) {
        let message = format!("team already exists [org_id: {}, name: {name}]", context_org(state, org)?.id);
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &message));
    }
    let team = Team {
        id: state.next_id(),
        org: org_key,
        name,
        permission,
        includes_all_repositories: form.includes_all_repositories,
        can_create_org_repo: form.can_create_org_repo,
        units,
        members: Vec::new(),
    };
    state.swarm.teams.push(team.clone());
    state.counts.teams_created += 1;
    Ok(json_reply(StatusCode::CREATED, &state.team_json(&team)))
}

/// `teamAssignment`: the `{id}` must be a team's (404).
fn context_team(state: &State, id: &str) -> Result<Team, Reply> {
    let id = id.parse::<i64>().map_err(|_| not_found(state, "The target couldn't be found.", ""))?;
    state
        .swarm
        .teams
        .iter()
        .find(|t| t.id == id)
        .cloned()
        .ok_or_else(|| not_found(state, "The target couldn't be found.", ""))
}

/// `GET /teams/{id}/members` (orgListTeamMembers): members of its organisation; paged `User`s.
fn list_members(state: &mut State, request: &Request, doer: Option<&Doer>, id: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    let team = context_team(state, id)?;
    require_role(state, doer, &team.org, Role::Member)?;
    let viewer = doer.and_then(|d| state.user(&d.user));
    let users: Vec<Value> =
        team.members.iter().filter_map(|m| state.user(m)).map(|u| state.user_json(u, viewer)).collect();
    Ok(paged(state, request, users))
}

/// `PUT /teams/{id}/members/{username}` (orgAddTeamMember): owners only; 204, 404 unknown user.
fn add_member(state: &mut State, request: &Request, doer: Option<&Doer>, id: &str, user: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    let team = context_team(state, id)?;
    require_role(state, doer, &team.org, Role::Owner)?;
    let member = context_user(state, user)?;
    if member.is_org {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "an organization cannot be a team member"));
    }
    let login = member.login.to_ascii_lowercase();
    if let Some(t) = state.swarm.teams.iter_mut().find(|t| t.id == team.id)
        && !t.members.contains(&login)
    {
        t.members.push(login);
        state.counts.team_members_added += 1;
    }
    Ok(empty(StatusCode::NO_CONTENT))
}

#[derive(Clone, Copy)]
enum LabelOwner<'a> {
    Org(&'a str),
    Repo(&'a str, &'a str),
}

/// Who may read and write the labels: an organisation's members read and its owners write; a
/// repository's readers read and its owner, administrators and write collaborators write.
fn label_scope(state: &State, request: &Request, doer: Option<&Doer>, owner: LabelOwner<'_>) -> Result<String, Reply> {
    let write = request.method != Method::GET;
    match owner {
        LabelOwner::Org(org) => {
            require_scope(state, request, doer, "organization")?;
            if write {
                require_role(state, doer, org, Role::Owner)?
            } else {
                require_role(state, doer, org, Role::Member)?
            };
            Ok(format!("org:{}", org.to_ascii_lowercase()))
        }
        LabelOwner::Repo(owner, name) => {
            require_scope(state, request, doer, "issue")?;
            let repo = visible_repo(state, doer, owner, name)?;
            let key = repo_key(owner, name);
            if write {
                let user = require_signed(state, doer)?;
                let collaborator =
                    state.swarm.collaborators.get(&key).and_then(|c| c.get(&user.login.to_ascii_lowercase()));
                let may = user.is_admin
                    || user.login.eq_ignore_ascii_case(&repo.owner)
                    || collaborator.is_some_and(|p| p != "read")
                    || has_role(state, user, &repo.owner, Role::Owner);
                if !may {
                    return Err(error(
                        state,
                        StatusCode::FORBIDDEN,
                        "user should have a permission to write to a repo",
                    ));
                }
            }
            Ok(format!("repo:{key}"))
        }
    }
}

/// `GET /orgs/{org}/labels`, `GET /repos/{owner}/{repo}/labels`: paged `Label`s.
fn list_labels(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    owner: LabelOwner<'_>,
) -> Result<Reply, Reply> {
    let scope = label_scope(state, request, doer, owner)?;
    let labels: Vec<Value> =
        state.swarm.labels.iter().filter(|l| l.scope == scope).map(|l| state.label_json(l)).collect();
    Ok(paged(state, request, labels))
}

#[derive(Deserialize)]
struct CreateLabelOption {
    name: Option<String>,
    color: Option<String>,
    description: Option<String>,
}

/// `POST .../labels` (orgCreateLabel, issueCreateLabel): 201 `Label`; `name` and `color`
/// `Required`, the colour six hex digits (`NormalizeColor`, 422); the forge allows two labels of
/// one name.
fn create_label(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    owner: LabelOwner<'_>,
) -> Result<Reply, Reply> {
    let scope = label_scope(state, request, doer, owner)?;
    let form: CreateLabelOption = bind(state, &request.body)?;
    let name = form.name.unwrap_or_default();
    let color = form.color.unwrap_or_default();
    if name.is_empty() {
        return Err(invalid(state, "Name", "Required"));
    }
    if color.is_empty() {
        return Err(invalid(state, "Color", "Required"));
    }
    let hex = color.trim().trim_start_matches('#');
    if !(hex.len() == 6 || hex.len() == 3) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("invalid color: {color}")));
    }
    let label = Label {
        id: state.next_id(),
        scope,
        name,
        color: format!("#{}", hex.to_ascii_lowercase()),
        description: form.description.unwrap_or_default(),
    };
    state.swarm.labels.push(label.clone());
    state.counts.labels_created += 1;
    Ok(json_reply(StatusCode::CREATED, &state.label_json(&label)))
}

/// `GET /orgs/{org}/hooks` (orgListHooks): owners only; paged `Hook`s, without secrets.
fn list_hooks(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Owner)?;
    let org = org.to_ascii_lowercase();
    let hooks: Vec<Value> = state.swarm.hooks.iter().filter(|h| h.org == org).map(State::hook_json).collect();
    Ok(paged(state, request, hooks))
}

#[derive(Deserialize)]
struct CreateHookOption {
    #[serde(rename = "type")]
    kind: Option<String>,
    config: Option<BTreeMap<String, String>>,
    events: Option<Vec<String>>,
    #[serde(default)]
    active: bool,
}

/// `POST /orgs/{org}/hooks` (orgCreateHook): owners only; `type` and `config` `Required` (422),
/// `checkCreateHookOption`: a known type ("Invalid hook type"), `config.url` and
/// `config.content_type` present ("Missing config option: url"), the content type `json` or
/// `form` ("Invalid content type"), all 422; no events means `push`; 201 `Hook`.
fn create_hook(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Owner)?;
    let form: CreateHookOption = bind(state, &request.body)?;
    let kind = form.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(invalid(state, "Type", "Required"));
    }
    let Some(config) = form.config else {
        return Err(invalid(state, "Config", "Required"));
    };
    if !HOOK_TYPES.contains(&kind.as_str()) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("Invalid hook type: {kind}")));
    }
    for name in ["url", "content_type"] {
        if !config.contains_key(name) {
            return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("Missing config option: {name}")));
        }
    }
    let content_type = config["content_type"].clone();
    if !["json", "form"].contains(&content_type.as_str()) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "Invalid content type"));
    }
    let events = form.events.filter(|e| !e.is_empty()).unwrap_or_else(|| vec!["push".into()]);
    let hook = StandInHook {
        id: state.next_id(),
        org: org.to_ascii_lowercase(),
        kind,
        url: config["url"].clone(),
        content_type,
        secret: config.get("secret").cloned().unwrap_or_default(),
        events,
        active: form.active,
    };
    state.swarm.hooks.push(hook.clone());
    state.counts.hooks_created += 1;
    Ok(json_reply(StatusCode::CREATED, &State::hook_json(&hook)))
}

#[derive(Deserialize)]
struct EditHookOption {
    config: Option<BTreeMap<String, String>>,
    events: Option<Vec<String>>,
    active: Option<bool>,
}

fn hook_index(state: &State, org: &str, id: &str) -> Result<usize, Reply> {
    let org = org.to_ascii_lowercase();
    let id = id.parse::<i64>().ok();
    state
        .swarm
        .hooks
        .iter()
        .position(|h| Some(h.id) == id && h.org == org)
        .ok_or_else(|| not_found(state, "The target couldn't be found.", ""))
}

/// `PATCH /orgs/{org}/hooks/{id}` (orgEditHook, `editHook`): each config key given replaces
/// its value (a bad content type is 422); the events are set anew (none means `push`);
/// `active` when given; 200 `Hook`, 404.
fn edit_hook(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str, id: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Owner)?;
    let index = hook_index(state, org, id)?;
    let form: EditHookOption = bind(state, &request.body)?;
    let mut hook = state.swarm.hooks[index].clone();
    if let Some(config) = form.config {
        if let Some(url) = config.get("url") {
            hook.url.clone_from(url);
        }
        if let Some(content_type) = config.get("content_type") {
            if !["json", "form"].contains(&content_type.as_str()) {
                return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "Invalid content type"));
            }
            hook.content_type.clone_from(content_type);
        }
        if let Some(secret) = config.get("secret") {
            hook.secret.clone_from(secret);
        }
    }
    hook.events = form.events.filter(|e| !e.is_empty()).unwrap_or_else(|| vec!["push".into()]);
    if let Some(active) = form.active {
        hook.active = active;
    }
    state.swarm.hooks[index] = hook.clone();
    state.counts.hooks_edited += 1;
    Ok(json_reply(StatusCode::OK, &State::hook_json(&hook)))
}

/// `DELETE /orgs/{org}/hooks/{id}` (orgDeleteHook): 204, 404.
fn delete_hook(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str, id: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    require_role(state, doer, org, Role::Owner)?;
    let index = hook_index(state, org, id)?;
    state.swarm.hooks.remove(index);
    state.counts.hooks_deleted += 1;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `GET /orgs/{org}/repos` (orgListRepos): the repositories the doer may read; paged.
fn list_org_repos(state: &mut State, request: &Request, doer: Option<&Doer>, org: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "organization")?;
    let org_user = context_org(state, org)?.login.clone();
    let viewer = doer.and_then(|d| state.user(&d.user));
    let repos: Vec<Value> = state
        .repos
        .values()
        .filter(|r| r.owner.eq_ignore_ascii_case(&org_user))
        .filter(|r| !r.private || doer.is_some_and(|d| state.may_read_repo(&d.user, &r.owner, &r.name)))
        .map(|r| state.repo_json(r, viewer))
        .collect();
    Ok(paged(state, request, repos))
}

/// `state` of the pull and issue lists: `open` (the default), `closed` or `all` (422 else).
fn state_filter(state: &State, request: &Request) -> Result<Option<&'static str>, Reply> {
    match request.query.get("state").map(String::as_str) {
        None | Some("" | "open") => Ok(Some("open")),
        Some("closed") => Ok(Some("closed")),
        Some("all") => Ok(None),
        Some(_) => Err(invalid(state, "State", "In")),
    }
}

/// A repository's list route: its scope `category`, the repository visible to the doer, the
/// `state` query; then a page of what `items` gives for the repository's key and that state.
fn repo_list(
    state: &State,
    request: &Request,
    doer: Option<&Doer>,
    (owner, name): (&str, &str),
    category: &str,
    items: impl Fn(&State, &str, Option<&str>) -> Vec<Value>,
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, category)?;
    visible_repo(state, doer, owner, name)?;
    let wanted = state_filter(state, request)?;
    Ok(paged(state, request, items(state, &repo_key(owner, name), wanted)))
}

/// `GET /repos/{owner}/{repo}/pulls` (repoListPullRequests): paged `PullRequest`s, newest first.
fn list_pulls(state: &State, request: &Request, doer: Option<&Doer>, repo: (&str, &str)) -> Result<Reply, Reply> {
    repo_list(state, request, doer, repo, "repository", |state, key, wanted| {
        let mut pulls: Vec<_> =
            state.swarm.pulls.iter().filter(|p| p.repo == key && wanted.is_none_or(|w| p.state == w)).collect();
        pulls.sort_by_key(|p| std::cmp::Reverse(p.number));
        pulls.into_iter().map(|p| state.pull_json(p)).collect()
    })
}

/// `GET /repos/{owner}/{repo}/issues` (issueListIssues): paged `Issue`s, newest first; `type`
/// `issues` or `pulls` (pulls are listed as issues with `pull_request` set; the stand-in keeps
/// pulls apart, so `type=pulls` lists none).
fn list_issues(state: &State, request: &Request, doer: Option<&Doer>, repo: (&str, &str)) -> Result<Reply, Reply> {
    let only_pulls = request.query.get("type").is_some_and(|t| t == "pulls");
    repo_list(state, request, doer, repo, "issue", |state, key, wanted| {
        let mut issues: Vec<_> = state
            .swarm
            .issues
            .iter()
            .filter(|i| !only_pulls && i.repo == key && wanted.is_none_or(|w| i.state == w))
            .collect();
        issues.sort_by_key(|i| std::cmp::Reverse(i.number));
        issues.into_iter().map(|i| state.issue_json(i)).collect()
    })
}

#[derive(Deserialize)]
struct AddCollaboratorOption {
    permission: Option<String>,
}

/// `PUT /repos/{owner}/{repo}/collaborators/{collaborator}` (repoAddCollaborator): repository
/// administrators; the collaborator must be a user (404), not an organisation (422);
/// `permission` `In(read,write,admin)` (422), default write; 204.
fn add_collaborator(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    owner: &str,
    name: &str,
    user: &str,
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    let repo = visible_repo(state, doer, owner, name)?;
    let signed = require_signed(state, doer)?;
    if !(signed.is_admin
        || signed.login.eq_ignore_ascii_case(&repo.owner)
        || has_role(state, signed, &repo.owner, Role::Owner))
    {
        return Err(error(
            state,
            StatusCode::FORBIDDEN,
            "user should be an owner or a collaborator with admin write of a repository",
        ));
    }
    let form: AddCollaboratorOption =
        if request.body.is_empty() { AddCollaboratorOption { permission: None } } else { bind(state, &request.body)? };
    let permission = form.permission.unwrap_or_else(|| "write".into());
    if !["read", "write", "admin"].contains(&permission.as_str()) {
        return Err(invalid(state, "Permission", "In"));
    }
    let collaborator = context_user(state, user)?;
    if collaborator.is_org {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "user is an organization"));
    }
    let login = collaborator.login.to_ascii_lowercase();
    state.swarm.collaborators.entry(repo_key(owner, name)).or_default().insert(login, permission);
    state.counts.collaborators_set += 1;
    Ok(empty(StatusCode::NO_CONTENT))
}
