//! `async/tokio/{engine,tokio-mpsc}`: the engine embedded in a tokio service (issue 19), against
//! the same two hops written with tokio's own bounded channels, in the same run.
//!
//! # What runs
//! Both ids run the same service: a tokio `current_thread` runtime on one thread (the flavour of
//! a small service, and the one where a blocking call hangs everything: the case) with
//! two tasks, a *sender* that sends u64-numbered events and a *consumer* that reads them back;
//! between them, a relay on a thread of its own checks each event's sequence number, counts it
//! and forwards it into a bounded output. Side by side:
//!
//! | hop | `async/tokio/engine` | `async/tokio/tokio-mpsc` |
//! |---|---|---|
//! | sender task → relay | `InputHandle::send_to_async(main, ev).await` into `main`'s inbox ([`STREAM_CAPACITY`]) | `Sender::send(ev).await` into `mpsc::channel(STREAM_CAPACITY)` |
//! | relay (its own thread) | a monitor on `main`'s context thread (the engine's default wait strategy): sequence check, `emit` | a task on a second `current_thread` runtime: `recv().await`, sequence check, `send(ev).await` |
//! | relay → consumer task | a bounded output (`OutputOptions::bounded(STREAM_CAPACITY)`, `Block`) read with `recv_async().await` | `mpsc::channel(STREAM_CAPACITY)` read with `recv().await` |
//!
//! The relay's runtime on the tokio side is the peer of the engine's context thread: both sides
//! use two threads, and both relays sleep when idle (the engine spins, yields, then parks; tokio
//! parks). The consumer task does the same on both sides: the sequence check again (end to end),
//! the count published for the timed window, and the latency sample.
//!
//! # What is measured
//! The sender keeps at most [`ASYNC_WINDOW`] events in flight (sent, not yet taken by the
//! consumer), waiting on a `tokio::sync::Notify` that the consumer signals every
//! [`ASYNC_WINDOW`]` / 4` events: a closed loop, like `nats/loopback`, so that the latency is that
//! of a loaded service rather than of two full queues. `throughput` is the consumer's events/s
//! over the timed window; `latency_send_to_recv` is the time from just before the send to the
//! consumer's receive, on one event in [`super::LATENCY_SAMPLE_EVERY`] (p50 as the figure, the
//! histogram in the results), `latency_send_to_recv_p99` its 99th percentile. After the window
//! the sender stops, the chain drains (the engine by its graceful shutdown, tokio by dropping the
//! senders), and every event must have passed both sequence checks: a loss, duplicate or
//! reorder fails the run.

use super::peers::tokio::{self as tokio_peer, runtime_thread};
use super::{
    put, sample_clock, seq_of, slot, stream_figures, take, timed_window, wait_for, Ev, Family,
    FifoCheck, Outcome, RunCtx, Scenario, Shared, Slot, STALL_TIMEOUT, STOP_CHECK_EVERY,
    STREAM_CAPACITY,
};
use crate::clock::now_ns;
use crate::pin::Placement;
use crate::record::Better;
use crate::stats::new_hist;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Events the sender task keeps in flight at most (sent and not yet received).
pub const ASYNC_WINDOW: u64 = 256;
/// The consumer signals the sender every this many events (a quarter of the window).
const SIGNAL_EVERY: u64 = ASYNC_WINDOW / 4;

/// Registers `async/tokio/engine` and `async/tokio/tokio-mpsc`.
pub fn register(v: &mut Vec<Scenario>) {
    #[cfg(not(feature = "engine"))]
    v.push(super::engine::absent("async/tokio/engine".into(), 2));
    #[cfg(feature = "engine")]
    v.push(Scenario::new(
        "async/tokio/engine",
        format!("a current_thread tokio service: send_to_async into a context, emit to a bounded output read with recv_async ({ASYNC_WINDOW} in flight)"),
        2,
        Family::Engine,
        engine_side::run,
    ));
    v.push(Scenario::new(
        "async/tokio/tokio-mpsc",
        format!("the same service with two bounded tokio mpsc channels and a relay task on a second runtime ({ASYNC_WINDOW} in flight)"),
        2,
        Family::Baseline,
        tokio_mpsc,
    ));
}

/// What the service's two tasks share.
#[derive(Default)]
struct Flight {
    /// Events the consumer has taken (written by the consumer only).
    received: CachePadded<AtomicU64>,
    /// Signalled by the consumer every [`SIGNAL_EVERY`] events: room in the window.
    room: Notify,
    /// Raised by the sender task when it has stopped sending.
    sender_done: AtomicBool,
}

/// The sender task's side: numbering, the latency stamp, the in-flight window.
struct Feeder {
    sh: Arc<Shared>,
    flight: Arc<Flight>,
    /// Events handed out so far.
    sent: u64,
}

impl Feeder {
    /// The next event to send, once the window has room; `None` once the stop flag is up.
    async fn next(&mut self) -> Option<Ev> {
        if self.sent % STOP_CHECK_EVERY == 0 && self.sh.stopped() {
            return None;
        }
        while self.sent - self.flight.received.load(Ordering::Acquire) >= ASYNC_WINDOW {
            if self.sh.stopped() {
                return None;
            }
            self.flight.room.notified().await;
        }
        let e = Ev {
            kind: 0,
            seq: seq_of(0, self.sent),
            t_ns: sample_clock(self.sent),
            aux: 0,
        };
        self.sent += 1;
        Some(e)
    }

    /// Records that the sender has stopped; returns how many events it sent.
    fn done(self) -> u64 {
        self.flight.sender_done.store(true, Ordering::Release);
        self.sent
    }
}

/// The consumer task's per-event work: sequence check (which counts), latency sample, the
/// count published for the window, the signal to the sender.
struct Taker {
    sh: Arc<Shared>,
    flight: Arc<Flight>,
    fifo: FifoCheck,
    hist: Histogram<u64>,
}

impl Taker {
    #[inline]
    fn take(&mut self, e: Ev) {
        self.fifo.take(e.seq);
        if e.t_ns != 0 && self.sh.measuring() {
            self.hist.saturating_record((now_ns() - e.t_ns).max(1));
        }
        let n = self.fifo.total;
        self.flight.received.store(n, Ordering::Release);
        if n % SIGNAL_EVERY == 0 {
            self.flight.room.notify_one();
        }
        self.sh.publish(n, false);
    }
}

/// The service thread: a `current_thread` runtime running the sender and the consumer task.
struct Service {
    flight: Arc<Flight>,
    sent: Slot<u64>,
    thread: std::thread::JoinHandle<(Taker, Placement)>,
}

/// Starts the service thread on the plan's slot 1 (slot 0 is the relay's): `sender` and
/// `consumer` make the two tasks from their halves of the kit.
fn start_service<S, C>(
    ctx: &RunCtx,
    sh: &Arc<Shared>,
    sender: impl FnOnce(Feeder) -> S + Send + 'static,
    consumer: impl FnOnce(Taker) -> C + Send + 'static,
) -> Service
where
    S: Future<Output = u64> + Send + 'static,
    C: Future<Output = Taker> + Send + 'static,
{
    let flight = Arc::new(Flight::default());
    let sent = slot();
    let feeder = Feeder {
        sh: sh.clone(),
        flight: flight.clone(),
        sent: 0,
    };
    let taker = Taker {
        sh: sh.clone(),
        flight: flight.clone(),
        fifo: FifoCheck::new(1),
        hist: new_hist(),
    };
    let core = ctx.map.core_for(super::sender_slot(ctx, 0));
    let sent_slot = sent.clone();
    let thread = runtime_thread(
        "service runtime (sender and consumer tasks)",
        core,
        || async move {
            let consumer = tokio::spawn(consumer(taker));
            let sent = tokio::spawn(sender(feeder)).await.expect("sender task");
            put(&sent_slot, sent);
            consumer.await.expect("consumer task")
        },
    );
    Service {
        flight,
        sent,
        thread,
    }
}

impl Service {
    /// After the window: waits for the sender task to stop (`None`, with the failure recorded,
    /// when it does not).
    fn sender_stopped(&self, out: &mut Outcome) -> Option<()> {
        let stopped = wait_for(STALL_TIMEOUT, Duration::from_millis(1), || {
            self.flight.sender_done.load(Ordering::Acquire)
        });
        if !stopped {
            out.fail("the sender task did not stop after the window");
        }
        stopped.then_some(())
    }

    /// Joins the service thread once the chain has drained and records the figures and checks:
    /// `relay` is the relay's sequence check.
    fn finish(
        self,
        out: &mut Outcome,
        window: Result<super::Window, String>,
        relay: Option<FifoCheck>,
    ) {
        let (taker, placement) = self.thread.join().expect("service thread panicked");
        out.placed(placement);
        let sent = take(&self.sent).unwrap_or(0);
        out.param("events_total", sent);
        out.param("capacity", STREAM_CAPACITY as u64);
        out.param("in_flight", ASYNC_WINDOW);
        out.param("runtime", "tokio current_thread");
        match relay {
            Some(f) => f.verify(&[sent], out),
            None => out.fail("the relay did not hand over its check"),
        }
        taker.fifo.verify(&[sent], out);
        match window {
            Ok(w) => {
                stream_figures(out, w, None);
                out.latency("latency_send_to_recv", &taker.hist);
                out.value(
                    "latency_send_to_recv_p99",
                    "ns",
                    taker.hist.value_at_quantile(0.99) as f64,
                    Better::Lower,
                );
            }
            Err(e) => out.fail(e),
        }
    }
}

/// `async/tokio/tokio-mpsc`.
fn tokio_mpsc(ctx: &RunCtx) -> Outcome {
    let mut out = Outcome::default();
    let sh = Shared::new();
    let (tx, relay_rx) = tokio_peer::channel(STREAM_CAPACITY);
    let (relay_tx, mut rx) = tokio_peer::channel(STREAM_CAPACITY);
    let core = ctx.map.core_for(0);
    let relay = runtime_thread("relay runtime (relay task)", core, || {
        tokio_peer::relay(relay_rx, relay_tx)
    });
    let service = start_service(
        ctx,
        &sh,
        move |mut feeder| async move {
            while let Some(e) = feeder.next().await {
                if tx.send(e).await.is_err() {
                    feeder.sh.fail("the relay's channel closed during the run");
                    break;
                }
            }
            // Dropping `tx` here ends the relay, which ends the consumer.
            feeder.done()
        },
        move |mut taker| async move {
            while let Some(e) = rx.recv().await {
                taker.take(e);
            }
            taker
        },
    );
    let window = timed_window(ctx, &sh);
    if service.sender_stopped(&mut out).is_none() {
        return out;
    }
    let (fifo, placement) = relay.join().expect("relay thread panicked");
    out.placed(placement);
    service.finish(&mut out, window, Some(fifo));
    if let Some(f) = sh.failure() {
        out.fail(f);
    }
    out
}

#[cfg(feature = "engine")]
mod engine_side {
    use super::{start_service, RunCtx};
    use crate::scenario::engine::{Clock, Cx, EngineRun, Seen};
    use crate::scenario::{
        put, slot, take, FifoCheck, Outcome, Slot, STOP_CHECK_EVERY, STREAM_CAPACITY,
    };
    use correlator::{Channel, DieReason, Monitor, OutputOptions, Pattern, WaitStrategy};
    use std::sync::Arc;

    /// The relay monitor on `main`: the sequence check (which counts), then `emit`.
    struct Relay {
        fifo: FifoCheck,
        alerts: Channel,
        seen: Arc<Seen>,
        report: Slot<FifoCheck>,
    }

    impl Monitor<crate::scenario::Ev> for Relay {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.on_all(
                Pattern::kind(0),
                |m: &mut Relay, cx: &mut Cx<'_, Relay>, e: &crate::scenario::Ev| {
                    m.fifo.take(e.seq);
                    if m.fifo.total % STOP_CHECK_EVERY == 1 {
                        m.seen.mark();
                    }
                    cx.emit(m.alerts, *e);
                },
            );
        }

        fn on_die(&mut self, _reason: &DieReason, _cx: &mut Cx<'_, Self>) {
            put(&self.report, self.fifo.clone());
        }
    }

    /// `async/tokio/engine`.
    pub(super) fn run(ctx: &RunCtx) -> Outcome {
        let mut out = Outcome::default();
        // The engine's default: what a service embedding it gets (spin, yield, then park).
        let wait = WaitStrategy::default();
        out.param("wait_strategy", super::super::engine::wait_name(wait));
        let seen = Arc::new(Seen::default());
        let report = slot();
        let Some((run, rx)) = EngineRun::new(ctx, STREAM_CAPACITY, wait)
            .clock(Clock::External)
            .start(&mut out, |c, _, _| {
                let alerts = c.channel("alerts")?;
                let rx = c.output_with(alerts, OutputOptions::bounded(STREAM_CAPACITY))?;
                c.load(Relay {
                    fifo: FifoCheck::new(1),
                    alerts,
                    seen: seen.clone(),
                    report: report.clone(),
                })?;
                Ok(rx)
            })
        else {
            return out;
        };
        let (mut input, main) = (run.c.input(), run.c.main());
        let service = start_service(
            ctx,
            &run.sh,
            move |mut feeder| async move {
                while let Some(e) = feeder.next().await {
                    if let Err(err) = input.send_to_async(main, e).await {
                        feeder.sh.fail(format!("send_to_async failed: {err}"));
                        break;
                    }
                }
                feeder.done()
            },
            move |mut taker| async move {
                // `recv_async`, as a service reads an output in a spawned task (its future is
                // `Send`). It ends with `RecvError` once the correlator has shut down and
                // everything was read.
                let mut rx = rx;
                while let Ok(e) = rx.recv_async().await {
                    taker.take(e);
                }
                taker
            },
        );
        let window = super::timed_window(ctx, &run.sh);
        if service.sender_stopped(&mut out).is_none() {
            return out;
        }
        // The graceful shutdown processes everything accepted, then ends the output (R8.1).
        let status = run.finish(&mut out);
        out.placed(seen.placement("context main (relay)", ctx.map.core_for(0)));
        service.finish(&mut out, window, take(&report));
        if let Some(s) = status {
            out.param("output_drops", s.totals.output_drops);
            out.check(s.totals.output_drops == 0, || {
                format!("{} events dropped by a Block output", s.totals.output_drops)
            });
        }
        out
    }
}
