//! Engine scenarios: the correlator measured exactly like its baselines.
//!
//! Every scenario builds a fresh [`Correlator`] in the child process with a pinning plan that
//! maps context `i` (in creation order, `main` = 0) to thread slot `i` of the harness's plan, the
//! same rule the baselines use for their threads; external senders are harness threads pinned to
//! the remaining slots. Monitors are plain structs holding their counters; they publish progress
//! through [`Shared`] (a relaxed store every [`super::PUBLISH_EVERY`] events), sample the core
//! they run on (`sched_getcpu`, `Seen`) and hand their final figures and checks over in
//! `on_die` at the graceful shutdown, which by SPEC R8.1 processes everything accepted first.
//! A lost event therefore shows up as a count or sequence mismatch, or as a stalled window.

mod alloc;
mod burst;
mod flow;
mod latency;
mod route;

pub use alloc::register_alloc;
pub use burst::register_burst;
pub use flow::{register_backpressure, register_fanout, register_pipeline, register_stream};
pub use latency::{register_idle, register_openloop, register_pingpong};
pub use route::{register_listeners, register_route};

use super::{Ev, RunCtx, Shared};
use crate::pin::{current_cpu, Placement};
use correlator::{Correlator, PinningPlan, Scope, Status, WaitStrategy};
use std::sync::atomic::{AtomicI64, Ordering};

/// The kind of keyed events: only they have a key (`aux`), so that every other scenario's
/// dispatch is the plain kind lookup.
pub(crate) const KEYED_KIND: u32 = 1_000_000;

impl correlator::Event for Ev {
    type Kind = u32;
    #[inline]
    fn kind(&self) -> u32 {
        self.kind
    }
    #[inline]
    fn key(&self) -> Option<u64> {
        (self.kind == KEYED_KIND).then_some(self.aux)
    }
}

/// The scope type of a harness monitor.
pub(crate) type Cx<'a, M> = Scope<'a, Ev, M>;

/// Builds a correlator whose context `i` is pinned to the plan's slot `i`, with the engine's
/// default clock thread (10 ticks a second to every context, as a user gets it).
pub(crate) fn build(
    ctx: &RunCtx,
    capacity: usize,
    wait: WaitStrategy,
) -> Result<Correlator<Ev>, String> {
    build_with(ctx, capacity, wait, Clock::Default)
}

/// Where a scenario's correlator takes its logical time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The engine's clock thread at its default rate.
    Default,
    /// No clock thread (`external_time`): nothing but the measured path runs in the process.
    External,
}

/// [`build`] with a choice of clock.
pub(crate) fn build_with(
    ctx: &RunCtx,
    capacity: usize,
    wait: WaitStrategy,
    clock: Clock,
) -> Result<Correlator<Ev>, String> {
    let mut b = Correlator::<Ev>::builder()
        .inbox_capacity(capacity)
        .wait_strategy(wait);
    if clock == Clock::External {
        b = b.external_time();
    }
    if ctx.map.pinned {
        b = b.pinning(PinningPlan::cores(ctx.map.cores.clone()));
    }
    b.build().map_err(|e| format!("engine build failed: {e}"))
}

/// The strategy for contexts that must not lose time to waking up: busy-spin when every busy
/// thread of the scenario has a pinned core of its own; spin-then-yield when not pinning (the
/// scheduler may stack threads on one core); otherwise the engine's default (spin, yield, park),
/// so that an oversubscribed machine still makes progress (SPEC R1.3).
pub(crate) fn spin_or_park(ctx: &RunCtx, busy_threads: usize) -> WaitStrategy {
    if !ctx.fits(busy_threads) {
        WaitStrategy::SpinYieldPark
    } else if !ctx.map.pinned {
        WaitStrategy::SpinThenYield
    } else {
        WaitStrategy::BusySpin
    }
}

/// Stable name of a wait strategy for ids and metrics.
pub(crate) fn wait_name(w: WaitStrategy) -> &'static str {
    match w {
        WaitStrategy::BusySpin => "busy-spin",
        WaitStrategy::SpinThenYield => "spin-then-yield",
        WaitStrategy::SpinYieldPark => "spin-yield-park",
    }
}

/// The cores a context thread was seen on: first and latest sample of `sched_getcpu`.
#[derive(Debug)]
pub(crate) struct Seen {
    first: AtomicI64,
    last: AtomicI64,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            first: AtomicI64::new(-1),
            last: AtomicI64::new(-1),
        }
    }
}

impl Seen {
    /// Samples the calling thread's core.
    #[inline]
    pub(crate) fn mark(&self) {
        let c = current_cpu().map_or(-1, |c| c as i64);
        if self.first.load(Ordering::Relaxed) < 0 {
            self.first.store(c, Ordering::Relaxed);
        }
        self.last.store(c, Ordering::Relaxed);
    }

    /// The placement of a context: planned core from the plan, seen cores from the samples.
    pub(crate) fn placement(&self, role: &str, planned: Option<usize>) -> Placement {
        let get = |a: &AtomicI64| {
            let v = a.load(Ordering::Relaxed);
            (v >= 0).then_some(v as usize)
        };
        Placement::new(role, planned, &[get(&self.first), get(&self.last)])
    }
}

/// Checks the engine's own view of a context's pinning (its status) against the plan.
pub(crate) fn pin_notes(status: &Status, out: &mut super::Outcome) {
    for c in &status.contexts {
        if c.core.is_some() && !c.pinned {
            out.note(format!(
                "engine reports context `{}` not pinned to core {:?}",
                c.name, c.core
            ));
        }
    }
}

/// Shuts the correlator down (processing everything accepted) and returns its final status.
pub(crate) fn shutdown(c: &Correlator<Ev>, out: &mut super::Outcome) -> Option<Status> {
    match c.shutdown() {
        Ok(s) => {
            pin_notes(&s, out);
            if s.totals.handler_panics > 0 {
                out.fail(format!(
                    "{} handler panic(s) in the engine",
                    s.totals.handler_panics
                ));
            }
            Some(s)
        }
        Err(e) => {
            out.fail(format!("engine shutdown failed: {e}"));
            None
        }
    }
}

/// Moves a failure recorded by a measured thread into the outcome.
pub(crate) fn collect_failure(sh: &Shared, out: &mut super::Outcome) {
    if let Some(f) = sh.failure() {
        out.fail(f);
    }
}

/// Spins for about `ns` nanoseconds (simulated per-event work of a slow consumer).
#[inline]
pub(crate) fn busy_work(ns: u64) {
    let end = crate::clock::now_ns() + ns;
    while crate::clock::now_ns() < end {
        std::hint::spin_loop();
    }
}
