//! nginx (Debian's) in front of a unix socket, as the hive-gateway runs it: `proxy_pass` to the
//! swarm controller's socket, buffering off so server-sent events flow as they come. Runs in the
//! foreground as one process (no master: a worker would outlive a killed master), with every
//! path (pid, logs, temp files) in its own temp dir.

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
        let binary = tool(Tool::Nginx)?;
        let dir = tempfile::tempdir()?;
        let port = free_port();
        let root = dir.path().display();
        // As root, nginx's workers would drop to `nobody`, who cannot reach a socket in a
        // private directory; a test run as root keeps them root.
        let user = if nix::unistd::geteuid().is_root() { "user root;" } else { "" };
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
        location / {{
            proxy_pass http://controller;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
"#,
            socket = socket.display()
        );
        let file = dir.path().join("nginx.conf");
        std::fs::write(&file, config)?;
        let process = Process::builder(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .start("nginx")
            .context("starting nginx")?;
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
