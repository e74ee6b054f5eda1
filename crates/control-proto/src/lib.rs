//! Wire types of the hyperhive control plane, shared by the control
//! plane and every device so the two cannot drift apart.
//!
//! # Layout
//! - [`code`]: the pairing code token (versioned, one copy-pasteable string).
//! - [`pair`]: the `POST /v1/pair` request and response, and the messages each side signs.
//! - [`role`]: what a paired client may do on a host.
//! - [`DeviceKind`] and [`ErrorBody`], used by both.
//!
//! The format is written down in `docs/control-plane/protocol.md`.

pub mod code;
pub mod encoding;
pub mod link;
pub mod pair;
pub mod role;

use serde::{Deserialize, Serialize};

/// What a paired device is: a person's device (window or phone) or a machine serving agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Client,
    Host,
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Client => "client",
            DeviceKind::Host => "host",
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of every error response: `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}
