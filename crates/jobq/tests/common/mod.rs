//! What the queue tests share: a wall clock that follows tokio's (paused) clock, and ids.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::time::Duration;

use hyperhive_jobq::{Clock, JobId};
use time::OffsetDateTime;
use time::macros::datetime;
use tokio::time::Instant;

/// Where the test clock starts.
pub const T0: OffsetDateTime = datetime!(2026-11-30 12:00:00 UTC);

/// A wall clock that moves with tokio's clock: [`T0`] at its creation.
#[derive(Debug)]
pub struct TokioClock(Instant);

impl TokioClock {
    pub fn new() -> Self {
        Self(Instant::now())
    }
}

impl Clock for TokioClock {
    fn now(&self) -> OffsetDateTime {
        T0 + self.0.elapsed()
    }
}

pub fn id(s: &str) -> JobId {
    JobId::parse(s).unwrap()
}

/// T0 plus `secs` seconds.
pub fn at(secs: f64) -> OffsetDateTime {
    T0 + Duration::from_secs_f64(secs)
}

/// A deadline far enough for any test here (the clock is paused: it costs nothing).
pub fn far() -> Instant {
    Instant::now() + Duration::from_secs(24 * 3600)
}
