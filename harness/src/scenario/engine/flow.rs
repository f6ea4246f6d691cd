//! `stream/{N}to1/engine`, `fanout/channel`, `pipeline/{K}`, `backpressure/flood`: events
//! flowing between threads and contexts, time-bounded, checked for loss and order at the end.

use super::{busy_work, spin_or_park, wait_name, Cx, EngineRun, Journal, Seen};
use crate::clock::now_ns;
use crate::pin::Probe;
use crate::record::Better;
use crate::scenario::{
    put, sample, sender_counters, sender_slot, sends, slot, stream_ev, stream_figures, take,
    timed_window, timed_window_with, wait_for, Ev, Family, FifoCheck, Outcome, RunCtx, Scenario,
    Shared, Slot, Spin, BOOKED, FLOOD_CAPACITY, PUBLISH_EVERY, STALL_TIMEOUT, STOP_CHECK_EVERY,
    STREAM_BATCH, STREAM_CAPACITY,
};
use crate::stats::{merge, new_hist};
use correlator::{Channel, ContextRef, DieReason, Monitor, Pattern};
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Registers `stream/{n}to1/engine`.
pub fn register_stream(v: &mut Vec<Scenario>, n: usize) {
    v.push(Scenario::new(
        format!("stream/{n}to1/engine"),
        format!("{n} external sender(s) flood one context (inbox capacity {STREAM_CAPACITY})"),
        n + 1,
        Family::Engine,
        move |ctx| stream(ctx, n, &Journal::Off),
    ));
}

/// Registers `record/stream/{n}to1`: `stream/{n}to1/engine` with the correlator recording to a
/// file (`Journal`, in `journal.rs`), the recording read back and checked after the run.
pub fn register_stream_recorded(v: &mut Vec<Scenario>, n: usize) {
    v.push(Scenario::new(
        format!("record/stream/{n}to1"),
        format!("stream/{n}to1/engine recording to a file (record_to(FileSink)) in the temporary directory"),
        n + 1,
        Family::Engine,
        move |ctx| stream(ctx, n, &Journal::record(&format!("stream-{n}to1"))),
    ));
}

/// Registers `stream/1to1/engine-batch`: `stream/1to1/engine` with the sender's events sent in
/// batches of [`STREAM_BATCH`] (`InputHandle::send_batch_to`, one reservation per run of places).
pub fn register_stream_batch(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "stream/1to1/engine-batch",
        format!("1 external sender floods one context in batches of {STREAM_BATCH} (send_batch_to, inbox capacity {STREAM_CAPACITY})"),
        2,
        Family::Engine,
        |ctx| {
            let mut out = Outcome::default();
            out.param("batch", STREAM_BATCH as u64);
            let batched = Sending::Batched(STREAM_BATCH);
            if let Some(f) = flood(ctx, &mut out, 1, STREAM_CAPACITY, 0, batched, &Journal::Off) {
                stream_figures(&mut out, f.window, Some(&f.shares));
            }
            out
        },
    ));
}

/// Subscribers of `fanout/channel` for a plan of `cores` cores.
pub fn fanout_width(cores: usize) -> usize {
    cores.saturating_sub(1).clamp(2, 8)
}

/// Registers `fanout/channel`.
pub fn register_fanout(v: &mut Vec<Scenario>, cores: usize) {
    let n = fanout_width(cores);
    v.push(Scenario::new(
        "fanout/channel",
        format!(
            "one sender, one channel, {n} subscribed contexts: deliveries/s and first-to-last skew"
        ),
        n + 1,
        Family::Engine,
        move |ctx| fanout(ctx, n),
    ));
}

/// Registers `pipeline/{k}`.
pub fn register_pipeline(v: &mut Vec<Scenario>, k: usize) {
    v.push(Scenario::new(
        format!("pipeline/{k}"),
        format!("a chain of {k} context(s) fed by one sender: events/s (flood) and end-to-end latency (one in flight)"),
        k + 1,
        Family::Engine,
        move |ctx| pipeline(ctx, k),
    ));
}

/// Registers `backpressure/flood`.
pub fn register_backpressure(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "backpressure/flood",
        format!("{FLOOD_SENDERS} senders flood a context that works {SINK_WORK_NS} ns per event, inbox capacity {FLOOD_CAPACITY}"),
        FLOOD_SENDERS + 1,
        Family::Engine,
        backpressure,
    ));
}

/// Senders of `backpressure/flood`.
pub const FLOOD_SENDERS: usize = 2;
/// Work per event of the slow receiver of `backpressure/flood`.
pub const SINK_WORK_NS: u64 = 500;

/// The receiving end of a stream: per-sender FIFO check, count, optional work per event.
struct Sink {
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    fifo: FifoCheck,
    work_ns: u64,
    out: Slot<FifoCheck>,
}

impl Monitor<Ev> for Sink {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Sink, _cx: &mut Cx<'_, Sink>, e: &Ev| {
                // The same per-event work as every peer's receiver (`peers::Book`): the
                // sequence check counts, and the count is published every PUBLISH_EVERY events.
                m.fifo.take(e.seq);
                let n = m.fifo.total;
                m.sh.publish(n, false);
                if n % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
                if m.work_ns > 0 {
                    busy_work(m.work_ns);
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        put(&self.out, self.fifo.clone());
    }
}

/// What a flooding sender thread reports.
struct SenderReport {
    placement: crate::pin::Placement,
    sent: u64,
    in_send: Option<(Histogram<u64>, u64, u64)>,
}

/// What [`flood`] measured.
struct FloodResult {
    window: crate::scenario::Window,
    /// Events each sender sent inside the timed window.
    shares: Vec<u64>,
    /// Events each sender sent in all.
    sent: Vec<u64>,
    /// Events the receiver took in all.
    received: u64,
    reports: Vec<SenderReport>,
}

/// How a flooding sender sends: one loop per way, each with one send site (the shape of a
/// sender's code decides what its sends cost: harness/BENCHMARKS.md, "The first store into a
/// slot").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sending {
    /// `send_to` per event, in the very loop every stream peer's sender runs
    /// (`stream/{N}to1/engine`).
    Booked,
    /// `send_to` per event, each send timed into a histogram (`backpressure/flood`).
    Timed,
    /// `send_batch_to` of this many events (`stream/1to1/engine-batch`): a divisor of
    /// [`PUBLISH_EVERY`] and [`STOP_CHECK_EVERY`], so that the count is published and the stop
    /// checked as often as event by event.
    Batched(usize),
}

/// Runs `senders` flooding threads into `main` of `c` and the receiver `Sink`; the shared body
/// of `stream/{N}to1/engine`, `stream/1to1/engine-batch`, `backpressure/flood` and
/// `record/stream/{N}to1` (the correlator recording to `journal`).
fn flood(
    ctx: &RunCtx,
    out: &mut Outcome,
    senders: usize,
    capacity: usize,
    work_ns: u64,
    sending: Sending,
    journal: &Journal,
) -> Option<FloodResult> {
    let batch = match sending {
        Sending::Batched(b) => b,
        Sending::Booked | Sending::Timed => 0,
    };
    debug_assert!(batch == 0 || PUBLISH_EVERY % batch as u64 == 0);
    debug_assert!(batch == 0 || STOP_CHECK_EVERY % batch as u64 == 0);
    let wait = spin_or_park(ctx, senders + 1);
    out.param("wait_strategy", wait_name(wait));
    out.param("senders", senders as u64);
    out.param("capacity", capacity as u64);
    let seen = Arc::new(Seen::default());
    let res = slot();
    let (run, ()) =
        EngineRun::new(ctx, capacity, wait)
            .journal(journal)
            .start(out, |c, _, sh| {
                Ok(c.load(Sink {
                    sh: sh.clone(),
                    seen: seen.clone(),
                    fifo: FifoCheck::new(senders),
                    work_ns,
                    out: res.clone(),
                })?)
            })?;
    let (c, sh) = (&run.c, &run.sh);
    let counters = sender_counters(senders);
    let main = c.main();
    let mut handles = Vec::new();
    for s in 0..senders {
        let input = c.input();
        let (sh, counters) = (sh.clone(), counters.clone());
        let core = ctx.map.core_for(sender_slot(ctx, s));
        handles.push(std::thread::spawn(move || {
            let probe = Probe::start(format!("sender{s}"), core);
            let mut hist = (sending == Sending::Timed).then(new_hist);
            let mut blocked = 0u64;
            let t_start = now_ns();
            let fail = |what: &str, err: &dyn std::fmt::Display| {
                sh.fail(format!("sender {s}: {what} failed: {err}"));
            };
            // One loop per way of sending (the three are exclusive: `stream/1to1/engine-batch`,
            // `backpressure/flood`, `stream/{N}to1/engine`), each with one send site: the shape of
            // a sender's code decides what its sends cost (harness/BENCHMARKS.md, "The first store
            // into a slot").
            let sent = if batch > 0 {
                let mut buf: Vec<Ev> = Vec::with_capacity(batch);
                let mut i = 0u64;
                while i % STOP_CHECK_EVERY != 0 || !sh.stopped() {
                    buf.extend((0..batch as u64).map(|k| stream_ev(s, i + k)));
                    if let Err(err) = input.send_batch_to(main, &mut buf) {
                        fail("send_batch_to", &err);
                        break;
                    }
                    i += batch as u64;
                    if i % PUBLISH_EVERY == 0 {
                        counters[s].store(i, Ordering::Release);
                    }
                }
                i
            } else if let Some(h) = hist.as_mut() {
                let mut i = 0u64;
                while i % STOP_CHECK_EVERY != 0 || !sh.stopped() {
                    let t0 = now_ns();
                    let r = input.send_to(main, stream_ev(s, i));
                    let dt = now_ns() - t0;
                    blocked += dt;
                    h.saturating_record(dt.max(1));
                    if let Err(err) = r {
                        fail("send_to", &err);
                        break;
                    }
                    i += 1;
                    if i % PUBLISH_EVERY == 0 {
                        counters[s].store(i, Ordering::Release);
                    }
                }
                i
            } else {
                // The very loop every stream peer's sender runs, so that the engine and its peers
                // pay the same bookkeeping in the same code shape (harness/BENCHMARKS.md,
                // "Per-event work, side by side").
                let mut failed = None;
                let send = &mut |e: Ev| match input.send_to(main, e) {
                    Ok(()) => true,
                    Err(err) => {
                        failed = Some(err);
                        false
                    }
                };
                let (i, _) = sends::<BOOKED>(s, &counters[s], 0, || sh.stopped(), send);
                if let Some(err) = failed {
                    fail("send_to", &err);
                }
                i
            };
            let wall = now_ns() - t_start;
            SenderReport {
                placement: probe.finish(),
                sent,
                in_send: hist.map(|h| (h, blocked, wall)),
            }
        }));
    }
    let w = timed_window_with(ctx, sh, || sample(&counters));
    let reports: Vec<SenderReport> = handles
        .into_iter()
        .map(|h| h.join().expect("sender panicked"))
        .collect();
    let status = run.finish(out);
    for r in &reports {
        out.placed(r.placement.clone());
    }
    out.placed(seen.placement("context main (receiver)", ctx.map.core_for(0)));
    let sent: Vec<u64> = reports.iter().map(|r| r.sent).collect();
    let received = match take(&res) {
        Some(fifo) => {
            fifo.verify(&sent, out);
            fifo.total
        }
        None => {
            out.fail("the receiver did not hand over its check");
            0
        }
    };
    if let Some(s) = status {
        out.param("overruns", s.totals.overruns);
        // Without a cycle of contexts nothing may go beyond capacity (R5.2): the inboxes' memory is
        // then exactly what they were created with.
        if s.totals.overruns > 0 {
            out.fail(format!(
                "{} entries went beyond capacity without a cycle of contexts",
                s.totals.overruns
            ));
        }
    }
    out.param("events_total", sent.iter().sum::<u64>());
    match w {
        Ok((window, c0, c1)) => {
            let shares: Vec<u64> = c1.iter().zip(&c0).map(|(a, b)| a - b).collect();
            Some(FloodResult {
                window,
                shares,
                sent,
                received,
                reports,
            })
        }
        Err(e) => {
            out.fail(e);
            None
        }
    }
}

/// `stream/{n}to1/engine`, or with a recording journal `record/stream/{n}to1`, whose recording
/// must hold every event sent.
fn stream(ctx: &RunCtx, n: usize, journal: &Journal) -> Outcome {
    let mut out = Outcome::default();
    let flooded = flood(
        ctx,
        &mut out,
        n,
        STREAM_CAPACITY,
        0,
        Sending::Booked,
        journal,
    );
    if let Some(f) = flooded {
        stream_figures(&mut out, f.window, Some(&f.shares));
        journal.verify(&mut out, f.sent.iter().sum());
    }
    out
}

fn backpressure(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("work_ns_per_event", SINK_WORK_NS);
    let rss_before = crate::scenario::vm_kib("VmRSS");
    let Some(f) = flood(
        ctx,
        &mut out,
        FLOOD_SENDERS,
        FLOOD_CAPACITY,
        SINK_WORK_NS,
        Sending::Timed,
        &Journal::Off,
    ) else {
        return out;
    };
    stream_figures(&mut out, f.window, Some(&f.shares));
    let mut hists = Vec::new();
    let (mut blocked, mut wall) = (0u64, 0u64);
    for r in f.reports {
        if let Some((h, b, wl)) = r.in_send {
            hists.push(h);
            blocked += b;
            wall += wl;
        }
    }
    out.value(
        "producer_stall",
        "% of sender time",
        if wall > 0 {
            100.0 * blocked as f64 / wall as f64
        } else {
            0.0
        },
        Better::Lower,
    );
    out.latency("send_latency", &merge(&hists));
    if let Some(peak) = crate::scenario::vm_kib("VmHWM") {
        out.value("peak_rss", "KiB", peak as f64, Better::Lower);
        if let Some(b) = rss_before {
            out.param("rss_before_kib", b);
            // What the flood itself added: thread stacks, the receiver's checks and histograms, and
            // the inbox ring, which is fixed at `FLOOD_CAPACITY` entries (no overrun, checked above).
            out.value(
                "rss_growth",
                "KiB",
                peak.saturating_sub(b) as f64,
                Better::Lower,
            );
        }
    }
    // A loss is already a failed check in `flood`; the figure is recorded as well.
    let sent: u64 = f.sent.iter().sum();
    out.value(
        "events_lost",
        "events",
        sent.saturating_sub(f.received) as f64,
        Better::Lower,
    );
    out.param("sent_per_sender", serde_json::json!(f.sent));
    out
}

/// What a fan-out subscriber reports.
#[derive(Clone, Debug, Default)]
struct SubResult {
    count: u64,
    bad: u64,
    samples: Vec<(u64, u64)>,
}

/// Every `SKEW_SAMPLE`-th event's arrival time is recorded by each subscriber.
const SKEW_SAMPLE: u64 = 64;
/// At most this many skew samples per subscriber (preallocated: no allocation while measuring).
const SKEW_CAP: usize = 200_000;

struct Sub {
    ch: Channel,
    counter: Arc<Vec<CachePadded<AtomicU64>>>,
    index: usize,
    seen: Arc<Seen>,
    r: SubResult,
    out: Slot<SubResult>,
}

impl Monitor<Ev> for Sub {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        cx.subscribe(self.ch);
        cx.on_all(
            Pattern::kind(0),
            |m: &mut Sub, _cx: &mut Cx<'_, Sub>, e: &Ev| {
                if e.seq != m.r.count {
                    m.r.bad += 1;
                }
                m.r.count += 1;
                if e.seq % SKEW_SAMPLE == 0 && m.r.samples.len() < SKEW_CAP {
                    m.r.samples.push((e.seq, now_ns()));
                }
                if m.r.count % PUBLISH_EVERY == 0 {
                    m.counter[m.index].store(m.r.count, Ordering::Release);
                }
                if m.r.count % STOP_CHECK_EVERY == 1 {
                    m.seen.mark();
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        put(&self.out, std::mem::take(&mut self.r));
    }
}

fn fanout(ctx: &RunCtx, n: usize) -> Outcome {
    let mut out = Outcome::default();
    let wait = spin_or_park(ctx, n + 1);
    out.param("subscribers", n as u64);
    out.param("wait_strategy", wait_name(wait));
    out.param("capacity", STREAM_CAPACITY as u64);
    let counters = sender_counters(n);
    let mut results = Vec::new();
    let mut seens = Vec::new();
    let started = EngineRun::new(ctx, STREAM_CAPACITY, wait)
        .contexts((1..n).map(|i| format!("sub{i}")))
        .start(&mut out, |c, contexts, _| {
            let ch = c.channel("fanout").map_err(|e| format!("channel: {e}"))?;
            for (i, &cx) in contexts.iter().enumerate() {
                let res = slot();
                let seen = Arc::new(Seen::default());
                let mon = Sub {
                    ch,
                    counter: counters.clone(),
                    index: i,
                    seen: seen.clone(),
                    r: SubResult {
                        samples: Vec::with_capacity(SKEW_CAP),
                        ..SubResult::default()
                    },
                    out: res.clone(),
                };
                c.load_in(cx, mon)?;
                results.push(res);
                seens.push(seen);
            }
            Ok(ch)
        });
    let Some((run, ch)) = started else {
        return out;
    };
    let (c, sh) = (&run.c, &run.sh);
    let input = c.input();
    let core = ctx.map.core_for(n);
    let sender = {
        let sh = sh.clone();
        std::thread::spawn(move || {
            let probe = Probe::start("sender", core);
            // Subscriptions take effect when each on_load returns: probe until all n are live.
            let live = wait_for(
                STALL_TIMEOUT,
                Duration::from_micros(100),
                || matches!(input.send(ch, Ev { kind: 1, ..Ev::default() }), Ok(k) if k == n),
            );
            if !live {
                sh.fail(format!("the {n} subscriptions did not all take effect"));
                return (probe.finish(), 0);
            }
            let mut i = 0u64;
            while !(i % STOP_CHECK_EVERY == 0 && sh.stopped()) {
                match input.send(
                    ch,
                    Ev {
                        kind: 0,
                        seq: i,
                        t_ns: 0,
                        aux: 0,
                    },
                ) {
                    Ok(k) if k == n => {}
                    Ok(k) => {
                        sh.fail(format!("event {i} reached {k} of {n} subscribers"));
                        break;
                    }
                    Err(e) => {
                        sh.fail(format!("channel send failed: {e}"));
                        break;
                    }
                }
                i += 1;
                sh.publish(i, false);
            }
            (probe.finish(), i)
        })
    };
    let w = timed_window_with(ctx, sh, || sample(&counters).iter().sum::<u64>());
    let (p, sent) = sender.join().expect("sender panicked");
    run.finish(&mut out);
    out.placed(p);
    for (i, s) in seens.iter().enumerate() {
        out.placed(s.placement(&format!("context sub{i}"), ctx.map.core_for(i)));
    }
    let subs: Vec<SubResult> = results.iter().filter_map(take).collect();
    out.check(subs.len() == n, || {
        format!(
            "{} of {n} subscribers handed over their figures",
            subs.len()
        )
    });
    for (i, s) in subs.iter().enumerate() {
        out.check(s.count == sent && s.bad == 0, || {
            format!(
                "subscriber {i}: sent {sent}, received {} ({} out of order)",
                s.count, s.bad
            )
        });
    }
    out.param("events_total", sent);
    match w {
        Ok((w, d0, d1)) => {
            out.throughput("deliveries", "deliveries/s", d1 - d0, w.secs);
            out.throughput("throughput", "events/s", w.events, w.secs);
        }
        Err(e) => out.fail(e),
    }
    let mut skew = new_hist();
    let len = subs.iter().map(|s| s.samples.len()).min().unwrap_or(0);
    for k in 0..len {
        let seq = subs[0].samples[k].0;
        if subs.iter().any(|s| s.samples[k].0 != seq) {
            out.fail(format!("skew samples disagree at sample {k}"));
            break;
        }
        let ts = subs.iter().map(|s| s.samples[k].1);
        let (lo, hi) = ts.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
        skew.saturating_record((hi - lo).max(1));
    }
    out.latency("first_to_last_skew", &skew);
    out
}

/// What the last stage of a pipeline reports.
#[derive(Clone, Debug)]
struct PipeResult {
    n: u64,
    bad: u64,
    probes: u64,
    hist: Histogram<u64>,
}

struct Stage {
    next: Option<ContextRef>,
    sh: Arc<Shared>,
    seen: Arc<Seen>,
    probe_count: Arc<CachePadded<AtomicU64>>,
    warm_probes: u64,
    r: PipeResult,
    out: Slot<PipeResult>,
    forwarded: u64,
}

impl Monitor<Ev> for Stage {
    fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
        for kind in [0u32, 2] {
            cx.on_all(
                Pattern::kind(kind),
                |m: &mut Stage, cx: &mut Cx<'_, Stage>, e: &Ev| {
                    if let Some(next) = m.next {
                        m.forwarded += 1;
                        if m.forwarded % STOP_CHECK_EVERY == 1 {
                            m.seen.mark();
                        }
                        if let Err(err) = cx.send_to(next, *e) {
                            m.sh.fail(format!("stage send_to failed: {err}"));
                        }
                        return;
                    }
                    if e.kind == 0 {
                        if e.seq != m.r.n {
                            m.r.bad += 1;
                        }
                        m.r.n += 1;
                        m.sh.publish(m.r.n, false);
                        if m.r.n % STOP_CHECK_EVERY == 1 {
                            m.seen.mark();
                        }
                    } else {
                        let now = now_ns();
                        if m.r.probes >= m.warm_probes {
                            m.r.hist
                                .saturating_record(now.saturating_sub(e.t_ns).max(1));
                        }
                        m.r.probes += 1;
                        m.probe_count.store(m.r.probes, Ordering::Release);
                    }
                },
            );
        }
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
        if self.next.is_none() {
            put(&self.out, self.r.clone());
        }
    }
}

fn pipeline(ctx: &RunCtx, k: usize) -> Outcome {
    let mut out = Outcome::default();
    let wait = spin_or_park(ctx, k + 1);
    out.param("contexts", k as u64);
    out.param("wait_strategy", wait_name(wait));
    out.param("capacity", STREAM_CAPACITY as u64);
    let probe_count = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let res = slot();
    let warm_probes = ctx.mode.pick(10u64, 200, 2_000);
    let mut seens = Vec::new();
    let started = EngineRun::new(ctx, STREAM_CAPACITY, wait)
        .contexts((1..k).map(|i| format!("stage{i}")))
        .start(&mut out, |c, stages, sh| {
            for (i, &st) in stages.iter().enumerate() {
                let seen = Arc::new(Seen::default());
                let mon = Stage {
                    next: stages.get(i + 1).copied(),
                    sh: sh.clone(),
                    seen: seen.clone(),
                    probe_count: probe_count.clone(),
                    warm_probes,
                    r: PipeResult {
                        n: 0,
                        bad: 0,
                        probes: 0,
                        hist: new_hist(),
                    },
                    out: res.clone(),
                    forwarded: 0,
                };
                c.load_in(st, mon)?;
                seens.push(seen);
            }
            Ok(())
        });
    let Some((run, ())) = started else {
        return out;
    };
    let (c, sh) = (&run.c, &run.sh);
    let input = c.input();
    let first = c.main();
    let core = ctx.map.core_for(k);
    let mut spin = Spin::new(ctx, !ctx.fits(k + 1));
    let window = ctx.mode.window();
    let max_probes = ctx.mode.pick(500u64, 20_000, 200_000);
    let sender = {
        let (sh, probe_count) = (sh.clone(), probe_count.clone());
        std::thread::spawn(move || {
            let probe = Probe::start("sender", core);
            let mut i = 0u64;
            while !(i % STOP_CHECK_EVERY == 0 && sh.stopped()) {
                if let Err(e) = input.send_to(
                    first,
                    Ev {
                        kind: 0,
                        seq: i,
                        t_ns: 0,
                        aux: 0,
                    },
                ) {
                    sh.fail(format!("flood send failed: {e}"));
                    return (probe.finish(), i, 0);
                }
                i += 1;
            }
            // Latency phase: one probe in flight end to end.
            let t0 = Instant::now();
            let mut j = 0u64;
            while j < warm_probes + 1 || (j < max_probes && t0.elapsed() < window) {
                let e = Ev {
                    kind: 2,
                    seq: j,
                    t_ns: now_ns(),
                    aux: 0,
                };
                if let Err(err) = input.send_to(first, e) {
                    sh.fail(format!("probe send failed: {err}"));
                    break;
                }
                j += 1;
                let started = Instant::now();
                while probe_count.load(Ordering::Acquire) < j {
                    spin.step();
                    if started.elapsed() > STALL_TIMEOUT {
                        sh.fail(format!("probe {} never reached the last stage", j - 1));
                        return (probe.finish(), i, j);
                    }
                }
            }
            (probe.finish(), i, j)
        })
    };
    let w = timed_window(ctx, sh);
    let (p, sent, probes) = sender.join().expect("sender panicked");
    run.finish(&mut out);
    out.placed(p);
    for (i, s) in seens.iter().enumerate() {
        out.placed(s.placement(&format!("context stage{i}"), ctx.map.core_for(i)));
    }
    out.param("events_total", sent);
    out.param("probes", probes);
    match take(&res) {
        Some(r) => {
            out.check(r.n == sent && r.bad == 0, || {
                format!(
                    "flood: sent {sent}, the last stage received {} ({} out of order)",
                    r.n, r.bad
                )
            });
            out.check(r.probes == probes, || {
                format!("probes: sent {probes}, received {}", r.probes)
            });
            match w {
                Ok(w) => stream_figures(&mut out, w, None),
                Err(e) => out.fail(e),
            }
            out.latency("latency_end_to_end", &r.hist);
        }
        None => out.fail("the last stage did not hand over its figures"),
    }
    out
}
