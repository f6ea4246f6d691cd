//! Calibration: the physical floor of this machine, with no engine and no queue.
//!
//! `calibration/cacheline-pingpong` bounces one cache line between two pinned threads (the
//! core-to-core latency tool's method): thread A writes an odd value and waits for B's even
//! answer. Each round trip is timed on A and recorded as half a round trip (one-way), so it pays
//! the same two timer reads per sample as `pingpong/*`, and the ratio of the two is the cost the
//! engine adds on top of moving a line between the same two cores.
//! `calibration/ring-pingpong` bounces one event the way a queue hands it over: through two rings
//! of [`STREAM_CAPACITY`] lines (one per direction, the size of every queue in the lab), one event
//! per line, written with plain stores and published by a stamp, as a single-producer ring does.
//! Timed the same way, it is the floor of any queue's ping-pong on the machine, and it costs more
//! than the single line (harness/BENCHMARKS.md, "How far is a ping-pong from the cache-line
//! floor?"), so `pingpong/engine` is reported against it too.
//! `calibration/timer` is the cost of one timestamp read, the resolution floor of every latency.

use super::{Family, Outcome, RunCtx, Scenario, Spin, STREAM_CAPACITY};
use crate::clock::now_ns;
use crate::pin::Probe;
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Registers the calibration scenarios.
pub fn register(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "calibration/cacheline-pingpong",
        "two pinned threads bounce one cache line; one-way = RTT/2 (no engine)",
        2,
        Family::Calibration,
        cacheline_pingpong,
    ));
    v.push(Scenario::new(
        "calibration/ring-pingpong",
        "two pinned threads bounce one event through two rings of 4096 lines (plain stores, no engine); one-way = RTT/2",
        2,
        Family::Calibration,
        ring_pingpong,
    ));
    v.push(Scenario::new(
        "calibration/timer",
        "cost of one timestamp read (Instant, ns since process epoch)",
        1,
        Family::Calibration,
        timer,
    ));
}

/// One side of a bounce: what it does for round trip `i` (ask and wait for the answer, or wait for
/// the question and answer), spinning with the given [`Spin`] while it waits.
trait Side: Send + 'static {
    fn round_trip(&mut self, i: u64, spin: &mut Spin);
}

/// Bounces `warm + n` round trips between side `a` (timed, on the run's first core) and side `b`
/// (on the second); records each timed round trip as half of it (one-way). Checks that `b`
/// answered every round trip; hands both sides back, joined, with the number of round trips, for
/// the caller to check what they left behind.
fn bounce<A: Side, B: Side>(ctx: &RunCtx, mut a: A, mut b: B) -> (Outcome, A, B, u64) {
    let mut out = Outcome::default();
    let warm = ctx.mode.pick(1_000u64, 20_000, 200_000);
    let n = ctx.mode.pick(5_000u64, 300_000, 3_000_000);
    out.param("round_trips", n);
    out.param("warmup_round_trips", warm);
    let shared = ctx.share_core(0, 1);
    if shared {
        out.note("both threads share one core: they yield instead of spinning, figures show scheduler hand-offs");
    }
    let mut spin = Spin::new(ctx, shared);
    let total = warm + n;
    let (ca, cb) = (ctx.map.core_for(0), ctx.map.core_for(1));
    let b = std::thread::spawn(move || {
        let probe = Probe::start("bouncer-b", cb);
        let mut answered = 0u64;
        for i in 0..total {
            b.round_trip(i, &mut spin);
            answered += 1;
        }
        (probe.finish(), answered, b)
    });
    let a = std::thread::spawn(move || {
        let probe = Probe::start("bouncer-a", ca);
        let mut h = new_hist();
        let mut t_start = 0;
        for i in 0..total {
            if i == warm {
                t_start = now_ns();
            }
            let t0 = now_ns();
            a.round_trip(i, &mut spin);
            let t1 = now_ns();
            if i >= warm {
                h.saturating_record(((t1 - t0) / 2).max(1));
            }
        }
        let elapsed = now_ns() - t_start;
        (probe.finish(), h, elapsed, a)
    });
    let (pa, h, elapsed, a) = a.join().expect("bouncer a panicked");
    let (pb, answered, b) = b.join().expect("bouncer b panicked");
    out.placed(pa);
    out.placed(pb);
    out.check(answered == total, || {
        format!("bouncer b answered {answered} of {total} round trips")
    });
    out.latency("latency_one_way", &h);
    out.value(
        "one_way_mean_untimed",
        "ns",
        elapsed as f64 / (2.0 * n as f64),
        Better::Lower,
    );
    (out, a, b, total)
}

/// A side of the cache-line bounce: `a` writes an odd value and waits for the even answer, `b`
/// waits for the odd value and writes the next even one.
struct LineSide {
    line: Arc<CachePadded<AtomicU64>>,
    asks: bool,
}

impl Side for LineSide {
    #[inline]
    fn round_trip(&mut self, i: u64, spin: &mut Spin) {
        let mut wait = |value| {
            while self.line.load(Ordering::Acquire) != value {
                spin.step();
            }
        };
        if self.asks {
            self.line.store(2 * i + 1, Ordering::Release);
            wait(2 * i + 2);
        } else {
            wait(2 * i + 1);
            self.line.store(2 * i + 2, Ordering::Release);
        }
    }
}

fn cacheline_pingpong(ctx: &RunCtx) -> Outcome {
    let line = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let side = |asks| LineSide {
        line: line.clone(),
        asks,
    };
    let (mut out, _, _, total) = bounce(ctx, side(true), side(false));
    out.check(line.load(Ordering::Relaxed) == 2 * total, || {
        "the line does not hold the final value".into()
    });
    out
}

/// One event per cache line: a stamp (`i + 1` once round trip `i`'s event is in) and the payload,
/// as large as the harness's event.
#[repr(C, align(64))]
struct RingSlot {
    stamp: AtomicU64,
    payload: [AtomicU64; 4],
}

/// A ring of [`STREAM_CAPACITY`] slots, one direction of `calibration/ring-pingpong`. One event is
/// in flight at a time, so no room check is needed: a slot is written a whole lap after it was
/// read.
struct Ring(Box<[RingSlot]>);

impl Ring {
    fn new() -> Arc<Self> {
        Arc::new(Ring(
            (0..STREAM_CAPACITY)
                .map(|_| RingSlot {
                    stamp: AtomicU64::new(0),
                    payload: Default::default(),
                })
                .collect(),
        ))
    }

    /// Puts event `i` (payload `v` and zeros) into its slot with plain stores, then its stamp.
    #[inline]
    fn put(&self, i: u64, v: u64) {
        let slot = &self.0[i as usize % STREAM_CAPACITY];
        slot.payload[0].store(v, Ordering::Relaxed);
        for w in &slot.payload[1..] {
            w.store(0, Ordering::Relaxed);
        }
        slot.stamp.store(i + 1, Ordering::Release);
    }

    /// Waits for event `i` and returns its payload.
    #[inline]
    fn take(&self, i: u64, spin: &mut Spin) -> u64 {
        let slot = &self.0[i as usize % STREAM_CAPACITY];
        while slot.stamp.load(Ordering::Acquire) != i + 1 {
            spin.step();
        }
        slot.payload[0].load(Ordering::Relaxed)
    }
}

/// A side of the ring bounce: `a` puts event `i` into the ring towards `b` and waits for it to
/// come back; `b` takes it and puts it into the ring back. `wrong` counts the events that came
/// back to `a` with another payload.
struct RingSide {
    to: Arc<Ring>,
    from: Arc<Ring>,
    asks: bool,
    wrong: u64,
}

impl Side for RingSide {
    #[inline]
    fn round_trip(&mut self, i: u64, spin: &mut Spin) {
        if self.asks {
            self.to.put(i, i);
            if self.from.take(i, spin) != i {
                self.wrong += 1;
            }
        } else {
            let v = self.from.take(i, spin);
            self.to.put(i, v);
        }
    }
}

fn ring_pingpong(ctx: &RunCtx) -> Outcome {
    let (ab, ba) = (Ring::new(), Ring::new());
    let side = |to, from, asks| RingSide {
        to,
        from,
        asks,
        wrong: 0,
    };
    let (a, b) = (side(ab.clone(), ba.clone(), true), side(ba, ab, false));
    let (mut out, a, _, _) = bounce(ctx, a, b);
    out.check(a.wrong == 0, || {
        format!("{} events came back with another payload", a.wrong)
    });
    out.param("ring_slots", STREAM_CAPACITY as u64);
    out
}

fn timer(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let probe = Probe::start("timer", ctx.map.core_for(0));
    let n = ctx.mode.pick(100_000u64, 5_000_000, 50_000_000);
    out.param("reads", n);
    // Warm-up: the vDSO page and the epoch.
    for _ in 0..n / 10 {
        std::hint::black_box(now_ns());
    }
    let mut backwards = 0u64;
    let mut prev = now_ns();
    let t0 = Instant::now();
    for _ in 0..n {
        let t = std::hint::black_box(now_ns());
        backwards += u64::from(t < prev);
        prev = t;
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    out.placed(probe.finish());
    out.check(backwards == 0, || {
        format!("the clock went backwards {backwards} times in {n} reads")
    });
    out.value("ns_per_read", "ns", ns, Better::Lower);
    out
}
