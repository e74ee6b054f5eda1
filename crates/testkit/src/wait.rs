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
    poll(what, timeout, || {
        let attempt = check();
        async move { attempt.await.ok_or(()) }
    })
    .await
    .map_err(|(timed_out, ())| timed_out)
}

/// [`wait_until`] for a check that says why it failed: once `timeout` has passed, the error
/// also gives the last attempt's reason (a refusal the server gave, say).
///
/// # Errors
/// When the deadline passes; the error names `what`, how long, and the last reason.
pub async fn wait_until_ok<T, E, F, Fut>(what: &str, timeout: Duration, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    poll(what, timeout, check).await.map_err(|(timed_out, last)| timed_out.context(format!("the last attempt: {last}")))
}

/// The loop of both: the value, or the timeout's error with the last attempt's reason.
async fn poll<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, (anyhow::Error, E)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return Ok(value),
            Err(last) if Instant::now() >= deadline => {
                return Err((anyhow::anyhow!("timed out after {timeout:?} waiting for {what}"), last));
            }
            Err(_) => tokio::time::sleep(POLL_INTERVAL).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_check_that_keeps_failing_is_reported_with_its_last_reason() {
        let mut attempts = 0;
        let error = wait_until_ok("the answer", Duration::from_millis(100), || {
            attempts += 1;
            let n = attempts;
            async move { Err::<(), _>(format!("refusal {n}")) }
        })
        .await
        .unwrap_err();
        let text = format!("{error:#}");
        assert!(attempts > 1, "polled once only");
        assert!(text.contains("waiting for the answer"), "{text}");
        assert!(text.contains(&format!("the last attempt: refusal {attempts}")), "{text}");
    }

    #[tokio::test]
    async fn the_value_comes_back_once_the_check_passes() {
        let mut attempts = 0;
        let value = wait_until_ok("the third try", Duration::from_secs(5), || {
            attempts += 1;
            let n = attempts;
            async move { if n == 3 { Ok(n) } else { Err("not yet") } }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
        let none: anyhow::Result<()> = wait_until("nothing", Duration::from_millis(50), || async { None }).await;
        assert_eq!(none.unwrap_err().to_string(), "timed out after 50ms waiting for nothing");
    }
}
