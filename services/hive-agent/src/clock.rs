//! The wall clock, injected so the ticker can be driven by a fake one in tests.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use time::OffsetDateTime;

/// Reads the time (UTC, whole seconds).
pub trait Clock: Debug + Send + Sync + 'static {
    /// Now.
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        hyperhive_schedule::whole_seconds_utc(OffsetDateTime::now_utc())
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug, Clone)]
pub struct FakeClock(Arc<Mutex<OffsetDateTime>>);

impl FakeClock {
    /// A clock showing `at`.
    pub fn new(at: OffsetDateTime) -> Self {
        Self(Arc::new(Mutex::new(at)))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: OffsetDateTime) {
        *self.0.lock().expect("clock lock") = at;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().expect("clock lock")
    }
}
