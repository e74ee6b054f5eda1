//! moto's S3 server on a free loopback port, with one bucket.
//!
//! moto keeps every object in memory: a restart loses them all. Tests that need "the bucket is
//! unreachable" freeze it with [`S3::pause`] (or cut it with a [`crate::ChaosProxy`]) instead.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use nix::sys::signal::Signal;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::tool;

/// moto imports boto and friends at start: slower than a Go binary, but well under this.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Test-only credentials: moto accepts any, and checks that requests are signed.
const ACCESS_KEY: &str = "hyperhive-test-access";
const SECRET_KEY: &str = "hyperhive-test-secret";
const REGION: &str = "us-east-1";
const BUCKET: &str = "hyperhive-test";

/// A running S3 server with the bucket [`S3::bucket`].
#[derive(Debug)]
pub struct S3 {
    port: u16,
    process: Process,
}

impl S3 {
    /// Starts moto's server and creates the bucket.
    ///
    /// # Errors
    /// When `moto_server` is missing (run scripts/setup), does not become ready, or the bucket
    /// cannot be created.
    pub async fn start() -> anyhow::Result<Self> {
        let port = free_port();
        let mut process = Process::builder(tool("moto_server")?)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .start("moto_server")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        process.wait_for_http_ok(addr, "/moto-api/", START_TIMEOUT).await?;
        let s3 = Self { port, process };
        s3.client()
            .create_bucket()
            .bucket(BUCKET)
            .send()
            .await
            .with_context(|| format!("creating bucket {BUCKET} on {}", s3.endpoint()))?;
        Ok(s3)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The bucket created at start.
    pub fn bucket(&self) -> &str {
        BUCKET
    }

    /// `s3://<bucket>/<prefix>`, the form `AGENTS_STORE` takes.
    pub fn store_url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// The environment a process needs to reach this server with the AWS SDK.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AGENTS_STORE_ENDPOINT", self.endpoint()),
            ("AGENTS_STORE_REGION", REGION.to_owned()),
            ("AGENTS_STORE_PATH_STYLE", "1".to_owned()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    /// An SDK client for this server (path-style addressing, the test credentials).
    pub fn client(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(self.endpoint())
            .region(Region::new(REGION))
            .credentials_provider(Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "hyperhive-testkit"))
            .force_path_style(true)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// Freezes the server (SIGSTOP): connections open but nothing answers, as when a bucket is
    /// unreachable. Its data is kept.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.process.signal(Signal::SIGSTOP)
    }

    /// Thaws a paused server (SIGCONT).
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.process.signal(Signal::SIGCONT)
    }

    /// The server process.
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }
}
