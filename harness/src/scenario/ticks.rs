//! `ticks/cost`: what the engine's clock thread costs an idle correlator (issue 20).
//!
//! The default clock sends every context a tick `tick_rate` times a second; each tick is an inbox
//! entry, and a context that was parked wakes for it. With no input at all, this scenario measures
//! per `tick_rate` of 10, 100 and 1,000 ticks a second, and without a clock thread
//! (`external_time`, the reference), with 1 and 4 contexts:
//! * `idle_cpu[RATE,Nctx]`: the CPU time of the whole process (`getrusage(RUSAGE_SELF)`, user +
//!   system, every thread: clock, contexts, the parked main thread) over a fixed window, as a
//!   percentage of one core;
//! * `inbox_entries[RATE,Nctx]`: inbox entries the contexts took per second (the status
//!   counter `received`): the ticks, since nothing else is sent.
//!
//! The contexts use the default wait strategy (spin, yield, park), as a user gets it. There is no
//! target: the figures are reported (`REPORTED`) for `tick_rate`'s documentation. The checks: no
//! entry at all without a clock thread, and some with one.

use super::Scenario;

/// Registers `ticks/cost`.
pub fn register(v: &mut Vec<Scenario>) {
    #[cfg(not(feature = "engine"))]
    v.push(super::engine::absent("ticks/cost".into(), 1));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "ticks/cost",
        "idle process CPU and inbox entries per second at 10, 100 and 1,000 ticks/s (no input)",
        1,
        super::Family::Engine,
        measure::run,
    ));
}

#[cfg(feature = "engine")]
mod measure {
    use super::super::{Ev, Outcome, RunCtx};
    use crate::record::Better;
    use correlator::{ContextOptions, Correlator, PinningPlan};
    use std::time::{Duration, Instant};

    /// The clock rates measured; `None` is `external_time` (no clock thread), the reference.
    const RATES: [Option<u32>; 4] = [None, Some(10), Some(100), Some(1_000)];
    /// The context counts measured.
    const CONTEXTS: [usize; 2] = [1, 4];

    /// CPU time of the whole process so far (user + system), in nanoseconds.
    fn process_cpu_ns() -> u64 {
        // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF is always supported, and on
        // failure `ru` stays zero (the figure is then 0 and the window's difference too).
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        ns(ru.ru_utime) + ns(ru.ru_stime)
    }

    pub(super) fn run(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        let settle = Duration::from_millis(ctx.mode.pick(50, 300, 1_000));
        let window = Duration::from_millis(ctx.mode.pick(300, 1_000, 5_000));
        out.param("settle_ms", settle.as_millis() as u64);
        out.param("window_ms", window.as_millis() as u64);
        for contexts in CONTEXTS {
            for rate in RATES {
                let name = match rate {
                    Some(r) => format!("{r}/s,{contexts}ctx"),
                    None => format!("external,{contexts}ctx"),
                };
                let (cpu_pct, per_sec) = match idle(ctx, rate, contexts, settle, window) {
                    Ok(figures) => figures,
                    Err(e) => {
                        out.fail(format!("{name}: {e}"));
                        return out;
                    }
                };
                match rate {
                    None => out.check(per_sec == 0.0, || {
                        format!("{name}: {per_sec:.1} entries/s without a clock thread")
                    }),
                    Some(_) => out.check(per_sec > 0.0, || format!("{name}: no tick arrived")),
                }
                out.value(
                    &format!("idle_cpu[{name}]"),
                    "% of a core",
                    cpu_pct,
                    Better::Lower,
                );
                out.value(
                    &format!("inbox_entries[{name}]"),
                    "entries/s",
                    per_sec,
                    Better::Lower,
                );
            }
        }
        out.note(
            "REPORTED: no target; idle_cpu is the whole process (clock thread, contexts, parked \
             main thread), inbox_entries the ticks the contexts took",
        );
        out
    }

    /// One idle correlator: its process CPU in % of a core and its inbox entries per second over
    /// `window`, after `settle`.
    fn idle(
        ctx: &RunCtx,
        rate: Option<u32>,
        contexts: usize,
        settle: Duration,
        window: Duration,
    ) -> Result<(f64, f64), String> {
        let mut b = Correlator::<Ev>::builder().inbox_capacity(super::super::STREAM_CAPACITY);
        b = match rate {
            Some(r) => b.tick_rate(r),
            None => b.external_time(),
        };
        if ctx.map.pinned {
            b = b.pinning(PinningPlan::cores(ctx.map.cores.clone()));
        }
        let c = b.build().map_err(|e| format!("engine build failed: {e}"))?;
        for i in 1..contexts {
            c.create_context(ContextOptions::new(format!("idle-{i}")))
                .map_err(|e| format!("create_context: {e}"))?;
        }
        c.start();
        std::thread::sleep(settle);
        let (cpu0, t0, taken0) = (process_cpu_ns(), Instant::now(), c.status().totals.received);
        std::thread::sleep(window);
        let (cpu1, secs, taken1) = (
            process_cpu_ns(),
            t0.elapsed().as_secs_f64(),
            c.status().totals.received,
        );
        c.shutdown().map_err(|e| format!("shutdown: {e}"))?;
        let cpu_pct = 100.0 * cpu1.saturating_sub(cpu0) as f64 / (secs * 1e9);
        Ok((cpu_pct, taken1.saturating_sub(taken0) as f64 / secs))
    }
}
