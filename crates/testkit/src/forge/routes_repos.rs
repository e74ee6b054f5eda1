//! A user's own repositories and what a repository holds: `createCurrentUserRepo`,
//! `repoGetContents` and `repoListCollaborators`. The stand-in keeps no git content but one file:
//! the `README.md` the forge's `auto_init` writes (`# {name}`, then the description), which a
//! repository generated from the template with git content gets too.

use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use warp::http::{Method, StatusCode};

use super::checks::{bind, check_alpha_dash_dot, invalid, paged, visible_repo};
use super::http::{Doer, Reply, Request, error, json_reply, not_found, require_scope, require_signed};
use super::rules;
use super::state::{State, repo_key};

/// The routes of this module; anything else is 404.
pub(super) fn route(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    segments: &[&str],
) -> Result<Reply, Reply> {
    match (&request.method, segments) {
        (&Method::POST, ["user", "repos"]) => create_repo(state, request, doer),
        (&Method::GET, ["repos", owner, repo, "contents", path @ ..]) if !path.is_empty() => {
            get_contents(state, request, doer, (owner, repo), &path.join("/"))
        }
        (&Method::GET, ["repos", owner, repo, "collaborators"]) => {
            list_collaborators(state, request, doer, (owner, repo))
        }
        _ => Ok(not_found(state, "The target couldn't be found.", "")),
    }
}

/// `CreateRepoOption`: `name` `Required;AlphaDashDot;MaxSize(100)`, `description`
/// `MaxSize(2048)`.
#[derive(Deserialize)]
struct CreateRepoOption {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    auto_init: bool,
    #[serde(default)]
    template: bool,
}

/// `POST /user/repos` (createCurrentUserRepo): 201 Repository, 409 for a taken name, 422.
fn create_repo(state: &mut State, request: &Request, doer: Option<&Doer>) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    let owner = require_signed(state, doer)?.clone();
    let form: CreateRepoOption = bind(state, &request.body)?;
    let name = form.name.unwrap_or_default();
    check_alpha_dash_dot(state, "Name", &name, 100)?;
    if form.description.chars().count() > 2048 {
        return Err(invalid(state, "Description", "MaxSize"));
    }
    rules::usable_repo_name(&name).map_err(|m| error(state, StatusCode::UNPROCESSABLE_ENTITY, &m))?;
    if state.repos.contains_key(&repo_key(&owner.login, &name)) {
        return Err(error(state, StatusCode::CONFLICT, "The repository with the same name already exists."));
    }
    let mut repo = state.insert_repo(&owner.login, &name, form.private, form.template, !form.auto_init);
    if form.auto_init {
        // As the forge's auto_init writes it.
        repo.readme = Some(if form.description.is_empty() {
            format!("# {name}\n")
        } else {
            format!("# {name}\n\n{}", form.description)
        });
        state.repos.insert(repo_key(&owner.login, &name), repo.clone());
    }
    Ok(json_reply(StatusCode::CREATED, &state.repo_json(&repo, Some(&owner))))
}

/// `GET /repos/{owner}/{repo}/contents/{filepath}` (repoGetContents): 200 ContentsResponse for
/// the one file a repository with content holds, 404 otherwise.
fn get_contents(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    (owner, name): (&str, &str),
    path: &str,
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    let repo = visible_repo(state, doer, owner, name)?;
    let Some(content) = repo.readme.clone().filter(|_| path == "README.md") else {
        return Err(not_found(state, "GetContentsOrList", &format!("object does not exist [id: , rel_path: {path}]")));
    };
    let base = format!("{}/{}/{}", state.base, repo.owner, repo.name);
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "name": "README.md",
            "path": "README.md",
            "type": "file",
            "size": content.len(),
            "encoding": "base64",
            "content": base64::engine::general_purpose::STANDARD.encode(&content),
            "url": format!("{}/api/v1/repos/{}/{}/contents/README.md?ref={}", state.base, repo.owner, repo.name, repo.default_branch),
            "html_url": format!("{base}/src/branch/{}/README.md", repo.default_branch),
            "download_url": format!("{base}/raw/branch/{}/README.md", repo.default_branch),
        }),
    ))
}

/// `GET /repos/{owner}/{repo}/collaborators` (repoListCollaborators): readers of the repository;
/// 200 `[User]`, paged, in name order.
fn list_collaborators(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    (owner, name): (&str, &str),
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    visible_repo(state, doer, owner, name)?;
    let viewer = doer.and_then(|d| state.user(&d.user));
    let logins = state.swarm.collaborators.get(&repo_key(owner, name)).map(|c| c.keys().cloned().collect::<Vec<_>>());
    let users = logins
        .unwrap_or_default()
        .iter()
        .filter_map(|login| state.user(login))
        .map(|u| state.user_json(u, viewer))
        .collect();
    Ok(paged(state, request, users))
}
