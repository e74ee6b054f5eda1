//! The wall clock, behind a trait so time logic (`not_before` stamps) is tested with a fake one.

use std::sync::Mutex;

use hyperhive_schedule::whole_seconds_utc;
use time::OffsetDateTime;

/// A source of "now", in whole UTC seconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        whole_seconds_utc(OffsetDateTime::now_utc())
    }
}

/// The controller's clock as the job graph's timestamp source, so the graph's times agree with
/// the rest of the API (and follow a [`FakeClock`] in tests).
#[derive(Debug)]
pub struct JobqClock(pub std::sync::Arc<dyn Clock>);

impl hyperhive_jobq::Clock for JobqClock {
    fn now(&self) -> OffsetDateTime {
        self.0.now()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug)]
pub struct FakeClock(Mutex<OffsetDateTime>);

impl FakeClock {
    /// A clock standing at `t`.
    pub fn new(t: OffsetDateTime) -> Self {
        Self(Mutex::new(whole_seconds_utc(t)))
    }

    /// Moves the clock to `t`.
    pub fn set(&self, t: OffsetDateTime) {
        *self.0.lock().expect("clock lock") = whole_seconds_utc(t);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().expect("clock lock")
    }
}
