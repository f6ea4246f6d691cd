//! Issue 15 (hardening), lifecycle and delivery: concurrent shutdowns, what `on_die` may do at
//! shutdown, shutdown and blocking input sends from inside a handler, outputs taken after shutdown,
//! and channel sends that are refused (SPEC R4.2, R5.1–R5.3, R6.8, R8.1, R8.2).
//!
//! Every scenario that used to hang runs in a helper thread whose result the test waits for with a
//! generous bound ([`within`]): a regression fails the test instead of hanging the suite.
mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use correlator::{Channel, ContextOptions, Correlator, Event, Pattern, SendErrorKind};

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

// R4.2 (issue 15, item 10): an output receiver taken after shutdown has nothing to wait for: its
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

// R5.3 (issue 15, item 12): a `try_send` to a channel that is refused hands the event back and
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

// R8.2 (issue 15, item 8): a blocking channel send before `start()` that finds a subscriber's
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
                refused.push(e.into_event().val);
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
