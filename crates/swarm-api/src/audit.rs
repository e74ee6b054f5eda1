//! `GET /api/audit`: the state-changing requests the controller took, newest first.

use serde::{Deserialize, Serialize};

use crate::roles::Role;

/// How a request reached the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Its unix socket.
    Socket,
    /// A paired client of the control plane.
    ControlPlane,
    /// The hive-gateway, for the SSO user it let in (or for itself, with no SSO user).
    Gateway,
}

/// One request as the audit stream keeps it: who, what, how it ended. Never a body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it was answered (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// Who sent it: the socket peer's user, `sso:<user>` for a user the gateway let in, or the
    /// paired client's device id.
    pub who: String,
    /// How it came.
    pub via: Via,
    /// The role it had (`null`: none).
    pub role: Option<Role>,
    /// The method.
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The answer's status.
    pub status: u16,
}

/// An entry with its place in the stream (`?before=` takes it to page back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditView {
    /// Its sequence in `AUDIT`.
    pub seq: u64,
    /// The entry, flattened beside `seq`.
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// `GET /api/audit[?limit&before&since]`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    /// The entries.
    pub entries: Vec<AuditView>,
    /// `?before=` for the next page, when there are older entries.
    pub next_before: Option<u64>,
}
