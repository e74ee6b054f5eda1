//! [`SynapseClient`]: the [`Matrix`] adapter for Synapse, over its client-server API (v3), its
//! shared-secret registration and its admin API (users v2).

use async_trait::async_trait;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::homeserver::{Answer, Homeserver};
use super::names::{check_displayname, check_localpart, check_password, check_user_id};
use super::registration_mac::registration_mac;
use super::{AccountCheck, AdminAccountState, Matrix, MatrixError, Registered, Session};
use crate::secret::Secret;

const REGISTER_PATH: &str = "/_synapse/admin/v1/register";
const LOGIN_PATH: &str = "/_matrix/client/v3/login";
/// Followed by the URL-encoded user id.
const ADMIN_USERS_PATH: &str = "/_synapse/admin/v2/users/";

/// A Synapse homeserver, reached at `base_url`, registering accounts with its
/// `registration_shared_secret`.
#[derive(Debug, Clone)]
pub struct SynapseClient {
    homeserver: Homeserver,
    shared_secret: Secret,
}

impl SynapseClient {
    /// A client for the homeserver at `base_url` (`http://` or `https://`, no query).
    ///
    /// # Errors
    /// [`MatrixError::InvalidInput`] for a malformed URL or an empty shared secret.
    pub fn new(base_url: &str, shared_secret: Secret) -> Result<Self, MatrixError> {
        let homeserver = Homeserver::new(base_url)?;
        if shared_secret.expose().is_empty() {
            return Err(MatrixError::InvalidInput { what: "shared secret", reason: "it is empty".to_owned() });
        }
        Ok(Self { homeserver, shared_secret })
    }

    /// The homeserver's URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        self.homeserver.base_url()
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.homeserver.request(method, path)
    }

    async fn send(&self, what: &'static str, request: RequestBuilder) -> Result<Answer, MatrixError> {
        self.homeserver.send(what, request).await
    }

    /// A request to the admin API's record of `user_id`, as the admin `admin_token`.
    fn admin_user_request(&self, method: Method, admin_token: &Secret, user_id: &str) -> RequestBuilder {
        self.request(method, &format!("{ADMIN_USERS_PATH}{}", encode_path_segment(user_id)))
            .bearer_auth(admin_token.expose())
    }

    /// Shared-secret registration, as a server admin when `admin`.
    async fn register_as(
        &self,
        localpart: &str,
        password: &Secret,
        displayname: Option<&str>,
        admin: bool,
    ) -> Result<Registered, MatrixError> {
        check_localpart(localpart)?;
        check_password(password)?;
        if let Some(displayname) = displayname {
            check_displayname(displayname)?;
        }
        // A nonce is good for one registration attempt, whatever its outcome.
        let nonce: NonceBody =
            self.send("register (nonce)", self.request(Method::GET, REGISTER_PATH)).await?.into_ok()?;
        let mut body = json!({
            "nonce": nonce.nonce,
            "username": localpart,
            "password": password.expose(),
            "admin": admin,
            "mac": registration_mac(&self.shared_secret, &nonce.nonce, localpart, password, admin),
        });
        if let Some(displayname) = displayname {
            body["displayname"] = json!(displayname);
        }
        let answer = self.send("register", self.request(Method::POST, REGISTER_PATH).json(&body)).await?;
        if answer.status.is_success() {
            return answer.into_ok::<SessionBody>().map(Session::from);
        }
        let error = answer.error_body();
        if error.errcode() == "M_USER_IN_USE" {
            return Err(MatrixError::AlreadyExists { localpart: localpart.to_owned() });
        }
        // Synapse answers a wrong MAC with 403 "HMAC incorrect"; a 403 without that text is
        // someone else's (e.g. a proxy closing /_synapse/admin) and is reported as it is.
        if answer.status == StatusCode::FORBIDDEN && error.message().contains("HMAC") {
            return Err(MatrixError::SharedSecretRejected);
        }
        Err(answer.into_error())
    }
}

/// The answer to registration and login (other fields, e.g. `home_server`, are ignored).
#[derive(Deserialize)]
struct SessionBody {
    user_id: String,
    access_token: String,
    device_id: String,
}

impl From<SessionBody> for Session {
    fn from(body: SessionBody) -> Self {
        Self { user_id: body.user_id, access_token: Secret::new(body.access_token), device_id: body.device_id }
    }
}

#[derive(Deserialize)]
struct NonceBody {
    nonce: String,
}

/// The admin API's record of a user (only the fields used; Synapses older than account locking
/// leave out `locked`).
#[derive(Deserialize)]
struct AdminUserBody {
    deactivated: bool,
    #[serde(default)]
    locked: bool,
}

/// `text` with every byte but RFC 3986's unreserved characters percent-encoded: a user id may
/// hold `/`, `?`, `#` or `%`, which would otherwise change the path.
fn encode_path_segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[async_trait]
impl Matrix for SynapseClient {
    async fn register(
        &self,
        localpart: &str,
        password: &Secret,
        displayname: Option<&str>,
    ) -> Result<Registered, MatrixError> {
        self.register_as(localpart, password, displayname, false).await
    }

    async fn login(&self, localpart: &str, password: &Secret) -> Result<Session, MatrixError> {
        check_localpart(localpart)?;
        check_password(password)?;
        let body = json!({
            "type": "m.login.password",
            "identifier": { "type": "m.id.user", "user": localpart },
            "password": password.expose(),
        });
        let answer = self.send("login", self.request(Method::POST, LOGIN_PATH).json(&body)).await?;
        answer.into_ok::<SessionBody>().map(Session::from)
    }

    async fn whoami(&self, access_token: &Secret) -> Result<AccountCheck, MatrixError> {
        self.homeserver.whoami(access_token).await
    }

    async fn logout(&self, access_token: &Secret) -> Result<(), MatrixError> {
        self.homeserver.logout(access_token).await
    }

    async fn admin_session(&self, localpart: &str, password: &Secret) -> Result<Session, MatrixError> {
        match self.register_as(localpart, password, None, true).await {
            Err(MatrixError::AlreadyExists { .. }) => {}
            registered => return registered,
        }
        // Taken: ours if the password logs in, usable if the admin API accepts the session (an
        // account registered before as a plain user answers Forbidden there).
        let session = self.login(localpart, password).await?;
        match self.account_state(&session.access_token, &session.user_id).await {
            Ok(_) => Ok(session),
            Err(err) => {
                // The refusal is what the caller needs; a device left behind on a failed
                // logout is harmless, as the account is ours.
                if let Err(logout) = self.logout(&session.access_token).await {
                    tracing::warn!(error = %logout, "logging out a session that is not an admin's failed");
                }
                Err(err)
            }
        }
    }

    async fn account_state(&self, admin_token: &Secret, user_id: &str) -> Result<AdminAccountState, MatrixError> {
        check_user_id(user_id)?;
        let answer = self.send("account state", self.admin_user_request(Method::GET, admin_token, user_id)).await?;
        // Only Synapse's own 404 means "no such account": a proxy that does not forward
        // /_synapse/admin answers 404 too, without M_NOT_FOUND.
        if answer.status == StatusCode::NOT_FOUND && answer.error_body().errcode() == "M_NOT_FOUND" {
            return Ok(AdminAccountState::NotFound);
        }
        let user: AdminUserBody = answer.into_ok()?;
        Ok(AdminAccountState::Exists { deactivated: user.deactivated, locked: user.locked })
    }

    async fn reactivate(&self, admin_token: &Secret, user_id: &str, password: &Secret) -> Result<(), MatrixError> {
        check_user_id(user_id)?;
        check_password(password)?;
        // A PUT for a user id that does not exist creates the account: looking first keeps this a
        // repair. Synapse never deletes an account, so it cannot vanish in between.
        let AdminAccountState::Exists { locked, .. } = self.account_state(admin_token, user_id).await? else {
            return Err(MatrixError::NotFound { user_id: user_id.to_owned() });
        };
        // Deactivation deleted the password, so one is set; the account's other devices (none
        // after a deactivation, all of them after a lock) stay logged in.
        let mut body = json!({ "deactivated": false, "password": password.expose(), "logout_devices": false });
        if locked {
            body["locked"] = json!(false);
        }
        let request = self.admin_user_request(Method::PUT, admin_token, user_id).json(&body);
        let answer = self.send("reactivate", request).await?;
        let status = answer.status.as_u16();
        let user: AdminUserBody = answer.into_ok()?;
        if user.deactivated || user.locked {
            return Err(MatrixError::UnexpectedResponse {
                what: "reactivate",
                status,
                detail: "the homeserver accepted the change but the account is still deactivated or locked".to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_encoded_as_one_path_segment() {
        assert_eq!(encode_path_segment("@agent-a:matrix.example"), "%40agent-a%3Amatrix.example");
        assert_eq!(encode_path_segment("@a/b?c#d%:x"), "%40a%2Fb%3Fc%23d%25%3Ax");
    }
}
