//! An S3 server on a free loopback port, with one bucket: moto or SeaweedFS, chosen by each test.
//!
//! - [`S3Server::SeaweedFs`] is a production server: its conditional writes are atomic under
//!   races and it checks the access key. Tests of race-freedom and of credentials use it.
//! - [`S3Server::Moto`] is a second, independent implementation of the protocol (it accepts any
//!   key, and its conditional create is not atomic under load); it starts with less memory.
//!
//! Tests that need "the bucket is unreachable" freeze the server with [`S3::pause`] (or cut it
//! with a [`crate::chaos::ChaosProxy`]); moto keeps every object in memory, so a restart loses them all.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use nix::sys::signal::Signal;

use crate::ports::free_port;
use crate::process::Process;
use crate::seaweedfs::{self, Weed};
use crate::tools::{Tool, tool};
use crate::wait::wait_until;

/// moto imports boto and friends at start: slower than a Go binary, but well under this.
const MOTO_START_TIMEOUT: Duration = Duration::from_secs(20);

const REGION: &str = "us-east-1";
const BUCKET: &str = "hyperhive-test";

/// Which S3 implementation a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3Server {
    /// moto's server (`moto_server`): in memory, accepts any access key.
    Moto,
    /// SeaweedFS (`weed server`): atomic conditional writes, checks the access key.
    SeaweedFs,
}

impl S3Server {
    /// Both, for tests that must hold on each implementation.
    pub const ALL: [Self; 2] = [Self::Moto, Self::SeaweedFs];

    /// Test-only credentials; each server has its own pair, so a test can tell them apart.
    fn credentials(self) -> (&'static str, &'static str) {
        match self {
            Self::Moto => ("hyperhive-test-access", "hyperhive-test-secret"),
            Self::SeaweedFs => ("hyperhive-seaweed-access", "hyperhive-seaweed-secret"),
        }
    }
}

impl std::fmt::Display for S3Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Moto => "moto",
            Self::SeaweedFs => "SeaweedFS",
        })
    }
}

/// A running S3 server with the bucket [`S3::bucket`].
#[derive(Debug)]
pub struct S3 {
    server: S3Server,
    port: u16,
    running: Running,
}

#[derive(Debug)]
enum Running {
    Moto(Process),
    SeaweedFs(Weed),
}

impl S3 {
    /// Starts `server` on free loopback ports and creates the bucket.
    ///
    /// # Errors
    /// When the server's binary is missing (run scripts/setup), it does not become ready, or the
    /// bucket cannot be created.
    pub async fn start(server: S3Server) -> anyhow::Result<Self> {
        let (access_key, secret_key) = server.credentials();
        let (port, running, timeout) = match server {
            S3Server::Moto => {
                let port = free_port();
                let mut process = Process::builder(tool(Tool::MotoServer)?)
                    .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                    .start("moto_server")?;
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                process.wait_for_http_ok(addr, "/moto-api/", MOTO_START_TIMEOUT).await?;
                (port, Running::Moto(process), MOTO_START_TIMEOUT)
            }
            S3Server::SeaweedFs => {
                let weed = Weed::start(access_key, secret_key).await?;
                (weed.s3_port, Running::SeaweedFs(weed), seaweedfs::START_TIMEOUT)
            }
        };
        let s3 = Self { server, port, running };
        s3.create_bucket(timeout).await?;
        Ok(s3)
    }

    /// Creates the bucket and writes a first object, retrying while the server settles:
    /// SeaweedFS answers health checks before its master has elected itself and assigned volumes.
    async fn create_bucket(&self, timeout: Duration) -> anyhow::Result<()> {
        let client = self.client();
        let last_error = std::cell::RefCell::new(String::new());
        let what = format!("{} to create bucket {BUCKET}", self.server);
        let ready = wait_until(&what, timeout, || {
            let client = client.clone();
            let last_error = &last_error;
            async move {
                match create_and_write(&client).await {
                    Ok(()) => Some(()),
                    Err(err) => {
                        *last_error.borrow_mut() = err;
                        None
                    }
                }
            }
        })
        .await;
        ready.with_context(|| format!("on {} ({}); last error: {}", self.server, self.endpoint(), last_error.borrow()))
    }

    /// Which implementation this is.
    pub fn server(&self) -> S3Server {
        self.server
    }

    /// The access key this server accepts (SeaweedFS refuses any other; moto takes any).
    pub fn access_key(&self) -> &'static str {
        self.server.credentials().0
    }

    /// The secret key that goes with [`S3::access_key`].
    pub fn secret_key(&self) -> &'static str {
        self.server.credentials().1
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
            ("AWS_ACCESS_KEY_ID", self.access_key().to_owned()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key().to_owned()),
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
            .credentials_provider(Credentials::new(
                self.access_key(),
                self.secret_key(),
                None,
                None,
                "hyperhive-testkit",
            ))
            .force_path_style(true)
            .http_client(http_client())
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// Freezes the server (SIGSTOP): connections open but nothing answers, as when a bucket is
    /// unreachable. Its data is kept.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.process().signal(Signal::SIGSTOP)
    }

    /// Thaws a paused server (SIGCONT).
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        self.process().signal(Signal::SIGCONT)
    }

    /// The server process.
    pub fn process(&mut self) -> &mut Process {
        match &mut self.running {
            Running::Moto(process) => process,
            Running::SeaweedFs(weed) => &mut weed.process,
        }
    }
}

/// The SDK crates have no TLS feature here (the workspace gives them its own hyper 1 / rustls
/// 0.23 client, as `hyperhive_object_store::s3::https_client` does): the kit's clients need one too.
fn http_client() -> aws_sdk_s3::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https()
}

/// Creates the bucket (if absent) and writes and deletes one object: the server is ready then.
async fn create_and_write(client: &aws_sdk_s3::Client) -> Result<(), String> {
    match client.create_bucket().bucket(BUCKET).send().await {
        Ok(_) => {}
        Err(err) if err.as_service_error().is_some_and(|e| e.is_bucket_already_owned_by_you()) => {}
        Err(err) => return Err(format!("{:?}", err.into_service_error())),
    }
    let key = ".testkit-ready";
    let body = Vec::new().into();
    client.put_object().bucket(BUCKET).key(key).body(body).send().await.map_err(|err| format!("{err:?}"))?;
    client.delete_object().bucket(BUCKET).key(key).send().await.map_err(|err| format!("{err:?}"))?;
    Ok(())
}
