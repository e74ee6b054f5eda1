//! Limits of the swarm's streams and buckets, so that one tenant cannot exhaust what all share
//! (see docs/swarm/security.md).
//!
//! Tenant accounts have no JetStream: everything they store goes through the swarm's streams,
//! whose per-subject limits ([`TODO_MAX_MSGS_PER_AGENT`], [`TODO_MAX_MSG_SIZE`]) refuse an
//! agent's messages at its own limit while every other agent keeps working. The accounts' own
//! limits are in `hyperhive-nats-creds`.

use std::time::Duration;

/// JetStream drops a second message with the same id within this window; a fired slot's todo has
/// one id however often it is published, so this is how long a double publish is absorbed.
pub const TODO_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

const MIB: i64 = 1024 * 1024;
const GIB: i64 = 1024 * MIB;

/// The largest todo (JSON: id, source, body) any agent's queue accepts, in bytes.
pub const TODO_MAX_MSG_SIZE: i32 = 128 * 1024;
/// Todos one agent's queue may hold; past it a publish to that queue is refused, and only that
/// queue's.
pub const TODO_MAX_MSGS_PER_AGENT: i64 = 100;
/// Bytes all queues together may hold. One agent holds at most [`TODO_MAX_MSGS_PER_AGENT`] ×
/// [`TODO_MAX_MSG_SIZE`] (12.5 MiB) of it, so it takes 80 agents each filling its queue with
/// the largest todos to fill it.
pub const TODO_MAX_BYTES: i64 = GIB;
/// Todos all queues together may hold: the full queues of 10,000 agents. The byte limit alone
/// would let a swarm of many agents fill `TODO` with millions of tiny todos, each costing the
/// server its per-message index and bookkeeping whatever its size.
pub const TODO_MAX_MSGS: i64 = 10_000 * TODO_MAX_MSGS_PER_AGENT;
/// Bytes each KV bucket may hold (but `forge-deliveries`).
pub const BUCKET_MAX_BYTES: i64 = 256 * MIB;
/// How long `forge-deliveries` remembers a delivery: far longer than a forge retries one (Forgejo
/// gives up within hours), so a replay inside it is refused and one after it finds every state
/// newer than its own (deliveries are applied only over older states).
pub const FORGE_DELIVERIES_MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);
/// Bytes `forge-deliveries` may hold: some 200,000 deliveries of 14 days. Full, a delivery is
/// still applied, unrecorded (logged).
pub const FORGE_DELIVERIES_MAX_BYTES: i64 = 32 * MIB;
/// The largest value of any KV bucket.
pub const BUCKET_MAX_VALUE_SIZE: i32 = 1024 * 1024;
/// Deploy messages one hive's queue may hold.
pub const DEPLOY_MAX_MSGS_PER_HIVE: i64 = 100;
/// Bytes all deploy queues together may hold.
pub const DEPLOY_MAX_BYTES: i64 = 256 * MIB;
/// Deploy messages all queues together may hold: the full queues of 1,000 hives.
pub const DEPLOY_MAX_MSGS: i64 = 1_000 * DEPLOY_MAX_MSGS_PER_HIVE;
/// The largest terminal chunk hive-agent publishes on `term.<agent>`; a longer write is split.
pub const TERM_CHUNK_MAX: usize = 16 * 1024;
/// The largest message `RELAY` accepts (a chunk, or a turn header, with room to spare).
pub const RELAY_MAX_MSG_SIZE: i32 = 32 * 1024;
/// Messages `RELAY` keeps per subject (one agent's terminal, or its turn headers): its recent
/// history, the oldest dropped first.
pub const RELAY_MAX_MSGS_PER_SUBJECT: i64 = 1_000;
/// Bytes `RELAY` keeps in all, the oldest dropped first: a very chatty agent can shorten the
/// others' history, never stop their output.
pub const RELAY_MAX_BYTES: i64 = 256 * MIB;
/// Turn records `TURNS` keeps per agent: its latest turns, the oldest dropped first.
pub const TURNS_MAX_MSGS_PER_AGENT: i64 = 200;
/// How long `TURNS` keeps a record.
pub const TURNS_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The largest turn record (a 4 KiB prompt and 16 KiB of output, JSON-escaped, with room).
pub const TURNS_MAX_MSG_SIZE: i32 = 128 * 1024;
/// Bytes `TURNS` keeps in all, the oldest dropped first. One agent holds at most
/// [`TURNS_MAX_MSGS_PER_AGENT`] records of which each is usually a few KiB.
pub const TURNS_MAX_BYTES: i64 = 256 * MIB;
/// How long `AUDIT` keeps an entry.
pub const AUDIT_MAX_AGE: Duration = Duration::from_secs(90 * 24 * 3600);
/// The largest audit entry (a request's who, method, path and outcome, with room).
pub const AUDIT_MAX_MSG_SIZE: i32 = 8 * 1024;
/// Bytes `AUDIT` keeps in all, the oldest dropped first: some 200,000 entries.
pub const AUDIT_MAX_BYTES: i64 = 64 * MIB;
/// Values each KV bucket keeps per key: the current one only.
pub const BUCKET_HISTORY: i64 = 1;
/// The most consumers each stream and bucket may have. nats-server 2.15 caps every stream at
/// 1,000 unless the stream sets its own (`default_max_consumers`; a value of 0 or less takes that
/// default), and `TODO` holds a durable consumer per agent: a swarm of 1,000 agents would reach
/// it and its next agents would get no queue. Sized for the largest swarm planned (100,000
/// agents, see docs/scale.md) and as many again for the short-lived consumers of listings,
/// watches and feeds.
pub const STREAM_MAX_CONSUMERS: i32 = 200_000;
/// What the swarm's streams reserve on the NATS server's disk together (nats-server refuses a
/// stream whose `max_bytes` does not fit in its `max_file_store`, which defaults to 75% of the
/// disk space free at its start): the TODO and DEPLOY queues, the RELAY, TURNS and AUDIT histories, eight buckets
/// (`schedule-definitions`, `agent-schedules`, `hive-status`, `agent-wanted`, `agents`,
/// `swarm-secrets`, `agent-icons`, `config-prs`) and `forge-deliveries`.
pub const SWARM_RESERVED_BYTES: i64 = TODO_MAX_BYTES
    + DEPLOY_MAX_BYTES
    + RELAY_MAX_BYTES
    + TURNS_MAX_BYTES
    + AUDIT_MAX_BYTES
    + 8 * BUCKET_MAX_BYTES
    + FORGE_DELIVERIES_MAX_BYTES;
