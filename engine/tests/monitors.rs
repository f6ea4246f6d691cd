//! SPEC §6: monitors and listeners.
mod common;

use common::*;
use correlator::{ContextOptions, Pattern};

fn work(log: &Log) -> Vec<String> {
    log.take()
}

// R6.1: loading a monitor creates its first instance in main and runs its load hook there.
#[test]
fn r6_1_load_runs_in_main() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |m, cx| {
        m.log.push(format!("load in {}", cx.context().id()));
        cx.on(Pattern::kind(1), |_, _, _| {});
    }))
    .unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(work(&log), ["load in 0", "m die shutdown"]);
    assert_eq!(s.context(c.main()).unwrap().received, 1);
}

// R6.2: spawn copies the state (not the listeners) and runs the initialiser in the new instance;
// spawn_to does so in another context.
#[test]
fn r6_2_spawn_copies_state_not_listeners() {
    let c = correlator(16);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    c.load(Script::new("parent", &log, move |m, cx| {
        m.count = 41;
        cx.on_all(Pattern::kind(1), |m: &mut Script, _, _| {
            m.log.push(format!("parent sees 1 (count {})", m.count));
        });
        cx.on(
            Pattern::kind(2),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                m.count += 1;
                cx.spawn(m, |m: &mut Script, cx: &mut Cx<'_>| {
                    m.name = "local";
                    m.log.push(format!(
                        "local init count {} in {}",
                        m.count,
                        cx.context().id()
                    ));
                    cx.on(Pattern::kind(3), |m: &mut Script, _, _| {
                        m.log.push("local got 3")
                    });
                });
                cx.spawn_to(b, m, |m: &mut Script, cx: &mut Cx<'_>| {
                    m.name = "remote";
                    m.log.push(format!(
                        "remote init count {} in {}",
                        m.count,
                        cx.context().id()
                    ));
                })
                .unwrap();
                m.count = 0; // the copies are already taken
            },
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(2, 0)).unwrap();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(3, 0)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let lines = work(&log);
    let main_lines: Vec<&String> = lines.iter().filter(|l| !l.contains("remote")).collect();
    // The local copy does not have the parent's kind-1 listener: only the parent sees 1.
    assert_eq!(
        main_lines,
        [
            "local init count 42 in 0",
            "parent sees 1 (count 0)",
            "local got 3",
            "local die no-listeners",
            "parent die shutdown",
        ]
    );
    assert!(lines.contains(&"remote init count 42 in 1".to_string()));
    assert!(lines.contains(&"remote die no-listeners".to_string()));
}

// R6.3: `on` fires once then ends; `on_all` fires on every match until quit; a handle quits.
#[test]
fn r6_3_on_once_on_all_and_quit() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("once {}", e.val))
        });
        let all = cx.on_all(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("all {}", e.val))
        });
        cx.on_all(
            Pattern::kind(2),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                m.log.push("quit");
                cx.quit(all);
            },
        );
    }))
    .unwrap();
    let input = c.input();
    for (k, v) in [(1, 1), (1, 2), (2, 0), (1, 3)] {
        input.send_to(c.main(), ev(k, v)).unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        ["once 1", "all 1", "all 2", "quit", "m die shutdown"]
    );
}

// R6.4: every matching listener fires, in registration order; a quit during a dispatch stops a
// listener later in the same dispatch.
#[test]
fn r6_4_registration_order() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        for i in 0..5 {
            cx.on_all(Pattern::kind(1), move |m: &mut Script, _, _| {
                m.log.push(format!("l{i}"))
            });
        }
        cx.on_all(
            Pattern::kind(1).filter(|e: &Ev| e.val == 99),
            |m: &mut Script, _, _| m.log.push("filtered"),
        );
    }))
    .unwrap();
    c.load(Script::new("m2", &log, |_, cx| {
        let later = std::sync::Arc::new(std::sync::Mutex::new(None));
        let l2 = later.clone();
        cx.on_all(
            Pattern::kind(2),
            move |m: &mut Script, cx: &mut Cx<'_>, _| {
                m.log.push("quitter");
                if let Some(h) = *l2.lock().unwrap() {
                    cx.quit(h);
                }
            },
        );
        let h = cx.on_all(Pattern::kind(2), |m: &mut Script, _, _| {
            m.log.push("victim")
        });
        *later.lock().unwrap() = Some(h);
        cx.on_all(Pattern::kind(3), |_, _, _| {});
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(2, 0)).unwrap();
    input.send_to(c.main(), ev(1, 99)).unwrap();
    c.start();
    c.shutdown().unwrap();
    let got: Vec<String> = work(&log)
        .into_iter()
        .filter(|l| !l.contains(" die "))
        .collect();
    assert_eq!(
        got,
        ["l0", "l1", "l2", "l3", "l4", "quitter", "l0", "l1", "l2", "l3", "l4", "filtered"]
    );
}

// R6.5: a listener registered while an event is processed does not match that same event, but does
// match the events after it (routed ones included).
#[test]
fn r6_5_new_listener_skips_current_event() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on(Pattern::kind(1), |_, cx: &mut Cx<'_>, _| {
            cx.on_all(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
                m.log.push(format!("new sees {}", e.val))
            });
            cx.route(ev(1, 2));
        });
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    input.send_to(c.main(), ev(1, 3)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(work(&log), ["new sees 2", "new sees 3", "m die shutdown"]);
}

// R6.6: unmatched listeners fire for events no ordinary listener of the context matched.
#[test]
fn r6_6_unmatched() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1).filter(|e: &Ev| e.val.is_multiple_of(2)),
            |m: &mut Script, _, e: &Ev| m.log.push(format!("even {}", e.val)),
        );
        cx.unmatched(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("unmatched {}", e.val))
        });
    }))
    .unwrap();
    let input = c.input();
    for v in 0..4 {
        input.send_to(c.main(), ev(1, v)).unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            "even 0",
            "unmatched 1",
            "even 2",
            "unmatched 3",
            "m die shutdown"
        ]
    );
}

// R6.7: completed listeners fire after the ordinary listeners and after everything routed from the
// event, transitively.
#[test]
fn r6_7_completed_after_all_routes() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.completed(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("completed {}", e.val))
        });
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("on {}", e.val));
                if e.val == 0 {
                    cx.route(ev(2, 1));
                }
            },
        );
        cx.on_all(
            Pattern::kind(2),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("route {}", e.val));
                if e.val < 3 {
                    cx.route(ev(2, e.val + 1));
                }
            },
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(1, 5)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            "on 0",
            "route 1",
            "route 2",
            "route 3",
            "completed 0",
            "on 5",
            "completed 5",
            "m die shutdown"
        ]
    );
}

// R6.8: an instance ends on die, on panic, or with no listener left; on_die runs exactly once with
// the reason; other instances carry on; what it routed or sent before is still delivered.
#[test]
fn r6_8_instance_end_reasons() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("dier", &log, |_, cx| {
        cx.on_all(Pattern::kind(1), |_, cx: &mut Cx<'_>, _| {
            cx.route(ev(9, 1));
            cx.die();
        });
        cx.on_all(Pattern::kind(9), |m: &mut Script, _, _| {
            m.log.push("dier sees 9")
        });
    }))
    .unwrap();
    c.load(Script::new("panicker", &log, |_, cx| {
        cx.on_all(Pattern::kind(2), |_, cx: &mut Cx<'_>, _| {
            let me = cx.context();
            cx.send_to(me, ev(3, 0)).unwrap();
            cx.route(ev(3, 1));
            panic!("boom");
        });
    }))
    .unwrap();
    c.load(Script::new("idle", &log, |_, cx| {
        cx.on(Pattern::kind(4), |_, _, _| {});
    }))
    .unwrap();
    c.load(Script::new("witness", &log, |_, cx| {
        cx.on_all(Pattern::kind(3), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("witness sees 3.{}", e.val))
        });
        cx.on_all(Pattern::kind(1), |m: &mut Script, _, _| {
            m.log.push("witness sees 1")
        });
    }))
    .unwrap();
    let input = c.input();
    for k in [1, 1, 2, 2, 4, 4] {
        input.send_to(c.main(), ev(k, 0)).unwrap();
    }
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            // `die` takes effect when the dier's handler returns, before the next listener fires.
            "dier die died",
            "witness sees 1",
            // The dier's own listener on 9 is gone by the time its routed event is processed.
            "witness sees 1",
            "panicker die panicked(boom)",
            "witness sees 3.1",
            "idle die no-listeners",
            "witness sees 3.0",
            "witness die shutdown",
        ]
    );
    assert_eq!(s.totals.handler_panics, 1);
}

// R6.8: a panic inside on_die is contained and reported; on_die still ran once.
#[test]
fn r6_8_panic_in_on_die_is_contained() {
    use correlator::{DieReason, Monitor, Scope};
    struct Bad(Log);
    impl Monitor<Ev> for Bad {
        fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
            cx.on(Pattern::kind(1), |_, _, _| {});
        }
        fn on_die(&mut self, r: &DieReason, _: &mut Scope<'_, Ev, Self>) {
            self.0.push(format!("on_die {r:?}"));
            panic!("on_die fails");
        }
    }
    let c = correlator(16);
    let log = Log::default();
    c.load(Bad(log.clone())).unwrap();
    c.load(Script::new("other", &log, |_, cx| {
        cx.on_all(Pattern::kind(2), |m: &mut Script, _, _| {
            m.log.push("other alive")
        });
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(2, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        ["on_die NoListeners", "other alive", "other die shutdown"]
    );
    assert_eq!(s.totals.handler_panics, 1);
}

// R6.9: dispatch is indexed by kind: 10,000 listeners on other kinds are never consulted (only the
// matching kind's listeners fire). Cost is measured by the criterion benches, not asserted here.
#[test]
fn r6_9_dispatch_only_touches_the_events_kind() {
    let c = correlator(2000);
    let log = Log::default();
    c.load(Script::new("many", &log, |_, cx| {
        for k in 100..10_100 {
            cx.on_all(Pattern::kind(k), |m: &mut Script, _, _| m.log.push("wrong"));
        }
        cx.on_all(Pattern::kind(1), |m: &mut Script, _, _| m.count += 1);
        cx.on(Pattern::kind(2), |m: &mut Script, _, _| {
            m.log.push(format!("count {}", m.count))
        });
    }))
    .unwrap();
    let input = c.input();
    for _ in 0..1000 {
        input.send_to(c.main(), ev(1, 0)).unwrap();
    }
    input.send_to(c.main(), ev(2, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(work(&log), ["count 1000", "many die shutdown"]);
    assert_eq!(s.totals.listeners, 0);
}

// R6.8 (regression, found by the differential test): an instance that spawns a copy and dies in the
// same handler ends only its own listeners. The copy registered its listeners into slots the parent's
// ended `on` listener had freed; ending the parent must not end them.
#[test]
fn r6_8_dying_parent_keeps_its_spawned_copy_listening() {
    let c = correlator(16);
    let log = Log::default();
    fn listen(cx: &mut Cx<'_>) {
        cx.on(Pattern::kind(1), |m: &mut Script, _, _| {
            m.log.push(format!("{} got 1", m.name))
        });
        cx.on_all(Pattern::kind(3), |m: &mut Script, cx: &mut Cx<'_>, _| {
            cx.spawn(m, |m: &mut Script, cx: &mut Cx<'_>| {
                m.name = "copy";
                listen(cx);
            });
            cx.die();
        });
    }
    c.load(Script::new("parent", &log, |_, cx| listen(cx)))
        .unwrap();
    let input = c.input();
    for kind in [1, 3, 1] {
        input.send_to(c.main(), ev(kind, 0)).unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            "parent got 1",
            "parent die died",
            "copy got 1",
            "copy die shutdown"
        ]
    );
}

// R6.5, R6.7: a `completed` listener registered while an event is processed does not fire for that
// event (it was not there when the event started), only for later ones.
#[test]
fn r6_5_completed_listener_registered_during_event_skips_it() {
    let c = correlator(16);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on(
            Pattern::kind(1),
            |_: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                // Route something, so that completion comes after the registration took effect.
                cx.route(ev(2, e.val));
                cx.completed(Pattern::kind(1), |m: &mut Script, _, e: &Ev| {
                    m.log.push(format!("completed {}", e.val))
                });
            },
        );
        cx.on_all(Pattern::kind(2), |m: &mut Script, _, e: &Ev| {
            m.log.push(format!("route {}", e.val))
        });
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(work(&log), ["route 0", "completed 1", "m die shutdown"]);
}

// R6.3–R6.7 along a run of events of one kind: dispatch keeps what it needs of the last kind it
// saw, and takes a fast path while the kind has a single unkeyed `on_all` listener. Every change
// to the kind's listeners must show from the very next event: a second listener (not for the
// event that registered it, R6.5), a `completed` listener (R6.7), a quit (R6.3, the survivor is
// the only listener again), the last ordinary listener gone (the `unmatched` one fires, R6.6,
// and never before). Kind 2 checks the quit of a kind's only listener while the fast path is in
// use: the next event goes to the `unmatched` listener.
#[test]
fn r6_5_a_run_of_one_kind_sees_each_listener_change_at_the_next_event() {
    use correlator::ListenerHandle;
    use std::sync::{Arc, Mutex};
    let c = correlator(16);
    let log = Log::default();
    let handles: Arc<Mutex<Vec<ListenerHandle>>> = Arc::default();
    c.load(Script::new("m", &log, move |_, cx| {
        cx.unmatched(Pattern::kind(1), |m, _, e: &Ev| {
            m.log.push(format!("U {}", e.val))
        });
        let hs = handles.clone();
        let a = cx.on_all(Pattern::kind(1), move |m, cx: &mut Cx<'_>, e: &Ev| {
            m.log.push(format!("A {}", e.val));
            match e.val {
                1 => {
                    let mine = hs.clone();
                    let b = cx.on_all(Pattern::kind(1), move |m, cx: &mut Cx<'_>, e: &Ev| {
                        m.log.push(format!("B {}", e.val));
                        if e.val >= 6 {
                            cx.route(ev(1, e.val + 1));
                        }
                        if e.val == 7 {
                            cx.quit(mine.lock().unwrap()[1]);
                        }
                    });
                    hs.lock().unwrap().push(b);
                }
                3 => {
                    cx.completed(Pattern::kind(1), |m, _, e: &Ev| {
                        m.log.push(format!("C {}", e.val))
                    });
                }
                5 => cx.quit(hs.lock().unwrap()[0]),
                _ => {}
            }
            // Bounded, so that an engine that missed the quit fails the assertion, not the clock.
            if e.val < 50 {
                cx.route(ev(1, e.val + 1));
            }
        });
        handles.lock().unwrap().push(a);
        cx.unmatched(Pattern::kind(2), |m, _, e: &Ev| {
            m.log.push(format!("V {}", e.val))
        });
        let only: Arc<Mutex<Option<ListenerHandle>>> = Arc::default();
        let mine = only.clone();
        let d = cx.on_all(Pattern::kind(2), move |m, cx: &mut Cx<'_>, e: &Ev| {
            m.log.push(format!("D {}", e.val));
            if e.val < 50 {
                cx.route(ev(2, e.val + 1));
            }
            if e.val == 1 {
                cx.quit(mine.lock().unwrap().expect("registered"));
            }
        });
        *only.lock().unwrap() = Some(d);
    }))
    .unwrap();
    c.input().send_to(c.main(), ev(1, 0)).unwrap();
    c.input().send_to(c.main(), ev(2, 0)).unwrap();
    c.start();
    let s = c.shutdown().unwrap();
    let want = [
        "A 0", "A 1", "A 2", "B 2", "A 3", "B 3", "A 4", "B 4", "A 5", "B 5", "B 6", "B 7", "U 8",
        "C 8", "C 7", "C 6", "C 5", "C 4", "D 0", "D 1", "V 2",
    ];
    assert_eq!(log.take_work(), want);
    assert_eq!(s.context(c.main()).unwrap().processed, 12);
}
