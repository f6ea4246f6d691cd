//! Logical time (SPEC §7).
//!
//! Each context has its own logical clock. It advances only when an inbox entry moves it (a clock
//! *tick*, or under event time a stamped event), so it keeps its order with the other entries
//! (R7.1), and everything a handler does is evaluated against it, never against wall time (R7.2).
//! Which entries move it is the builder's choice: see [`Time`]'s "Which clock" and
//! `event_time.rs`.
//!
//! Owns logical time. A leaf: imports nothing from the engine.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in a context's logical time: nanoseconds since the clock's origin.
///
/// # Which clock
/// Each context keeps its own logical clock (R7.1); `wait`, `at` and `within` are measured on it,
/// never on the wall clock (R7.2). What moves it is chosen on the builder:
///
/// | mode | moved by | an event is evaluated at | `within(50ms)` means |
/// |---|---|---|---|
/// | ticks ([`tick_rate`](crate::CorrelatorBuilder::tick_rate), the default, 10 per second) | the clock thread's ticks, time counted from `start()` | the time of the last tick its context took | "before the next tick" when shorter than a tick (a warning is logged) |
/// | [`external_time`](crate::CorrelatorBuilder::external_time) | [`InputHandle::send_time`](crate::InputHandle::send_time) | the last time sent | 50 ms of the times you send |
/// | [`event_time`](crate::CorrelatorBuilder::event_time) | each inbox event's own stamp ([`Event::time`](crate::Event::time)), and `send_time` | its own stamp (or the clock, if it has none or is late) | 50 ms of event time, at any replay speed |
///
/// In every mode the clock never goes back, timers fire in due-time order, each with the clock at
/// its own due time, and a `within(d)` started at `s` is exclusive: an event at exactly `s + d`
/// is too late.
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
