//! nginx (Debian's) in front of a unix socket, as the hive-gateway runs it: `proxy_pass` to the
//! swarm controller's socket, buffering off so server-sent events flow as they come; optionally
//! behind an SSO endpoint as modules/hive-gateway.nix writes it (`auth_request`, the SSO user and
//! groups passed on as `Remote-User` and `Remote-Groups` from its answer and never from the
//! client, the forge's webhook open). Runs in the foreground as one process (no master: a worker
//! would outlive a killed master), with every path (pid, logs, temp files) in its own temp dir.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::ports::free_port;
use crate::process::Process;
use crate::tools::{Tool, tool};
use crate::wait::wait_until;

/// A running nginx; stopped on drop.
#[derive(Debug)]
pub struct Nginx {
    port: u16,
    _process: Process,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx on a free loopback port, proxying every path to the HTTP server on `socket`.
    ///
    /// # Errors
    /// nginx is not installed (run scripts/setup), or did not come up.
    pub async fn in_front_of(socket: &Path) -> anyhow::Result<Nginx> {
        Self::start(socket, None).await
    }

    /// Starts nginx as the hive-gateway with SSO: every path but `/api/forge/webhook` must pass
    /// `auth_request` to `sso` (an `http://` URL answering 2xx with `Remote-User` and
    /// `Remote-Groups`, or 401), whose user and groups are passed on to `socket`; the client's
    /// own `Remote-User` and `Remote-Groups` never are. Runs as `uid`:`gid` (the test must be
    /// root), the unix user the controller sees as the gateway's.
    ///
    /// # Errors
    /// nginx is not installed (run scripts/setup), or did not come up.
    pub async fn behind_sso(socket: &Path, sso: &str, uid: u32, gid: u32) -> anyhow::Result<Nginx> {
        Self::start(socket, Some((sso, uid, gid))).await
    }

    async fn start(socket: &Path, sso: Option<(&str, u32, u32)>) -> anyhow::Result<Nginx> {
        let binary = tool(Tool::Nginx)?;
        let dir = tempfile::tempdir()?;
        let port = free_port();
        let root = dir.path().display();
        // As root, nginx's workers would drop to `nobody`, who cannot reach a socket in a
        // private directory; a test run as root keeps them root.
        let user = if nix::unistd::geteuid().is_root() && sso.is_none() { "user root;" } else { "" };
        let proxied = r#"
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 1h;"#;
        // As modules/hive-gateway.nix: the SSO user's headers only ever from `auth_request`.
        let locations = match sso {
            None => format!("location / {{ proxy_pass http://controller; {proxied} }}"),
            Some((sso, ..)) => format!(
                r#"location / {{
            proxy_pass http://controller; {proxied}
            auth_request /internal/authz;
            auth_request_set $sso_user $upstream_http_remote_user;
            auth_request_set $sso_groups $upstream_http_remote_groups;
            proxy_set_header Remote-User $sso_user;
            proxy_set_header Remote-Groups $sso_groups;
        }}
        location = /api/forge/webhook {{
            proxy_pass http://controller/api/forge/webhook; {proxied}
            proxy_set_header Remote-User "";
            proxy_set_header Remote-Groups "";
        }}
        location = /internal/authz {{
            internal;
            proxy_pass {sso};
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-Method $request_method;
            proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
        }}"#
            ),
        };
        let config = format!(
            r#"{user}
daemon off;
master_process off;
pid {root}/nginx.pid;
error_log {root}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream controller {{ server unix:{socket}; }}
    server {{
        listen 127.0.0.1:{port};
        {locations}
    }}
}}
"#,
            socket = socket.display()
        );
        let file = dir.path().join("nginx.conf");
        std::fs::write(&file, config)?;
        let mut builder = Process::builder(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .arg("-e")
            .arg(dir.path().join("error.log"));
        if let Some((_, uid, gid)) = sso {
            // Its own directory is its user's to write in.
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
            builder = builder.user(uid, gid);
        }
        let process = builder.start("nginx").context("starting nginx")?;
        let nginx = Nginx { port, _process: process, _dir: dir };
        wait_until("nginx listening", Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(drop)
        })
        .await?;
        Ok(nginx)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}
