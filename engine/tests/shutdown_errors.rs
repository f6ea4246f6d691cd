//! SPEC §8: shutdown and errors.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use correlator::{ContextOptions, Correlator, Error, Pattern, SendErrorKind};

// R8.1: graceful shutdown processes everything accepted: routes, inboxes, and cross-context sends
// still in flight (a relay chain main -> b -> c that is mid-way when shutdown is called).
#[test]
fn r8_1_shutdown_processes_everything_accepted() {
    const N: u64 = 2_000;
    let c = correlator(8);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let d = c.create_context(ContextOptions::new("d")).unwrap();
    let log = Log::default();
    let arrived = Arc::new(AtomicU64::new(0));
    let arrived2 = arrived.clone();
    let next = [(c.main(), Some(b)), (b, Some(d)), (d, None)];
    for (ctx, to) in next {
        let arrived = arrived2.clone();
        c.load_in(
            ctx,
            Script::new("relay", &log, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, e: &Ev| {
                    // Each hop also routes a little work of its own.
                    cx.route(ev(2, e.val));
                    match to {
                        Some(to) => cx.send_to(to, e.clone()).unwrap(),
                        None => {
                            arrived.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
                cx.on_all(Pattern::kind(2), |m: &mut Script, _, _| m.count += 1);
            }),
        )
        .unwrap();
    }
    let input = c.input();
    c.start();
    for i in 0..N {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    let s = c.shutdown().unwrap();
    assert_eq!(
        arrived.load(Ordering::Relaxed),
        N,
        "nothing accepted is lost"
    );
    assert_eq!(s.totals.inbox_len, 0);
    assert!(s.contexts.iter().all(|c| c.stopped));
    assert_eq!(log.count("relay die shutdown"), 3);
    // After shutdown every send is a typed error that hands the event back.
    let err = input.send_to(c.main(), ev(1, 7)).unwrap_err();
    assert_eq!(err.into_inner().val, 7);
}

// R8.1: input queued before start is processed when shutdown is called without start.
#[test]
fn r8_1_shutdown_without_start_processes_queued_input() {
    let c = correlator(8);
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    let log = Log::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.on_all(Pattern::kind(1), move |_, _, _| {
            n2.fetch_add(1, Ordering::Relaxed);
        });
    }))
    .unwrap();
    let input = c.input();
    for i in 0..5 {
        input.send_to(c.main(), ev(1, i)).unwrap();
    }
    c.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 5);
}

// R8.1: dropping a correlator shuts it down gracefully.
#[test]
fn r8_1_drop_is_a_graceful_shutdown() {
    let n = Arc::new(AtomicU64::new(0));
    {
        let c = correlator(8);
        let n2 = n.clone();
        let log = Log::default();
        c.load(Script::new("m", &log, move |_, cx| {
            cx.on_all(Pattern::kind(1), move |_, _, _| {
                n2.fetch_add(1, Ordering::Relaxed);
            });
        }))
        .unwrap();
        c.start();
        for i in 0..5 {
            c.input().send_to(c.main(), ev(1, i)).unwrap();
        }
    }
    assert_eq!(n.load(Ordering::Relaxed), 5);
}

// R8.2: every configuration error is typed, with a message that says what to change.
#[test]
fn r8_2_configuration_errors_are_typed() {
    let e = Correlator::<Ev>::builder()
        .inbox_capacity(0)
        .build()
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidCapacity { requested: 0, .. }));
    assert!(e.to_string().contains("between 1 and"));
    let e = Correlator::<Ev>::builder()
        .max_contexts(0)
        .build()
        .err()
        .unwrap();
    assert!(matches!(
        e,
        Error::InvalidLimit {
            setting: "max_contexts"
        }
    ));
    let e = Correlator::<Ev>::builder()
        .release_batch(0)
        .build()
        .err()
        .unwrap();
    assert!(matches!(
        e,
        Error::InvalidLimit {
            setting: "release_batch"
        }
    ));
    assert!(e.to_string().contains("release_batch"));
    let c = Correlator::<Ev>::builder().max_contexts(2).build().unwrap();
    c.create_context(ContextOptions::new("one")).unwrap();
    let e = c.create_context(ContextOptions::new("two")).unwrap_err();
    assert_eq!(e, Error::TooManyContexts { max: 2 });
    assert!(e.to_string().contains("max_contexts"));
    let c = Correlator::<Ev>::builder().max_channels(2).build().unwrap();
    c.channel("a").unwrap();
    let e = c.channel("b").unwrap_err();
    assert_eq!(e, Error::TooManyChannels { max: 2 });
}

// R8.2: a blocking send into a full inbox of a correlator that was never started would wait forever:
// it is a typed error instead, and the event comes back; loading likewise.
#[test]
fn r8_2_full_before_start_is_an_error() {
    let c = correlator(2);
    let input = c.input();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    input.send_to(c.main(), ev(1, 2)).unwrap();
    let err = input.send_to(c.main(), ev(1, 3)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::FullBeforeStart);
    assert!(err.to_string().contains("start()"));
    assert_eq!(err.into_inner().val, 3);
    let log = Log::default();
    let e = c
        .load(Script::new("m", &log, |_, cx| {
            cx.on(Pattern::kind(1), |_, _, _| {});
        }))
        .unwrap_err();
    assert_eq!(e, Error::FullBeforeStart(c.main()));
}

// R8.2: operations after shutdown are typed errors, not panics.
#[test]
fn r8_2_operations_after_shutdown() {
    let c = correlator(2);
    c.start();
    c.shutdown().unwrap();
    let log = Log::default();
    assert_eq!(
        c.load(Script::new("m", &log, |_, _| {})).unwrap_err(),
        Error::ShutDown
    );
    assert_eq!(
        c.create_context(ContextOptions::new("late")).unwrap_err(),
        Error::ShutDown
    );
    // A second shutdown is harmless.
    assert!(c.shutdown().unwrap().shut_down);
}

// R8.2: a context reference of another correlator is refused with a typed error.
#[test]
fn r8_2_unknown_context() {
    let c1 = correlator(2);
    let c2 = correlator(2);
    let foreign = c2.create_context(ContextOptions::new("x")).unwrap();
    let err = c1.input().send_to(foreign, ev(1, 1)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownContext);
    let log = Log::default();
    assert_eq!(
        c1.load_in(foreign, Script::new("m", &log, |_, _| {}))
            .unwrap_err(),
        Error::UnknownContext(foreign)
    );
}

/// An event whose `kind()` (user code the engine calls outside any handler) panics when asked to.
#[derive(Clone, Debug)]
struct Fragile {
    poison: bool,
}

impl correlator::Event for Fragile {
    type Kind = u8;
    fn kind(&self) -> u8 {
        assert!(!self.poison, "a poisoned event's kind");
        0
    }
}

struct Quiet;

impl correlator::Monitor<Fragile> for Quiet {
    fn on_load(&mut self, cx: &mut correlator::Scope<'_, Fragile, Self>) {
        cx.on_all(Pattern::kind(0), |_, _, _| {});
    }
}

// R8.2, R6.8 when user code outside a handler panics on a context's thread (here the event's
// `kind()`): the context no longer stops (SPEC Decisions: no user code ends a context). The event is
// dropped and counted, later sends are taken and processed, and shutdown is clean and does not
// wait. (A context whose thread dies anyway still makes later sends `ContextStopped` and
// shutdown `Error::ContextStopped`: see `ExitGuard`.)
#[test]
fn r8_2_user_code_panicking_outside_a_handler_does_not_stop_the_context() {
    let c = Correlator::<Fragile>::builder()
        .inbox_capacity(4)
        .external_time()
        .build()
        .unwrap();
    c.load(Quiet).unwrap();
    c.start();
    let input = c.input();
    input.send_to(c.main(), Fragile { poison: false }).unwrap();
    input.send_to(c.main(), Fragile { poison: true }).unwrap();
    for _ in 0..8 {
        input.send_to(c.main(), Fragile { poison: false }).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(c.shutdown());
    });
    let status = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("shutdown hung")
        .expect("a clean shutdown");
    let main = &status.contexts[0];
    assert_eq!(
        main.processed, 10,
        "every event was taken, the poisoned one included"
    );
    assert_eq!(
        status.totals.events_dropped_by_panic, 1,
        "the poisoned event"
    );
    assert_eq!(status.totals.handler_panics, 0, "no monitor code panicked");
    assert_eq!(main.received, 11, "the load entry and ten events");
}

/// `shutdown_async` through a shared reference, called where it must refuse (`async` feature).
#[cfg(feature = "async")]
mod shutdown_async_from_a_handler {
    use std::future::Future;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc, OnceLock, Weak};
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::common::*;
    use correlator::{Correlator, Error, Pattern};

    // R8.1, R8.2 (Decisions, "Shutdown"): `shutdown_async` takes `&self`, so a handler that holds
    // an `Arc<Correlator>` can call it; on a context's own thread the future is ready at its first
    // poll with `Error::ShutdownFromContext` (it would wait for the very handler that polls it),
    // and nothing changes: an event sent afterwards is processed, and a shutdown from the test's
    // own thread then ends the correlator cleanly.
    #[test]
    fn r8_2_shutdown_async_from_a_handler_is_a_typed_error() {
        let (from_handler, later, main, handled) = bounded(|| {
            let c = Arc::new(correlator(16));
            let me: Arc<OnceLock<Weak<Correlator<Ev>>>> = Arc::new(OnceLock::new());
            let _ = me.set(Arc::downgrade(&c));
            let (tx, rx) = mpsc::channel();
            let handled = Arc::new(AtomicU64::new(0));
            let count = handled.clone();
            let log = Log::default();
            c.load(Script::new("m", &log, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, _, _| {
                    count.fetch_add(1, Ordering::SeqCst);
                    if let Some(c) = me.get().and_then(Weak::upgrade) {
                        let mut shutdown = std::pin::pin!(c.shutdown_async());
                        let polled = shutdown
                            .as_mut()
                            .poll(&mut Context::from_waker(Waker::noop()));
                        let _ = tx.send(polled.map(|r| r.map(|_| ())));
                    }
                });
            }))
            .unwrap();
            c.start();
            c.input().send_to(c.main(), ev(1, 0)).unwrap();
            let from_handler = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("the handler's shutdown_async was polled");
            c.input().send_to(c.main(), ev(1, 1)).unwrap();
            let later = c.shutdown().map(|s| s.shut_down);
            (
                from_handler,
                later,
                c.main(),
                handled.load(Ordering::SeqCst),
            )
        });
        assert_eq!(
            from_handler,
            Poll::Ready(Err(Error::ShutdownFromContext(main))),
            "R8.2: refused at the first poll"
        );
        assert_eq!(later, Ok(true));
        assert_eq!(handled, 2, "the correlator carried on after the refusal");
    }
}
