//! The controller's NATS objects (DESIGN 4.1): connecting, creating what is missing at start,
//! and reading a whole KV bucket in one pass.

use std::path::Path;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use futures::StreamExt;
use hyperhive_schedule::{AGENT_SCHEDULES_BUCKET, SCHEDULE_DEFINITIONS_BUCKET, TODO_STREAM};

/// JetStream drops a second todo with the same message id within this window; a fired slot's id
/// is `schedule:<id>:<slot>`, so this is how long a double publish of one slot is absorbed.
pub const TODO_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// A NATS step that failed; the message says which and why.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// Connecting failed (server down, bad credential file...).
    #[error("cannot connect to NATS at {url}: {reason}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        reason: String,
    },
    /// Making or checking a bucket or stream failed.
    #[error("{what}: {reason}")]
    Setup {
        /// Which object.
        what: String,
        /// Why.
        reason: String,
    },
    /// An object exists with settings the swarm cannot work with.
    #[error("{0}")]
    Misconfigured(String),
    /// Reading a bucket failed.
    #[error("reading bucket {bucket}: {reason}")]
    Scan {
        /// The bucket.
        bucket: String,
        /// Why.
        reason: String,
    },
}

fn setup_error(what: impl Into<String>) -> impl FnOnce(String) -> NatsError {
    let what = what.into();
    move |reason| NatsError::Setup { what, reason }
}

/// Connects with the controller's credential file, if any.
///
/// # Errors
/// [`NatsError::Connect`] when the server cannot be reached or refuses the credential.
pub async fn connect(url: &str, creds: Option<&Path>) -> Result<async_nats::Client, NatsError> {
    let connect_error = |reason: String| NatsError::Connect { url: url.to_owned(), reason };
    let options = match creds {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| connect_error(format!("reading credential {}: {e}", path.display())))?,
        None => async_nats::ConnectOptions::new(),
    };
    options
        .name("swarm-controller")
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| connect_error(e.to_string()))
}

/// The two KV buckets the controller alone writes.
#[derive(Debug, Clone)]
pub struct Buckets {
    /// schedule id -> definition.
    pub definitions: kv::Store,
    /// agent name -> that agent's schedules (direct get allowed).
    pub agent_schedules: kv::Store,
}

/// Creates `schedule-definitions`, `agent-schedules` (direct get allowed) and the `TODO` stream
/// when absent, and refuses existing ones whose settings would break the design.
///
/// # Errors
/// [`NatsError`] naming the object.
pub async fn ensure_objects(js: &jetstream::Context) -> Result<Buckets, NatsError> {
    let definitions = ensure_bucket(js, SCHEDULE_DEFINITIONS_BUCKET, "schedule id -> definition", false).await?;
    let agent_schedules =
        ensure_bucket(js, AGENT_SCHEDULES_BUCKET, "agent name -> that agent's schedules", true).await?;
    ensure_todo_stream(js).await?;
    Ok(Buckets { definitions, agent_schedules })
}

/// Makes `bucket` if absent and settles its direct get: `agent-schedules` must allow it (the
/// agents' only way to read their key); `schedule-definitions` must not, so every read of a
/// definition, and so every compare-and-set, starts from the stream leader rather than from a
/// replica that may lag.
async fn ensure_bucket(
    js: &jetstream::Context,
    bucket: &str,
    description: &str,
    direct_get: bool,
) -> Result<kv::Store, NatsError> {
    if js.get_key_value(bucket).await.is_err() {
        tracing::info!(bucket, "creating KV bucket");
        js.create_key_value(kv::Config {
            bucket: bucket.to_owned(),
            description: description.to_owned(),
            history: 1,
            ..Default::default()
        })
        .await
        .map_err(|e| setup_error(format!("creating KV bucket {bucket}"))(e.to_string()))?;
    }
    let reading = || setup_error(format!("reading KV bucket {bucket}"));
    let stream = js.get_stream(format!("KV_{bucket}")).await.map_err(|e| reading()(e.to_string()))?;
    let mut config = stream.cached_info().config.clone();
    if config.allow_direct != direct_get {
        if direct_get {
            return Err(NatsError::Misconfigured(format!(
                "KV bucket {bucket} exists without direct get; agents read their key by direct \
                 get, so recreate it with allow_direct (or delete it and let swarm-controller \
                 create it)"
            )));
        }
        // async-nats creates every bucket with direct get allowed.
        config.allow_direct = false;
        js.update_stream(&config)
            .await
            .map_err(|e| setup_error(format!("turning off direct get on {bucket}"))(e.to_string()))?;
    }
    // Opened after any update, so the store's cached settings are the bucket's.
    js.get_key_value(bucket).await.map_err(|e| reading()(e.to_string()))
}

async fn ensure_todo_stream(js: &jetstream::Context) -> Result<(), NatsError> {
    let stream = js
        .get_or_create_stream(stream::Config {
            name: TODO_STREAM.to_owned(),
            description: Some("every agent's todo queue, on todo.<agent>".to_owned()),
            subjects: vec!["todo.*".to_owned()],
            retention: stream::RetentionPolicy::WorkQueue,
            duplicate_window: TODO_DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await
        .map_err(|e| setup_error(format!("creating stream {TODO_STREAM}"))(e.to_string()))?;
    let config = &stream.cached_info().config;
    if config.retention != stream::RetentionPolicy::WorkQueue || config.duplicate_window < TODO_DUPLICATE_WINDOW {
        return Err(NatsError::Misconfigured(format!(
            "stream {TODO_STREAM} exists with retention {:?} and duplicate window {:?}; it must be \
             a work queue with a duplicate window of at least {:?} (delete it and let \
             swarm-controller create it)",
            config.retention, config.duplicate_window, TODO_DUPLICATE_WINDOW
        )));
    }
    Ok(())
}

/// One live key of a bucket.
#[derive(Debug, Clone)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: Bytes,
    /// Its revision (the stream sequence).
    pub revision: u64,
}

/// Every live key of `bucket` with its value: one ordered consumer delivering the last message
/// per key, so a bucket of any size is read in one stream rather than one request per key.
/// Deleted and purged keys are left out.
///
/// # Errors
/// [`NatsError::Scan`] when the consumer cannot be made or fails mid-way.
pub async fn scan_bucket(js: &jetstream::Context, bucket: &str) -> Result<Vec<KeyValue>, NatsError> {
    let scan_error = |reason: String| NatsError::Scan { bucket: bucket.to_owned(), reason };
    let prefix = format!("$KV.{bucket}.");
    let stream = js.get_stream_no_info(format!("KV_{bucket}")).await.map_err(|e| scan_error(e.to_string()))?;
    let consumer = stream
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: js.client().new_inbox(),
            filter_subject: format!("{prefix}>"),
            deliver_policy: consumer::DeliverPolicy::LastPerSubject,
            replay_policy: consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(|e| scan_error(e.to_string()))?;
    let mut out = Vec::new();
    if consumer.cached_info().num_pending == 0 {
        return Ok(out);
    }
    let mut messages = consumer.messages().await.map_err(|e| scan_error(e.to_string()))?;
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| scan_error(e.to_string()))?;
        let info = message.info().map_err(|e| scan_error(e.to_string()))?;
        let (revision, pending) = (info.stream_sequence, info.pending);
        let removed = message
            .headers
            .as_ref()
            .and_then(|h| h.get("KV-Operation"))
            .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"));
        if !removed && let Some(key) = message.subject.strip_prefix(prefix.as_str()) {
            out.push(KeyValue { key: key.to_owned(), value: message.payload.clone(), revision });
        }
        if pending == 0 {
            return Ok(out);
        }
    }
    Err(scan_error("the consumer ended before the last key".to_owned()))
}
