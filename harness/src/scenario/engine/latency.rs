//! `pingpong/engine`, `pingpong/engine-park`, `openloop/rate`, `idle/wakeup`: latency through
//! the engine, every sample in an HdrHistogram owned by the thread that records it.

use super::{kick_off, spin_or_park, wait_name, Cx, EngineRun, Seen};
use crate::clock::{now_ns, thread_cpu_ns, wait_until_ns};
use crate::pin::Probe;
use crate::record::Better;
use crate::scenario::{
    put, sample_clock, sender_slot, slot, take, timed_window, wait_for, Ev, Family, Outcome,
    RunCtx, Scenario, Shared, Slot, LATENCY_SAMPLE_EVERY, STALL_TIMEOUT, STOP_CHECK_EVERY,
    STREAM_CAPACITY,
};
use crate::stats::new_hist;
use correlator::{ContextRef, DieReason, Monitor, Pattern, WaitStrategy};
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Registers `pingpong/engine` (busy-spin) and `pingpong/engine-park` (spin, yield, park).
pub fn register_pingpong(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "pingpong/engine",
        "contexts A and B bounce one event, one in flight, busy-spin; one-way = RTT/2",
        2,
        Family::Engine,
        |ctx| pingpong(ctx, WaitStrategy::BusySpin),
    ));
    v.push(Scenario::new(
        "pingpong/engine-park",
        "contexts A and B bounce one event, one in flight, spin-yield-park (the default strategy)",
        2,
        Family::Engine,
        |ctx| pingpong(ctx, WaitStrategy::SpinYieldPark),
    ));
}

/// Registers `openloop/rate`.
pub fn register_openloop(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "openloop/rate",
        "paced input at 10/50/80/95 % of the measured maximum; corrected (intended send time) and uncorrected latency",
        2,
        Family::Engine,
        openloop,
    ));
}

/// Registers `idle/wakeup`.
pub fn register_idle(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "idle/wakeup",
        "one event after an idle gap, per wait strategy: wake latency and CPU time while idle",
        1,
        Family::Engine,
        idle,
    ));
}

struct PingA {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    b: ContextRef,
    i: u64,
    hist: Histogram<u64>,
    out: Slot<Histogram<u64>>,
}

impl Monitor<Ev> for PingA {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut PingA, cx: &mut Cx<'_, PingA>, e: &Ev| {
                let t1 = sample_clock(m.i);
                if e.seq != m.i {
                    m.sh.fail(format!("pong {} came back as seq {}", m.i, e.seq));
                    return;
                }
                if e.t_ns != 0 && m.sh.measuring() {
                    m.hist.saturating_record(((t1 - e.t_ns) / 2).max(1));
                }
                m.i += 1;
                m.sh.publish(m.i, false);
                if m.i % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
                if m.sh.stopped() {
                    m.sh.publish(m.i, true);
                    put(&m.out, m.hist.clone());
                    m.sh.done.store(true, Ordering::Release);
                    return;
                }
                let ping = Ev {
                    kind: 0,
                    seq: m.i,
                    t_ns: sample_clock(m.i),
                    aux: 0,
                };
                if let Err(err) = cx.send_to(m.b, ping) {
                    m.sh.fail(format!("send_to(B) failed: {err}"));
                }
            },
        );
    }
}

struct PingB {
    a: ContextRef,
    seen: Arc<Seen>,
    answered: Arc<CachePadded<AtomicU64>>,
    sh: Arc<Shared>,
}

impl Monitor<Ev> for PingB {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut PingB, cx: &mut Cx<'_, PingB>, e: &Ev| {
                let n = m.answered.load(Ordering::Relaxed) + 1;
                m.answered.store(n, Ordering::Relaxed);
                if n % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
                if let Err(err) = cx.send_to(m.a, *e) {
                    m.sh.fail(format!("send_to(A) failed: {err}"));
                }
            },
        );
    }
}

fn pingpong(ctx: &RunCtx, wanted: WaitStrategy) -> Outcome {
    let mut out = Outcome::default();
    let wait = if wanted == WaitStrategy::BusySpin && (ctx.share_core(0, 1) || !ctx.map.pinned) {
        out.note("A and B are not on two pinned cores of their own: spin-then-yield instead of busy-spin");
        WaitStrategy::SpinThenYield
    } else {
        wanted
    };
    out.param("wait_strategy", wait_name(wait));
    out.param("capacity", STREAM_CAPACITY as u64);
    let (seen_a, seen_b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let answered = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let hist_out = slot();
    let started = EngineRun::new(ctx, STREAM_CAPACITY, wait)
        .contexts(["b"])
        .start(&mut out, |c, contexts, sh| {
            let (a, b) = (contexts[0], contexts[1]);
            c.load(PingA {
                sh: sh.clone(),
                seen: seen_a.clone(),
                b,
                i: 0,
                hist: new_hist(),
                out: hist_out.clone(),
            })?;
            c.load_in(
                b,
                PingB {
                    a,
                    seen: seen_b.clone(),
                    answered: answered.clone(),
                    sh: sh.clone(),
                },
            )?;
            Ok(b)
        });
    let Some((run, b)) = started else {
        return out;
    };
    let sh = &run.sh;
    let first = Ev {
        kind: 0,
        seq: 0,
        t_ns: now_ns(),
        aux: 0,
    };
    if let Err(e) = kick_off(&run.c, b, first) {
        out.fail(e);
        return out;
    }
    let w = timed_window(ctx, sh);
    let ended = wait_for(STALL_TIMEOUT, Duration::from_millis(1), || {
        sh.done.load(Ordering::Acquire) || sh.failure().is_some()
    });
    run.finish(&mut out);
    out.placed(seen_a.placement("context a (main)", ctx.map.core_for(0)));
    out.placed(seen_b.placement("context b", ctx.map.core_for(1)));
    out.check(ended, || {
        "ping-pong did not stop after the stop flag".into()
    });
    if let Err(e) = w {
        out.fail(e);
    }
    let pongs = sh.count.load(Ordering::Acquire);
    let pings = answered.load(Ordering::Acquire);
    out.check(pings == pongs, || {
        format!("B answered {pings} pings, A received {pongs} pongs")
    });
    out.param("round_trips", pongs);
    out.param("latency_sampled_every", LATENCY_SAMPLE_EVERY);
    match take(&hist_out) {
        Some(h) => out.latency("latency_one_way", &h),
        None => out.fail("A did not hand over its histogram"),
    }
    out
}

/// Offered loads of `openloop/rate`, % of the measured maximum.
pub const LOADS: [u32; 4] = [10, 50, 80, 95];

#[derive(Clone, Debug)]
struct OpenResult {
    flood: u64,
    flood_bad: u64,
    corrected: Vec<Histogram<u64>>,
    uncorrected: Vec<Histogram<u64>>,
    counts: Vec<u64>,
    bad: Vec<u64>,
}

struct Open {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    warm_ns: u64,
    level_first: Vec<u64>,
    level_counts: Arc<Vec<CachePadded<AtomicU64>>>,
    /// Where the flood records its latencies (not reported: it only makes the flood do a level's
    /// work per event).
    flood_hist: Histogram<u64>,
    r: OpenResult,
    out: Slot<OpenResult>,
}

impl Monitor<Ev> for Open {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Open, _cx: &mut Cx<'_, Open>, e: &Ev| {
                // The same per-event work as a paced level (a clock read, two histogram
                // records), into a scratch histogram: the maximum rate is that of the paced path.
                let now = now_ns();
                m.flood_hist
                    .saturating_record(now.saturating_sub(e.t_ns).max(1));
                m.flood_hist
                    .saturating_record(now.saturating_sub(e.aux).max(1));
                if e.seq != m.r.flood {
                    m.r.flood_bad += 1;
                }
                m.r.flood += 1;
                m.sh.publish(m.r.flood, false);
                m.level_counts[LOADS.len()].store(m.r.flood, Ordering::Release);
                if m.r.flood % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
            },
        );
        for (i, _) in LOADS.iter().enumerate() {
            cx.on_all(
                Pattern::kind(1 + i as u32),
                move |m: &mut Open, _cx: &mut Cx<'_, Open>, e: &Ev| {
                    let now = now_ns();
                    if e.seq != m.r.counts[i] {
                        m.r.bad[i] += 1;
                    }
                    if e.seq == 0 {
                        m.level_first[i] = e.t_ns;
                    }
                    // The first `warm_ns` of each level (by intended send time) are discarded.
                    if e.t_ns >= m.level_first[i] + m.warm_ns {
                        m.r.corrected[i].saturating_record(now.saturating_sub(e.t_ns).max(1));
                        m.r.uncorrected[i].saturating_record(now.saturating_sub(e.aux).max(1));
                    }
                    m.r.counts[i] += 1;
                    m.level_counts[i].store(m.r.counts[i], Ordering::Release);
                },
            );
        }
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        put(&self.out, self.r.clone());
    }
}

struct LevelRun {
    sent: u64,
    secs: f64,
    target: f64,
}

fn openloop(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let wait = spin_or_park(ctx, 2);
    out.param("wait_strategy", wait_name(wait));
    out.param("capacity", STREAM_CAPACITY as u64);
    let seen = Arc::new(Seen::default());
    // One counter per load level, and one for the flood (drain detection).
    let level_counts = crate::scenario::sender_counters(LOADS.len() + 1);
    let res = slot();
    let warm_ns = (ctx.mode.window().as_nanos() / 10) as u64;
    let started = EngineRun::new(ctx, STREAM_CAPACITY, wait).start(&mut out, |c, _, sh| {
        Ok(c.load(Open {
            sh: sh.clone(),
            seen: seen.clone(),
            warm_ns,
            level_first: vec![0; LOADS.len()],
            level_counts: level_counts.clone(),
            flood_hist: new_hist(),
            r: OpenResult {
                flood: 0,
                flood_bad: 0,
                corrected: LOADS.iter().map(|_| new_hist()).collect(),
                uncorrected: LOADS.iter().map(|_| new_hist()).collect(),
                counts: vec![0; LOADS.len()],
                bad: vec![0; LOADS.len()],
            },
            out: res.clone(),
        })?)
    });
    let Some((run, ())) = started else {
        return out;
    };
    let (c, sh) = (&run.c, &run.sh);
    let (rate_tx, rate_rx) = std::sync::mpsc::channel::<f64>();
    let input = c.input();
    let main = c.main();
    let slot1 = sender_slot(ctx, 0);
    let core = ctx.map.core_for(slot1);
    let window = ctx.mode.window();
    let sender = {
        let (sh, level_counts) = (sh.clone(), level_counts.clone());
        std::thread::spawn(move || {
            let probe = Probe::start("paced sender", core);
            // Phase 0: flood, to measure the maximum rate, stamping each event with two clock
            // reads as a paced level does (its wait reads the clock, then the send time): the
            // levels are fractions of what this sender and receiver can really sustain.
            let mut i = 0u64;
            while !(i % STOP_CHECK_EVERY == 0 && sh.stopped()) {
                let e = Ev {
                    kind: 0,
                    seq: i,
                    t_ns: now_ns(),
                    aux: now_ns(),
                };
                if let Err(err) = input.send_to(main, e) {
                    sh.fail(format!("flood send failed: {err}"));
                    break;
                }
                i += 1;
            }
            let flood_sent = i;
            let mut levels = Vec::new();
            let Ok(max_rate) = rate_rx.recv() else {
                return (probe.finish(), flood_sent, levels);
            };
            // Let the flood drain: the first level must not queue behind it.
            wait_for(STALL_TIMEOUT, Duration::from_micros(200), || {
                level_counts[LOADS.len()].load(Ordering::Acquire) >= flood_sent
            });
            for (li, &load) in LOADS.iter().enumerate() {
                let target = max_rate * f64::from(load) / 100.0;
                let n = ((target * window.as_secs_f64()) as u64).max(10);
                let interval = 1e9 / target;
                let start = now_ns() + 1_000_000;
                for j in 0..n {
                    let intended = start + (j as f64 * interval) as u64;
                    wait_until_ns(intended, Duration::from_micros(200));
                    let e = Ev {
                        kind: 1 + li as u32,
                        seq: j,
                        t_ns: intended,
                        aux: now_ns(),
                    };
                    if let Err(err) = input.send_to(main, e) {
                        sh.fail(format!("paced send failed: {err}"));
                        return (probe.finish(), flood_sent, levels);
                    }
                }
                let secs = (now_ns() - start) as f64 / 1e9;
                levels.push(LevelRun {
                    sent: n,
                    secs,
                    target,
                });
                // Let the level drain before the next one starts.
                wait_for(STALL_TIMEOUT, Duration::from_micros(200), || {
                    level_counts[li].load(Ordering::Acquire) >= n
                });
            }
            (probe.finish(), flood_sent, levels)
        })
    };
    let w = timed_window(ctx, sh);
    let max_rate = match &w {
        Ok(w) => w.events as f64 / w.secs,
        Err(_) => 0.0,
    };
    if max_rate > 0.0 {
        let _ = rate_tx.send(max_rate);
    }
    drop(rate_tx);
    let (p, flood_sent, levels) = sender.join().expect("sender panicked");
    out.placed(p);
    run.finish(&mut out);
    out.placed(seen.placement("context main (receiver)", ctx.map.core_for(0)));
    if let Err(e) = w {
        out.fail(e);
        return out;
    }
    out.value("max_rate", "events/s", max_rate, Better::Higher);
    let Some(r) = take(&res) else {
        out.fail("the receiver did not hand over its histograms");
        return out;
    };
    out.check(r.flood == flood_sent && r.flood_bad == 0, || {
        format!(
            "flood: sent {flood_sent}, received {} ({} out of order)",
            r.flood, r.flood_bad
        )
    });
    out.check(levels.len() == LOADS.len(), || {
        format!("only {} of {} load levels ran", levels.len(), LOADS.len())
    });
    for (i, l) in levels.iter().enumerate() {
        let load = LOADS[i];
        out.check(r.counts[i] == l.sent && r.bad[i] == 0, || {
            format!(
                "load {load}%: sent {}, received {} ({} out of order)",
                l.sent, r.counts[i], r.bad[i]
            )
        });
        out.latency(&format!("latency_corrected@{load}%"), &r.corrected[i]);
        out.latency(&format!("latency_uncorrected@{load}%"), &r.uncorrected[i]);
        let achieved = l.sent as f64 / l.secs;
        out.value(
            &format!("achieved_rate@{load}%"),
            "events/s",
            achieved,
            Better::Higher,
        );
        out.value(
            &format!("achieved_vs_target@{load}%"),
            "%",
            100.0 * achieved / l.target,
            Better::Higher,
        );
    }
    out
}

/// Wait strategies measured by `idle/wakeup`.
const STRATEGIES: [WaitStrategy; 3] = [
    WaitStrategy::BusySpin,
    WaitStrategy::SpinThenYield,
    WaitStrategy::SpinYieldPark,
];

#[derive(Clone)]
struct WakeResult {
    hist: Histogram<u64>,
    idle_cpu_ns: u64,
    idle_wall_ns: u64,
    n: u64,
    bad: u64,
}

struct Wake {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    prev_cpu: u64,
    prev_wall: u64,
    r: WakeResult,
    out: Slot<WakeResult>,
}

impl Monitor<Ev> for Wake {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Wake, _cx: &mut Cx<'_, Wake>, e: &Ev| {
                let now = now_ns();
                let cpu = thread_cpu_ns();
                if e.seq != m.r.n {
                    m.r.bad += 1;
                }
                if m.r.n > 0 {
                    m.r.hist
                        .saturating_record(now.saturating_sub(e.t_ns).max(1));
                    m.r.idle_cpu_ns += cpu.saturating_sub(m.prev_cpu);
                    m.r.idle_wall_ns += now.saturating_sub(m.prev_wall);
                }
                m.r.n += 1;
                m.sh.publish(m.r.n, true);
                m.seen.mark();
                m.prev_cpu = thread_cpu_ns();
                m.prev_wall = now_ns();
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        put(&self.out, self.r.clone());
    }
}

fn idle(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let gap = Duration::from_micros(ctx.mode.pick(1_000, 2_000, 10_000));
    let wakeups = ctx.mode.pick(10u64, 80, 500);
    out.param("gap_us", gap.as_micros() as u64);
    out.param("wakeups", wakeups);
    for wait in STRATEGIES {
        let name = wait_name(wait);
        let seen = Arc::new(Seen::default());
        let res = slot();
        let started = EngineRun::new(ctx, STREAM_CAPACITY, wait).start(&mut out, |c, _, sh| {
            Ok(c.load(Wake {
                sh: sh.clone(),
                seen: seen.clone(),
                prev_cpu: 0,
                prev_wall: 0,
                r: WakeResult {
                    hist: new_hist(),
                    idle_cpu_ns: 0,
                    idle_wall_ns: 0,
                    n: 0,
                    bad: 0,
                },
                out: res.clone(),
            })?)
        });
        let Some((run, ())) = started else {
            return out;
        };
        let (c, sh) = (&run.c, &run.sh);
        let input = c.input();
        let main = c.main();
        let core = ctx.map.core_for(sender_slot(ctx, 0));
        let sender = {
            let sh = sh.clone();
            std::thread::spawn(move || {
                let probe = Probe::start(format!("sender ({name})"), core);
                let t0 = Instant::now();
                for i in 0..wakeups {
                    std::thread::sleep(gap);
                    // The previous event must have been processed: the gap is idle time.
                    if !wait_for(STALL_TIMEOUT, Duration::from_micros(100), || {
                        sh.count.load(Ordering::Acquire) >= i
                    }) {
                        sh.fail(format!(
                            "{name}: event {} was not processed",
                            i.saturating_sub(1)
                        ));
                        break;
                    }
                    let e = Ev {
                        kind: 0,
                        seq: i,
                        t_ns: now_ns(),
                        aux: 0,
                    };
                    if let Err(err) = input.send_to(main, e) {
                        sh.fail(format!("{name}: send failed: {err}"));
                        break;
                    }
                }
                (probe.finish(), t0.elapsed())
            })
        };
        let (p, _) = sender.join().expect("sender panicked");
        wait_for(STALL_TIMEOUT, Duration::from_micros(100), || {
            sh.count.load(Ordering::Acquire) >= wakeups
        });
        run.finish(&mut out);
        out.placed(p);
        out.placed(seen.placement(&format!("context main ({name})"), ctx.map.core_for(0)));
        let Some(r) = take(&res) else {
            out.fail(format!("{name}: the context did not hand over its figures"));
            return out;
        };
        out.check(r.n == wakeups && r.bad == 0, || {
            format!(
                "{name}: sent {wakeups}, received {} ({} out of order)",
                r.n, r.bad
            )
        });
        out.latency(&format!("wake_latency[{name}]"), &r.hist);
        out.value(
            &format!("idle_cpu[{name}]"),
            "% of a core",
            if r.idle_wall_ns > 0 {
                100.0 * r.idle_cpu_ns as f64 / r.idle_wall_ns as f64
            } else {
                0.0
            },
            Better::Lower,
        );
    }
    out
}
