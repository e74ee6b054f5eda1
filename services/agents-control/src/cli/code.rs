//! `agents-control code --client | --host`: writes a pending code and prints it, alone, on stdout.

use super::{Failure, open_store};
use crate::clock::SystemClock;
use crate::codes::{self, CodeRequest};
use crate::config::{self, IssuerArgs};
use clap::Args;
use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::role::Role;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
#[group(id = "kind", required = true, multiple = false, args = ["client", "host"])]
pub struct CodeArgs {
    /// A code for a client (a window or a phone).
    #[arg(long)]
    client: bool,
    /// A code for a host (a machine serving agents).
    #[arg(long)]
    host: bool,
    /// A name suggested for the device that redeems it.
    #[arg(long = "name", value_name = "NAME")]
    device_name: Option<String>,
    /// What the client may do on the hosts it reaches: viewer (read), operator (also give
    /// agents work, pause and schedule them) or admin (also create and destroy agents, hold
    /// their keys). A client code only.
    #[arg(long, value_name = "ROLE", default_value = "operator", conflicts_with = "host")]
    role: Role,
    /// How long the code can be redeemed: 90s, 10m, 2h... at most 24h.
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    ttl: String,
    #[command(flatten)]
    control: IssuerArgs,
}

pub async fn run(args: CodeArgs) -> Result<ExitCode, Failure> {
    let kind = if args.host { DeviceKind::Host } else { DeviceKind::Client };
    let ttl = config::parse_ttl(&args.ttl)?;
    if let Some(name) = &args.device_name {
        hyperhive_control_proto::pair::validate_name(name).map_err(|e| Failure(format!("--name {e}")))?;
    }
    let issuer = args.control.issuer()?;
    let store = open_store(&args.control.store).await?;
    let made_by = format!("cli@{}", super::hostname());
    let role = (kind == DeviceKind::Client).then_some(args.role);
    let request = CodeRequest { kind, name: args.device_name, role, ttl, made_by };
    let code = codes::make_code(store.as_ref(), &SystemClock, &issuer, &request).await?;
    println!("{}", code.to_token());
    Ok(ExitCode::SUCCESS)
}
