//! SPEC §7 (time, timers, event expressions) and the keyed half of R6.9, through the public API.
//! Every test drives time externally, so each is deterministic.
mod common;

#[allow(dead_code)]
#[path = "../examples/heartbeat.rs"]
mod heartbeat;
#[allow(dead_code)]
#[path = "../examples/price_spike.rs"]
mod price_spike;

use std::time::Duration;

use common::*;
use correlator::{
    not, wait, ContextOptions, Correlator, Expr, Match, Monitor, Pattern, Scope, Time,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn t(s: u64) -> Time {
    Time::from_secs(s)
}

fn ms(m: u64) -> Time {
    Time::from_millis(m)
}

fn work(log: &Log) -> Vec<String> {
    log.take_work()
}

// R7.1: ticks travel through the inbox and keep their order with other entries; a handler reads
// the context's logical time, the time at which its event was taken.
#[test]
fn r7_1_ticks_keep_their_order_with_events() {
    let c = correlator(64);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("{}@{}", e.val, cx.now()));
                cx.route(ev(2, e.val));
            },
        );
        cx.on_all(
            Pattern::kind(2),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("routed {}@{}", e.val, cx.now()));
            },
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    input.send_time(t(5)).unwrap();
    input.send_to(c.main(), ev(1, 2)).unwrap();
    input.send_time(t(3)).unwrap(); // time never goes back
    input.send_to(c.main(), ev(1, 3)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            "1@0.000s",
            "routed 1@0.000s",
            "2@5.000s",
            "routed 2@5.000s",
            "3@5.000s",
            "routed 3@5.000s"
        ]
    );
}

// R7.1: per-context clocks advance independently.
#[test]
fn r7_1_per_context_clocks_are_independent() {
    let c = correlator(64);
    let b = c.create_context(ContextOptions::new("b")).unwrap();
    let log = Log::default();
    for (ctx, name) in [(c.main(), "main"), (b, "b")] {
        c.load_in(
            ctx,
            Script::new(name, &log, |_, cx| {
                cx.on_all(Pattern::kind(1), |m: &mut Script, cx: &mut Cx<'_>, _| {
                    m.log.push(format!("{} {}", m.name, cx.now()));
                });
            }),
        )
        .unwrap();
    }
    let input = c.input();
    c.start();
    input.send_time_to(b, t(10)).unwrap();
    input.send_to(b, ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    c.shutdown().unwrap();
    let mut got = work(&log);
    got.sort();
    assert_eq!(got, ["b 10.000s", "main 0.000s"]);
}

// R7.1: by default the correlator's clock thread ticks (here at 100 per second).
#[test]
fn r7_1_clock_thread_advances_time() {
    let c = Correlator::<Ev>::builder().tick_rate(100).build().unwrap();
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.when(
            wait(Duration::from_millis(30)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Ev>| {
                m.log
                    .push(format!("timer at or after 30ms: {}", cx.now() >= ms(30)));
            },
        );
    }))
    .unwrap();
    c.start();
    assert!(eventually(|| log.count("timer at or after 30ms: true") == 1));
    c.shutdown().unwrap();
}

// R7.2: a timer fires between two queued events at the right place: its tick is an inbox entry.
#[test]
fn r7_2_timer_fires_between_queued_events() {
    let c = correlator(64);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.when(
            wait(secs(2)),
            |m: &mut Script, cx: &mut Cx<'_>, hit: &Match<Ev>| {
                m.log.push(format!("timer@{} now {}", hit.time, cx.now()));
            },
        );
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Ev| {
                m.log.push(format!("E{}@{}", e.val, cx.now()));
            },
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 1)).unwrap();
    input.send_time(t(3)).unwrap();
    input.send_to(c.main(), ev(1, 2)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        ["E1@0.000s", "timer@2.000s now 2.000s", "E2@3.000s"]
    );
}

// R7.2: timers due at one tick fire in trigger-time order, then creation order; a large jump fires
// every due occurrence of a repeating timer, in order, each with the clock at its trigger time.
#[test]
fn r7_2_due_timers_order_and_catch_up() {
    let c = correlator(64);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.when(
            wait(secs(2)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Ev>| m.log.push(format!("A2@{}", cx.now())),
        );
        cx.when(
            wait(secs(1)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Ev>| m.log.push(format!("B1@{}", cx.now())),
        );
        cx.when(
            wait(secs(1)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Ev>| m.log.push(format!("C1@{}", cx.now())),
        );
        cx.when_all(
            wait(Duration::from_millis(1500)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Ev>| m.log.push(format!("R@{}", cx.now())),
        );
    }))
    .unwrap();
    let input = c.input();
    input.send_time(ms(4_600)).unwrap();
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        [
            "B1@1.000s",
            "C1@1.000s",
            "R@1.500s",
            "A2@2.000s",
            "R@3.000s",
            "R@4.500s"
        ]
    );
}

// R7.3: within expires exactly at the bound: an event taken before the bound matches, a tick to the
// bound ends the listener (and removes it).
#[test]
fn r7_3_within_expires_exactly_at_the_bound() {
    for (event_at, expect) in [(4_999, true), (5_000, false)] {
        let c = correlator(64);
        let log = Log::default();
        c.load(Script::new("m", &log, |_, cx| {
            cx.when(
                Pattern::kind(1).within(secs(5)),
                |m: &mut Script, _, hit: &Match<Ev>| {
                    m.log
                        .push(format!("matched {} at {}", hit.events[0].val, hit.time));
                },
            );
            cx.on_all(Pattern::kind(9), |_, _, _| {});
        }))
        .unwrap();
        let input = c.input();
        input.send_time(ms(event_at)).unwrap();
        input.send_to(c.main(), ev(1, 7)).unwrap();
        c.start();
        // Either way the `when` listener is gone: it fired, or it can no longer fire.
        assert!(eventually(|| c.status().totals.listeners == 1));
        c.shutdown().unwrap();
        let got = work(&log);
        if expect {
            assert_eq!(got, ["matched 7 at 4.999s"]);
        } else {
            assert!(got.is_empty(), "{got:?}");
        }
    }
}

// R7.3: `not` cancels a pending followed-by, and the listener that can no longer fire is removed.
#[test]
fn r7_3_not_cancels_pending_followed_by() {
    let c = correlator(64);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        let expr = Pattern::kind(1)
            .then(Pattern::kind(2))
            .and(not(Pattern::kind(3)));
        cx.when(expr, |m: &mut Script, _, _: &Match<Ev>| m.log.push("fired"));
        cx.on_all(Pattern::kind(9), |_, _, _| {});
    }))
    .unwrap();
    let input = c.input();
    input.send_to(c.main(), ev(1, 0)).unwrap();
    input.send_to(c.main(), ev(3, 0)).unwrap();
    c.start();
    assert!(eventually(|| c.status().totals.listeners == 1));
    input.send_to(c.main(), ev(2, 0)).unwrap();
    c.shutdown().unwrap();
    assert!(work(&log).is_empty());
}

// R7.3: when_all(a -> b) starts a new match at every a; and, or; the match carries the events.
#[test]
fn r7_3_expressions_through_the_engine() {
    let c = correlator(64);
    let log = Log::default();
    c.load(Script::new("m", &log, |_, cx| {
        cx.when_all(
            Pattern::kind(1).then(Pattern::kind(2)),
            |m: &mut Script, _, hit: &Match<Ev>| {
                let v: Vec<String> = hit.events.iter().map(|e| e.val.to_string()).collect();
                m.log.push(format!("seq {}", v.join("->")));
            },
        );
        cx.when(
            Pattern::kind(3).and(Pattern::kind(4)),
            |m: &mut Script, _, _: &Match<Ev>| m.log.push("and"),
        );
        cx.when_all(
            Pattern::kind(5).or(Pattern::kind(6)),
            |m: &mut Script, _, hit: &Match<Ev>| m.log.push(format!("or {}", hit.events[0].kind)),
        );
    }))
    .unwrap();
    let input = c.input();
    for (k, v) in [
        (1, 10),
        (4, 0),
        (1, 11),
        (6, 0),
        (2, 20),
        (3, 0),
        (5, 0),
        (2, 21),
    ] {
        input.send_to(c.main(), ev(k, v)).unwrap();
    }
    c.start();
    c.shutdown().unwrap();
    assert_eq!(
        work(&log),
        ["or 6", "seq 10->20", "seq 11->20", "and", "or 5"]
    );
}

// R6.9: templates keyed on a field are dispatched through a hash index; keyed and unkeyed listeners
// of one kind still fire in registration order (R6.4).
#[test]
fn r6_9_keyed_index_and_order() {
    #[derive(Clone, Debug)]
    struct K(u64);
    impl correlator::Event for K {
        type Kind = ();
        fn kind(&self) {}
        fn key(&self) -> Option<u64> {
            Some(self.0)
        }
    }
    struct Many(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
    impl correlator::Monitor<K> for Many {
        fn on_load(&mut self, cx: &mut correlator::Scope<'_, K, Self>) {
            cx.on_all(Pattern::kind(()), |m: &mut Many, _, e: &K| {
                m.0.lock().unwrap().push(format!("any {}", e.0))
            });
            for key in 0..10_000u64 {
                cx.on_all(Pattern::kind(()).key(key), move |m: &mut Many, _, _: &K| {
                    m.0.lock().unwrap().push(format!("key {key}"))
                });
            }
            cx.on_all(
                Pattern::kind(()).filter(|e: &K| e.0 == 42),
                |m: &mut Many, _, _: &K| m.0.lock().unwrap().push("filter 42".to_string()),
            );
            cx.on(Pattern::kind(()).key(42), |m: &mut Many, _, _: &K| {
                m.0.lock().unwrap().push("once 42".to_string())
            });
        }
    }
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let c = Correlator::<K>::builder().external_time().build().unwrap();
    c.load(Many(log.clone())).unwrap();
    let input = c.input();
    for k in [42, 7, 42, 123_456] {
        input.send_to(c.main(), K(k)).unwrap();
    }
    c.start();
    let s = c.shutdown().unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "any 42",
            "key 42",
            "filter 42",
            "once 42",
            "any 7",
            "key 7",
            "any 42",
            "key 42",
            "filter 42",
            "any 123456"
        ]
    );
    assert_eq!(s.totals.instances, 0);
}

// R7.3 example: the price-spike monitor raises exactly the expected alerts.
#[test]
fn r7_3_price_spike_example_alerts() {
    let alerts = price_spike::run().unwrap();
    let got: Vec<(u64, Time)> = alerts.iter().map(|(s, at, _)| (*s, *at)).collect();
    assert_eq!(got, [(1, ms(4_500)), (2, ms(12_000))]);
    assert!(alerts[0].2.contains("100.00 -> 106.00"));
    assert!(alerts[0].2.contains("drop to 300"));
}

// R7.3 example: the heartbeat monitor raises exactly the expected alarms.
#[test]
fn r7_3_heartbeat_example_alarms() {
    assert_eq!(
        heartbeat::run(25).unwrap(),
        [(2, t(9)), (1, t(13)), (1, t(20))]
    );
}

// R7.1-R7.3: deterministic: the same results on every run.
#[test]
fn r7_deterministic_over_repeated_runs() {
    let first = (heartbeat::run(25).unwrap(), price_spike::run().unwrap());
    for _ in 0..20 {
        assert_eq!(
            (heartbeat::run(25).unwrap(), price_spike::run().unwrap()),
            first
        );
    }
}

/// A monitor with one repeating listener on `expr` that logs `"<first>-><second>@<time>"` per
/// match, and `"die"` when it ends. Its own type, so that the captured log can be told apart from
/// the other tests' lines.
struct QuietSpell {
    expr: Option<Expr<Ev>>,
    log: Log,
}

impl Monitor<Ev> for QuietSpell {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let expr = self.expr.take().expect("loaded once");
        cx.when_all(
            expr,
            |m: &mut Self, _: &mut Scope<'_, Ev, Self>, hit: &Match<Ev>| {
                let vals: Vec<String> = hit.events.iter().map(|e| e.val.to_string()).collect();
                m.log.push(format!("{}@{}", vals.join("->"), hit.time));
            },
        );
    }

    fn on_die(&mut self, _: &correlator::DieReason, _: &mut Scope<'_, Ev, Self>) {
        self.log.push("die");
    }
}

/// Runs a [`QuietSpell`] on `expr` over `feed` (`(kind, val, at_s)`: the clock is moved to
/// `at_s` seconds before the event), after a quiet spell of 60 s; returns its log, with
/// `"shutdown"` where the shutdown began.
fn quiet_spell(expr: Expr<Ev>, feed: &[(u32, u64, u64)]) -> Vec<String> {
    let c = correlator(64);
    let log = Log::default();
    c.load(QuietSpell {
        expr: Some(expr),
        log: log.clone(),
    })
    .unwrap();
    let input = c.input();
    c.start();
    input.send_time(t(60)).unwrap();
    for &(kind, val, at_s) in feed {
        input.send_time(t(at_s)).unwrap();
        input.send_to(c.main(), ev(kind, val)).unwrap();
    }
    assert!(
        eventually(|| c.status().totals.processed >= feed.len() as u64),
        "the events were processed"
    );
    let mut lines = log.snapshot();
    lines.push("shutdown".to_string());
    c.shutdown().unwrap();
    lines.extend(log.take().into_iter().skip(lines.len() - 1));
    lines
}

/// Everything `tracing` logged in this test binary so far (INFO and above).
fn logged() -> String {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED.get_or_init(Captured::install_global).text()
}

/// A quiet spell of 60 s, then pairs `1 -> 2`: 3 s apart, 10 s apart (exactly the bound), 9 s apart.
const PAIRS: [(u32, u64, u64); 6] = [
    (1, 1, 60),
    (2, 2, 63),
    (1, 3, 80),
    (2, 4, 90),
    (1, 5, 100),
    (2, 6, 109),
];

// R7.3 ("`within`", "A repeating listener never ends in silence"): `within(d)` counts from the
// moment the match starts, so after a quiet spell longer than `d` the repeating listener has
// ended, with its instance, before the first pair; that is logged at INFO, naming the monitor and
// the bound counted from the first event.
#[test]
fn r7_3_when_all_within_ends_after_a_quiet_spell_and_logs_it() {
    logged();
    let lines = quiet_spell(
        Pattern::kind(1).then(Pattern::kind(2)).within(secs(10)),
        &PAIRS,
    );
    assert_eq!(lines, ["die", "shutdown"]);
    let text = logged();
    let ended: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("of monitor time_expr::QuietSpell ended"))
        .collect();
    assert_eq!(ended.len(), 1, "one line for the one listener: {text}");
    assert!(
        ended[0].contains("INFO")
            && ended[0].contains("when_all")
            && ended[0].contains("can no longer match")
            && ended[0].contains("within_from_first"),
        "the line says what ended, why, and what to write instead: {}",
        ended[0]
    );
}

// R7.3 ("`within_from_first`"): its clock starts at the expression's first event, so the pair after
// a quiet spell fires, every later pair fires on its own clock, and a pair exactly `d` apart is too
// late (the bound is exclusive, as `within`'s); the listener and its instance live on.
#[test]
fn r7_3_within_from_first_fires_after_a_quiet_spell_and_for_every_pair() {
    let lines = quiet_spell(
        Pattern::kind(1)
            .then(Pattern::kind(2))
            .within_from_first(secs(10)),
        &PAIRS,
    );
    assert_eq!(lines, ["1->2@63.000s", "5->6@109.000s", "shutdown", "die",]);
}
