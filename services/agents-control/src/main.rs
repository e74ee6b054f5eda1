//! agents-control: parses the command line and runs it (behaviour lives in the library).
use clap::Parser;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    // Logs go to stderr so that `code` prints nothing but the code on stdout.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match agents_control::cli::Cli::parse().run().await {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("agents-control: error: {}", failure.0);
            ExitCode::FAILURE
        }
    }
}
