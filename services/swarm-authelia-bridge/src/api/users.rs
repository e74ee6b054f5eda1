//! `/v1/users/{name}` and `/v1/users/{name}/verify-password`.

use serde::Deserialize;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{ApiError, App, json};
use crate::database::{NewFields, Refused, Upserted};
use crate::input::{self, MAX_GROUPS, UserName};

/// A password from a request: never shown by `Debug`.
#[derive(Deserialize)]
#[serde(transparent)]
struct Password(String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// The body of `PUT /v1/users/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutUser {
    displayname: String,
    email: String,
    #[serde(default)]
    groups: Vec<String>,
    password: Password,
}

/// The body of `POST /v1/users/{name}/verify-password`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyPassword {
    password: Password,
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the body is not {shape}: {e}")))
}

const PUT_SHAPE: &str = r#"{"displayname": "...", "email": "...", "groups": ["..."], "password": "..."}"#;
const VERIFY_SHAPE: &str = r#"{"password": "..."}"#;

impl App {
    fn unmanaged(&self, name: &UserName, doing: &str) -> ApiError {
        ApiError::Unmanaged(format!(
            "user {name} exists but is not in the group {group}, so the bridge did not make it and will not {doing} it; \
             pick another name, or add the group to the user in the users file if it should be managed here",
            group = self.managed_group
        ))
    }

    fn unknown(name: &UserName) -> ApiError {
        ApiError::UnknownUser(format!("no user {name} in the users file"))
    }

    pub(super) async fn get_user(&self, name: &str) -> Result<Response, ApiError> {
        let name = UserName::parse(name)?;
        let database = self.users.read().await?;
        let view = database
            .user(&name, &self.managed_group)
            .map_err(|problem| {
                ApiError::Unavailable(format!("the users file {}: {problem}", self.users.path().display()))
            })?
            .ok_or_else(|| Self::unknown(&name))?;
        Ok(json(StatusCode::OK, &view))
    }

    pub(super) async fn put_user(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let name = UserName::parse(name)?;
        let request: PutUser = parse_body(body, PUT_SHAPE)?;
        input::displayname(&request.displayname)?;
        input::email(&request.email)?;
        input::password(&request.password.0)?;
        let mut groups: Vec<String> = Vec::new();
        for group in request.groups.iter().chain(std::iter::once(&self.managed_group)) {
            input::group(group)?;
            if !groups.contains(group) {
                groups.push(group.clone());
            }
        }
        if groups.len() > MAX_GROUPS {
            return Err(ApiError::BadRequest(format!("more than {MAX_GROUPS} groups; give fewer")));
        }
        // Refuse an unmanaged user before paying for a hash (the check is made again under the
        // write lock below, which is the one that counts). A managed user that already has this
        // password keeps its hash, so repeating a PUT rewrites nothing and Authelia reloads
        // nothing.
        let kept_hash = match self.users.read().await?.managed_hash(&name, &self.managed_group) {
            Err(Refused::Unmanaged) => return Err(self.unmanaged(&name, "change")),
            Err(Refused::Unknown) | Ok(None) => None,
            Ok(Some(stored)) => {
                let matches = self.hasher.verify(request.password.0.clone(), stored.clone()).await;
                matches.then_some(stored)
            }
        };
        let password_hash = match kept_hash {
            Some(stored) => stored,
            None => self.hasher.hash(request.password.0).await.map_err(|e| ApiError::Internal(e.to_string()))?,
        };
        let fields = NewFields { displayname: request.displayname, email: request.email, groups, password_hash };
        let managed_group = self.managed_group.clone();
        let upserted = self
            .users
            .update(|database| match database.upsert(&name, &managed_group, fields) {
                Ok(upserted) => Ok((upserted, upserted != Upserted::Unchanged)),
                Err(_) => Err(self.unmanaged(&name, "change")),
            })
            .await?;
        let (status, verb) = match upserted {
            Upserted::Created => (StatusCode::CREATED, "created"),
            Upserted::Updated => (StatusCode::OK, "updated"),
            Upserted::Unchanged => (StatusCode::OK, "unchanged"),
        };
        tracing::info!(user = %name, "{verb}");
        self.get_user(name.as_str()).await.map(|mut response| {
            *response.status_mut() = status;
            response
        })
    }

    pub(super) async fn verify_password(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let name = UserName::parse(name)?;
        let request: VerifyPassword = parse_body(body, VERIFY_SHAPE)?;
        let stored = match self.users.read().await?.managed_hash(&name, &self.managed_group) {
            Ok(stored) => stored,
            Err(Refused::Unknown) => return Err(Self::unknown(&name)),
            Err(Refused::Unmanaged) => return Err(self.unmanaged(&name, "check the password of")),
        };
        let matches = match stored {
            Some(stored) => self.hasher.verify(request.password.0, stored).await,
            None => false,
        };
        Ok(json(StatusCode::OK, &serde_json::json!({ "matches": matches })))
    }

    pub(super) async fn delete_user(&self, name: &str) -> Result<Response, ApiError> {
        let name = UserName::parse(name)?;
        let managed_group = self.managed_group.clone();
        self.users
            .update(|database| match database.remove(&name, &managed_group) {
                Ok(()) => Ok(((), true)),
                Err(Refused::Unknown) => Err(Self::unknown(&name)),
                Err(Refused::Unmanaged) => Err(self.unmanaged(&name, "delete")),
            })
            .await?;
        tracing::info!(user = %name, "deleted");
        use warp::Reply;
        Ok(warp::reply::with_status(warp::reply(), StatusCode::NO_CONTENT).into_response())
    }
}
