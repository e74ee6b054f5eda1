//! The tenants' durable pull consumers, configured in one place: each agent's `agent-<agent>` on
//! `TODO`, each hive's `hive-<hive>` on `KV_agent-wanted` and on `DEPLOY`.
//!
//! A tenant allowed to create its own consumer could give it any configuration under its fixed
//! name and filter: a push consumer whose `deliver_subject` lies in the swarm account, an
//! inactivity threshold that deletes it. So the controller makes every one of them with the
//! configuration below ([`DurableConsumer::ensure`], replacing one that differs, adopting one
//! that does not), and a tenant may only bind to its own ([`DurableConsumer::bind`], a consumer
//! info request: no create) and then fetch and ack. Both sides take the configuration from here,
//! so they cannot drift apart.

use std::time::Duration;

use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::{self, ErrorCode, consumer, consumer::pull, stream::ConsumerErrorKind};
use hyperhive_schedule::{AgentName, HiveName};

use crate::ensure::SetupError;
use crate::names::{
    AGENT_WANTED_BUCKET, DEPLOY_STREAM, TODO_STREAM, agent_durable_name, deploy_subject, hive_durable_name,
    hive_wanted_filter, kv_stream, todo_subject,
};

/// How long the server waits for an agent's ack before redelivering its todo; a running turn
/// keeps extending it with progress acks every third of it.
pub const AGENT_ACK_WAIT: Duration = Duration::from_secs(60);
/// A hive's ack wait (nats-server's default): a hive acks a wanted state or a deploy once it has
/// recorded it, in milliseconds.
pub const HIVE_ACK_WAIT: Duration = Duration::from_secs(30);
/// A hive's acks pending at once (nats-server's default).
const HIVE_MAX_ACK_PENDING: i64 = 1000;
/// Pull requests waiting at once (nats-server's default).
const MAX_WAITING: i64 = 512;
/// Deliveries of one message: unlimited (nats-server's default). An agent acks a todo it has
/// recorded as finished, a hive one it has applied or refused; a message is never dropped
/// unseen.
const MAX_DELIVER: i64 = -1;

/// One tenant's durable pull consumer: its stream and its whole configuration.
#[derive(Debug, Clone)]
pub struct DurableConsumer {
    /// The stream it reads.
    pub stream: String,
    /// Its configuration, as the controller creates it.
    pub config: pull::Config,
}

/// `agent`'s todo consumer: `agent-<agent>` on `TODO`, filtered on `todo.<agent>`, one todo in
/// flight, explicit acks, [`AGENT_ACK_WAIT`].
pub fn agent_consumer(agent: &AgentName) -> DurableConsumer {
    DurableConsumer {
        stream: TODO_STREAM.to_owned(),
        config: fixed(agent_durable_name(agent), todo_subject(agent), consumer::DeliverPolicy::All, AGENT_ACK_WAIT, 1),
    }
}

/// `hive`'s wanted-state consumer: `hive-<hive>` on `KV_agent-wanted`, filtered on its own
/// agents' keys, delivering the last value of each key.
pub fn hive_wanted_consumer(hive: &HiveName) -> DurableConsumer {
    DurableConsumer {
        stream: kv_stream(AGENT_WANTED_BUCKET),
        config: fixed(
            hive_durable_name(hive),
            hive_wanted_filter(hive),
            consumer::DeliverPolicy::LastPerSubject,
            HIVE_ACK_WAIT,
            HIVE_MAX_ACK_PENDING,
        ),
    }
}

/// `hive`'s deploy consumer: `hive-<hive>` on `DEPLOY`, filtered on `deploy.<hive>`.
pub fn hive_deploy_consumer(hive: &HiveName) -> DurableConsumer {
    DurableConsumer {
        stream: DEPLOY_STREAM.to_owned(),
        config: fixed(
            hive_durable_name(hive),
            deploy_subject(hive),
            consumer::DeliverPolicy::All,
            HIVE_ACK_WAIT,
            HIVE_MAX_ACK_PENDING,
        ),
    }
}

/// Both of `hive`'s consumers.
pub fn hive_consumers(hive: &HiveName) -> [DurableConsumer; 2] {
    [hive_wanted_consumer(hive), hive_deploy_consumer(hive)]
}

/// A durable pull consumer with explicit acks and every other setting spelled out as the server
/// reports it, so that a consumer read back compares equal to the one made.
fn fixed(
    durable: String,
    filter: String,
    deliver_policy: consumer::DeliverPolicy,
    ack_wait: Duration,
    max_ack_pending: i64,
) -> pull::Config {
    pull::Config {
        durable_name: Some(durable),
        filter_subject: filter,
        deliver_policy,
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait,
        max_deliver: MAX_DELIVER,
        max_ack_pending,
        max_waiting: MAX_WAITING,
        replay_policy: consumer::ReplayPolicy::Instant,
        ..Default::default()
    }
}

/// What [`DurableConsumer::ensure`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// There was none: it was created.
    Created,
    /// One with exactly this configuration was there (made by an earlier pass, or by a tenant
    /// under an older build): kept, with its delivery state.
    Kept,
    /// One with another configuration was there: deleted and created again. A work queue keeps
    /// its unacked messages, and the wanted-state consumer delivers each key's last value again.
    Replaced,
}

/// Why a tenant could not bind to its consumer.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The controller has not made it yet (a tenant may not make it): wait and try again.
    #[error(
        "consumer {durable} on stream {stream} does not exist yet; the swarm-controller makes it (at its start, \
         on each reconcile pass, and when it mints a credential); waiting for it"
    )]
    Missing {
        /// The consumer's name.
        durable: String,
        /// Its stream.
        stream: String,
    },
    /// The info request failed (NATS away, or the credential lacks the grant).
    #[error("reading consumer {durable} on stream {stream}: {reason}")]
    Failed {
        /// The consumer's name.
        durable: String,
        /// Its stream.
        stream: String,
        /// Why.
        reason: String,
    },
}

impl DurableConsumer {
    /// The consumer's durable name.
    pub fn durable(&self) -> &str {
        self.config.durable_name.as_deref().unwrap_or_default()
    }

    /// Whether `actual`, a consumer's configuration as the server reports it, is this one's:
    /// every setting but the name the server fills in, the description, the replica count (the
    /// stream's) and the metadata the server adds.
    pub fn matches(&self, actual: &consumer::Config) -> bool {
        use consumer::IntoConsumerConfig;
        let wanted = consumer::Config {
            name: actual.name.clone(),
            description: actual.description.clone(),
            num_replicas: actual.num_replicas,
            metadata: actual.metadata.clone(),
            ..self.config.clone().into_consumer_config()
        };
        wanted == *actual
    }

    /// Makes the consumer with exactly this configuration: creates it when absent, keeps it when
    /// it matches, and deletes and creates again one that differs (what a tenant could have made
    /// of it while it could create its own consumer). The controller calls it.
    ///
    /// # Errors
    /// [`SetupError::Failed`] naming the consumer, when NATS refuses or does not answer.
    pub async fn ensure(&self, js: &jetstream::Context) -> Result<Ensured, SetupError> {
        let (durable, stream_name) = (self.durable().to_owned(), self.stream.clone());
        let failed = |what: &str| {
            let what = format!("{what} consumer {durable} on stream {stream_name}");
            move |reason: String| SetupError::Failed { what, reason }
        };
        let stream =
            js.get_stream_no_info(&self.stream).await.map_err(|e| failed("opening the stream of")(e.to_string()))?;
        let outcome = match stream.consumer_info(&durable).await {
            Ok(info) if self.matches(&info.config) => return Ok(Ensured::Kept),
            Ok(info) => {
                tracing::warn!(
                    consumer = %durable,
                    stream = %stream_name,
                    found = ?info.config,
                    "a tenant consumer differs from the configuration the swarm gives it; replacing it"
                );
                match stream.delete_consumer(&durable).await {
                    Ok(_) => {}
                    // Gone in the meantime: nothing left to delete.
                    Err(e) if matches!(e.kind(), ConsumerErrorKind::JetStream(js) if js.error_code() == ErrorCode::CONSUMER_NOT_FOUND) =>
                        {}
                    Err(e) => return Err(failed("deleting")(e.to_string())),
                }
                Ensured::Replaced
            }
            Err(e) if e.kind() == consumer_info_not_found() => Ensured::Created,
            Err(e) => return Err(failed("reading")(e.to_string())),
        };
        stream.create_consumer(self.config.clone()).await.map_err(|e| failed("creating")(e.to_string()))?;
        tracing::info!(consumer = %durable, stream = %stream_name, ?outcome, "tenant consumer made");
        Ok(outcome)
    }

    /// Binds a tenant to its existing consumer with one consumer info request (the tenant's grant
    /// allows info, fetch and ack of its own consumer, never create or delete).
    ///
    /// # Errors
    /// [`BindError::Missing`] while the controller has not made it; [`BindError::Failed`] otherwise.
    pub async fn bind(&self, js: &jetstream::Context) -> Result<consumer::PullConsumer, BindError> {
        let (durable, stream) = (self.durable().to_owned(), self.stream.clone());
        let failed = |reason: String| BindError::Failed { durable: durable.clone(), stream: stream.clone(), reason };
        // No request: a tenant may not read stream info.
        let handle = js.get_stream_no_info(&self.stream).await.map_err(|e| failed(e.to_string()))?;
        let info = match handle.consumer_info(&durable).await {
            Ok(info) => info,
            Err(e) if e.kind() == consumer_info_not_found() => {
                return Err(BindError::Missing { durable: durable.clone(), stream: stream.clone() });
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        if !self.matches(&info.config) {
            // Still usable if it is a pull consumer; the controller's next pass replaces it.
            tracing::warn!(
                consumer = %durable,
                stream = %stream,
                "this consumer differs from the configuration the swarm gives it; the swarm-controller replaces it"
            );
        }
        Ok(consumer::Consumer::new(self.config.clone(), info, js.clone()))
    }

    /// [`DurableConsumer::bind`], waiting for the consumer while it does not exist: one warning
    /// saying what it waits for, a try every [`BIND_RETRY`], a line when it is there. A tenant
    /// started before the controller made its consumer works as soon as it is made, without a
    /// restart.
    ///
    /// # Errors
    /// [`BindError::Failed`].
    pub async fn bind_when_made(&self, js: &jetstream::Context) -> Result<consumer::PullConsumer, BindError> {
        let mut waiting = false;
        loop {
            match self.bind(js).await {
                Ok(bound) => {
                    if waiting {
                        tracing::info!(consumer = %self.durable(), stream = %self.stream, "the consumer is there now");
                    }
                    return Ok(bound);
                }
                Err(missing @ BindError::Missing { .. }) if !waiting => {
                    tracing::warn!("{missing}");
                    waiting = true;
                }
                Err(BindError::Missing { .. }) => {}
                Err(failed) => return Err(failed),
            }
            tokio::time::sleep(BIND_RETRY).await;
        }
    }
}

/// How often a tenant asks again for a consumer that does not exist yet.
pub const BIND_RETRY: Duration = Duration::from_secs(1);

/// The answer to a consumer info request for a consumer that does not exist.
fn consumer_info_not_found() -> ConsumerInfoErrorKind {
    ConsumerInfoErrorKind::NotFound
}
