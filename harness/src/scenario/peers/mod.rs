//! Peers: the crates a Rust user would pick instead of the engine, each driven the way its own
//! documentation shows, measured in the same run, on the same cores, with the same event. This
//! module runs the stream peers (`stream/{N}to1/*`) and the ping-pong peers (`pingpong/*`).
//!
//! # One adapter file per peer crate
//! How a crate is built and driven lives in one file named after it, and every scenario that
//! runs the crate (these streams and ping-pongs, [`super::burst`], [`super::baseline`],
//! [`super::async_tokio`], the workload twins) goes through that file: [`crossbeam_channel`],
//! [`std_mpsc`], [`kanal`], [`flume`], [`tokio`], [`disruptor`], [`rtrb`], [`array_queue`]. The
//! two shapes most of them share, a blocking channel and a spinning ring, are in [`shape`].
//!
//! # How each peer is driven (see `harness/BENCHMARKS.md`, "Peers")
//! - **Channels** (crossbeam-channel, std `mpsc::sync_channel`, kanal, flume): `bounded(4096)`,
//!   senders call the blocking `send`, the receiver calls the blocking `recv` until every sender
//!   is gone (the channel then reports disconnection). No `try_recv` spinning: that is not how
//!   their documentation uses them, and it handicaps them.
//! - **tokio mpsc**: `channel(4096)`, senders call `blocking_send`, the receiver calls
//!   `blocking_recv_many` (its batch receive) into a reused buffer of 256 events.
//! - **disruptor** (crate `disruptor` 4.x): `build_single_producer` / `build_multi_producer`
//!   with a ring of 4096, the `BusySpin` wait strategy and one `handle_events_and_state_with`
//!   processor (the crate's managed thread; the state is where the per-event work keeps its
//!   counters); producers call `publish`. `disruptor` is the single-producer one-producer bound,
//!   `disruptor-mp` the multi-producer one (a peer for the targets).
//! - **rtrb** (SPSC ring, one-producer bound): `RingBuffer::new(4096)`, `push` and `pop`, each
//!   side spinning while the ring is full or empty.
//!
//! - **ArrayQueue** (crossbeam-queue, no blocking operations): `ArrayQueue::new(4096)`, `push` and
//!   `pop`, both sides spinning, like rtrb (a baseline).
//!
//! # Per-event work on the receiving side
//! Every peer's receiver does exactly what the engine's listener in `stream/*/engine` does:
//! the per-sender sequence check ([`FifoCheck::take`], which counts) and one predictable branch
//! taken every [`super::PUBLISH_EVERY`] events, where the count is published for the timed
//! window.
//!
//! # The bookkeeping's cost
//! After its timed run, each stream peer runs an A/B phase ([`super::ab`]) in the same process,
//! on a fresh queue of the same capacity with the same threads on the same cores: one stream in
//! which the senders and the receiver (the same `Book`) alternate booked segments, which do
//! exactly what the timed run does (publishing, stop checks, sender counters), and bare ones,
//! which do none of it, in ABBA order. The ping-pongs and bursts continue on their own queues
//! after the timed window, alternating booked round trips or bursts (the timed loop's sampled
//! clock reads, histogram records, stop checks and publishing) with bare ones. `bookkeeping_cost`
//! is the median of the pairs' `1 - t_bare / t_booked`.

pub mod array_queue;
pub mod crossbeam_channel;
pub mod disruptor;
pub mod flume;
pub mod kanal;
pub mod rtrb;
pub mod shape;
pub mod std_mpsc;
pub mod tokio;

use self::array_queue::Array;
use self::crossbeam_channel::Crossbeam;
use self::disruptor::{DProducer, Processor};
use self::flume::Flume;
use self::kanal::Kanal;
use self::rtrb::Rtrb;
use self::shape::{BlockingChannel, SpinRing};
use self::std_mpsc::StdMpsc;
use self::tokio::{TokioMpsc, TOKIO_BATCH};
use super::ab::{self, Figure, Plan};
use super::{
    sample, sample_clock, sender_counters, sender_slot, sends, slot, stream_figures, take,
    timed_window, timed_window_with, Ev, Family, FifoCheck, Mode, Outcome, RunCtx, Scenario,
    Shared, Slot, Spin, BARE, BOOKED, LATENCY_SAMPLE_EVERY, PUBLISH_EVERY, STREAM_CAPACITY,
};
use crate::pin::{Placement, Probe};
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The multi-producer-capable peers of `stream/{N}to1` (and the target's "fastest peer").
pub const MP_PEERS: [&str; 6] = [
    "crossbeam-channel",
    "std-mpsc",
    "kanal",
    "flume",
    "tokio-mpsc",
    "disruptor-mp",
];

/// The one-producer bound peers (reported, not a target).
pub const SP_PEERS: [&str; 2] = ["disruptor", "rtrb"];

/// A stream peer of the catalogue: its name (`stream/{N}to1/{name}`), what it drives, which
/// fan-ins it runs in, and its body.
struct StreamPeer {
    name: &'static str,
    /// What it is to the targets: a peer, a one-producer bound, a baseline.
    role: &'static str,
    /// What runs; `{cap}` stands for [`STREAM_CAPACITY`].
    drives: &'static str,
    /// Runs in `stream/1to1` only (one producer, or no fan-in of its own).
    one_to_one_only: bool,
    run: fn(&RunCtx, usize) -> Outcome,
}

/// Every stream peer, in the order they run.
const STREAM_PEERS: [StreamPeer; 9] = [
    StreamPeer {
        name: "crossbeam-channel",
        role: "peer",
        drives: "crossbeam_channel::bounded({cap}), blocking send / blocking recv",
        one_to_one_only: false,
        run: channel_stream::<Crossbeam>,
    },
    StreamPeer {
        name: "std-mpsc",
        role: "peer",
        drives: "std::sync::mpsc::sync_channel({cap}), blocking send / blocking recv",
        one_to_one_only: true,
        run: channel_stream::<StdMpsc>,
    },
    StreamPeer {
        name: "kanal",
        role: "peer",
        drives: "kanal::bounded({cap}), blocking send / blocking recv",
        one_to_one_only: false,
        run: channel_stream::<Kanal>,
    },
    StreamPeer {
        name: "flume",
        role: "peer",
        drives: "flume::bounded({cap}), blocking send / blocking recv",
        one_to_one_only: false,
        run: channel_stream::<Flume>,
    },
    StreamPeer {
        name: "tokio-mpsc",
        role: "peer",
        drives: "tokio::sync::mpsc::channel({cap}), blocking_send / blocking_recv_many({batch})",
        one_to_one_only: false,
        run: channel_stream::<TokioMpsc>,
    },
    StreamPeer {
        name: "disruptor-mp",
        role: "peer",
        drives: "disruptor::build_multi_producer({cap}, BusySpin), one managed processor",
        one_to_one_only: false,
        run: |ctx, n| disruptor_stream(ctx, n, true),
    },
    StreamPeer {
        name: "disruptor",
        role: "one-producer bound",
        drives: "disruptor::build_single_producer({cap}, BusySpin), one managed processor",
        one_to_one_only: true,
        run: |ctx, n| disruptor_stream(ctx, n, false),
    },
    StreamPeer {
        name: "rtrb",
        role: "one-producer bound",
        drives: "rtrb::RingBuffer::new({cap}), push / pop, both spinning",
        one_to_one_only: true,
        run: |ctx, _| ring_stream::<Rtrb>(ctx),
    },
    StreamPeer {
        name: "arrayqueue",
        role: "baseline",
        drives: "crossbeam_queue::ArrayQueue::new({cap}), push / pop, both spinning (no blocking operations)",
        one_to_one_only: true,
        run: |ctx, _| ring_stream::<Array>(ctx),
    },
];

/// Registers the stream peers for `n` senders.
pub fn register_stream(v: &mut Vec<Scenario>, n: usize) {
    for p in STREAM_PEERS.iter().filter(|p| n == 1 || !p.one_to_one_only) {
        let run = p.run;
        v.push(Scenario::new(
            format!("stream/{n}to1/{}", p.name),
            format!(
                "{}: {n} sender(s) -> {}",
                p.role,
                p.drives
                    .replace("{cap}", &STREAM_CAPACITY.to_string())
                    .replace("{batch}", &TOKIO_BATCH.to_string())
            ),
            n + 1,
            Family::Baseline,
            move |ctx| run(ctx, n),
        ));
    }
}

/// Registers the ping-pong peers.
pub fn register_pingpong(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "pingpong/crossbeam-channel",
        "peer: two pinned threads bounce one event over two crossbeam channels, blocking recv",
        2,
        Family::Baseline,
        channel_pingpong::<Crossbeam>,
    ));
    v.push(Scenario::new(
        "pingpong/kanal",
        "peer: two pinned threads bounce one event over two kanal channels, blocking recv",
        2,
        Family::Baseline,
        channel_pingpong::<Kanal>,
    ));
    v.push(Scenario::new(
        "pingpong/disruptor",
        "peer: one event bounced over two single-producer disruptors (BusySpin processor echoes, EventPoller answers)",
        2,
        Family::Baseline,
        disruptor_pingpong,
    ));
}

/// One phase of a stream peer: the **timed** run (time-bounded: senders flood until the stop
/// flag and publish their counts, the receiver publishes its count) or the **A/B** phase
/// (count-bounded, [`super::ab`]: the same stream alternates booked segments, which do exactly
/// what the timed run does, and bare ones, which do none of the bookkeeping).
#[derive(Clone)]
enum Phase {
    Timed {
        shared: Arc<Shared>,
        counters: Arc<Vec<CachePadded<AtomicU64>>>,
    },
    Ab {
        /// The segments, in events at the receiver.
        plan: Plan,
        /// [`ab::deadline_ns`].
        deadline_ns: u64,
        /// The segment the receiver is in: the senders' mode and stop flag.
        word: ab::SegmentWord,
        /// Where the booked receiver publishes.
        shared: Arc<Shared>,
        counters: Arc<Vec<CachePadded<AtomicU64>>>,
    },
}

/// What the receiver does at every [`PUBLISH_EVERY`]-th event, out of line.
enum AtPoint {
    /// Timed run: publish the count for the timed window.
    Publish(Arc<Shared>),
    /// A/B phase: publish in booked segments only, and cross segment boundaries (reading the
    /// clock there).
    Ab(Arc<Shared>, ab::Receiver),
}

/// The receiving side's per-event work, the same as the engine listener's and the same in the
/// timed run and the A/B phase: the sequence check ([`FifoCheck::take`], which counts), and one
/// predictable branch that is taken every [`PUBLISH_EVERY`] events. Only what happens in that
/// branch differs: publishing (the bookkeeping), or in the A/B phase publishing in booked
/// segments and nothing in bare ones, and the boundary test.
struct Book {
    fifo: FifoCheck,
    at_point: AtPoint,
}

impl Book {
    fn new(n: usize, phase: &Phase) -> Self {
        let at_point = match phase {
            Phase::Timed { shared, .. } => AtPoint::Publish(shared.clone()),
            Phase::Ab {
                plan,
                deadline_ns,
                word,
                shared,
                ..
            } => AtPoint::Ab(
                shared.clone(),
                ab::Receiver::new(*plan, *deadline_ns, word.clone()),
            ),
        };
        Book {
            fifo: FifoCheck::new(n),
            at_point,
        }
    }

    #[inline]
    fn on_event(&mut self, e: &Ev) {
        self.fifo.take(e.seq);
        if self.fifo.total & (PUBLISH_EVERY - 1) == 0 {
            self.at_point();
        }
    }

    #[cold]
    #[inline(never)]
    fn at_point(&mut self) {
        let n = self.fifo.total;
        match &mut self.at_point {
            AtPoint::Publish(shared) => shared.publish(n, true),
            AtPoint::Ab(shared, r) => {
                if r.booked() {
                    shared.publish(n, true);
                }
                r.at(n);
            }
        }
    }

    /// The A/B phase's receiver (`None` in a timed run).
    fn ab(&self) -> Option<&ab::Receiver> {
        match &self.at_point {
            AtPoint::Ab(_, r) => Some(r),
            AtPoint::Publish(_) => None,
        }
    }
}

/// A sender of a stream peer: in the timed run it floods until the stop flag, publishing its
/// count ([`sends`]`::<BOOKED>`); in the A/B phase it follows the receiver's segment word, sending
/// with [`sends`]`::<BOOKED>` in booked segments and `::<BARE>` in bare ones (both look at the word
/// every [`STOP_CHECK_EVERY`] events, where the timed run looks at the stop flag), and stops
/// when the word passes the last segment. Returns how many it sent.
fn sender_loop(s: usize, phase: &Phase, mut send: impl FnMut(Ev) -> bool) -> u64 {
    match phase {
        Phase::Timed { shared, counters } => {
            sends::<BOOKED>(s, &counters[s], 0, || shared.stopped(), &mut send).0
        }
        Phase::Ab {
            plan,
            word,
            counters,
            ..
        } => {
            let mut i = 0;
            loop {
                let k = word.load(Ordering::Acquire);
                if k >= plan.total() {
                    break;
                }
                let moved = || word.load(Ordering::Relaxed) != k;
                let (sent, failed) = match plan.mode(k) {
                    ab::Seg::Booked => sends::<BOOKED>(s, &counters[s], i, moved, &mut send),
                    ab::Seg::Bare => sends::<BARE>(s, &counters[s], i, moved, &mut send),
                };
                i = sent;
                if failed {
                    break;
                }
            }
            i
        }
    }
}

/// Spawns sender `s` of a stream peer on its slot's core: `body` runs between the probe's start
/// and finish and returns what it sent.
pub(super) fn spawn_sender(
    ctx: &RunCtx,
    s: usize,
    body: impl FnOnce() -> u64 + Send + 'static,
) -> std::thread::JoinHandle<(Placement, u64)> {
    let core = ctx.map.core_for(sender_slot(ctx, s));
    std::thread::spawn(move || {
        let probe = Probe::start(format!("sender{s}"), core);
        let sent = body();
        (probe.finish(), sent)
    })
}

/// Spawns the receiver of a stream peer on slot 0: `body` runs between the probe's start and
/// finish and hands back its [`Book`].
fn spawn_receiver(
    ctx: &RunCtx,
    body: impl FnOnce() -> Book + Send + 'static,
) -> std::thread::JoinHandle<(Placement, Book)> {
    let core = ctx.map.core_for(0);
    std::thread::spawn(move || {
        let probe = Probe::start("receiver", core);
        let book = body();
        (probe.finish(), book)
    })
}

/// What one phase of a stream peer ran: the placements, what each sender sent and the
/// receiver's book (`None` when the receiver handed nothing back).
struct Ran {
    placement: Vec<Placement>,
    sent: Vec<u64>,
    book: Option<Book>,
}

impl Ran {
    fn join(
        senders: Vec<std::thread::JoinHandle<(Placement, u64)>>,
        receiver: Option<std::thread::JoinHandle<(Placement, Book)>>,
    ) -> Self {
        let mut placement = Vec::new();
        let sent = senders
            .into_iter()
            .map(|h| {
                let (p, i) = h.join().expect("sender panicked");
                placement.push(p);
                i
            })
            .collect();
        let book = receiver.map(|h| {
            let (p, b) = h.join().expect("receiver panicked");
            placement.push(p);
            b
        });
        Ran {
            placement,
            sent,
            book,
        }
    }
}

/// Runs a stream peer: the timed run (its checks and figures), then the A/B phase
/// ([`super::ab`]) on a fresh queue of the same capacity with the same threads on the same
/// cores, sized from the timed rate; `bookkeeping_cost` is the median of its pairs. `run(phase,
/// wait)` starts the peer's threads for `phase` on fresh queues, calls `wait` while they run, and
/// joins them.
fn stream_peer(
    ctx: &RunCtx,
    n: usize,
    mut run: impl FnMut(&Phase, &mut dyn FnMut()) -> Ran,
) -> Outcome {
    let mut out = Outcome::default();
    out.param("senders", n as u64);
    out.param("capacity", STREAM_CAPACITY as u64);
    let shared = Shared::new();
    let counters = sender_counters(n);
    let timed = Phase::Timed {
        shared: shared.clone(),
        counters: counters.clone(),
    };
    let mut w = None;
    let ran = run(&timed, &mut || {
        w = Some(timed_window_with(ctx, &shared, || sample(&counters)));
    });
    for p in ran.placement {
        out.placed(p);
    }
    let w = w.unwrap_or_else(|| Err("the timed window did not run".into()));
    let Some(rate) = finish_stream(&mut out, w, &ran.sent, ran.book.map(|b| b.fifo)) else {
        return out;
    };
    ab_phase(&mut out, ctx, n, rate, &mut run);
    out
}

/// The A/B phase of a stream peer measured at `rate`: segments of at least
/// [`ab::STREAM_SEGMENT_MIN`] events (a multiple of [`PUBLISH_EVERY`]), checked like the timed
/// run (a lost or reordered event fails the run), and its figures.
fn ab_phase(
    out: &mut Outcome,
    ctx: &RunCtx,
    n: usize,
    rate: f64,
    run: &mut impl FnMut(&Phase, &mut dyn FnMut()) -> Ran,
) {
    let phase_time = ab::stream_phase(ctx.mode);
    let plan = Plan::sized(phase_time, rate, ab::STREAM_SEGMENT_MIN, PUBLISH_EVERY);
    let phase = Phase::Ab {
        plan,
        deadline_ns: ab::deadline_ns(phase_time),
        word: ab::segment_word(),
        shared: Shared::new(),
        counters: sender_counters(n),
    };
    let ran = run(&phase, &mut || ());
    let Some(book) = ran.book else {
        out.fail("A/B phase: the receiver handed no result back");
        return;
    };
    let mut check = Outcome::default();
    book.fifo.verify(&ran.sent, &mut check);
    for f in check.failures {
        out.fail(format!("A/B phase: {f}"));
    }
    if let Some(r) = book.ab() {
        ab::record(out, Figure::Throughput, &plan, &r.times);
    }
}

/// Finishes a stream outcome: checks, figures, parameters; the rate measured.
fn finish_stream(
    out: &mut Outcome,
    w: Result<(super::Window, Vec<u64>, Vec<u64>), String>,
    sent: &[u64],
    fifo: Option<FifoCheck>,
) -> Option<f64> {
    match fifo {
        Some(f) => f.verify(sent, out),
        None => out.fail("the receiver handed no result back"),
    }
    out.param("events_total", sent.iter().sum::<u64>());
    match w {
        Ok((w, c0, c1)) => {
            let shares: Vec<u64> = c1.iter().zip(&c0).map(|(a, b)| a - b).collect();
            stream_figures(out, w, Some(&shares));
            (w.secs > 0.0 && w.events > 0).then(|| w.events as f64 / w.secs)
        }
        Err(e) => {
            out.fail(e);
            None
        }
    }
}

fn channel_stream<C: BlockingChannel>(ctx: &RunCtx, n: usize) -> Outcome {
    stream_peer(ctx, n, |phase, wait| {
        let (tx, rx) = C::make(STREAM_CAPACITY);
        let receiver = {
            let mut book = Book::new(n, phase);
            spawn_receiver(ctx, move || {
                C::drain(rx, |e| book.on_event(&e));
                book
            })
        };
        let senders = (0..n)
            .map(|s| {
                let (tx, phase) = (C::clone_tx(&tx), phase.clone());
                spawn_sender(ctx, s, move || sender_loop(s, &phase, |e| C::send(&tx, e)))
            })
            .collect();
        drop(tx);
        wait();
        Ran::join(senders, Some(receiver))
    })
}

/// A stream through a disruptor: one managed processor (its state the same [`Book`] as every
/// receiver), `n` producers (`multi`) or one.
fn disruptor_stream(ctx: &RunCtx, n: usize, multi: bool) -> Outcome {
    let mut out = stream_peer(ctx, n, |phase, wait| {
        let res: Slot<(Placement, Book)> = slot();
        let init = {
            let res = res.clone();
            let book = Book::new(n, phase);
            let core = ctx.map.core_for(0);
            move || Processor::start("processor", core, Some(book), Option::take, res)
        };
        let handler = |s: &mut Processor<Option<Book>, Book>, e: &Ev, _seq: i64, _end: bool| {
            if let Some(b) = s.state.as_mut() {
                b.on_event(e);
            }
        };
        let spawn = |s: usize, mut p: Box<dyn DProducer>| {
            let phase = phase.clone();
            spawn_sender(ctx, s, move || {
                let sent = sender_loop(s, &phase, |e| {
                    p.send(e);
                    true
                });
                // Dropping the last producer shuts the disruptor down after the processor has
                // handled everything published, and joins the processor thread.
                drop(p);
                sent
            })
        };
        let mut senders = Vec::new();
        if multi {
            let p = disruptor::multi(STREAM_CAPACITY, handler, init);
            for s in 0..n {
                senders.push(spawn(s, Box::new(p.clone())));
            }
            drop(p);
        } else {
            let p = disruptor::single(STREAM_CAPACITY, handler, init);
            senders.push(spawn(0, Box::new(p)));
        }
        wait();
        let mut ran = Ran::join(senders, None);
        if let Some((p, b)) = take(&res) {
            ran.placement.push(p);
            ran.book = Some(b);
        }
        ran
    });
    out.param("wait_strategy", "BusySpin");
    out.param("producer", if multi { "multi" } else { "single" });
    if ctx.share_core(0, sender_slot(ctx, 0)) || n + 1 > ctx.cores() {
        out.note("the disruptor's BusySpin processor shares a core with a sender");
    }
    out
}

/// Why rtrb's and ArrayQueue's `bookkeeping_cost` may not be the bookkeeping's cost
/// (harness/BENCHMARKS.md, "rtrb and ArrayQueue").
pub const RTRB_REGIME: &str = "a spinning SPSC ring is bistable: fast while the consumer stays ahead, 10-50x slower once it falls behind (the ring runs full and a cache line crosses the cores at every event); booked and bare segments run the same receiver code in one stream, so a pair that straddles a flip between the two states reads a large cost either way: the median over pairs leaves it out, a wide interval shows it";

fn ring_stream<R: SpinRing>(ctx: &RunCtx) -> Outcome {
    let shared_core = ctx.share_core(0, sender_slot(ctx, 0));
    let mut out = stream_peer(ctx, 1, |phase, wait| {
        let (mut tx, mut rx) = R::make(STREAM_CAPACITY);
        let receiver = {
            let mut book = Book::new(1, phase);
            let mut spin = Spin::new(ctx, shared_core);
            spawn_receiver(ctx, move || {
                loop {
                    match R::pop(&mut rx) {
                        Some(e) => book.on_event(&e),
                        None if R::abandoned(&rx) => {
                            // The producer is gone: everything it pushed is in the ring.
                            while let Some(e) = R::pop(&mut rx) {
                                book.on_event(&e);
                            }
                            break;
                        }
                        None => spin.step(),
                    }
                }
                book
            })
        };
        let sender = {
            let mut spin = Spin::new(ctx, shared_core);
            let phase = phase.clone();
            spawn_sender(ctx, 0, move || {
                let sent = sender_loop(0, &phase, |mut e| loop {
                    match R::push(&mut tx, e) {
                        Ok(()) => return true,
                        Err(back) => {
                            e = back;
                            spin.step();
                        }
                    }
                });
                drop(tx);
                sent
            })
        };
        wait();
        Ran::join(vec![sender], Some(receiver))
    });
    if out.metrics.iter().any(|m| m.metric == "bookkeeping_cost") {
        out.note(RTRB_REGIME);
    }
    out
}

/// Thread A's side of a ping-pong: `round_trip(e)` sends `e` and returns what came back (`None`
/// when the other side is gone).
trait Bounce: FnMut(Ev) -> Option<Ev> {}
impl<F: FnMut(Ev) -> Option<Ev>> Bounce for F {}

/// One round trip of a ping-pong's timed loop, bookkeeping included: the clock read on one trip
/// in [`LATENCY_SAMPLE_EVERY`] (before and after), its one-way time recorded in `h` while
/// `shared` is measuring, the count published every [`PUBLISH_EVERY`] trips. The A/B phase's
/// booked segments run exactly this.
#[inline]
fn booked_trip(
    a: &mut impl Bounce,
    i: &mut u64,
    shared: &Shared,
    h: &mut Histogram<u64>,
) -> Result<(), String> {
    let t0 = sample_clock(*i);
    let got = a(Ev {
        kind: 0,
        seq: *i,
        t_ns: t0,
        aux: 0,
    });
    let t1 = sample_clock(*i);
    match got {
        Some(e) if e.seq == *i => {}
        other => return Err(format!("round trip {i} came back as {other:?}")),
    }
    if t0 != 0 && shared.measuring() {
        h.saturating_record(((t1 - t0) / 2).max(1));
    }
    *i += 1;
    shared.publish(*i, false);
    Ok(())
}

/// One round trip of a bare segment: the same trip and check, no bookkeeping.
#[inline]
fn bare_trip(a: &mut impl Bounce, i: &mut u64) -> Result<(), String> {
    let got = a(Ev {
        kind: 0,
        seq: *i,
        t_ns: 0,
        aux: 0,
    });
    match got {
        Some(e) if e.seq == *i => {
            *i += 1;
            Ok(())
        }
        other => Err(format!("round trip {i} came back as {other:?}")),
    }
}

/// What thread A of a ping-pong hands back: its placement, the timed loop's histogram, the
/// round trips in all, why it stopped early (if it did), and the A/B phase (its plan and
/// boundary clock reads).
struct PingA {
    placement: Placement,
    hist: Histogram<u64>,
    trips: u64,
    bad: Option<String>,
    ab: Option<(Plan, Vec<u64>)>,
}

/// Thread A of a ping-pong, on `core`: the timed loop ([`booked_trip`]) until the stop flag, then
/// the A/B phase ([`super::ab`]) on the same queues, sized from the loop's own rate.
fn drive_pingpong(mode: Mode, core: Option<usize>, shared: &Shared, a: &mut impl Bounce) -> PingA {
    let probe = Probe::start("bouncer-a", core);
    let mut hist = new_hist();
    let mut i = 0u64;
    let (bad, ab) = match ab::latency_loop(
        mode,
        shared,
        &mut hist,
        &mut (a, &mut i),
        |(_, i)| **i,
        |(a, i), book, h| booked_trip(*a, i, book, h),
        |(a, i)| bare_trip(*a, i),
    ) {
        Ok(t) => (None, Some(t)),
        Err(e) => (Some(e.into_message()), None),
    };
    PingA {
        placement: probe.finish(),
        hist,
        trips: i,
        bad,
        ab,
    }
}

/// Ping-pong over two channels of `C`, both sides in their blocking `recv`.
fn channel_pingpong<C: BlockingChannel>(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("capacity", STREAM_CAPACITY as u64);
    out.param("receive", "blocking recv");
    if ctx.share_core(0, 1) {
        out.note("both threads share one core");
    }
    let (ab_tx, mut ab_rx) = C::make(STREAM_CAPACITY);
    let (ba_tx, ba_rx) = C::make(STREAM_CAPACITY);
    let shared = Shared::new();
    let cb = ctx.map.core_for(1);
    let b = std::thread::spawn(move || {
        let probe = Probe::start("bouncer-b", cb);
        let mut answered = 0u64;
        while let Some(e) = C::recv(&mut ab_rx) {
            answered += 1;
            if !C::send(&ba_tx, e) {
                break;
            }
        }
        (probe.finish(), answered)
    });
    let (ca, mode) = (ctx.map.core_for(0), ctx.mode);
    let a = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut ba_rx = ba_rx;
            let mut a = move |e: Ev| {
                if !C::send(&ab_tx, e) {
                    return None;
                }
                C::recv(&mut ba_rx)
            };
            drive_pingpong(mode, ca, &shared, &mut a)
            // Dropping `a` drops A's sender: B sees the end.
        })
    };
    let w = timed_window(ctx, &shared);
    let ra = a.join();
    finish_pingpong(&mut out, &shared, w, ra, b.join().map(|x| (Some(x.0), x.1)));
    out
}

/// Checks a ping-pong and records its figures: the sampled one-way latencies, the timed
/// window's rate of round trips (`round_trips_per_s`) and mean one-way (`latency_one_way_mean`),
/// and the A/B phase's ([`ab::record`]).
fn finish_pingpong(
    out: &mut Outcome,
    shared: &Shared,
    w: Result<super::Window, String>,
    a: std::thread::Result<PingA>,
    b: std::thread::Result<(Option<Placement>, u64)>,
) {
    let a = a.expect("bouncer a panicked");
    let (pb, answered) = b.expect("bouncer b panicked");
    out.placed(a.placement);
    if let Some(pb) = pb {
        out.placed(pb);
    }
    if let Some(b) = a.bad {
        out.fail(b);
    }
    let sent = a.trips;
    out.check(answered == sent, || {
        format!("b answered {answered} of {sent} pings")
    });
    if let Some(f) = shared.failure() {
        out.fail(f);
    }
    out.param("round_trips", sent);
    out.param("latency_sampled_every", LATENCY_SAMPLE_EVERY);
    out.latency("latency_one_way", &a.hist);
    match w {
        Ok(w) => {
            let rate = out.throughput("round_trips_per_s", "trips/s", w.events, w.secs);
            if rate > 0.0 {
                out.value(
                    "latency_one_way_mean",
                    "ns",
                    1e9 / rate / 2.0,
                    Better::Lower,
                );
            }
        }
        Err(e) => out.fail(e),
    }
    if let (Some((plan, times)), true) = (a.ab, out.failures.is_empty()) {
        let fig = Figure::Latency {
            metric: "latency_one_way",
            per_unit: 2.0,
        };
        ab::record(out, fig, &plan, &times);
    }
}

/// Ping-pong over two single-producer disruptors: A publishes into the first, whose managed
/// `BusySpin` processor (B) publishes each event into the second; A reads it back with the
/// second's `EventPoller`.
fn disruptor_pingpong(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("capacity", STREAM_CAPACITY as u64);
    out.param(
        "wait_strategy",
        "BusySpin (B), EventPoller polled in a spin (A)",
    );
    let shared_core = ctx.share_core(0, 1);
    if shared_core {
        out.note("both threads share one core");
    }
    let shared = Shared::new();
    let (poller, back) = disruptor::polled(STREAM_CAPACITY);
    let b_res: Slot<(Placement, u64)> = slot();
    /// B's state: the way back, and how many it answered.
    struct Echo {
        back: disruptor::Single,
        answered: u64,
    }
    let init = {
        let res = b_res.clone();
        let core = ctx.map.core_for(1);
        move || {
            let echo = Echo { back, answered: 0 };
            Processor::start(
                "bouncer-b",
                core,
                echo,
                |s: &mut Echo| Some(s.answered),
                res,
            )
        }
    };
    let forth = disruptor::single(
        STREAM_CAPACITY,
        |s: &mut Processor<Echo, u64>, e: &Ev, _seq: i64, _end: bool| {
            s.state.answered += 1;
            disruptor::publish(&mut s.state.back, *e);
        },
        init,
    );
    let (ca, mode) = (ctx.map.core_for(0), ctx.mode);
    let a = {
        let shared = shared.clone();
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let (mut forth, mut poller) = (forth, poller);
            let mut a = move |e: Ev| {
                disruptor::publish(&mut forth, e);
                disruptor::poll_one(&mut poller, &mut spin)
            };
            let r = drive_pingpong(mode, ca, &shared, &mut a);
            // Shuts the first disruptor down and joins B, which drops the second producer.
            drop(a);
            r
        })
    };
    let w = timed_window(ctx, &shared);
    let ra = a.join();
    let (pb, answered) = match take(&b_res) {
        Some((p, n)) => (Some(p), n),
        None => (None, 0),
    };
    finish_pingpong(&mut out, &shared, w, ra, Ok((pb, answered)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::seq_of;
    use crate::scenario::stream_ev;

    /// An A/B phase of one ABBA quad of `size`-event segments, no deadline.
    fn quad(size: u64, shared: Arc<Shared>, counters: Arc<Vec<CachePadded<AtomicU64>>>) -> Phase {
        Phase::Ab {
            plan: Plan { size, measured: 4 },
            deadline_ns: u64::MAX,
            word: ab::segment_word(),
            shared,
            counters,
        }
    }

    #[test]
    fn timed_and_ab_books_differ_only_at_their_every_256_points() {
        let shared = Shared::new();
        let timed = Phase::Timed {
            shared: shared.clone(),
            counters: sender_counters(2),
        };
        let ab_shared = Shared::new();
        let ab = quad(512, ab_shared.clone(), sender_counters(2));
        let mut t = Book::new(2, &timed);
        let mut b = Book::new(2, &ab);
        let mut published = Vec::new();
        // Six segments of 512 events (warm-up, A B B A, cool-down), 256 from each sender.
        for i in 0..1_536 {
            for s in 0..2 {
                t.on_event(&stream_ev(s, i));
                b.on_event(&stream_ev(s, i));
            }
            if (2 * i + 2) % 256 == 0 {
                published.push(ab_shared.count.load(Ordering::Acquire));
            }
            if i == 200 {
                // 402 events: the last publishing point was 256.
                assert_eq!(shared.count.load(Ordering::Acquire), 256);
            }
        }
        // The same per-event work: both counted and checked every event.
        assert_eq!((t.fifo.total, b.fifo.total), (3_072, 3_072));
        assert_eq!((t.fifo.violations, b.fifo.violations), (0, 0));
        // The timed book published at every point; the A/B book in booked segments only
        // (points 1280 .. 2048 fall in the two bare segments, or end the second).
        assert_eq!(shared.count.load(Ordering::Acquire), 3_072);
        assert_eq!(
            published,
            [256, 512, 768, 1024, 1024, 1024, 1024, 1024, 2304, 2560, 2816, 3072]
        );
        // The clock was read at the five measured boundaries.
        let r = b.ab().expect("an A/B book");
        assert_eq!(r.times.len(), 5);
        assert!(t.ab().is_none());
    }

    #[test]
    fn ab_senders_follow_the_receiver_and_publish_in_booked_segments_only() {
        let counters = sender_counters(1);
        let ab = quad(2048, Shared::new(), counters.clone());
        // The receiver takes each event as it is sent, so the sender, which looks at the
        // segment word every 1024 events, switches exactly at the receiver's boundaries.
        let mut book = Book::new(1, &ab);
        let mut seen = Vec::new();
        let mut i = 0u64;
        let sent = sender_loop(0, &ab, |e| {
            assert_eq!(e.seq, seq_of(0, i));
            book.on_event(&e);
            if i % 2048 == 2047 {
                seen.push(counters[0].load(Ordering::Acquire));
            }
            i += 1;
            true
        });
        // Six segments, then the word passes the last one and the sender stops.
        assert_eq!(sent, 6 * 2048);
        // At the end of each segment: warm-up A, A, B, B, A, cool-down A.
        assert_eq!(seen, [1792, 3840, 4096, 4096, 9984, 12032]);
        assert_eq!(counters[0].load(Ordering::Acquire), 12_288);
    }

    #[test]
    fn stream_peers_register_in_order_and_one_producer_peers_only_in_1to1() {
        let mut v = Vec::new();
        register_stream(&mut v, 1);
        register_stream(&mut v, 2);
        let ids: Vec<&str> = v.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "stream/1to1/crossbeam-channel",
                "stream/1to1/std-mpsc",
                "stream/1to1/kanal",
                "stream/1to1/flume",
                "stream/1to1/tokio-mpsc",
                "stream/1to1/disruptor-mp",
                "stream/1to1/disruptor",
                "stream/1to1/rtrb",
                "stream/1to1/arrayqueue",
                "stream/2to1/crossbeam-channel",
                "stream/2to1/kanal",
                "stream/2to1/flume",
                "stream/2to1/tokio-mpsc",
                "stream/2to1/disruptor-mp",
            ]
        );
        assert!(
            v.iter().all(|s| !s.about.contains('{')),
            "a placeholder is left"
        );
    }
}
