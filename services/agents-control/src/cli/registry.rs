//! `agents-control clients`, `hosts` and `forget DEVICE_ID`.

use super::{Failure, open_store};
use crate::clock::SystemClock;
use crate::config::StoreArgs;
use crate::registry;
use clap::Args;
use hyperhive_control_proto::DeviceKind;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ForgetArgs {
    /// The device id, as `agents-control clients` or `hosts` shows it.
    #[arg(value_name = "DEVICE_ID")]
    id: String,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    kind: DeviceKind,
    name: &'a str,
    paired_at: &'a str,
}

pub async fn list(args: ListArgs, kind: DeviceKind) -> Result<ExitCode, Failure> {
    let store = open_store(&args.store).await?;
    let devices = registry::list(store.as_ref(), kind).await?;
    let rows: Vec<Row> =
        devices.iter().map(|d| Row { id: &d.id, kind: d.kind, name: &d.name, paired_at: &d.paired_at }).collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let name_width = rows.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max(4);
    println!("{:<33}  {:<name_width$}  PAIRED AT", "ID", "NAME");
    for row in &rows {
        println!("{:<33}  {:<name_width$}  {}", row.id, row.name, row.paired_at);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn forget(args: ForgetArgs) -> Result<ExitCode, Failure> {
    let store = open_store(&args.store).await?;
    let record = registry::forget(store.as_ref(), &SystemClock, args.id.trim()).await?;
    eprintln!("forgot {} {} ({})", record.kind, record.id, record.name);
    Ok(ExitCode::SUCCESS)
}
