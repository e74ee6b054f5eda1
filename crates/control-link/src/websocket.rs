//! The WebSocket configuration of a device's link. tungstenite's defaults cost over 128 KiB per
//! connection (TOOLS.md); link frames are small, so small buffers suffice, and the message cap
//! is the protocol's frame cap so an oversized frame is refused before it is buffered whole.

use hyperhive_control_proto::link::MAX_FRAME_BYTES;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// Bytes read from the socket at a time; a frame larger than this just takes several reads.
pub const READ_BUFFER_BYTES: usize = 4 * 1024;
/// Bytes buffered before a write goes to the socket (each frame is flushed anyway).
pub const WRITE_BUFFER_BYTES: usize = 4 * 1024;
/// Unsent bytes allowed to pile up before sends fail: a few frames, so a stalled connection is
/// noticed instead of buffering without bound (the outbox keeps the messages for a resend).
pub const MAX_WRITE_BUFFER_BYTES: usize = 4 * MAX_FRAME_BYTES;

/// The configuration for `client_async_with_config` (and for servers holding many links).
pub fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(WRITE_BUFFER_BYTES)
        .max_write_buffer_size(MAX_WRITE_BUFFER_BYTES)
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
}
