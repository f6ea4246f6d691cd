//! SPEC R7.9 - R7.11 (stream queries: windows, rows, aggregates) through the public API: on event
//! time, on external time, with late events, beside other listeners and timers, and the status's
//! account of what windows hold.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::query::{Count, Join, Max, Mean, Min, Query, Row, Sum, Window};
use correlator::{Correlator, DieReason, Error, Event, LateEvents, Monitor, Pattern, Scope, Time};

/// A reading: kind (1: a reading, 2: a derived event, 3: a marker), partition key, value, stamp.
#[derive(Clone, Debug, PartialEq)]
struct Ev {
    kind: u32,
    key: u64,
    val: i64,
    ms: u64,
}

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
    fn key(&self) -> Option<u64> {
        Some(self.key)
    }
    fn time(&self) -> Option<Time> {
        (self.kind != 2).then(|| Time::from_millis(self.ms))
    }
}

fn ev(kind: u32, key: u64, val: i64, secs: u64) -> Ev {
    Ev {
        kind,
        key,
        val,
        ms: secs * 1000,
    }
}

type Log = Arc<Mutex<Vec<String>>>;
type Register = Box<dyn FnOnce(&mut Scope<'_, Ev, Listen>) + Send>;

/// A monitor whose load hook runs a test's registration, logging into `log`.
struct Listen {
    log: Log,
    register: Option<Register>,
}

impl Monitor<Ev> for Listen {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        if let Some(r) = self.register.take() {
            r(cx);
        }
    }
    fn on_die(&mut self, reason: &DieReason, _cx: &mut Scope<'_, Ev, Self>) {
        if !matches!(reason, DieReason::Shutdown) {
            self.log.lock().unwrap().push(format!("died {reason:?}"));
        }
    }
}

impl Listen {
    fn log(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

fn secs(t: Time) -> u64 {
    t.as_nanos() / 1_000_000_000
}

/// Runs `register` on a one-context correlator (event time unless `external`), feeds `events`,
/// moves the clock to `end` seconds, shuts down and returns the log.
fn run(
    build: impl FnOnce(correlator::CorrelatorBuilder<Ev>) -> correlator::CorrelatorBuilder<Ev>,
    register: impl FnOnce(&mut Scope<'_, Ev, Listen>) + Send + 'static,
    events: &[Ev],
    end: u64,
) -> Vec<String> {
    let log = Log::default();
    let c = build(Correlator::<Ev>::builder()).build().unwrap();
    c.load(Listen {
        log: Arc::clone(&log),
        register: Some(Box::new(register)),
    })
    .unwrap();
    let input = c.input();
    c.start();
    for e in events {
        input.send_to(c.main(), e.clone()).unwrap();
    }
    input.send_time(Time::from_secs(end)).unwrap();
    c.shutdown().unwrap();
    let v = log.lock().unwrap().clone();
    v
}

fn event_time(b: correlator::CorrelatorBuilder<Ev>) -> correlator::CorrelatorBuilder<Ev> {
    b.event_time()
}

fn readings() -> Query<Ev> {
    Query::over(Pattern::kind(1))
}

// R7.9, R7.10: a sliding window per partition, a row per event after it entered; a value leaves
// at its time plus the length, before an event stamped exactly then.
#[test]
fn r7_9_sliding_windows_per_partition_with_a_row_per_event() {
    let q = readings()
        .value(|e: &Ev| e.val as f64)
        .window(Window::sliding(Duration::from_secs(10)))
        .aggregate((Count::default(), Sum::of(|v: &f64| *v)));
    let got = run(
        event_time,
        move |cx| {
            cx.query(q, |m: &mut Listen, _cx, r: &Row<(u64, f64)>| {
                m.log(format!(
                    "k{}@{} n{} sum{}",
                    r.key,
                    secs(r.time),
                    r.value.0,
                    r.value.1
                ))
            })
            .unwrap();
        },
        &[
            ev(1, 1, 5, 0),
            ev(1, 2, 7, 3),
            ev(1, 1, 1, 9),
            ev(3, 1, 0, 9),  // another kind: not taken
            ev(1, 1, 2, 10), // the value of 0 s left at 10 s, before this one entered
            ev(1, 2, 1, 40),
        ],
        100,
    );
    assert_eq!(
        got,
        [
            "k1@0 n1 sum5",
            "k2@3 n1 sum7",
            "k1@9 n2 sum6",
            "k1@10 n2 sum3",
            "k2@40 n1 sum1",
        ]
    );
}

// R7.10: `every(p)`: a row per partition with a non-empty window at every multiple of p; values
// leave before the rows of the same time; nothing after the windows empty.
#[test]
fn r7_10_periodic_rows_at_multiples_of_the_period() {
    let q = readings()
        .value(|e: &Ev| e.val as f64)
        .window(Window::sliding(Duration::from_secs(4)))
        .every(Duration::from_secs(2))
        .aggregate((Min::of(|v: &f64| *v), Max::of(|v: &f64| *v)));
    let mut got = run(
        event_time,
        move |cx| {
            cx.query(
                q,
                |m: &mut Listen, _cx, r: &Row<(Option<f64>, Option<f64>)>| {
                    m.log(format!(
                        "@{} k{} n{} {:?}..{:?}",
                        secs(r.time),
                        r.key,
                        r.len,
                        r.value.0.unwrap(),
                        r.value.1.unwrap()
                    ))
                },
            )
            .unwrap();
        },
        &[
            ev(1, 1, 5, 1),
            ev(1, 2, 9, 1),
            ev(1, 1, 3, 2),
            ev(1, 1, 8, 5),
        ],
        60,
    );
    // One time's rows come in an order the docs leave open: sort within a time.
    got.sort_by_key(|l| {
        (
            l[1..l.find(' ').unwrap()].parse::<u64>().unwrap(),
            l.clone(),
        )
    });
    assert_eq!(
        got,
        [
            // At 2 s: the event of 2 s comes after the rows of 2 s.
            "@2 k1 n1 5.0..5.0",
            "@2 k2 n1 9.0..9.0",
            // At 4 s: all three are in (1 + 4 = 5 > 4).
            "@4 k1 n2 3.0..5.0",
            "@4 k2 n1 9.0..9.0",
            // At 6 s: the values of 1 s and 2 s left (at 5 s and 6 s); key 2 emptied.
            "@6 k1 n1 8.0..8.0",
            "@8 k1 n1 8.0..8.0",
        ]
    );
}

// R7.10: a tumbling window hands each partition's aggregate when it closes, under external time
// (the clock moved by `send_time` only), and keeps no values.
#[test]
fn r7_10_tumbling_windows_close_on_the_clock_under_external_time() {
    let q = readings()
        .value(|e: &Ev| e.val as f64)
        .window(Window::tumbling(Duration::from_secs(10)))
        .aggregate(Mean::of(|v: &f64| *v));
    let log = Log::default();
    let c = Correlator::<Ev>::builder().external_time().build().unwrap();
    c.load(Listen {
        log: Arc::clone(&log),
        register: Some(Box::new(move |cx: &mut Scope<'_, Ev, Listen>| {
            cx.query(q, |m: &mut Listen, _cx, r: &Row<Option<f64>>| {
                m.log(format!(
                    "@{} k{} n{} {:?}",
                    secs(r.time),
                    r.key,
                    r.len,
                    r.value
                ))
            })
            .unwrap();
        })),
    })
    .unwrap();
    let input = c.input();
    c.start();
    input.send_time(Time::from_secs(3)).unwrap();
    input.send_to(c.main(), ev(1, 1, 2, 0)).unwrap();
    input.send_to(c.main(), ev(1, 1, 4, 0)).unwrap();
    input.send_time(Time::from_secs(12)).unwrap();
    input.send_to(c.main(), ev(1, 1, 10, 0)).unwrap();
    input.send_time(Time::from_secs(35)).unwrap();
    c.shutdown().unwrap();
    let got = log.lock().unwrap().clone();
    assert_eq!(got, ["@10 k1 n2 Some(3.0)", "@20 k1 n1 Some(10.0)"]);
}

// R7.10: an event's row comes at the query's place among the event's listeners (registration
// order); a routed row is an event that another listener of the monitor matches on: "a mean
// above a threshold followed by a drop" is one monitor.
#[test]
fn r7_10_rows_in_listener_order_and_routed_rows_are_matched() {
    let q = readings()
        .value(|e: &Ev| e.val as f64)
        .window(Window::count(2))
        .aggregate(Mean::of(|v: &f64| *v));
    let got = run(
        event_time,
        move |cx| {
            cx.on_all(Pattern::kind(1), |m: &mut Listen, _cx, e: &Ev| {
                m.log(format!("before {}", e.val))
            });
            cx.query(q, |m: &mut Listen, cx, r: &Row<Option<f64>>| {
                let mean = r.value.unwrap();
                m.log(format!("row {mean}"));
                if mean > 10.0 {
                    cx.route(Ev {
                        kind: 2,
                        key: r.key,
                        val: mean as i64,
                        ms: 0,
                    });
                }
            })
            .unwrap();
            cx.on_all(Pattern::kind(1), |m: &mut Listen, _cx, e: &Ev| {
                m.log(format!("after {}", e.val))
            });
            // A high mean, then a reading below 5 within 30 s.
            let high = Pattern::kind(2);
            let drop = Pattern::kind(1).filter(|e: &Ev| e.val < 5);
            cx.when_all(
                high.then(drop).within(Duration::from_secs(30)),
                |m: &mut Listen, _cx, hit| {
                    m.log(format!(
                        "alert {} then {}",
                        hit.events[0].val, hit.events[1].val
                    ))
                },
            );
        },
        &[ev(1, 1, 8, 0), ev(1, 1, 20, 1), ev(1, 1, 3, 2)],
        100,
    );
    assert_eq!(
        got,
        [
            "before 8",
            "row 8",
            "after 8",
            "before 20",
            "row 14",
            "after 20",
            // The routed row (mean 14) is processed after the event's listeners (R3).
            "before 3",
            "row 11.5",
            "after 3",
            "alert 14 then 3",
        ]
    );
}

// R7.10: periodic rows are a timer of the query's listener, in due-time order with an
// expression's timers; R7.9: windows run on the context's clock.
#[test]
fn r7_10_periodic_rows_interleave_with_other_timers_in_due_order() {
    let q = readings()
        .window(Window::sliding(Duration::from_secs(100)))
        .every(Duration::from_secs(10));
    let got = run(
        event_time,
        move |cx| {
            cx.when_all(
                correlator::wait(Duration::from_secs(15)),
                |m: &mut Listen, cx, _| m.log(format!("wait@{}", secs(cx.now()))),
            );
            cx.query(q, |m: &mut Listen, _cx, r: &Row<u64>| {
                m.log(format!("row@{} n{}", secs(r.time), r.value))
            })
            .unwrap();
        },
        &[ev(1, 1, 0, 1), ev(3, 1, 0, 31)],
        31,
    );
    // At 30 s both are due: the wait's timer was set at 15 s, the query's (for its row of 30 s)
    // at 20 s, when it handed the row of 20 s: creation order puts the wait first.
    assert_eq!(
        got,
        ["row@10 n1", "wait@15", "row@20 n1", "wait@30", "row@30 n1"]
    );
}

// R7.10 with R6.8: a `quit` in the handler ends the query after the rows of that time; `die`
// ends the instance; no row after.
#[test]
fn r7_10_quit_in_the_handler_ends_the_query_after_that_times_rows() {
    let q = readings()
        .window(Window::sliding(Duration::from_secs(100)))
        .every(Duration::from_secs(10));
    let got = run(
        event_time,
        move |cx| {
            let handle = Arc::new(Mutex::new(None));
            let h = Arc::clone(&handle);
            let got = cx
                .query(q, move |m: &mut Listen, cx, r: &Row<u64>| {
                    m.log(format!("row@{} k{}", secs(r.time), r.key));
                    if let Some(h) = h.lock().unwrap().take() {
                        cx.quit(h);
                    }
                })
                .unwrap();
            *handle.lock().unwrap() = Some(got);
            // Keeps the instance alive after the query ends.
            cx.on_all(Pattern::kind(3), |_m: &mut Listen, _cx, _e: &Ev| {});
        },
        &[ev(1, 1, 0, 1), ev(1, 2, 0, 2), ev(3, 1, 0, 50)],
        50,
    );
    let mut got = got;
    got.sort();
    assert_eq!(got, ["row@10 k1", "row@10 k2"]);
}

// R7.9 with the late-event policy: under `Process` a late event enters at the clock's time (and
// leaves d after it); under `Drop` it never enters.
#[test]
fn r7_9_late_events_follow_the_builders_policy() {
    let register = || {
        move |cx: &mut Scope<'_, Ev, Listen>| {
            let q = readings().window(Window::sliding(Duration::from_secs(10)));
            cx.query(q, |m: &mut Listen, _cx, r: &Row<u64>| {
                m.log(format!("@{} n{}", secs(r.time), r.value))
            })
            .unwrap();
        }
    };
    let events = [
        ev(1, 1, 0, 20),
        ev(1, 1, 0, 5),
        ev(1, 1, 0, 29),
        ev(1, 1, 0, 30),
    ];
    let processed = run(|b| b.event_time(), register(), &events, 100);
    // The late one (5 s) entered at 20 s, so it leaves at 30 s with the first.
    assert_eq!(processed, ["@20 n1", "@20 n2", "@29 n3", "@30 n2"]);
    let dropped = run(
        |b| b.event_time().late_events(LateEvents::Drop),
        register(),
        &events,
        100,
    );
    assert_eq!(dropped, ["@20 n1", "@29 n2", "@30 n2"]);
}

// R7.9: settings that cannot work are a typed error; nothing is registered.
#[test]
fn r7_9_an_invalid_query_is_a_typed_error() {
    let seen = Log::default();
    let s = Arc::clone(&seen);
    let got = run(
        event_time,
        move |cx| {
            let q = readings().window(Window::count(0));
            match cx.query(q, |m: &mut Listen, _cx, _r: &Row<u64>| m.log("row".into())) {
                Err(e @ Error::InvalidQuery { .. }) => s.lock().unwrap().push(format!("{e}")),
                other => panic!("{other:?}"),
            }
            cx.on_all(Pattern::kind(1), |m: &mut Listen, _cx, _e: &Ev| {
                m.log("event".into())
            });
        },
        &[ev(1, 1, 0, 1)],
        10,
    );
    assert_eq!(got, ["event"], "no query was registered");
    assert_eq!(
        *seen.lock().unwrap(),
        ["invalid stream query: a count window of zero values holds nothing"]
    );
}

// R6.8 for queries: a panic in what the query computes of an event ends the instance (counted),
// the context carries on.
#[test]
fn r7_9_a_panic_in_a_query_ends_its_instance() {
    let log = Log::default();
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
    c.load(Listen {
        log: Arc::clone(&log),
        register: Some(Box::new(|cx: &mut Scope<'_, Ev, Listen>| {
            let q = readings().value(|e: &Ev| {
                assert!(e.val != 13, "unlucky");
                e.val
            });
            cx.query(q, |m: &mut Listen, _cx, r: &Row<u64>| {
                m.log(format!("n{}", r.value))
            })
            .unwrap();
        })),
    })
    .unwrap();
    let input = c.input();
    c.start();
    for v in [1, 13, 2] {
        input.send_to(c.main(), ev(1, 1, v, v as u64)).unwrap();
    }
    c.shutdown().unwrap();
    assert_eq!(c.status().totals.handler_panics, 1);
    let got = log.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], "n1");
    assert!(got[1].starts_with("died Panic"), "{got:?}");
}

// R7.11: what windows hold is bounded by their definition and reported; it goes back to zero
// when the windows empty, and when the query's instance ends.
#[test]
fn r7_11_window_memory_is_bounded_and_reported() {
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
    let log = Log::default();
    c.load(Listen {
        log: Arc::clone(&log),
        register: Some(Box::new(|cx: &mut Scope<'_, Ev, Listen>| {
            let q = readings().window(Window::sliding(Duration::from_secs(10)));
            cx.query(q, |_m: &mut Listen, _cx, _r: &Row<u64>| {})
                .unwrap();
            // Ends the instance (and its query) on a marker.
            cx.on(Pattern::kind(3), |_m: &mut Listen, cx, _e: &Ev| cx.die());
        })),
    })
    .unwrap();
    let input = c.input();
    c.start();
    let wait_for = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = c.status();
            if s.totals.processed >= n || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let mut most = (0, 0);
    for s in 0..100u64 {
        // Three partitions, one event a second in turn.
        input.send_to(c.main(), ev(1, s % 3, 0, s)).unwrap();
        let st = wait_for(s + 1);
        assert_eq!(st.totals.processed, s + 1, "the context keeps up");
        most.0 = most.0.max(st.totals.window_partitions);
        most.1 = most.1.max(st.totals.window_values);
        // The values inside the 10 s window, and those whose time ended less than 10 s / 64
        // ago (released in batches, by a timer that late at most): one a second, so 11.
        assert!(st.totals.window_values <= 11, "{st:?}");
    }
    assert_eq!(most, (3, 11), "the bound is reached, so the test can tell");
    // Past every value's time: nothing held.
    input.send_time(Time::from_secs(200)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.status().totals.window_values > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let st = c.status();
    assert_eq!(
        (st.totals.window_partitions, st.totals.window_values),
        (0, 0)
    );
    // Filled again, then the instance ends: its windows go with it.
    for s in 200..205u64 {
        input.send_to(c.main(), ev(1, s, 0, s)).unwrap();
    }
    let st = wait_for(105);
    assert_eq!(
        (st.totals.window_partitions, st.totals.window_values),
        (5, 5)
    );
    input.send_to(c.main(), ev(3, 0, 0, 205)).unwrap();
    let st = wait_for(106);
    assert_eq!(
        (st.totals.window_partitions, st.totals.window_values),
        (0, 0)
    );
    assert_eq!(st.totals.instances, 0);
    c.shutdown().unwrap();
}

// R7.9 with `group_by`: each group of a partition is a window of its own, and its rows carry the
// group; a count window keeps the last n values of the group.
#[test]
fn r7_9_groups_of_a_partition_have_windows_of_their_own() {
    let q = readings()
        .group_by(|e: &Ev| (e.val % 2) as u64)
        .value(|e: &Ev| e.val as f64)
        .window(Window::count(2))
        .aggregate(Sum::of(|v: &f64| *v));
    let got = run(
        event_time,
        move |cx| {
            cx.query(q, |m: &mut Listen, _cx, r: &Row<f64>| {
                m.log(format!(
                    "k{} g {:?} n{} sum{}",
                    r.key, r.group, r.len, r.value
                ))
            })
            .unwrap();
        },
        &[
            ev(1, 1, 2, 0),
            ev(1, 1, 3, 1),
            ev(1, 1, 4, 2),
            ev(1, 1, 6, 3),
            ev(1, 2, 5, 4),
        ],
        10,
    );
    assert_eq!(
        got,
        [
            "k1 g Some(0) n1 sum2",
            "k1 g Some(1) n1 sum3",
            "k1 g Some(0) n2 sum6",
            // The group's last two: 4 and 6 (the 2 left; the 3 of the other group stays).
            "k1 g Some(0) n2 sum10",
            "k2 g Some(1) n1 sum5",
        ]
    );
}

fn pairs(
    register: impl FnOnce(&mut Scope<'_, Ev, Listen>) + Send + 'static,
    events: &[Ev],
) -> Vec<String> {
    run(event_time, register, events, 1_000)
}

fn log_pair(m: &mut Listen, _cx: &mut Scope<'_, Ev, Listen>, l: &Ev, r: &Ev) {
    m.log(format!("{}.{}+{}.{}", l.kind, l.val, r.kind, r.val));
}

// R7.12: a join pairs the events of two templates with equal keys taken within its length of
// each other, in either order, oldest first; an event leaves its side at its time plus the
// length, exclusive.
#[test]
fn r7_12_a_join_pairs_events_with_equal_keys_within_its_length() {
    let got = pairs(
        |cx| {
            let join = Join::of(Pattern::kind(1), Pattern::kind(3)).within(Duration::from_secs(10));
            cx.join(join, log_pair).unwrap();
        },
        &[
            ev(1, 7, 1, 0),
            ev(1, 7, 2, 5),
            ev(1, 8, 3, 6),   // another key
            ev(3, 7, 10, 9),  // joins 1 and 2, oldest first
            ev(3, 7, 11, 10), // 1 left at 10 s: joins 2 only
            ev(1, 7, 4, 12),  // joins the right events 10 and 11
            ev(3, 8, 12, 30), // key 8's left event left at 16 s
        ],
    );
    assert_eq!(
        got,
        ["1.1+3.10", "1.2+3.10", "1.2+3.11", "1.4+3.10", "1.4+3.11"]
    );
}

// R7.12: keys by function per side; a self-join (one template on both sides) pairs an event with
// those before it, never with itself; what the join holds is reported and goes when it leaves.
#[test]
fn r7_12_a_self_join_on_key_functions_never_pairs_an_event_with_itself() {
    let got = pairs(
        |cx| {
            // Same parity of value, within 5 s.
            let join = Join::of(Pattern::kind(1), Pattern::kind(1))
                .on(|l: &Ev| (l.val % 2) as u64, |r: &Ev| (r.val % 2) as u64)
                .within(Duration::from_secs(5));
            cx.join(join, log_pair).unwrap();
        },
        &[
            ev(1, 1, 1, 0),
            ev(1, 2, 3, 1),
            ev(1, 3, 4, 2),
            ev(1, 4, 5, 9),
        ],
    );
    // 3 joins 1 as a left event (3 with the right 1) and as a right one (1 with the right 3).
    assert_eq!(got, ["1.3+1.1", "1.1+1.3"]);
}

// R7.12: a join of zero length is a typed error.
#[test]
fn r7_12_a_join_of_zero_length_is_a_typed_error() {
    let seen = Log::default();
    let s = Arc::clone(&seen);
    pairs(
        move |cx| {
            let join = Join::of(Pattern::kind(1), Pattern::kind(3)).within(Duration::ZERO);
            match cx.join(join, log_pair) {
                Err(e @ Error::InvalidQuery { .. }) => s.lock().unwrap().push(format!("{e}")),
                other => panic!("{other:?}"),
            }
        },
        &[],
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["invalid stream query: a join of zero length holds nothing"]
    );
}

// R7.11 for joins: what both sides hold is in the status, and goes back to zero when the events
// leave.
#[test]
fn r7_12_what_a_join_holds_is_reported_and_bounded() {
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
    c.load(Listen {
        log: Log::default(),
        register: Some(Box::new(|cx: &mut Scope<'_, Ev, Listen>| {
            let join = Join::of(Pattern::kind(1), Pattern::kind(3)).within(Duration::from_secs(10));
            cx.join(join, log_pair).unwrap();
        })),
    })
    .unwrap();
    let input = c.input();
    c.start();
    for (k, key, s) in [(1, 1, 0), (1, 2, 1), (3, 1, 2), (1, 1, 3)] {
        input.send_to(c.main(), ev(k, key, 0, s)).unwrap();
    }
    let settled = |want: (u64, u64)| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let t = c.status().totals;
            if (t.window_partitions, t.window_values) == want || Instant::now() > deadline {
                return (t.window_partitions, t.window_values);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // Left: key 1 (two events), key 2; right: key 1.
    assert_eq!(settled((3, 4)), (3, 4));
    // Events whose time is up are released by the join's timer at most 10 s / 64 later: at 13 s
    // those of 0, 1 and 2 s are gone (their times 10, 11, 12 s), the left event of 3 s stays.
    input.send_time(Time::from_secs(13)).unwrap();
    assert_eq!(settled((1, 1)), (1, 1));
    input.send_time(Time::from_secs(14)).unwrap();
    assert_eq!(settled((0, 0)), (0, 0));
    c.shutdown().unwrap();
}
