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
mod journal;
mod latency;
mod route;

pub use alloc::register_alloc;
pub use burst::register_burst;
pub use flow::{
    register_backpressure, register_fanout, register_pipeline, register_stream,
    register_stream_batch, register_stream_recorded,
};
pub(crate) use journal::Journal;
pub use latency::{register_idle, register_openloop, register_pingpong};
pub use route::{register_listeners, register_route};

use super::{Ev, Outcome, RunCtx, Shared};
use crate::pin::{current_cpu, Placement};
use correlator::{ContextOptions, ContextRef, Correlator, Scope, Status, WaitStrategy};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

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

/// Where a scenario's correlator takes its logical time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The engine's clock thread at its default rate (10 ticks a second to every context, as a
    /// user gets it).
    Default,
    /// No clock thread (`external_time`): nothing but the measured path runs in the process.
    External,
}

/// Why an engine scenario could not start: the text of the failure it records.
///
/// An engine error (a `load`, `load_in` or `channel` in the set-up) converts to `load: {e}`; any
/// other text (e.g. `format!("kick-off send: {e}")`) is taken as it is.
#[derive(Debug)]
pub(crate) struct SetupError(String);

impl From<correlator::Error> for SetupError {
    fn from(e: correlator::Error) -> Self {
        SetupError(format!("load: {e}"))
    }
}

impl From<String> for SetupError {
    fn from(e: String) -> Self {
        SetupError(e)
    }
}

/// The fixture every engine scenario runs on: build, create contexts, load, start; then, after
/// the scenario's own measuring, [`Running::finish`] shuts down and checks.
///
/// [`EngineRun::start`] builds a correlator whose context `i` (creation order, `main` = 0) is
/// pinned to the plan's slot `i` when the plan pins, with the given inbox capacity, wait
/// strategy and clock; creates the extra contexts named by [`EngineRun::contexts`]; hands the
/// correlator, the contexts (`main` first) and a fresh [`Shared`] to the scenario's set-up (load
/// monitors, queue a kick-off event); then starts it. Any failure is recorded in the outcome
/// and `None` returned, so that a scenario only writes what it measures. The fixture adds
/// nothing to the measured path: all of it runs before `start` or after the window.
pub(crate) struct EngineRun<'a> {
    ctx: &'a RunCtx,
    capacity: usize,
    wait: WaitStrategy,
    clock: Clock,
    contexts: Vec<String>,
    journal: &'a Journal,
}

impl<'a> EngineRun<'a> {
    /// A run with the engine's default clock and only the `main` context.
    pub(crate) fn new(ctx: &'a RunCtx, capacity: usize, wait: WaitStrategy) -> Self {
        EngineRun {
            ctx,
            capacity,
            wait,
            clock: Clock::Default,
            contexts: Vec::new(),
            journal: Journal::OFF,
        }
    }

    /// Records the run to `journal`'s file (`record/*`); off by default.
    pub(crate) fn journal(mut self, journal: &'a Journal) -> Self {
        self.journal = journal;
        self
    }

    /// Chooses where the correlator takes its time from.
    pub(crate) fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Extra contexts created after `main`, in this order (so pinned to slots 1, 2, ...).
    pub(crate) fn contexts<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.contexts.extend(names.into_iter().map(Into::into));
        self
    }

    /// Builds, creates the contexts, runs `setup` and starts; `None` (with the failure recorded
    /// in `out`) when any of it fails.
    pub(crate) fn start<T>(
        self,
        out: &mut Outcome,
        setup: impl FnOnce(&Correlator<Ev>, &[ContextRef], &Arc<Shared>) -> Result<T, SetupError>,
    ) -> Option<(Running, T)> {
        let c = match build_with(self.ctx, self.capacity, self.wait, self.clock, self.journal) {
            Ok(c) => c,
            Err(e) => {
                out.fail(e);
                return None;
            }
        };
        let mut contexts = vec![c.main()];
        for name in self.contexts {
            match c.create_context(ContextOptions::new(name)) {
                Ok(x) => contexts.push(x),
                Err(e) => {
                    out.fail(format!("create_context: {e}"));
                    return None;
                }
            }
        }
        let sh = Shared::new();
        let t = match setup(&c, &contexts, &sh) {
            Ok(t) => t,
            Err(SetupError(e)) => {
                out.fail(e);
                return None;
            }
        };
        c.start();
        Some((Running { c, sh }, t))
    }
}

/// A started engine scenario: the correlator and the run's [`Shared`] block.
pub(crate) struct Running {
    /// The correlator, started.
    pub(crate) c: Correlator<Ev>,
    /// The block the monitors and senders publish progress and failures through.
    pub(crate) sh: Arc<Shared>,
}

impl Running {
    /// Shuts the correlator down (processing everything accepted, SPEC R8.1), checks the
    /// engine's pinning and handler-panic totals, moves a failure recorded by a measured thread
    /// into `out` and returns the final status (`None` when the shutdown failed).
    pub(crate) fn finish(&self, out: &mut Outcome) -> Option<Status> {
        let status = shutdown(&self.c, out);
        collect_failure(&self.sh, out);
        status
    }
}

/// Queues `first` for context `to` from a fresh input handle: the event that sets a closed loop
/// of monitors going (before `start` in a set-up, or after it).
pub(crate) fn kick_off(c: &Correlator<Ev>, to: ContextRef, first: Ev) -> Result<(), String> {
    c.input()
        .send_to(to, first)
        .map_err(|e| format!("kick-off send: {e}"))
}

/// Builds a correlator whose context `i` is pinned to the plan's slot `i` (when the plan pins),
/// with the given inbox capacity, wait strategy, clock and journal; [`EngineRun`] for a whole
/// scenario.
fn build_with(
    ctx: &RunCtx,
    capacity: usize,
    wait: WaitStrategy,
    clock: Clock,
    journal: &Journal,
) -> Result<Correlator<Ev>, String> {
    let mut b = Correlator::<Ev>::builder()
        .inbox_capacity(capacity)
        .wait_strategy(wait);
    if clock == Clock::External {
        b = b.external_time();
    }
    journal.build(ctx, b)
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
fn pin_notes(status: &Status, out: &mut Outcome) {
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
fn shutdown(c: &Correlator<Ev>, out: &mut Outcome) -> Option<Status> {
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
fn collect_failure(sh: &Shared, out: &mut Outcome) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pin::CoreMap;
    use crate::scenario::Mode;

    fn unpinned() -> RunCtx {
        RunCtx {
            mode: Mode::Smoke,
            map: CoreMap {
                cores: vec![0],
                pinned: false,
            },
            run_index: 0,
        }
    }

    #[test]
    fn engine_run_creates_contexts_in_order_and_finishes_clean() {
        let ctx = unpinned();
        let mut out = Outcome::default();
        let (run, seen) = EngineRun::new(&ctx, 64, WaitStrategy::SpinYieldPark)
            .clock(Clock::External)
            .contexts(["b", "c"])
            .start(&mut out, |c, contexts, _| {
                assert_eq!(contexts[0], c.main());
                Ok(contexts.to_vec())
            })
            .expect("the run starts");
        assert_eq!(seen.len(), 3);
        let status = run.finish(&mut out).expect("a clean shutdown has a status");
        let names: Vec<&str> = status.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "b", "c"]);
        assert!(out.failures.is_empty(), "{:?}", out.failures);
    }

    #[test]
    fn engine_run_records_a_setup_failure_and_does_not_start() {
        let ctx = unpinned();
        let mut out = Outcome::default();
        let started = EngineRun::new(&ctx, 64, WaitStrategy::SpinYieldPark)
            .clock(Clock::External)
            .start(&mut out, |_, _, _| -> Result<(), SetupError> {
                Err("kick-off send: refused".to_string().into())
            });
        assert!(started.is_none());
        assert_eq!(out.failures, ["kick-off send: refused"]);
    }

    #[test]
    fn engine_run_finish_collects_a_measured_thread_failure() {
        let ctx = unpinned();
        let mut out = Outcome::default();
        let (run, ()) = EngineRun::new(&ctx, 64, WaitStrategy::SpinYieldPark)
            .clock(Clock::External)
            .start(&mut out, |_, _, _| Ok(()))
            .expect("the run starts");
        run.sh.fail("sender 0: send_to failed");
        assert!(run.finish(&mut out).is_some());
        assert_eq!(out.failures, ["sender 0: send_to failed"]);
    }
}
