//! The control plane in front of a controller, as the remote and soak benchmarks run it: three
//! agents-control copies behind Caddy sharing a bucket (the test kit's `Cluster`), a JWT-mode
//! NATS, and the `swarm-controller` binary paired as a host (`SWARM_REMOTE_RATE=10000`, so the
//! per-client rate never throttles), with a client paired and linked straight to a copy other
//! than the controller's. No hive runs unless the benchmark adds one.
//!
//! Included with `#[path]` next to `tests/common` (it uses its `pair` and `daemon_process`).
#![allow(dead_code)] // each benchmark uses a different part of this module

use std::path::PathBuf;
use std::time::Duration;

use hyperhive_control_link::Identity;
use hyperhive_testkit::control_plane::Cluster;
use hyperhive_testkit::control_plane::device::Device;
use hyperhive_testkit::{NatsJwt, Process, project_binary, wait_until};
use serde_json::Value;
use swarmctl::remote::RemoteApi;
use swarmctl::{Api, client};

use super::common;

const SOON: Duration = Duration::from_secs(30);

/// The running stack; everything stops when it is dropped.
pub struct RemoteStack {
    pub cluster: Cluster,
    pub nats: NatsJwt,
    dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub controller: Process,
    /// The controller's device id on the control plane.
    pub controller_id: String,
    /// Index in `cluster.copies` of the copy the controller is linked to, and of another one.
    pub near: usize,
    pub far: usize,
    /// A client device linked to the far copy.
    pub laptop: Device,
}

impl RemoteStack {
    /// Starts it; `extra_env` is added to the controller's environment.
    pub async fn start(extra_env: &[(&str, &str)]) -> RemoteStack {
        // The copies run the debug build the tests use; say so early if it is missing.
        project_binary("agents-control").unwrap_or_else(|e| panic!("{e:#}"));
        let mut cluster = Cluster::start().await;
        let identity = cluster.dir().join("control-identity.json");
        let code = cluster.code("--host", &[]).await;
        let paired = common::pair(&code, &["--name", "swarm", "--identity", identity.to_str().unwrap()]);
        assert!(paired.status.success(), "pair: {}", String::from_utf8_lossy(&paired.stderr));
        let nats = NatsJwt::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let hives = dir.path().join("hives.json");
        std::fs::write(&hives, r#"{"h1": {"description": "bench"}}"#).unwrap();
        // The socket's directory must hold nothing else.
        let socket = dir.path().join("run/controller.sock");
        let mut env = vec![
            ("SWARM_CONTROL_IDENTITY", identity.to_str().unwrap()),
            ("SWARM_REMOTE_RATE", "10000"),
            ("SWARM_HIVES_FILE", hives.to_str().unwrap()),
            ("NO_COLOR", "1"),
        ];
        env.extend_from_slice(extra_env);
        let mut controller = common::daemon_process(&nats, &socket, &env).await;
        controller.wait_for_log("control link up", SOON).await.unwrap();
        let link = health(&socket).await["control_link"].clone();
        assert_eq!(link["state"], "up", "{link}");
        let controller_id = link["device_id"].as_str().unwrap().to_owned();
        let copy = link["copy"].as_str().unwrap();
        let near = cluster.copies.iter().position(|c| c.name == copy).expect("the controller's copy");
        let far = cluster.copies.iter().position(|c| c.name != copy).unwrap();
        let laptop = cluster.pair("--client", "laptop").await.altered("direct", on_copy(&cluster, far));
        // Every copy knows every device (and the far copy lists the hosts to its clients).
        cluster.wait_registry_read().await;
        RemoteStack { cluster, nats, dir, socket, controller, controller_id, near, far, laptop }
    }

    /// The stack's own directory, removed with it.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The controller's socket as an API.
    pub fn socket_api(&self) -> Api {
        Api::Socket(self.socket.clone())
    }

    /// `device`'s identity pointed straight at copy `index` (no proxy, no pin).
    pub fn on_copy(&self, index: usize) -> impl Fn(&mut Identity) + use<> {
        on_copy(&self.cluster, index)
    }

    /// The laptop's API: one link through the far copy to the controller.
    pub async fn remote_api(&self) -> Api {
        // Should a listing still miss the controller, try again.
        let remote = wait_until("the controller listed to the client", SOON, || async {
            RemoteApi::connect(&self.laptop.identity, Some(&self.controller_id)).await.ok()
        })
        .await
        .unwrap();
        Api::Remote(remote)
    }
}

fn on_copy(cluster: &Cluster, index: usize) -> impl Fn(&mut Identity) + use<> {
    let addr = cluster.copies[index].addr;
    move |identity: &mut Identity| {
        identity.control_url = format!("http://{addr}");
        identity.pin = None;
    }
}

/// The controller's `/healthz`.
pub async fn health(socket: &std::path::Path) -> Value {
    let api = Api::Socket(socket.to_owned());
    serde_json::from_slice(&client::request(&api, hyper::http::Method::GET, "/healthz", None, None).await.unwrap())
        .unwrap()
}
