//! When a store certificate is renewed: once two thirds of its lifetime have passed, so a
//! renewal that fails has a third of the lifetime to be retried before the agent is locked out.

use std::time::SystemTime;

/// Whether the certificate valid from `not_before` to `not_after` should be renewed at `now`:
/// at least two thirds of its lifetime have passed, or its validity is empty or inverted.
pub fn renew_due(not_before: SystemTime, not_after: SystemTime, now: SystemTime) -> bool {
    let lifetime = match not_after.duration_since(not_before) {
        Ok(lifetime) if !lifetime.is_zero() => lifetime,
        _ => return true,
    };
    // lifetime - lifetime/3 is two thirds, rounded up to the nanosecond, and cannot overflow.
    match not_before.checked_add(lifetime - lifetime / 3) {
        Some(due) => now >= due,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use proptest::prelude::*;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_day_long_certificate_is_renewed_after_sixteen_hours() {
        let (start, end) = (at(1_000_000), at(1_000_000 + 86_400));
        assert!(!renew_due(start, end, at(1_000_000 + 16 * 3600 - 1)));
        assert!(renew_due(start, end, at(1_000_000 + 16 * 3600)));
        assert!(!renew_due(start, end, at(0)), "before its start");
        assert!(renew_due(start, end, at(2_000_000)), "long expired");
        assert!(renew_due(end, start, at(1_000_000)), "inverted");
        assert!(renew_due(start, start, at(0)), "empty");
    }

    proptest! {
        #[test]
        fn due_exactly_from_two_thirds_on(
            start in 0u64..4_000_000_000,
            lifetime_ms in 1u64..(400 * 86_400_000),
            offset_ms in 0u64..(800 * 86_400_000),
        ) {
            let not_before = UNIX_EPOCH + Duration::from_secs(start);
            let lifetime = Duration::from_millis(lifetime_ms);
            let not_after = not_before + lifetime;
            let now = not_before + Duration::from_millis(offset_ms);
            // Two thirds in exact integer arithmetic (nanoseconds), rounded up.
            let nanos = lifetime.as_nanos();
            let threshold = (2 * nanos).div_ceil(3);
            let elapsed = Duration::from_millis(offset_ms).as_nanos();
            prop_assert_eq!(renew_due(not_before, not_after, now), elapsed >= threshold);
            // Never due at the start; always due at the end.
            prop_assert!(!renew_due(not_before, not_after, not_before));
            prop_assert!(renew_due(not_before, not_after, not_after));
        }

        #[test]
        fn once_due_stays_due(
            start in 0u64..4_000_000_000,
            lifetime_s in 1u64..(400 * 86_400),
            first_s in 0u64..(800 * 86_400),
            later_s in 0u64..(800 * 86_400),
        ) {
            let not_before = at(start);
            let not_after = not_before + Duration::from_secs(lifetime_s);
            let first = not_before + Duration::from_secs(first_s);
            let later = first + Duration::from_secs(later_s);
            if renew_due(not_before, not_after, first) {
                prop_assert!(renew_due(not_before, not_after, later));
            }
        }
    }
}
