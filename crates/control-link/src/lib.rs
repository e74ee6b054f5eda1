//! The device side of the control-plane link: everything a window, a phone
//! or a host needs to hold a link to agents-control, and the connect loop that ties them to a socket.
//!
//! # Layout
//! - [`tls`]: the TLS client configuration; with a pin, only a certificate with that key is
//!   accepted, whatever the system trust store says.
//! - [`handshake`]: the device's half of the mutual authentication, over the frames.
//! - [`identity`]: pairing around `POST /v1/pair`, and the identity file (mode 0600).
//! - [`backoff`]: jittered exponential reconnect delays.
//! - [`outbox`] (sender) and [`inbox`] (receiver): end-to-end acks, resend after reconnect and
//!   duplicate suppression, so a message reaches the application exactly once, in order.
//! - [`websocket`]: the WebSocket configuration (small buffers, the frame size cap).
//! - [`transport`] (TCP or TLS to the control URL), [`pair_client`] (`POST /v1/pair`) and
//!   [`connect`] (the connect loop, with commands in and events out) tie these to a socket.
//!
//! The protocol is written down in `docs/control-plane/link-protocol.md`.

pub mod backoff;
pub mod connect;
pub mod handshake;
pub mod identity;
pub mod inbox;
pub mod outbox;
pub mod pair_client;
pub mod tls;
pub mod transport;
pub mod websocket;

pub use backoff::Backoff;
pub use handshake::{AwaitingWelcome, HandshakeError};
pub use hyperhive_control_proto::pair::DeviceName;
pub use identity::{Identity, IdentityError, PendingPairing, start_pairing};
pub use inbox::{Inbox, Receipt};
pub use outbox::{NotPushed, Outbox};
pub use tls::{Pin, PinError, tls_client_config, tls_client_config_with_roots};
pub use websocket::websocket_config;
