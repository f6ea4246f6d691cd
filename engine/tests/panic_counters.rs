//! The status counters that tell handler panics from events dropped by a panic (R6.8,
//! R9.1), and a context whose thread dies anyway (R8.2).
//!
//! The R8.2 test installs a process-wide `tracing` subscriber that panics on one marked message, so
//! this file holds only scenarios that log nothing else it could disturb.

mod common;
use common::bounded;

use correlator::{Correlator, Event, Monitor, Pattern, Scope, SendErrorKind};

/// An event whose `kind()` panics when `poison` says so: the event type's own code.
#[derive(Clone, Debug)]
struct Fragile {
    poison: Option<&'static str>,
    handler_panics: bool,
}

impl Event for Fragile {
    type Kind = ();
    fn kind(&self) {
        if let Some(message) = self.poison {
            panic!("{message}");
        }
    }
}

fn ok() -> Fragile {
    Fragile {
        poison: None,
        handler_panics: false,
    }
}

/// Listens to every event; its handler panics on an event that asks it to (monitor code).
struct Listen;

impl Monitor<Fragile> for Listen {
    fn on_load(&mut self, cx: &mut Scope<'_, Fragile, Self>) {
        cx.on_all(
            Pattern::kind(()),
            |_: &mut Listen, _: &mut Scope<'_, Fragile, Listen>, e: &Fragile| {
                assert!(!e.handler_panics, "a handler panics");
            },
        );
    }
}

// R6.8, R9.1: a panic of the event type's own code (here `kind()`) drops that event and counts in
// `events_dropped_by_panic`; a panic of monitor code (a handler) ends its instance and counts in
// `handler_panics`. A user reading the status tells the two apart.
#[test]
fn r6_8_event_panics_and_handler_panics_count_apart() {
    let status = bounded(|| {
        let c = Correlator::<Fragile>::builder()
            .external_time()
            .build()
            .unwrap();
        // Two instances: both see (and panic on) the event that makes handlers panic.
        c.load(Listen).unwrap();
        c.load(Listen).unwrap();
        c.start();
        let input = c.input();
        input.send_to(c.main(), ok()).unwrap();
        for _ in 0..2 {
            let e = Fragile {
                poison: Some("kind() fails"),
                handler_panics: false,
            };
            input.send_to(c.main(), e).unwrap();
        }
        let e = Fragile {
            poison: None,
            handler_panics: true,
        };
        input.send_to(c.main(), e).unwrap();
        input.send_to(c.main(), ok()).unwrap();
        c.shutdown().expect("a clean shutdown")
    });
    let t = &status.totals;
    assert_eq!(t.events_dropped_by_panic, 2, "two events' kind() panicked");
    assert_eq!(t.handler_panics, 2, "each instance's handler panicked once");
    let main = &status.contexts[0];
    assert_eq!(main.events_dropped_by_panic, 2);
    assert_eq!(main.handler_panics, 2);
}

/// A `tracing` subscriber that panics when it is handed an event whose fields mention `MARK`: user
/// code (the application's subscriber) that the context runs outside any `catch_unwind` while it
/// reports a contained panic, so a panic there still ends the context's thread.
struct PanicOnMark;

const MARK: &str = "the subscriber panics on this";

struct Finds(bool);

impl tracing::field::Visit for Finds {
    fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0 |= format!("{value:?}").contains(MARK);
    }
}

impl tracing::Subscriber for PanicOnMark {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut finds = Finds(false);
        event.record(&mut finds);
        if finds.0 {
            panic!("the subscriber panicked");
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

// R8.2: a context whose thread dies anyway (no user code *should* end a context, but a panicking
// `tracing` subscriber, called while the context reports a contained panic, still does) makes
// every later send to it return `ContextStopped` (not wait for room nobody will make), and
// shutdown report `Error::ContextStopped` instead of waiting for it.
#[test]
fn r8_2_sends_to_a_context_whose_thread_died_are_context_stopped() {
    tracing::subscriber::set_global_default(PanicOnMark).expect("the only subscriber");
    let (sent, shutdown) = bounded(|| {
        let c = Correlator::<Fragile>::builder()
            .inbox_capacity(4)
            .external_time()
            .build()
            .unwrap();
        c.load(Listen).unwrap();
        c.start();
        let input = c.input();
        let e = Fragile {
            poison: Some(MARK),
            handler_panics: false,
        };
        input.send_to(c.main(), e).unwrap();
        // More than the inbox holds: once the thread is gone, nothing makes room.
        let mut sent = Vec::new();
        for _ in 0..16 {
            sent.push(input.send_to(c.main(), ok()).map_err(|e| e.kind()));
        }
        (sent, c.shutdown())
    });
    let refused = sent
        .iter()
        .position(|r| r.is_err())
        .expect("sends after the thread died are refused");
    assert!(
        sent[refused..]
            .iter()
            .all(|r| *r == Err(SendErrorKind::ContextStopped)),
        "every send after the first refusal is ContextStopped: {sent:?}"
    );
    assert!(
        matches!(shutdown, Err(correlator::Error::ContextStopped(_))),
        "{shutdown:?}"
    );
}
