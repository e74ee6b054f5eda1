//! `agents-control store check` and `store copy`.

use super::{Failure, open_store};
use crate::config::{ConfigError, S3Args, StoreArgs, s3_settings};
use crate::copy::{self, Side};
use clap::{Args, Subcommand};
use hyperhive_object_store::probe::{self, Step};
use hyperhive_object_store::{S3Credentials, S3Settings, Store, StoreUrl};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Prove the store supports conditional create and replace, step by step: list, create,
    /// create again (must be refused), replace with a stale version (must be refused), replace,
    /// delete. Exits non-zero naming the first failing step.
    Check(StoreArgs),
    /// Copy every durable record (devices and pending codes, not copy membership) from one
    /// store to another. Idempotent; never overwrites a different record at the destination
    /// (reports it and exits non-zero).
    ///
    /// Each side has its own S3 settings, so the stores may be at different providers (MinIO to
    /// R2): --from-endpoint, --from-region, --from-path-style and the keys
    /// AGENTS_STORE_FROM_ACCESS_KEY_ID and AGENTS_STORE_FROM_SECRET_ACCESS_KEY, and the same with
    /// TO for --to. A side's setting left unset falls back to the shared one (AGENTS_STORE_ENDPOINT,
    /// AGENTS_STORE_REGION, AGENTS_STORE_PATH_STYLE; for keys, AWS_ACCESS_KEY_ID and the rest of
    /// the AWS SDK's chain).
    Copy(Box<CopyArgs>),
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to read: s3://bucket/prefix or file:///path.
    #[arg(long, env = "AGENTS_STORE_FROM", value_name = "URL")]
    from: String,
    /// The store to write: s3://bucket/prefix or file:///path.
    #[arg(long, env = "AGENTS_STORE_TO", value_name = "URL")]
    to: String,
    #[command(flatten)]
    from_s3: FromS3Args,
    #[command(flatten)]
    to_s3: ToS3Args,
    /// The shared settings: what a side uses for anything it does not set itself.
    #[command(flatten)]
    s3: S3Args,
}

/// One side's S3 settings; every one falls back to the shared setting when unset. Written once
/// for both sides because clap's derive needs literal names.
macro_rules! side_s3_args {
    ($name:ident, $side:literal, $endpoint:literal, $endpoint_env:literal, $region:literal, $region_env:literal,
     $path_style:literal, $path_style_env:literal, $key_id:literal, $key_id_env:literal, $secret:literal,
     $secret_env:literal) => {
        #[derive(Debug, Clone, Args)]
        pub struct $name {
            #[arg(id = $endpoint, long = $endpoint, env = $endpoint_env, value_name = "URL", help = concat!("The S3 endpoint of the ", $side, " store (default: AGENTS_STORE_ENDPOINT)."))]
            endpoint: Option<String>,
            #[arg(id = $region, long = $region, env = $region_env, value_name = "REGION", help = concat!("The region of the ", $side, " store's bucket (default: AGENTS_STORE_REGION)."))]
            region: Option<String>,
            #[arg(id = $path_style, long = $path_style, env = $path_style_env, value_name = "0|1", help = concat!("1 for path-style addresses at the ", $side, " store (default: AGENTS_STORE_PATH_STYLE)."))]
            path_style: Option<String>,
            #[arg(id = $key_id, long = $key_id, env = $key_id_env, value_name = "ID", help = concat!("The access key id for the ", $side, " store (default: the AWS SDK's chain)."))]
            access_key_id: Option<String>,
            #[arg(id = $secret, long = $secret, env = $secret_env, hide_env_values = true, value_name = "SECRET", help = "Its secret. Prefer the environment: command lines are visible to every user.")]
            secret_access_key: Option<String>,
        }

        impl $name {
            /// The side's settings over the shared ones; errors name the setting that is wrong.
            fn settings(&self, shared: &S3Args) -> Result<S3Settings, ConfigError> {
                // An error names the side's own setting when it is set, else the shared one.
                let name =
                    |own: &Option<String>, own_name, shared_name| if own.is_some() { own_name } else { shared_name };
                let mut settings = s3_settings(
                    (
                        self.endpoint.as_deref().or(shared.endpoint.as_deref()),
                        name(
                            &self.endpoint,
                            concat!($endpoint_env, " (--", $endpoint, ")"),
                            "AGENTS_STORE_ENDPOINT (--store-endpoint)",
                        ),
                    ),
                    (
                        self.region.as_deref().unwrap_or(&shared.region),
                        name(
                            &self.region,
                            concat!($region_env, " (--", $region, ")"),
                            "AGENTS_STORE_REGION (--store-region)",
                        ),
                    ),
                    (
                        self.path_style.as_deref().unwrap_or(&shared.path_style),
                        name(
                            &self.path_style,
                            concat!($path_style_env, " (--", $path_style, ")"),
                            "AGENTS_STORE_PATH_STYLE (--store-path-style)",
                        ),
                    ),
                )?;
                settings.credentials = credentials(
                    (self.access_key_id.as_deref(), concat!($key_id_env, " (--", $key_id, ")")),
                    (self.secret_access_key.as_deref(), concat!($secret_env, " (--", $secret, ")")),
                )?;
                Ok(settings)
            }
        }
    };
}

side_s3_args!(
    FromS3Args,
    "--from",
    "from-endpoint",
    "AGENTS_STORE_FROM_ENDPOINT",
    "from-region",
    "AGENTS_STORE_FROM_REGION",
    "from-path-style",
    "AGENTS_STORE_FROM_PATH_STYLE",
    "from-access-key-id",
    "AGENTS_STORE_FROM_ACCESS_KEY_ID",
    "from-secret-access-key",
    "AGENTS_STORE_FROM_SECRET_ACCESS_KEY"
);
side_s3_args!(
    ToS3Args,
    "--to",
    "to-endpoint",
    "AGENTS_STORE_TO_ENDPOINT",
    "to-region",
    "AGENTS_STORE_TO_REGION",
    "to-path-style",
    "AGENTS_STORE_TO_PATH_STYLE",
    "to-access-key-id",
    "AGENTS_STORE_TO_ACCESS_KEY_ID",
    "to-secret-access-key",
    "AGENTS_STORE_TO_SECRET_ACCESS_KEY"
);

/// A side's own keys: both or neither (then the AWS SDK's chain is used).
fn credentials(
    (id, id_name): (Option<&str>, &'static str),
    (secret, secret_name): (Option<&str>, &'static str),
) -> Result<Option<S3Credentials>, ConfigError> {
    let given = |value: Option<&str>| value.map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    match (given(id), given(secret)) {
        (None, None) => Ok(None),
        (Some(access_key_id), Some(secret_access_key)) => Ok(Some(S3Credentials { access_key_id, secret_access_key })),
        (Some(_), None) => Err(ConfigError::Invalid {
            variable: secret_name,
            reason: format!("missing, while {id_name} is set: give both or neither"),
        }),
        (None, Some(_)) => Err(ConfigError::Invalid {
            variable: id_name,
            reason: format!("missing, while {secret_name} is set: give both or neither"),
        }),
    }
}

pub async fn run(command: StoreCommand) -> Result<ExitCode, Failure> {
    match command {
        StoreCommand::Check(args) => check(args).await,
        StoreCommand::Copy(args) => copy_stores(*args).await,
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
    let from_settings = args.from_s3.settings(&args.s3);
    let to_settings = args.to_s3.settings(&args.s3);
    let source = open_side(Side::Source, &args.from, from_settings).await?;
    let destination = open_side(Side::Destination, &args.to, to_settings).await?;
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

/// Opens one side; any error names the side.
async fn open_side(
    side: Side,
    url: &str,
    settings: Result<S3Settings, ConfigError>,
) -> Result<Arc<dyn Store>, Failure> {
    let named = |error: String| Failure(format!("{side}: {error}"));
    let url = StoreUrl::parse(url).map_err(|e| named(e.to_string()))?;
    // Settings matter only to an s3:// side: a bad one is no error for a directory.
    let settings = match (&url, settings) {
        (StoreUrl::S3 { .. }, settings) => settings.map_err(|e| named(e.to_string()))?,
        (StoreUrl::File { .. }, _) => S3Settings::default(),
    };
    hyperhive_object_store::open(&url, &settings).await.map_err(|e| named(e.to_string()))
}
