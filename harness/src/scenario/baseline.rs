//! Baselines that are not stream peers: `route/floor` (a hand-written `Vec` stack and `match`
//! dispatcher doing `route/dispatch`'s per-event work, its target's floor),
//! `route/crossbeam-channel` (one thread sends to and receives from a channel, the same loop
//! through a channel) and the self-test. The stream peers (channels, disruptor, rtrb,
//! `ArrayQueue`), each driven as its documentation shows, are in [`super::peers`].
//!
//! Each baseline moves the same [`Ev`] with the same capacity ([`STREAM_CAPACITY`]), the same
//! thread slots (receiver on slot 0, senders on the other cores), the same time-bounded window
//! and the same per-sender FIFO check as the engine scenario it is compared with.

use super::peers::crossbeam_channel::Crossbeam;
use super::peers::shape::BlockingChannel;
use super::{
    seq_of, stream_figures, timed_window, Ev, Family, FifoCheck, Outcome, RunCtx, Scenario, Shared,
    PUBLISH_EVERY, STOP_CHECK_EVERY, STREAM_CAPACITY,
};
use crate::pin::Probe;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Registers `route/floor` and `route/crossbeam-channel`.
pub fn register_route(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "route/floor",
        "baseline: one thread, a Vec stack and a match dispatcher; each event pushes the next (route/dispatch by hand)",
        1,
        Family::Baseline,
        route_floor,
    ));
    v.push(Scenario::new(
        "route/crossbeam-channel",
        "baseline: one thread sends to and receives from a crossbeam channel, the same event",
        1,
        Family::Baseline,
        route_crossbeam,
    ));
}

/// When this environment variable is set, the catalogue also holds `selftest/lossy`, a stream
/// that drops one event on purpose: the harness's own test proves that a loss fails the run.
pub const SELFTEST_ENV: &str = "HARNESS_SELFTEST";

/// Registers `selftest/lossy` (the catalogue calls it only with [`SELFTEST_ENV`] set).
pub fn register_selftest(v: &mut Vec<Scenario>) {
    v.push(Scenario::new(
        "selftest/lossy",
        "self-test: a crossbeam stream whose receiver drops one event; its check must fail",
        2,
        Family::Baseline,
        |ctx| {
            let (tx, rx) = Crossbeam::make(64);
            let sender = std::thread::spawn(move || {
                for i in 0..1000 {
                    let _ = Crossbeam::send(
                        &tx,
                        Ev {
                            kind: 0,
                            seq: seq_of(0, i),
                            t_ns: 0,
                            aux: 0,
                        },
                    );
                }
                1000u64
            });
            let mut fifo = FifoCheck::new(1);
            Crossbeam::drain(rx, |e| {
                if e.seq != 500 {
                    fifo.take(e.seq);
                }
            });
            let sent = sender.join().expect("sender panicked");
            let mut out = Outcome::default();
            out.param("mode", ctx.mode.name());
            fifo.verify(&[sent], &mut out);
            out.value("throughput", "events/s", 1.0, crate::record::Better::Higher);
            out
        },
    ));
}

/// The state of `route/floor`'s one handler: what `route/dispatch`'s monitor holds (the shared
/// block and the count, which is the sequence number the next event must carry).
struct FloorRelay {
    sh: Arc<Shared>,
    n: u64,
}

impl FloorRelay {
    /// The handler of kind 0, `route/dispatch`'s per-event work: check the sequence number, count,
    /// test the count for the periodic work, push the next event onto the stack. Never inlined
    /// into the dispatcher: a dispatcher calls its handlers, as the engine calls its listener.
    #[inline(never)]
    fn on_relay(&mut self, stack: &mut Vec<Ev>, seq: u64) {
        if seq != self.n {
            self.broken(seq);
            return;
        }
        self.n += 1;
        if self.n % PUBLISH_EVERY == 0 && self.periodic() {
            return;
        }
        stack.push(Ev {
            kind: 0,
            seq: self.n,
            t_ns: 0,
            aux: 0,
        });
    }

    /// The work every [`PUBLISH_EVERY`] events, out of line as `route/dispatch`'s: publishes the
    /// count; every [`STOP_CHECK_EVERY`] also checks the stop flag. Returns whether the chain ends.
    #[cold]
    #[inline(never)]
    fn periodic(&self) -> bool {
        self.sh.publish(self.n, false);
        if self.n % STOP_CHECK_EVERY == 0 && self.sh.stopped() {
            self.sh.publish(self.n, true);
            self.sh.done.store(true, Ordering::Release);
            return true;
        }
        false
    }

    #[cold]
    #[inline(never)]
    fn broken(&self, seq: u64) {
        self.sh.fail(format!(
            "chain broken: got seq {seq}, expected seq {}",
            self.n
        ));
    }

    #[cold]
    #[inline(never)]
    fn unknown(&self, kind: u32, seq: u64) {
        self.sh
            .fail(format!("no handler for event kind {kind} (seq {seq})"));
    }
}

/// `route/floor`: `route/dispatch` written by hand, the floor its target is measured against. One
/// thread on slot 0; a `Vec` is the stack (push the next event, pop it: LIFO, so routing order);
/// each popped event is counted, as the engine counts what a context processes, and dispatched by
/// a `match` on its kind to a handler. The same event, the same checks, nothing else.
fn route_floor(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let shared = Shared::new();
    let core = ctx.map.core_for(0);
    let worker = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let probe = Probe::start("dispatcher", core);
            let mut relay = FloorRelay { sh: shared, n: 0 };
            let mut stack: Vec<Ev> = Vec::with_capacity(64);
            stack.push(Ev::default());
            let mut dispatched = 0u64;
            while let Some(e) = stack.pop() {
                dispatched += 1;
                match e {
                    Ev { kind: 0, seq, .. } => relay.on_relay(&mut stack, seq),
                    Ev { kind, seq, .. } => relay.unknown(kind, seq),
                }
            }
            (probe.finish(), dispatched, relay.n)
        })
    };
    let w = timed_window(ctx, &shared);
    let (p, dispatched, n) = worker.join().expect("dispatcher panicked");
    out.placed(p);
    match shared.failure() {
        Some(f) => out.fail(f),
        None => out.check(shared.done.load(Ordering::Acquire), || {
            "the chain ended without seeing the stop flag".into()
        }),
    }
    out.check(dispatched == n, || {
        format!("the dispatcher took {dispatched} events, the handler counted {n}")
    });
    out.param("events_total", n);
    match w {
        Ok(w) => stream_figures(&mut out, w, None),
        Err(e) => out.fail(e),
    }
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
            let (tx, mut rx) = Crossbeam::make(STREAM_CAPACITY);
            let mut e = Ev::default();
            let mut count = 0u64;
            let mut broken = None;
            loop {
                if !Crossbeam::send(&tx, e) {
                    broken = Some("send failed".to_string());
                    break;
                }
                match Crossbeam::recv(&mut rx) {
                    Some(got) if got.seq == count => {}
                    Some(got) => {
                        broken = Some(format!("expected seq {count}, got {}", got.seq));
                        break;
                    }
                    None => {
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
