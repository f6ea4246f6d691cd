//! Baselines that are not stream peers: `route/crossbeam-channel` (one thread sends to and
//! receives from a channel, the loop `route/dispatch` is compared with), the self-test, and the
//! helpers the stream scenarios share (sender slots and counters). The stream peers (channels,
//! disruptor, rtrb, `ArrayQueue`), each driven as its documentation shows, are in
//! [`super::peers`].
//!
//! Each baseline moves the same [`Ev`] with the same capacity ([`STREAM_CAPACITY`]), the same
//! thread slots (receiver on slot 0, senders on the other cores), the same time-bounded window
//! and the same per-sender FIFO check as the engine scenario it is compared with.

use super::{
    seq_of, stream_figures, timed_window, Ev, Family, FifoCheck, Outcome, RunCtx, Scenario, Shared,
    STOP_CHECK_EVERY, STREAM_CAPACITY,
};
use crate::pin::Probe;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
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
