//! Time, passed in so expiry and sweeping are tested with a fake clock.

use std::sync::Mutex;
use time::OffsetDateTime;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct FakeClock(Mutex<OffsetDateTime>);

impl FakeClock {
    pub fn at(start: OffsetDateTime) -> FakeClock {
        FakeClock(Mutex::new(start))
    }

    pub fn advance(&self, by: std::time::Duration) {
        *self.0.lock().expect("clock lock") += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().expect("clock lock")
    }
}
