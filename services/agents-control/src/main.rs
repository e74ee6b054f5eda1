//! agents-control: parses the command line and runs it (behaviour lives in the library).
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    // Logs go to stderr, so `code` prints nothing but the code on stdout.
    hyperhive_logging::init("info");
    match agents_control::cli::Cli::parse_env_and_args().run().await {
        Ok(code) => code,
        Err(failure) => {
            // One line per problem: a bad configuration lists every bad setting.
            for line in failure.0.lines() {
                eprintln!("agents-control: error: {line}");
            }
            ExitCode::FAILURE
        }
    }
}
