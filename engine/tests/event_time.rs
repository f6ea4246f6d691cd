//! SPEC §7 under event time (`CorrelatorBuilder::event_time`, `Event::time`), and the tick-mode
//! warning for bounds shorter than the tick period. Every scenario runs in a thread of its own
//! with a generous bound on its result, so a hang fails the test instead of stalling the suite.

mod common;

#[allow(dead_code)]
#[path = "../examples/cancel_within.rs"]
mod cancel_within;

use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

use correlator::{
    at, not, wait, ContextOptions, Correlator, CorrelatorBuilder, Error, Event, LateEvents, Match,
    Monitor, OutputOptions, Overflow, Pattern, Scope, Status, Time,
};

/// A test event: a kind, an optional stamp in milliseconds, a label; `"boom"` panics in `time()`.
#[derive(Clone, Debug)]
struct Stamped {
    kind: u32,
    ms: Option<u64>,
    label: &'static str,
}

impl Event for Stamped {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
    fn time(&self) -> Option<Time> {
        assert!(self.label != "boom", "time() of a broken event");
        self.ms.map(Time::from_millis)
    }
}

fn at_ms(kind: u32, ms: u64, label: &'static str) -> Stamped {
    Stamped {
        kind,
        ms: Some(ms),
        label,
    }
}

fn unstamped(kind: u32, label: &'static str) -> Stamped {
    Stamped {
        kind,
        ms: None,
        label,
    }
}

/// A thread-safe list of what happened, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

type Cx<'a> = Scope<'a, Stamped, Script>;
type LoadFn = Box<dyn FnOnce(&mut Cx<'_>) + Send>;

/// A monitor whose load hook is a closure.
struct Script {
    log: Log,
    load: Option<LoadFn>,
}

impl Script {
    fn new(log: &Log, load: impl FnOnce(&mut Cx<'_>) + Send + 'static) -> Self {
        Self {
            log: log.clone(),
            load: Some(Box::new(load)),
        }
    }
}

impl Monitor<Stamped> for Script {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        if let Some(f) = self.load.take() {
            f(cx);
        }
    }
}

/// Logs `"<label>@<now>"` for every event of `kind`.
fn log_kind(cx: &mut Cx<'_>, kind: u32) {
    cx.on_all(
        Pattern::kind(kind),
        |m: &mut Script, cx: &mut Cx<'_>, e: &Stamped| {
            m.log.push(format!("{}@{}", e.label, cx.now()))
        },
    );
}

fn event_time() -> Correlator<Stamped> {
    Correlator::builder()
        .event_time()
        .inbox_capacity(256)
        .build()
        .expect("valid configuration")
}

/// Runs `scenario` on a thread of its own; fails the test if it takes more than two minutes.
fn bounded<T: Send + 'static>(scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(scenario());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the scenario panicked or did not finish within two minutes")
}

/// What the feeder puts into `main`'s inbox: an event, or a clock move (`send_time`, in ms).
enum Feed {
    Ev(Stamped),
    Time(u64),
}

/// Loads a [`Script`] running `load` into `main` of an event-time correlator, feeds it `feed` in
/// order, shuts down, and returns the log and the final status. Bounded (see [`bounded`]).
fn replay(
    load: impl FnOnce(&mut Cx<'_>) + Send + 'static,
    feed: Vec<Feed>,
) -> (Vec<String>, Status) {
    replay_on(event_time, load, feed)
}

/// [`replay`] on the correlator that `build` makes.
fn replay_on(
    build: impl FnOnce() -> Correlator<Stamped> + Send + 'static,
    load: impl FnOnce(&mut Cx<'_>) + Send + 'static,
    feed: Vec<Feed>,
) -> (Vec<String>, Status) {
    bounded(move || {
        let c = build();
        let log = Log::default();
        c.load(Script::new(&log, load)).unwrap();
        let input = c.input();
        c.start();
        for f in feed {
            match f {
                Feed::Ev(e) => input.send_to(c.main(), e).unwrap(),
                Feed::Time(ms) => input.send_time_to(c.main(), Time::from_millis(ms)).unwrap(),
            }
        }
        let status = c.shutdown().unwrap();
        (log.take(), status)
    })
}

/// The events of `events`, fed in order.
fn events<const N: usize>(events: [Stamped; N]) -> Vec<Feed> {
    events.into_iter().map(Feed::Ev).collect()
}

// R7.1: under event time a context moves its clock to each inbox event's stamp before dispatching
// it; an unstamped event keeps the clock, and a routed event runs at the time of its inbox entry.
#[test]
fn r7_1_event_time_moves_the_clock_to_each_event_before_dispatch() {
    let load = |cx: &mut Cx<'_>| {
        log_kind(cx, 2);
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Script, cx: &mut Cx<'_>, e: &Stamped| {
                m.log.push(format!("{}@{}", e.label, cx.now()));
                // Its stamp is ignored: routed events belong to the entry being processed.
                cx.route(at_ms(2, 999, "routed"));
            },
        );
    };
    let feed = events([
        at_ms(1, 10, "a"),
        at_ms(1, 20, "b"),
        unstamped(1, "c"),
        at_ms(1, 30, "d"),
    ]);
    let (lines, status) = replay(load, feed);
    assert_eq!(status.totals.late_events, 0);
    assert_eq!(
        lines,
        [
            "a@0.010s",
            "routed@0.010s",
            "b@0.020s",
            "routed@0.020s",
            "c@0.020s",
            "routed@0.020s",
            "d@0.030s",
            "routed@0.030s",
        ]
    );
}

// R7.2: when an event's stamp moves the clock past several timers, every one of them fires first,
// in due-time order (then creation order), each with the clock at its own due time; a timer due exactly at the stamp
// fires before the event too.
#[test]
fn r7_2_event_time_fires_due_timers_first_in_time_order_at_their_own_times() {
    let load = |cx: &mut Cx<'_>| {
        log_kind(cx, 1);
        cx.when_all(
            wait(Duration::from_millis(10)),
            |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Stamped>| {
                m.log.push(format!("wait@{}", cx.now()))
            },
        );
        for (ms, label) in [(25, "at25"), (40, "at40")] {
            cx.when(
                at(Time::from_millis(ms)),
                move |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Stamped>| {
                    m.log.push(format!("{label}@{}", cx.now()))
                },
            );
        }
    };
    let (lines, _) = replay(load, events([at_ms(1, 35, "e35"), at_ms(1, 40, "e40")]));
    assert_eq!(
        lines,
        [
            "wait@0.010s",
            "wait@0.020s",
            "at25@0.025s",
            "wait@0.030s",
            "e35@0.035s",
            // Equal due times: creation order (at40 was set at load, this wait at 30 ms).
            "at40@0.040s",
            "wait@0.040s",
            "e40@0.040s",
        ]
    );
}

/// "A cancel (kind 2) within 50 ms of a trade (kind 1)": logs `"hit <cancel>@<now>"`.
fn trade_then_cancel(cx: &mut Cx<'_>) {
    cx.on_all(Pattern::kind(1), |_, cx: &mut Cx<'_>, _: &Stamped| {
        cx.when(
            Pattern::kind(2).within(Duration::from_millis(50)),
            |m: &mut Script, cx: &mut Cx<'_>, hit: &Match<Stamped>| {
                let label = hit.events.first().map_or("?", |e| e.label);
                m.log.push(format!("hit {label}@{}", cx.now()));
            },
        );
    });
}

// R7.2, R7.3: `within(d)` under event time is exclusive and measured on the stamps: a cancel 49 ms
// after the trade matches; one exactly 50 ms or 65 ms after does not.
#[test]
fn r7_2_event_time_within_is_exclusive_on_the_stamps() {
    let feed = events([
        at_ms(1, 0, "t1"),
        at_ms(2, 49, "c49"),
        at_ms(1, 100, "t2"),
        at_ms(2, 150, "c50"),
        at_ms(1, 200, "t3"),
        at_ms(2, 265, "c65"),
    ]);
    let (lines, _) = replay(trade_then_cancel, feed);
    assert_eq!(lines, ["hit c49@0.049s"]);
}

// R7.1: the clock never goes back: an event stamped before its context's clock is processed at the
// clock's time and counted in the status; one stamped at the clock's time is not late.
#[test]
fn r7_1_event_time_late_event_is_processed_at_the_clock_and_counted() {
    let feed = events([
        at_ms(1, 100, "on-time"),
        at_ms(1, 50, "late"),
        at_ms(1, 100, "same-time"),
        at_ms(1, 99, "late-again"),
        at_ms(1, 120, "later"),
    ]);
    let (lines, status) = replay(|cx| log_kind(cx, 1), feed);
    assert_eq!(
        lines,
        [
            "on-time@0.100s",
            "late@0.100s",
            "same-time@0.100s",
            "late-again@0.100s",
            "later@0.120s"
        ]
    );
    // `main` is the first context.
    assert_eq!(
        (status.contexts[0].late_events, status.totals.late_events),
        (2, 2)
    );
}

// R7.1: clocks are per context: an event is late only with respect to its own context's clock.
#[test]
fn r7_1_event_time_clocks_and_lateness_are_per_context() {
    let (lines, late) = bounded(|| {
        let c = event_time();
        let b = c.create_context(ContextOptions::new("b")).unwrap();
        let log = Log::default();
        c.load(Script::new(&log, |cx| log_kind(cx, 1))).unwrap();
        c.load_in(b, Script::new(&log, |cx| log_kind(cx, 2)))
            .unwrap();
        let input = c.input();
        c.start();
        input.send_to(c.main(), at_ms(1, 100, "main100")).unwrap();
        wait_for_lines(&log, 1);
        input.send_to(b, at_ms(2, 10, "b10")).unwrap();
        input.send_to(b, at_ms(2, 5, "b5")).unwrap();
        let status = c.shutdown().unwrap();
        let late = [c.main(), b].map(|ctx| status.context(ctx).unwrap().late_events);
        (log.take(), late)
    });
    assert_eq!(lines, ["main100@0.100s", "b10@0.010s", "b5@0.010s"]);
    assert_eq!(late, [0, 1]);
}

/// Waits for `log` to hold `n` lines (the caller's `bounded` catches a hang).
fn wait_for_lines(log: &Log, n: usize) {
    while log.0.lock().unwrap().len() < n {
        std::thread::yield_now();
    }
}

// R7.1: under event time `send_time` still moves the clocks forward, firing what is pending at the
// end of a stream ("no cancel within 50 ms" here).
#[test]
fn r7_1_event_time_send_time_still_moves_the_clock() {
    let load = |cx: &mut Cx<'_>| {
        cx.on_all(Pattern::kind(1), |_, cx: &mut Cx<'_>, _: &Stamped| {
            cx.when(
                not(Pattern::kind(2)).within(Duration::from_millis(50)),
                |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Stamped>| {
                    m.log.push(format!("quiet@{}", cx.now()))
                },
            );
        });
    };
    let (lines, _) = replay(load, vec![Feed::Ev(at_ms(1, 10, "t")), Feed::Time(1_000)]);
    assert_eq!(lines, ["quiet@0.060s"]);
}

// R7.1: event time replaces the clock thread: without stamped input the clock does not move.
#[test]
fn r7_1_event_time_has_no_clock_thread() {
    let lines = bounded(|| {
        let c = event_time();
        let log = Log::default();
        c.load(Script::new(&log, |cx| {
            cx.when_all(
                wait(Duration::from_millis(1)),
                |m: &mut Script, cx: &mut Cx<'_>, _: &Match<Stamped>| {
                    m.log.push(format!("tick@{}", cx.now()))
                },
            );
        }))
        .unwrap();
        c.start();
        // Long enough for a 10-per-second clock thread to tick; what is asserted is that nothing
        // fires, so a slow machine cannot make this fail.
        std::thread::sleep(Duration::from_millis(300));
        c.shutdown().unwrap();
        log.take()
    });
    assert!(lines.is_empty(), "the clock moved without input: {lines:?}");
}

// R7.1, R8.2: an event whose `time()` panics is processed at the current clock; the panic is
// contained and counted, and the context carries on.
#[test]
fn r7_1_event_time_a_panicking_time_is_contained() {
    let feed = events([at_ms(1, 10, "a"), at_ms(1, 20, "boom"), at_ms(1, 30, "b")]);
    let (lines, status) = replay(|cx| log_kind(cx, 1), feed);
    assert_eq!(lines, ["a@0.010s", "boom@0.010s", "b@0.030s"]);
    // The event type's own code panicked, not a monitor's (the counters of R9.1 tell them apart).
    assert_eq!(status.totals.events_dropped_by_panic, 1);
    assert_eq!(status.totals.handler_panics, 0);
}

// R7.1, R7.2: the example's output depends only on the stamps: 20 runs unpaced and 20 paced on
// the wall clock (real time) give the same lines, with the 49 ms cancel alerted and the 65 ms one
// not.
#[test]
fn r7_1_event_time_example_output_is_identical_over_20_runs_at_two_speeds() {
    let expected = [
        "ALERT order 1: cancelled 49 ms after a trade of 5000 (at 0.049s)",
        "ALERT order 6: cancelled 20 ms after a trade of 3000 (at 0.440s)",
        "late events: 0",
    ];
    for speed in [None, Some(1.0)] {
        for run in 0..20 {
            let lines = bounded(move || cancel_within::run(speed).map_err(|e| e.to_string()));
            assert_eq!(
                lines.as_deref(),
                Ok(&expected.map(String::from)[..]),
                "run {run} at speed {speed:?}"
            );
        }
    }
}

/// Installs the capturing subscriber once; returns the lines logged so far that mention `needle`.
fn logged_lines(needle: &str) -> Vec<String> {
    static CAPTURED: OnceLock<common::Captured> = OnceLock::new();
    let text = CAPTURED
        .get_or_init(common::Captured::install_global)
        .text();
    text.lines()
        .filter(|l| l.contains(needle))
        .map(String::from)
        .collect()
}

/// A monitor with a `within(50ms)` and a `wait(30ms)`: both shorter than a 100 ms tick.
struct ShortBounds;
/// The same bounds, under another clock.
struct ShortBoundsElsewhere;
/// Bounds no shorter than a 100 ms tick, and `wait(0)` (the idiom for "at the next tick").
struct LongBounds;

fn register_bounds<M: Monitor<Stamped>>(cx: &mut Scope<'_, Stamped, M>, bounds: &[u64]) {
    for &ms in bounds {
        let d = Duration::from_millis(ms);
        cx.when(Pattern::kind(1).within(d), |_, _, _| {});
        cx.when_all(wait(d), |_, _, _| {});
    }
}

impl Monitor<Stamped> for ShortBounds {
    fn on_load(&mut self, cx: &mut Scope<'_, Stamped, Self>) {
        register_bounds(cx, &[50, 30, 50]);
    }
}

impl Monitor<Stamped> for ShortBoundsElsewhere {
    fn on_load(&mut self, cx: &mut Scope<'_, Stamped, Self>) {
        register_bounds(cx, &[50, 30]);
    }
}

impl Monitor<Stamped> for LongBounds {
    fn on_load(&mut self, cx: &mut Scope<'_, Stamped, Self>) {
        register_bounds(cx, &[0, 100, 5_000]);
    }
}

fn load_and_stop<M: Monitor<Stamped>>(builder: CorrelatorBuilder<Stamped>, monitor: M) {
    let c = builder.build().unwrap();
    c.load(monitor).unwrap();
    c.start();
    c.shutdown().unwrap();
}

// R7.2: in tick mode a `within`/`wait` shorter than the tick period logs one warning per monitor
// and context, naming the monitor and the tick period; bounds of a tick or more, `wait(0)`, and
// the other clocks log none.
#[test]
fn r7_2_tick_mode_warns_once_of_a_bound_shorter_than_the_tick() {
    logged_lines("");
    bounded(|| {
        load_and_stop(Correlator::builder(), ShortBounds);
        load_and_stop(Correlator::builder(), LongBounds);
        load_and_stop(Correlator::builder().event_time(), ShortBoundsElsewhere);
        load_and_stop(Correlator::builder().external_time(), ShortBoundsElsewhere);
    });
    let short = logged_lines("ShortBounds ");
    assert_eq!(short.len(), 1, "one warning for ShortBounds: {short:#?}");
    assert!(short[0].contains("WARN"), "{}", short[0]);
    assert!(
        short[0].contains("event_time::ShortBounds") && short[0].contains("tick period 100ms"),
        "the warning names the monitor and the tick period: {}",
        short[0]
    );
    assert_eq!(logged_lines("LongBounds"), Vec::<String>::new());
    assert_eq!(logged_lines("ShortBoundsElsewhere"), Vec::<String>::new());
}

/// A monitor told apart by its type parameter only: with a closure for `F`, two instantiations
/// made in one function have the same type name (`ByType<…::{{closure}}>`) and different types.
struct ByType<F>(F);

impl<F: Fn() + Send + 'static> Monitor<Stamped> for ByType<F> {
    fn on_load(&mut self, cx: &mut Scope<'_, Stamped, Self>) {
        (self.0)();
        register_bounds(cx, &[40]);
    }
}

// R7.2 ("one warning per monitor type and context"): the warning is owed to each monitor type,
// so two types that share a type name both get one, in the same context; a second instance of
// either type gets none.
#[test]
fn r7_2_tick_warning_once_per_monitor_type_even_when_names_collide() {
    logged_lines("");
    bounded(|| {
        let c = Correlator::<Stamped>::builder().build().unwrap();
        let (f, g) = (|| {}, || {});
        assert_eq!(
            std::any::type_name_of_val(&ByType(f)),
            std::any::type_name_of_val(&ByType(g)),
            "the premise: the two types print alike"
        );
        c.load(ByType(f)).unwrap();
        c.load(ByType(g)).unwrap();
        c.load(ByType(f)).unwrap();
        c.start();
        c.shutdown().unwrap();
    });
    let warned = logged_lines("ByType<");
    assert_eq!(warned.len(), 2, "one warning per type: {warned:#?}");
}

/// The late-event scenario of the policy tests: the clock at 100 ms, then `late` at 50 ms, then
/// `on-time` at 120 ms.
fn late_feed() -> Vec<Feed> {
    events([
        at_ms(1, 100, "first"),
        at_ms(1, 50, "late"),
        at_ms(1, 120, "on-time"),
    ])
}

fn with_late(policy: LateEvents) -> impl FnOnce() -> Correlator<Stamped> + Send + 'static {
    move || {
        Correlator::builder()
            .event_time()
            .inbox_capacity(256)
            .late_events(policy)
            .build()
            .expect("valid configuration")
    }
}

// R7.1 ("Event time", late events): under `LateEvents::Drop` a late event reaches no listener; it
// is counted in `late_events` (not in `processed`), and the events around it are untouched.
#[test]
fn r7_1_late_events_drop_policy_dispatches_nothing_and_counts() {
    let (lines, status) = replay_on(
        with_late(LateEvents::Drop),
        |cx| log_kind(cx, 1),
        late_feed(),
    );
    assert_eq!(lines, ["first@0.100s", "on-time@0.120s"]);
    assert_eq!(status.totals.late_events, 1);
    assert_eq!(
        status.totals.processed, 2,
        "the dropped event is not processed"
    );
}

// R7.1 ("Event time", late events): the default policy, `LateEvents::Process`, dispatches a late
// event at the clock's time, as before the policy existed.
#[test]
fn r7_1_late_events_process_policy_is_the_default() {
    let (lines, status) = replay_on(
        with_late(LateEvents::Process),
        |cx| log_kind(cx, 1),
        late_feed(),
    );
    assert_eq!(lines, ["first@0.100s", "late@0.100s", "on-time@0.120s"]);
    assert_eq!(status.totals.late_events, 1);
    assert_eq!(LateEvents::default(), LateEvents::Process);
}

// R7.1 ("Event time", late events): under `LateEvents::ToOutput` a late event reaches no listener
// and is queued, whole, on the output the user reads; counted in `late_events`.
#[test]
fn r7_1_late_events_to_output_hands_them_to_the_reader() {
    let (lines, late, status) = bounded(|| {
        let c = with_late(LateEvents::ToOutput(OutputOptions::bounded(16)))();
        let late = c
            .take_late_events()
            .expect("the ToOutput policy has a receiver");
        assert!(c.take_late_events().is_none(), "the receiver is taken once");
        let log = Log::default();
        c.load(Script::new(&log, |cx| log_kind(cx, 1))).unwrap();
        let input = c.input();
        c.start();
        for f in late_feed() {
            let Feed::Ev(e) = f else { unreachable!() };
            input.send_to(c.main(), e).unwrap();
        }
        input.send_to(c.main(), at_ms(1, 110, "late-too")).unwrap();
        let status = c.shutdown().unwrap();
        let late: Vec<String> = late
            .iter()
            .map(|e| format!("{}@{:?}", e.label, e.ms))
            .collect();
        (log.take(), late, status)
    });
    assert_eq!(lines, ["first@0.100s", "on-time@0.120s"]);
    assert_eq!(late, ["late@Some(50)", "late-too@Some(110)"]);
    assert_eq!(status.totals.late_events, 2);
    assert_eq!(status.totals.output_drops, 0);
}

// R7.1, R9.1 ("Event time", late events; "Outputs"): a full late-events output follows its own
// overflow policy; with `DropNewest` the late events beyond its bound are dropped and counted in
// `output_drops` and on the receiver; the context never waits.
#[test]
fn r7_1_late_events_to_a_full_output_follow_its_policy_and_count() {
    let (late, dropped, status) = bounded(|| {
        let options = OutputOptions::bounded(2).policy(Overflow::DropNewest);
        let c = with_late(LateEvents::ToOutput(options))();
        let late = c.take_late_events().unwrap();
        let input = c.input();
        c.start();
        input.send_to(c.main(), at_ms(1, 100, "clock")).unwrap();
        for label in ["l1", "l2", "l3", "l4", "l5"] {
            input.send_to(c.main(), at_ms(1, 10, label)).unwrap();
        }
        let status = c.shutdown().unwrap();
        let labels: Vec<&str> = late.try_iter().map(|e| e.label).collect();
        (labels, late.dropped(), status)
    });
    assert_eq!(late, ["l1", "l2"]);
    assert_eq!(dropped, 3);
    assert_eq!(status.totals.late_events, 5);
    assert_eq!(status.totals.output_drops, 3);
}

// R8.2: a late-events output of an impossible bound is a typed error of `build`.
#[test]
fn r8_2_late_events_output_bound_is_checked_by_build() {
    let built = Correlator::<Stamped>::builder()
        .event_time()
        .late_events(LateEvents::ToOutput(OutputOptions::bounded(0)))
        .build();
    assert!(
        matches!(
            built,
            Err(Error::InvalidOutputCapacity { requested: 0, .. })
        ),
        "{:?}",
        built.err()
    );
}

// R7.1 ("Event time", late events): late events are reported in warnings, at most one per context
// per interval, each saying how many came since the last one, how far behind they were, and the
// likely cause. (Each scenario has its own lag, so that tests running beside it do not count.)
#[test]
fn r7_1_late_events_are_warned_at_most_once_per_interval() {
    logged_lines("");
    let scenario = |interval: Duration, lag_ms: u64| {
        bounded(move || {
            let c = Correlator::<Stamped>::builder()
                .event_time()
                .late_event_warning_interval(interval)
                .build()
                .unwrap();
            let input = c.input();
            c.start();
            input.send_to(c.main(), at_ms(1, 100_000, "clock")).unwrap();
            for _ in 0..3 {
                input
                    .send_to(c.main(), at_ms(1, 100_000 - lag_ms, "late"))
                    .unwrap();
            }
            c.shutdown().unwrap().totals.late_events
        })
    };
    assert_eq!(scenario(Duration::MAX, 1_234), 3);
    assert_eq!(scenario(Duration::ZERO, 2_345), 3);
    let once = logged_lines("the latest 1.234s behind");
    assert_eq!(once.len(), 1, "one warning per interval: {once:#?}");
    assert!(once[0].contains("WARN"), "{}", once[0]);
    assert!(
        once[0].contains("1 late event(s) (the first)")
            && once[0].contains("several feeders")
            && once[0].contains("processed at the clock's time"),
        "the warning counts, names the likely cause and the policy: {}",
        once[0]
    );
    let each = logged_lines("the latest 2.345s behind");
    assert_eq!(each.len(), 3, "a zero interval warns of each: {each:#?}");
    assert!(
        each[1].contains("1 late event(s) since the last warning"),
        "{}",
        each[1]
    );
}

// R7.1, R7.2 ("Event time"): events that carry times while the correlator runs on clock ticks
// (`Event::time` implemented, `event_time()` forgotten) log one warning per correlator, however
// many contexts see such events; under event time there is none. (Each scenario has its own stamp,
// so that tests running beside it do not count.)
#[test]
fn r7_1_tick_mode_warns_once_that_events_carry_times() {
    logged_lines("");
    let scenario = |builder: CorrelatorBuilder<Stamped>, ms: u64| {
        bounded(move || {
            let c = builder.build().unwrap();
            let other = c.create_context(ContextOptions::new("other")).unwrap();
            let input = c.input();
            c.start();
            for i in 0..5 {
                input.send_to(c.main(), at_ms(1, ms + i, "x")).unwrap();
                input.send_to(other, at_ms(1, ms + i, "x")).unwrap();
            }
            c.shutdown().unwrap();
        })
    };
    scenario(Correlator::builder(), 777_777);
    scenario(Correlator::builder().event_time(), 888_888);
    let ticks = logged_lines("returned 777.777s");
    assert_eq!(ticks.len(), 1, "one warning per correlator: {ticks:#?}");
    assert!(
        ticks[0].contains("WARN") && ticks[0].contains("event_time()"),
        "the warning says what to call: {}",
        ticks[0]
    );
    assert_eq!(logged_lines("returned 888.888s"), Vec::<String>::new());
}
