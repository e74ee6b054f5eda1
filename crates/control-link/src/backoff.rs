//! Reconnect delays: exponential from [`FIRST_DELAY`] to [`MAX_DELAY`], each drawn at random
//! from the upper half of its step ("equal jitter"). The random half spreads the devices of a
//! dead copy over time so the survivors see no stampede; the fixed half keeps a device from
//! hammering a copy that refuses it.

use std::time::Duration;

use rand::Rng;

/// The first retry's ceiling: a device whose copy died is back within a few round trips.
pub const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The ceiling of every delay: 2 s keeps a device whose copy died back on another within seconds.
pub const MAX_DELAY: Duration = Duration::from_secs(2);

/// The delays between reconnect attempts; [`Backoff::reset`] after a link is established.
#[derive(Debug)]
pub struct Backoff<R> {
    rng: R,
    /// Attempts since the last reset.
    attempt: u32,
}

impl<R: Rng> Backoff<R> {
    /// A backoff drawing its jitter from `rng` (seeded in tests, `rand::rng()` otherwise).
    pub fn new(rng: R) -> Self {
        Self { rng, attempt: 0 }
    }

    /// The ceiling of the next delay: [`FIRST_DELAY`] doubled per attempt, capped at
    /// [`MAX_DELAY`].
    pub fn ceiling(&self) -> Duration {
        // 2^5 * 100 ms already exceeds the cap: larger exponents only risk overflow.
        FIRST_DELAY.saturating_mul(1 << self.attempt.min(5)).min(MAX_DELAY)
    }

    /// How long to wait before the next attempt: between half the ceiling and the ceiling.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let half = ceiling / 2;
        half + half.mul_f64(self.rng.random::<f64>())
    }

    /// Call once a link is up (the handshake finished), so the next failure retries quickly.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn backoff(seed: u64) -> Backoff<StdRng> {
        Backoff::new(StdRng::seed_from_u64(seed))
    }

    #[test]
    fn first_delay_is_near_100ms_and_the_cap_near_2s() {
        let mut b = backoff(1);
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= FIRST_DELAY, "{first:?}");
        let later: Vec<_> = (0..20).map(|_| b.next_delay()).collect();
        assert!(later.iter().all(|d| *d <= MAX_DELAY), "{later:?}");
        assert!(later[10..].iter().all(|d| *d >= MAX_DELAY / 2), "{later:?}");
    }

    #[test]
    fn ceilings_double_until_the_cap() {
        let mut b = backoff(2);
        let mut ceilings = vec![];
        for _ in 0..7 {
            ceilings.push(b.ceiling().as_millis());
            b.next_delay();
        }
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn reset_starts_over() {
        let mut b = backoff(3);
        for _ in 0..10 {
            b.next_delay();
        }
        b.reset();
        assert!(b.next_delay() <= FIRST_DELAY);
    }

    #[test]
    fn devices_with_different_seeds_spread_out() {
        let firsts: std::collections::BTreeSet<_> = (0..50).map(|seed| backoff(seed).next_delay()).collect();
        assert!(firsts.len() > 40, "only {} distinct first delays of 50", firsts.len());
    }

    proptest! {
        #[test]
        fn every_delay_is_within_half_its_ceiling_and_the_cap(seed in any::<u64>(), attempts in 1usize..200, reset_at in 0usize..200) {
            let mut b = backoff(seed);
            for attempt in 0..attempts {
                if attempt == reset_at {
                    b.reset();
                }
                let ceiling = b.ceiling();
                let delay = b.next_delay();
                prop_assert!(delay >= ceiling / 2 && delay <= ceiling, "{delay:?} for ceiling {ceiling:?}");
                prop_assert!(delay <= MAX_DELAY);
            }
        }
    }
}
