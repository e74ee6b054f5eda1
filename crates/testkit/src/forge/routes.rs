//! The operations the stand-in answers, each checking what the forge checks, in the order its
//! route middleware and handler check it (scope, sign-in, permission, body binding, handler).
//! Statuses and messages are those of the v1 document's responses for the operation and of the
//! forge's handlers.

use serde::Deserialize;
use serde_json::json;
use warp::http::{Method, StatusCode};

use super::checks::{
    bind, check_alpha_dash_dot, check_profile, check_username, context_user, invalid, paged, visible_repo,
};
use super::http::{
    Doer, Reply, Request, empty, error, json_reply, not_found, plain, require_scope, require_signed, sign_in,
};
use super::rules;
use super::state::{State, repo_key, token_json};

const MIN_PASSWORD_LENGTH: usize = 8;

/// Answers one request.
pub(super) fn answer(state: &mut State, request: &Request) -> Reply {
    state.counts.requests += 1;
    if state.down {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable");
    }
    let reply = route(state, request).unwrap_or_else(|refusal| refusal);
    if state.malformed && reply.status.is_success() {
        let mut garbage = plain(reply.status, "{\"id\": \"not-a-number\", \"login\": ");
        garbage.content_type = Some("application/json");
        return garbage;
    }
    reply
}

fn route(state: &mut State, request: &Request) -> Result<Reply, Reply> {
    let Some(segments) = &request.segments else {
        return Ok(not_found(state, "The target couldn't be found.", ""));
    };
    let doer = sign_in(state, request)?;
    let doer = doer.as_ref();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (&request.method, segments.as_slice()) {
        (&Method::POST, ["admin", "users"]) => create_user(state, request, doer),
        (&Method::DELETE, ["admin", "users", name]) => delete_user(state, request, doer, name),
        (&Method::GET, ["user"]) => current_user(state, request, doer),
        (&Method::GET, ["users", name]) => get_user(state, request, doer, name),
        (&Method::GET, ["users", name, "tokens"]) => list_tokens(state, request, doer, name),
        (&Method::POST, ["users", name, "tokens"]) => create_token(state, request, doer, name),
        (&Method::DELETE, ["users", name, "tokens", token]) => delete_token(state, request, doer, name, token),
        (&Method::GET, ["repos", owner, repo]) => get_repo(state, request, doer, owner, repo),
        (&Method::POST, ["repos", owner, repo, "generate"]) => generate_repo(state, request, doer, owner, repo),
        _ => super::routes_swarm::route(state, request, doer, &segments),
    }
}

/// `reqSiteAdmin`, after `reqToken`.
pub(super) fn require_admin(state: &State, doer: Option<&Doer>) -> Result<(), Reply> {
    let user = require_signed(state, doer)?;
    if user.is_admin { Ok(()) } else { Err(error(state, StatusCode::FORBIDDEN, "user should be the site admin")) }
}

/// `CreateUserOption`; Go leaves a missing or null field at its zero value.
#[derive(Deserialize)]
struct CreateUserOption {
    username: Option<String>,
    email: Option<String>,
    full_name: Option<String>,
    password: Option<String>,
    must_change_password: Option<bool>,
    visibility: Option<String>,
}

/// `POST /admin/users` (adminCreateUser): 201 User, 400 error, 403 forbidden, 422 validationError.
fn create_user(state: &mut State, request: &Request, doer: Option<&Doer>) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "admin")?;
    require_admin(state, doer)?;
    let form: CreateUserOption = bind(state, &request.body)?;
    let username = form.username.unwrap_or_default();
    let email = form.email.unwrap_or_default();
    let full_name = form.full_name.unwrap_or_default();
    let password = form.password.unwrap_or_default();
    let visibility = form.visibility.unwrap_or_default();
    // The bindings, field by field: username `Required;Username;MaxSize(40)`, full_name
    // `MaxSize(100)`, email `Required;Email;MaxSize(254)`, password `MaxSize(255)`,
    // visibility `In(,public,limited,private)`.
    check_username(state, "Username", &username)?;
    if full_name.chars().count() > 100 {
        return Err(invalid(state, "FullName", "MaxSize"));
    }
    if email.is_empty() {
        return Err(invalid(state, "Email", "Required"));
    }
    if !rules::valid_email(&email) {
        return Err(invalid(state, "Email", "Email"));
    }
    if email.len() > 254 {
        return Err(invalid(state, "Email", "MaxSize"));
    }
    if password.len() > 255 {
        return Err(invalid(state, "Password", "MaxSize"));
    }
    check_profile(state, &full_name, &visibility)?;
    if password.chars().count() < MIN_PASSWORD_LENGTH {
        return Err(error(state, StatusCode::BAD_REQUEST, "PasswordIsRequired"));
    }
    rules::usable_user_name(&username).map_err(|m| error(state, StatusCode::UNPROCESSABLE_ENTITY, &m))?;
    if state.taken_before_create.remove(&username.to_ascii_lowercase()) {
        let email = format!("{}@someone-else.invalid", username.to_ascii_lowercase());
        state.insert_user(&username, &email, "someone-elses-password", false);
    }
    if state.user(&username).is_some() {
        let message = format!("user already exists [name: {username}]");
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &message));
    }
    if state.users.values().any(|u| u.email.eq_ignore_ascii_case(&email)) {
        let message = format!("e-mail already in use [email: {email}]");
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &message));
    }
    state.insert_user(&username, &email, &password, false);
    let key = username.to_ascii_lowercase();
    if let Some(user) = state.users.get_mut(&key) {
        user.full_name = full_name;
        // The forge's default when the field is absent.
        user.must_change_password = form.must_change_password.unwrap_or(true);
        user.visibility = if visibility.is_empty() { "public".into() } else { visibility };
    }
    state.counts.users_created += 1;
    let viewer = doer.and_then(|d| state.user(&d.user));
    let body = state.user_json(&state.users[&key], viewer);
    Ok(json_reply(StatusCode::CREATED, &body))
}

/// `DELETE /admin/users/{username}` (adminDeleteUser): 204, 403, 404, 422.
fn delete_user(state: &mut State, request: &Request, doer: Option<&Doer>, name: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "admin")?;
    require_admin(state, doer)?;
    let target = context_user(state, name)?.clone();
    if doer.is_some_and(|d| d.user == target.login.to_ascii_lowercase()) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "you cannot delete yourself"));
    }
    if state.repos.values().any(|r| r.owner.eq_ignore_ascii_case(&target.login)) {
        let message = format!("user still has ownership of repositories [uid: {}]", target.id);
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &message));
    }
    let key = target.login.to_ascii_lowercase();
    state.users.remove(&key);
    state.tokens.retain(|t| t.owner != key);
    state.counts.users_deleted += 1;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `GET /user` (userGetCurrent): 200 User; 401 without a signed-in user.
fn current_user(state: &mut State, request: &Request, doer: Option<&Doer>) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "user")?;
    let user = require_signed(state, doer)?;
    Ok(json_reply(StatusCode::OK, &state.user_json(user, Some(user))))
}

/// `GET /users/{username}` (userGet): 200 User, 404.
fn get_user(state: &mut State, request: &Request, doer: Option<&Doer>, name: &str) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "user")?;
    let user = context_user(state, name)?;
    let viewer = doer.and_then(|d| state.user(&d.user));
    Ok(json_reply(StatusCode::OK, &state.user_json(user, viewer)))
}

/// The token routes' guards: `reqSelfOrAdmin` (403), then `reqBasicOrRevProxyAuth` (401).
fn token_route_guard(
    state: &State,
    request: &Request,
    doer: Option<&Doer>,
    name: &str,
) -> Result<super::state::User, Reply> {
    require_scope(state, request, doer, "user")?;
    let context = context_user(state, name)?.clone();
    let signed = doer.and_then(|d| state.user(&d.user));
    let allowed = signed.is_some_and(|u| u.is_admin || u.id == context.id);
    if !allowed {
        let message = "doer should be the site admin or be same as the contextUser";
        return Err(error(state, StatusCode::FORBIDDEN, message));
    }
    if !doer.is_some_and(Doer::is_basic) {
        return Err(error(state, StatusCode::UNAUTHORIZED, "auth required"));
    }
    Ok(context)
}

/// `GET /users/{username}/tokens` (userGetTokens): 200 AccessTokenList with `X-Total-Count`,
/// paged by `page` (1-based) and `limit` (cut to `MAX_RESPONSE_ITEMS`).
fn list_tokens(state: &mut State, request: &Request, doer: Option<&Doer>, name: &str) -> Result<Reply, Reply> {
    let context = token_route_guard(state, request, doer, name)?;
    let owner = context.login.to_ascii_lowercase();
    let mine: Vec<_> = state.tokens.iter().filter(|t| t.owner == owner).map(|t| token_json(t, false)).collect();
    Ok(paged(state, request, mine))
}

#[derive(Deserialize)]
struct CreateAccessTokenOption {
    name: Option<String>,
    scopes: Option<Vec<String>>,
}

/// `POST /users/{username}/tokens` (userCreateToken): 201 AccessToken, 400 error, 403.
fn create_token(state: &mut State, request: &Request, doer: Option<&Doer>, name: &str) -> Result<Reply, Reply> {
    let context = token_route_guard(state, request, doer, name)?;
    let form: CreateAccessTokenOption = bind(state, &request.body)?;
    let token_name = form.name.unwrap_or_default();
    if token_name.is_empty() {
        return Err(invalid(state, "Name", "Required"));
    }
    let owner = context.login.to_ascii_lowercase();
    if state.tokens.iter().any(|t| t.owner == owner && t.name == token_name) {
        return Err(error(state, StatusCode::BAD_REQUEST, "access token name has been used already"));
    }
    let scopes = rules::normalize_scopes(&form.scopes.unwrap_or_default())
        .map_err(|m| error(state, StatusCode::BAD_REQUEST, &m))?;
    if scopes.is_empty() {
        return Err(error(state, StatusCode::BAD_REQUEST, "access token must have a scope"));
    }
    let token = state.insert_token(&owner, &token_name, scopes);
    state.counts.tokens_minted += 1;
    Ok(json_reply(StatusCode::CREATED, &token_json(&token, true)))
}

/// `DELETE /users/{username}/tokens/{token}` (userDeleteAccessToken): 204, 403, 404, 422. A
/// `{token}` that parses as an integer is an id; otherwise a name among the user's tokens.
fn delete_token(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    name: &str,
    token: &str,
) -> Result<Reply, Reply> {
    let context = token_route_guard(state, request, doer, name)?;
    let owner = context.login.to_ascii_lowercase();
    let id = match rules::go_parse_int(token).filter(|id| *id != 0) {
        Some(id) => id,
        None => {
            let matches: Vec<i64> =
                state.tokens.iter().filter(|t| t.owner == owner && t.name == token).map(|t| t.id).collect();
            match matches.as_slice() {
                [] => return Err(not_found(state, "The target couldn't be found.", "")),
                [id] => *id,
                _ => {
                    let message = format!("multiple matches for token name '{token}'");
                    return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, &message));
                }
            }
        }
    };
    // The forge deletes by id *and the doer's* user id.
    let doer_user = doer.map(|d| d.user.clone()).unwrap_or_default();
    let before = state.tokens.len();
    state.tokens.retain(|t| !(t.id == id && t.owner == doer_user));
    if state.tokens.len() == before {
        return Err(not_found(state, "The target couldn't be found.", ""));
    }
    state.counts.tokens_deleted += 1;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `GET /repos/{owner}/{repo}` (repoGet): 200 Repository, 404.
fn get_repo(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    owner: &str,
    name: &str,
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    let repo = visible_repo(state, doer, owner, name)?;
    let viewer = doer.and_then(|d| state.user(&d.user));
    Ok(json_reply(StatusCode::OK, &state.repo_json(&repo, viewer)))
}

/// `GenerateRepoOption`; `owner` and `name` are required.
#[derive(Deserialize)]
struct GenerateRepoOption {
    owner: Option<String>,
    name: Option<String>,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    git_content: bool,
    #[serde(default)]
    topics: bool,
    #[serde(default)]
    git_hooks: bool,
    #[serde(default)]
    webhooks: bool,
    #[serde(default)]
    avatar: bool,
    #[serde(default)]
    labels: bool,
    #[serde(default)]
    protected_branch: bool,
}

/// `POST /repos/{template_owner}/{template_repo}/generate` (generateRepo): 201 Repository,
/// 403, 404, 409 (the name is taken), 422.
fn generate_repo(
    state: &mut State,
    request: &Request,
    doer: Option<&Doer>,
    template_owner: &str,
    template_name: &str,
) -> Result<Reply, Reply> {
    require_scope(state, request, doer, "repository")?;
    // repoAssignment runs before reqToken: an unknown template is 404 even anonymously.
    let template = visible_repo(state, doer, template_owner, template_name)?;
    let doer_user = require_signed(state, doer)?.clone();
    let form: GenerateRepoOption = bind(state, &request.body)?;
    let owner = form.owner.unwrap_or_default();
    let name = form.name.unwrap_or_default();
    // The bindings: owner `Required`, name `Required;AlphaDashDot;MaxSize(100)`.
    if owner.is_empty() {
        return Err(invalid(state, "Owner", "Required"));
    }
    check_alpha_dash_dot(state, "Name", &name, 100)?;
    if !template.template {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "this is not a template repo"));
    }
    let items =
        [form.git_content, form.topics, form.git_hooks, form.webhooks, form.avatar, form.labels, form.protected_branch];
    if !items.contains(&true) {
        return Err(error(state, StatusCode::UNPROCESSABLE_ENTITY, "must select at least one template item"));
    }
    if !owner.eq_ignore_ascii_case(&doer_user.login) {
        if state.user(&owner).is_none() {
            let body = json!({ "error": format!("request owner `{owner}` does not exist") });
            return Err(json_reply(StatusCode::NOT_FOUND, &body));
        }
        if !doer_user.is_admin {
            return Err(error(state, StatusCode::FORBIDDEN, "Only admin can generate repository for other user."));
        }
    }
    rules::usable_repo_name(&name).map_err(|m| error(state, StatusCode::UNPROCESSABLE_ENTITY, &m))?;
    if state.repos.contains_key(&repo_key(&owner, &name)) {
        let message = "The repository with the same name already exists.";
        return Err(error(state, StatusCode::CONFLICT, message));
    }
    let empty = !form.git_content || template.empty;
    let mut repo = state.insert_repo(&owner, &name, form.private, false, empty);
    if form.git_content {
        repo.readme.clone_from(&template.readme);
        state.repos.insert(repo_key(&owner, &name), repo.clone());
    }
    state.counts.repos_generated += 1;
    Ok(json_reply(StatusCode::CREATED, &state.repo_json(&repo, Some(&doer_user))))
}
