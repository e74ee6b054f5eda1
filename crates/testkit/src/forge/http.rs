//! Requests and answers: the parsed request, the error body (`APIError`: `message` and `url`),
//! and who is signing in (the security definitions of the v1 document: `AuthorizationHeaderToken`
//! (`Authorization: token <t>`), the deprecated `AccessToken`/`Token` query parameters,
//! `BasicAuth`, and `SudoHeader`/`SudoParam` for administrators).

use std::collections::HashMap;

use base64::Engine;
use serde_json::{Value, json};
use warp::http::{HeaderMap, HeaderValue, Method, Response, StatusCode};

use super::state::{State, User};

/// An answer, turned into an HTTP response at the server's edge.
#[derive(Debug)]
pub(super) struct Reply {
    pub status: StatusCode,
    pub body: Vec<u8>,
    pub content_type: Option<&'static str>,
    /// `X-Total-Count`, set on lists.
    pub total_count: Option<usize>,
}

impl Reply {
    pub fn into_response(self) -> Response<Vec<u8>> {
        let mut response = Response::new(self.body);
        *response.status_mut() = self.status;
        if let Some(content_type) = self.content_type {
            response.headers_mut().insert("content-type", HeaderValue::from_static(content_type));
        }
        if let Some(total) = self.total_count {
            response.headers_mut().insert("x-total-count", total.into());
        }
        response
    }
}

#[derive(Debug)]
pub(super) struct Request {
    pub method: Method,
    /// Decoded path segments after `/api/v1/`; `None` for a path outside the API.
    pub segments: Option<Vec<String>>,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Request {
    pub fn new(method: Method, raw_path: &str, raw_query: &str, headers: HeaderMap, body: Vec<u8>) -> Self {
        let segments =
            raw_path.strip_prefix("/api/v1/").map(|rest| rest.split('/').map(|s| percent_decode(s, false)).collect());
        let query = raw_query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key, true), percent_decode(value, true))
            })
            .collect();
        Self { method, segments, query, headers, body }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Who sent a request, and how.
#[derive(Debug, Clone)]
pub(super) struct Doer {
    /// Lower-case login.
    pub user: String,
    pub via: Via,
}

#[derive(Debug, Clone)]
pub(super) enum Via {
    Token { scopes: Vec<String> },
    Basic,
}

impl Doer {
    pub fn is_basic(&self) -> bool {
        matches!(self.via, Via::Basic)
    }
}

/// Signs the request in the way the forge's auth middleware does (`parseToken`, then basic
/// auth): a token from the `token` or `access_token` query parameter (looked at first), or
/// from the `Authorization` header (`token`/`bearer`), or basic auth with a user's password.
/// An unknown token, an unknown user or a wrong password is 401 at once, on every route. A
/// signed-in user who must change their password is refused everywhere with 403, and `Sudo`
/// lets an administrator act as another user (403 for anyone else).
pub(super) fn sign_in(state: &State, request: &Request) -> Result<Option<Doer>, Reply> {
    let query_token = ["token", "access_token"].iter().find_map(|k| request.query.get(*k).filter(|t| !t.is_empty()));
    let doer = if let Some(token) = query_token {
        Some(token_doer(state, token)?)
    } else if let Some(value) = request.header("authorization") {
        let (scheme, credential) = value.split_once(' ').unwrap_or((value, ""));
        let credential = credential.trim();
        match scheme.to_ascii_lowercase().as_str() {
            "token" | "bearer" => Some(token_doer(state, credential)?),
            "basic" => Some(basic_doer(state, credential)?),
            _ => None,
        }
    } else {
        None
    };
    let mut doer = doer;
    if let Some(signed) = &doer {
        let Some(user) = state.user(&signed.user) else {
            return Err(error(state, StatusCode::UNAUTHORIZED, AUTH_FAILED));
        };
        if user.must_change_password {
            let message = format!("You must change your password. Change it at: {}/user/change_password", state.base);
            return Err(json_reply(StatusCode::FORBIDDEN, &json!({ "message": message })));
        }
    }
    let sudo = request.query.get("sudo").map(String::as_str).or_else(|| request.header("sudo"));
    if let Some(target) = sudo.filter(|s| !s.is_empty()) {
        let admin = doer.as_ref().and_then(|d| state.user(&d.user)).is_some_and(|u| u.is_admin);
        if !admin {
            return Err(json_reply(
                StatusCode::FORBIDDEN,
                &json!({ "message": "Only administrators allowed to sudo." }),
            ));
        }
        let Some(user) = state.user(target) else {
            return Err(not_found(state, "GetUserByName", &format!("user does not exist [name: {target}]")));
        };
        if let Some(signed) = doer.as_mut() {
            signed.user = user.login.to_ascii_lowercase();
        }
    }
    Ok(doer)
}

/// What the forge says to any failed sign-in (`apiAuth`).
const AUTH_FAILED: &str = "invalid username, password or token";

fn token_doer(state: &State, value: &str) -> Result<Doer, Reply> {
    let token = state
        .tokens
        .iter()
        .find(|t| !value.is_empty() && t.value == value)
        .ok_or_else(|| error(state, StatusCode::UNAUTHORIZED, AUTH_FAILED))?;
    Ok(Doer { user: token.owner.clone(), via: Via::Token { scopes: token.scopes.clone() } })
}

fn basic_doer(state: &State, credential: &str) -> Result<Doer, Reply> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credential)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| error(state, StatusCode::UNAUTHORIZED, AUTH_FAILED))?;
    let (name, password) = decoded.split_once(':').unwrap_or((&decoded, ""));
    let user = state
        .user(name)
        .or_else(|| state.users.values().find(|u| u.email.eq_ignore_ascii_case(name)))
        .filter(|user| !user.is_org && user.password == password)
        .ok_or_else(|| error(state, StatusCode::UNAUTHORIZED, AUTH_FAILED))?;
    Ok(Doer { user: user.login.to_ascii_lowercase(), via: Via::Basic })
}

/// `tokenRequiresScopes`: a token must reach the route's category, at write level for
/// anything but GET; basic auth is not limited by scopes.
pub(super) fn require_scope(
    state: &State,
    request: &Request,
    doer: Option<&Doer>,
    category: &str,
) -> Result<(), Reply> {
    let Some(Doer { via: Via::Token { scopes }, .. }) = doer else {
        return Ok(());
    };
    let write = request.method != Method::GET;
    if super::rules::scopes_allow(scopes, category, write) {
        return Ok(());
    }
    let needed = format!("{}:{category}", if write { "write" } else { "read" });
    let message = format!("token does not have at least one of required scope(s): [{needed}]");
    Err(error(state, StatusCode::FORBIDDEN, &message))
}

/// `reqToken`: someone must be signed in.
pub(super) fn require_signed<'a>(state: &'a State, doer: Option<&Doer>) -> Result<&'a User, Reply> {
    doer.and_then(|d| state.user(&d.user)).ok_or_else(|| error(state, StatusCode::UNAUTHORIZED, "token is required"))
}

/// `APIError`: `{"message", "url"}`, `url` being the API document's address.
pub(super) fn error(state: &State, status: StatusCode, message: &str) -> Reply {
    json_reply(status, &json!({ "message": message, "url": format!("{}/api/swagger", state.base) }))
}

/// `APINotFound` as the forge writes it: `message`, `url` and `errors`.
pub(super) fn not_found(state: &State, message: &str, error: &str) -> Reply {
    let errors: Vec<&str> = if error.is_empty() { vec![] } else { vec![error] };
    json_reply(
        StatusCode::NOT_FOUND,
        &json!({ "message": message, "url": format!("{}/api/swagger", state.base), "errors": errors }),
    )
}

pub(super) fn json_reply(status: StatusCode, body: &Value) -> Reply {
    Reply {
        status,
        body: serde_json::to_vec(body).unwrap_or_default(),
        content_type: Some("application/json;charset=utf-8"),
        total_count: None,
    }
}

pub(super) fn empty(status: StatusCode) -> Reply {
    Reply { status, body: Vec::new(), content_type: None, total_count: None }
}

pub(super) fn plain(status: StatusCode, text: &str) -> Reply {
    Reply { status, body: text.as_bytes().to_vec(), content_type: Some("text/plain; charset=utf-8"), total_count: None }
}

fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
