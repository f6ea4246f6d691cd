//! Time sources used by every scenario.
//!
//! Wall time is `std::time::Instant` (the vDSO `clock_gettime(CLOCK_MONOTONIC)` on Linux),
//! expressed as nanoseconds since a process-wide epoch so that a timestamp fits in a `u64` field
//! of an event and can be compared across threads. `calibration/timer` measures what one read
//! costs on the machine, so that a reader can subtract it from the smallest latencies.
//! Thread CPU time comes from `CLOCK_THREAD_CPUTIME_ID` (used by `idle/wakeup`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Fixes the epoch; call once at process start so that the first timed read does not pay for it.
pub fn init() {
    let _ = EPOCH.get_or_init(Instant::now);
}

/// Nanoseconds since the process epoch (monotonic, comparable across threads).
#[inline]
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// CPU time consumed by the calling thread so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported on
    // Linux, and on failure `ts` stays zero, which the callers treat as "no figure".
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spins (with a spin hint) until `now_ns() >= deadline_ns`; sleeps first while the deadline is
/// more than `sleep_slack` away, so a paced sender does not burn a core between slow sends.
pub fn wait_until_ns(deadline_ns: u64, sleep_slack: Duration) {
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return;
        }
        let left = deadline_ns - now;
        if left > sleep_slack.as_nanos() as u64 {
            std::thread::sleep(Duration::from_nanos(left - sleep_slack.as_nanos() as u64));
        } else {
            std::hint::spin_loop();
        }
    }
}
