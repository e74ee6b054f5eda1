//! `agents-control store check` and `store copy`.

use super::{Failure, open_store};
use crate::config::{S3Args, StoreArgs};
use crate::copy;
use clap::{Args, Subcommand};
use hyperhive_object_store::probe::{self, Step};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Prove the store supports conditional create and replace, step by step: list, create,
    /// create again (must be refused), replace with a stale version (must be refused), replace,
    /// delete. Exits non-zero naming the first failing step.
    Check(StoreArgs),
    /// Copy every durable record (devices and pending codes, not copy membership) from one
    /// store to another. Idempotent; never overwrites a different record at the destination
    /// (reports it and exits non-zero). Both stores share the AGENTS_STORE_* S3 settings.
    Copy(CopyArgs),
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to read: s3://bucket/prefix or file:///path.
    #[arg(long, value_name = "URL")]
    from: String,
    /// The store to write: s3://bucket/prefix or file:///path.
    #[arg(long, value_name = "URL")]
    to: String,
    #[command(flatten)]
    s3: S3Args,
}

pub async fn run(command: StoreCommand) -> Result<ExitCode, Failure> {
    match command {
        StoreCommand::Check(args) => check(args).await,
        StoreCommand::Copy(args) => copy_stores(args).await,
    }
}

async fn check(args: StoreArgs) -> Result<ExitCode, Failure> {
    let store = open_store(&args).await?;
    println!("checking {}", store.describe());
    let result = probe::run(store.as_ref(), |step: Step| {
        println!("ok    {}", step.describe());
    })
    .await;
    match result {
        Ok(()) => {
            println!("the store honours conditional writes: copies can share it");
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            println!("FAIL  {}: {}", failure.step.describe(), failure.reason);
            Err(Failure(failure.to_string()))
        }
    }
}

async fn copy_stores(args: CopyArgs) -> Result<ExitCode, Failure> {
    let from = StoreArgs { url: Some(args.from), s3: args.s3.clone() };
    let to = StoreArgs { url: Some(args.to), s3: args.s3 };
    let (source, destination) = (
        open_store(&from).await.map_err(|e| Failure(format!("--from: {}", e.0)))?,
        open_store(&to).await.map_err(|e| Failure(format!("--to: {}", e.0)))?,
    );
    let report = copy::copy_records(source.as_ref(), destination.as_ref()).await?;
    println!(
        "copied {}, already there {}, conflicting {}",
        report.copied,
        report.already_there,
        report.conflicts.len()
    );
    if report.conflicts.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for key in &report.conflicts {
        eprintln!("conflict: {key} differs at the destination; left it unchanged");
    }
    Err(Failure(format!("{} record(s) differ at the destination and were not overwritten", report.conflicts.len())))
}
