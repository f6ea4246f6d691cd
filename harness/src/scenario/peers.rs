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
//! # Per-event work on the receiving side
//! Every peer's receiver does exactly what the engine's listener in `stream/*/engine` does:
//! the per-sender sequence check ([`FifoCheck::take`]), one count, and the count published every
//! [`super::PUBLISH_EVERY`] events for the timed window. Each peer also runs a *bare probe* in the
//! same process after its timed window: the same transfer of a fixed number of events, with the
//! same per-event work (sequence check and count) but none of the harness's bookkeeping (no
//! publishing, no stop checks, no sender counters, no timed window), so the report can show what
//! the bookkeeping costs (`bookkeeping_cost`, %). The per-event work itself belongs to the
//! workload: the engine's listener does it too.

use super::baseline::{sample, sender_counters, sender_slot};
use super::{
    put, seq_of, slot, stream_figures, take, timed_window, timed_window_with, Ev, Family,
    FifoCheck, Outcome, RunCtx, Scenario, Shared, Slot, Spin, PUBLISH_EVERY, STOP_CHECK_EVERY,
    STREAM_CAPACITY,
};
use crate::clock::now_ns;
use crate::pin::{Placement, Probe};
use crate::record::Better;
use crate::stats::new_hist;
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};

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

/// Registers the stream peers for `n` senders.
pub fn register_stream(v: &mut Vec<Scenario>, n: usize) {
    let id = |name: &str| format!("stream/{n}to1/{name}");
    let cap = STREAM_CAPACITY;
    v.push(Scenario::new(
        id("crossbeam-channel"),
        format!("peer: {n} sender(s) -> crossbeam_channel::bounded({cap}), blocking send / blocking recv"),
        n + 1,
        Family::Baseline,
        move |ctx| channel_stream::<Crossbeam>(ctx, n),
    ));
    if n == 1 {
        v.push(Scenario::new(
            id("std-mpsc"),
            format!("peer: one sender -> std::sync::mpsc::sync_channel({cap}), blocking send / blocking recv"),
            2,
            Family::Baseline,
            |ctx| channel_stream::<StdMpsc>(ctx, 1),
        ));
    }
    v.push(Scenario::new(
        id("kanal"),
        format!("peer: {n} sender(s) -> kanal::bounded({cap}), blocking send / blocking recv"),
        n + 1,
        Family::Baseline,
        move |ctx| channel_stream::<Kanal>(ctx, n),
    ));
    v.push(Scenario::new(
        id("flume"),
        format!("peer: {n} sender(s) -> flume::bounded({cap}), blocking send / blocking recv"),
        n + 1,
        Family::Baseline,
        move |ctx| channel_stream::<Flume>(ctx, n),
    ));
    v.push(Scenario::new(
        id("tokio-mpsc"),
        format!("peer: {n} sender(s) -> tokio::sync::mpsc::channel({cap}), blocking_send / blocking_recv_many({TOKIO_BATCH})"),
        n + 1,
        Family::Baseline,
        move |ctx| channel_stream::<TokioMpsc>(ctx, n),
    ));
    v.push(Scenario::new(
        id("disruptor-mp"),
        format!("peer: {n} sender(s) -> disruptor::build_multi_producer({cap}, BusySpin), one managed processor"),
        n + 1,
        Family::Baseline,
        move |ctx| disruptor_stream(ctx, n, true),
    ));
    if n == 1 {
        v.push(Scenario::new(
            id("disruptor"),
            format!("one-producer bound: disruptor::build_single_producer({cap}, BusySpin), one managed processor"),
            2,
            Family::Baseline,
            |ctx| disruptor_stream(ctx, 1, false),
        ));
        v.push(Scenario::new(
            id("rtrb"),
            format!("one-producer bound: rtrb::RingBuffer::new({cap}), push / pop, both spinning"),
            2,
            Family::Baseline,
            rtrb_stream,
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

/// The receiving side's per-event work, the same as the engine listener's: sequence check,
/// count, publish.
struct Book {
    fifo: FifoCheck,
    count: u64,
    shared: Arc<Shared>,
}

impl Book {
    fn new(n: usize, shared: Arc<Shared>) -> Self {
        Book {
            fifo: FifoCheck::new(n),
            count: 0,
            shared,
        }
    }

    #[inline]
    fn on_event(&mut self, e: &Ev) {
        self.fifo.take(e.seq);
        self.count += 1;
        self.shared.publish(self.count, false);
    }
}

/// Sender loop of a timed window: sends until the stop flag, publishing its count.
fn flood_sender(
    s: usize,
    shared: &Shared,
    counter: &crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>,
    mut send: impl FnMut(Ev) -> bool,
) -> u64 {
    let mut i = 0u64;
    loop {
        if i % STOP_CHECK_EVERY == 0 && shared.stopped() {
            break;
        }
        if !send(Ev {
            kind: 0,
            seq: seq_of(s, i),
            t_ns: 0,
            aux: 0,
        }) {
            break;
        }
        i += 1;
        if i % PUBLISH_EVERY == 0 {
            counter.store(i, Ordering::Release);
        }
    }
    i
}

/// Finishes a stream outcome: checks, figures, parameters.
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
            (w.secs > 0.0).then(|| w.events as f64 / w.secs)
        }
        Err(e) => {
            out.fail(e);
            None
        }
    }
}

/// Events of the bare probe: about half a timed window at the rate just measured, at least
/// 10,000 (split over the senders).
fn bare_events(ctx: &RunCtx, rate: f64) -> u64 {
    ((rate * ctx.mode.window().as_secs_f64() * 0.5) as u64).max(10_000)
}

/// Records the bare probe's figures.
fn bare_figures(out: &mut Outcome, rate_booked: Option<f64>, bare: Option<(u64, f64)>) {
    let (Some(booked), Some((events, secs))) = (rate_booked, bare) else {
        return;
    };
    let bare_rate = out.throughput("throughput_bare", "events/s", events, secs);
    if bare_rate > 0.0 {
        out.value(
            "bookkeeping_cost",
            "%",
            100.0 * (1.0 - booked / bare_rate),
            Better::Lower,
        );
    }
}

fn channel_stream<C: BlockingChannel>(ctx: &RunCtx, n: usize) -> Outcome {
    let mut out = Outcome::default();
    out.param("senders", n as u64);
    out.param("capacity", STREAM_CAPACITY as u64);
    let (tx, rx) = C::make(STREAM_CAPACITY);
    let shared = Shared::new();
    let counters = sender_counters(n);
    let receiver = {
        let shared = shared.clone();
        let core = ctx.map.core_for(0);
        std::thread::spawn(move || {
            let probe = Probe::start("receiver", core);
            let mut book = Book::new(n, shared);
            C::drain(rx, |e| book.on_event(&e));
            (probe.finish(), book.fifo)
        })
    };
    let mut senders = Vec::new();
    for s in 0..n {
        let tx = C::clone_tx(&tx);
        let (shared, counters) = (shared.clone(), counters.clone());
        let core = ctx.map.core_for(sender_slot(ctx, s));
        senders.push(std::thread::spawn(move || {
            let probe = Probe::start(format!("sender{s}"), core);
            let sent = flood_sender(s, &shared, &counters[s], |e| C::send(&tx, e));
            drop(tx);
            (probe.finish(), sent)
        }));
    }
    drop(tx);
    let w = timed_window_with(ctx, &shared, || sample(&counters));
    let sent = join_senders(&mut out, senders);
    let (p, fifo) = receiver.join().expect("receiver panicked");
    out.placed(p);
    let rate = finish_stream(&mut out, w, &sent, Some(fifo));
    let bare = rate.map(|r| channel_bare::<C>(ctx, n, bare_events(ctx, r)));
    bare_figures(&mut out, rate, bare);
    out
}

/// The bare probe of a channel: `total` events over `n` senders; the receiver checks the
/// sequence and counts, as every receiver does, and publishes nothing.
fn channel_bare<C: BlockingChannel>(ctx: &RunCtx, n: usize, total: u64) -> (u64, f64) {
    let per = total / n as u64;
    let (tx, rx) = C::make(STREAM_CAPACITY);
    let go = Arc::new(Barrier::new(n + 2));
    let receiver = {
        let go = go.clone();
        let core = ctx.map.core_for(0);
        std::thread::spawn(move || {
            let _probe = Probe::start("receiver", core);
            let mut fifo = FifoCheck::new(n);
            go.wait();
            C::drain(rx, |e| fifo.take(e.seq));
            (fifo.total, now_ns())
        })
    };
    let mut senders = Vec::new();
    for s in 0..n {
        let tx = C::clone_tx(&tx);
        let go = go.clone();
        let core = ctx.map.core_for(sender_slot(ctx, s));
        senders.push(std::thread::spawn(move || {
            let _probe = Probe::start(format!("sender{s}"), core);
            go.wait();
            let t0 = now_ns();
            for i in 0..per {
                if !C::send(
                    &tx,
                    Ev {
                        kind: 0,
                        seq: seq_of(s, i),
                        t_ns: 0,
                        aux: 0,
                    },
                ) {
                    break;
                }
            }
            t0
        }));
    }
    drop(tx);
    go.wait();
    let t0 = join_starts(senders);
    let (count, t1) = receiver.join().expect("receiver panicked");
    (count, t1.saturating_sub(t0) as f64 / 1e9)
}

/// Joins the senders of a timed window: places each and returns what each sent.
pub(super) fn join_senders(
    out: &mut Outcome,
    senders: Vec<std::thread::JoinHandle<(Placement, u64)>>,
) -> Vec<u64> {
    senders
        .into_iter()
        .map(|h| {
            let (p, i) = h.join().expect("sender panicked");
            out.placed(p);
            i
        })
        .collect()
}

/// Joins the senders of a bare probe; the earliest time one of them started sending.
fn join_starts(senders: Vec<std::thread::JoinHandle<u64>>) -> u64 {
    senders
        .into_iter()
        .map(|h| h.join().expect("sender panicked"))
        .min()
        .unwrap_or(0)
}

/// The disruptor processor's state: the same bookkeeping as every receiver, and its placement;
/// handed over when the processor thread ends (the disruptor drops the state there).
struct DisruptorSink {
    probe: Option<Probe>,
    book: Option<Book>,
    out: Slot<(Placement, FifoCheck)>,
}

impl Drop for DisruptorSink {
    fn drop(&mut self) {
        if let (Some(p), Some(b)) = (self.probe.take(), self.book.take()) {
            put(&self.out, (p.finish(), b.fifo));
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
    let mut out = Outcome::default();
    out.param("senders", n as u64);
    out.param("capacity", STREAM_CAPACITY as u64);
    out.param("wait_strategy", "BusySpin");
    out.param("producer", if multi { "multi" } else { "single" });
    if ctx.share_core(0, sender_slot(ctx, 0)) || n + 1 > ctx.cores() {
        out.note("the disruptor's BusySpin processor shares a core with a sender");
    }
    let shared = Shared::new();
    let counters = sender_counters(n);
    let res: Slot<(Placement, FifoCheck)> = slot();
    let init = {
        let (shared, res) = (shared.clone(), res.clone());
        let core = ctx.map.core_for(0);
        move || DisruptorSink {
            probe: Some(Probe::start("processor", core)),
            book: Some(Book::new(n, shared)),
            out: res,
        }
    };
    let handler = |s: &mut DisruptorSink, e: &Ev, _seq: i64, _end: bool| {
        if let Some(b) = s.book.as_mut() {
            b.on_event(e);
        }
    };
    let mut senders = Vec::new();
    let spawn = |s: usize, mut p: Box<dyn DProducer>| {
        let (shared, counters) = (shared.clone(), counters.clone());
        let core = ctx.map.core_for(sender_slot(ctx, s));
        std::thread::spawn(move || {
            let probe = Probe::start(format!("sender{s}"), core);
            let sent = flood_sender(s, &shared, &counters[s], |e| {
                p.send(e);
                true
            });
            // Dropping the last producer shuts the disruptor down after the processor has
            // handled everything published, and joins the processor thread.
            drop(p);
            (probe.finish(), sent)
        })
    };
    if multi {
        let p = disruptor::build_multi_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .handle_events_and_state_with(handler, init)
            .build();
        for s in 0..n {
            senders.push(spawn(s, Box::new(p.clone())));
        }
        drop(p);
    } else {
        let p = disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .handle_events_and_state_with(handler, init)
            .build();
        senders.push(spawn(0, Box::new(p)));
    }
    let w = timed_window_with(ctx, &shared, || sample(&counters));
    let sent = join_senders(&mut out, senders);
    let got = take(&res);
    let fifo = got.map(|(p, f)| {
        out.placed(p);
        f
    });
    let rate = finish_stream(&mut out, w, &sent, fifo);
    let bare = rate.map(|r| disruptor_bare(ctx, n, multi, bare_events(ctx, r)));
    bare_figures(&mut out, rate, bare);
    out
}

fn disruptor_bare(ctx: &RunCtx, n: usize, multi: bool, total: u64) -> (u64, f64) {
    let per = total / n as u64;
    let count = slot::<(u64, u64)>();
    struct Bare {
        fifo: FifoCheck,
        out: Slot<(u64, u64)>,
        _probe: Probe,
    }
    impl Drop for Bare {
        fn drop(&mut self) {
            put(&self.out, (self.fifo.total, now_ns()));
        }
    }
    let init = {
        let count = count.clone();
        let core = ctx.map.core_for(0);
        move || Bare {
            fifo: FifoCheck::new(n),
            out: count,
            _probe: Probe::start("processor", core),
        }
    };
    let handler = |s: &mut Bare, e: &Ev, _seq: i64, _end: bool| s.fifo.take(e.seq);
    let go = Arc::new(Barrier::new(n + 1));
    let spawn = |s: usize, mut p: Box<dyn DProducer>| {
        let go = go.clone();
        let core = ctx.map.core_for(sender_slot(ctx, s));
        std::thread::spawn(move || {
            let _probe = Probe::start(format!("sender{s}"), core);
            go.wait();
            let t0 = now_ns();
            for i in 0..per {
                p.send(Ev {
                    kind: 0,
                    seq: seq_of(s, i),
                    t_ns: 0,
                    aux: 0,
                });
            }
            drop(p);
            t0
        })
    };
    let mut senders = Vec::new();
    if multi {
        let p = disruptor::build_multi_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .handle_events_and_state_with(handler, init)
            .build();
        for s in 0..n {
            senders.push(spawn(s, Box::new(p.clone())));
        }
        drop(p);
    } else {
        let p = disruptor::build_single_producer(STREAM_CAPACITY, Ev::default, disruptor::BusySpin)
            .handle_events_and_state_with(handler, init)
            .build();
        senders.push(spawn(0, Box::new(p)));
    }
    go.wait();
    let t0 = join_starts(senders);
    // The processor counted up to the last event before the last producer's drop returned; the
    // drop (shutdown and join) is part of the bare figure, as the thread start is not.
    let (events, t1) = take(&count).unwrap_or((0, t0));
    (events, t1.saturating_sub(t0) as f64 / 1e9)
}

/// Why rtrb's `bookkeeping_cost` is not the bookkeeping's cost (harness/BENCHMARKS.md, "bare probe").
pub const RTRB_REGIME: &str = "bookkeeping_cost here measures a regime effect, not bookkeeping: a spinning SPSC ring is fast while the consumer stays ahead and 10-50x slower once a few cycles per event put it behind (the ring runs full and a cache line crosses the cores at every event); the bare probe's receiver lands in the fast state, the timed one (one more count, a publish every 256 events) in the slow one";

fn rtrb_stream(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("senders", 1u64);
    out.param("capacity", STREAM_CAPACITY as u64);
    let shared_core = ctx.share_core(0, sender_slot(ctx, 0));
    let (mut tx, mut rx) = rtrb::RingBuffer::<Ev>::new(STREAM_CAPACITY);
    let shared = Shared::new();
    let counters = sender_counters(1);
    let receiver = {
        let shared = shared.clone();
        let core = ctx.map.core_for(0);
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let probe = Probe::start("receiver", core);
            let mut book = Book::new(1, shared);
            loop {
                match rx.pop() {
                    Ok(e) => book.on_event(&e),
                    Err(_) if rx.is_abandoned() => {
                        // The producer is gone: everything it pushed is in the ring.
                        while let Ok(e) = rx.pop() {
                            book.on_event(&e);
                        }
                        break;
                    }
                    Err(_) => spin.step(),
                }
            }
            (probe.finish(), book.fifo)
        })
    };
    let sender = {
        let (shared, counters) = (shared.clone(), counters.clone());
        let core = ctx.map.core_for(sender_slot(ctx, 0));
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let probe = Probe::start("sender0", core);
            let sent = flood_sender(0, &shared, &counters[0], |mut e| loop {
                match tx.push(e) {
                    Ok(()) => return true,
                    Err(rtrb::PushError::Full(back)) => {
                        e = back;
                        spin.step();
                    }
                }
            });
            drop(tx);
            (probe.finish(), sent)
        })
    };
    let w = timed_window_with(ctx, &shared, || sample(&counters));
    let (ps, sent) = sender.join().expect("sender panicked");
    out.placed(ps);
    let (pr, fifo) = receiver.join().expect("receiver panicked");
    out.placed(pr);
    let rate = finish_stream(&mut out, w, &[sent], Some(fifo));
    let bare = rate.map(|r| rtrb_bare(ctx, bare_events(ctx, r)));
    bare_figures(&mut out, rate, bare);
    if bare.is_some() {
        out.note(RTRB_REGIME);
    }
    out
}

fn rtrb_bare(ctx: &RunCtx, total: u64) -> (u64, f64) {
    let shared_core = ctx.share_core(0, sender_slot(ctx, 0));
    let (mut tx, mut rx) = rtrb::RingBuffer::<Ev>::new(STREAM_CAPACITY);
    let go = Arc::new(Barrier::new(3));
    let receiver = {
        let go = go.clone();
        let core = ctx.map.core_for(0);
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let _probe = Probe::start("receiver", core);
            let mut fifo = FifoCheck::new(1);
            go.wait();
            while fifo.total < total {
                match rx.pop() {
                    Ok(e) => fifo.take(e.seq),
                    Err(_) if rx.is_abandoned() && rx.is_empty() => break,
                    Err(_) => spin.step(),
                }
            }
            (fifo.total, now_ns())
        })
    };
    let sender = {
        let go = go.clone();
        let core = ctx.map.core_for(sender_slot(ctx, 0));
        let mut spin = Spin::new(ctx, shared_core);
        std::thread::spawn(move || {
            let _probe = Probe::start("sender0", core);
            go.wait();
            let t0 = now_ns();
            for i in 0..total {
                let mut e = Ev {
                    kind: 0,
                    seq: i,
                    t_ns: 0,
                    aux: 0,
                };
                loop {
                    match tx.push(e) {
                        Ok(()) => break,
                        Err(rtrb::PushError::Full(back)) => {
                            e = back;
                            spin.step();
                        }
                    }
                }
            }
            t0
        })
    };
    go.wait();
    let t0 = join_starts(vec![sender]);
    let (count, t1) = receiver.join().expect("receiver panicked");
    (count, t1.saturating_sub(t0) as f64 / 1e9)
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
                let t0 = now_ns();
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
                let t1 = now_ns();
                match got {
                    Some(e) if e.seq == i => {}
                    other => {
                        bad = Some(format!("round trip {i} came back as {other:?}"));
                        break;
                    }
                }
                if shared.measuring() {
                    h.saturating_record(((t1 - t0) / 2).max(1));
                }
                i += 1;
                shared.publish(i, false);
            }
            drop(ab_tx);
            (probe.finish(), h, i, bad)
        })
    };
    if let Err(e) = timed_window(ctx, &shared) {
        out.fail(e);
    }
    let ra = a.join();
    let (trips, mean) = finish_pingpong(&mut out, &shared, ra, b.join().map(|x| (Some(x.0), x.1)));
    if out.failures.is_empty() {
        let bare = channel_pingpong_bare::<C>(ctx, bare_trips(trips));
        pingpong_bare_figures(&mut out, mean, bare);
    }
    out
}

type PingA = (Placement, Histogram<u64>, u64, Option<String>);

fn finish_pingpong(
    out: &mut Outcome,
    shared: &Shared,
    a: std::thread::Result<PingA>,
    b: std::thread::Result<(Option<Placement>, u64)>,
) -> (u64, f64) {
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
    out.latency("latency_one_way", &h);
    (sent, h.mean())
}

/// Round trips of a ping-pong's bare probe: a quarter of the timed run's, at least 1000.
fn bare_trips(timed_trips: u64) -> u64 {
    (timed_trips / 4).max(1000)
}

/// Records a ping-pong's bare probe: its mean one-way latency and the bookkeeping's cost,
/// `1 - bare / timed` on the mean one-way latencies (the same as `1 - timed / bare` on rates).
fn pingpong_bare_figures(out: &mut Outcome, timed_mean: f64, bare_mean: Option<f64>) {
    let Some(bare) = bare_mean else {
        return;
    };
    out.value("latency_one_way_mean", "ns", timed_mean, Better::Lower);
    out.value("latency_one_way_bare", "ns", bare, Better::Lower);
    if timed_mean > 0.0 {
        out.value(
            "bookkeeping_cost",
            "%",
            100.0 * (1.0 - bare / timed_mean),
            Better::Lower,
        );
    }
}

/// The bare probe of a channel ping-pong: `trips` round trips timed as a whole, no per-trip
/// clock reads, histogram or publishing; the mean one-way latency in ns (`None` when a trip
/// failed).
fn channel_pingpong_bare<C: BlockingChannel>(ctx: &RunCtx, trips: u64) -> Option<f64> {
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
        Some(t1.saturating_sub(t0) as f64 / (2 * trips) as f64)
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
                let t0 = now_ns();
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
                let t1 = now_ns();
                match got {
                    Some(e) if e.seq == i => {}
                    other => {
                        bad = Some(format!("round trip {i} came back as {other:?}"));
                        break;
                    }
                }
                if shared.measuring() {
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
    if let Err(e) = w {
        out.fail(e);
    }
    let (trips, mean) = finish_pingpong(&mut out, &shared, ra, Ok((pb, answered)));
    if out.failures.is_empty() {
        let bare = disruptor_pingpong_bare(ctx, bare_trips(trips));
        pingpong_bare_figures(&mut out, mean, bare);
    }
    out
}

/// The bare probe of the disruptor ping-pong: `trips` round trips over fresh disruptors, timed
/// as a whole; the mean one-way latency in ns (`None` when a trip failed).
fn disruptor_pingpong_bare(ctx: &RunCtx, trips: u64) -> Option<f64> {
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
        Some(t1.saturating_sub(t0) as f64 / (2 * trips) as f64)
    });
    a.join().expect("bouncer a panicked")
}
