//! The per-client request rate: a token bucket. A client may send a burst of
//! [`BURST_SECONDS`] seconds' worth of requests at once, then `per_second` on average; a request
//! over the rate is answered 429 with the seconds to wait. Time comes from the caller, so tests
//! drive it without waiting.

use std::time::{Duration, Instant};

/// Seconds of requests a client may send at once after being quiet.
pub const BURST_SECONDS: u32 = 5;

/// One client's bucket.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_second: f64,
    capacity: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket refilled at `per_second` (at least 1).
    pub fn new(per_second: u32, now: Instant) -> Self {
        let per_second = f64::from(per_second.max(1));
        let capacity = per_second * f64::from(BURST_SECONDS);
        Self { per_second, capacity, tokens: capacity, at: now }
    }

    /// Takes one request's token, or says how long until one is there.
    ///
    /// # Errors
    /// The wait, when the bucket is empty.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now.max(self.at);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_burst_then_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10, start);
        for _ in 0..50 {
            bucket.take(start).unwrap();
        }
        let wait = bucket.take(start).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert!(bucket.take(start + Duration::from_millis(99)).is_err());
        bucket.take(start + Duration::from_millis(100)).unwrap();
        // A long quiet refills only up to the burst.
        let later = start + Duration::from_secs(3600);
        for _ in 0..50 {
            bucket.take(later).unwrap();
        }
        assert!(bucket.take(later).is_err());
    }

    proptest! {
        /// Over any schedule of attempts, no more requests pass than the burst plus the rate
        /// times the time elapsed.
        #[test]
        fn never_more_than_the_burst_plus_the_rate(rate in 1u32..100, gaps in prop::collection::vec(0u64..200, 1..400)) {
            let start = Instant::now();
            let mut bucket = TokenBucket::new(rate, start);
            let mut now = start;
            let mut passed = 0u64;
            for gap in gaps {
                now += Duration::from_millis(gap);
                if bucket.take(now).is_ok() {
                    passed += 1;
                }
            }
            let allowed = f64::from(rate) * (f64::from(BURST_SECONDS) + (now - start).as_secs_f64());
            prop_assert!(passed as f64 <= allowed + 1e-6, "{passed} passed, {allowed} allowed");
        }
    }
}
