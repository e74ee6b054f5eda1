//! The HTTP API.
//!
//! One catch-all warp filter hands method, path, headers and body to [`App::handle`], which
//! checks the bearer token and routes by hand, so every outcome (unknown routes, wrong methods,
//! oversized or non-JSON bodies) gets the same JSON error shape from [`ApiError`].
//!
//! | route | does |
//! |---|---|
//! | `GET /healthz` | 200 `{"status": "ok"}`; no token needed |
//! | `GET /v1/users/{name}` | the user without its hash, or 404 |
//! | `PUT /v1/users/{name}` | create (201) or change a managed user (200); 409 for any other |
//! | `POST /v1/users/{name}/verify-password` | `{"matches": bool}` for a managed user |
//! | `DELETE /v1/users/{name}` | remove a managed user (204); 404 unknown, 409 unmanaged |

mod error;
mod users;

use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::Stream;
use hyperhive_json_body::BodyError;
use warp::Filter;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;

pub use error::ApiError;

use crate::password::Hasher;
use crate::token::BearerToken;
use crate::users_file::UsersFile;

/// The largest request body read: a 1024-character password written with JSON escapes (six bytes
/// per character at worst) and the other fields fit well below it.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    /// The token every `/v1` request must carry.
    pub token: BearerToken,
    /// The users file.
    pub users: UsersFile,
    /// The group that marks the users this service made, and the only ones it changes.
    pub managed_group: String,
    /// Password hashing.
    pub hasher: Hasher,
}

/// The warp filter serving every route.
pub fn routes(
    app: Arc<App>,
) -> impl Filter<Extract = (Response,), Error = warp::Rejection> + Clone + Send + Sync + 'static {
    warp::method().and(warp::path::full()).and(warp::header::headers_cloned()).and(warp::body::stream()).then(
        move |method: Method, path: warp::path::FullPath, headers: HeaderMap, body| {
            let app = app.clone();
            async move {
                let outcome = app.handle(&method, path.as_str(), &headers, body).await;
                outcome.unwrap_or_else(ApiError::into_response)
            }
        },
    )
}

impl App {
    async fn handle<S, B>(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        body: S,
    ) -> Result<Response, ApiError>
    where
        S: Stream<Item = Result<B, warp::Error>> + Send,
        B: Buf,
    {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if segments == ["healthz"] {
            return if method == Method::GET {
                Ok(json(StatusCode::OK, &serde_json::json!({"status": "ok"})))
            } else {
                Err(not_allowed(method, path, "GET"))
            };
        }
        // Everything else needs the token, before anything about the route is told.
        if !self.token.admits(headers.get(warp::http::header::AUTHORIZATION).map(|v| v.as_bytes())) {
            return Err(ApiError::Unauthorized);
        }
        match (segments.as_slice(), method) {
            (["v1", "users", name], &Method::GET) => self.get_user(name).await,
            (["v1", "users", name], &Method::PUT) => {
                let body = json_body(headers, body).await?;
                self.put_user(name, &body).await
            }
            (["v1", "users", name], &Method::DELETE) => self.delete_user(name).await,
            (["v1", "users", name, "verify-password"], &Method::POST) => {
                let body = json_body(headers, body).await?;
                self.verify_password(name, &body).await
            }
            (["v1", "users", _], _) => Err(not_allowed(method, path, "GET, PUT, DELETE")),
            (["v1", "users", _, "verify-password"], _) => Err(not_allowed(method, path, "POST")),
            _ => Err(ApiError::NoRoute(format!(
                "no route {method} {path}; the bridge serves /healthz, /v1/users/{{name}} and \
                 /v1/users/{{name}}/verify-password"
            ))),
        }
    }
}

fn not_allowed(method: &Method, path: &str, allowed: &str) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not allowed on {path}; use {allowed}"))
}

/// A JSON response with `status`.
fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    use warp::Reply;
    warp::reply::with_status(warp::reply::json(value), status).into_response()
}

/// The request body, provided it is declared as JSON and no larger than [`MAX_REQUEST_BYTES`].
async fn json_body<S, B>(headers: &HeaderMap, body: S) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    hyperhive_json_body::json_body(headers, body, MAX_REQUEST_BYTES).await.map_err(|e| match e {
        BodyError::NotJson(_) => ApiError::UnsupportedMediaType(e.to_string()),
        BodyError::TooLarge { .. } => ApiError::PayloadTooLarge(format!("{e}")),
        BodyError::Read(_) => ApiError::BadRequest(e.to_string()),
    })
}
