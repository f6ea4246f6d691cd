//! SPEC §3: routing, the front of the queue.
mod common;

#[allow(dead_code)]
#[path = "../examples/seed_order.rs"]
mod seed_example;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use correlator::{ContextOptions, Pattern};

// R3.3: the worked example, exactly, through the example's own code.
#[test]
fn r3_3_seed_order_example() {
    let order = seed_example::seed_order().unwrap();
    assert_eq!(order.join(" "), "E1 R1 R3 R5 R4 R2 E2 E3 E4 En1 En2");
}

// R3.3: deterministic: the same order on every run.
#[test]
fn r3_3_seed_order_is_deterministic() {
    for _ in 0..20 {
        assert_eq!(
            seed_example::seed_order().unwrap().join(" "),
            "E1 R1 R3 R5 R4 R2 E2 E3 E4 En1 En2"
        );
    }
}

// R3.2: depth-first over the tree of routes, siblings in routing order, all before what was pending
// (including events routed earlier and not yet processed).
#[test]
fn r3_2_route_tree_order() {
    let c = correlator(16);
    let log = Log::default();
    // Every event with value v < 100 routes three children 10v+1..10v+3: from 1 and 2, trees of
    // depth 2 and fan-out 3.
    c.load(Script::new("tree", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.val.to_string());
                if e.val < 100 {
                    for k in 1..=3 {
                        cx.route(ev(1, e.val * 10 + k));
                    }
                }
            },
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    input.send_to(c.main(), ev(1, 2)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    let want = "1 11 111 112 113 12 121 122 123 13 131 132 133 2 21 211 212 213 22 221 222 223 23 231 232 233";
    let want: Vec<&str> = want.split(' ').collect();
    assert_eq!(got, want);
}

// R3.1: a routed event never leaves its context.
#[test]
fn r3_1_route_stays_in_context() {
    let c = correlator(16);
    let b = c
        .create_context(ContextOptions::new("b").public(true))
        .unwrap();
    let log = Log::default();
    for (ctx, name) in [(c.main(), "main"), (b, "b")] {
        c.load_in(
            ctx,
            Script::new(name, &log, |_, cx| {
                cx.on_all(Pattern::kind(1), |_, cx: &mut Cx<'_>, _| cx.route(ev(2, 0)));
                cx.on_all(Pattern::kind(2), |m: &mut Script, _, _| m.log.push(m.name));
            }),
        )
        .unwrap();
    }
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    assert_eq!(got, ["main"]);
}

// R3.4: the route stack belongs to the context; its depth is reported (R9.1) and a long chain of
// routes (depth 1 at a time) never deepens it.
#[test]
fn r3_4_route_chain_keeps_depth_one() {
    let c = correlator(16);
    let log = Log::default();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    c.load(Script::new("chain", &log, move |_, cx| {
        cx.on_all(Pattern::kind(1), move |_, cx: &mut Cx<'_>, e: &Ev| {
            n2.fetch_add(1, Ordering::Relaxed);
            if e.val < 100_000 {
                cx.route(ev(1, e.val + 1));
            }
        });
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 100_001);
    let main = s.context(c.main()).unwrap();
    assert_eq!(main.max_route_depth, 1);
    assert_eq!(main.routed, 100_000);
    assert_eq!(main.processed, 100_001);
}

// R3.5: routed events do not count against the inbox capacity and are never refused.
#[test]
fn r3_5_routes_ignore_inbox_capacity() {
    let c = correlator(1);
    let log = Log::default();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    c.load(Script::new("storm", &log, move |_, cx| {
        cx.on_all(Pattern::kind(1), |_, cx: &mut Cx<'_>, _| {
            for i in 0..10_000 {
                cx.route(ev(2, i));
            }
        });
        cx.on_all(Pattern::kind(2), move |_, _, _| {
            n2.fetch_add(1, Ordering::Relaxed);
        });
    }))
    .unwrap();
    c.start();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    let s = c.shutdown().unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 10_000);
    assert_eq!(s.totals.overruns, 0, "routes never touch the inbox");
    assert_eq!(s.context(c.main()).unwrap().max_route_depth, 10_000);
}

/// Routes 41, 42, 43 from its `on_die` hook.
struct RoutesOnDie;

impl correlator::Monitor<Ev> for RoutesOnDie {
    fn on_load(&mut self, cx: &mut correlator::Scope<'_, Ev, Self>) {
        cx.on_all(Pattern::kind(99), |_, _, _| {});
    }

    fn on_die(
        &mut self,
        _reason: &correlator::DieReason,
        cx: &mut correlator::Scope<'_, Ev, Self>,
    ) {
        for v in [41, 42, 43] {
            cx.route(ev(1, v));
        }
    }
}

// R3.2 for routes made outside an event's listeners: an `on_load` hook (a spawn entry), a timer
// handler (a tick entry) and an `on_die` hook at shutdown route siblings too, and they are
// processed in routing order (the first two before the next inbox entry).
#[test]
fn r3_2_routes_from_load_timer_and_die_keep_routing_order() {
    use correlator::{wait, Match, Time};
    let c = correlator(16);
    let log = Log::default();
    // Loaded first, so it is the first instance to end at shutdown, while `m` still listens.
    c.load(RoutesOnDie).unwrap();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, _cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(e.val.to_string());
            },
        );
        cx.when(
            wait(std::time::Duration::from_secs(1)),
            |_m: &mut Script, cx: &mut Cx<'_>, _hit: &Match<Ev>| {
                for v in [21, 22, 23] {
                    cx.route(ev(1, v));
                }
            },
        );
        for v in [11, 12, 13] {
            cx.route(ev(1, v));
        }
    }))
    .unwrap();
    let input = c.input();
    input.send_time(Time::from_secs(2)).unwrap();
    input.send_to(c.main(), ev(1, 30)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = log.take_work();
    assert_eq!(
        got,
        ["11", "12", "13", "21", "22", "23", "30", "41", "42", "43"]
    );
}

// R3.2 through the route loop's chain path: a run of one kind, each event routing the next, is
// followed link by link while each routes exactly one event of the same kind; a switch of kind,
// a fan-out (two routes) and a leaf leave it, and the order stays depth-first with siblings in
// routing order. R9.1: the fan-out is the only time two entries wait.
#[test]
fn r3_2_chains_keep_routing_order_through_kind_switches_and_fan_outs() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on_all(Pattern::kind(1), |m, cx: &mut Cx<'_>, e: &Ev| {
            m.log.push(format!("1:{}", e.val));
            match e.val {
                0..=2 | 20 => cx.route(ev(1, e.val + 1)),
                3 => cx.route(ev(2, 10)),
                _ => {}
            }
        });
        cx.on_all(Pattern::kind(2), |m, cx: &mut Cx<'_>, e: &Ev| {
            m.log.push(format!("2:{}", e.val));
            match e.val {
                10 => {
                    cx.route(ev(2, 11));
                    cx.route(ev(1, 20));
                }
                11 => cx.route(ev(2, 12)),
                _ => {}
            }
        });
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(
        log.take_work(),
        ["1:0", "1:1", "1:2", "1:3", "2:10", "2:11", "2:12", "1:20", "1:21"]
    );
    let main = s.context(c.main()).unwrap();
    assert_eq!(main.processed, 9);
    assert_eq!(main.routed, 8);
    assert_eq!(main.max_route_depth, 2);
}
