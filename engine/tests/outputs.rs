//! SPEC §4 (R4.2, R4.3), R8.1, R9.1: bounded outputs, their overflow policies, typed outputs, and
//! the end of every receiver at shutdown.
mod common;

use std::time::Duration;

use common::*;
use correlator::{
    Correlator, Monitor, Output, OutputOptions, Overflow, Pattern, RecvTimeoutError, Scope,
    TryRecvError, DEFAULT_OUTPUT_CAPACITY,
};

/// Loads a monitor in `main` that emits every kind-1 event it gets on `channel`.
fn emitter(c: &Correlator<Ev>, channel: correlator::Channel) {
    let log = Log::default();
    c.load(Script::new("emit", &log, move |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            move |_: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                cx.emit(channel, e.clone());
            },
        );
    }))
    .unwrap();
}

fn vals(v: impl IntoIterator<Item = Ev>) -> Vec<u64> {
    v.into_iter().map(|e| e.val).collect()
}

// R4.3, R5.1, R9.1: a flood into an unread `Block` output holds the queue at its bound while the
// emitting context waits (back-pressure), the wait counts in `output_blocked_ns`, and nothing is
// lost or reordered once the receiver reads.
#[test]
fn r4_3_block_output_holds_its_bound_and_counts_blocked_time() {
    bounded(|| {
        let c = correlator(256);
        let out = c.channel("out").unwrap();
        let rx = c.output_with(out, OutputOptions::bounded(8)).unwrap();
        emitter(&c, out);
        let input = c.input();
        c.start();
        for i in 0..100 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        assert!(eventually(|| rx.len() == 8), "the output filled up");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(rx.len(), 8, "a Block output holds at its bound");
        assert!(
            c.status().totals.processed < 100,
            "the emitting context waits for room"
        );
        let got: Vec<u64> = (0..100).map(|_| rx.recv().unwrap().val).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        let status = c.shutdown().unwrap();
        assert_eq!(status.totals.output_drops, 0);
        assert!(
            status.totals.output_blocked_ns >= 30_000_000,
            "blocked {} ns, expected at least the 60 ms the output stayed full",
            status.totals.output_blocked_ns
        );
        let main = status.context(c.main()).unwrap();
        assert_eq!(main.output_blocked_ns, status.totals.output_blocked_ns);
        assert_eq!(rx.recv(), Err(correlator::RecvError));
    });
}

// R4.3, R9.1: `DropOldest` keeps the newest events, and counts every one it dropped, exactly,
// in the receiver, the emitting context's status and the totals.
#[test]
fn r4_3_drop_oldest_keeps_the_newest_and_counts_drops_exactly() {
    let (c, rx, status) = ten_events_into_four_places(Overflow::DropOldest);
    assert_eq!(vals(rx.try_iter()), [6, 7, 8, 9]);
    assert_eq!(rx.dropped(), 6);
    assert_eq!(status.context(c.main()).unwrap().output_drops, 6);
    assert_eq!(status.totals.output_drops, 6);
    assert_eq!(status.totals.output_blocked_ns, 0);
}

// R4.3, R9.1: `DropNewest` keeps the oldest events and counts every new one it dropped, exactly.
#[test]
fn r4_3_drop_newest_keeps_the_oldest_and_counts_drops_exactly() {
    let (c, rx, status) = ten_events_into_four_places(Overflow::DropNewest);
    assert_eq!(vals(rx.iter()), [0, 1, 2, 3]);
    assert_eq!(rx.dropped(), 6);
    assert_eq!(status.context(c.main()).unwrap().output_drops, 6);
    assert_eq!(status.totals.output_drops, 6);
}

/// Ten events emitted by the main context into an output of four places with `policy`, with
/// nobody receiving until the correlator has shut down: the correlator, the receiver and the
/// final status.
fn ten_events_into_four_places(
    policy: Overflow,
) -> (
    Correlator<Ev>,
    correlator::OutputReceiver<Ev>,
    correlator::Status,
) {
    let c = correlator(64);
    let out = c.channel("out").unwrap();
    let rx = c
        .output_with(out, OutputOptions::bounded(4).policy(policy))
        .unwrap();
    emitter(&c, out);
    let input = c.input();
    for i in 0..10 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    c.start();
    let status = c.shutdown().unwrap();
    (c, rx, status)
}

// R4.2, R9.1: an input handle's channel send into a full `DropNewest` output counts the drop in
// the totals (no context caused it) and reports the copy as not received.
#[test]
fn r4_2_input_handle_send_counts_output_drops_in_totals() {
    let c = correlator(64);
    let out = c.channel("out").unwrap();
    let rx = c
        .output_with(out, OutputOptions::bounded(2).policy(Overflow::DropNewest))
        .unwrap();
    let input = c.input();
    c.start();
    let reached: Vec<usize> = (0..5).map(|i| input.send(out, ev(1, i)).unwrap()).collect();
    assert_eq!(reached, [1, 1, 0, 0, 0]);
    let status = c.shutdown().unwrap();
    assert_eq!(status.totals.output_drops, 3);
    assert_eq!(
        status.totals.dropped, 3,
        "a send nobody received counts (R4.5)"
    );
    assert_eq!(vals(rx.iter()), [0, 1]);
}

// R4.2, R5.3: a non-blocking channel send never waits for a full `Block` output: it is refused
// with `Full`, the event comes back, and no subscriber got a copy.
#[test]
fn r5_3_try_send_refuses_when_a_block_output_is_full() {
    let c = correlator(64);
    let out = c.channel("out").unwrap();
    let rx = c.output_with(out, OutputOptions::bounded(1)).unwrap();
    let input = c.input();
    c.start();
    assert_eq!(input.try_send(out, ev(1, 0)).unwrap(), 1);
    let err = input.try_send(out, ev(1, 1)).unwrap_err();
    assert_eq!(err.kind(), correlator::SendErrorKind::Full);
    assert_eq!(err.into_inner().val, 1);
    let err = input
        .send_timeout(out, ev(1, 2), Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(err.kind(), correlator::SendErrorKind::Timeout);
    assert_eq!(rx.recv().unwrap().val, 0);
    assert_eq!(input.try_send(out, ev(1, 3)).unwrap(), 1);
    c.shutdown().unwrap();
    assert_eq!(vals(rx.iter()), [3]);
}

/// A value that is not an event: what typed outputs carry.
#[derive(Debug, PartialEq, Eq)]
struct Alert {
    sensor: u64,
    text: String,
}

struct Alerter {
    out: Output<Alert>,
}

impl Monitor<Ev> for Alerter {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Alerter, cx: &mut Scope<'_, Ev, Alerter>, e: &Ev| {
                let queued = cx.emit_to(
                    &m.out,
                    Alert {
                        sensor: e.val,
                        text: format!("hot {}", e.val),
                    },
                );
                assert!(queued);
            },
        );
    }

    fn on_die(&mut self, _: &correlator::DieReason, cx: &mut Scope<'_, Ev, Self>) {
        let _queued = cx.emit_to(
            &self.out,
            Alert {
                sensor: u64::MAX,
                text: "bye".into(),
            },
        );
    }
}

// R4.3: a typed output carries a type that is not the event type, in emission order; what an
// `on_die` hook emits during shutdown arrives before the stream ends (R8.1).
#[test]
fn r4_3_typed_output_carries_a_non_event_type() {
    let c = correlator(64);
    let (out, rx) = c.typed_output::<Alert>(OutputOptions::default()).unwrap();
    assert_eq!(rx.capacity(), DEFAULT_OUTPUT_CAPACITY);
    c.load(Alerter { out }).unwrap();
    let input = c.input();
    c.start();
    for i in 0..3 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        Alert {
            sensor: 0,
            text: "hot 0".into()
        }
    );
    c.shutdown().unwrap();
    let rest: Vec<u64> = rx.iter().map(|a| a.sensor).collect();
    assert_eq!(rest, [1, 2, u64::MAX]);
}

// R8.1: an output nobody reads until shutdown returns cannot hang the shutdown, even with the
// `Block` policy and a context waiting on it: from the start of shutdown a full output takes
// events beyond its bound, so everything accepted is delivered, in order.
#[test]
fn r8_1_shutdown_with_a_full_unread_block_output_delivers_everything() {
    let (got, status) = bounded(|| {
        let c = correlator(256);
        let out = c.channel("out").unwrap();
        let rx = c.output_with(out, OutputOptions::bounded(4)).unwrap();
        emitter(&c, out);
        let input = c.input();
        c.start();
        for i in 0..200 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        let status = c.shutdown().unwrap();
        (vals(rx.iter()), status)
    });
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    assert_eq!(status.totals.processed, 200);
    assert_eq!(status.totals.output_drops, 0);
}

// R8.1: dropping the receiver of a full `Block` output releases the context waiting on it; the
// rest of what it emits there is discarded, and the correlator carries on.
#[test]
fn r8_1_dropping_the_receiver_releases_a_blocked_context() {
    bounded(|| {
        let c = correlator(256);
        let out = c.channel("out").unwrap();
        let rx = c.output_with(out, OutputOptions::bounded(2)).unwrap();
        emitter(&c, out);
        let input = c.input();
        c.start();
        for i in 0..50 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        assert!(eventually(|| rx.len() == 2));
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            c.status().totals.processed < 50,
            "the context waits for room"
        );
        drop(rx);
        assert!(
            eventually(|| c.status().totals.processed == 50),
            "the context was released"
        );
        c.shutdown().unwrap();
    });
}

// R4.3, R9.1 (nothing discarded without a count): what a handler emits to a typed output after
// its receiver was dropped is discarded, and every such value is counted: `emit_to` says `false`,
// and `Output::dropped`, the context's `output_drops` and the totals count each one.
#[test]
fn r9_1_emits_after_the_receiver_was_dropped_are_counted() {
    let c = correlator(64);
    let (out, rx) = c.typed_output::<u64>(OutputOptions::bounded(2)).unwrap();
    let handle = out.clone();
    let log = Log::default();
    c.load(Script::new("emit", &log, move |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            move |s: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                let queued = cx.emit_to(&out, e.val);
                s.log.push(format!("{queued}"));
            },
        );
    }))
    .unwrap();
    drop(rx);
    let input = c.input();
    c.start();
    for i in 0..5 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    let status = c.shutdown().unwrap();
    assert_eq!(log.count("false"), 5, "{:?}", log.snapshot());
    assert_eq!(
        handle.dropped(),
        5,
        "the output counts each discarded value"
    );
    assert_eq!(status.context(c.main()).unwrap().output_drops, 5);
    assert_eq!(status.totals.output_drops, 5);
}

// R4.3, R9.1: a context blocked on a full typed `Block` output whose receiver is then dropped is
// released; the value it waited with and everything it emits there afterwards is counted.
#[test]
fn r9_1_a_blocked_emit_released_by_a_dropped_receiver_is_counted() {
    let status = bounded(|| {
        let c = correlator(64);
        let (out, rx) = c.typed_output::<u64>(OutputOptions::bounded(2)).unwrap();
        let handle = out.clone();
        let log = Log::default();
        c.load(Script::new("emit", &log, move |_, cx| {
            cx.on_all(
                Pattern::kind(1),
                move |_: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                    let _queued = cx.emit_to(&out, e.val);
                },
            );
        }))
        .unwrap();
        let input = c.input();
        c.start();
        for i in 0..10 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        assert!(eventually(|| rx.len() == 2));
        drop(rx);
        let status = c.shutdown().unwrap();
        assert_eq!(handle.dropped(), 8, "two queued, eight discarded");
        status
    });
    assert_eq!(status.totals.output_drops, 8);
}

// R8.1: a receiver waiting in `recv` ends when the correlator shuts down; receivers made after
// shutdown (channel and typed) have ended at once.
#[test]
fn r8_1_receivers_end_at_shutdown_including_ones_taken_after() {
    let c = correlator(16);
    let out = c.channel("out").unwrap();
    let rx = c.output(out);
    let (_typed, typed_rx) = c.typed_output::<String>(OutputOptions::bounded(4)).unwrap();
    c.start();
    let waiting = std::thread::spawn(move || (rx.recv(), typed_rx.recv()));
    std::thread::sleep(Duration::from_millis(20));
    c.shutdown().unwrap();
    let (a, b) = waiting.join().unwrap();
    assert!(a.is_err() && b.is_err());
    let late = c.output(out);
    assert_eq!(late.try_recv().unwrap_err(), TryRecvError::Disconnected);
    assert!(late.recv().is_err());
    assert_eq!(
        late.recv_timeout(Duration::from_secs(5)).unwrap_err(),
        RecvTimeoutError::Disconnected
    );
    let (late_out, late_typed) = c.typed_output::<u8>(OutputOptions::bounded(4)).unwrap();
    assert!(late_out.is_disconnected());
    assert!(late_typed.recv().is_err());
    assert_eq!(late_typed.iter().count(), 0);
}

// R8.2: an output bound outside 1..=MAX is a typed error, never a panic.
#[test]
fn r8_2_invalid_output_bound_is_a_typed_error() {
    let c = correlator(16);
    let out = c.channel("out").unwrap();
    for bad in [0, correlator::MAX_OUTPUT_CAPACITY + 1] {
        let err = c.output_with(out, OutputOptions::bounded(bad)).unwrap_err();
        assert!(matches!(
            err,
            correlator::Error::InvalidOutputCapacity { requested, .. } if requested == bad
        ));
        assert!(c.typed_output::<u8>(OutputOptions::bounded(bad)).is_err());
    }
}

// R4.3: a receiver's timed wait times out while the correlator runs, and its blocking wait is
// woken by an emit from a context thread (the sleep/wake protocol, under real threads).
#[test]
fn r4_3_recv_sleeps_and_is_woken_by_an_emit() {
    let c = correlator(64);
    let out = c.channel("out").unwrap();
    let rx = c.output(out);
    emitter(&c, out);
    let input = c.input();
    c.start();
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(10)).unwrap_err(),
        RecvTimeoutError::Timeout
    );
    let reader = std::thread::spawn(move || vals((0..1000).map(|_| rx.recv().unwrap())));
    for i in 0..1000 {
        if i % 100 == 0 {
            // Let the reader park now and then.
            std::thread::sleep(Duration::from_millis(2));
        }
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    assert_eq!(reader.join().unwrap(), (0..1000).collect::<Vec<_>>());
    c.shutdown().unwrap();
}

#[cfg(feature = "async")]
mod asynchronous {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    /// The smallest executor: polls one future on this thread, parking between polls.
    fn block_on<F: Future>(f: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut f = pin!(f);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }

    /// The next item of a stream, as a future.
    fn next<S: futures_core::Stream + Unpin>(
        s: &mut S,
    ) -> impl Future<Output = Option<S::Item>> + '_ {
        std::future::poll_fn(move |cx| std::pin::Pin::new(&mut *s).poll_next(cx))
    }

    // R4.3: `recv_async` waits without blocking a thread of the executor and is woken by emits
    // from a context thread; it ends at shutdown (R8.1).
    #[test]
    fn r4_3_recv_async_is_woken_by_emits_and_ends_at_shutdown() {
        let c = Arc::new(correlator(64));
        let out = c.channel("out").unwrap();
        let mut rx = c.output(out);
        emitter(&c, out);
        c.start();
        let feeder = {
            let c = c.clone();
            std::thread::spawn(move || {
                let input = c.input();
                for i in 0..500 {
                    if i % 50 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    input.send_to(c.main(), ev(1, i)).unwrap();
                }
            })
        };
        let got = block_on(async {
            let mut got = Vec::new();
            for _ in 0..500 {
                got.push(rx.recv_async().await.unwrap().val);
            }
            got
        });
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        feeder.join().unwrap();
        let closer = {
            let c = c.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                c.shutdown().unwrap();
            })
        };
        assert_eq!(block_on(rx.recv_async()), Err(correlator::RecvError));
        closer.join().unwrap();
    }

    // R4.3: the future of `recv_async` is `Send` (with a `Send` event type), so a task that
    // awaits it can move between an executor's threads (`tokio::spawn`). A compile-time check: the
    // test fails by not compiling.
    #[test]
    fn r4_3_recv_async_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let c = correlator(64);
        let mut rx = c.output(c.channel("out").unwrap());
        let fut = rx.recv_async();
        assert_send(&fut);
        drop(fut);
        c.shutdown().unwrap();
    }

    // R4.3, R8.1: the receiver is a `Stream` of the output's events that ends at shutdown; a
    // typed output works the same way.
    #[test]
    fn r4_3_receiver_is_a_stream_that_ends_at_shutdown() {
        let c = Arc::new(correlator(64));
        let (out, mut rx) = c.typed_output::<Alert>(OutputOptions::bounded(4)).unwrap();
        c.load(Alerter { out }).unwrap();
        let input = c.input();
        c.start();
        for i in 0..20 {
            input.send_to(c.main(), ev(1, i)).unwrap();
        }
        let closer = {
            let c = c.clone();
            std::thread::spawn(move || c.shutdown().unwrap())
        };
        let got = block_on(async {
            let mut got = Vec::new();
            while let Some(a) = next(&mut rx).await {
                got.push(a.sensor);
            }
            got
        });
        closer.join().unwrap();
        let mut want: Vec<u64> = (0..20).collect();
        want.push(u64::MAX);
        assert_eq!(got, want);
    }
}
