//! Calibration: the physical floor of this machine, with no engine and no queue.
//!
//! `calibration/cacheline-pingpong` bounces one cache line between two pinned threads (the
//! core-to-core latency tool's method): thread A writes an odd value and waits for B's even
//! answer. Each round trip is timed on A and recorded as half a round trip (one-way), so it pays
//! the same two timer reads per sample as `pingpong/*`, and the ratio of the two is the cost the
//! engine adds on top of moving a line between the same two cores.
//! `calibration/timer` is the cost of one timestamp read, the resolution floor of every latency.

use super::{Family, Outcome, RunCtx, Scenario, Spin};
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
        "calibration/timer",
        "cost of one timestamp read (Instant, ns since process epoch)",
        1,
        Family::Calibration,
        timer,
    ));
}

fn cacheline_pingpong(ctx: &RunCtx) -> Outcome {
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
    let line = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let total = warm + n;
    let (ca, cb) = (ctx.map.core_for(0), ctx.map.core_for(1));
    let lb = line.clone();
    let b = std::thread::spawn(move || {
        let probe = Probe::start("bouncer-b", cb);
        let mut answered = 0u64;
        for i in 0..total {
            let want = 2 * i + 1;
            while lb.load(Ordering::Acquire) != want {
                spin.step();
            }
            lb.store(want + 1, Ordering::Release);
            answered += 1;
        }
        (probe.finish(), answered)
    });
    let la = line.clone();
    let a = std::thread::spawn(move || {
        let probe = Probe::start("bouncer-a", ca);
        let mut h = new_hist();
        let mut t_start = 0;
        for i in 0..total {
            if i == warm {
                t_start = now_ns();
            }
            let t0 = now_ns();
            la.store(2 * i + 1, Ordering::Release);
            while la.load(Ordering::Acquire) != 2 * i + 2 {
                spin.step();
            }
            let t1 = now_ns();
            if i >= warm {
                h.saturating_record(((t1 - t0) / 2).max(1));
            }
        }
        let elapsed = now_ns() - t_start;
        (probe.finish(), h, elapsed)
    });
    let (pa, h, elapsed) = a.join().expect("bouncer a panicked");
    let (pb, answered) = b.join().expect("bouncer b panicked");
    out.placed(pa);
    out.placed(pb);
    out.check(answered == total, || {
        format!("bouncer b answered {answered} of {total} round trips")
    });
    out.check(line.load(Ordering::Relaxed) == 2 * total, || {
        "the line does not hold the final value".into()
    });
    out.latency("latency_one_way", &h);
    out.value(
        "one_way_mean_untimed",
        "ns",
        elapsed as f64 / (2.0 * n as f64),
        Better::Lower,
    );
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
