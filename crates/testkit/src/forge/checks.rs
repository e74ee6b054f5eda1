//! What the stand-in's routes check of a request, as the forge's bindings and context
//! middleware check it: the body bound into its option type, the validation rules of names and
//! profiles (422 "[Field]: rule"), the user and the repository a path names, and one page of a
//! list.

use serde::de::DeserializeOwned;
use serde_json::json;
use warp::http::StatusCode;

use super::http::{Doer, Reply, Request, error, json_reply, not_found};
use super::rules;
use super::state::{DEFAULT_PAGE, StandInRepo, State, User};

/// `bind`: the body into the option type; a body that does not decode is a validation error.
pub(super) fn bind<T: DeserializeOwned>(state: &State, body: &[u8]) -> Result<T, Reply> {
    serde_json::from_slice(body)
        .map_err(|e| error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("[]: cannot decode the body: {e}")))
}

pub(super) fn invalid(state: &State, field: &str, rule: &str) -> Reply {
    error(state, StatusCode::UNPROCESSABLE_ENTITY, &format!("[{field}]: {rule}"))
}

/// The binding `Required;Username;MaxSize(40)` of `field`.
pub(super) fn check_username(state: &State, field: &str, name: &str) -> Result<(), Reply> {
    if name.is_empty() {
        return Err(invalid(state, field, "Required"));
    }
    if !rules::valid_username(name) {
        return Err(invalid(state, field, "invalid username"));
    }
    if name.len() > 40 {
        return Err(invalid(state, field, "MaxSize"));
    }
    Ok(())
}

/// The binding `Required;AlphaDashDot;MaxSize(max)` of `field`.
pub(super) fn check_alpha_dash_dot(state: &State, field: &str, name: &str, max: usize) -> Result<(), Reply> {
    if name.is_empty() {
        return Err(invalid(state, field, "Required"));
    }
    if !rules::alpha_dash_dot(name) {
        return Err(invalid(state, field, "AlphaDashDot"));
    }
    if name.len() > max {
        return Err(invalid(state, field, "MaxSize"));
    }
    Ok(())
}

/// The bindings `full_name` `MaxSize(100)` and `visibility` `In(,public,limited,private)`.
pub(super) fn check_profile(state: &State, full_name: &str, visibility: &str) -> Result<(), Reply> {
    if full_name.chars().count() > 100 {
        return Err(invalid(state, "FullName", "MaxSize"));
    }
    if !["", "public", "limited", "private"].contains(&visibility) {
        return Err(invalid(state, "Visibility", "In"));
    }
    Ok(())
}

/// `context.UserAssignmentAPI`: the `{username}` of the path must exist.
pub(super) fn context_user<'a>(state: &'a State, name: &str) -> Result<&'a User, Reply> {
    state
        .user(name)
        .ok_or_else(|| not_found(state, "GetUserByName", &format!("user redirect does not exist [name: {name}]")))
}

/// One page of a list (`ListOptions`): `page` (1-based) and `limit` (cut to
/// `MAX_RESPONSE_ITEMS`), with `X-Total-Count` set to the whole list's length.
pub(super) fn paged(state: &State, request: &Request, items: Vec<serde_json::Value>) -> Reply {
    let number = |key: &str| request.query.get(key).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    let page = usize::try_from(number("page")).unwrap_or(0).max(1);
    let limit = match usize::try_from(number("limit")).unwrap_or(0) {
        0 => DEFAULT_PAGE.min(state.max_page),
        limit => limit.min(state.max_page),
    };
    let total = items.len();
    let body: Vec<_> = items.into_iter().skip((page - 1) * limit).take(limit).collect();
    let mut reply = json_reply(StatusCode::OK, &json!(body));
    reply.total_count = Some(total);
    reply
}

/// `repoAssignment` and read permission: the owner and repository must exist and be visible
/// to the doer (a private repository to its owner, collaborators, teams reaching it and
/// administrators); 404 otherwise.
pub(super) fn visible_repo(state: &State, doer: Option<&Doer>, owner: &str, name: &str) -> Result<StandInRepo, Reply> {
    let owner_user = context_user(state, owner)?;
    let Some(repo) = state.repo(owner, name) else {
        let detail =
            format!("repository does not exist [id: 0, uid: {}, owner_name: {owner}, name: {name}]", owner_user.id);
        return Err(not_found(state, "GetRepositoryByName", &detail));
    };
    let sees = !repo.private || doer.is_some_and(|d| state.may_read_repo(&d.user, &repo.owner, &repo.name));
    if !sees {
        return Err(not_found(state, "The target couldn't be found.", ""));
    }
    Ok(repo.clone())
}
