//! The largest body each route reads. The controller refuses a larger one before buffering it;
//! a client can check before sending.

/// A schedule's create or change body: a 64 KiB prompt written with JSON escapes (up to six
/// bytes per byte) plus the other fields. Larger is 413.
pub const MAX_SCHEDULE_REQUEST_BYTES: usize = 512 * 1024;

/// A state change body: `{"state": "destroyed"}` with room to spare. Larger is 400.
pub const MAX_STATE_REQUEST_BYTES: usize = 1024;

/// `POST /api/agents`: a spec at its limits (a 16 KiB turn command and 64 environment values
/// of 16 KiB each) written with JSON escapes fits. Larger is 413.
pub const MAX_CREATE_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// A linked account's body: URLs, names and a token of at most 4 KiB each. Larger is 413.
pub const MAX_LINKED_REQUEST_BYTES: usize = 64 * 1024;

/// An agent's labels change (`PATCH /api/agents/{name}/labels`): 32 labels with 63-byte keys and
/// values written with JSON escapes, and room to spare. Larger is 413.
pub const MAX_LABELS_REQUEST_BYTES: usize = 8 * 1024;

/// A prompt's body (`POST /api/agents/{name}/todos`, `POST /api/todos`): a 64 KiB prompt written
/// with JSON escapes, and up to a thousand agent names. Larger is 413.
pub const MAX_PROMPT_REQUEST_BYTES: usize = 512 * 1024;

/// A secret variable's value, the raw body of `PUT /api/agents/{name}/secrets/{VAR}` and
/// `PUT /api/secrets/{VAR}`: the same bound as an agent's env file takes
/// (`hyperhive_hive_proto::env_secrets::MAX_VALUE_BYTES`). Larger is 413.
pub const MAX_SECRET_VALUE_BYTES: usize = hyperhive_hive_proto::env_secrets::MAX_VALUE_BYTES;
