//! The `s3://` store, on any S3-compatible bucket that honours conditional writes.
//!
//! The SDK's own retries are turned off: a conditional PUT that landed and was then retried by
//! the SDK answers 412, which would read as "someone else wrote" when in fact we won.
//! Instead each operation here retries itself (bounded, jittered) and, after an answer
//! that leaves the outcome unknown (409 ConditionalRequestConflict, 5xx, timeout, lost
//! connection), re-reads the object and compares its bytes with what it wrote (bodies carry a
//! write id, so equal bytes mean this write landed).

use crate::retry::{ATTEMPTS, backoff};
use crate::store::{Listed, Object, Store, StoreError, StoreResult, check_key};
use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use futures::future::BoxFuture;
use std::future::Future;
use std::time::Duration;

/// Settings for `s3://` stores beyond the URL (docs/control-plane/store.md): endpoint, region,
/// path style, and credentials when they are not the AWS SDK's usual chain
/// (`AWS_ACCESS_KEY_ID`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: String,
    pub path_style: bool,
    /// `None`: the SDK's chain. `Some`: these keys only (e.g. one side of `store copy`).
    pub credentials: Option<S3Credentials>,
}

impl Default for S3Settings {
    fn default() -> Self {
        S3Settings { endpoint: None, region: "us-east-1".into(), path_style: false, credentials: None }
    }
}

/// An access key and its secret. Debug output shows the access key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// A paused or unreachable bucket must be noticed in seconds, not the SDK's default minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    /// Empty, or the URL's prefix followed by `/`.
    root: String,
}

/// How one request ended, before retries and re-reads turn it into a [`StoreError`].
#[derive(Debug)]
enum Failure {
    /// 412: the condition did not hold.
    Precondition,
    /// 404 on a conditional delete: nothing there.
    NotFound,
    /// 409, 5xx, timeout, connection trouble: the write may or may not have landed.
    Unknown(String),
    /// The store refused for good (403, missing bucket, ...).
    Refused(String),
}

fn classify<E>(error: &SdkError<E, HttpResponse>) -> Failure
where
    E: std::error::Error + 'static,
{
    match error {
        SdkError::ServiceError(_) => {}
        SdkError::ResponseError(_) | SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => {
            return Failure::Unknown(describe_sdk_error(error));
        }
        _ => return Failure::Refused(describe_sdk_error(error)),
    }
    match error.raw_response().map(|raw| raw.status().as_u16()) {
        Some(412) => Failure::Precondition,
        Some(404) => Failure::NotFound,
        Some(409 | 429 | 500..=599) => Failure::Unknown(describe_sdk_error(error)),
        _ => Failure::Refused(describe_sdk_error(error)),
    }
}

/// The error chain in one line (the SDK's top-level Display says only "service error").
fn describe_sdk_error(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The SDK's HTTP client: hyper 1 and rustls 0.23 on ring (the stack the rest of the workspace
/// uses), trusting the system's roots. The SDK crates are built without a TLS feature of their
/// own, so every SDK client must be given this one.
pub fn https_client() -> aws_sdk_s3::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https()
}

impl S3Store {
    /// Builds a client from the settings: their credentials if given, else the SDK's usual chain.
    pub async fn connect(settings: &S3Settings, bucket: &str, prefix: &str) -> S3Store {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .http_client(https_client());
        if let Some(keys) = &settings.credentials {
            loader = loader.credentials_provider(Credentials::new(
                &keys.access_key_id,
                &keys.secret_access_key,
                None,
                None,
                "agents-control settings",
            ));
        }
        let shared = loader.load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&shared).force_path_style(settings.path_style);
        if let Some(endpoint) = &settings.endpoint {
            config = config.endpoint_url(endpoint);
        }
        S3Store::with_config(config, bucket, prefix)
    }

    /// Uses an existing client's settings (endpoint, credentials), with this store's retry and
    /// timeout policy.
    pub fn from_client(client: &Client, bucket: &str, prefix: &str) -> S3Store {
        S3Store::with_config(client.config().to_builder(), bucket, prefix)
    }

    fn with_config(config: aws_sdk_s3::config::Builder, bucket: &str, prefix: &str) -> S3Store {
        let config = config
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .build(),
            )
            .build();
        let prefix = prefix.trim_matches('/');
        S3Store {
            client: Client::from_conf(config),
            bucket: bucket.to_owned(),
            root: if prefix.is_empty() { String::new() } else { format!("{prefix}/") },
        }
    }

    fn full_key(&self, key: &str) -> StoreResult<String> {
        check_key(key)?;
        Ok(format!("{}{key}", self.root))
    }

    async fn get_once(&self, key: &str) -> Result<Option<Object>, Failure> {
        let output = match self.client.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(output) => output,
            Err(error) => {
                if error.as_service_error().is_some_and(|e| e.is_no_such_key()) {
                    return Ok(None);
                }
                return Err(match classify(&error) {
                    // A 404 that is not NoSuchKey: the bucket itself is missing.
                    Failure::NotFound => Failure::Refused(describe_sdk_error(&error)),
                    other => other,
                });
            }
        };
        let version = output.e_tag().unwrap_or_default().to_owned();
        let bytes = output
            .body
            .collect()
            .await
            .map_err(|e| Failure::Unknown(format!("reading the body: {e}")))?
            .into_bytes()
            .to_vec();
        Ok(Some(Object { bytes, version }))
    }

    async fn put_once(&self, key: &str, bytes: &[u8], condition: Condition<'_>) -> Result<String, Failure> {
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(bytes.to_vec()));
        request = match condition {
            Condition::Absent => request.if_none_match("*"),
            Condition::Version(version) => request.if_match(version),
        };
        match request.send().await {
            Ok(output) => Ok(output.e_tag().unwrap_or_default().to_owned()),
            Err(error) => Err(classify(&error)),
        }
    }

    async fn delete_once(&self, key: &str, version: &str) -> Result<(), Failure> {
        let request = self.client.delete_object().bucket(&self.bucket).key(key).if_match(version);
        match request.send().await {
            Ok(_) => Ok(()),
            Err(error) => Err(classify(&error)),
        }
    }

    /// Reads back after an ambiguous answer; `None` when the read failed as well.
    async fn reread(&self, key: &str) -> Option<Option<Object>> {
        self.get_once(key).await.ok()
    }

    /// The shared shape of a conditional write: send it; stop on a definite answer; after an
    /// unknown outcome (or a 412 that may answer our own earlier attempt) re-read the object and
    /// let `judge` say whether our write is there, someone else's is, or it is worth resending.
    async fn conditional_write<T, Send, Sent>(
        &self,
        full: &str,
        refusal: impl Fn() -> StoreError,
        send: Send,
        judge: impl Fn(Option<Object>) -> Reread<T>,
    ) -> StoreResult<T>
    where
        Send: Fn() -> Sent,
        Sent: Future<Output = Result<T, Failure>>,
    {
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            match send().await {
                Ok(done) => return Ok(done),
                Err(Failure::Precondition | Failure::NotFound) if attempt == 0 => {
                    return Err(refusal());
                }
                Err(Failure::Refused(detail)) => return Err(StoreError::Refused { detail }),
                Err(Failure::Precondition | Failure::NotFound) => {
                    last = "the condition failed after a retry".into();
                }
                Err(Failure::Unknown(detail)) => last = detail,
            }
            if let Some(found) = self.reread(full).await {
                match judge(found) {
                    Reread::Ours(done) => return Ok(done),
                    Reread::Theirs => return Err(refusal()),
                    Reread::Resend => {}
                }
            }
        }
        Err(StoreError::Unavailable { detail: last })
    }

    async fn create_inner(&self, key: &str, bytes: Vec<u8>) -> StoreResult<String> {
        let full = self.full_key(key)?;
        let (full, bytes) = (full.as_str(), bytes.as_slice());
        let send = move || async move {
            match self.put_once(full, bytes, Condition::Absent).await {
                // A PUT answered 404 names a missing bucket, not a missing object.
                Err(Failure::NotFound) => Err(Failure::Refused(format!("bucket {} not found", self.bucket))),
                other => other,
            }
        };
        let version = self
            .conditional_write(
                full,
                || StoreError::AlreadyExists { key: key.into() },
                send,
                |found| match found {
                    Some(found) if found.bytes == bytes => Reread::Ours(found.version),
                    Some(_) => Reread::Theirs,
                    None => Reread::Resend,
                },
            )
            .await?;
        // Read back. A server whose If-None-Match check and store are two steps (moto's threaded
        // server is one) can answer 200 to two racing creates, the later overwriting the earlier:
        // the earlier writer must not believe it won. (On S3 itself this read always finds ours.)
        match self.reread(full).await {
            Some(Some(found)) if found.bytes != bytes => Err(StoreError::AlreadyExists { key: key.into() }),
            _ => Ok(version),
        }
    }

    async fn replace_inner(&self, key: &str, bytes: Vec<u8>, version: &str) -> StoreResult<String> {
        let full = self.full_key(key)?;
        let (full, bytes) = (full.as_str(), bytes.as_slice());
        self.conditional_write(
            full,
            || StoreError::VersionMismatch { key: key.into() },
            move || self.put_once(full, bytes, Condition::Version(version)),
            |found| match found {
                Some(found) if found.bytes == bytes => Reread::Ours(found.version),
                Some(found) if found.version == version => Reread::Resend,
                _ => Reread::Theirs,
            },
        )
        .await
    }

    async fn delete_inner(&self, key: &str, version: &str) -> StoreResult<()> {
        let full = self.full_key(key)?;
        let full = full.as_str();
        self.conditional_write(
            full,
            || StoreError::VersionMismatch { key: key.into() },
            move || self.delete_once(full, version),
            |found| match found {
                None => Reread::Ours(()),
                Some(found) if found.version == version => Reread::Resend,
                Some(_) => Reread::Theirs,
            },
        )
        .await
    }

    async fn get_inner(&self, key: &str) -> StoreResult<Option<Object>> {
        let full = self.full_key(key)?;
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            match self.get_once(&full).await {
                Ok(found) => return Ok(found),
                Err(Failure::Refused(detail)) => return Err(StoreError::Refused { detail }),
                Err(Failure::Unknown(detail)) => last = detail,
                Err(other) => last = format!("{other:?}"),
            }
        }
        Err(StoreError::Unavailable { detail: last })
    }

    async fn list_once(&self, prefix: &str) -> Result<Vec<Listed>, Failure> {
        let mut listed = Vec::new();
        let mut token = None;
        loop {
            let output = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .await
                .map_err(|error| classify(&error))?;
            // The listing's ETag is the one GetObject and PutObject answer (quotes included), so
            // it compares equal to a version read earlier.
            listed.extend(output.contents().iter().filter_map(|object| {
                let key = object.key()?.strip_prefix(&self.root)?;
                Some(Listed { key: key.to_owned(), version: object.e_tag().unwrap_or_default().to_owned() })
            }));
            token = output.next_continuation_token().map(str::to_owned);
            if token.is_none() {
                return Ok(listed);
            }
        }
    }

    async fn list_inner(&self, prefix: &str) -> StoreResult<Vec<Listed>> {
        let full = format!("{}{prefix}", self.root);
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            match self.list_once(&full).await {
                Ok(mut listed) => {
                    listed.sort_by(|a, b| a.key.cmp(&b.key));
                    return Ok(listed);
                }
                Err(Failure::Refused(detail)) => return Err(StoreError::Refused { detail }),
                Err(Failure::NotFound) => {
                    return Err(StoreError::Refused { detail: format!("bucket {} not found", self.bucket) });
                }
                Err(Failure::Unknown(detail)) => last = detail,
                Err(other) => last = format!("{other:?}"),
            }
        }
        Err(StoreError::Unavailable { detail: last })
    }
}

/// What a re-read after an ambiguous write shows.
enum Reread<T> {
    /// Our write is there: it landed.
    Ours(T),
    /// Someone else's write is there: the condition no longer holds.
    Theirs,
    /// Nothing changed: send again.
    Resend,
}

#[derive(Debug, Clone, Copy)]
enum Condition<'a> {
    Absent,
    Version(&'a str),
}

impl Store for S3Store {
    fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.root.trim_end_matches('/')).trim_end_matches('/').to_owned()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Object>>> {
        Box::pin(self.get_inner(key))
    }

    fn create<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<String>> {
        Box::pin(self.create_inner(key, bytes))
    }

    fn replace<'a>(&'a self, key: &'a str, bytes: Vec<u8>, version: &'a str) -> BoxFuture<'a, StoreResult<String>> {
        Box::pin(self.replace_inner(key, bytes, version))
    }

    fn delete<'a>(&'a self, key: &'a str, version: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(self.delete_inner(key, version))
    }

    fn list_versions<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, StoreResult<Vec<Listed>>> {
        Box::pin(self.list_inner(prefix))
    }
}
