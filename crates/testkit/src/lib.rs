//! The test kit: starts the real servers hyperhive's tests talk to, and the project's own
//! binaries, each on free loopback ports in a temp dir, and stops them on drop.
//!
//! # Layout
//! - [`tools`]: where binaries come from (`.tools/bin`, `PATH`, `target/`).
//! - [`process`]: a child process with its log captured to a file, readiness waits and signals.
//! - [`liveness`]: whether processes (e.g. what a child started) are still running.
//! - [`wait`]: polling a condition with a deadline (never a sleep standing in for a condition).
//! - [`nats`], [`s3`], [`caddy`]: `nats-server` (JetStream), an S3 server (moto or SeaweedFS), Caddy.
//! - [`nats_jwt`]: `nats-server` in decentralized JWT mode, one server or a JetStream cluster of
//!   several (`NatsJwt::start_cluster`), with credentials minted on demand.
//! - [`synapse`]: Synapse, a Matrix homeserver, with an admin account for the admin API.
//! - [`authelia_bridge`]: `swarm-authelia-bridge` with its users and token files.
//! - [`chaos`]: an in-process TCP proxy that can pass, stall or cut traffic.
//! - [`mitm`]: an in-process WebSocket man in the middle that records, injects and rewrites.
//! - [`forge`]: an in-process stand-in for a Forgejo/Gitea server's v1 API (no forge installs here).
//! - [`sse`]: a server-sent events client over a unix socket (the controller's relay routes).
//! - [`nginx`]: nginx in front of a unix socket, as the hive-gateway runs it.
//! - [`browser`]: headless Chromium over WebDriver (chromedriver), for the swarm UI.
//! - [`stats`]: percentiles and resident memory, for benchmarks.
//! - [`control_plane`]: three `agents-control serve` copies behind Caddy, and devices run as
//!   `agents-control device pair|connect` (the binary must be built).
//!
//! Every handle kills its process (SIGKILL, then reaps it) and removes its temp dir on drop,
//! also while a test panics; a panicking test gets the tail of each process log on stderr.

pub mod authelia_bridge;
pub mod browser;
pub mod caddy;
pub mod chaos;
pub mod client_cert_site;
pub mod control_plane;
pub mod forge;
pub mod hold_proxy;
pub mod liveness;
pub mod mitm;
pub mod nats;
pub mod nats_jwt;
pub mod nginx;
pub mod ports;
pub mod process;
pub mod s3;
mod seaweedfs;
pub mod sse;
pub mod stats;
pub mod synapse;
pub mod tools;
pub mod wait;

pub use authelia_bridge::AutheliaBridge;
pub use browser::Browser;
pub use caddy::Caddy;
pub use chaos::ChaosProxy;
pub use client_cert_site::ClientCertSite;
pub use forge::ForgeStandIn;
pub use hold_proxy::HoldProxy;
pub use liveness::{is_running, wait_until_none_running};
pub use mitm::{Toward, WsMitm};
pub use nats::Nats;
pub use nats_jwt::NatsJwt;
pub use nginx::Nginx;
pub use nix::sys::signal::Signal;
pub use ports::free_port;
pub use process::{Process, ProcessBuilder};
pub use s3::{S3, S3Server};
pub use sse::{SseClient, SseEvent};
pub use synapse::Synapse;
pub use tools::{Tool, project_binary, project_release_binary, tool, workspace_root};
pub use wait::{wait_until, wait_until_ok};
