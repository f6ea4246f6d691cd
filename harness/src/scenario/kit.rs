//! The measuring kit every scenario uses: sizes per mode, the event type, the timed window and
//! the shared stop flag and counter, the per-sender FIFO check, spinning, outcome building. The
//! vocabulary of scenarios is in [`super`]; see its module docs for how a scenario measures.

use crate::pin::{CoreMap, Placement};
use crate::record::{Better, Measure};
use crate::stats;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How big and how long runs are.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every scenario once, tiny windows: proves they run and check themselves (CI).
    Smoke,
    /// A couple of minutes in all: the README's main command.
    Quick,
    /// The lab run: long windows, more runs.
    Full,
}

impl Mode {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Smoke => "smoke",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }

    /// Default number of runs (fresh processes) per scenario.
    pub fn default_runs(self) -> usize {
        match self {
            Mode::Smoke => 1,
            Mode::Quick => 5,
            Mode::Full => 7,
        }
    }

    /// Picks the value for this mode.
    pub fn pick<T>(self, smoke: T, quick: T, full: T) -> T {
        match self {
            Mode::Smoke => smoke,
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }

    /// Warm-up window of a time-bounded scenario (discarded).
    pub fn warmup(self) -> Duration {
        Duration::from_millis(self.pick(10, 150, 1000))
    }

    /// Timed window of a time-bounded scenario.
    pub fn window(self) -> Duration {
        Duration::from_millis(self.pick(20, 400, 3000))
    }

    /// Time `harness run` may spend repeating the rounds of undecided targets.
    pub fn repeat_budget(self) -> Duration {
        Duration::from_secs(self.pick(0, 45, 300))
    }

    /// Longest a single run may take before the parent kills it.
    pub fn run_timeout(self) -> Duration {
        Duration::from_secs(self.pick(30, 90, 600))
    }
}

/// Capacity of every bounded queue in a stream scenario: the engine inbox and its baselines.
pub const STREAM_CAPACITY: usize = 4096;
/// Inbox capacity of `backpressure/flood`: small so that the senders hit it.
pub const FLOOD_CAPACITY: usize = 64;
/// Consumers publish their running count every this many events (a power of two).
pub const PUBLISH_EVERY: u64 = 256;
/// Events per `send_batch_to` of `stream/1to1/engine-batch` and `alloc/send-batch`.
pub const STREAM_BATCH: usize = 64;
/// A measured loop whose counter does not move for this long has stalled (or lost the event
/// that keeps it going): the run fails.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Producers and self-perpetuating loops look at the stop flag every this many events.
pub const STOP_CHECK_EVERY: u64 = 1024;

/// Latency loops (the ping-pongs, the bursts) read the clock on one round trip or burst in this
/// many (a power of two) and record only those: the others run without clock reads or
/// histogram, so that the loop costs little more than a bare one (the A/B segments of
/// [`super::ab`] measure how much more). It was 16: the A/B segments showed that the two clock
/// reads of a sampled burst are a measurable part of a short burst's time with 16, and well
/// under the limit with 64 (figures in harness/BENCHMARKS.md, "What the A/B segments found"); a
/// 400 ms window still samples 10^4 and more.
pub const LATENCY_SAMPLE_EVERY: u64 = 64;

/// Whether iteration `i` of a latency loop is one of the sampled ones (one in
/// [`LATENCY_SAMPLE_EVERY`]).
#[inline]
pub fn sampled(i: u64) -> bool {
    i & (LATENCY_SAMPLE_EVERY - 1) == 0
}

/// The clock for a latency sample: `now_ns()` on the [`LATENCY_SAMPLE_EVERY`]-th iteration `i`,
/// 0 (no sample) on the others.
#[inline]
pub fn sample_clock(i: u64) -> u64 {
    if sampled(i) {
        crate::clock::now_ns().max(1)
    } else {
        0
    }
}

/// The event every scenario moves: 32 bytes, like a small market-data tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ev {
    /// Event kind (the engine's listener key).
    pub kind: u32,
    /// Sequence number; for multi-sender scenarios `sender << SENDER_SHIFT | index`.
    pub seq: u64,
    /// A timestamp (ns since the process epoch): send time, or intended send time.
    pub t_ns: u64,
    /// A second timestamp or payload (actual send time in open-loop runs, a key elsewhere).
    pub aux: u64,
}

/// Bit position of the sender number in a multi-sender sequence number.
pub const SENDER_SHIFT: u32 = 40;

/// `seq` for the `i`-th event of sender `s`.
pub fn seq_of(s: usize, i: u64) -> u64 {
    ((s as u64) << SENDER_SHIFT) | i
}

/// The `i`-th event of sender `s`.
pub fn stream_ev(s: usize, i: u64) -> Ev {
    Ev {
        kind: 0,
        seq: seq_of(s, i),
        t_ns: 0,
        aux: 0,
    }
}

/// [`sends`] with the harness's bookkeeping: what a stream sender runs in the timed run and in
/// the A/B phase's booked segments.
pub const BOOKED: bool = true;
/// [`sends`] without it: the A/B phase's bare segments.
pub const BARE: bool = false;

/// A stream sender's loop: sends from index `i` until `stop`, which it looks at every
/// [`STOP_CHECK_EVERY`] events (the stop flag in the timed run, the segment word in the A/B
/// phase); when `BOOKED`, it also publishes its count into `counter` every [`PUBLISH_EVERY`].
/// Returns the next index and whether a send failed. The two are one function so that a bare
/// segment differs from a booked one by the publishing alone (each is compiled on its own, with
/// no branch on `BOOKED`). Every stream peer's sender runs it, and the engine's too: the shape of a
/// sender's code decides what its sends cost (harness/BENCHMARKS.md, "The first store into a
/// slot").
#[inline]
pub fn sends<const BOOKED: bool>(
    s: usize,
    counter: &CachePadded<AtomicU64>,
    mut i: u64,
    stop: impl Fn() -> bool,
    send: &mut impl FnMut(Ev) -> bool,
) -> (u64, bool) {
    loop {
        if i % STOP_CHECK_EVERY == 0 && stop() {
            return (i, false);
        }
        if !send(stream_ev(s, i)) {
            return (i, true);
        }
        i += 1;
        if BOOKED && i % PUBLISH_EVERY == 0 {
            counter.store(i, Ordering::Release);
        }
    }
}

/// What one run of a scenario hands back to the runner.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Measured values.
    pub metrics: Vec<Measure>,
    /// Where each measured thread ran.
    pub placement: Vec<Placement>,
    /// Sizes and settings.
    pub params: BTreeMap<String, serde_json::Value>,
    /// Notes for the reader.
    pub notes: Vec<String>,
    /// Failed checks (empty when every check passed).
    pub failures: Vec<String>,
}

impl Outcome {
    /// Adds a throughput figure (`events` in `secs`).
    pub fn throughput(&mut self, metric: &str, unit: &str, events: u64, secs: f64) -> f64 {
        let rate = if secs > 0.0 {
            events as f64 / secs
        } else {
            0.0
        };
        self.metrics
            .push(Measure::value(metric, unit, rate, Better::Higher));
        rate
    }

    /// Adds a plain value.
    pub fn value(&mut self, metric: &str, unit: &str, value: f64, better: Better) {
        self.metrics
            .push(Measure::value(metric, unit, value, better));
    }

    /// Adds a figure measured on pairs (the A/B segments' `bookkeeping_cost`): its value is the
    /// median of `pairs`, which travel with it.
    pub fn paired(&mut self, metric: &str, unit: &str, pairs: Vec<f64>, better: Better) {
        let mut m = Measure::value(metric, unit, stats::median(&pairs), better);
        m.pairs = Some(pairs);
        self.metrics.push(m);
    }

    /// Adds a latency figure from a histogram (ns); an empty histogram is a failed check.
    pub fn latency(&mut self, metric: &str, h: &Histogram<u64>) {
        if h.is_empty() {
            self.fail(format!("{metric}: no latency sample was recorded"));
        }
        self.metrics.push(stats::latency_measure(metric, h));
    }

    /// Records a parameter.
    pub fn param(&mut self, key: &str, value: impl Into<serde_json::Value>) {
        self.params.insert(key.into(), value.into());
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Records a failed check.
    pub fn fail(&mut self, why: impl Into<String>) {
        self.failures.push(why.into());
    }

    /// Fails unless `cond`.
    pub fn check(&mut self, cond: bool, why: impl FnOnce() -> String) {
        if !cond {
            self.fail(why());
        }
    }

    /// Adds a thread placement.
    pub fn placed(&mut self, p: Placement) {
        self.placement.push(p);
    }
}

/// What a scenario gets to run with.
#[derive(Clone, Debug)]
pub struct RunCtx {
    /// Mode (sizes).
    pub mode: Mode,
    /// Pinning plan.
    pub map: CoreMap,
    /// Index of this run among the scenario's runs.
    pub run_index: usize,
}

impl RunCtx {
    /// Distinct cores of the plan.
    pub fn cores(&self) -> usize {
        self.map.distinct().max(1)
    }

    /// Whether `threads` spinning threads fit on the plan's cores.
    pub fn fits(&self, threads: usize) -> bool {
        threads <= self.cores()
    }

    /// Whether slots `a` and `b` share a core (always assumed when not pinning and short of
    /// cores).
    pub fn share_core(&self, a: usize, b: usize) -> bool {
        match (self.map.core_for(a), self.map.core_for(b)) {
            (Some(x), Some(y)) => x == y,
            _ => self.cores() < 2,
        }
    }
}

/// A stop flag and a published counter on separate cache lines, shared by a scenario's threads.
#[derive(Default)]
pub struct Shared {
    /// Raised by the main thread to end the measured loop.
    pub stop: CachePadded<AtomicBool>,
    /// The consumer's running count (published every [`PUBLISH_EVERY`] events).
    pub count: CachePadded<AtomicU64>,
    /// Raised by the consumer once it has seen everything it expects.
    pub done: CachePadded<AtomicBool>,
    /// Raised by the main thread when the warm-up ends: latency recorders discard the samples
    /// taken before.
    pub measuring: CachePadded<AtomicBool>,
    /// The first failed check seen by a measured thread (touched only on failure).
    pub failure: Mutex<Option<String>>,
}

impl Shared {
    /// A new shared block behind an `Arc`.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether the stop flag is up.
    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether the warm-up is over.
    #[inline]
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Records a failed check (the first one is kept) and raises the stop flag.
    #[cold]
    pub fn fail(&self, why: impl Into<String>) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(why.into());
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The recorded failure, if any.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishes `n` if it is a publishing point (or `force`).
    #[inline]
    pub fn publish(&self, n: u64, force: bool) {
        if force || n & (PUBLISH_EVERY - 1) == 0 {
            self.count.store(n, Ordering::Release);
        }
    }
}

/// A value a measured thread hands over once at the end (a histogram, a check), behind a lock
/// that is taken only then.
pub type Slot<T> = Arc<Mutex<Option<T>>>;

/// A new, empty [`Slot`].
pub fn slot<T>() -> Slot<T> {
    Arc::new(Mutex::new(None))
}

/// Puts `v` into `s`.
pub fn put<T>(s: &Slot<T>, v: T) {
    *s.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
}

/// Takes the value out of `s`.
pub fn take<T>(s: &Slot<T>) -> Option<T> {
    s.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// The result of a timed window: events counted and seconds elapsed.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Events the consumer counted inside the window.
    pub events: u64,
    /// Window length, seconds.
    pub secs: f64,
}

/// Sleeps through warm-up and window, sampling `shared.count`, then raises the stop flag.
/// Fails (returns `Err`) when the counter did not move during the window: the measured loop
/// stalled or lost the event that keeps it going.
pub fn timed_window(ctx: &RunCtx, shared: &Shared) -> Result<Window, String> {
    timed_window_with(ctx, shared, || ()).map(|(w, _, _)| w)
}

/// [`timed_window`], also calling `sample` at the start and at the end of the timed window
/// (for figures other than the consumer's count, such as per-sender counts).
pub fn timed_window_with<S>(
    ctx: &RunCtx,
    shared: &Shared,
    mut sample: impl FnMut() -> S,
) -> Result<(Window, S, S), String> {
    std::thread::sleep(ctx.mode.warmup());
    shared.measuring.store(true, Ordering::Relaxed);
    let s0 = sample();
    let c0 = shared.count.load(Ordering::Acquire);
    let t0 = Instant::now();
    std::thread::sleep(ctx.mode.window());
    let mut c1 = shared.count.load(Ordering::Acquire);
    if c1 <= c0 {
        // A virtual CPU can be descheduled for longer than a smoke window: extend the window
        // until the counter moves, and give up only after a stall no scheduler explains.
        let moved = wait_for(STALL_TIMEOUT, Duration::from_millis(5), || {
            shared.count.load(Ordering::Acquire) > c0
        });
        c1 = shared.count.load(Ordering::Acquire);
        if !moved {
            shared.stop.store(true, Ordering::Relaxed);
            return Err(format!(
                "no progress for {} s (count stayed at {c0}): the measured loop stalled or lost an event",
                STALL_TIMEOUT.as_secs()
            ));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let s1 = sample();
    shared.stop.store(true, Ordering::Relaxed);
    Ok((
        Window {
            events: c1 - c0,
            secs,
        },
        s0,
        s1,
    ))
}

/// Waits until `cond` holds, sleeping `step` between looks; `false` after `timeout`.
pub fn wait_for(timeout: Duration, step: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(step);
    }
    true
}

/// How a thread waits for its peer in a baseline: spin on a core of its own, yield when it
/// shares one (two spinners on one core would hand over only at time-slice ends), and spin with
/// a periodic yield when not pinned (the scheduler may put both on one core).
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    mode: SpinMode,
    steps: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpinMode {
    Busy,
    Yield,
    Unpinned,
}

/// An unpinned spinner yields once every this many steps.
const UNPINNED_YIELD_EVERY: u32 = 64;

impl Spin {
    /// A spinner for a thread of `ctx` that shares its core with its peer (`shared`) or not.
    pub fn new(ctx: &RunCtx, shared: bool) -> Self {
        let mode = if !ctx.map.pinned {
            SpinMode::Unpinned
        } else if shared {
            SpinMode::Yield
        } else {
            SpinMode::Busy
        };
        Spin { mode, steps: 0 }
    }

    /// One wait step.
    #[inline]
    pub fn step(&mut self) {
        match self.mode {
            SpinMode::Busy => std::hint::spin_loop(),
            SpinMode::Yield => std::thread::yield_now(),
            SpinMode::Unpinned => {
                self.steps = self.steps.wrapping_add(1);
                if self.steps % UNPINNED_YIELD_EVERY == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// Per-sender FIFO and completeness check of a fan-in: `next[s]` is the next index expected from
/// sender `s`.
#[derive(Clone, Debug)]
pub struct FifoCheck {
    next: Vec<u64>,
    /// Out-of-order or duplicated arrivals seen.
    pub violations: u64,
    /// First violation, for the message.
    pub first: Option<(usize, u64, u64)>,
    /// Events taken per sender at the half-way sample (for fairness).
    pub total: u64,
}

impl FifoCheck {
    /// A check for `senders` senders.
    pub fn new(senders: usize) -> Self {
        FifoCheck {
            next: vec![0; senders],
            violations: 0,
            first: None,
            total: 0,
        }
    }

    /// Takes one arrival.
    #[inline]
    pub fn take(&mut self, seq: u64) {
        let s = (seq >> SENDER_SHIFT) as usize;
        let i = seq & ((1 << SENDER_SHIFT) - 1);
        self.total += 1;
        match self.next.get_mut(s) {
            Some(n) if *n == i => *n += 1,
            Some(n) => {
                self.violations += 1;
                if self.first.is_none() {
                    self.first = Some((s, *n, i));
                }
                *n = i + 1;
            }
            None => {
                self.violations += 1;
                if self.first.is_none() {
                    self.first = Some((s, 0, i));
                }
            }
        }
    }

    /// Events seen from each sender.
    pub fn per_sender(&self) -> &[u64] {
        &self.next
    }

    /// Checks the arrivals against what each sender says it sent.
    pub fn verify(&self, sent: &[u64], out: &mut Outcome) {
        if let Some((s, want, got)) = self.first {
            out.fail(format!(
                "{} FIFO violation(s): sender {s} expected index {want}, got {got}",
                self.violations
            ));
        }
        let sent_total: u64 = sent.iter().sum();
        out.check(self.total == sent_total, || {
            format!(
                "received {} events, senders sent {sent_total}: {} lost",
                self.total,
                sent_total as i64 - self.total as i64
            )
        });
        for (s, (&got, &want)) in self.next.iter().zip(sent).enumerate() {
            out.check(got == want, || {
                format!("sender {s}: sent {want}, received up to index {got}")
            });
        }
    }
}

/// Adds the standard stream figures: throughput, ns/event, and fairness between senders.
pub fn stream_figures(out: &mut Outcome, w: Window, share_at_half: Option<&[u64]>) {
    let rate = out.throughput("throughput", "events/s", w.events, w.secs);
    if rate > 0.0 {
        out.value("ns_per_event", "ns", 1e9 / rate, Better::Lower);
    }
    if let Some(shares) = share_at_half {
        if shares.len() > 1 {
            let total: u64 = shares.iter().sum();
            let fair = total as f64 / shares.len() as f64;
            let min = shares.iter().copied().min().unwrap_or(0) as f64;
            out.value(
                "min_sender_share",
                "% of fair share",
                if fair > 0.0 { 100.0 * min / fair } else { 0.0 },
                Better::Higher,
            );
            out.param(
                "sender_counts_in_window",
                serde_json::json!(shares.to_vec()),
            );
        }
    }
}

/// A `/proc/self/status` memory figure in KiB (`VmRSS`, `VmHWM`), if the system has one.
pub fn vm_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The slot of sender `i` in an N-to-1 scenario: the cores other than the receiver's (slot 0),
/// round robin; on a single core, slot 0 as well.
pub fn sender_slot(ctx: &RunCtx, i: usize) -> usize {
    let others = ctx.map.cores.len().saturating_sub(1);
    if others == 0 {
        0
    } else {
        1 + i % others
    }
}

/// Per-sender published counts, each on its own cache line.
pub fn sender_counters(n: usize) -> Arc<Vec<CachePadded<AtomicU64>>> {
    Arc::new(
        (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    )
}

/// Samples the per-sender counters (for the fairness figure of a window).
pub fn sample(counters: &[CachePadded<AtomicU64>]) -> Vec<u64> {
    counters.iter().map(|c| c.load(Ordering::Acquire)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_check_finds_loss_reorder_and_passes_clean_streams() {
        let mut ok = FifoCheck::new(2);
        for i in 0..10 {
            ok.take(seq_of(0, i));
            ok.take(seq_of(1, i));
        }
        let mut out = Outcome::default();
        ok.verify(&[10, 10], &mut out);
        assert!(out.failures.is_empty(), "{:?}", out.failures);

        let mut lost = FifoCheck::new(1);
        for i in (0..10).filter(|&i| i != 4) {
            lost.take(seq_of(0, i));
        }
        let mut out = Outcome::default();
        lost.verify(&[10], &mut out);
        assert!(!out.failures.is_empty());

        let mut swapped = FifoCheck::new(1);
        for i in [0, 2, 1, 3] {
            swapped.take(seq_of(0, i));
        }
        let mut out = Outcome::default();
        swapped.verify(&[4], &mut out);
        assert!(out.failures.iter().any(|f| f.contains("FIFO")));
    }
}
