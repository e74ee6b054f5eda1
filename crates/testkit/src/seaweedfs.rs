//! SeaweedFS (`weed server`): a production S3 server whose conditional writes hold under races.
//!
//! One `weed server` process runs a master, a volume server, a filer and the S3 gateway. Each
//! binds an HTTP and a gRPC port, and some extras bind fixed ports unless turned off (the Iceberg
//! and Lance catalogs: 8181 and 9101; gRPC ports default to HTTP port + 10000), so two instances
//! would collide: every port here is free, explicit and on 127.0.0.1. Its data lives in a temp
//! dir; unlike moto, an identity file makes it check the access key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::{Tool, tool};

/// Four servers in one Go process, with a master election: a few seconds on an idle machine.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The servers in one `weed server` process; each has a gRPC port.
const SERVERS: [&str; 4] = ["master", "volume", "filer", "s3"];

/// A started `weed server` and what it needs to outlive: its data dir and ports.
#[derive(Debug)]
pub(crate) struct Weed {
    // Field order is drop order: the process dies before its dir is removed.
    pub(crate) process: Process,
    pub(crate) s3_port: u16,
    grpc_ports: Vec<u16>,
    _dir: TempDir,
}

impl Weed {
    /// Starts `weed server` with S3 on a free port, accepting only `access_key`/`secret_key`.
    pub(crate) async fn start(access_key: &str, secret_key: &str) -> anyhow::Result<Self> {
        let dir =
            tempfile::Builder::new().prefix("hyperhive-seaweedfs-").tempdir().context("creating the SeaweedFS dir")?;
        let data = dir.path().join("data");
        // glog writes its files to TMPDIR: keep them with the rest.
        let tmp = dir.path().join("tmp");
        for sub in [&data, &tmp] {
            std::fs::create_dir(sub).with_context(|| format!("creating {}", sub.display()))?;
        }
        let identities = dir.path().join("s3.json");
        std::fs::write(&identities, identities_json(access_key, secret_key)).context("writing the S3 identities")?;

        let s3_port = free_port();
        let grpc_ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
        let mut args = vec![
            format!("-dir={}", data.display()),
            "-ip=127.0.0.1".to_owned(),
            "-ip.bind=127.0.0.1".to_owned(),
            format!("-master.port={}", free_port()),
            format!("-volume.port={}", free_port()),
            format!("-filer.port={}", free_port()),
            "-s3".to_owned(),
            format!("-s3.port={s3_port}"),
            format!("-s3.config={}", identities.display()),
            format!("-filer.localSocket={}", socket(dir.path(), "filer")),
            format!("-s3.localSocket={}", socket(dir.path(), "s3")),
        ];
        for (server, port) in SERVERS.iter().zip(&grpc_ports) {
            args.push(format!("-{server}.port.grpc={port}"));
        }
        let weed = tool(Tool::Weed)?;
        args.extend(known_flags(&weed, &OPTIONAL_FLAGS));
        let mut process = Process::builder(&weed)
            .arg("server")
            .args(&args)
            .env("TMPDIR", &tmp)
            .current_dir(dir.path())
            .start("seaweedfs")?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], s3_port));
        process.wait_for_http_ok(addr, "/healthz", START_TIMEOUT).await?;
        Ok(Self { process, s3_port, grpc_ports, _dir: dir })
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.process.kill();
        // gRPC servers also listen on /tmp/seaweedfs-<server>-grpc-<port>.sock, a path that no
        // flag moves; remove this instance's ones so runs leave nothing behind.
        for (server, port) in SERVERS.iter().zip(&self.grpc_ports) {
            let _ = std::fs::remove_file(PathBuf::from(format!("/tmp/seaweedfs-{server}-grpc-{port}.sock")));
        }
    }
}

/// Flags of newer releases (4.x) that turn off what would bind fixed ports (the Iceberg and Lance
/// catalogs) or reach the Internet (telemetry). An older `weed` (a distribution's package) does not
/// know them and would refuse to start, so each is passed only when `weed server -h` lists it.
const OPTIONAL_FLAGS: [(&str, &str); 3] =
    [("s3.port.iceberg", "0"), ("s3.port.lance", "0"), ("master.telemetry", "false")];

fn known_flags(weed: &Path, flags: &[(&str, &str)]) -> Vec<String> {
    let help = std::process::Command::new(weed)
        .args(["server", "-h"])
        .output()
        .map(|out| format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        .unwrap_or_default();
    // Help lines read `  -name type` or `  -name` for a boolean.
    let listed = |name: &str| help.lines().any(|line| line.split_whitespace().next() == Some(&format!("-{name}")));
    flags.iter().filter(|(name, _)| listed(name)).map(|(name, value)| format!("-{name}={value}")).collect()
}

fn socket(dir: &Path, server: &str) -> String {
    dir.join(format!("{server}.sock")).display().to_string()
}

/// One identity with every S3 permission: requests signed with any other key are refused.
fn identities_json(access_key: &str, secret_key: &str) -> String {
    format!(
        r#"{{"identities":[{{"name":"hyperhive-test","credentials":[{{"accessKey":"{access_key}","secretKey":"{secret_key}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
    )
}
