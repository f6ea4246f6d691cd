//! The harness's bookkeeping, measured in one stream: alternating **A/B segments**.
//!
//! Every baseline (stream peers, ping-pongs, bursts, the engine's bursts) ends its run with an
//! A/B phase: the transfer runs on, on the same queue(s) and threads, in segments of equal size
//! (events at the receiver, round trips, bursts) that alternate between **booked** (A: exactly
//! what the timed run does per event, trip or burst: publishing counts, stop checks, sender
//! counters, sampled clock reads and histogram records) and **bare** (B: the same transfer and
//! per-event work without any of it). The measured segments run in ABBA order (A B B A, A B B A,
//! ...), so that a machine drifting linearly in speed moves the two modes alike over each quad;
//! one warm-up segment before them and one cool-down segment after them are not measured (start-up
//! and wind-down). The clock is read only at segment boundaries, and each thread switches mode by
//! its own count, at a point it passes anyway (a receiver at its every-[`PUBLISH_EVERY`] point, a
//! sender or a latency driver between two of its own loops), so the switch costs nothing per event.
//!
//! Adjacent measured segments form a pair (1-2, 3-4, ...: one AB and one BA per quad, seconds
//! closer together than any two phases of a run can be), and each pair gives one cost,
//! `1 - t_bare / t_booked` in % ([`pair_costs`]): with equal sizes that is `1 - rate_booked /
//! rate_bare` on a stream and `1 - bare_mean / booked_mean` on a latency loop. A run records the
//! median of its pairs as `bookkeeping_cost`, with every pair attached ([`record`]); the report
//! pools the pairs of all runs and decides on a bootstrap 95 % interval of their median
//! ([`crate::report::bookkeeping`]).
//!
//! # The drivers
//! A latency loop (a ping-pong's thread A, a burst scenario's producer) runs its timed loop and
//! then its A/B phase in its own thread through one driver, [`latency_loop`]: it sizes the
//! [`Plan`] from the timed loop's rate and runs the segments ([`run_segments`]), each unit the
//! loop's booked step or its bare one. A stream has no such thread: its receiver crosses the boundaries ([`Receiver`], the same
//! plan and deadline rule as [`run_segments`]) and its senders follow the receiver's
//! [`SegmentWord`] (`peers::sender_loop`).
//!
//! In a stream, the receiver decides: it counts the segments by its own count at its
//! every-[`PUBLISH_EVERY`] point and publishes the number of the segment it is in (one store a
//! segment, [`SegmentWord`]); the senders look at that word every [`super::STOP_CHECK_EVERY`] events, in
//! both modes, which is where and how often the timed run's senders look at the stop flag (in a
//! booked segment that look *is* the stop check; the A/B phase ends when the word passes the last
//! segment). Senders therefore switch at most a queue's depth plus [`super::STOP_CHECK_EVERY`] events per
//! sender after the receiver. Stream segments are at least [`STREAM_SEGMENT_MIN`] = 32 queue
//! capacities, so that this overlap is at most 1/32 of a segment plus 1/128 per sender. (Senders
//! switching by their own counts would need fair senders: two senders time-sliced on one core
//! run whole scheduler slices apart, and a receiver's segment then held events its senders had
//! sent in the other mode: harness/BENCHMARKS.md, "Bookkeeping cost: A/B segments in one
//! stream".)

use super::{Mode, Outcome, Shared, PUBLISH_EVERY, STREAM_CAPACITY};
use crate::clock::now_ns;
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a segment does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A: with the timed run's bookkeeping.
    Booked,
    /// B: without it.
    Bare,
}

/// Unmeasured segments before the measured ones (start-up: threads, caches, the queue filling).
pub const WARMUP_SEGMENTS: usize = 1;
/// Unmeasured segments after the measured ones (wind-down: senders finishing, the queue draining).
pub const COOLDOWN_SEGMENTS: usize = 1;
/// How long a latency loop's timed loop goes on past its stop flag while it has no sample yet
/// ([`latency_loop`]); an empty histogram after it is a failed check.
pub const EMPTY_WINDOW_GRACE_NS: u64 = 2_000_000_000;
/// About how long one segment should last: short enough that the two segments of a pair see the
/// same neighbours' load, long enough that two clock reads are nothing against it.
pub const SEGMENT_TARGET: Duration = Duration::from_millis(4);
/// Fewest events (at the receiver) of a stream segment: 32 queue capacities, so that senders and
/// receiver, which switch at most a queue's depth (and [`super::STOP_CHECK_EVERY`] events a sender)
/// apart, agree on all but 1/32 (and 1/128 a sender) of a segment.
pub const STREAM_SEGMENT_MIN: u64 = 32 * STREAM_CAPACITY as u64;
/// Fewest round trips or bursts of a latency loop's segment (and the multiple its size is rounded
/// to: every segment then holds the same number of publishing points and of sampled iterations).
pub const LATENCY_SEGMENT_MIN: u64 = PUBLISH_EVERY;

/// How long a latency loop's measured segments should last in all (about; a loop slower than
/// [`SEGMENT_TARGET`] per smallest segment runs one ABBA quad).
pub fn latency_phase(mode: Mode) -> Duration {
    Duration::from_millis(mode.pick(20, 300, 2000))
}

/// How long a stream's measured segments should last in all: twice a latency loop's, because a
/// stream's segments are at least [`STREAM_SEGMENT_MIN`] events (13 ms at 10 M events/s), so
/// that the same time gives it fewer pairs, and a stream's pairs scatter more (two or three
/// threads on two shared vCPUs).
pub fn stream_phase(mode: Mode) -> Duration {
    Duration::from_millis(mode.pick(40, 600, 3000))
}

/// Longest the measured segments of a phase of about `phase` may run, in ns, from the first
/// measured boundary: twice `phase`. A loop that runs slower than the rate its plan was sized for
/// (a channel whose receiver started parking, a loaded machine) ends its measured segments at the
/// first whole ABBA quad past it, so that a slow regime does not stretch the run.
pub fn deadline_ns(phase: Duration) -> u64 {
    2 * phase.as_nanos() as u64
}

/// The mode of measured segment `j` (0-based): ABBA, repeated.
pub fn abba(j: usize) -> Seg {
    if matches!(j % 4, 0 | 3) {
        Seg::Booked
    } else {
        Seg::Bare
    }
}

/// The segments of one A/B phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Units per segment (events at the receiver, round trips, bursts), > 0.
    pub size: u64,
    /// Measured segments: a multiple of 4 (whole ABBA quads), at least 4.
    pub measured: usize,
}

impl Plan {
    /// A plan for a loop that runs `rate` units a second: segments of about [`SEGMENT_TARGET`],
    /// at least `min` units, rounded up to a multiple of `multiple`; as many whole ABBA quads as
    /// fit in `phase` ([`latency_phase`], [`stream_phase`]), at least one (a rate that is not a
    /// positive number gives `min`-sized segments and one quad).
    pub fn sized(phase: Duration, rate: f64, min: u64, multiple: u64) -> Plan {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            0.0
        };
        let multiple = multiple.max(1);
        let want = (rate * SEGMENT_TARGET.as_secs_f64()) as u64;
        let size = want.max(min).max(1).div_ceil(multiple) * multiple;
        let fit = if rate > 0.0 {
            (phase.as_secs_f64() * rate / size as f64) as usize
        } else {
            0
        };
        Plan {
            size,
            measured: (fit / 4).max(1) * 4,
        }
    }

    /// Segments to run: warm-up, measured, cool-down.
    pub fn total(&self) -> usize {
        WARMUP_SEGMENTS + self.measured + COOLDOWN_SEGMENTS
    }

    /// The mode of segment `k` of [`Self::total`] (warm-up and cool-down are booked).
    pub fn mode(&self, k: usize) -> Seg {
        match k.checked_sub(WARMUP_SEGMENTS) {
            Some(j) if j < self.measured => abba(j),
            _ => Seg::Booked,
        }
    }

    /// Whether the boundary that starts segment `k` is one the clock is read at: the start of each
    /// measured segment and the end of the last one.
    pub fn timed_boundary(&self, k: usize) -> bool {
        (WARMUP_SEGMENTS..=WARMUP_SEGMENTS + self.measured).contains(&k)
    }
}

/// The cost of each pair of adjacent measured segments, in %, from the clock read at each measured
/// boundary (`times[j]` starts measured segment `j`, the last one ends the last segment):
/// `100 * (1 - t_bare / t_booked)`. Pairs whose booked segment took no time are left out.
pub fn pair_costs(times: &[u64]) -> Vec<f64> {
    let durations: Vec<u64> = times
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    durations
        .chunks_exact(2)
        .enumerate()
        .filter_map(|(p, d)| {
            let (booked, bare) = match abba(2 * p) {
                Seg::Booked => (d[0], d[1]),
                Seg::Bare => (d[1], d[0]),
            };
            (booked > 0).then(|| 100.0 * (1.0 - bare as f64 / booked as f64))
        })
        .collect()
}

/// Nanoseconds spent in booked and in bare measured segments, from the boundary clock reads.
fn mode_times(times: &[u64]) -> (u64, u64) {
    times
        .windows(2)
        .enumerate()
        .fold((0, 0), |(a, b), (j, w)| match abba(j) {
            Seg::Booked => (a + w[1].saturating_sub(w[0]), b),
            Seg::Bare => (a, b + w[1].saturating_sub(w[0])),
        })
}

/// What a loop's segments are counted in.
#[derive(Clone, Copy, Debug)]
pub enum Figure {
    /// A stream: `throughput_booked` / `throughput_bare`, events/s.
    Throughput,
    /// A latency loop: `{metric}_booked` / `{metric}_bare`, mean ns per unit divided by `per_unit`
    /// (2 for the one-way time of a round trip, B for the time per event of a burst of B).
    Latency {
        /// The latency metric the figures belong to (`latency_one_way`).
        metric: &'static str,
        /// What one unit's time is divided by.
        per_unit: f64,
    },
}

/// Records an A/B phase: the booked and the bare segments' pooled figures, the plan, and
/// `bookkeeping_cost` (the median of the run's pair costs, %) with every pair attached. `times`
/// are the clock reads at the measured boundaries: `plan.measured + 1` of them, or fewer when the
/// deadline ended the phase early (whole ABBA quads only).
pub fn record(out: &mut Outcome, figure: Figure, plan: &Plan, times: &[u64]) {
    let measured = times.len().saturating_sub(1);
    if measured == 0 || measured % 4 != 0 || measured > plan.measured {
        out.note(format!(
            "the A/B segments measured {} boundaries of {}",
            times.len(),
            plan.measured + 1
        ));
        return;
    }
    out.param("ab_segment_size", plan.size);
    out.param("ab_segments", measured as u64);
    let (t_booked, t_bare) = mode_times(times);
    let units = plan.size * (measured / 2) as u64;
    match figure {
        Figure::Throughput => {
            out.throughput(
                "throughput_booked",
                "events/s",
                units,
                t_booked as f64 / 1e9,
            );
            out.throughput("throughput_bare", "events/s", units, t_bare as f64 / 1e9);
        }
        Figure::Latency { metric, per_unit } => {
            let mean = |t: u64| t as f64 / (units as f64 * per_unit);
            out.value(
                &format!("{metric}_booked"),
                "ns",
                mean(t_booked),
                Better::Lower,
            );
            out.value(&format!("{metric}_bare"), "ns", mean(t_bare), Better::Lower);
        }
    }
    let costs = pair_costs(times);
    if costs.is_empty() {
        out.note("the A/B segments gave no pair");
    } else {
        out.paired("bookkeeping_cost", "%", costs, Better::Lower);
    }
}

/// Runs a latency loop's A/B phase in the calling thread: `segment(mode, units)` runs one
/// segment; the clock is read before each measured segment and after the last one. Returns those
/// reads, or the first segment's error.
///
/// # Errors
/// The first error a segment returns (a lost or reordered event, a peer that is gone).
pub fn run_segments(
    plan: &Plan,
    deadline_ns: u64,
    mut segment: impl FnMut(Seg, u64) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    let mut times = Vec::with_capacity(plan.measured + 1);
    let mut k = 0;
    while k < plan.total() {
        if plan.timed_boundary(k) {
            let t = now_ns();
            times.push(t);
            if past_deadline(plan, k, &times, deadline_ns) {
                // On to the cool-down segment.
                k = WARMUP_SEGMENTS + plan.measured;
            }
        }
        segment(plan.mode(k), plan.size)?;
        k += 1;
    }
    Ok(times)
}

/// Why a latency loop stopped before its end: an error in its timed loop or in its A/B phase.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The timed loop failed (a lost or reordered event, a peer that is gone).
    Timed(String),
    /// The A/B phase failed.
    Ab(String),
}

impl Stopped {
    /// The error, whichever phase it stopped.
    pub fn into_message(self) -> String {
        match self {
            Stopped::Timed(e) | Stopped::Ab(e) => e,
        }
    }
}

/// Drives a latency loop (a ping-pong's round trips, a burst scenario's bursts) in the calling
/// thread: its **timed loop** runs `booked(state, shared, hist)`, one unit (trip, burst) with its
/// bookkeeping, until `shared`'s stop flag (and, should `hist` still be empty then, until its
/// first sample, for at most [`EMPTY_WINDOW_GRACE_NS`]); then its **A/B phase** runs on, on the same queues, with
/// the plan sized from the timed loop's rate (`units(state)` when it ended, over its time) to fill
/// [`latency_phase`]: a booked unit is the same `booked` step, publishing into a stop flag and
/// counter of its own (never raised) and recording into a scratch histogram; a bare unit is
/// `bare(state)`, the same transfer without bookkeeping. `state` is what both steps move on (the
/// queue's handle, the sequence number, the count). Returns the plan and the clock reads at its
/// measured boundaries, for [`record`]. Every latency loop is driven by this one function.
///
/// # Errors
/// The first error a unit returns, with the phase it stopped ([`Stopped`]).
pub fn latency_loop<S>(
    mode: Mode,
    shared: &Shared,
    hist: &mut Histogram<u64>,
    state: &mut S,
    units: fn(&S) -> u64,
    mut booked: impl FnMut(&mut S, &Shared, &mut Histogram<u64>) -> Result<(), String>,
    mut bare: impl FnMut(&mut S) -> Result<(), String>,
) -> Result<(Plan, Vec<u64>), Stopped> {
    let t_begin = now_ns();
    let mut grace_until = None;
    loop {
        if shared.stopped() {
            // A unit is timed one in many (`burst_sample_every`, the ping-pongs' sampling): a
            // window that a descheduled virtual CPU cut to a few units (a smoke window) can end
            // with none timed. The loop goes on, still measuring, until the first sample, for
            // at most EMPTY_WINDOW_GRACE; a window with a sample ends at once.
            let until = *grace_until.get_or_insert_with(|| now_ns() + EMPTY_WINDOW_GRACE_NS);
            if !hist.is_empty() || now_ns() > until {
                break;
            }
        }
        booked(state, shared, hist).map_err(Stopped::Timed)?;
    }
    let rate = units(state) as f64 * 1e9 / now_ns().saturating_sub(t_begin).max(1) as f64;
    let phase = latency_phase(mode);
    let plan = Plan::sized(phase, rate, LATENCY_SEGMENT_MIN, LATENCY_SEGMENT_MIN);
    // The booked segments' own stop flag (never raised), counter and histogram.
    let book = Shared::new();
    book.measuring.store(true, Ordering::Relaxed);
    let mut scratch = new_hist();
    let times = run_segments(&plan, deadline_ns(phase), |seg, n| {
        match seg {
            Seg::Booked => {
                for _ in 0..n {
                    if book.stopped() {
                        break;
                    }
                    booked(state, &book, &mut scratch)?;
                }
            }
            Seg::Bare => {
                for _ in 0..n {
                    bare(state)?;
                }
            }
        }
        Ok(())
    })
    .map_err(Stopped::Ab)?;
    Ok((plan, times))
}

/// Whether the measured segments should end at the boundary that starts segment `k` (its clock
/// read the last of `times`): it ends a whole ABBA quad before the last one, and the measured
/// segments have run longer than `deadline_ns`.
fn past_deadline(plan: &Plan, k: usize, times: &[u64], deadline_ns: u64) -> bool {
    let j = k - WARMUP_SEGMENTS;
    j > 0
        && j < plan.measured
        && j % 4 == 0
        && times[times.len() - 1].saturating_sub(times[0]) > deadline_ns
}

/// The number of the segment a stream's receiver is in (0 ..= [`Plan::total`]), written by the
/// receiver once a segment and read by the senders every [`super::STOP_CHECK_EVERY`] events.
pub type SegmentWord = Arc<CachePadded<AtomicUsize>>;

/// A stream receiver's side of the A/B phase: the mode of the segment it is in, switched at its
/// every-[`PUBLISH_EVERY`] point when its count reaches a boundary, where it also reads the clock
/// (at measured boundaries; past the deadline it ends the measured segments at a whole quad, as
/// [`run_segments`] does) and publishes the new segment's number for the senders.
#[derive(Debug)]
pub struct Receiver {
    plan: Plan,
    deadline_ns: u64,
    word: SegmentWord,
    /// The segment the receiver is in (0 ..= `plan.total()`).
    k: usize,
    /// The count that ends segment `k`.
    next: u64,
    booked: bool,
    /// Clock reads at the measured boundaries.
    pub times: Vec<u64>,
}

impl Receiver {
    /// A receiver for `plan` (its size a multiple of [`PUBLISH_EVERY`], in events at the
    /// receiver) and `deadline_ns` ([`deadline_ns`]), publishing its segment into `word`.
    pub fn new(plan: Plan, deadline_ns: u64, word: SegmentWord) -> Self {
        debug_assert_eq!(plan.size % PUBLISH_EVERY, 0);
        word.store(0, Ordering::Release);
        Receiver {
            plan,
            deadline_ns,
            word,
            k: 0,
            next: plan.size,
            booked: plan.mode(0) == Seg::Booked,
            times: Vec::with_capacity(plan.measured + 1),
        }
    }

    /// Whether the segment the receiver is in is booked.
    #[inline]
    pub fn booked(&self) -> bool {
        self.booked
    }

    /// At an every-[`PUBLISH_EVERY`] point with count `n`: crosses into the next segment when `n`
    /// ends this one.
    #[inline]
    pub fn at(&mut self, n: u64) {
        if n == self.next {
            self.cross();
        }
    }

    #[cold]
    fn cross(&mut self) {
        self.k += 1;
        self.next += self.plan.size;
        if self.plan.timed_boundary(self.k) {
            self.times.push(now_ns());
            if past_deadline(&self.plan, self.k, &self.times, self.deadline_ns) {
                // On to the cool-down segment.
                self.k = WARMUP_SEGMENTS + self.plan.measured;
            }
        }
        self.booked = self.plan.mode(self.k) == Seg::Booked;
        self.word.store(self.k, Ordering::Release);
    }
}

/// A new [`SegmentWord`] (segment 0).
pub fn segment_word() -> SegmentWord {
    Arc::new(CachePadded::new(AtomicUsize::new(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A window cut short before any unit was timed (a smoke window on a descheduled vCPU: the
    // stop flag is up before the loop begins) still ends with a sample: the timed loop goes on,
    // measuring, until the first one; a unit is timed one in eight here.
    #[test]
    fn a_latency_loop_whose_window_timed_nothing_goes_on_to_its_first_sample() {
        let shared = Shared::new();
        shared.measuring.store(true, Ordering::Relaxed);
        shared.stop.store(true, Ordering::Relaxed);
        let mut hist = new_hist();
        let mut units = 0u64;
        let booked = |n: &mut u64, sh: &Shared, h: &mut Histogram<u64>| {
            *n += 1;
            if *n % 8 == 0 && sh.measuring() {
                h.saturating_record(1_000);
            }
            Ok(())
        };
        latency_loop(
            Mode::Smoke,
            &shared,
            &mut hist,
            &mut units,
            |n| *n,
            booked,
            |n| {
                *n += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(hist.len(), 1, "the timed loop stops at its first sample");
    }

    #[test]
    fn measured_segments_run_abba_between_booked_warmup_and_cooldown() {
        let plan = Plan {
            size: 256,
            measured: 8,
        };
        let modes: Vec<Seg> = (0..plan.total()).map(|k| plan.mode(k)).collect();
        use Seg::{Bare as B, Booked as A};
        assert_eq!(modes, [A, A, B, B, A, A, B, B, A, A]);
        let timed: Vec<usize> = (0..=plan.total())
            .filter(|&k| plan.timed_boundary(k))
            .collect();
        assert_eq!(timed, (1..=9).collect::<Vec<_>>());
    }

    #[test]
    fn pairs_are_adjacent_segments_and_abba_cancels_a_linear_drift() {
        // Booked 110 ns, bare 100 ns: every pair costs 1 - 100/110 = 9.09 %.
        let t = [0, 110, 210, 310, 420];
        let c = pair_costs(&t);
        assert_eq!(c.len(), 2);
        for x in &c {
            assert!((x - 100.0 / 11.0).abs() < 1e-9, "{c:?}");
        }
        // No bookkeeping, but the machine slows down by 10 ns per segment: the AB pair reads
        // negative, the BA pair positive, and they cancel.
        let mut t = vec![0u64];
        for j in 0..8u64 {
            t.push(t[t.len() - 1] + 1000 + 10 * j);
        }
        let c = pair_costs(&t);
        assert_eq!(c.len(), 4);
        assert!(c[0] < 0.0 && c[1] > 0.0, "{c:?}");
        let mean = c.iter().sum::<f64>() / c.len() as f64;
        // To first order: the ratios leave 1.4 % of a pair's bias.
        assert!(mean.abs() < 0.02 * c[0].abs(), "{c:?}");
        let (a, b) = mode_times(&t);
        assert_eq!(a, b);
    }

    #[test]
    fn a_sized_plan_has_whole_quads_and_segments_of_the_target_length() {
        // 100 M events/s, quick: 400,000 events (4 ms) a segment, rounded to 512, 300 ms / 4 ms
        // = 75 segments -> 72.
        let quick = latency_phase(Mode::Quick);
        let p = Plan::sized(quick, 1e8, STREAM_SEGMENT_MIN, 512);
        assert_eq!(p.size, 400_384);
        assert_eq!(p.measured, 72);
        // A slow stream: the 32-capacity floor, fewer segments.
        let p = Plan::sized(quick, 3e6, STREAM_SEGMENT_MIN, 256);
        assert_eq!(p.size, STREAM_SEGMENT_MIN);
        assert_eq!(p.measured, 4 * (900_000 / STREAM_SEGMENT_MIN as usize / 4));
        // No rate: one quad of the smallest segments.
        let p = Plan::sized(quick, f64::NAN, 256, 256);
        assert_eq!((p.size, p.measured), (256, 4));
    }

    #[test]
    fn the_receiver_switches_mode_and_reads_the_clock_at_its_boundaries() {
        let plan = Plan {
            size: 512,
            measured: 4,
        };
        let word = segment_word();
        let mut r = Receiver::new(plan, u64::MAX, word.clone());
        let (mut modes, mut words) = (Vec::new(), Vec::new());
        let mut n = 0;
        while n < 512 * plan.total() as u64 {
            n += PUBLISH_EVERY;
            r.at(n);
            modes.push(r.booked());
            words.push(word.load(Ordering::Acquire));
        }
        // Two points a segment; after the point at 512 k the receiver is in segment k:
        // warm-up A, measured A B B A, cool-down A (and A past the end).
        let (a, b) = (true, false);
        assert_eq!(modes, [a, a, a, b, b, b, b, a, a, a, a, a]);
        assert_eq!(r.times.len(), 5);
        // The senders see the segment the receiver is in, and 6 (past the last) at the end.
        assert_eq!(words, [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6]);
    }

    #[test]
    fn past_the_deadline_the_measured_segments_end_at_a_whole_quad() {
        let plan = Plan {
            size: 256,
            measured: 12,
        };
        // Each segment takes at least 1 ms here; a 2.5 ms deadline ends after the first quad.
        let mut modes = Vec::new();
        let times = run_segments(&plan, 2_500_000, |m, n| {
            modes.push(m);
            assert_eq!(n, 256);
            std::thread::sleep(Duration::from_millis(1));
            Ok(())
        })
        .unwrap();
        use Seg::{Bare as B, Booked as A};
        assert_eq!(modes, [A, A, B, B, A, A]);
        assert_eq!(times.len(), 5);
        // Without a deadline, all of them; a failing segment stops the phase.
        let all = run_segments(&plan, u64::MAX, |_, _| Ok(())).unwrap();
        assert_eq!(all.len(), 13);
        let err = run_segments(&plan, u64::MAX, |_, _| Err("lost".to_string()));
        assert_eq!(err, Err("lost".to_string()));
        // The receiver does the same at its boundaries.
        let word = segment_word();
        let mut r = Receiver::new(plan, 0, word.clone());
        let mut n = 0;
        while word.load(Ordering::Acquire) < plan.total() {
            n += PUBLISH_EVERY;
            std::thread::sleep(Duration::from_micros(10));
            r.at(n);
        }
        // Warm-up, one quad, cool-down.
        assert_eq!(n, 6 * 256);
        assert_eq!(r.times.len(), 5);
    }

    #[test]
    fn record_pools_each_mode_and_attaches_the_pairs() {
        let plan = Plan {
            size: 1000,
            measured: 4,
        };
        // Booked segments 1.1 ms, bare 1.0 ms.
        let t = [0, 1_100_000, 2_100_000, 3_100_000, 4_200_000];
        let mut out = Outcome::default();
        record(&mut out, Figure::Throughput, &plan, &t);
        let get = |m: &str| out.metrics.iter().find(|x| x.metric == m).cloned();
        let booked = get("throughput_booked").unwrap().value;
        let bare = get("throughput_bare").unwrap().value;
        assert!((booked - 2000.0 / 2.2e-3).abs() < 1e-3, "{booked}");
        assert!((bare - 1e6).abs() < 1e-3, "{bare}");
        let cost = get("bookkeeping_cost").unwrap();
        assert_eq!(cost.pairs.as_ref().map(Vec::len), Some(2));
        assert!((cost.value - 100.0 / 11.0).abs() < 1e-9);
        // Latency: mean per unit, halved for one-way.
        let mut out = Outcome::default();
        let fig = Figure::Latency {
            metric: "latency_one_way",
            per_unit: 2.0,
        };
        record(&mut out, fig, &plan, &t);
        let booked = out
            .metrics
            .iter()
            .find(|m| m.metric == "latency_one_way_booked");
        assert_eq!(booked.map(|m| m.value), Some(550.0));
        // Boundaries missing: a note, no figure.
        let mut out = Outcome::default();
        record(&mut out, Figure::Throughput, &plan, &t[..3]);
        assert!(out.metrics.is_empty() && out.notes.len() == 1);
    }
}
