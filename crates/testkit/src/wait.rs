//! Waiting for a condition, with a deadline.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is polled. Short, because what is waited for (a port, a log line) is
/// usually ready within milliseconds, and the tests' time is spent here.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` until it yields `Some`, or fails once `timeout` has passed.
///
/// # Errors
/// When the deadline passes; the error names `what` was waited for and for how long.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
