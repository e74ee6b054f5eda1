//! The API over the control plane: what a client (`swarmctl --via`) and the controller say to
//! each other inside the link's relayed messages (docs/swarm/remote.md, "Messages").
//!
//! A request is one `request` message, followed by `body` messages while `more` is true; an
//! answer is one `response` message (status and headers), followed by `body` messages while
//! `more` is true. A server-sent event route answers the same way: its events arrive as `body`
//! messages for as long as the stream lasts. Bodies travel as base64 in pieces of at most
//! [`PIECE_BYTES`], so every message stays well under the link's
//! [`MAX_BODY_BYTES`](hyperhive_control_proto::link::MAX_BODY_BYTES).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// Raw body bytes per message: 32 KiB is 43,692 characters of base64, leaving room in a 63 KiB
/// message for the headers ([`MAX_HEADER_BYTES`]) and the envelope.
pub const PIECE_BYTES: usize = 32 * 1024;

/// The most a request's headers may hold (names and values together).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The most headers one request may carry.
pub const MAX_HEADERS: usize = 64;

/// The longest path (with its query string).
pub const MAX_PATH_BYTES: usize = 2048;

/// The longest request id.
pub const MAX_ID_BYTES: usize = 64;

/// A name and a value.
pub type Header = (String, String);

/// What a client sends the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToController {
    /// A request: its method, path (with the query), headers and the first piece of its body.
    Request(RequestFrame),
    /// The next piece of a request's body.
    Body {
        id: String,
        body: String,
        #[serde(default)]
        more: bool,
    },
    /// The client no longer wants the answer (it stopped following a stream).
    Cancel { id: String },
}

/// A request's first message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFrame {
    pub id: String,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub headers: Vec<Header>,
    /// The whole body's length in bytes, when the client knows it (it always does): an
    /// oversized request is refused before any more of it arrives.
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub more: bool,
}

/// What the controller sends a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromController {
    /// The answer's status and headers, and the first piece of its body.
    Response {
        id: String,
        status: u16,
        #[serde(default)]
        headers: Vec<Header>,
        #[serde(default)]
        body: String,
        #[serde(default)]
        more: bool,
    },
    /// The next piece of an answer's body; `error` says why a stream ended early.
    Body {
        id: String,
        body: String,
        #[serde(default)]
        more: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A message the controller could not read as a request (no id to answer under).
    Refused { error: String },
}

/// Base64 of a body piece.
pub fn encode_piece(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of a body piece.
///
/// # Errors
/// When it is not base64, or decodes to more than [`PIECE_BYTES`].
pub fn decode_piece(text: &str) -> Result<Vec<u8>, String> {
    if text.len() > base64::encoded_len(PIECE_BYTES, true).unwrap_or(usize::MAX) {
        return Err(format!("a body piece is at most {PIECE_BYTES} bytes"));
    }
    STANDARD.decode(text).map_err(|e| format!("a body piece is not base64: {e}"))
}

/// Whether `id` may name a request: 1 to [`MAX_ID_BYTES`] letters, digits, `-` or `_`.
///
/// # Errors
/// What is wrong with it.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > MAX_ID_BYTES
        || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "a request id is 1 to {MAX_ID_BYTES} letters, digits, '-' or '_' (got {} bytes)",
            id.len()
        ));
    }
    Ok(())
}

/// A fresh request id: 128 random bits in hex.
pub fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Splits `body` into pieces of at most `first` bytes, then [`PIECE_BYTES`]; an empty body is
/// one empty piece.
pub fn pieces(body: &[u8], first: usize) -> Vec<&[u8]> {
    let first = first.min(body.len());
    let mut out = vec![&body[..first]];
    out.extend(body[first..].chunks(PIECE_BYTES));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyperhive_control_proto::link::MAX_BODY_BYTES;

    #[test]
    fn a_full_piece_with_full_headers_fits_in_one_link_message() {
        let headers: Vec<Header> =
            (0..MAX_HEADERS).map(|i| (format!("x-h{i}"), "v".repeat(MAX_HEADER_BYTES / MAX_HEADERS - 5))).collect();
        let frame = ToController::Request(RequestFrame {
            id: "i".repeat(MAX_ID_BYTES),
            method: "PATCH".into(),
            path: "/".repeat(MAX_PATH_BYTES),
            headers,
            size: Some(u64::MAX),
            body: encode_piece(&vec![0xff; PIECE_BYTES]),
            more: true,
        });
        let len = serde_json::to_vec(&frame).unwrap().len();
        assert!(len < MAX_BODY_BYTES, "{len} bytes");
    }

    #[test]
    fn pieces_cover_the_body_in_order() {
        let body: Vec<u8> = (0..PIECE_BYTES * 2 + 7).map(|i| (i % 251) as u8).collect();
        let parts = pieces(&body, 100);
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [100, PIECE_BYTES, PIECE_BYTES - 93]);
        assert_eq!(parts.concat(), body);
        assert_eq!(pieces(b"", 10), [b"" as &[u8]]);
    }

    #[test]
    fn ids_and_pieces_are_checked() {
        assert!(check_id(&new_id()).is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("a b").is_err());
        assert!(check_id(&"a".repeat(MAX_ID_BYTES + 1)).is_err());
        assert_eq!(decode_piece(&encode_piece(b"hello")).unwrap(), b"hello");
        assert!(decode_piece("not base64!").unwrap_err().contains("not base64"));
        assert!(decode_piece(&encode_piece(&vec![0; PIECE_BYTES + 3])).unwrap_err().contains("at most"));
    }
}
