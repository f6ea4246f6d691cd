//! Timers and expressions at their edges (SPEC §6–§7): timers that are already due when they
//! are set, timers at the end of time, the memory of ended expression listeners and of listener
//! buckets, and what a `not` on its own means.
//!
//! The memory tests count live heap bytes with a counting global allocator, so they assert on what
//! grows, not on the resident set. Every test of this file holds [`serial`], so that no other test of
//! the binary allocates while one of them measures. Every scenario runs on a helper thread with a
//! generous timeout, so a timer that spins fails the test instead of hanging it.
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use common::*;
use correlator::{at, not, wait, Match, Pattern, Time};

/// The system allocator, counting the bytes currently allocated by every thread of the process.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on to `System`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// One test of this file at a time (the memory tests measure the whole process).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `scenario` on its own thread and returns its result, failing the test if it takes longer
/// than a minute (a timer that fires without end keeps `shutdown` from returning).
fn bounded<T: Send + 'static>(what: &str, scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(scenario());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(v) => v,
        Err(_) => panic!("{what}: the scenario did not finish within 60 s (a timer spins?)"),
    }
}

fn t(s: u64) -> Time {
    Time::from_secs(s)
}

/// Input of [`count_inputs`].
enum In {
    Tick(Time),
    Kind(u32),
}

/// Loads a monitor whose load hook registers one expression listener counting its matches, sends
/// the clock ticks `ticks`, shuts down, and returns the count.
fn count_fires(
    what: &str,
    all: bool,
    expr: impl FnOnce() -> correlator::Expr<Ev> + Send + 'static,
    ticks: Vec<Time>,
) -> u64 {
    count_inputs(what, all, expr, ticks.into_iter().map(In::Tick).collect())
}

/// [`count_fires`] with events (of the given kinds) among the ticks.
fn count_inputs(
    what: &str,
    all: bool,
    expr: impl FnOnce() -> correlator::Expr<Ev> + Send + 'static,
    inputs: Vec<In>,
) -> u64 {
    bounded(what, move || {
        let c = correlator(64);
        let fires = Arc::new(AtomicU64::new(0));
        let log = Log::default();
        let f = fires.clone();
        c.load(Script::new("m", &log, move |_, cx| {
            let handler = move |_: &mut Script, _: &mut Cx<'_>, _: &Match<Ev>| {
                f.fetch_add(1, Ordering::Relaxed);
            };
            if all {
                cx.when_all(expr(), handler);
            } else {
                cx.when(expr(), handler);
            }
            // Keeps the instance alive once a `when` listener has ended.
            cx.on_all(Pattern::kind(99), |_, _, _| {});
        }))
        .unwrap();
        let input = c.input();
        for i in inputs {
            match i {
                In::Tick(tick) => {
                    input.send_time(tick).unwrap();
                }
                In::Kind(k) => input.send_to(c.main(), ev(k, 0)).unwrap(),
            }
        }
        c.start();
        c.shutdown().unwrap();
        fires.load(Ordering::Relaxed)
    })
}

// ---- Item 1: timers that are already due when they are set ----

// R7.2: `when_all(wait(0))` is due again as soon as it restarts; it fires once per clock tick, and
// shutdown returns.
#[test]
fn r7_2_wait_zero_fires_once_per_tick() {
    let _g = serial();
    let n = count_fires(
        "when_all(wait(0))",
        true,
        || wait(Duration::ZERO),
        vec![t(1), t(2), t(3)],
    );
    assert_eq!(n, 3, "one match per tick");
}

// R7.2: `when_all(at(t))` with `t` in the past fires once per tick, not without end.
#[test]
fn r7_2_at_a_past_time_fires_once_per_tick() {
    let _g = serial();
    let n = count_fires(
        "when_all(at(past))",
        true,
        || at(t(1)),
        vec![t(5), t(6), t(7)],
    );
    assert_eq!(n, 3, "one match per tick");
}

// R7.3: `when_all(not(x).within(0))` holds at its bound as soon as it restarts; it fires once per
// tick.
#[test]
fn r7_3_not_within_zero_fires_once_per_tick() {
    let _g = serial();
    let n = count_fires(
        "when_all(not(x).within(0))",
        true,
        || not(Pattern::kind(7)).within(Duration::ZERO),
        vec![t(1), t(2), t(3)],
    );
    assert_eq!(n, 3, "one match per tick");
}

// R7.2: a repeating timer still catches up on a large jump of the clock: every occurrence at a
// later time than the previous one fires, each once.
#[test]
fn r7_2_repeating_timer_still_catches_up() {
    let _g = serial();
    let n = count_fires(
        "when_all(wait(1s))",
        true,
        || wait(Duration::from_secs(1)),
        vec![Time::from_millis(4_500)],
    );
    assert_eq!(n, 4, "1, 2, 3 and 4 s");
}

// R7.2: a `wait` whose due time lies beyond the end of logical time never fires, even when the
// clock reaches the end of time, and does not spin there.
#[test]
fn r7_2_a_wait_beyond_the_end_of_time_never_fires() {
    let _g = serial();
    let end = || vec![Time::from_secs(1), Time::from_nanos(u64::MAX)];
    let n = count_fires("when_all(wait(MAX))", true, || wait(Duration::MAX), end());
    assert_eq!(n, 0, "when_all(wait(Duration::MAX))");
    let n = count_fires("when(wait(MAX))", false, || wait(Duration::MAX), end());
    assert_eq!(n, 0, "when(wait(Duration::MAX))");
    // Due exactly at the end of time: fires once there, its next occurrence lies beyond.
    let n = count_fires(
        "when_all(wait(u64::MAX ns))",
        true,
        || wait(Duration::from_nanos(u64::MAX)),
        end(),
    );
    assert_eq!(n, 1, "when_all(wait(u64::MAX ns)) from time 0");
    // A `within` bound beyond the end of time never expires.
    let n = count_fires(
        "when(not(x).within(MAX))",
        false,
        || not(Pattern::kind(7)).within(Duration::MAX),
        end(),
    );
    assert_eq!(n, 0, "not(x).within(Duration::MAX)");
}

// ---- Items 2 and 3: the memory of ended listeners ----

/// Warm-up cycles before the baseline is taken.
const WARM_UP: u64 = 2_000;

/// Measured cycles: 20,000 (small enough for a debug run), or `HARDENING_CYCLES` to measure more.
fn cycles() -> u64 {
    std::env::var("HARDENING_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}
/// What live heap bytes may grow by over the measured cycles: a few reused buffers growing to their
/// working size, far below one byte per cycle.
const SLACK: i64 = 16 * 1024;

/// The event kind that runs one cycle of a churn test, and the one that reports progress.
const CYCLE: u32 = 1;
const PROBE: u32 = 2;

/// Runs `cycle` (the handler of a `CYCLE` event, given its value) `WARM_UP` times, measures live
/// heap bytes, runs it [`cycles`] more times, measures again, and returns the growth. With `tick`,
/// the clock advances by 1 ms after every cycle. Measurements are taken once a `PROBE` event sent
/// after the cycles has been processed, so the context has done all the work before.
fn churn(
    what: &str,
    tick: bool,
    cycle: impl FnMut(&mut Cx<'_>, u64) + Send + 'static,
) -> (i64, i64, i64) {
    bounded(what, move || {
        let c = correlator(1024);
        let probed = Arc::new(AtomicU64::new(0));
        let log = Log::default();
        let p = probed.clone();
        let cycle = Arc::new(Mutex::new(cycle));
        c.load(Script::new("m", &log, move |_, cx| {
            cx.on_all(Pattern::kind(CYCLE), move |_, cx: &mut Cx<'_>, e: &Ev| {
                (cycle.lock().unwrap())(cx, e.val);
            });
            cx.on_all(Pattern::kind(PROBE), move |_, _, e: &Ev| {
                p.store(e.val, Ordering::Release);
            });
        }))
        .unwrap();
        let input = c.input();
        c.start();
        let mut now = 0;
        let mut run = |from: u64, to: u64| {
            for i in from..to {
                input.send_to(c.main(), ev(CYCLE, i)).unwrap();
                if tick {
                    now += 1;
                    input.send_time(Time::from_millis(now)).unwrap();
                }
            }
            input.send_to(c.main(), ev(PROBE, to)).unwrap();
            assert!(
                eventually(|| probed.load(Ordering::Acquire) == to),
                "the context did not process the cycles"
            );
        };
        run(0, WARM_UP);
        let before = live_bytes();
        run(WARM_UP, WARM_UP + cycles());
        let after = live_bytes();
        c.shutdown().unwrap();
        (before, after, after - before)
    })
}

fn assert_flat(what: &str, (before, after, growth): (i64, i64, i64)) {
    let n = cycles();
    println!("{what}: live heap {before} B before, {after} B after {n} cycles");
    assert!(
        growth < SLACK,
        "{what}: live heap grew by {growth} B over {n} cycles ({} B per cycle)",
        growth / n as i64
    );
}

// R6.8, R7.2: a timer listener that fired has ended; its slot and its timer are freed.
#[test]
fn r6_8_fired_timer_listeners_are_freed() {
    let _g = serial();
    let growth = churn("fired when(wait(0))", true, |cx, _| {
        cx.when(wait(Duration::ZERO), |_, _, _| {});
    });
    assert_flat("fired when(wait(0))", growth);
}

// R6.3, R7.2: a timer listener that was quit is freed, and so is its pending timer (due in an
// hour, long after the test).
#[test]
fn r6_3_quit_timer_listeners_are_freed() {
    let _g = serial();
    let growth = churn("quit when(wait(1h))", false, |cx, _| {
        let h = cx.when(wait(Duration::from_secs(3600)), |_, _, _| {});
        cx.quit(h);
    });
    assert_flat("quit when(wait(1h))", growth);
}

// R6.9: the index entry of an event kind that no listener uses any more is freed: a kind used once
// costs nothing afterwards.
#[test]
fn r6_9_buckets_of_unused_kinds_are_freed() {
    let _g = serial();
    let growth = churn("a listener on a new kind, quit", false, |cx, i| {
        let kind = 1_000 + i as u32;
        let h = cx.on(Pattern::kind(kind), |_, _, _| {});
        cx.quit(h);
    });
    assert_flat("a listener on a new kind, quit", growth);
}

// ---- Item 15: what a `not` on its own means ----

/// What `tracing` logged while `f` ran (the subscriber is installed once for the binary).
fn logged_during<T>(f: impl FnOnce() -> T) -> (T, String) {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    let captured = CAPTURED.get_or_init(Captured::install_global);
    let from = captured.text().len();
    let v = f();
    (v, captured.text()[from..].to_owned())
}

// R7.3: a `not` is a guard that counts as matched only inside `and` and at the bound of `within`:
// a bare `not x` and `(a -> b) or not c` do not fire when they are set up, nor at later ticks (a
// deliberate difference from Apama EPL, documented on `not` and in the `expr` module docs), and
// registering such an expression logs a warning that says so and what to write instead.
#[test]
fn r7_3_a_not_never_completes_a_match_by_itself() {
    let _g = serial();
    let ticks_and_others = || {
        vec![
            In::Tick(t(1)),
            In::Kind(5),
            In::Tick(t(2)),
            In::Kind(5),
            In::Tick(t(3)),
        ]
    };
    let (n, log) = logged_during(|| {
        count_inputs(
            "when(not x)",
            false,
            || not(Pattern::kind(3)),
            ticks_and_others(),
        )
    });
    assert_eq!(n, 0, "a bare `not` never fires");
    assert!(
        log.contains("WARN") && log.contains("can never match: a `not` never completes a match"),
        "registering a bare `not` warns: {log:?}"
    );
    let (n, log) = logged_during(|| {
        count_inputs(
            "when_all((a -> b) or not c)",
            true,
            || {
                Pattern::kind(1)
                    .then(Pattern::kind(2))
                    .or(not(Pattern::kind(3)))
            },
            vec![
                In::Tick(t(1)),
                In::Kind(1),
                In::Tick(t(2)),
                In::Kind(2),
                In::Tick(t(3)),
            ],
        )
    });
    assert_eq!(n, 1, "only `a -> b` fires");
    assert!(
        log.contains("a side of an `or` in this event expression can never match"),
        "registering `(a -> b) or not c` warns: {log:?}"
    );
    // What the docs say to write for "a, or no c within 2 s": fires at the bound, no warning.
    let (n, log) = logged_during(|| {
        count_inputs(
            "when(a or not(c).within(2s))",
            false,
            || Pattern::kind(1).or(not(Pattern::kind(3)).within(Duration::from_secs(2))),
            ticks_and_others(),
        )
    });
    assert_eq!(n, 1, "the `within` bound completes the `not`");
    assert!(!log.contains("never match"), "no warning: {log:?}");
}
