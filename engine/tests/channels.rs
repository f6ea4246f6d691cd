//! SPEC §4: sending between contexts and channels.
mod common;

use std::time::Duration;

use common::*;
use correlator::{ContextOptions, Pattern, SendErrorKind};

fn lines(log: &Log) -> Vec<String> {
    let mut v: Vec<String> = log.take_work();
    v.sort();
    v
}

// R4.1: send_to appends to the back of the inbox, the current context included.
#[test]
fn r4_1_send_to_self_goes_to_the_back() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.tag);
                if e.tag == "first" {
                    let me = cx.context();
                    cx.send_to(me, tagged(1, "sent-to-self")).unwrap();
                }
            },
        );
    }))
    .unwrap();
    let input = c.input();
    for t in ["first", "second", "third"] {
        input.send_to(c.main(), tagged(1, t)).unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    assert_eq!(got, ["first", "second", "third", "sent-to-self"]);
}

// R4.2: a channel send reaches every subscribed context once, however many subscriptions it holds,
// and every output receiver; the default channel reaches every public context and only those.
#[test]
fn r4_2_channel_delivery_set() {
    let c = correlator(16);
    let prices = c.channel("prices").unwrap();
    let out = c.output(prices);
    let a = c
        .create_context(ContextOptions::new("a").public(true))
        .unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    for (ctx, name, subs) in [(c.main(), "main", 0), (a, "a", 2), (b, "b", 1)] {
        c.load_in(
            ctx,
            Script::new(name, &log, move |_, cx| {
                for _ in 0..subs {
                    cx.subscribe(prices);
                }
                cx.on_all(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
                    m.log.push(format!("{} {}", m.name, e.tag));
                });
            }),
        )
        .unwrap();
        // Two instances in `a`, both subscribed: still one copy per context.
        if name == "a" {
            c.load_in(
                ctx,
                Script::new("a2", &log, move |_, cx| {
                    cx.subscribe(prices);
                    cx.on_all(Pattern::kind(1), |_, _, _| {});
                }),
            )
            .unwrap();
        }
    }
    let input = c.input();
    c.start();
    // Let the load hooks (and their subscriptions) run before sending.
    assert!(eventually(|| c.status().totals.instances == 4));
    assert_eq!(input.send(prices, tagged(1, "price")).unwrap(), 3);
    assert_eq!(
        input
            .send(correlator::Channel::DEFAULT, tagged(1, "default"))
            .unwrap(),
        2
    );
    c.shutdown().unwrap();
    assert_eq!(
        lines(&log),
        ["a default", "a price", "b price", "main default"]
    );
    assert_eq!(out.try_iter().map(|e| e.tag).collect::<Vec<_>>(), ["price"]);
}

// R4.2: a send from a handler reaches contexts and output receivers too.
#[test]
fn r4_2_handler_send_reaches_contexts_and_outputs() {
    let c = correlator(16);
    let ch = c.channel("ch").unwrap();
    let out = c.output(ch);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    c.load_in(
        b,
        Script::new("b", &log, move |_, cx| {
            cx.subscribe(ch);
            cx.on_all(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
                m.log.push(e.tag)
            });
        }),
    )
    .unwrap();
    c.load(Script::new("main", &log, move |_, cx| {
        cx.on(
            Pattern::kind(2),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                let n = cx.send(ch, tagged(1, "hello"));
                m.log.push(format!("delivered {n}"));
            },
        );
    }))
    .unwrap();
    c.start();
    assert!(eventually(|| c.status().totals.instances == 2));
    c.input().send_to(c.main(), ev(2, 0)).unwrap();
    c.shutdown().unwrap();
    assert_eq!(lines(&log), ["delivered 2", "hello"]);
    assert_eq!(
        out.recv_timeout(Duration::from_secs(1)).unwrap().tag,
        "hello"
    );
}

// R4.3: emit reaches output receivers only, never a context, even a subscribed one.
#[test]
fn r4_3_emit_reaches_outputs_only() {
    let c = correlator(16);
    let ch = c.channel("alerts").unwrap();
    let out = c.output(ch);
    let log = Log::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.subscribe(ch);
        cx.on_all(
            Pattern::kind(1),
            move |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.tag);
                if e.tag == "in" {
                    let n = cx.emit(ch, tagged(1, "emitted"));
                    m.log.push(format!("emit reached {n}"));
                }
            },
        );
    }))
    .unwrap();
    c.input().send_to(c.main(), tagged(1, "in")).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(lines(&log), ["emit reached 1", "in"]);
    assert_eq!(out.iter().map(|e| e.tag).collect::<Vec<_>>(), ["emitted"]);
}

// R4.4: subscriptions are counted per context and owned by the instance: one unsubscribe of two
// keeps delivery, the second stops it, and an instance's end removes what it held.
#[test]
fn r4_4_subscriptions_are_reference_counted() {
    let c = correlator(16);
    let ch = c.channel("ch").unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    c.load_in(
        b,
        Script::new("b", &log, move |_, cx| {
            cx.subscribe(ch);
            cx.subscribe(ch);
            cx.on_all(
                Pattern::kind(1),
                move |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                    m.log.push(e.tag);
                    cx.unsubscribe(ch);
                },
            );
        }),
    )
    .unwrap();
    // A second instance whose subscription ends with it.
    c.load_in(
        b,
        Script::new("short", &log, move |_, cx| {
            cx.subscribe(ch);
            cx.on(Pattern::kind(5), |_, _, _| {});
        }),
    )
    .unwrap();
    let input = c.input();
    c.start();
    assert!(eventually(|| c.status().totals.instances == 2));
    // 3 subscriptions in b (2 by "b", 1 by "short"): every send reaches b once.
    assert_eq!(input.send(ch, tagged(1, "one")).unwrap(), 1);
    assert!(eventually(|| log.count("one") == 1));
    // b unsubscribed once (2 left): still delivered.
    assert_eq!(input.send(ch, tagged(1, "two")).unwrap(), 1);
    assert!(eventually(|| log.count("two") == 1));
    // b unsubscribed twice; "short" still holds one.
    assert_eq!(input.send(ch, tagged(1, "three")).unwrap(), 1);
    assert!(eventually(|| log.count("three") == 1));
    // b holds none now; "short" ends (its only listener fires once) and takes its subscription along.
    input.send_to(b, ev(5, 0)).unwrap();
    assert!(eventually(|| log.count("short die no-listeners") == 1));
    assert_eq!(input.send(ch, tagged(1, "four")).unwrap(), 0);
    let s = c.shutdown().unwrap();
    assert_eq!(log.count("four"), 0);
    assert_eq!(s.totals.dropped, 1);
}

// R4.5: an event sent to a channel nobody receives is dropped and counted, never an error.
#[test]
fn r4_5_unreceived_channel_send_is_counted() {
    let c = correlator(16);
    let nobody = c.channel("nobody").unwrap();
    let log = Log::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.on(
            Pattern::kind(1),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                let n = cx.send(nobody, ev(2, 0));
                m.log.push(format!("{n}"));
            },
        );
    }))
    .unwrap();
    let input = c.input();
    assert_eq!(input.send(nobody, ev(2, 0)).unwrap(), 0);
    input.send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(s.totals.dropped, 2);
    assert_eq!(log.count("0"), 1);
}

// R4.6: sending to a context that has been shut down is an error returned to the sender, with the
// event, not a panic.
#[test]
fn r4_6_send_to_stopped_context_is_an_error() {
    let c = correlator(16);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let input = c.input();
    c.start();
    c.shutdown().unwrap();
    let err = input.send_to(b, ev(1, 42)).unwrap_err();
    assert!(matches!(
        err.kind(),
        SendErrorKind::ContextStopped | SendErrorKind::Closed
    ));
    assert_eq!(err.target(), Some(b));
    assert!(!err.to_string().is_empty());
    assert_eq!(err.into_inner().val, 42);
    let err = input.try_send_to(b, ev(1, 43)).unwrap_err();
    assert_eq!(err.into_inner().val, 43);
    let err = input
        .send(correlator::Channel::DEFAULT, ev(1, 44))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Closed);
}

/// An event whose `Clone` panics when it is marked: user code that runs inside a channel send.
#[derive(Debug)]
struct Fragile {
    kind: u32,
    poison: bool,
}

impl Clone for Fragile {
    fn clone(&self) -> Self {
        assert!(!self.poison, "this event refuses to be copied");
        Fragile {
            kind: self.kind,
            poison: false,
        }
    }
}

impl correlator::Event for Fragile {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

/// A sink (`seen: Some`) subscribes to `channel` and counts the kind-1 events it receives; the
/// poisoner (`seen: None`) sends a poisoned kind-1 event to the channel on a kind-0 event, whose
/// copy for the first subscriber panics.
struct FragileSink {
    channel: correlator::Channel,
    seen: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

type FragileScope<'a> = correlator::Scope<'a, Fragile, FragileSink>;

impl correlator::Monitor<Fragile> for FragileSink {
    fn on_load(&mut self, cx: &mut FragileScope<'_>) {
        if self.seen.is_some() {
            cx.subscribe(self.channel);
            cx.on_all(
                Pattern::kind(1),
                |m: &mut FragileSink, _cx: &mut FragileScope<'_>, _e: &Fragile| {
                    if let Some(seen) = &m.seen {
                        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                },
            );
        } else {
            cx.on_all(
                Pattern::kind(0),
                |m: &mut FragileSink, cx: &mut FragileScope<'_>, _e: &Fragile| {
                    let fragile = Fragile {
                        kind: 1,
                        poison: true,
                    };
                    cx.send(m.channel, fragile);
                },
            );
        }
    }
}

// R4.2 with R6.8 and R8.1: a channel send whose copy panics (user `Clone`, in a handler or in an
// input handle's thread) holds no inbox place afterwards: a reserved, uncommitted place would stall
// the subscriber it was reserved in, and shutdown would never find the inboxes empty. Later sends
// reach every subscriber and shutdown finishes.
#[test]
fn r4_2_a_panicking_copy_holds_no_place() {
    // The scenario runs in its own thread: with a place stuck, its sends and its shutdown would
    // block, and a failing test must fail, not hang.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        panicking_copy_scenario();
        done.send(()).unwrap();
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("R8.1: hung: a place reserved before a panicking copy was never given back")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the scenario failed (see its panic above)")
        }
    }
}

fn panicking_copy_scenario() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let c = correlator::Correlator::<Fragile>::builder()
        .inbox_capacity(8)
        .external_time()
        .build()
        .unwrap();
    let ch = c.channel("fragile").unwrap();
    let seen_a = Arc::new(AtomicUsize::new(0));
    let seen_b = Arc::new(AtomicUsize::new(0));
    let a = c.create_context(ContextOptions::new("a")).unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    for (ctx, seen) in [(a, &seen_a), (b, &seen_b)] {
        let sink = FragileSink {
            channel: ch,
            seen: Some(seen.clone()),
        };
        c.load_in(ctx, sink).unwrap();
    }
    c.load(FragileSink {
        channel: ch,
        seen: None,
    })
    .unwrap();
    c.start();
    // The sinks subscribe when their contexts run their load hooks.
    let t0 = std::time::Instant::now();
    while [a, b]
        .iter()
        .any(|&x| c.status().context(x).is_none_or(|s| s.listeners == 0))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the sinks never loaded"
        );
        std::thread::yield_now();
    }
    let input = c.input();
    // In a handler: the copy for the first subscriber panics, the poisoner's instance ends (R6.8).
    let go = Fragile {
        kind: 0,
        poison: false,
    };
    input.send_to(c.main(), go).unwrap();
    // In the input handle's thread: the all-or-nothing send panics while copying.
    let poisoned = Fragile {
        kind: 1,
        poison: true,
    };
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = input.try_send(ch, poisoned);
    }));
    assert!(panicked.is_err(), "the copy should have panicked");
    for _ in 0..20 {
        let fine = Fragile {
            kind: 1,
            poison: false,
        };
        // Bounded waits: with a place stuck in a subscriber's inbox this fails instead of hanging.
        input
            .send_timeout(ch, fine, Duration::from_secs(10))
            .expect("R4.2: a subscriber stopped taking entries");
    }
    c.shutdown().unwrap();
    assert_eq!(seen_a.load(Ordering::Relaxed), 20, "R4.2: a lost events");
    assert_eq!(seen_b.load(Ordering::Relaxed), 20, "R4.2: b lost events");
}
