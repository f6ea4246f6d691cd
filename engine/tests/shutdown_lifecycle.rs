//! Shutdown, lifecycle and delivery: concurrent shutdowns, what `on_die` may do at
//! shutdown, shutdown and blocking input sends from inside a handler, outputs taken after shutdown,
//! and channel sends that are refused (SPEC R4.2, R5.1–R5.3, R6.8, R8.1, R8.2).
//!
//! Every scenario that used to hang runs in a helper thread whose result the test waits for with a
//! generous bound ([`within`]): a regression fails the test instead of hanging the suite.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use common::*;
use correlator::{
    Channel, ContextOptions, Correlator, DieReason, Error, Event, ListenerHandle, Monitor, Pattern,
    Scope, SendErrorKind,
};

/// The bound on every scenario: far above what any of them takes on a loaded machine.
const BOUND: Duration = Duration::from_secs(30);

/// Runs `f` on a helper thread and returns its result; fails the test if it takes longer than
/// [`BOUND`] (the helper thread is left behind: the test binary ends without it), and passes a
/// panic of `f` on.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(BOUND) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the scenario did not end within {BOUND:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the scenario ended without a result"),
        },
    }
}

// R4.2: an output receiver taken after shutdown has nothing to wait for: its
// stream ends at once.
#[test]
fn r4_2_output_taken_after_shutdown_ends_at_once() {
    let c = correlator(16);
    let ch = c.channel("late").unwrap();
    c.shutdown().unwrap();
    let rx = c.output(ch);
    let got = within(move || rx.recv());
    assert!(got.is_err(), "the stream of a late receiver ends");
}

/// An event that owns a token, so that a test can count the copies that are still alive.
#[derive(Clone, Debug)]
struct Tokened {
    token: Arc<()>,
}

impl Event for Tokened {
    type Kind = u32;
    fn kind(&self) -> u32 {
        1
    }
}

// R5.3: a `try_send` to a channel that is refused hands the event back and
// keeps no copy of it anywhere: once the caller drops what came back, the event is gone.
#[test]
fn r5_3_refused_try_send_keeps_no_copy_of_the_event() {
    let c = Correlator::<Tokened>::builder()
        .inbox_capacity(1)
        .external_time()
        .build()
        .unwrap();
    // Two public contexts: a channel send makes one copy besides the original.
    c.create_context(ContextOptions::new("b").public(true))
        .unwrap();
    let input = c.input();
    // Before start nothing is taken: the first send fills both inboxes.
    let first = Arc::new(());
    assert_eq!(
        input
            .try_send(
                Channel::DEFAULT,
                Tokened {
                    token: first.clone()
                }
            )
            .unwrap(),
        2
    );
    let second = Arc::new(());
    let err = input
        .try_send(
            Channel::DEFAULT,
            Tokened {
                token: second.clone(),
            },
        )
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert!(
        Arc::ptr_eq(&err.event().token, &second),
        "the refused event comes back"
    );
    drop(err);
    assert_eq!(
        Arc::strong_count(&second),
        1,
        "the refused event left a copy behind"
    );
    c.shutdown().unwrap();
}

// R8.2: a blocking channel send before `start()` that finds a subscriber's
// inbox full is refused with `FullBeforeStart` and hands the event back, like `send_to`; it does
// not drop it. A channel send is all-or-nothing then: no subscriber got a copy of a refused event.
#[test]
fn r8_2_blocking_channel_send_before_start_hands_back_what_it_cannot_deliver() {
    const CAPACITY: usize = 3;
    let c = correlator(CAPACITY);
    let b = c
        .create_context(ContextOptions::new("b").public(true))
        .unwrap();
    let seen = Log::default();
    for ctx in [c.main(), b] {
        let seen = seen.clone();
        c.load_in(
            ctx,
            Script::new("count", &seen.clone(), move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, e: &Ev| {
                    seen.push(format!("{} {}", cx.context().id(), e.val));
                });
            }),
        )
        .unwrap();
    }
    let input = c.input();
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for i in 0..10 {
        match input.send(Channel::DEFAULT, ev(1, i)) {
            Ok(n) => {
                assert_eq!(n, 2, "both public contexts got a copy");
                accepted.push(i);
            }
            Err(e) => {
                assert_eq!(e.kind(), SendErrorKind::FullBeforeStart);
                refused.push(e.into_inner().val);
            }
        }
    }
    // Each inbox holds the monitor's load entry and two events.
    assert_eq!(accepted, vec![0, 1]);
    assert_eq!(
        refused,
        (2..10).collect::<Vec<_>>(),
        "every refusal hands the event back"
    );
    c.shutdown().unwrap();
    let mut got = seen.take_work();
    got.sort();
    assert_eq!(
        got,
        vec!["0 0", "0 1", "1 0", "1 1"],
        "everything accepted is processed"
    );
}

/// A gate one thread waits at (bounded) until another opens it.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    /// Waits until the gate is open, at most [`BOUND`]; returns whether it opened.
    fn wait(&self) -> bool {
        let (lock, cv) = &*self.0;
        let g = lock.lock().unwrap();
        let (g, _) = cv.wait_timeout_while(g, BOUND, |open| !*open).unwrap();
        *g
    }
}

type HookCx<'a> = Scope<'a, Ev, Hook>;
type HookLoad = Box<dyn FnOnce(&mut HookCx<'_>) + Send>;
type HookDie = Arc<dyn Fn(&Hook, &mut HookCx<'_>, &DieReason) + Send + Sync>;

/// A monitor whose load hook and `on_die` hook are closures (a spawned copy shares the `on_die`).
struct Hook {
    load: Option<HookLoad>,
    die: HookDie,
}

impl Hook {
    fn new(
        load: impl FnOnce(&mut HookCx<'_>) + Send + 'static,
        die: impl Fn(&Hook, &mut HookCx<'_>, &DieReason) + Send + Sync + 'static,
    ) -> Self {
        Self {
            load: Some(Box::new(load)),
            die: Arc::new(die),
        }
    }
}

impl Clone for Hook {
    fn clone(&self) -> Self {
        Self {
            load: None,
            die: self.die.clone(),
        }
    }
}

impl Monitor<Ev> for Hook {
    fn on_load(&mut self, cx: &mut HookCx<'_>) {
        if let Some(f) = self.load.take() {
            f(cx);
        }
    }

    fn on_die(&mut self, reason: &DieReason, cx: &mut HookCx<'_>) {
        (self.die.clone())(self, cx, reason);
    }
}

/// Keeps an instance alive: a listener for a kind nobody sends.
fn keep_alive(cx: &mut HookCx<'_>) {
    cx.on_all(Pattern::kind(99), |_, _, _| {});
}

// R8.1: two `shutdown()` calls at once wait for one shutdown and both report
// it: every context stopped, and what `on_die(Shutdown)` emitted reached the output, which ends
// only after that. The `on_die` hook holds the first shutdown inside its final phase until the
// second call has returned or has waited a while.
#[test]
fn r8_1_concurrent_shutdowns_wait_for_one_shutdown_and_report_it() {
    const EMITS: u64 = 50;
    let (statuses, received) = within(|| {
        let c = Arc::new(correlator(16));
        let out = c.channel("out").unwrap();
        let rx = c.output(out);
        let entered = Gate::default();
        let release = Gate::default();
        let (e2, r2) = (entered.clone(), release.clone());
        c.load(Hook::new(keep_alive, move |_, cx, reason| {
            if *reason == DieReason::Shutdown {
                e2.open();
                r2.wait();
                for i in 0..EMITS {
                    cx.emit(out, ev(5, i));
                }
            }
        }))
        .unwrap();
        c.start();
        let c1 = c.clone();
        let first = std::thread::spawn(move || c1.shutdown());
        assert!(entered.wait(), "on_die(Shutdown) never ran");
        let (tx, second) = mpsc::channel();
        let c2 = c.clone();
        std::thread::spawn(move || {
            let _ = tx.send(c2.shutdown());
        });
        // A correct second call waits for the first; give a wrong one time to return early.
        let early = second.recv_timeout(Duration::from_secs(1)).ok();
        release.open();
        let first = first.join().unwrap();
        let second = match early {
            Some(s) => s,
            None => second
                .recv_timeout(BOUND)
                .expect("the second shutdown never returned"),
        };
        let received: Vec<u64> = rx.iter().map(|e| e.val).collect();
        (vec![first, second], received)
    });
    for s in statuses {
        let s = s.expect("shutdown succeeds");
        assert!(s.shut_down);
        assert!(
            s.contexts.iter().all(|c| c.stopped),
            "a shutdown call returned before every context stopped: {s:?}"
        );
    }
    assert_eq!(
        received,
        (0..EMITS).collect::<Vec<_>>(),
        "what on_die(Shutdown) emitted is delivered"
    );
}

// R6.8, R8.1: once shutdown ends the instances, an `on_die(Shutdown)` can no
// longer create a context (`Error::ShutDown`) nor spawn into a stopping one
// (`Error::ContextStopped`); a refused spawn runs no initialiser, so no `on_die` is owed, and
// shutdown leaves no context running.
#[test]
fn r6_8_on_die_at_shutdown_cannot_create_contexts_or_spawn_into_stopping_ones() {
    let (created, spawned_there, spawned_to_b, inits, status) = within(|| {
        let c = correlator(16);
        let b = c.create_context(ContextOptions::new("b")).unwrap();
        let results = Arc::new(Mutex::new(Vec::new()));
        let inits = Arc::new(AtomicU64::new(0));
        let (r2, i2) = (results.clone(), inits.clone());
        c.load(Hook::new(keep_alive, move |_, cx, reason| {
            if *reason != DieReason::Shutdown {
                return;
            }
            let mut results = r2.lock().unwrap();
            let created = cx.create_context(ContextOptions::new("late"));
            results.push(created.clone().map(|_| ()));
            if let Ok(late) = created {
                let i3 = i2.clone();
                let state = Hook::new(|_| {}, |_, _, _| {});
                results.push(cx.spawn_to(late, &state, move |_, cx| {
                    i3.fetch_add(1, Ordering::Relaxed);
                    keep_alive(cx);
                }));
            } else {
                results.push(Err(Error::ShutDown));
            }
            let i3 = i2.clone();
            let state = Hook::new(|_| {}, |_, _, _| {});
            results.push(cx.spawn_to(b, &state, move |_, cx| {
                i3.fetch_add(1, Ordering::Relaxed);
                keep_alive(cx);
            }));
        }))
        .unwrap();
        c.start();
        let status = c.shutdown().unwrap();
        let results = results.lock().unwrap().clone();
        (
            results[0].clone(),
            results[1].clone(),
            results[2].clone(),
            inits.load(Ordering::Relaxed),
            status,
        )
    });
    assert_eq!(
        created,
        Err(Error::ShutDown),
        "no context is created at shutdown"
    );
    assert!(spawned_there.is_err());
    assert!(
        matches!(spawned_to_b, Err(Error::ContextStopped(_))),
        "a spawn into a stopping context is refused: {spawned_to_b:?}"
    );
    assert_eq!(inits, 0, "a refused spawn runs no initialiser");
    assert_eq!(status.contexts.len(), 2, "no context was added");
    assert!(status.contexts.iter().all(|c| c.stopped));
    assert_eq!(status.totals.instances, 0);
}

// R6.8, R8.1: an `on_die` that spawns a new instance every time it runs does
// not make shutdown endless: a local spawn asked for while shutdown ends the instances is
// dropped (its initialiser does not run, so no `on_die` is owed), and every instance that did
// start gets its `on_die` exactly once.
#[test]
fn r6_8_on_die_that_always_respawns_does_not_make_shutdown_endless() {
    let (inits, dies, status) = within(|| {
        let c = correlator(16);
        let inits = Arc::new(AtomicU64::new(0));
        let dies = Arc::new(AtomicU64::new(0));
        let (i2, i3, d2) = (inits.clone(), inits.clone(), dies.clone());
        c.load(Hook::new(
            move |cx| {
                i2.fetch_add(1, Ordering::Relaxed);
                keep_alive(cx);
            },
            move |me, cx, _| {
                d2.fetch_add(1, Ordering::Relaxed);
                let i4 = i3.clone();
                // A copy of itself: its `on_die` spawns again.
                cx.spawn(me, move |_, cx| {
                    i4.fetch_add(1, Ordering::Relaxed);
                    keep_alive(cx);
                });
            },
        ))
        .unwrap();
        c.start();
        let status = c.shutdown().unwrap();
        (
            inits.load(Ordering::Relaxed),
            dies.load(Ordering::Relaxed),
            status,
        )
    });
    assert_eq!(inits, 1);
    assert_eq!(
        dies, 1,
        "on_die ran once, for the only instance that started"
    );
    assert_eq!(status.totals.instances, 0);
    assert!(status.contexts.iter().all(|c| c.stopped));
}

// R8.2: `shutdown()` called from inside a handler would wait for the very
// handler that called it; it returns `Error::ShutdownFromContext` at once instead, and the
// correlator carries on until the user's own thread shuts it down.
#[test]
fn r8_2_shutdown_from_a_handler_is_a_typed_error() {
    let (from_handler, later, main) = within(|| {
        let c = Arc::new(correlator(16));
        let me: Arc<OnceLock<Weak<Correlator<Ev>>>> = Arc::new(OnceLock::new());
        let _ = me.set(Arc::downgrade(&c));
        let (tx, rx) = mpsc::channel();
        let log = Log::default();
        c.load(Script::new("m", &log, move |_, cx| {
            cx.on_all(Pattern::kind(1), move |_, _, _| {
                if let Some(c) = me.get().and_then(Weak::upgrade) {
                    let _ = tx.send(c.shutdown().map(|_| ()));
                }
            });
        }))
        .unwrap();
        c.start();
        c.input().send_to(c.main(), ev(1, 0)).unwrap();
        let from_handler = rx
            .recv_timeout(BOUND)
            .expect("the handler's shutdown() returned");
        let later = c.shutdown().map(|s| s.shut_down);
        (from_handler, later, c.main())
    });
    assert_eq!(from_handler, Err(Error::ShutdownFromContext(main)));
    assert!(from_handler
        .unwrap_err()
        .to_string()
        .contains("thread of your own"));
    assert_eq!(later, Ok(true));
}

// R5.2: a handler's blocking send through an `InputHandle` into its own full
// inbox would wait for room only its own context can make. The handle takes part in deadlock
// avoidance as the context it runs in: the entry is taken beyond capacity, and nothing is lost.
#[test]
fn r5_2_input_handle_blocking_send_from_a_handler_into_its_own_full_inbox_does_not_hang() {
    const CAPACITY: usize = 4;
    const SENDS: u64 = 3 * CAPACITY as u64;
    let (handler_sent, seen, status) = within(|| {
        let c = correlator(CAPACITY);
        let main = c.main();
        let input = c.input();
        let (tx, rx) = mpsc::channel();
        let seen = Arc::new(AtomicU64::new(0));
        let s2 = seen.clone();
        let log = Log::default();
        c.load(Script::new("m", &log, move |_, cx| {
            cx.on_all(Pattern::kind(1), move |_, _, _| {
                let mut sent = 0;
                for i in 0..SENDS {
                    if input.send_to(main, ev(2, i)).is_ok() {
                        sent += 1;
                    }
                }
                let _ = tx.send(sent);
            });
            cx.on_all(Pattern::kind(2), move |_, _, _| {
                s2.fetch_add(1, Ordering::Relaxed);
            });
        }))
        .unwrap();
        c.start();
        c.input().send_to(main, ev(1, 0)).unwrap();
        let handler_sent = rx.recv_timeout(BOUND).expect("the handler's sends ended");
        let status = c.shutdown().unwrap();
        (handler_sent, seen.load(Ordering::Relaxed), status)
    });
    assert_eq!(handler_sent, SENDS);
    assert_eq!(seen, SENDS, "every accepted entry is processed");
    assert!(
        status.totals.overruns > 0,
        "the inbox was taken beyond capacity"
    );
}

/// What the two instances of the stale-handle test share: the first instance's listener handle,
/// and how often the second instance's late listener fired.
#[derive(Clone, Default)]
struct Stale {
    handle: Arc<Mutex<Option<ListenerHandle>>>,
    fired: Arc<AtomicU64>,
}

/// Loaded first, so ended first at shutdown: its `on_die` routes kind 2.
struct StaleFirst(Stale);

impl Monitor<Ev> for StaleFirst {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let h = cx.on_all(Pattern::kind(1), |_, _, _| {});
        *self.0.handle.lock().unwrap() = Some(h);
    }

    fn on_die(&mut self, _: &DieReason, cx: &mut Scope<'_, Ev, Self>) {
        cx.route(ev(2, 0));
    }
}

/// Still alive while the first ends: kind 2 routes kind 5 (by then the first's listener is
/// compacted away and its slot free); kind 5 registers a listener for kind 3, which takes that
/// slot, and routes kind 4; kind 4 quits the first instance's handle and routes kind 3.
struct StaleSecond(Stale);

impl Monitor<Ev> for StaleSecond {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(Pattern::kind(2), |_, cx, _| cx.route(ev(5, 0)));
        cx.on_all(Pattern::kind(5), |m: &mut Self, cx, _| {
            let fired = m.0.fired.clone();
            cx.on_all(Pattern::kind(3), move |_, _, _| {
                fired.fetch_add(1, Ordering::SeqCst);
            });
            cx.route(ev(4, 0));
        });
        cx.on_all(Pattern::kind(4), |m: &mut Self, cx, _| {
            if let Some(h) = *m.0.handle.lock().unwrap() {
                cx.quit(h);
            }
            cx.route(ev(3, 0));
        });
    }
}

// R6.8, R8.1: while shutdown ends the instances, the handle of a listener that ended with its
// instance quits nothing, even once another listener has taken its slot (the handle map keeps
// dead listeners' handles then: `ListenerTable::ending`): the listener in that slot still fires.
#[test]
fn r8_1_a_stale_handle_quits_nothing_at_shutdown_even_when_its_slot_is_reused() {
    let shared = Stale::default();
    let fired = shared.fired.clone();
    within(move || {
        let c = correlator(16);
        c.load(StaleFirst(shared.clone())).unwrap();
        c.load(StaleSecond(shared)).unwrap();
        c.start();
        c.shutdown().unwrap();
    });
    assert_eq!(
        fired.load(Ordering::SeqCst),
        1,
        "the listener registered at shutdown fired for its event"
    );
}
