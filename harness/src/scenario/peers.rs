//! Peers: the crates a Rust user would pick instead of the engine, each driven the way its own
//! documentation shows, measured in the same run, on the same cores, with the same event.
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
//! window. Each stream peer also runs *bare probes* in the same process, one before and one after
//! its timed run, on fresh queues: the same senders' sends and the same receiver code (the same
//! `Book`), count-bounded instead of time-bounded, with none of the harness's bookkeeping (no
//! publishing, no stop checks, no sender counters, no timed window: at its every-256 points the
//! bare receiver reads the clock twice in all, at 1/8 and at the end of its events).
//! `bookkeeping_cost` = `1 - timed / bare` (%) compares the timed rate with the probes' pooled
//! rate. The ping-pongs read the clock on one round trip in [`super::LATENCY_SAMPLE_EVERY`] and
//! compare the timed window's rate of round trips with bare probes timed as a whole.

use super::baseline::{sample, sender_counters, sender_slot};
use super::{
    bare_latency_figures, put, sample_clock, seq_of, slot, stream_figures, take, timed_window,
    timed_window_with, Ev, Family, FifoCheck, Outcome, RunCtx, Scenario, Shared, Slot, Spin,
    LATENCY_SAMPLE_EVERY, PUBLISH_EVERY, STOP_CHECK_EVERY, STREAM_CAPACITY,
};
use crate::clock::now_ns;
use crate::pin::{Placement, Probe};
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Events a tokio receiver takes per `blocking_recv_many` call at most.
pub const TOKIO_BATCH: usize = 256;

/// A channel with a blocking send and a blocking receive, driven as its documentation shows.
pub trait BlockingChannel: 'static {
    /// Sending half (cloned per sender).
    type Tx: Send + 'static;
    /// Receiving half.
    type Rx: Send + 'static;
    /// A bounded channel of `capacity` events.
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Another sender.
    fn clone_tx(tx: &Self::Tx) -> Self::Tx;
    /// Blocking send; `false` when the receiver is gone.
    fn send(tx: &Self::Tx, e: Ev) -> bool;
    /// Receives with the blocking receive until every sender is gone, handing each event to `f`.
    fn drain(rx: Self::Rx, f: impl FnMut(Ev));
    /// Blocking receive of one event (`None` when every sender is gone).
    fn recv(rx: &mut Self::Rx) -> Option<Ev>;
}

/// Implements [`BlockingChannel`] for a channel whose halves have the usual `send` / `recv`
/// returning `Result` (crossbeam-channel, std mpsc, kanal, flume).
macro_rules! blocking_channel {
    ($(#[$doc:meta])* $name:ident, $tx:ty, $rx:ty, $make:path) => {
        $(#[$doc])*
        pub struct $name;
        impl BlockingChannel for $name {
            type Tx = $tx;
            type Rx = $rx;
            fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
                $make(capacity)
            }
            fn clone_tx(tx: &Self::Tx) -> Self::Tx {
                tx.clone()
            }
            fn send(tx: &Self::Tx, e: Ev) -> bool {
                tx.send(e).is_ok()
            }
            fn drain(rx: Self::Rx, mut f: impl FnMut(Ev)) {
                while let Ok(e) = rx.recv() {
                    f(e);
                }
            }
            fn recv(rx: &mut Self::Rx) -> Option<Ev> {
                rx.recv().ok()
            }
        }
    };
}

blocking_channel!(
    /// `crossbeam_channel::bounded`.
    Crossbeam,
    crossbeam_channel::Sender<Ev>,
    crossbeam_channel::Receiver<Ev>,
    crossbeam_channel::bounded
);
blocking_channel!(
    /// `std::sync::mpsc::sync_channel`.
    StdMpsc,
    std::sync::mpsc::SyncSender<Ev>,
    std::sync::mpsc::Receiver<Ev>,
    std::sync::mpsc::sync_channel
);
blocking_channel!(
    /// `kanal::bounded`.
    Kanal,
    kanal::Sender<Ev>,
    kanal::Receiver<Ev>,
    kanal::bounded
);
blocking_channel!(
    /// `flume::bounded`.
    Flume,
    flume::Sender<Ev>,
    flume::Receiver<Ev>,
    flume::bounded
);

/// `tokio::sync::mpsc::channel`, used from plain threads: `blocking_send`, and the batch receive
/// `blocking_recv_many`.
pub struct TokioMpsc;
impl BlockingChannel for TokioMpsc {
    type Tx = tokio::sync::mpsc::Sender<Ev>;
    type Rx = tokio::sync::mpsc::Receiver<Ev>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        tokio::sync::mpsc::channel(capacity)
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, e: Ev) -> bool {
        tx.blocking_send(e).is_ok()
    }
    fn drain(mut rx: Self::Rx, mut f: impl FnMut(Ev)) {
        let mut buf = Vec::with_capacity(TOKIO_BATCH);
        while rx.blocking_recv_many(&mut buf, TOKIO_BATCH) > 0 {
            for e in buf.drain(..) {
                f(e);
            }
        }
    }
    fn recv(rx: &mut Self::Rx) -> Option<Ev> {
        rx.blocking_recv()
    }
}

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
/// flag and publish their counts, the receiver publishes its count) or the **bare** probe
/// (count-bounded: each sender sends `per_sender` events and stops; the receiver publishes
/// nothing and reads the clock at two of its every-[`PUBLISH_EVERY`] points instead).
#[derive(Clone)]
enum Phase {
    Timed {
        shared: Arc<Shared>,
        counters: Arc<Vec<CachePadded<AtomicU64>>>,
    },
    Bare {
        per_sender: u64,
    },
}

/// Fewest events of a stream's bare probe.
const BARE_MIN_EVENTS: u64 = 10_000;

/// What the receiver does at every [`PUBLISH_EVERY`]-th event, out of line.
enum AtPoint {
    /// Timed run: publish the count for the timed window.
    Publish(Arc<Shared>),
    /// Bare probe: read the clock when the count reaches `from` and `to`, so that its figure is
    /// the rate between them (start-up and wind-down left out, as the timed window leaves them
    /// out).
    Clock {
        from: u64,
        to: u64,
        t_from: u64,
        t_to: u64,
    },
}

/// The receiving side's per-event work, the same as the engine listener's and the same in the
/// timed run and the bare probe: the sequence check ([`FifoCheck::take`], which counts), and one
/// predictable branch that is taken every [`PUBLISH_EVERY`] events. Only what happens in that
/// branch differs: publishing (the bookkeeping) or the bare probe's two clock reads.
struct Book {
    fifo: FifoCheck,
    at_point: AtPoint,
}

impl Book {
    fn new(n: usize, phase: &Phase) -> Self {
        let at_point = match phase {
            Phase::Timed { shared, .. } => AtPoint::Publish(shared.clone()),
            Phase::Bare { per_sender } => {
                let to = (per_sender * n as u64) & !(PUBLISH_EVERY - 1);
                AtPoint::Clock {
                    from: (to / 8) & !(PUBLISH_EVERY - 1),
                    to,
                    t_from: 0,
                    t_to: 0,
                }
            }
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
            AtPoint::Clock {
                from,
                to,
                t_from,
                t_to,
            } => {
                if n == *from {
                    *t_from = now_ns();
                } else if n == *to {
                    *t_to = now_ns();
                }
            }
        }
    }

    /// The bare probe's figure: events between the two clock reads and the seconds between
    /// them (`None` in a timed run, or when the probe did not get that far).
    fn bare_figure(&self) -> Option<(u64, f64)> {
        match self.at_point {
            AtPoint::Clock {
                from,
                to,
                t_from,
                t_to,
            } if to > from && t_to > t_from => Some((to - from, (t_to - t_from) as f64 / 1e9)),
            _ => None,
        }
    }
}

/// A sender of a stream peer: in the timed run it floods until the stop flag, publishing its
/// count ([`flood_sender`]); in the bare probe it sends its `per_sender` events and stops.
/// Returns how many it sent.
fn sender_loop(s: usize, phase: &Phase, mut send: impl FnMut(Ev) -> bool) -> u64 {
    match phase {
        Phase::Timed { shared, counters } => flood_sender(s, shared, &counters[s], send),
        Phase::Bare { per_sender } => {
            let mut i = 0;
            while i < *per_sender && send(stream_ev(s, i)) {
                i += 1;
            }
            i
        }
    }
}

/// The `i`-th event of sender `s`.
fn stream_ev(s: usize, i: u64) -> Ev {
    Ev {
        kind: 0,
        seq: seq_of(s, i),
        t_ns: 0,
        aux: 0,
    }
}

/// Sender loop of a timed window: sends until the stop flag, publishing its count.
fn flood_sender(
    s: usize,
    shared: &Shared,
    counter: &CachePadded<AtomicU64>,
    mut send: impl FnMut(Ev) -> bool,
) -> u64 {
    let mut i = 0u64;
    loop {
        if i % STOP_CHECK_EVERY == 0 && shared.stopped() {
            break;
        }
        if !send(stream_ev(s, i)) {
            break;
        }
        i += 1;
        if i % PUBLISH_EVERY == 0 {
            counter.store(i, Ordering::Release);
        }
    }
    i
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

/// Runs a stream peer: a bare probe, the timed run (its checks and figures), and a second bare
/// probe; `bookkeeping_cost` compares the timed rate with the two probes' pooled rate, so that
/// a machine that speeds up or slows down over the run moves both sides alike. `run(phase,
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
    // A short pilot sizes the first probe (its rate is not used otherwise).
    let pilot = bare_probe(&mut run, &mut out, BARE_MIN_EVENTS / n as u64);
    let before = pilot.and_then(|(e, secs)| {
        let per_sender = bare_per_sender(ctx, n, e as f64 / secs);
        bare_probe(&mut run, &mut out, per_sender)
    });
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
    let after = bare_probe(&mut run, &mut out, bare_per_sender(ctx, n, rate));
    bare_figures(&mut out, rate, &[before, after]);
    out
}

/// One bare probe of `per_sender` events a sender: its figure ([`Book::bare_figure`]); a lost or
/// reordered event fails the run as in the timed run.
fn bare_probe(
    run: &mut impl FnMut(&Phase, &mut dyn FnMut()) -> Ran,
    out: &mut Outcome,
    per_sender: u64,
) -> Option<(u64, f64)> {
    let ran = run(&Phase::Bare { per_sender }, &mut || ());
    let book = ran.book?;
    let mut check = Outcome::default();
    book.fifo.verify(&ran.sent, &mut check);
    for f in check.failures {
        out.fail(format!("bare probe: {f}"));
    }
    book.bare_figure()
}

/// Events per sender of a bare probe of a peer measured at `rate`: about half a timed window's
/// worth, at least [`BARE_MIN_EVENTS`] in all.
fn bare_per_sender(ctx: &RunCtx, n: usize, rate: f64) -> u64 {
    let total = ((rate * ctx.mode.window().as_secs_f64() * 0.5) as u64).max(BARE_MIN_EVENTS);
    total / n as u64
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

/// Records the bare probes' figures: their pooled rate (events over seconds, summed over the
/// probes that measured) and `bookkeeping_cost = 1 - timed / bare` in %.
fn bare_figures(out: &mut Outcome, rate_booked: f64, probes: &[Option<(u64, f64)>]) {
    let (events, secs) = probes
        .iter()
        .flatten()
        .fold((0, 0.0), |(e, s), (pe, ps)| (e + pe, s + ps));
    if events == 0 {
        out.note("the bare probes measured nothing");
        return;
    }
    out.param("bare_probes", probes.iter().flatten().count() as u64);
    let bare_rate = out.throughput("throughput_bare", "events/s", events, secs);
    if bare_rate > 0.0 {
        out.value(
            "bookkeeping_cost",
            "%",
            100.0 * (1.0 - rate_booked / bare_rate),
            Better::Lower,
        );
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

/// The disruptor processor's state: the same [`Book`] as every receiver, and its placement;
/// handed over when the processor thread ends (the disruptor drops the state there).
struct DisruptorSink {
    probe: Option<Probe>,
    book: Option<Book>,
    out: Slot<(Placement, Book)>,
}

impl Drop for DisruptorSink {
    fn drop(&mut self) {
        if let (Some(p), Some(b)) = (self.probe.take(), self.book.take()) {
            put(&self.out, (p.finish(), b));
        }
    }
}

/// A disruptor producer as the stream uses it.
trait DProducer: Send + 'static {
    fn send(&mut self, e: Ev);
}
impl DProducer for disruptor::SingleProducer<Ev, disruptor::SingleConsumerBarrier> {
    #[inline]
    fn send(&mut self, e: Ev) {
        disruptor::Producer::publish(self, |slot| *slot = e);
    }
}
impl DProducer for disruptor::MultiProducer<Ev, disruptor::SingleConsumerBarrier> {
    #[inline]
    fn send(&mut self, e: Ev) {
        disruptor::Producer::publish(self, |slot| *slot = e);
    }
}

fn disruptor_stream(ctx: &RunCtx, n: usize, multi: bool) -> Outcome {
    let mut out = stream_peer(ctx, n, |phase, wait| {
        let res: Slot<(Placement, Book)> = slot();
        let init = {
            let res = res.clone();
            let book = Book::new(n, phase);
            let core = ctx.map.core_for(0);
            move || DisruptorSink {
                probe: Some(Probe::start("processor", core)),
                book: Some(book),
                out: res,
            }
        };
        let handler = |s: &mut DisruptorSink, e: &Ev, _seq: i64, _end: bool| {
            if let Some(b) = s.book.as_mut() {
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
            let p =
                disruptor::build_multi_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
                    .handle_events_and_state_with(handler, init)
                    .build();
            for s in 0..n {
                senders.push(spawn(s, Box::new(p.clone())));
            }
            drop(p);
        } else {
            let p =
                disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
                    .handle_events_and_state_with(handler, init)
                    .build();
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

/// A ring whose two sides spin while it is full or empty (no blocking operations): rtrb's SPSC
/// `RingBuffer`, crossbeam-queue's `ArrayQueue`.
trait SpinRing: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Pushes `e`, or hands it back when the ring is full.
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev>;
    fn pop(rx: &mut Self::Rx) -> Option<Ev>;
    /// Whether the sender is gone (everything it pushed is then in the ring).
    fn abandoned(rx: &Self::Rx) -> bool;
}

/// rtrb's `RingBuffer`: `push` and `pop`.
struct Rtrb;
impl SpinRing for Rtrb {
    type Tx = rtrb::Producer<Ev>;
    type Rx = rtrb::Consumer<Ev>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev> {
        tx.push(e).map_err(|rtrb::PushError::Full(back)| back)
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<Ev> {
        rx.pop().ok()
    }
    fn abandoned(rx: &Self::Rx) -> bool {
        rx.is_abandoned()
    }
}

/// crossbeam-queue's `ArrayQueue`: `push` and `pop` on a shared `Arc`.
struct Array;
impl SpinRing for Array {
    type Tx = Arc<ArrayQueue<Ev>>;
    type Rx = Arc<ArrayQueue<Ev>>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev> {
        tx.push(e)
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<Ev> {
        rx.pop()
    }
    fn abandoned(rx: &Self::Rx) -> bool {
        Arc::strong_count(rx) == 1
    }
}

/// Why rtrb's `bookkeeping_cost` may not be the bookkeeping's cost (harness/BENCHMARKS.md,
/// "bare probe").
pub const RTRB_REGIME: &str = "a spinning SPSC ring is bistable: fast while the consumer stays ahead, 10-50x slower once it falls behind (the ring runs full and a cache line crosses the cores at every event); the timed run and the bare probe run the same receiver code, so a large bookkeeping_cost here is the two phases landing in different states, not bookkeeping";

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

/// Ping-pong over two channels of `C`, both sides in their blocking `recv`.
fn channel_pingpong<C: BlockingChannel>(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("capacity", STREAM_CAPACITY as u64);
    out.param("receive", "blocking recv");
    if ctx.share_core(0, 1) {
        out.note("both threads share one core");
    }
    let before = channel_pingpong_bare::<C>(ctx, bare_trips(ctx));
    let (ab_tx, mut ab_rx) = C::make(STREAM_CAPACITY);
    let (ba_tx, mut ba_rx) = C::make(STREAM_CAPACITY);
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
    let ca = ctx.map.core_for(0);
    let a = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let probe = Probe::start("bouncer-a", ca);
            let mut h = new_hist();
            let mut i = 0u64;
            let mut bad = None;
            while !shared.stopped() {
                let t0 = sample_clock(i);
                if !C::send(
                    &ab_tx,
                    Ev {
                        kind: 0,
                        seq: i,
                        t_ns: t0,
                        aux: 0,
                    },
                ) {
                    bad = Some("b is gone".to_string());
                    break;
                }
                let got = C::recv(&mut ba_rx);
                let t1 = sample_clock(i);
                match got {
                    Some(e) if e.seq == i => {}
                    other => {
                        bad = Some(format!("round trip {i} came back as {other:?}"));
                        break;
                    }
                }
                if t0 != 0 && shared.measuring() {
                    h.saturating_record(((t1 - t0) / 2).max(1));
                }
                i += 1;
                shared.publish(i, false);
            }
            drop(ab_tx);
            (probe.finish(), h, i, bad)
        })
    };
    let w = timed_window(ctx, &shared);
    let ra = a.join();
    finish_pingpong(&mut out, &shared, w, ra, b.join().map(|x| (Some(x.0), x.1)));
    pingpong_bare_figures(&mut out, ctx, before, channel_pingpong_bare::<C>);
    out
}

type PingA = (Placement, Histogram<u64>, u64, Option<String>);

/// Checks a ping-pong and records its figures: the sampled one-way latencies, and the timed
/// window's rate of round trips (`round_trips_per_s`), which the bare probes are compared with.
fn finish_pingpong(
    out: &mut Outcome,
    shared: &Shared,
    w: Result<super::Window, String>,
    a: std::thread::Result<PingA>,
    b: std::thread::Result<(Option<Placement>, u64)>,
) {
    let (pa, h, sent, bad) = a.expect("bouncer a panicked");
    let (pb, answered) = b.expect("bouncer b panicked");
    out.placed(pa);
    if let Some(pb) = pb {
        out.placed(pb);
    }
    if let Some(b) = bad {
        out.fail(b);
    }
    out.check(answered == sent, || {
        format!("b answered {answered} of {sent} pings")
    });
    if let Some(f) = shared.failure() {
        out.fail(f);
    }
    out.param("round_trips", sent);
    out.param("latency_sampled_every", LATENCY_SAMPLE_EVERY);
    out.latency("latency_one_way", &h);
    match w {
        Ok(w) => {
            out.throughput("round_trips_per_s", "trips/s", w.events, w.secs);
        }
        Err(e) => out.fail(e),
    }
}

/// Round trips of each of a ping-pong's two bare probes.
fn bare_trips(ctx: &RunCtx) -> u64 {
    ctx.mode.pick(1_000, 20_000, 100_000)
}

/// Runs a ping-pong's second bare probe (`probe(ctx, trips)`: round trips over fresh queues,
/// timed as a whole, `(trips, seconds)`; the first, `before`, ran before the timed run, so that
/// the two bracket it), and records `latency_one_way_mean` (the timed window's mean one-way, from
/// `round_trips_per_s`), `latency_one_way_bare` (the probes' pooled mean one-way) and
/// `bookkeeping_cost` = `1 - bare / timed` in % (the same as `1 - timed / bare` on rates).
/// Nothing is recorded when the ping-pong failed.
fn pingpong_bare_figures(
    out: &mut Outcome,
    ctx: &RunCtx,
    before: Option<(u64, f64)>,
    probe: impl Fn(&RunCtx, u64) -> Option<(u64, f64)>,
) {
    if !out.failures.is_empty() {
        return;
    }
    let Some(timed_rate) = out
        .metrics
        .iter()
        .find(|m| m.metric == "round_trips_per_s")
        .map(|m| m.value)
        .filter(|&r| r > 0.0)
    else {
        return;
    };
    let probes = [before, probe(ctx, bare_trips(ctx))];
    let (trips, secs) = probes
        .iter()
        .flatten()
        .fold((0, 0.0), |(t, s), (pt, ps)| (t + pt, s + ps));
    if trips == 0 || secs <= 0.0 {
        out.note("the bare probes measured nothing");
        return;
    }
    let timed = 1e9 / timed_rate / 2.0;
    let bare = secs * 1e9 / trips as f64 / 2.0;
    bare_latency_figures(out, "latency_one_way", timed, bare);
}

/// The bare probe of a channel ping-pong: `trips` round trips over fresh channels, timed as a
/// whole (no clock read per trip, no histogram, no stop check, no publishing): `(trips,
/// seconds)`, `None` when a trip failed.
fn channel_pingpong_bare<C: BlockingChannel>(ctx: &RunCtx, trips: u64) -> Option<(u64, f64)> {
    let (ab_tx, mut ab_rx) = C::make(STREAM_CAPACITY);
    let (ba_tx, mut ba_rx) = C::make(STREAM_CAPACITY);
    let cb = ctx.map.core_for(1);
    let b = std::thread::spawn(move || {
        let _probe = Probe::start("bouncer-b", cb);
        while let Some(e) = C::recv(&mut ab_rx) {
            if !C::send(&ba_tx, e) {
                break;
            }
        }
    });
    let ca = ctx.map.core_for(0);
    let a = std::thread::spawn(move || {
        let _probe = Probe::start("bouncer-a", ca);
        let t0 = now_ns();
        for i in 0..trips {
            let e = Ev {
                kind: 0,
                seq: i,
                t_ns: 0,
                aux: 0,
            };
            if !C::send(&ab_tx, e) || C::recv(&mut ba_rx).map(|e| e.seq) != Some(i) {
                return None;
            }
        }
        let t1 = now_ns();
        drop(ab_tx);
        Some((trips, t1.saturating_sub(t0) as f64 / 1e9))
    });
    let mean = a.join().expect("bouncer a panicked");
    b.join().expect("bouncer b panicked");
    mean
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
    let before = disruptor_pingpong_bare(ctx, bare_trips(ctx));
    let shared = Shared::new();
    let (mut poller, back) =
        disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .new_event_poller();
    let back = back.build();
    let b_res: Slot<(Placement, u64)> = slot();
    struct Echo<P> {
        back: P,
        answered: u64,
        probe: Option<Probe>,
        out: Slot<(Placement, u64)>,
    }
    impl<P> Drop for Echo<P> {
        fn drop(&mut self) {
            if let Some(p) = self.probe.take() {
                put(&self.out, (p.finish(), self.answered));
            }
        }
    }
    let init = {
        let res = b_res.clone();
        let core = ctx.map.core_for(1);
        move || Echo {
            back,
            answered: 0,
            probe: Some(Probe::start("bouncer-b", core)),
            out: res,
        }
    };
    let forth = disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
        .handle_events_and_state_with(
            |s: &mut Echo<_>, e: &Ev, _seq: i64, _end: bool| {
                s.answered += 1;
                let e = *e;
                disruptor::Producer::publish(&mut s.back, |slot| *slot = e);
            },
            init,
        )
        .build();
    let ca = ctx.map.core_for(0);
    let a = {
        let shared = shared.clone();
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let mut forth = forth;
            let probe = Probe::start("bouncer-a", ca);
            let mut h = new_hist();
            let mut i = 0u64;
            let mut bad = None;
            'run: while !shared.stopped() {
                let t0 = sample_clock(i);
                disruptor::Producer::publish(&mut forth, |slot| {
                    *slot = Ev {
                        kind: 0,
                        seq: i,
                        t_ns: t0,
                        aux: 0,
                    }
                });
                let got = loop {
                    match poller.poll() {
                        Ok(mut events) => break (&mut events).next().copied(),
                        Err(disruptor::Polling::NoEvents) => spin.step(),
                        Err(disruptor::Polling::Shutdown) => {
                            bad = Some("the echo disruptor shut down".to_string());
                            break 'run;
                        }
                    }
                };
                let t1 = sample_clock(i);
                match got {
                    Some(e) if e.seq == i => {}
                    other => {
                        bad = Some(format!("round trip {i} came back as {other:?}"));
                        break;
                    }
                }
                if t0 != 0 && shared.measuring() {
                    h.saturating_record(((t1 - t0) / 2).max(1));
                }
                i += 1;
                shared.publish(i, false);
            }
            // Shuts the first disruptor down and joins B, which drops the second producer.
            drop(forth);
            (probe.finish(), h, i, bad)
        })
    };
    let w = timed_window(ctx, &shared);
    let ra = a.join();
    let (pb, answered) = match take(&b_res) {
        Some((p, n)) => (Some(p), n),
        None => (None, 0),
    };
    finish_pingpong(&mut out, &shared, w, ra, Ok((pb, answered)));
    pingpong_bare_figures(&mut out, ctx, before, disruptor_pingpong_bare);
    out
}

/// The bare probe of the disruptor ping-pong: `trips` round trips over fresh disruptors, timed
/// as a whole: `(trips, seconds)`, `None` when a trip failed.
fn disruptor_pingpong_bare(ctx: &RunCtx, trips: u64) -> Option<(u64, f64)> {
    let shared_core = ctx.share_core(0, 1);
    let (mut poller, back) =
        disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .new_event_poller();
    let back = back.build();
    struct Echo<P> {
        back: P,
        _probe: Probe,
    }
    let init = {
        let core = ctx.map.core_for(1);
        move || Echo {
            back,
            _probe: Probe::start("bouncer-b", core),
        }
    };
    let forth = disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
        .handle_events_and_state_with(
            |s: &mut Echo<_>, e: &Ev, _seq: i64, _end: bool| {
                let e = *e;
                disruptor::Producer::publish(&mut s.back, |slot| *slot = e);
            },
            init,
        )
        .build();
    let ca = ctx.map.core_for(0);
    let mut spin = Spin::new(ctx, shared_core);
    let a = std::thread::spawn(move || {
        let mut forth = forth;
        let _probe = Probe::start("bouncer-a", ca);
        let t0 = now_ns();
        for i in 0..trips {
            disruptor::Producer::publish(&mut forth, |slot| {
                *slot = Ev {
                    kind: 0,
                    seq: i,
                    t_ns: 0,
                    aux: 0,
                }
            });
            let got = loop {
                match poller.poll() {
                    Ok(mut events) => break (&mut events).next().copied(),
                    Err(disruptor::Polling::NoEvents) => spin.step(),
                    Err(disruptor::Polling::Shutdown) => return None,
                }
            };
            if got.map(|e| e.seq) != Some(i) {
                return None;
            }
        }
        let t1 = now_ns();
        Some((trips, t1.saturating_sub(t0) as f64 / 1e9))
    });
    a.join().expect("bouncer a panicked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_and_bare_books_differ_only_at_their_every_256_points() {
        let shared = Shared::new();
        let timed = Phase::Timed {
            shared: shared.clone(),
            counters: sender_counters(2),
        };
        let mut t = Book::new(2, &timed);
        let mut b = Book::new(2, &Phase::Bare { per_sender: 5_000 });
        for i in 0..5_000 {
            for s in 0..2 {
                t.on_event(&stream_ev(s, i));
                b.on_event(&stream_ev(s, i));
            }
            if i == 200 {
                // 402 events: the last publishing point was 256.
                assert_eq!(shared.count.load(Ordering::Acquire), 256);
            }
        }
        // The same per-event work: both counted and checked every event.
        assert_eq!((t.fifo.total, b.fifo.total), (10_000, 10_000));
        assert_eq!((t.fifo.violations, b.fifo.violations), (0, 0));
        // The timed book published; the bare one read its clock at 1/8 and at the end
        // (both rounded down to a publishing point) and published nothing.
        assert_eq!(shared.count.load(Ordering::Acquire), 9_984);
        assert!(t.bare_figure().is_none());
        let (events, secs) = b.bare_figure().expect("the bare book measured");
        assert_eq!(events, 9_984 - 1_024);
        assert!(secs > 0.0);
        // A probe cut short measures nothing rather than a wrong rate.
        let mut short = Book::new(1, &Phase::Bare { per_sender: 5_000 });
        for i in 0..2_000 {
            short.on_event(&stream_ev(0, i));
        }
        assert!(short.bare_figure().is_none());
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
