//! [`ForgejoClient`]: [`Forge`] over the Forgejo/Gitea v1 REST API.
//!
//! Each call authenticates the way the forge's route for it requires:
//! - the **admin token** (`Authorization: token <t>`) to look up and create users and to look
//!   up and generate repositories; its owner must be a site administrator (the admin routes
//!   answer 403 otherwise, and only an administrator may generate a repository for another
//!   user), and the token needs the scopes `write:admin`, `read:user` and `write:repository`
//!   (or `all`);
//! - **basic auth as the agent's user** for that user's tokens: the token routes accept nothing
//!   else (401 "auth required"), and a user may only touch their own (403);
//! - **the agent's token** to check it (`GET /user`, which needs its `read:user` scope).
//!
//! The `Sudo` header (an administrator acting as another user) is never sent: acting through the
//! admin token would prove nothing about the user's password.
//!
//! A name that is not in the forge's format fails before any request (see [`super::names`]),
//! and every path segment is percent-encoded by [`Url`]. Errors name the call, the status and
//! the forge's `message`, with every secret of the call scrubbed out.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::names;
use super::types::{ForgeUser, NewForgeUser, Repo, TokenCheck};
use super::wire;
use super::{Forge, ForgeError};
use crate::secret::Secret;

/// How long one call may take, connection included, unless [`ForgejoClient::with_timeout`]
/// says otherwise. Generating a repository copies its git content, the slowest call here.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Items asked for per page. The forge cuts a larger `limit` to its `MAX_RESPONSE_ITEMS`
/// (50 unless configured), so a smaller page may come back; paging goes by what came back.
const PAGE_LIMIT: usize = 50;
/// Pages read at most of one list: 5000 items (tokens of a user, repositories of the swarm's
/// organisation, pull requests of a config repository) is far beyond what the swarm holds; the
/// bound stops a forge that never answers an empty page.
const MAX_PAGES: usize = 100;
/// Characters of an error body kept in an error (an HTML page from a proxy, say).
const MAX_MESSAGE: usize = 300;
/// Redirects followed: the forge redirects a renamed user or repository to its new name.
const MAX_REDIRECTS: usize = 5;

/// The forge's v1 API, reached with an admin token.
#[derive(Debug, Clone)]
pub struct ForgejoClient {
    /// `<base>/api/v1/`.
    api: Url,
    admin_token: Secret,
    http: reqwest::Client,
}

/// Who a request is sent as.
pub(super) enum Auth<'a> {
    Admin,
    Basic { user: &'a str, password: &'a Secret },
    Token(&'a Secret),
}

/// An HTTP answer, read whole.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    body: Vec<u8>,
    /// `X-Total-Count`, which the forge sets on lists.
    total_count: Option<usize>,
}

/// One call: what it is (for errors) and the secrets its errors must never contain.
pub(super) struct Call<'a> {
    what: String,
    secrets: Vec<&'a str>,
}

impl ForgejoClient {
    /// A client for the forge at `base_url` (`https://forge.example`, or with `/api/v1`).
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when the URL is not a plain http(s) URL (user info, a query or a
    /// fragment are refused) or the token is empty or not printable ASCII.
    pub fn new(base_url: &str, admin_token: Secret) -> Result<Self, ForgeError> {
        Self::with_timeout(base_url, admin_token, DEFAULT_TIMEOUT)
    }

    /// A client acting with `token` alone, no administrator: for [`Forge::check_token`] on any
    /// forge (an account an operator links to an agent). Calls that need an administrator
    /// are refused by the forge.
    ///
    /// # Errors
    /// As [`ForgejoClient::new`].
    pub fn as_user(base_url: &str, token: Secret) -> Result<Self, ForgeError> {
        Self::with_timeout(base_url, token, DEFAULT_TIMEOUT)
    }

    /// As [`ForgejoClient::new`], with `timeout` for each call.
    pub fn with_timeout(base_url: &str, admin_token: Secret, timeout: Duration) -> Result<Self, ForgeError> {
        let call = Call { what: "client setup".into(), secrets: vec![admin_token.expose()] };
        let api = api_url(base_url).map_err(|reason| call.invalid(reason))?;
        check_token_format("admin token", &admin_token).map_err(|reason| call.invalid(reason))?;
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .user_agent(concat!("hyperhive-provision/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| call.invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self { api, admin_token, http })
    }

    /// The API's root, `<base>/api/v1/`.
    pub fn api_url(&self) -> &Url {
        &self.api
    }

    pub(super) fn call<'a>(&'a self, what: String, secrets: &[&'a Secret]) -> Call<'a> {
        let mut all = vec![self.admin_token.expose()];
        all.extend(secrets.iter().map(|s| s.expose()));
        Call { what, secrets: all }
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.api.clone();
        // The constructor proved the URL has a path (http and https URLs always do).
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    pub(super) async fn send<B: Serialize + ?Sized>(
        &self,
        call: &Call<'_>,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        auth: Auth<'_>,
        body: Option<&B>,
    ) -> Result<Answer, ForgeError> {
        let mut request = self.http.request(method, self.url(segments));
        if !query.is_empty() {
            request = request.query(query);
        }
        request = match auth {
            Auth::Admin => request.header(AUTHORIZATION, token_header(&self.admin_token)),
            Auth::Basic { user, password } => request.basic_auth(user, Some(password.expose())),
            Auth::Token(token) => request.header(AUTHORIZATION, token_header(token)),
        };
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| call.unreachable(&e))?;
        let status = response.status();
        let total_count = response
            .headers()
            .get("x-total-count")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok());
        let body = response.bytes().await.map_err(|e| call.unreachable(&e))?.to_vec();
        Ok(Answer { status, body, total_count })
    }

    pub(super) async fn get(&self, call: &Call<'_>, segments: &[&str], auth: Auth<'_>) -> Result<Answer, ForgeError> {
        self.send::<()>(call, Method::GET, segments, &[], auth, None).await
    }

    /// Every item of a list route, page by page (`page`, `limit`, and `query` besides): it ends
    /// at an empty page, a short one, or when `X-Total-Count` items came; at most [`MAX_PAGES`].
    pub(super) async fn list_all<'a, T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        segments: &[&str],
        query: &[(&str, String)],
        auth: impl Fn() -> Auth<'a>,
    ) -> Result<Vec<T>, ForgeError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut paged = vec![("page", page.to_string()), ("limit", PAGE_LIMIT.to_string())];
            paged.extend(query.iter().cloned());
            let answer = self.send::<()>(call, Method::GET, segments, &paged, auth(), None).await?;
            if answer.status != StatusCode::OK {
                return Err(call.refused(&answer));
            }
            let items: Vec<T> = call.decode(&answer)?;
            if items.is_empty() {
                return Ok(all);
            }
            all.extend(items);
            if answer.total_count.is_some_and(|total| all.len() >= total) {
                return Ok(all);
            }
        }
        Err(call.bad_answer(format!("the list did not end within {MAX_PAGES} pages")))
    }
}

#[async_trait]
impl Forge for ForgejoClient {
    async fn user(&self, name: &str) -> Result<Option<ForgeUser>, ForgeError> {
        let call = self.call(format!("look up user {name:?}"), &[]);
        call.check(names::check_user_name(name))?;
        let answer = self.get(&call, &["users", name], Auth::Admin).await?;
        match answer.status {
            StatusCode::OK => {
                let user: wire::User = call.decode(&answer)?;
                // A redirect from a renamed user's old name: the name itself is free.
                Ok(user.login.eq_ignore_ascii_case(name).then(|| user.into()))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn create_user(&self, user: &NewForgeUser, password: &Secret) -> Result<ForgeUser, ForgeError> {
        let call = self.call(format!("create user {:?}", user.username), &[password]);
        call.check(names::check_user_name(&user.username))?;
        call.check(names::check_email(&user.email))?;
        call.check(names::check_full_name(&user.full_name))?;
        call.check(names::check_password(password.expose()))?;
        let body = wire::CreateUserOption {
            username: &user.username,
            email: &user.email,
            full_name: &user.full_name,
            password: password.expose(),
            must_change_password: false,
            send_notify: false,
            visibility: user.visibility,
        };
        let answer = self.send(&call, Method::POST, &["admin", "users"], &[], Auth::Admin, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        let created: wire::User = call.decode(&answer)?;
        if !created.login.eq_ignore_ascii_case(&user.username) {
            return Err(call.bad_answer(format!("the forge created {:?}", created.login)));
        }
        Ok(created.into())
    }

    async fn delete_user(&self, name: &str) -> Result<(), ForgeError> {
        let call = self.call(format!("delete user {name:?}"), &[]);
        call.check(names::check_user_name(name))?;
        let answer = self.send::<()>(&call, Method::DELETE, &["admin", "users", name], &[], Auth::Admin, None).await?;
        match answer.status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn password_works(&self, name: &str, password: &Secret) -> Result<bool, ForgeError> {
        let call = self.call(format!("check the password of user {name:?}"), &[password]);
        call.check(names::check_user_name(name))?;
        call.check(names::check_password(password.expose()))?;
        let answer = self.get(&call, &["user"], Auth::Basic { user: name, password }).await?;
        match answer.status {
            StatusCode::OK => {
                let user: wire::User = call.decode(&answer)?;
                if !user.login.eq_ignore_ascii_case(name) {
                    return Err(call.bad_answer(format!("the password signed in {:?}", user.login)));
                }
                Ok(true)
            }
            StatusCode::UNAUTHORIZED => Ok(false),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn repo(&self, owner: &str, name: &str) -> Result<Option<Repo>, ForgeError> {
        let call = self.call(format!("look up repository {owner}/{name}"), &[]);
        call.check(names::check_user_name(owner))?;
        call.check(names::check_repo_name(name))?;
        let answer = self.get(&call, &["repos", owner, name], Auth::Admin).await?;
        match answer.status {
            StatusCode::OK => {
                let repo: wire::Repository = call.decode(&answer)?;
                // A redirect from a renamed repository's old name: the name itself is free.
                let same = repo.owner.login.eq_ignore_ascii_case(owner) && repo.name.eq_ignore_ascii_case(name);
                Ok(same.then(|| repo.into()))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn generate_repo(
        &self,
        template_owner: &str,
        template: &str,
        owner: &str,
        name: &str,
        private: bool,
    ) -> Result<Repo, ForgeError> {
        let call = self.call(format!("generate repository {owner}/{name} from {template_owner}/{template}"), &[]);
        call.check(names::check_user_name(template_owner))?;
        call.check(names::check_repo_name(template))?;
        call.check(names::check_user_name(owner))?;
        call.check(names::check_repo_name(name))?;
        let body = wire::GenerateRepoOption { owner, name, private, git_content: true };
        let answer = self
            .send(&call, Method::POST, &["repos", template_owner, template, "generate"], &[], Auth::Admin, Some(&body))
            .await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        let repo: wire::Repository = call.decode(&answer)?;
        if !(repo.owner.login.eq_ignore_ascii_case(owner) && repo.name.eq_ignore_ascii_case(name)) {
            return Err(call.bad_answer(format!("the forge generated {}/{}", repo.owner.login, repo.name)));
        }
        Ok(repo.into())
    }

    async fn mint_token(
        &self,
        user: &str,
        password: &Secret,
        token_name: &str,
        scopes: &[&str],
    ) -> Result<Secret, ForgeError> {
        let call = self.call(format!("mint token {token_name:?} for user {user:?}"), &[password]);
        call.check(names::check_user_name(user))?;
        call.check(names::check_password(password.expose()))?;
        call.check(names::check_token_name(token_name))?;
        call.check(names::check_scopes(scopes))?;
        let body = wire::CreateAccessTokenOption { name: token_name, scopes };
        let auth = Auth::Basic { user, password };
        let answer = self.send(&call, Method::POST, &["users", user, "tokens"], &[], auth, Some(&body)).await?;
        if answer.status != StatusCode::CREATED {
            return Err(call.refused(&answer));
        }
        let token: wire::AccessToken = call.decode(&answer)?;
        if token.sha1.is_empty() {
            return Err(call.bad_answer("the answer holds no token value (`sha1`)".into()));
        }
        if token.name != token_name {
            return Err(call.bad_answer(format!("the forge minted a token called {:?}", token.name)));
        }
        Ok(Secret::new(token.sha1))
    }

    async fn token_names(&self, user: &str, password: &Secret) -> Result<Vec<String>, ForgeError> {
        let call = self.call(format!("list the tokens of user {user:?}"), &[password]);
        call.check(names::check_user_name(user))?;
        call.check(names::check_password(password.expose()))?;
        let tokens: Vec<wire::AccessToken> =
            self.list_all(&call, &["users", user, "tokens"], &[], || Auth::Basic { user, password }).await?;
        Ok(tokens.into_iter().map(|token| token.name).collect())
    }

    async fn delete_token(&self, user: &str, password: &Secret, token_name: &str) -> Result<(), ForgeError> {
        let call = self.call(format!("delete token {token_name:?} of user {user:?}"), &[password]);
        call.check(names::check_user_name(user))?;
        call.check(names::check_password(password.expose()))?;
        call.check(names::check_token_name(token_name))?;
        let auth = Auth::Basic { user, password };
        let answer =
            self.send::<()>(&call, Method::DELETE, &["users", user, "tokens", token_name], &[], auth, None).await?;
        match answer.status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(call.refused(&answer)),
        }
    }

    async fn check_token(&self, token: &Secret) -> Result<TokenCheck, ForgeError> {
        let call = self.call("check a token".into(), &[token]);
        call.check(check_token_format("token", token))?;
        let answer = self.get(&call, &["user"], Auth::Token(token)).await?;
        match answer.status {
            StatusCode::OK => {
                let user: wire::User = call.decode(&answer)?;
                Ok(TokenCheck::Valid { login: user.login })
            }
            StatusCode::UNAUTHORIZED => Ok(TokenCheck::Invalid),
            _ => Err(call.refused(&answer)),
        }
    }
}

impl Call<'_> {
    pub(super) fn check(&self, rule: Result<(), String>) -> Result<(), ForgeError> {
        rule.map_err(|reason| self.invalid(reason))
    }

    pub(super) fn invalid(&self, reason: String) -> ForgeError {
        ForgeError::Invalid { call: self.what.clone(), reason: self.scrub(&reason) }
    }

    fn unreachable(&self, error: &reqwest::Error) -> ForgeError {
        let mut reason = if error.is_timeout() { "timed out".to_owned() } else { error.to_string() };
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            reason.push_str(": ");
            reason.push_str(&cause.to_string());
            source = cause.source();
        }
        ForgeError::Unreachable { call: self.what.clone(), reason: self.scrub(&reason) }
    }

    pub(super) fn refused(&self, answer: &Answer) -> ForgeError {
        let parsed = serde_json::from_slice::<wire::ApiError>(&answer.body).ok();
        let message = match parsed.and_then(|e| e.message.or(e.error)) {
            Some(message) => message,
            None => String::from_utf8_lossy(&answer.body).trim().to_owned(),
        };
        let message = if message.is_empty() { "(no message)".to_owned() } else { self.scrub(&message) };
        ForgeError::Refused { call: self.what.clone(), status: answer.status.as_u16(), message: cut(&message) }
    }

    pub(super) fn bad_answer(&self, reason: String) -> ForgeError {
        ForgeError::BadAnswer { call: self.what.clone(), reason: self.scrub(&reason) }
    }

    /// Reads a success body. The parser's own message is kept only when it names a missing
    /// field: its other messages quote the offending value, which could be a secret.
    pub(super) fn decode<T: DeserializeOwned>(&self, answer: &Answer) -> Result<T, ForgeError> {
        serde_json::from_slice(&answer.body).map_err(|e| {
            use serde_json::error::Category;
            let what = match e.classify() {
                Category::Data if e.to_string().starts_with("missing field") => {
                    e.to_string().split(" at line").next().unwrap_or_default().to_owned()
                }
                Category::Data => "a field has the wrong type or value".to_owned(),
                Category::Eof => "the JSON ends early".to_owned(),
                Category::Syntax | Category::Io => "the body is not JSON".to_owned(),
            };
            self.bad_answer(format!(
                "HTTP {}: {what} (line {}, column {})",
                answer.status.as_u16(),
                e.line(),
                e.column()
            ))
        })
    }

    /// `text` with every secret of the call replaced.
    fn scrub(&self, text: &str) -> String {
        self.secrets
            .iter()
            .filter(|secret| !secret.is_empty())
            .fold(text.to_owned(), |text, secret| text.replace(secret, "<redacted>"))
    }
}

/// `<base>/api/v1/` from what the operator wrote.
fn api_url(base_url: &str) -> Result<Url, String> {
    // A URL with user info may hold a password: it is never repeated in an error.
    let shown = if base_url.contains('@') { "(with user info, not shown)".to_owned() } else { format!("{base_url:?}") };
    let mut url = Url::parse(base_url.trim()).map_err(|e| format!("forge URL {shown} is not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("forge URL must not carry a user or password; the admin token is given apart".into());
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("forge URL {url} must start with http:// or https://"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("forge URL {url} must not have a query or a fragment"));
    }
    let path = url.path().trim_end_matches('/').to_owned();
    let api_path = if path.ends_with("/api/v1") { format!("{path}/") } else { format!("{path}/api/v1/") };
    url.set_path(&api_path);
    if url.path_segments_mut().is_err() {
        return Err(format!("forge URL {url} has no path"));
    }
    Ok(url)
}

/// A token must fit an HTTP header: printable ASCII without spaces.
fn check_token_format(what: &str, token: &Secret) -> Result<(), String> {
    if token.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{what} has a character other than printable ASCII"));
    }
    Ok(())
}

fn token_header(token: &Secret) -> HeaderValue {
    // check_token_format admitted only printable ASCII, which is always a valid header value.
    let mut value = HeaderValue::from_str(&format!("token {}", token.expose()))
        .unwrap_or_else(|_| HeaderValue::from_static("token"));
    value.set_sensitive(true);
    value
}

fn cut(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE {
        message.to_owned()
    } else {
        let head: String = message.chars().take(MAX_MESSAGE).collect();
        format!("{head}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_url_is_found_from_the_base() {
        for (given, api) in [
            ("https://forge.example", "https://forge.example/api/v1/"),
            ("https://forge.example/", "https://forge.example/api/v1/"),
            ("https://forge.example/git", "https://forge.example/git/api/v1/"),
            ("http://127.0.0.1:3000/api/v1", "http://127.0.0.1:3000/api/v1/"),
            ("http://127.0.0.1:3000/api/v1/", "http://127.0.0.1:3000/api/v1/"),
        ] {
            assert_eq!(api_url(given).unwrap().as_str(), api, "{given}");
        }
        for (given, says) in [
            ("forge.example", "not a URL"),
            ("ftp://forge.example", "http:// or https://"),
            ("https://root:pw@forge.example", "must not carry a user"),
            ("https://forge.example/?a=b", "query"),
            ("ftp://root:hunter22@forge.example", "must not carry a user"),
            ("https://root:hunter22@[bad", "with user info, not shown"),
        ] {
            let err = api_url(given).unwrap_err();
            assert!(err.contains(says), "{given}: {err}");
            assert!(!err.contains("hunter22"), "{err}");
        }
    }

    #[test]
    fn path_segments_are_encoded_not_interpreted() {
        let client = ForgejoClient::new("https://forge.example/", Secret::new("t0ken")).unwrap();
        let url = client.url(&["users", "a b", "tokens", "x/y?z"]);
        assert_eq!(url.as_str(), "https://forge.example/api/v1/users/a%20b/tokens/x%2Fy%3Fz");
    }

    #[test]
    fn tokens_must_fit_a_header() {
        let err = ForgejoClient::new("https://forge.example", Secret::new("bad token\n")).unwrap_err();
        assert!(err.to_string().contains("printable ASCII"), "{err}");
        assert!(!err.to_string().contains("bad token"), "{err}");
        assert!(ForgejoClient::new("https://forge.example", Secret::new("")).is_err());
    }

    #[test]
    fn debug_of_the_client_hides_the_admin_token() {
        let client = ForgejoClient::new("https://forge.example", Secret::new("very-secret-admin-token")).unwrap();
        let debug = format!("{client:?}");
        assert!(!debug.contains("very-secret-admin-token"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn scrub_removes_every_secret_of_the_call() {
        let password = Secret::new("pw-123456");
        let call = Call { what: "x".into(), secrets: vec!["adm-tok", password.expose(), ""] };
        assert_eq!(call.scrub("adm-tok and pw-123456 and pw-123456"), "<redacted> and <redacted> and <redacted>");
        let long = "x".repeat(1000);
        assert!(cut(&long).len() < 400);
    }
}
