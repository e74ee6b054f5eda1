//! The accounts' limits, so that one tenant cannot exhaust what all share (see
//! docs/swarm/security.md). The streams' own limits are in `hyperhive_nats_objects::limits`.
//!
//! Tenant accounts have no JetStream: everything they store goes through the swarm's streams,
//! whose per-subject limits refuse an agent's messages at its own limit while every other agent
//! keeps working. The swarm account's JetStream limits bound the disk all streams together may use.

use hyperhive_nats_objects::limits::BUCKET_MAX_VALUE_SIZE;

use crate::jwt::{AccountLimits, AccountSpec, JetStreamLimits, ResponseType, ServiceExport};
use crate::permissions::{JS_INFO, swarm_exports, swarm_stream_exports};

/// The swarm account: JetStream where every stream must declare its size (so the account's use
/// is the sum of its streams' `max_bytes`, reserved on the server when each is made), at most 64
/// streams, and the exports tenants import. Its storage is not capped beyond that: nats-server
/// refuses JetStream to an account whose cap exceeds the server's own store, which would tie the
/// account's JWT to the smallest server it may run on.
pub fn swarm_account() -> AccountSpec {
    AccountSpec {
        jetstream: Some(JetStreamLimits {
            disk_storage: -1,
            mem_storage: -1,
            streams: 64,
            consumers: -1,
            max_bytes_required: true,
        }),
        limits: AccountLimits::default(),
        exports: swarm_exports(),
        imports: Vec::new(),
        stream_exports: swarm_stream_exports(),
        stream_imports: Vec::new(),
        revoked_before: None,
    }
}

/// An agent's account: a few connections (one process, plus overlap during a restart), a few
/// subscriptions (its inbox and pull requests), and messages of at most a KV value. (A larger
/// message closes the connection; a todo over `TODO_MAX_MSG_SIZE` is refused by the stream
/// with an error instead.)
pub fn agent_account() -> AccountLimits {
    AccountLimits { connections: 4, subscriptions: 64, payload: i64::from(BUCKET_MAX_VALUE_SIZE) }
}

/// A hive's account: its hive-c0re's connections, and messages up to a KV value (its status).
pub fn hive_account() -> AccountLimits {
    AccountLimits { connections: 4, subscriptions: 256, payload: i64::from(BUCKET_MAX_VALUE_SIZE) }
}

/// The account tenants import [`JS_INFO`] from: no users, no JetStream, so the server answers
/// "JetStream not enabled". It has no connections at all.
pub fn no_jetstream_account() -> AccountSpec {
    AccountSpec {
        jetstream: None,
        limits: AccountLimits { connections: 0, subscriptions: 0, payload: 0 },
        exports: vec![ServiceExport { subject: JS_INFO.to_owned(), response: ResponseType::Singleton }],
        imports: Vec::new(),
        stream_exports: Vec::new(),
        stream_imports: Vec::new(),
        revoked_before: None,
    }
}
