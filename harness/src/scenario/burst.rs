//! `burst/{B}/{peer}`: bursts in the shape of the `disruptor` crate's own benchmark
//! (`benches/spsc.rs`), so that the figures line up with that crate's published ones.
//!
//! One producer (slot 1) sends a burst of `B` events (B = 1, 10, 100), then waits until the
//! consumer (slot 0) has seen the burst's last event (the consumer stores `seq + 1` of every event
//! into a sink the producer spins on), and starts the next burst. The figure is the latency per
//! event, `burst time / B`, recorded per burst into a histogram: `latency_per_event` with no pause
//! between bursts (time-bounded window), `latency_per_event_paused` with a 1 ms pause before each
//! burst (a fixed number of bursts after the window: caches and the consumer have gone cold).
//!
//! The consumer's per-event work is the same for every peer and for the engine: check that the
//! event is the next in sequence, count it, store the sink. Each peer is driven as its
//! documentation shows: crossbeam-channel with blocking `send`/`recv`, the disruptor with
//! `batch_publish` of the whole burst into a `BusySpin` processor, rtrb with `write_chunk_uninit`
//! / `read_chunk` (its batch API).

use super::ab::{self, Figure, Plan, Stopped};
use super::peers::crossbeam_channel::Crossbeam;
use super::peers::disruptor::{self, Processor};
use super::peers::rtrb;
use super::peers::shape::BlockingChannel;
use super::{
    slot, take, timed_window, Ev, Family, Outcome, RunCtx, Scenario, Shared, Slot, Spin,
    LATENCY_SAMPLE_EVERY, STALL_TIMEOUT,
};
use crate::clock::now_ns;
use crate::pin::{Placement, Probe};
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Burst sizes (the disruptor crate's).
pub const BURSTS: [usize; 3] = [1, 10, 100];
/// Queue capacity of the burst scenarios (the disruptor crate's benchmark uses 128).
pub const BURST_CAPACITY: usize = 128;
/// Pause before each burst of the paused phase.
pub const PAUSE: Duration = Duration::from_millis(1);

/// The sink the consumer stores `seq + 1` of every event into.
pub type Sink = Arc<CachePadded<AtomicU64>>;

/// Registers the peers' burst scenarios for every size (the engine's are in the engine module).
pub fn register(v: &mut Vec<Scenario>) {
    for b in BURSTS {
        v.push(Scenario::new(
            format!("burst/{b}/crossbeam-channel"),
            format!("peer: bursts of {b} through crossbeam_channel::bounded({BURST_CAPACITY}), blocking send / recv"),
            2,
            Family::Baseline,
            move |ctx| crossbeam(ctx, b),
        ));
        v.push(Scenario::new(
            format!("burst/{b}/disruptor"),
            format!("peer: bursts of {b} batch_publish'ed into disruptor::build_single_producer({BURST_CAPACITY}, BusySpin)"),
            2,
            Family::Baseline,
            move |ctx| disruptor(ctx, b),
        ));
        v.push(Scenario::new(
            format!("burst/{b}/rtrb"),
            format!("peer: bursts of {b} through rtrb::RingBuffer::new({BURST_CAPACITY}), write_chunk_uninit / read_chunk"),
            2,
            Family::Baseline,
            move |ctx| rtrb_burst(ctx, b),
        ));
    }
}

/// Bursts of the paused phase.
pub fn paused_bursts(ctx: &RunCtx) -> usize {
    ctx.mode.pick(5, 100, 500)
}

/// The consumer's per-event work: sequence check, count, sink.
pub struct Check {
    /// Next expected sequence number.
    pub next: u64,
    /// Events out of sequence.
    pub bad: u64,
    sink: Sink,
}

impl Check {
    /// A check storing into `sink`.
    pub fn new(sink: Sink) -> Self {
        Check {
            next: 0,
            bad: 0,
            sink,
        }
    }

    /// Takes one event.
    #[inline]
    pub fn take(&mut self, e: &Ev) {
        if e.seq != self.next {
            self.bad += 1;
        }
        self.next = e.seq + 1;
        self.sink.store(self.next, Ordering::Release);
    }
}

/// What the producer measured.
pub struct Driven {
    /// The producer's placement.
    pub placement: Placement,
    /// Per-event latency, no pause.
    pub hot: Histogram<u64>,
    /// Per-event latency, 1 ms pause before each burst.
    pub paused: Histogram<u64>,
    /// The A/B phase ([`super::ab`]): its plan and the clock at its measured boundaries.
    pub ab: Option<(Plan, Vec<u64>)>,
    /// Events sent.
    pub sent: u64,
    /// Why it stopped early, if it did.
    pub failure: Option<String>,
}

/// One burst in how many is timed for a burst of `b` events: [`LATENCY_SAMPLE_EVERY`], or more
/// where a burst is short. A timed burst's two clock reads cost its loop far more than the reads
/// themselves, more than a whole burst of one event (harness/BENCHMARKS.md, "What the A/B segments
/// found": `burst/1` still paid for its bookkeeping sampling one burst in 64, and nothing
/// measurable sampling one in 1024), so a burst of one event samples one in 512; from 10 events
/// on a burst lasts long enough for one in 64.
pub fn burst_sample_every(b: usize) -> u64 {
    (512 / b.max(1) as u64)
        .next_power_of_two()
        .max(LATENCY_SAMPLE_EVERY)
}

/// One burst of the timed loop, bookkeeping included: one burst in [`burst_sample_every`] is
/// timed (`one(seq, true)`) and its time per event recorded into `hot` while `shared` is
/// measuring, and the count of bursts is published every [`super::PUBLISH_EVERY`]. The A/B
/// phase's booked segments run exactly this.
#[inline]
fn booked_burst(
    one: &mut impl FnMut(&mut u64, bool) -> Result<u64, String>,
    seq: &mut u64,
    bursts: &mut u64,
    b: usize,
    shared: &Shared,
    hot: &mut Histogram<u64>,
) -> Result<(), String> {
    let timed = *bursts & (burst_sample_every(b) - 1) == 0;
    let dt = one(seq, timed)?;
    if timed && shared.measuring() {
        hot.saturating_record((dt / b as u64).max(1));
    }
    *bursts += 1;
    shared.publish(*bursts, false);
    Ok(())
}

/// The producer's loop: `send(first_seq)` sends one burst of `b` events numbered from
/// `first_seq`; the loop waits for the sink to reach the burst's end. The timed loop
/// (`booked_burst`) runs until the stop flag, then the A/B phase on the same queue (sized from
/// the loop's own rate), then the paused phase.
pub fn drive(
    ctx: &RunCtx,
    shared: &Shared,
    core: Option<usize>,
    b: usize,
    sink: &Sink,
    shared_core: bool,
    mut send: impl FnMut(u64) -> bool,
) -> Driven {
    let probe = Probe::start("producer", core);
    let mut spin = Spin::new(ctx, shared_core);
    let (mut hot, mut paused) = (new_hist(), new_hist());
    let mut seq = 0u64;
    let mut bursts = 0u64;
    let mut failure = None;
    // One burst; its time in ns when `timed` (0 otherwise: no clock read).
    let mut one = |seq: &mut u64, timed: bool| -> Result<u64, String> {
        let t0 = if timed { now_ns() } else { 0 };
        if !send(*seq) {
            return Err("the consumer is gone".into());
        }
        *seq += b as u64;
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        while sink.load(Ordering::Acquire) < *seq {
            spin.step();
            spins = spins.wrapping_add(1);
            if spins % 4096 == 0 {
                let s = *since.get_or_insert_with(Instant::now);
                if s.elapsed() > STALL_TIMEOUT {
                    return Err(format!(
                        "the consumer stalled at {} of {}",
                        sink.load(Ordering::Acquire),
                        *seq
                    ));
                }
            }
        }
        Ok(if timed { now_ns() - t0 } else { 0 })
    };
    let per_event = |dt: u64| (dt / b as u64).max(1);
    let mut ab = None;
    match ab::latency_loop(
        ctx.mode,
        shared,
        &mut hot,
        &mut (&mut one, &mut seq, &mut bursts),
        |(_, _, bursts)| **bursts,
        |(one, seq, bursts), book, h| booked_burst(*one, seq, bursts, b, book, h),
        |(one, seq, _)| one(seq, false).map(drop),
    ) {
        Ok(t) => ab = Some(t),
        Err(Stopped::Timed(e)) => {
            shared.fail(e.clone());
            failure = Some(e);
        }
        Err(Stopped::Ab(e)) => failure = Some(e),
    }
    if failure.is_none() {
        for _ in 0..paused_bursts(ctx) {
            std::thread::sleep(PAUSE);
            match one(&mut seq, true) {
                Ok(dt) => {
                    paused.saturating_record(per_event(dt));
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
    }
    Driven {
        placement: probe.finish(),
        hot,
        paused,
        ab,
        sent: seq,
        failure,
    }
}

/// Spawns the producer of a burst scenario on slot 1 (the consumer is on slot 0): [`drive`]
/// with `send`. `send` owns the sending handle, so the handle is dropped when `drive` returns
/// (a disruptor then shuts down and joins its processor; a channel's receiver sees the end).
pub fn spawn_producer(
    ctx: &RunCtx,
    shared: &Arc<Shared>,
    sink: &Sink,
    b: usize,
    send: impl FnMut(u64) -> bool + Send + 'static,
) -> std::thread::JoinHandle<Driven> {
    let (shared, sink) = (shared.clone(), sink.clone());
    let (ctx, core) = (ctx.clone(), ctx.map.core_for(1));
    let shared_core = ctx.share_core(0, 1);
    std::thread::spawn(move || drive(&ctx, &shared, core, b, &sink, shared_core, send))
}

/// Records a burst scenario's figures and checks.
pub fn finish(
    out: &mut Outcome,
    b: usize,
    w: Result<super::Window, String>,
    d: Driven,
    consumer: Option<(Placement, u64, u64)>,
) {
    out.param("burst", b as u64);
    out.param("capacity", BURST_CAPACITY as u64);
    out.param("pause_ms", PAUSE.as_millis() as u64);
    out.placed(d.placement);
    out.param("latency_sampled_every", burst_sample_every(b));
    match w {
        Ok(w) if w.events > 0 => {
            // The timed window's mean per event (bursts published every PUBLISH_EVERY).
            let timed = w.secs * 1e9 / (w.events * b as u64) as f64;
            out.value("latency_per_event_mean", "ns", timed, Better::Lower);
            if let Some((plan, times)) = &d.ab {
                let fig = Figure::Latency {
                    metric: "latency_per_event",
                    per_unit: b as f64,
                };
                ab::record(out, fig, plan, times);
            }
        }
        Ok(_) => {}
        Err(e) => out.fail(e),
    }
    if let Some(f) = d.failure {
        out.fail(f);
    }
    match consumer {
        Some((p, got, bad)) => {
            out.placed(p);
            out.check(bad == 0, || format!("{bad} event(s) out of sequence"));
            out.check(got == d.sent, || {
                format!("sent {}, the consumer saw {got}", d.sent)
            });
        }
        None => out.fail("the consumer handed no result back"),
    }
    out.param("events_total", d.sent);
    out.latency("latency_per_event", &d.hot);
    out.latency("latency_per_event_paused", &d.paused);
}

fn ev(seq: u64) -> Ev {
    Ev {
        kind: 0,
        seq,
        t_ns: 0,
        aux: 0,
    }
}

fn crossbeam(ctx: &RunCtx, b: usize) -> Outcome {
    let mut out = Outcome::default();
    let (tx, rx) = Crossbeam::make(BURST_CAPACITY);
    let sink: Sink = Arc::default();
    let shared = Shared::new();
    let consumer = {
        let sink = sink.clone();
        let core = ctx.map.core_for(0);
        std::thread::spawn(move || {
            let probe = Probe::start("consumer", core);
            let mut c = Check::new(sink);
            Crossbeam::drain(rx, |e| c.take(&e));
            (probe.finish(), c.next, c.bad)
        })
    };
    let producer = spawn_producer(ctx, &shared, &sink, b, move |first| {
        (first..first + b as u64).all(|s| Crossbeam::send(&tx, ev(s)))
    });
    let w = timed_window(ctx, &shared);
    let d = producer.join().expect("producer panicked");
    let c = consumer.join().expect("consumer panicked");
    finish(&mut out, b, w, d, Some(c));
    out
}

fn disruptor(ctx: &RunCtx, b: usize) -> Outcome {
    let mut out = Outcome::default();
    out.param("wait_strategy", "BusySpin");
    let sink: Sink = Arc::default();
    let shared = Shared::new();
    let res: Slot<(Placement, (u64, u64))> = slot();
    let init = {
        let (sink, res) = (sink.clone(), res.clone());
        let core = ctx.map.core_for(0);
        move || {
            let report = |c: &mut Check| Some((c.next, c.bad));
            Processor::start("processor", core, Check::new(sink), report, res)
        }
    };
    let mut p = disruptor::single(
        BURST_CAPACITY,
        |s: &mut Processor<Check, (u64, u64)>, e: &Ev, _seq: i64, _end: bool| s.state.take(e),
        init,
    );
    let producer = spawn_producer(ctx, &shared, &sink, b, move |first| {
        disruptor::publish_burst(&mut p, first, b, ev);
        true
    });
    let w = timed_window(ctx, &shared);
    let d = producer.join().expect("producer panicked");
    let c = take(&res).map(|(p, (next, bad))| (p, next, bad));
    finish(&mut out, b, w, d, c);
    out
}

fn rtrb_burst(ctx: &RunCtx, b: usize) -> Outcome {
    let mut out = Outcome::default();
    let (mut tx, mut rx) = rtrb::ring::<Ev>(BURST_CAPACITY);
    let sink: Sink = Arc::default();
    let shared = Shared::new();
    let sc = ctx.share_core(0, 1);
    let consumer = {
        let sink = sink.clone();
        let core = ctx.map.core_for(0);
        let mut spin = Spin::new(ctx, sc);
        std::thread::spawn(move || {
            let probe = Probe::start("consumer", core);
            let mut c = Check::new(sink);
            rtrb::drain_chunks(&mut rx, &mut spin, |e| c.take(e));
            (probe.finish(), c.next, c.bad)
        })
    };
    let mut spin = Spin::new(ctx, sc);
    let producer = spawn_producer(ctx, &shared, &sink, b, move |first| {
        // The whole burst as one chunk (b <= capacity); wait for room as a user would.
        rtrb::write_burst(&mut tx, first, b, &mut spin, ev);
        true
    });
    let w = timed_window(ctx, &shared);
    let d = producer.join().expect("producer panicked");
    let c = consumer.join().expect("consumer panicked");
    finish(&mut out, b, w, d, Some(c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_bursts_are_sampled_less_often() {
        assert_eq!(burst_sample_every(1), 512);
        assert_eq!(burst_sample_every(10), LATENCY_SAMPLE_EVERY);
        assert_eq!(burst_sample_every(100), LATENCY_SAMPLE_EVERY);
        assert!((1..=1000).all(|b| burst_sample_every(b).is_power_of_two()));
    }
}
