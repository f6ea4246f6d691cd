//! SPEC R7.5-R7.8 (conditions across events, repetition and the after-match policy, timeouts,
//! `all` inside expressions) through the public API, on event time; and the status's account of
//! what matches in progress hold (R7.6: bounded by the expressions, R9.1).
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{all, AfterMatch, Correlator, Event, Expr, Match, Monitor, Pattern, Scope, Time};

/// A transaction-like event: kind, key, value, country, stamped `second` seconds in.
#[derive(Clone, Debug, PartialEq)]
struct Ev {
    kind: u32,
    key: u64,
    val: u64,
    country: u16,
    second: u64,
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
        Some(Time::from_secs(self.second))
    }
    /// Field 0: the country; field 1: the value.
    fn field(&self, field: usize) -> Option<u64> {
        match field {
            0 => Some(u64::from(self.country)),
            1 => Some(self.val),
            _ => None,
        }
    }
}

fn ev(kind: u32, key: u64, val: u64, country: u16, second: u64) -> Ev {
    Ev {
        kind,
        key,
        val,
        country,
        second,
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
}

/// The events of a match as `kind.val`, with the second it completed at.
fn show(prefix: &str, hit: &Match<Ev>) -> String {
    let evs: Vec<String> = hit
        .events
        .iter()
        .map(|e| format!("{}.{}", e.kind, e.val))
        .collect();
    format!(
        "{prefix}@{} [{}]",
        hit.time.as_nanos() / 1_000_000_000,
        evs.join(" ")
    )
}

/// Runs `register` on a one-context event-time correlator, feeds `events`, moves the clock to
/// `end` seconds, shuts down and returns the log.
fn run(
    register: impl FnOnce(&mut Scope<'_, Ev, Listen>) + Send + 'static,
    events: &[Ev],
    end: u64,
) -> Vec<String> {
    let log = Log::default();
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
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

fn when_all(expr: Expr<Ev>) -> impl FnOnce(&mut Scope<'_, Ev, Listen>) + Send + 'static {
    move |cx| {
        cx.when_all(expr, |m: &mut Listen, _cx, hit| {
            m.log.lock().unwrap().push(show("", hit))
        });
    }
}

// R7.5: fraud's second rule as one expression: a large transaction, then a card-present one in
// another country within 10 minutes; the condition sees the large one of its own match.
#[test]
fn r7_5_a_later_template_depends_on_the_earlier_match() {
    let large = Pattern::kind(1)
        .filter(|e: &Ev| e.val > 5_000)
        .named("large");
    let abroad = Pattern::kind(1).given(|p, e: &Ev| {
        p.named("large")
            .is_some_and(|large| large.country != e.country)
    });
    let rule = large.then(abroad.within(Duration::from_secs(600)));
    let events = [
        ev(1, 7, 6_000, 44, 0),  // large, in 44
        ev(1, 7, 10, 44, 10),    // same country: not it
        ev(1, 7, 8_000, 33, 20), // large in 33, and abroad for the first
        ev(1, 7, 20, 33, 30),    // abroad for neither (33 is the second's own country)
        ev(1, 7, 30, 44, 700),   // abroad for the second (33), but 680 s after it
    ];
    let got = run(when_all(rule), &events, 2_000);
    assert_eq!(got, ["@20 [1.6000 1.8000]"]);
}

// R7.6: "five failed logins within 60 s of the first", alerting once per burst
// (SkipPastLastEvent), events of other kinds in between.
#[test]
fn r7_6_a_counted_repetition_per_burst() {
    let fail = Pattern::kind(2);
    let rule = fail
        .times(3)
        .within_from_first(Duration::from_secs(60))
        .after_match(AfterMatch::SkipPastLastEvent);
    let mut events = Vec::new();
    for (i, s) in [0, 10, 20, 30, 40, 50, 200, 300, 310, 320]
        .into_iter()
        .enumerate()
    {
        events.push(ev(2, 1, i as u64, 0, s));
        events.push(ev(9, 1, 0, 0, s)); // a success between: relaxed contiguity
    }
    let got = run(when_all(rule), &events, 1_000);
    // {0 10 20}, {30 40 50}; 200 has no two more within 60 s; {300 310 320}.
    assert_eq!(
        got,
        [
            "@20 [2.0 2.1 2.2]",
            "@50 [2.3 2.4 2.5]",
            "@320 [2.7 2.8 2.9]"
        ]
    );
}

// R7.7: a trade not confirmed within 5 s is reported with the trade, at the bound; a confirmed
// one goes to the match handler.
#[test]
fn r7_7_an_unconfirmed_trade_is_reported_at_its_bound() {
    let register = |cx: &mut Scope<'_, Ev, Listen>| {
        let trade = Pattern::kind(1).named("trade");
        let confirm =
            Pattern::kind(2).given(|p, e: &Ev| p.named("trade").is_some_and(|t| t.val == e.val));
        cx.when_all_with_timeout(
            trade
                .then(confirm)
                .within_from_first(Duration::from_secs(5)),
            |m: &mut Listen, _cx, hit| m.log.lock().unwrap().push(show("ok", hit)),
            |m: &mut Listen, _cx, hit| {
                let t = hit.named("trade").map_or(0, |t| t.val);
                m.log
                    .lock()
                    .unwrap()
                    .push(format!("{} trade {t}", show("late", hit)));
            },
        );
    };
    let events = [
        ev(1, 1, 100, 0, 0),
        ev(1, 1, 101, 0, 1),
        ev(2, 1, 101, 0, 3), // confirms 101
        ev(1, 1, 102, 0, 4),
        ev(2, 1, 100, 0, 6), // too late for 100 (due at 5)
    ];
    let got = run(register, &events, 100);
    assert_eq!(
        got,
        [
            "ok@3 [1.101 2.101]",
            "late@5 [1.100] trade 100",
            "late@9 [1.102] trade 102"
        ]
    );
}

// R7.8: `when` on `a.then(all(b)).within(d)`: the first a with every b until the bound.
#[test]
fn r7_8_when_with_all_fires_for_every_b_until_the_bound() {
    let rule = Pattern::kind(1)
        .then(all(Pattern::kind(2)))
        .within(Duration::from_secs(30));
    let register = move |cx: &mut Scope<'_, Ev, Listen>| {
        cx.when(rule, |m: &mut Listen, _cx, hit| {
            m.log.lock().unwrap().push(show("", hit))
        });
    };
    let events = [
        ev(2, 1, 0, 0, 1),
        ev(1, 1, 1, 0, 2),
        ev(1, 1, 2, 0, 3),
        ev(2, 1, 3, 0, 10),
        ev(2, 1, 4, 0, 20),
        ev(2, 1, 5, 0, 40),
    ];
    let got = run(register, &events, 100);
    assert_eq!(got, ["@10 [1.1 2.3]", "@20 [1.1 2.4]"]);
}

// R7.6, R9.1: what matches in progress hold is bounded by the expression and published: one event
// a second, `at_least(2).within_from_first(10 s)` under `when_all` (a match starts at every
// event) holds at most ten matches and the 55 events inside the bound, and nothing once the
// clock passes it.
#[test]
fn r7_6_partial_matches_are_bounded_and_reported() {
    let rule = Pattern::kind(1)
        .at_least(2)
        .within_from_first(Duration::from_secs(10));
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
    let log = Log::default();
    c.load(Listen {
        log: Arc::clone(&log),
        register: Some(Box::new(when_all(rule))),
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
    for s in 0..200u64 {
        input.send_to(c.main(), ev(1, 1, s, 0, s)).unwrap();
        let st = wait_for(s + 1);
        assert_eq!(st.totals.processed, s + 1, "the context keeps up");
        most.0 = most.0.max(st.totals.partial_matches);
        most.1 = most.1.max(st.totals.partial_events);
        assert!(st.totals.partial_matches <= 10, "{st:?}");
        assert!(st.totals.partial_events <= 55, "{st:?}");
    }
    assert_eq!(most, (10, 55), "the bound is reached, so the test can tell");
    input.send_time(Time::from_secs(500)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.status().totals.partial_events > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let st = c.status();
    assert_eq!(
        (st.totals.partial_matches, st.totals.partial_events),
        (0, 0)
    );
    c.shutdown().unwrap();
    // Every match ended at its bound with the events inside it (seconds s..s+9, fewer at the end
    // of the stream); the one started at the last event has one only: not satisfied, no match.
    let got = log.lock().unwrap().clone();
    assert_eq!(got.len(), 199);
    assert_eq!(got[0], "@10 [1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9]");
    assert_eq!(got[198], "@208 [1.198 1.199]");
}

/// A monitor whose instances each listen for the events of one country (field 0), and whose
/// first instance also for values 10..20 (field 1).
#[derive(Clone)]
struct ByField {
    country: u64,
    hits: Log,
    died: Arc<Mutex<u64>>,
}

impl Monitor<Ev> for ByField {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let me = self.clone();
        for c in 1..=1_000u64 {
            cx.spawn(&me, move |m: &mut ByField, cx| {
                m.country = c;
                cx.on_all(Pattern::kind(1).field(0, c), |m: &mut ByField, _cx, e| {
                    m.hits
                        .lock()
                        .unwrap()
                        .push(format!("{} got {}", m.country, e.val));
                });
            });
        }
        cx.on_all(
            Pattern::kind(1).field_in(1, 10..20),
            |m: &mut ByField, _cx, e| {
                m.hits.lock().unwrap().push(format!("range got {}", e.val));
            },
        );
    }

    fn on_die(&mut self, _reason: &correlator::DieReason, cx: &mut Scope<'_, Ev, Self>) {
        *self.died.lock().unwrap() += 1;
        // At shutdown, an event of the instance's own country: its listener has ended and must
        // not fire (R8.1); the dispatch walks a field list of ended listeners.
        cx.route(ev(1, 0, 7_000, self.country as u16, 0));
    }
}

// R6.10: templates constrain further fields as data, by equality (indexed) and by range; an event
// reaches exactly the listeners of its field values, in registration order with the others; an
// expression's templates use them too; at shutdown no ended listener fires.
#[test]
fn r6_10_fields_as_data_reach_the_listeners_of_their_values() {
    let c = Correlator::<Ev>::builder().event_time().build().unwrap();
    let hits = Log::default();
    let died = Arc::new(Mutex::new(0));
    c.load(ByField {
        country: 0,
        hits: Arc::clone(&hits),
        died: Arc::clone(&died),
    })
    .unwrap();
    let input = c.input();
    c.start();
    for (country, val) in [(5, 1), (999, 12), (1_001, 13), (5, 30)] {
        input.send_to(c.main(), ev(1, 0, val, country, 0)).unwrap();
    }
    c.shutdown().unwrap();
    let got = hits.lock().unwrap().clone();
    // The range listener was registered by the load hook, before the spawned instances' (their
    // initialisers run after it): it fires first (R6.4), unkeyed list merged with field lists.
    assert_eq!(
        got,
        [
            "5 got 1",
            "range got 12",
            "999 got 12",
            "range got 13",
            "5 got 30"
        ]
    );
    assert_eq!(*died.lock().unwrap(), 1_001, "every instance ended once");
    // An expression over field templates: a 2 in country 3 after a 1 in country 3.
    let rule = Pattern::kind(1)
        .field(0, 3)
        .then(Pattern::kind(2).field(0, 3).field_in(1, ..=100));
    let events = [
        ev(1, 0, 1, 4, 1),
        ev(1, 0, 2, 3, 2),
        ev(2, 0, 500, 3, 3), // value above the range
        ev(2, 0, 3, 4, 4),   // another country
        ev(2, 0, 4, 3, 5),
    ];
    assert_eq!(run(when_all(rule), &events, 100), ["@5 [1.2 2.4]"]);
}

// R6.4, R6.5, R6.9: an expression whose templates of one kind are listed in several lists (one
// unkeyed and one keyed, or on two indexed fields) is offered an event of both lists once, so one
// event never matches both sides of a followed-by. (It was offered once per list: `a.then(b)`
// fired with the same event on both sides.)
#[test]
fn r6_4_an_expression_listed_twice_under_one_kind_is_offered_an_event_once() {
    let keyed = Pattern::kind(1).then(Pattern::kind(1).key(7));
    let got = run(when_all(keyed), &[ev(1, 7, 1, 0, 1), ev(1, 7, 2, 0, 2)], 10);
    assert_eq!(got, ["@2 [1.1 1.2]"]);
    // Field 0 is the country, field 1 the value.
    let fields = Pattern::kind(1)
        .field(0, 44)
        .then(Pattern::kind(1).field(1, 5));
    let got = run(
        when_all(fields),
        &[ev(1, 7, 5, 44, 1), ev(1, 8, 5, 44, 2)],
        10,
    );
    assert_eq!(got, ["@2 [1.5 1.5]"]);
    let all_three = Pattern::kind(1)
        .then(Pattern::kind(1).field(0, 44))
        .then(Pattern::kind(1).key(7));
    let got = run(
        when_all(all_three),
        &[ev(1, 7, 1, 44, 1), ev(1, 7, 2, 44, 2), ev(1, 7, 3, 44, 3)],
        10,
    );
    assert_eq!(got, ["@3 [1.1 1.2 1.3]"]);
}
