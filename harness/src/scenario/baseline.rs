//! Baselines that are not channel peers: `route/crossbeam-channel` (one thread sends to and
//! receives from a channel, the loop `route/dispatch` is compared with), `stream/1to1/arrayqueue`
//! (crossbeam-queue's `ArrayQueue`, which has no blocking operations: both sides spin on
//! `push`/`pop`), the self-test, and the helpers the stream scenarios share. The channel, disruptor
//! and rtrb peers, each driven as its documentation shows, are in [`super::peers`].
//!
//! Each baseline moves the same [`Ev`] with the same capacity ([`STREAM_CAPACITY`]), the same
//! thread slots (receiver on slot 0, senders on the other cores), the same time-bounded window
//! and the same per-sender FIFO check as the engine scenario it is compared with.

use super::{
    seq_of, stream_figures, timed_window, timed_window_with, Ev, Family, FifoCheck, Outcome,
    RunCtx, Scenario, Shared, Spin, PUBLISH_EVERY, STOP_CHECK_EVERY, STREAM_CAPACITY,
};
use crate::pin::Probe;
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Registers `route/crossbeam-channel`.
pub fn register_route(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "route/crossbeam-channel",
        "baseline: one thread sends to and receives from a crossbeam channel, the same event",
        1,
        Family::Baseline,
        route_crossbeam,
    ));
}

/// Registers `stream/1to1/arrayqueue`: crossbeam-queue's `ArrayQueue`, both sides spinning
/// (it has no blocking operations). The other stream peers are in [`super::peers`].
pub fn register_stream(v: &mut Vec<Scenario>, n: usize) {
    if n == 1 {
        v.push(Scenario::new(
            "stream/1to1/arrayqueue",
            format!("baseline: one sender floods one receiver through crossbeam_queue::ArrayQueue({STREAM_CAPACITY}), both spinning"),
            2,
            Family::Baseline,
            |ctx| stream::<Array>(ctx, 1),
        ));
    }
}

/// Registers `selftest/lossy` (only with [`super::SELFTEST_ENV`] set).
pub fn register_selftest(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "selftest/lossy",
        "self-test: a crossbeam stream whose receiver drops one event; its check must fail",
        2,
        Family::Baseline,
        |ctx| {
            let (tx, rx) = crossbeam_channel::bounded::<Ev>(64);
            let sender = std::thread::spawn(move || {
                for i in 0..1000 {
                    let _ = tx.send(Ev {
                        kind: 0,
                        seq: seq_of(0, i),
                        t_ns: 0,
                        aux: 0,
                    });
                }
                1000u64
            });
            let mut fifo = FifoCheck::new(1);
            for e in rx.iter() {
                if e.seq != 500 {
                    fifo.take(e.seq);
                }
            }
            let sent = sender.join().expect("sender panicked");
            let mut out = Outcome::default();
            out.param("mode", ctx.mode.name());
            fifo.verify(&[sent], &mut out);
            out.value("throughput", "events/s", 1.0, crate::record::Better::Higher);
            out
        },
    ));
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

/// A bounded queue as the stream baselines use it.
trait Fabric {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    fn clone_tx(tx: &Self::Tx) -> Self::Tx;
    /// Blocking send (waits for room); `false` if the receiver is gone.
    fn send(tx: &Self::Tx, e: Ev, spin: Spin) -> bool;
    fn try_recv(rx: &Self::Rx) -> Option<Ev>;
}

struct Array;
impl Fabric for Array {
    type Tx = Arc<ArrayQueue<Ev>>;
    type Rx = Arc<ArrayQueue<Ev>>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (q.clone(), q)
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, mut e: Ev, mut spin: Spin) -> bool {
        loop {
            match tx.push(e) {
                Ok(()) => return true,
                Err(back) => {
                    e = back;
                    spin.step();
                }
            }
        }
    }
    fn try_recv(rx: &Self::Rx) -> Option<Ev> {
        rx.pop()
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

fn stream<F: Fabric>(ctx: &RunCtx, n: usize) -> Outcome {
    let mut out = Outcome::default();
    out.param("senders", n as u64);
    out.param("capacity", STREAM_CAPACITY as u64);
    let (tx, rx) = F::make(STREAM_CAPACITY);
    let shared = Shared::new();
    let counters = sender_counters(n);
    let finished = Arc::new(CachePadded::new(AtomicUsize::new(0)));
    let mut recv_spin = Spin::new(ctx, ctx.cores() < 2);
    let receiver = {
        let (shared, finished) = (shared.clone(), finished.clone());
        let core = ctx.map.core_for(0);
        std::thread::spawn(move || {
            let probe = Probe::start("receiver", core);
            let mut fifo = FifoCheck::new(n);
            let mut count = 0u64;
            loop {
                match F::try_recv(&rx) {
                    Some(e) => {
                        fifo.take(e.seq);
                        count += 1;
                        shared.publish(count, false);
                    }
                    None => {
                        if finished.load(Ordering::Acquire) == n {
                            // Every send happened before `finished` was raised: drain and stop.
                            while let Some(e) = F::try_recv(&rx) {
                                fifo.take(e.seq);
                            }
                            break;
                        }
                        recv_spin.step();
                    }
                }
            }
            (probe.finish(), fifo)
        })
    };
    let mut senders = Vec::new();
    for s in 0..n {
        let tx = F::clone_tx(&tx);
        let (shared, counters, finished) = (shared.clone(), counters.clone(), finished.clone());
        let slot = sender_slot(ctx, s);
        let core = ctx.map.core_for(slot);
        let spin = Spin::new(
            ctx,
            ctx.share_core(slot, 0) || n > ctx.cores().saturating_sub(1),
        );
        senders.push(std::thread::spawn(move || {
            let probe = Probe::start(format!("sender{s}"), core);
            let mut i = 0u64;
            loop {
                if i % STOP_CHECK_EVERY == 0 && shared.stopped() {
                    break;
                }
                if !F::send(
                    &tx,
                    Ev {
                        kind: 0,
                        seq: seq_of(s, i),
                        t_ns: 0,
                        aux: 0,
                    },
                    spin,
                ) {
                    break;
                }
                i += 1;
                if i % PUBLISH_EVERY == 0 {
                    counters[s].store(i, Ordering::Release);
                }
            }
            drop(tx);
            finished.fetch_add(1, Ordering::AcqRel);
            (probe.finish(), i)
        }));
    }
    drop(tx);
    let w = timed_window_with(ctx, &shared, || sample(&counters));
    let sent = super::peers::join_senders(&mut out, senders);
    let (p, fifo) = receiver.join().expect("receiver panicked");
    out.placed(p);
    fifo.verify(&sent, &mut out);
    match w {
        Ok((w, c0, c1)) => {
            let shares: Vec<u64> = c1.iter().zip(&c0).map(|(a, b)| a - b).collect();
            stream_figures(&mut out, w, Some(&shares));
        }
        Err(e) => out.fail(e),
    }
    out.param("events_total", sent.iter().sum::<u64>());
    out
}

fn route_crossbeam(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    out.param("capacity", STREAM_CAPACITY as u64);
    let shared = Shared::new();
    let core = ctx.map.core_for(0);
    let worker = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let probe = Probe::start("sender-receiver", core);
            let (tx, rx) = crossbeam_channel::bounded::<Ev>(STREAM_CAPACITY);
            let mut e = Ev::default();
            let mut count = 0u64;
            let mut broken = None;
            loop {
                if tx.send(e).is_err() {
                    broken = Some("send failed".to_string());
                    break;
                }
                match rx.recv() {
                    Ok(got) if got.seq == count => {}
                    Ok(got) => {
                        broken = Some(format!("expected seq {count}, got {}", got.seq));
                        break;
                    }
                    Err(_) => {
                        broken = Some("recv failed".to_string());
                        break;
                    }
                }
                count += 1;
                e.seq = count;
                shared.publish(count, false);
                if count % STOP_CHECK_EVERY == 0 && shared.stopped() {
                    break;
                }
            }
            (probe.finish(), count, broken)
        })
    };
    let w = timed_window(ctx, &shared);
    let (p, count, broken) = worker.join().expect("worker panicked");
    out.placed(p);
    if let Some(b) = broken {
        out.fail(b);
    }
    out.param("events_total", count);
    match w {
        Ok(w) => stream_figures(&mut out, w, None),
        Err(e) => out.fail(e),
    }
    out
}
