//! The one error shape: JSON `{"error": "..."}` with a fitting status. Messages say what is
//! wrong and how to fix it; none holds a token, a password or a hash.

use warp::Reply;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::input::Invalid;
use crate::users_file::FileError;

/// A failed request.
#[derive(Debug)]
pub enum ApiError {
    /// 400: malformed body or a value that breaks a rule.
    BadRequest(String),
    /// 401: no bearer token, or the wrong one.
    Unauthorized,
    /// 404: no such user or route.
    NotFound(String),
    /// 405: the route exists, the method does not.
    MethodNotAllowed(String),
    /// 409: the user exists but is not managed by this service.
    Conflict(String),
    /// 413: the body is larger than any valid request.
    PayloadTooLarge(String),
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType(String),
    /// 500: hashing failed (never expected).
    Internal(String),
    /// 503: the users file cannot be read, parsed or replaced now.
    Unavailable(String),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON response.
    pub fn into_response(self) -> Response {
        let status = self.status();
        let message = match self {
            Self::Unauthorized => {
                "missing or wrong bearer token: send Authorization: Bearer <the token in the bridge's token file>"
                    .to_owned()
            }
            Self::BadRequest(m)
            | Self::NotFound(m)
            | Self::MethodNotAllowed(m)
            | Self::Conflict(m)
            | Self::PayloadTooLarge(m)
            | Self::UnsupportedMediaType(m)
            | Self::Internal(m)
            | Self::Unavailable(m) => m,
        };
        if status.is_server_error() {
            tracing::error!(%status, error = %message, "request failed");
        }
        let reply = warp::reply::with_status(warp::reply::json(&serde_json::json!({ "error": message })), status);
        if status == StatusCode::UNAUTHORIZED {
            warp::reply::with_header(reply, "www-authenticate", "Bearer").into_response()
        } else {
            reply.into_response()
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(err: Invalid) -> Self {
        Self::BadRequest(err.0)
    }
}

impl From<FileError> for ApiError {
    fn from(err: FileError) -> Self {
        Self::Unavailable(err.to_string())
    }
}
