//! `agents-control serve` (the default command).

use super::{Failure, open_store};
use crate::clock::SystemClock;
use crate::config::{self, IssuerArgs, LimitArgs};
use crate::control::Control;
use crate::membership::Membership;
use clap::Args;
use hyperhive_daemon::settings::{Check, Problem};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    control: IssuerArgs,
    /// The address to listen on (plain HTTP; TLS is the load balancer's job).
    #[arg(long, env = "AGENTS_CONTROL_LISTEN", default_value = "0.0.0.0:8791", value_name = "ADDR:PORT")]
    listen: String,
    /// The name windows and phones show for this control plane.
    #[arg(long = "name", env = "AGENTS_CONTROL_NAME", value_name = "NAME")]
    name: Option<String>,
    /// Where the other copies reach this one, e.g. http://cp2.internal:8791.
    #[arg(long = "peer-url", env = "AGENTS_CONTROL_PEER_URL", value_name = "URL")]
    peer_url: Option<String>,
    /// On SIGTERM, how long /readyz fails before the copy stops (give the load balancer one
    /// health-check interval to notice).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    drain: String,
    #[command(flatten)]
    limits: LimitArgs,
}

pub async fn run(args: ServeArgs) -> Result<ExitCode, Failure> {
    // Every setting is checked before anything is started, and every bad one is reported.
    let mut check = Check::default();
    let issuer = args.control.check(&mut check);
    let listen = config::checked(&mut check, config::parse_listen(&args.listen));
    if let Some(name) = &args.name
        && let Err(e) = hyperhive_control_proto::pair::validate_name(name)
    {
        check.problem(Problem::line("AGENTS_CONTROL_NAME (--name)", format!("AGENTS_CONTROL_NAME (--name) {e}")));
    }
    if let Some(peer) = &args.peer_url
        && let Err(e) = config::parse_control_url(Some(peer))
    {
        let line = e.to_string().replace("AGENTS_CONTROL_URL (--control-url)", "AGENTS_CONTROL_PEER_URL (--peer-url)");
        check.problem(Problem::line("AGENTS_CONTROL_PEER_URL (--peer-url)", line));
    }
    let drain = config::checked(&mut check, config::parse_duration("--drain", &args.drain));
    let limits = args.limits.check(&mut check);
    let (issuer, listen, drain, mut limits) =
        check.finish(|| Some((issuer?, listen?, drain?, limits?))).map_err(|p| Failure(p.to_string()))?.log_warnings();
    let open_files = crate::limits::raise_open_file_limit();
    let max_connections = crate::limits::connections_within(limits.max_connections, open_files);
    if max_connections < limits.max_connections {
        tracing::warn!(
            open_files,
            max_connections,
            "the open-file limit allows fewer connections than AGENTS_CONTROL_MAX_CONNECTIONS: raise LimitNOFILE"
        );
        limits.max_connections = max_connections;
    }
    let store = open_store(&args.control.store).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure(format!("AGENTS_CONTROL_LISTEN (--listen) {listen}: cannot listen ({e})")))?;
    let membership = Arc::new(Membership::new(super::hostname(), args.peer_url.clone()));
    let control = Arc::new(
        Control::new(store, issuer.key, Arc::new(SystemClock))
            .with_copy_name(membership.copy_id())
            .with_name(args.name)
            .with_public_address(issuer.control_url, issuer.pin)
            .with_limits(limits),
    );
    let shutdown = hyperhive_daemon::tasks::signals().map_err(|e| Failure(format!("handling SIGTERM: {e}")))?;
    crate::serve::run(control, membership, listener, shutdown, drain).await?;
    Ok(ExitCode::SUCCESS)
}
