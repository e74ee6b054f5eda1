//! [`Homeserver`]: any Matrix homeserver's client-server API, for what needs no administrator:
//! who an access token belongs to, and logging it out. [`super::SynapseClient`] builds on it;
//! the controller also uses it alone for accounts an operator links to an agent, which may live
//! on any homeserver.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::{ErrorBody, from_answer, shorten};
use super::{AccountCheck, MatrixError};
use crate::secret::Secret;

/// How long one call may take; a local homeserver answers in milliseconds, registration
/// (a password hash) in well under a second.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read: every answer used here is a small JSON object.
const MAX_BODY: usize = 64 * 1024;

const WHOAMI_PATH: &str = "/_matrix/client/v3/account/whoami";
const LOGOUT_PATH: &str = "/_matrix/client/v3/logout";

/// A homeserver reached at `base_url`.
#[derive(Debug, Clone)]
pub struct Homeserver {
    base_url: String,
    http: reqwest::Client,
}

impl Homeserver {
    /// A client for the homeserver at `base_url` (`http://` or `https://`, no query).
    ///
    /// # Errors
    /// [`MatrixError::InvalidInput`] for a malformed URL.
    pub fn new(base_url: &str) -> Result<Self, MatrixError> {
        let reject = |reason: String| Err(MatrixError::InvalidInput { what: "base URL", reason });
        let url = match reqwest::Url::parse(base_url) {
            Ok(url) => url,
            Err(err) => return reject(format!("{base_url:?} is not a URL: {err}")),
        };
        if !matches!(url.scheme(), "http" | "https") {
            return reject(format!("{base_url:?} is not http:// or https://"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return reject(format!("{:?} has credentials, a query or a fragment", url.origin().ascii_serialization()));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(MatrixError::HttpClient)?;
        Ok(Self { base_url: url.as_str().trim_end_matches('/').to_owned(), http })
    }

    /// The homeserver's URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whom `access_token` belongs to, if anyone.
    ///
    /// # Errors
    /// Only when there is no verdict: unreachable, rate limited, an unexpected answer.
    pub async fn whoami(&self, access_token: &Secret) -> Result<AccountCheck, MatrixError> {
        let request = self.request(Method::GET, WHOAMI_PATH).bearer_auth(access_token.expose());
        match self.send("whoami", request).await?.into_ok::<WhoamiBody>() {
            Ok(body) => Ok(AccountCheck::Valid { user_id: body.user_id }),
            Err(MatrixError::UnknownToken) => Ok(AccountCheck::Invalid),
            Err(MatrixError::Deactivated) => Ok(AccountCheck::Deactivated),
            Err(MatrixError::Locked) => Ok(AccountCheck::Locked),
            Err(other) => Err(other),
        }
    }

    /// Revokes `access_token`. A token the homeserver no longer knows counts as revoked.
    ///
    /// # Errors
    /// When the homeserver cannot be reached or refuses for another reason: the token may
    /// still work then.
    pub async fn logout(&self, access_token: &Secret) -> Result<(), MatrixError> {
        match self.logout_known(access_token).await {
            Ok(()) | Err(MatrixError::UnknownToken) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// Revokes `access_token`, which must still be valid.
    ///
    /// # Errors
    /// [`MatrixError::UnknownToken`] when the homeserver does not know it (already logged out,
    /// or never valid); otherwise as [`Homeserver::logout`].
    pub async fn logout_known(&self, access_token: &Secret) -> Result<(), MatrixError> {
        let request = self.request(Method::POST, LOGOUT_PATH).bearer_auth(access_token.expose()).json(&json!({}));
        self.send("logout", request).await?.into_ok::<serde_json::Value>().map(drop)
    }

    pub(super) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base_url))
    }

    /// Sends `request` and reads its answer (at most [`MAX_BODY`] bytes).
    pub(super) async fn send(&self, what: &'static str, request: RequestBuilder) -> Result<Answer, MatrixError> {
        let unreachable = |source| MatrixError::Unreachable { base_url: self.base_url.clone(), source };
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok());
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(MatrixError::UnexpectedResponse {
                    what,
                    status: status.as_u16(),
                    detail: format!("the answer is longer than {MAX_BODY} bytes"),
                });
            }
            body.extend_from_slice(&chunk);
        }
        tracing::debug!(what, status = status.as_u16(), "homeserver answered");
        Ok(Answer { what, status, body, retry_after })
    }
}

/// One answer, read in full.
pub(super) struct Answer {
    pub(super) what: &'static str,
    pub(super) status: StatusCode,
    body: Vec<u8>,
    /// `Retry-After` in seconds.
    retry_after: Option<u64>,
}

impl Answer {
    /// The success body as `T`, or the error the answer stands for.
    pub(super) fn into_ok<T: DeserializeOwned>(self) -> Result<T, MatrixError> {
        if !self.status.is_success() {
            return Err(self.into_error());
        }
        serde_json::from_slice(&self.body).map_err(|err| MatrixError::UnexpectedResponse {
            what: self.what,
            status: self.status.as_u16(),
            detail: shorten(&err.to_string()),
        })
    }

    pub(super) fn error_body(&self) -> ErrorBody {
        ErrorBody::parse(&self.body)
    }

    pub(super) fn into_error(self) -> MatrixError {
        from_answer(self.what, self.status.as_u16(), &self.error_body(), self.retry_after)
    }
}

#[derive(Deserialize)]
struct WhoamiBody {
    user_id: String,
}
