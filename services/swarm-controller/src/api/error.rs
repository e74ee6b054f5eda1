//! The API's one error type: every failure is JSON `{"error": "..."}` with a fitting status.

use hyperhive_swarm_api::error::ErrorBody;
use warp::Reply;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::definition::{InvalidRequest, ScheduleView};
use crate::schedules::store::StoreError;

/// A failed request; the message says what is wrong and, where it can, how to fix it.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the request is malformed or breaks a validation rule.
    BadRequest(String),
    /// 401: the request does not prove who sent it (a webhook delivery without a valid
    /// signature).
    Unauthorized(String),
    /// 403: the caller's role does not allow the route; says which role it needs.
    Forbidden(String),
    /// 404: no such schedule or route.
    NotFound(String),
    /// 405: the route exists, the method does not.
    MethodNotAllowed(String),
    /// 409: the schedule changed since the revision the client had; carries the current one.
    Conflict {
        /// What happened.
        message: String,
        /// The schedule as it is now, if it still exists.
        current: Option<Box<ScheduleView>>,
    },
    /// 413: the request body is larger than any valid request.
    PayloadTooLarge(String),
    /// 429: the client sent more requests than it may (through the control plane); retry
    /// after `retry_after` seconds.
    TooManyRequests {
        /// What happened.
        message: String,
        /// Seconds to wait, sent as `Retry-After`.
        retry_after: u64,
    },
    /// 415: the body is not declared as JSON.
    UnsupportedMediaType(String),
    /// 502: a server the request needed (a linked account's homeserver or forge) could not
    /// answer.
    BadGateway(String),
    /// 500: a stored document cannot be read (never caused by the request).
    Internal(String),
    /// 503: NATS is unreachable or failing.
    Unavailable(String),
    /// 503: the route needs a part this controller was started without (the secret store, the
    /// webhook secret). Not logged as an error: the daemon says so once when it starts, and a
    /// page that asks again is no fault.
    NotConfigured(String),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::BadGateway(_) => StatusCode::BAD_GATEWAY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable(_) | Self::NotConfigured(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON response.
    pub fn into_response(self) -> Response {
        let status = self.status();
        let (message, current) = match &self {
            Self::Conflict { message, current } => (message.as_str(), current.clone()),
            Self::TooManyRequests { message, .. } => (message.as_str(), None),
            Self::BadRequest(m)
            | Self::Unauthorized(m)
            | Self::Forbidden(m)
            | Self::NotFound(m)
            | Self::MethodNotAllowed(m)
            | Self::PayloadTooLarge(m)
            | Self::UnsupportedMediaType(m)
            | Self::BadGateway(m)
            | Self::Internal(m)
            | Self::Unavailable(m)
            | Self::NotConfigured(m) => (m.as_str(), None),
        };
        if status.is_server_error() && !matches!(self, Self::NotConfigured(_)) {
            tracing::error!(%status, error = message, "request failed");
        }
        let body = ErrorBody { error: message.to_owned(), current };
        let mut response = warp::reply::with_status(warp::reply::json(&body), status).into_response();
        if let Self::TooManyRequests { retry_after, .. } = &self {
            response.headers_mut().insert(warp::http::header::RETRY_AFTER, (*retry_after).into());
        }
        response
    }
}

impl From<InvalidRequest> for ApiError {
    fn from(err: InvalidRequest) -> Self {
        Self::BadRequest(err.0)
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict { .. } => Self::Conflict { message: err.to_string(), current: None },
            StoreError::Nats(_) => Self::Unavailable(crate::nats::what_to_do(&err.to_string())),
            StoreError::Unreadable { .. } => Self::Internal(err.to_string()),
        }
    }
}
