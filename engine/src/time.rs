//! Logical time (SPEC §7).
//!
//! Each context has its own logical clock. It advances only when a clock *tick* is taken from the
//! context's inbox, so ticks keep their order with the other entries (R7.1), and everything a
//! handler does is evaluated against it, never against wall time (R7.2). Ticks come from the
//! correlator's clock thread (at the builder's `tick_rate`, default 10 per second, time counted from
//! `start()`), or, with `external_time()`, only from the user through
//! [`InputHandle::send_time`](crate::InputHandle::send_time), which makes runs replayable and tests
//! deterministic.
//!
//! Owns logical time. A leaf: imports nothing from the engine.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in a context's logical time: nanoseconds since the clock's origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);

    /// `n` nanoseconds after the origin.
    pub const fn from_nanos(n: u64) -> Self {
        Time(n)
    }

    /// `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Self {
        Time(ms.saturating_mul(1_000_000))
    }

    /// `s` seconds after the origin.
    pub const fn from_secs(s: u64) -> Self {
        Time(s.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the origin.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self + d`, or `None` if that lies beyond the end of logical time (`u64::MAX` ns): a timer
    /// due there never fires.
    pub(crate) fn checked_add(self, d: Duration) -> Option<Time> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Time)
    }

    /// The time since the origin as a `Duration`.
    pub fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub for Time {
    type Output = Duration;
    /// The duration from `rhs` to `self` (zero if `rhs` is later).
    fn sub(self, rhs: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(rhs.0))
    }
}

impl From<Duration> for Time {
    fn from(d: Duration) -> Self {
        Time::ZERO + d
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.as_secs_f64())
    }
}
