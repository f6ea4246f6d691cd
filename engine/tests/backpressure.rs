//! SPEC §5: capacity, back-pressure and deadlock avoidance (the behaviour seen through the public
//! API; the protocols themselves are model-checked in loom-tests/ and stressed in stress_cycle.rs).
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use correlator::{Channel, ContextOptions, Pattern, SendErrorKind};

fn slow_counter(c: &correlator::Correlator<Ev>, ctx: correlator::ContextRef) -> Arc<AtomicU64> {
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    let log = Log::default();
    c.load_in(
        ctx,
        Script::new("slow", &log, move |_, cx| {
            cx.on_all(Pattern::kind(1), move |_, _, e: &Ev| {
                if e.tag == "slow" {
                    std::thread::sleep(Duration::from_micros(200));
                }
                n2.fetch_add(1, Ordering::Relaxed);
            });
        }),
    )
    .unwrap();
    n
}

// R5.1: a sender that finds the inbox full waits for room: back-pressure, never loss.
#[test]
fn r5_1_blocking_send_waits_for_room() {
    let c = correlator(2);
    let n = slow_counter(&c, c.main());
    c.start();
    let input = c.input();
    for i in 0..200 {
        input
            .send_to(
                c.main(),
                Ev {
                    kind: 1,
                    val: i,
                    tag: "slow",
                },
            )
            .unwrap();
    }
    c.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 200);
}

// R5.3: try_send returns Full with the event; send_timeout gives up after its bound with the event.
#[test]
fn r5_3_non_blocking_and_timed_sends() {
    let c = correlator(1);
    // The load entry fills main's inbox of capacity 1.
    let n = slow_counter(&c, c.main());
    let input = c.input();
    let err = input.try_send_to(c.main(), ev(1, 1)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert_eq!(err.into_inner().val, 1);
    let t0 = Instant::now();
    let err = input
        .send_to_timeout(c.main(), ev(1, 2), Duration::from_millis(30))
        .unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(err.kind(), SendErrorKind::Timeout);
    assert_eq!(err.into_inner().val, 2);
    // Channels: all or nothing. `b` has room, `main` does not: nobody gets it.
    let b = c
        .create_context(ContextOptions::new("b").public(true))
        .unwrap();
    let err = input.try_send(Channel::DEFAULT, ev(1, 3)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert_eq!(
        c.status().context(b).unwrap().inbox_len,
        0,
        "nothing reserved is left"
    );
    let err = input
        .send_timeout(Channel::DEFAULT, ev(1, 4), Duration::from_millis(10))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Timeout);
    assert_eq!(c.status().context(b).unwrap().inbox_len, 0);
    // Once there is room, the timed sends succeed.
    c.start();
    input
        .send_to_timeout(c.main(), ev(1, 5), Duration::from_secs(10))
        .unwrap();
    assert_eq!(
        input
            .send_timeout(Channel::DEFAULT, ev(1, 6), Duration::from_secs(10))
            .unwrap(),
        2
    );
    c.shutdown().unwrap();
    assert_eq!(
        n.load(Ordering::Relaxed),
        2,
        "events 5 and 6 reached main, nothing else"
    );
}

// R5.2: a context sending to its own full inbox does not wait forever: the entry is taken beyond
// capacity, counted, and nothing is lost or reordered.
#[test]
fn r5_2_self_send_into_full_inbox() {
    let c = correlator(2);
    let log = Log::default();
    c.load(Script::new("self", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.val.to_string());
                if e.val == 0 {
                    let me = cx.context();
                    for i in 1..=10 {
                        cx.send_to(me, ev(1, i)).unwrap();
                    }
                }
            },
        );
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    let want: Vec<String> = (0..=10).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
    assert!(s.totals.overruns > 0);
    assert_eq!(
        s.context(c.main()).unwrap().inbox_len,
        0,
        "shrinks back as it drains"
    );
}

// R5.2 with places given back in batches: a context holds the places of entries it processed
// (release_batch). They are not what its own send may wait for: a send that finds its own inbox
// full of held places gives them back and goes through, with no overrun (the inbox grows beyond
// capacity only where waiting would close a cycle). Capacity 32, batch 4 (the most an inbox of 32
// allows): the inbox is full before start (the load entry and events 0..31); when event 2 runs,
// the places of the load entry and events 0 and 1 are held and 29 entries are unprocessed.
#[test]
fn r5_2_held_places_are_given_back_before_a_send_waits() {
    const CAPACITY: usize = 32;
    let c = correlator::Correlator::<Ev>::builder()
        .inbox_capacity(CAPACITY)
        .release_batch(4)
        .external_time()
        .build()
        .unwrap();
    let log = Log::default();
    c.load(Script::new("self", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.val.to_string());
                if e.val == 2 {
                    let me = cx.context();
                    cx.send_to(me, ev(1, 100)).unwrap();
                }
            },
        );
    }))
    .unwrap();
    // The load entry took one place and is processed first.
    let events = CAPACITY as u64 - 1;
    for i in 0..events {
        c.input().send_to(c.main(), ev(1, i)).unwrap();
    }
    assert_eq!(
        c.input()
            .try_send_to(c.main(), ev(1, 99))
            .unwrap_err()
            .kind(),
        SendErrorKind::Full,
        "the inbox should be full before start"
    );
    c.start();
    let s = c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    let want: Vec<String> = (0..events).chain([100]).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
    assert_eq!(
        s.totals.overruns, 0,
        "R5.2: a send that only met held places went beyond capacity"
    );
}

// R5.2: two contexts sending to each other with full inboxes both finish.
#[test]
fn r5_2_two_contexts_cycle() {
    const N: u64 = 500;
    let c = correlator(2);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    let got = Arc::new(AtomicU64::new(0));
    for (ctx, peer) in [(c.main(), b), (b, c.main())] {
        let got = got.clone();
        c.load_in(
            ctx,
            Script::new("ping", &log, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, _| {
                    for i in 0..N {
                        cx.send_to(peer, ev(2, i)).unwrap();
                    }
                });
                cx.on_all(Pattern::kind(2), move |_, _, _| {
                    got.fetch_add(1, Ordering::Relaxed);
                });
            }),
        )
        .unwrap();
    }
    let input = c.input();
    c.start();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(b, ev(1, 0)).unwrap();
    c.shutdown().unwrap();
    assert_eq!(got.load(Ordering::Relaxed), 2 * N);
}
