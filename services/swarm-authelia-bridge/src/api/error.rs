//! The one error shape: JSON `{"code": "...", "error": "..."}` with a fitting status. The code is
//! stable and machine-readable (a client tells "no such user" from "no such route" by it); the
//! message says what is wrong and how to fix it. None holds a token, a password or a hash.

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
    /// 404: no such user.
    UnknownUser(String),
    /// 404: no such route.
    NoRoute(String),
    /// 405: the route exists, the method does not.
    MethodNotAllowed(String),
    /// 409: the user exists but is not managed by this service.
    Unmanaged(String),
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
            Self::UnknownUser(_) | Self::NoRoute(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Unmanaged(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The stable name of the kind of error, sent as `code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::UnknownUser(_) => "unknown_user",
            Self::NoRoute(_) => "no_route",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::Unmanaged(_) => "unmanaged_user",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::Internal(_) => "internal",
            Self::Unavailable(_) => "users_file_unavailable",
        }
    }

    /// The JSON response.
    pub fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let message = match self {
            Self::Unauthorized => {
                "missing or wrong bearer token: send Authorization: Bearer <the token in the bridge's token file>"
                    .to_owned()
            }
            Self::BadRequest(m)
            | Self::UnknownUser(m)
            | Self::NoRoute(m)
            | Self::MethodNotAllowed(m)
            | Self::Unmanaged(m)
            | Self::PayloadTooLarge(m)
            | Self::UnsupportedMediaType(m)
            | Self::Internal(m)
            | Self::Unavailable(m) => m,
        };
        if status.is_server_error() {
            tracing::error!(%status, error = %message, "request failed");
        }
        let reply =
            warp::reply::with_status(warp::reply::json(&serde_json::json!({ "code": code, "error": message })), status);
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
