//! The wait before a retry: after failed attempt `n` (1-based) the ceiling is
//! `min(backoff_max, backoff_base * 2^(n-1))`, and the wait is drawn below it by the
//! configured [`Jitter`]. The jitter spreads the retries of jobs that failed together (one
//! server down, every agent's job against it failing at once) so the server does not see them
//! return as one burst.

use std::time::Duration;

use rand::Rng;

use crate::config::{Jitter, JobqConfig};

/// The ceiling of the wait after failed attempt `attempt` (1-based; 0 counts as 1).
pub fn ceiling(config: &JobqConfig, attempt: u32) -> Duration {
    // 2^31 * any positive base already overflows any sensible maximum: cap the exponent so the
    // multiplication saturates instead of wrapping.
    let exponent = attempt.saturating_sub(1).min(31);
    config.backoff_base.saturating_mul(1 << exponent).min(config.backoff_max)
}

/// The wait after failed attempt `attempt`, drawn with `rng` (seeded in tests).
pub fn delay(config: &JobqConfig, attempt: u32, rng: &mut impl Rng) -> Duration {
    let ceiling = ceiling(config, attempt);
    match config.jitter {
        Jitter::None => ceiling,
        Jitter::Full => ceiling.mul_f64(rng.random::<f64>()),
        Jitter::Equal => {
            let half = ceiling / 2;
            half + (ceiling - half).mul_f64(rng.random::<f64>())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn config(base_ms: u64, max_ms: u64, jitter: Jitter) -> JobqConfig {
        JobqConfig {
            backoff_base: Duration::from_millis(base_ms),
            backoff_max: Duration::from_millis(max_ms),
            jitter,
            ..JobqConfig::default()
        }
    }

    #[test]
    fn ceilings_double_until_the_maximum() {
        let c = JobqConfig::default();
        let secs: Vec<u64> = (1..=9).map(|n| ceiling(&c, n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(ceiling(&c, 0), ceiling(&c, 1));
        assert_eq!(ceiling(&c, u32::MAX), Duration::from_secs(60), "no overflow");
    }

    #[test]
    fn without_jitter_the_wait_is_the_ceiling() {
        let c = config(250, 1000, Jitter::None);
        let mut rng = StdRng::seed_from_u64(7);
        let waits: Vec<u128> = (1..=4).map(|n| delay(&c, n, &mut rng).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 1000]);
    }

    #[test]
    fn the_same_seed_draws_the_same_waits() {
        let c = config(1000, 60_000, Jitter::Equal);
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (1..=6).map(|n| delay(&c, n, &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    proptest! {
        #[test]
        fn every_wait_lies_within_its_jitter_bounds(
            base_ms in 1u64..10_000,
            extra_ms in 0u64..100_000,
            attempt in 0u32..200,
            seed: u64,
            jitter in prop_oneof![Just(Jitter::None), Just(Jitter::Full), Just(Jitter::Equal)],
        ) {
            let c = config(base_ms, base_ms + extra_ms, jitter);
            let ceiling = ceiling(&c, attempt);
            let n = attempt.max(1);
            let exact = u128::from(base_ms).saturating_mul(1u128 << (n - 1).min(100));
            prop_assert_eq!(ceiling.as_millis(), exact.min(u128::from(base_ms + extra_ms)));
            prop_assert!(ceiling >= c.backoff_base && ceiling <= c.backoff_max);
            let wait = delay(&c, attempt, &mut StdRng::seed_from_u64(seed));
            let floor = match jitter {
                Jitter::None => ceiling,
                Jitter::Full => Duration::ZERO,
                Jitter::Equal => ceiling / 2,
            };
            prop_assert!(wait >= floor && wait <= ceiling, "{:?} not in {:?}..={:?}", wait, floor, ceiling);
        }

        #[test]
        fn ceilings_never_shrink_from_one_attempt_to_the_next(base_ms in 1u64..10_000, extra_ms in 0u64..1_000_000, attempt in 0u32..100) {
            let c = config(base_ms, base_ms + extra_ms, Jitter::None);
            prop_assert!(ceiling(&c, attempt) <= ceiling(&c, attempt + 1));
        }
    }
}
