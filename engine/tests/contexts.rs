//! SPEC §1: contexts.
mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use common::*;
use correlator::{
    ContextOptions, ContextRef, Correlator, Error, Pattern, PinningPlan, WaitStrategy,
};

// R1.1: a correlator starts with one public context called main.
#[test]
fn r1_1_main_context_exists_and_is_public() {
    let c = correlator(16);
    let s = c.status();
    assert_eq!(s.contexts.len(), 1);
    assert_eq!(s.contexts[0].name, "main");
    assert!(s.contexts[0].public);
    assert_eq!(s.contexts[0].context, Some(c.main()));
    assert_eq!(c.context_name(c.main()).as_deref(), Some("main"));
}

// R1.2: contexts are created from outside and from handlers, names need not be unique, ids are, and
// a reference is a Copy value usable as a hash key.
#[test]
fn r1_2_create_contexts_outside_and_inside_handlers() {
    let c = correlator(16);
    let a = c.create_context(ContextOptions::new("worker")).unwrap();
    let b = c.create_context(ContextOptions::new("worker")).unwrap();
    assert_ne!(a, b);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, _e: &Ev| {
                let inner = cx
                    .create_context(ContextOptions::new("worker").public(true))
                    .unwrap();
                m.log.push(format!("created {}", inner.id()));
                // The new context is running: it can be sent to and host an instance.
                let log = m.log.clone();
                cx.spawn_to(inner, &m.clone(), move |_, cx: &mut Cx<'_>| {
                    log.push(format!("init in {}", cx.context().id()));
                })
                .unwrap();
            },
        );
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let ids: HashSet<ContextRef> = c
        .status()
        .contexts
        .iter()
        .filter_map(|s| s.context)
        .collect();
    assert_eq!(ids.len(), 4, "every context has a unique id");
    assert_eq!(
        c.status()
            .contexts
            .iter()
            .filter(|s| s.name == "worker")
            .count(),
        3
    );
    let lines = log.take();
    let work: Vec<&String> = lines.iter().filter(|l| !l.contains(" die ")).collect();
    assert_eq!(work, ["created 3", "init in 3"]);
    // Both instances end once they have no listener left (R6.8).
    assert_eq!(
        lines.iter().filter(|l| *l == "m die no-listeners").count(),
        2
    );
    // Copy + Eq + Hash: usable as a key and inside events.
    let mut set = HashSet::new();
    set.insert(a);
    set.insert(a);
    assert_eq!(set.len(), 1);
}

// R1.3: more contexts than cores work with every wait strategy (no livelock, no starvation).
#[test]
fn r1_3_more_contexts_than_cores() {
    for wait in [
        WaitStrategy::SpinYieldPark,
        WaitStrategy::SpinThenYield,
        WaitStrategy::BusySpin,
    ] {
        let c = Correlator::<Ev>::builder()
            .inbox_capacity(64)
            .wait_strategy(wait)
            .build()
            .unwrap();
        let total = Arc::new(AtomicU64::new(0));
        let n = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
        let log = Log::default();
        let mut ctxs = vec![c.main()];
        for i in 1..n {
            ctxs.push(
                c.create_context(ContextOptions::new(format!("c{i}")))
                    .unwrap(),
            );
        }
        for &ctx in &ctxs {
            let total = total.clone();
            c.load_in(
                ctx,
                Script::new("counter", &log, move |_, cx| {
                    cx.on_all(Pattern::kind(7), move |_, _, e: &Ev| {
                        total.fetch_add(e.val, Ordering::Relaxed);
                    });
                }),
            )
            .unwrap();
        }
        c.start();
        let input = c.input();
        for round in 0..200u64 {
            for &ctx in &ctxs {
                input.send_to(ctx, ev(7, round)).unwrap();
            }
        }
        c.shutdown().unwrap();
        let expected: u64 = (0..200u64).sum::<u64>() * n as u64;
        assert_eq!(total.load(Ordering::Relaxed), expected, "{wait:?}");
    }
}

// R1.3 / R8.2: pinning to a core that does not exist is a typed error at build time.
#[test]
fn r1_3_pinning_to_missing_core_is_an_error() {
    let err = Correlator::<Ev>::builder()
        .pinning(PinningPlan::cores(vec![0, 100_000]))
        .build()
        .err()
        .expect("core 100000 does not exist");
    match &err {
        Error::NoSuchCore { core, available } => {
            assert_eq!(*core, 100_000);
            assert!(!available.is_empty());
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains("pinning plan"));
    let c = correlator(4);
    let err = c
        .create_context(ContextOptions::new("x").pin_core(100_000))
        .unwrap_err();
    assert!(matches!(err, Error::NoSuchCore { core: 100_000, .. }));
}

// R1.3: a valid plan pins and the status says so.
#[test]
fn r1_3_pinning_takes_effect() {
    let c = Correlator::<Ev>::builder()
        .pinning(PinningPlan::cores(vec![0]))
        .build()
        .unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    c.start();
    assert!(eventually(|| c.status().contexts.iter().all(|s| s.pinned)));
    assert_eq!(c.status().context(b).unwrap().core, Some(0));
    c.shutdown().unwrap();
}

// R1.4: contexts process concurrently: two handlers in two contexts meet at a barrier, which is
// only possible if both run at the same time.
#[test]
fn r1_4_contexts_run_concurrently() {
    let c = correlator(8);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let met = Arc::new(AtomicU64::new(0));
    let log = Log::default();
    for ctx in [c.main(), b] {
        let barrier = barrier.clone();
        let met = met.clone();
        c.load_in(
            ctx,
            Script::new("meet", &log, move |_, cx| {
                cx.on(Pattern::kind(1), move |_, _, _| {
                    barrier.wait();
                    met.fetch_add(1, Ordering::SeqCst);
                });
            }),
        )
        .unwrap();
    }
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(b, ev(1, 0)).unwrap();
    c.start();
    assert!(eventually(|| met.load(Ordering::SeqCst) == 2));
    c.shutdown().unwrap();
}

// R1.2: a handler can store a context reference in an event and reply to it.
#[test]
fn r1_2_context_refs_travel_in_events() {
    #[derive(Clone, Debug)]
    struct Ask {
        reply_to: Option<ContextRef>,
    }
    impl correlator::Event for Ask {
        type Kind = bool;
        fn kind(&self) -> bool {
            self.reply_to.is_some()
        }
    }
    struct Echo(Arc<AtomicBool>);
    impl correlator::Monitor<Ask> for Echo {
        fn on_load(&mut self, cx: &mut correlator::Scope<'_, Ask, Self>) {
            cx.on_all(Pattern::kind(true), |_, cx, a: &Ask| {
                cx.send_to(a.reply_to.unwrap(), Ask { reply_to: None })
                    .unwrap();
            });
            cx.on_all(Pattern::kind(false), |m: &mut Echo, _, _| {
                m.0.store(true, Ordering::SeqCst);
            });
        }
    }
    let c = Correlator::<Ask>::builder().build().unwrap();
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let got = Arc::new(AtomicBool::new(false));
    c.load(Echo(got.clone())).unwrap();
    c.load_in(b, Echo(Arc::new(AtomicBool::new(false))))
        .unwrap();
    c.input()
        .send_to(
            b,
            Ask {
                reply_to: Some(c.main()),
            },
        )
        .unwrap();
    c.start();
    c.shutdown().unwrap();
    assert!(got.load(Ordering::SeqCst));
}
