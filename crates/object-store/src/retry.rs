//! Bounded, jittered retries for store requests whose outcome was unknown.

use std::time::Duration;

/// How many times a request is sent before the store is declared unavailable.
pub(crate) const ATTEMPTS: u32 = 3;

/// Full-jitter backoff before attempt `attempt` (1-based retries): uniform in
/// `[0, 100 ms * 2^attempt]`, so racing copies do not retry in lockstep.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let ceiling_ms = 100u64 << attempt.min(4);
    Duration::from_millis(rand::random_range(0..=ceiling_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded() {
        for attempt in 0..10 {
            assert!(backoff(attempt) <= Duration::from_millis(1600));
        }
    }
}
