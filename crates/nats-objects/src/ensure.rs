//! Creating the swarm's streams and buckets when absent, and holding existing ones to the limits
//! and settings the design needs (the controller does it at start; tests of hive-c0re and
//! hive-agent do it the same way).

use async_nats::jetstream::{self, kv, stream};

use crate::limits::{self, TODO_DUPLICATE_WINDOW};
use crate::names::{
    AGENT_ICONS_BUCKET, AGENT_SCHEDULES_BUCKET, AGENT_WANTED_BUCKET, AGENTS_BUCKET, AUDIT_STREAM, AUDIT_SUBJECT,
    CONFIG_PRS_BUCKET, DEPLOY_STREAM, FORGE_DELIVERIES_BUCKET, HIVE_STATUS_BUCKET, RELAY_STREAM,
    SCHEDULE_DEFINITIONS_BUCKET, SWARM_SECRETS_BUCKET, TODO_STREAM, TURNS_STREAM, kv_stream,
};

/// Making or checking a stream or bucket failed; the message says which and why.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// NATS refused or failed a create, update or read.
    #[error("{what}: {reason}")]
    Failed {
        /// Which object, and what was being done to it.
        what: String,
        /// Why.
        reason: String,
    },
    /// An object exists with settings the swarm cannot work with, or the servers cannot hold
    /// the replicas asked for.
    #[error("{0}")]
    Misconfigured(String),
}

fn setup_error(what: impl Into<String>) -> impl FnOnce(String) -> SetupError {
    let what = what.into();
    move |reason| SetupError::Failed { what, reason }
}

/// The KV buckets the controller works with.
#[derive(Debug, Clone)]
pub struct Buckets {
    /// schedule id -> definition.
    pub definitions: kv::Store,
    /// agent name -> that agent's schedules (direct get allowed).
    pub agent_schedules: kv::Store,
    /// hive -> its last published status.
    pub hive_status: kv::Store,
    /// `<hive>.<agent>` -> the agent's wanted state.
    pub agent_wanted: kv::Store,
    /// agent name -> its roster entry.
    pub agents: kv::Store,
    /// record key -> a sealed secret (see the controller's secret store).
    pub secrets: kv::Store,
    /// agent name -> its uploaded icon (PNG).
    pub icons: kv::Store,
    /// agent name -> its config pull request (see the controller's forge module).
    pub config_prs: kv::Store,
    /// a webhook delivery's body hash -> its event, once applied (its entries expire).
    pub forge_deliveries: kv::Store,
}

/// Creates every stream and bucket of the swarm when absent (`schedule-definitions`,
/// `agent-schedules` with direct get, `hive-status`, `agent-wanted`, `agents`, `swarm-secrets`,
/// `agent-icons`, `config-prs`, `forge-deliveries`, `TODO`, `DEPLOY`, `RELAY`, `TURNS`, `AUDIT`), sets the
/// limits each must hold to (see [`crate::limits`]) on existing ones, and refuses
/// existing ones whose settings would break the design.
///
/// # Errors
/// [`SetupError`] naming the object.
pub async fn ensure_objects(js: &jetstream::Context) -> Result<Buckets, SetupError> {
    ensure_replicated_objects(js, 1).await
}

/// [`ensure_objects`] with `replicas` copies of every stream and bucket (`SWARM_NATS_REPLICAS`:
/// 3 on a three-node cluster). An existing object with another count is changed to it (NATS
/// moves the copies; the log says so), or the start fails naming the setting.
///
/// # Errors
/// [`SetupError`] naming the object; on a single server a count above 1 is refused by NATS.
pub async fn ensure_replicated_objects(js: &jetstream::Context, replicas: usize) -> Result<Buckets, SetupError> {
    let bucket = |name, description, direct_get| {
        let bounds = Bounds { max_bytes: limits::BUCKET_MAX_BYTES, max_age: None };
        ensure_bucket(js, name, description, direct_get, bounds, replicas)
    };
    let definitions = bucket(SCHEDULE_DEFINITIONS_BUCKET, "schedule id -> definition", false).await?;
    let agent_schedules = bucket(AGENT_SCHEDULES_BUCKET, "agent name -> that agent's schedules", true).await?;
    let hive_status = bucket(HIVE_STATUS_BUCKET, "hive -> its last published status", true).await?;
    let agent_wanted = bucket(AGENT_WANTED_BUCKET, "<hive>.<agent> -> the agent's wanted state", true).await?;
    // No tenant reads the roster, so it is read from the leader only, like the definitions.
    let agents = bucket(AGENTS_BUCKET, "agent name -> its roster entry", false).await?;
    // Only the controller reads it; no tenant imports it.
    let secrets = bucket(SWARM_SECRETS_BUCKET, "record key -> a sealed secret", false).await?;
    let icons = bucket(AGENT_ICONS_BUCKET, "agent name -> its uploaded icon (PNG)", false).await?;
    // Only the controller reads and writes it (no tenant imports it); read from the leader,
    // since every write is a compare-and-set.
    let config_prs = bucket(CONFIG_PRS_BUCKET, "agent name -> its config repository's pull request", false).await?;
    // Only the controller reads and writes it; its entries expire.
    let bounds =
        Bounds { max_bytes: limits::FORGE_DELIVERIES_MAX_BYTES, max_age: Some(limits::FORGE_DELIVERIES_MAX_AGE) };
    let forge_deliveries = ensure_bucket(
        js,
        FORGE_DELIVERIES_BUCKET,
        "a webhook delivery's body SHA-256 -> its event, once applied",
        false,
        bounds,
        replicas,
    )
    .await?;
    ensure_queue(js, stream::Config { num_replicas: replicas, ..todo_stream_config() }).await?;
    ensure_queue(js, stream::Config { num_replicas: replicas, ..deploy_stream_config() }).await?;
    ensure_history(js, stream::Config { num_replicas: replicas, ..relay_stream_config() }).await?;
    ensure_history(js, stream::Config { num_replicas: replicas, ..turns_stream_config() }).await?;
    ensure_history(js, stream::Config { num_replicas: replicas, ..audit_stream_config() }).await?;
    Ok(Buckets {
        definitions,
        agent_schedules,
        hive_status,
        agent_wanted,
        agents,
        secrets,
        icons,
        config_prs,
        forge_deliveries,
    })
}

/// The error for a create or an update NATS refused, with the replica count in mind: a count the
/// servers cannot hold is the likeliest cause.
fn replicated_setup_error(what: String, replicas: usize) -> impl FnOnce(String) -> SetupError {
    move |reason| {
        // A single server says so for any count above 1; that never changes by retrying.
        if reason.contains("non-clustered") {
            return SetupError::Misconfigured(format!(
                "{what}: SWARM_NATS_REPLICAS is {replicas}, but the NATS server is not part of a cluster and keeps \
                 one copy only; set SWARM_NATS_REPLICAS=1, or run a cluster of at least {replicas} servers"
            ));
        }
        let hint = if replicas > 1 {
            format!(
                " (SWARM_NATS_REPLICAS is {replicas}: the cluster needs at least {replicas} JetStream servers up; a single \
                 server takes only 1)"
            )
        } else {
            String::new()
        };
        SetupError::Failed { what, reason: format!("{reason}{hint}") }
    }
}

/// How much a bucket keeps: its bytes, and how long an entry lives (`None`: until replaced).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    max_bytes: i64,
    max_age: Option<std::time::Duration>,
}

/// Makes `bucket` if absent, keeps one value per key, bounds its size (also on a bucket that
/// exists already), and settles its direct get: buckets tenants read
/// (`agent-schedules`, `hive-status`, `agent-wanted`) must allow it, since a tenant may read a key
/// only by direct get; `schedule-definitions` and `agents` must not, so every read of them, and
/// so every compare-and-set, starts from the stream leader rather than from a replica that may lag.
async fn ensure_bucket(
    js: &jetstream::Context,
    bucket: &str,
    description: &str,
    direct_get: bool,
    bounds: Bounds,
    replicas: usize,
) -> Result<kv::Store, SetupError> {
    if js.get_key_value(bucket).await.is_err() {
        tracing::info!(bucket, replicas, "creating KV bucket");
        js.create_key_value(kv::Config {
            bucket: bucket.to_owned(),
            description: description.to_owned(),
            history: limits::BUCKET_HISTORY,
            max_bytes: bounds.max_bytes,
            max_age: bounds.max_age.unwrap_or_default(),
            max_value_size: limits::BUCKET_MAX_VALUE_SIZE,
            num_replicas: replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| replicated_setup_error(format!("creating KV bucket {bucket}"), replicas)(e.to_string()))?;
    }
    let reading = || setup_error(format!("reading KV bucket {bucket}"));
    let stream = js.get_stream(kv_stream(bucket)).await.map_err(|e| reading()(e.to_string()))?;
    let current = stream.cached_info().config.clone();
    if direct_get && !current.allow_direct {
        return Err(SetupError::Misconfigured(format!(
            "KV bucket {bucket} exists without direct get; tenants read their keys by direct get, \
             so recreate it with allow_direct (or delete it and let swarm-controller create it)"
        )));
    }
    let mut wanted = current.clone();
    // async-nats creates every bucket with direct get allowed.
    wanted.allow_direct = direct_get;
    // A bucket's history is its stream's messages per subject.
    wanted.max_messages_per_subject = limits::BUCKET_HISTORY;
    wanted.max_bytes = bounds.max_bytes;
    wanted.max_age = bounds.max_age.unwrap_or_default();
    wanted.max_message_size = limits::BUCKET_MAX_VALUE_SIZE;
    wanted.max_consumers = limits::STREAM_MAX_CONSUMERS;
    wanted.num_replicas = replicas;
    // async-nats makes buckets with rollups allowed (a KV purge is one). Nothing here purges,
    // and a tenant writing its own key with `Nats-Rollup: all` would erase every other key of
    // the bucket: a hive, every hive's status.
    wanted.allow_rollup = false;
    if wanted != current {
        log_replicas(&format!("KV bucket {bucket}"), current.num_replicas, replicas);
        tracing::info!(bucket, "setting the bucket's history, limits, consumers, direct get, rollups and replicas");
        update_stream(js, &wanted, &current)
            .await
            .map_err(|e| replicated_setup_error(format!("updating KV bucket {bucket}"), replicas)(e))?;
    }
    // Opened after any update, so the store's cached settings are the bucket's.
    js.get_key_value(bucket).await.map_err(|e| reading()(e.to_string()))
}

/// A work queue of one subject per tenant: a full tenant is refused at its own per-subject limit
/// (discard new, per subject) while the others keep working; the whole stream is bounded in
/// messages as well as in bytes.
fn per_tenant_queue(
    name: &str,
    description: &str,
    subjects: &str,
    per_subject: i64,
    max_messages: i64,
    max_bytes: i64,
    max_message_size: i32,
) -> stream::Config {
    stream::Config {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        subjects: vec![subjects.to_owned()],
        retention: stream::RetentionPolicy::WorkQueue,
        duplicate_window: TODO_DUPLICATE_WINDOW,
        discard: stream::DiscardPolicy::New,
        discard_new_per_subject: true,
        max_messages_per_subject: per_subject,
        max_messages,
        max_bytes,
        max_message_size,
        max_consumers: limits::STREAM_MAX_CONSUMERS,
        ..Default::default()
    }
}

/// `TODO`: every agent's queue on `todo.<agent>`.
pub fn todo_stream_config() -> stream::Config {
    per_tenant_queue(
        TODO_STREAM,
        "every agent's todo queue, on todo.<agent>",
        "todo.*",
        limits::TODO_MAX_MSGS_PER_AGENT,
        limits::TODO_MAX_MSGS,
        limits::TODO_MAX_BYTES,
        limits::TODO_MAX_MSG_SIZE,
    )
}

/// `DEPLOY`: every hive's deploy queue on `deploy.<hive>`.
pub fn deploy_stream_config() -> stream::Config {
    per_tenant_queue(
        DEPLOY_STREAM,
        "every hive's deploy messages, on deploy.<hive>",
        "deploy.*",
        limits::DEPLOY_MAX_MSGS_PER_HIVE,
        limits::DEPLOY_MAX_MSGS,
        limits::DEPLOY_MAX_BYTES,
        limits::BUCKET_MAX_VALUE_SIZE,
    )
}

/// `RELAY`: every agent's recent terminal output and turn headers, on `term.<agent>` and
/// `turn.<agent>`; the oldest go first, per subject and in all. Direct get, for the SSE routes'
/// history reads.
pub fn relay_stream_config() -> stream::Config {
    stream::Config {
        name: RELAY_STREAM.to_owned(),
        description: Some(
            "every agent's recent terminal output and turn headers, on term.<agent> and turn.<agent>".into(),
        ),
        subjects: vec!["term.*".to_owned(), "turn.*".to_owned()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        max_messages_per_subject: limits::RELAY_MAX_MSGS_PER_SUBJECT,
        max_bytes: limits::RELAY_MAX_BYTES,
        max_message_size: limits::RELAY_MAX_MSG_SIZE,
        allow_direct: true,
        max_consumers: limits::STREAM_MAX_CONSUMERS,
        ..Default::default()
    }
}

/// `TURNS`: every agent's turn history on `turns.<agent>`, one record per finished turn; the
/// oldest go first, per agent (a count), by age and in all. Direct get, for an agent's last turn.
pub fn turns_stream_config() -> stream::Config {
    stream::Config {
        name: TURNS_STREAM.to_owned(),
        description: Some("every agent's turn history, one record per finished turn, on turns.<agent>".into()),
        subjects: vec!["turns.*".to_owned()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        max_messages_per_subject: limits::TURNS_MAX_MSGS_PER_AGENT,
        max_age: limits::TURNS_MAX_AGE,
        max_bytes: limits::TURNS_MAX_BYTES,
        max_message_size: limits::TURNS_MAX_MSG_SIZE,
        duplicate_window: TODO_DUPLICATE_WINDOW,
        allow_direct: true,
        max_consumers: limits::STREAM_MAX_CONSUMERS,
        ..Default::default()
    }
}

/// `AUDIT`: every state-changing request the controller took, oldest dropped first by age and
/// in all. Direct get, for reading it back newest first by sequence.
pub fn audit_stream_config() -> stream::Config {
    stream::Config {
        name: AUDIT_STREAM.to_owned(),
        description: Some("every state-changing request the controller took: who, what, how it ended".into()),
        subjects: vec![AUDIT_SUBJECT.to_owned()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        max_age: limits::AUDIT_MAX_AGE,
        max_bytes: limits::AUDIT_MAX_BYTES,
        max_message_size: limits::AUDIT_MAX_MSG_SIZE,
        allow_direct: true,
        max_consumers: limits::STREAM_MAX_CONSUMERS,
        ..Default::default()
    }
}

/// Gives an existing stream the settings `wanted`. Older releases of nats-server refuse to change
/// a stream's consumer limit once it is made (and do not cap a stream at 1,000 either): the
/// stream then keeps its own limit and everything else is still set, with a warning.
async fn update_stream(
    js: &jetstream::Context,
    wanted: &stream::Config,
    current: &stream::Config,
) -> Result<(), String> {
    let refused = match js.update_stream(wanted).await {
        Ok(_) => return Ok(()),
        Err(e) if wanted.max_consumers != current.max_consumers => e.to_string(),
        Err(e) => return Err(e.to_string()),
    };
    let keeping = stream::Config { max_consumers: current.max_consumers, ..wanted.clone() };
    js.update_stream(&keeping).await.map_err(|e| e.to_string())?;
    tracing::warn!(
        stream = %wanted.name, kept = current.max_consumers, wanted = wanted.max_consumers,
        "the NATS server would not change the stream's consumer limit ({refused}); it keeps its own"
    );
    Ok(())
}

/// A line when an object's replica count changes: NATS then copies (or drops) its data, which
/// an operator wants to see in the log.
fn log_replicas(what: &str, from: usize, to: usize) {
    // A stream created without a count reports 0 or 1 for one copy.
    if from.max(1) != to {
        tracing::warn!(object = what, from, to, "changing the number of replicas (SWARM_NATS_REPLICAS)");
    }
}

/// Creates a history stream (`RELAY`, `TURNS`, `AUDIT`) if absent and gives an existing one `wanted`'s
/// limits and settings; it must keep messages by limits.
async fn ensure_history(js: &jetstream::Context, wanted: stream::Config) -> Result<(), SetupError> {
    let (name, replicas) = (wanted.name.clone(), wanted.num_replicas);
    let stream = js
        .get_or_create_stream(wanted.clone())
        .await
        .map_err(|e| replicated_setup_error(format!("creating stream {name}"), replicas)(e.to_string()))?;
    let current = stream.cached_info().config.clone();
    let settled = stream::Config {
        retention: current.retention,
        subjects: wanted.subjects,
        discard: wanted.discard,
        max_messages_per_subject: wanted.max_messages_per_subject,
        max_age: wanted.max_age,
        max_bytes: wanted.max_bytes,
        max_message_size: wanted.max_message_size,
        max_consumers: wanted.max_consumers,
        allow_direct: true,
        num_replicas: replicas,
        ..current.clone()
    };
    if settled.retention != stream::RetentionPolicy::Limits {
        return Err(SetupError::Misconfigured(format!(
            "stream {name} exists with retention {:?}; it must keep messages by limits \
             (delete it and let swarm-controller create it)",
            settled.retention
        )));
    }
    if settled != current {
        log_replicas(&format!("stream {name}"), current.num_replicas, replicas);
        tracing::info!(stream = %name, "setting the stream's limits and replicas");
        update_stream(js, &settled, &current)
            .await
            .map_err(|e| replicated_setup_error(format!("updating stream {name}"), replicas)(e))?;
    }
    Ok(())
}

/// Creates the queue `wanted` if absent; an existing one must be a work queue with at least the
/// duplicate window, and gets `wanted`'s limits.
async fn ensure_queue(js: &jetstream::Context, wanted: stream::Config) -> Result<(), SetupError> {
    let name = wanted.name.clone();
    let replicas = wanted.num_replicas;
    let stream = js
        .get_or_create_stream(wanted.clone())
        .await
        .map_err(|e| replicated_setup_error(format!("creating stream {name}"), replicas)(e.to_string()))?;
    let current = stream.cached_info().config.clone();
    if current.retention != stream::RetentionPolicy::WorkQueue || current.duplicate_window < TODO_DUPLICATE_WINDOW {
        return Err(SetupError::Misconfigured(format!(
            "stream {name} exists with retention {:?} and duplicate window {:?}; it must be a work \
             queue with a duplicate window of at least {:?} (delete it and let swarm-controller \
             create it)",
            current.retention, current.duplicate_window, TODO_DUPLICATE_WINDOW
        )));
    }
    let limited = stream::Config {
        discard: wanted.discard,
        discard_new_per_subject: wanted.discard_new_per_subject,
        max_messages_per_subject: wanted.max_messages_per_subject,
        max_messages: wanted.max_messages,
        max_bytes: wanted.max_bytes,
        max_message_size: wanted.max_message_size,
        max_consumers: wanted.max_consumers,
        num_replicas: replicas,
        ..current.clone()
    };
    if limited != current {
        log_replicas(&format!("stream {name}"), current.num_replicas, replicas);
        tracing::info!(stream = %name, "setting the stream's limits and replicas");
        update_stream(js, &limited, &current)
            .await
            .map_err(|e| replicated_setup_error(format!("updating stream {name}"), replicas)(e))?;
    }
    Ok(())
}
