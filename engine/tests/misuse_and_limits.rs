//! User code outside handlers, deep spawn chains, memory kept after peaks,
//! builder limits and foreign context references. Each test names the SPEC rule it checks.
//!
//! A test whose failure used to abort the whole process (a stack overflow, an allocation failure)
//! runs its scenario in a child process (this test binary, filtered to that test), so that an
//! abort fails the test instead of killing the test binary.

mod common;
use common::bounded;
use std::alloc::{GlobalAlloc, Layout, System};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{
    ContextOptions, Correlator, DieReason, Error, Event, Monitor, Pattern, Scope, SendErrorKind,
};

/// The system allocator, counting the bytes live on the heap (for the memory tests, which run in
/// a child process of their own so that no other test allocates meanwhile).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The highest `LIVE` since it was last reset.
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn count_alloc(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count_alloc(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes live on the heap now.
fn live_heap() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The resident set size of this process, in bytes (0 where `/proc` is not there).
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Waits up to 20 s for `cond`; returns whether it became true.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// A test event: a kind and a value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    kind: u32,
    val: u64,
}

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
}

fn ev(kind: u32, val: u64) -> Ev {
    Ev { kind, val }
}

/// Set in the environment of a child process that runs one test's scenario.
const CHILD: &str = "HARDENING_ROBUST_CHILD";

/// Runs `scenario` in a child process (this binary, filtered to the test `name`), so that an abort
/// fails the test rather than the whole test binary; in the child, runs it directly. The child gets
/// 120 s before it is killed and the test fails.
fn in_child_process(name: &str, scenario: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        scenario();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child test process");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: the child process did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("the child's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success() && stdout.contains("1 passed"),
        "{name} failed in its child process ({status}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The figures the scenario printed (shown with `--nocapture`).
    print!("{stdout}");
}

/// A thread-safe list of what happened, in order.
#[derive(Clone, Default, Debug)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
    fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn external_time() -> Correlator<Ev> {
    Correlator::builder()
        .external_time()
        .build()
        .expect("valid configuration")
}

// ---------------------------------------------------------------------------------------------
// Item 13: builder limits.

// R8.2: every value of a size limit gives a correlator or a typed error: never a panic in the
// user's thread, never an abort on allocation (several of these used to do one or the other).
#[test]
fn r8_2_builder_limits_of_any_size_are_typed_errors() {
    in_child_process("r8_2_builder_limits_of_any_size_are_typed_errors", || {
        let build = |b: correlator::CorrelatorBuilder<Ev>| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.external_time().build()))
                .expect("build must not panic")
        };
        for max in [usize::MAX, 1 << 32, u32::MAX as usize + 1, 1 << 20] {
            let e = build(Correlator::builder().max_contexts(max))
                .err()
                .expect("too many contexts is refused");
            assert!(
                matches!(e, Error::LimitTooLarge { setting: "max_contexts", requested, .. } if requested == max),
                "{e:?}"
            );
            assert!(e.to_string().contains("max_contexts"), "{e}");
        }
        for max in [usize::MAX, 1 << 32, 1 << 20] {
            let e = build(Correlator::builder().max_channels(max))
                .err()
                .expect("too many channels is refused");
            assert!(
                matches!(e, Error::LimitTooLarge { setting: "max_channels", requested, .. } if requested == max),
                "{e:?}"
            );
        }
        // Within the documented maximum, but more memory than any machine this runs on has.
        for capacity in [1usize << 36, 1 << 40] {
            let e = build(Correlator::builder().inbox_capacity(capacity))
                .err()
                .expect("an inbox that cannot be allocated is refused");
            assert!(
                matches!(e, Error::AllocationFailed { .. }),
                "{capacity}: {e:?}"
            );
            assert!(e.to_string().contains("inbox_capacity"), "{e}");
        }
        let e = build(Correlator::builder().inbox_capacity(usize::MAX))
            .err()
            .expect("refused");
        assert!(matches!(e, Error::InvalidCapacity { .. }), "{e:?}");
        // The largest accepted limits still build.
        let c = build(
            Correlator::builder()
                .max_contexts(correlator::MAX_CONTEXTS)
                .max_channels(correlator::MAX_CHANNELS),
        )
        .expect("the maxima are accepted");
        c.shutdown().expect("clean shutdown");
    });
}

/// A monitor whose load hook is a closure; `on_die` logs `"<name> die <reason>"`.
struct Script {
    name: &'static str,
    log: Log,
    load: Option<LoadFn>,
}

type Cx<'a> = Scope<'a, Ev, Script>;
type LoadFn = Box<dyn FnOnce(&mut Script, &mut Cx<'_>) + Send>;

impl Script {
    fn new(
        name: &'static str,
        log: &Log,
        load: impl FnOnce(&mut Script, &mut Cx<'_>) + Send + 'static,
    ) -> Self {
        Self {
            name,
            log: log.clone(),
            load: Some(Box::new(load)),
        }
    }
}

impl Clone for Script {
    /// A spawned copy: the same state, no load hook.
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            log: self.log.clone(),
            load: None,
        }
    }
}

impl Monitor<Ev> for Script {
    fn on_load(&mut self, cx: &mut Cx<'_>) {
        if let Some(f) = self.load.take() {
            f(self, cx);
        }
    }

    fn on_die(&mut self, reason: &DieReason, _cx: &mut Cx<'_>) {
        let r = match reason {
            DieReason::Panicked(m) => format!("panicked({m})"),
            other => format!("{other:?}"),
        };
        self.log.push(format!("{} die {r}", self.name));
    }
}

// ---------------------------------------------------------------------------------------------
// Item 14: a context reference of another correlator.

// R1.2, R8.2: a context reference names one context of one correlator. A reference of another
// correlator (with an id that exists here too) is refused with `UnknownContext` and the event
// handed back, from an input handle, from a handler and when loading; nothing is delivered to the
// context of this correlator that has the same id.
#[test]
fn r1_2_a_context_ref_of_another_correlator_is_refused() {
    let log = Log::default();
    let log2 = log.clone();
    let (here_refs, foreign) = bounded(move || {
        let other = external_time();
        let foreign = other.create_context(ContextOptions::new("there")).unwrap();
        let c = external_time();
        let here = c.create_context(ContextOptions::new("here")).unwrap();
        let l = log2.clone();
        c.load_in(
            here,
            Script::new("here", &log2, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, _, e: &Ev| {
                    l.push(format!("here got {}", e.val))
                });
            }),
        )
        .unwrap();
        let l = log2.clone();
        c.load(Script::new("main", &log2, move |_, cx| {
            cx.on_all(Pattern::kind(2), move |_, cx, e: &Ev| {
                let err = cx.send_to(foreign, ev(1, e.val)).unwrap_err();
                l.push(format!(
                    "handler {:?} {:?} {}",
                    err.kind(),
                    err.target() == Some(foreign),
                    err.into_inner().val
                ));
            });
        }))
        .unwrap();
        c.start();
        let input = c.input();
        let err = input.send_to(foreign, ev(1, 7)).unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::UnknownContext);
        assert_eq!(err.into_inner(), ev(1, 7));
        let err = input.try_send_to(foreign, ev(1, 8)).unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::UnknownContext);
        assert!(input.send_time_to(foreign, correlator::Time::ZERO).is_err());
        let e = c
            .load_in(foreign, Script::new("x", &log2, |_, _| {}))
            .unwrap_err();
        assert_eq!(e, Error::UnknownContext(foreign));
        assert!(e.to_string().contains("does not belong to this correlator"));
        assert_eq!(c.context_name(foreign), None);
        input.send_to(c.main(), ev(2, 9)).unwrap();
        input.send_to(here, ev(1, 10)).unwrap();
        let status = c.shutdown().unwrap();
        assert!(status.context(foreign).is_none());
        other.shutdown().unwrap();
        (here, foreign)
    });
    assert_eq!(
        here_refs.id(),
        foreign.id(),
        "the same id in both correlators"
    );
    assert_ne!(here_refs, foreign);
    assert!(std::mem::size_of::<correlator::ContextRef>() <= 8);
    let lines = log.snapshot();
    assert!(
        lines.contains(&"handler UnknownContext true 9".to_string()),
        "{lines:?}"
    );
    let got: Vec<&String> = lines.iter().filter(|l| l.starts_with("here got")).collect();
    assert_eq!(got, ["here got 10"], "{lines:?}");
}

// ---------------------------------------------------------------------------------------------
// Item 7: local spawn chains.

/// Spawns the next link of a chain of `depth` initialisers, each spawning from its own
/// initialiser, and logs where the chain ended.
fn spawn_chain(m: &mut Script, cx: &mut Cx<'_>, level: u32, depth: u32) {
    if level == depth {
        m.log.push(format!("deepest {level}"));
        return;
    }
    cx.spawn(m, move |m: &mut Script, cx: &mut Cx<'_>| {
        spawn_chain(m, cx, level + 1, depth)
    });
}

// R6.2: a spawn's initialiser may spawn, to any depth: a chain of initialisers each spawning the
// next used to recurse on the context's stack (about 2,000 links overflowed it and aborted the
// process). The order of initialisers and the fate of each instance are those of the shallow case:
// every link ends with no listener, and the context carries on.
#[test]
fn r6_2_spawn_chains_of_any_depth_run() {
    in_child_process("r6_2_spawn_chains_of_any_depth_run", || {
        const DEPTH: u32 = 20_000;
        let log = Log::default();
        let log2 = log.clone();
        let lines = bounded(move || {
            let c = external_time();
            c.load(Script::new("chain", &log2, |m, cx| {
                spawn_chain(m, cx, 0, DEPTH)
            }))
            .unwrap();
            let l = log2.clone();
            c.load(Script::new("after", &log2, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, _, e: &Ev| {
                    l.push(format!("after got {}", e.val))
                });
            }))
            .unwrap();
            c.start();
            c.input().send_to(c.main(), ev(1, 5)).unwrap();
            c.shutdown().unwrap();
            log2.snapshot()
        });
        let _ = log;
        assert_eq!(
            lines.first().map(String::as_str),
            Some(&*format!("deepest {DEPTH}"))
        );
        let ended = lines
            .iter()
            .filter(|l| *l == "chain die NoListeners")
            .count();
        assert_eq!(ended as u32, DEPTH + 1, "every link ends once");
        assert!(lines.contains(&"after got 5".to_string()), "{lines:?}");
    });
}

// R6.2: spawned initialisers run depth first, as before spawn chains stopped recursing: a spawn's
// initialiser, and what it spawns, run before the operations that followed the spawn.
#[test]
fn r6_2_nested_spawn_initialisers_run_depth_first() {
    let log = Log::default();
    let log2 = log.clone();
    let lines = bounded(move || {
        let c = external_time();
        c.load(Script::new("p", &log2, |m, cx| {
            cx.spawn(m, |m: &mut Script, cx: &mut Cx<'_>| {
                m.log.push("init a");
                cx.spawn(m, |m: &mut Script, _: &mut Cx<'_>| m.log.push("init a1"));
                cx.spawn(m, |m: &mut Script, _: &mut Cx<'_>| m.log.push("init a2"));
            });
            cx.spawn(m, |m: &mut Script, _: &mut Cx<'_>| m.log.push("init b"));
        }))
        .unwrap();
        c.start();
        c.shutdown().unwrap();
        log2.snapshot()
    });
    let _ = log;
    let inits: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("init"))
        .map(String::as_str)
        .collect();
    assert_eq!(inits, ["init a", "init a1", "init a2", "init b"]);
    assert_eq!(lines.iter().filter(|l| l.contains(" die ")).count(), 5);
}

// ---------------------------------------------------------------------------------------------
// Item 11: memory kept after a peak.

/// The size of the storms of the memory tests (`HARDENING_ROBUST_STORM` overrides it).
fn storm_size() -> u64 {
    std::env::var("HARDENING_ROBUST_STORM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

const MIB: f64 = (1 << 20) as f64;

/// Runs `storm` (which returns once its events are processed) on an idle correlator, and asserts
/// that the live heap comes back to within 2 MiB of what it was before, printing the figures.
fn heap_comes_back(what: &str, c: &Correlator<Ev>, storm: impl FnOnce()) {
    let (heap0, rss0) = (live_heap(), rss());
    PEAK.store(heap0, Ordering::Relaxed);
    storm();
    let (heap_peak, rss_peak) = (PEAK.load(Ordering::Relaxed), rss());
    let back = eventually(|| live_heap() < heap0 + (2 << 20));
    let (heap1, rss1) = (live_heap(), rss());
    println!(
        "{what}: live heap {:.1} -> {:.1} (peak) -> {:.1} MiB after it drained; \
         RSS {:.1} -> {:.1} (as the storm's events were all seen) -> {:.1} MiB",
        heap0 as f64 / MIB,
        heap_peak as f64 / MIB,
        heap1 as f64 / MIB,
        rss0 as f64 / MIB,
        rss_peak as f64 / MIB,
        rss1 as f64 / MIB
    );
    assert!(
        back,
        "{what}: the live heap stayed {:.1} MiB above its level before the storm",
        (heap1 as f64 - heap0 as f64) / MIB
    );
    let _ = c;
}

// R3.4, R5.2: the route stack and the inbox's overflow give their peak memory back once they
// drain (a context keeps room for ROUTE_STACK_RETAINED routed events and OVERFLOW_RETAINED
// overflow entries): 1M routes from one event, then 1M sends of a context to its own full inbox
// (overruns), used to leave tens of MiB allocated for good.
#[test]
fn r3_4_r5_2_route_stack_and_overflow_shrink_after_a_storm() {
    in_child_process(
        "r3_4_r5_2_route_stack_and_overflow_shrink_after_a_storm",
        || {
            let n = storm_size();
            let seen = Arc::new(AtomicU64::new(0));
            let c: Correlator<Ev> = Correlator::builder()
                .inbox_capacity(64)
                .external_time()
                .build()
                .unwrap();
            let log = Log::default();
            let s = seen.clone();
            c.load(Script::new("storm", &log, move |_, cx| {
                cx.on_all(Pattern::kind(1), move |_, cx, _: &Ev| {
                    for i in 0..n {
                        cx.route(ev(9, i));
                    }
                });
                cx.on_all(Pattern::kind(2), move |_, cx, _: &Ev| {
                    let me = cx.context();
                    for i in 0..n {
                        cx.send_to(me, ev(9, i)).unwrap();
                    }
                });
                cx.on_all(Pattern::kind(9), move |_, _, _: &Ev| {
                    s.fetch_add(1, Ordering::Relaxed);
                });
            }))
            .unwrap();
            c.start();
            let input = c.input();
            // Warm up: every buffer of a small event's path exists before the first figure.
            input.send_to(c.main(), ev(0, 0)).unwrap();
            assert!(eventually(|| c.status().totals.processed >= 1));
            heap_comes_back(&format!("{n} routes"), &c, || {
                input.send_to(c.main(), ev(1, 0)).unwrap();
                assert!(eventually(|| seen.load(Ordering::Relaxed) == n));
            });
            heap_comes_back(&format!("{n} overruns"), &c, || {
                input.send_to(c.main(), ev(2, 0)).unwrap();
                assert!(eventually(|| seen.load(Ordering::Relaxed) == 2 * n));
            });
            let status = c.shutdown().unwrap();
            assert!(status.totals.overruns >= n - 64, "{:?}", status.totals);
            let depth = status.context(c.main()).map_or(0, |s| s.max_route_depth);
            assert!(depth >= n, "{depth}");
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Item 6: user code outside handlers.

/// Where a [`Pev`] makes user code panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    /// `Event::kind`.
    Kind,
    /// `Event::key`.
    Key,
    /// `Drop` (not while already unwinding).
    Drop,
}

/// An event whose `kind()`, `key()` or `Drop` may panic.
#[derive(Clone, Debug)]
struct Pev {
    kind: u32,
    val: u64,
    fault: Fault,
}

fn pev(kind: u32, val: u64) -> Pev {
    Pev {
        kind,
        val,
        fault: Fault::None,
    }
}

impl Event for Pev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        if self.fault == Fault::Kind {
            panic!("kind() of event {}", self.val);
        }
        self.kind
    }
    fn key(&self) -> Option<u64> {
        if self.fault == Fault::Key {
            panic!("key() of event {}", self.val);
        }
        Some(self.val)
    }
}

impl Drop for Pev {
    fn drop(&mut self) {
        if self.fault == Fault::Drop && !std::thread::panicking() {
            panic!("drop of event {}", self.val);
        }
    }
}

/// A monitor that logs the events of kinds 1 and 3 it gets; its filter panics on value 13 if
/// `picky`; `a` routes two events of kind 3 on value 20, the first one's `Drop` panicking; kind 5
/// makes `a` set `drop_bomb` (its state's `Drop` then panics) and die.
struct Watch {
    name: &'static str,
    log: Log,
    picky: bool,
    drop_bomb: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.drop_bomb && !std::thread::panicking() {
            panic!("drop of {}'s state", self.name);
        }
    }
}

type Wx<'a> = Scope<'a, Pev, Watch>;

impl Monitor<Pev> for Watch {
    fn on_load(&mut self, cx: &mut Wx<'_>) {
        let mut p = Pattern::kind(1);
        if self.picky {
            p = p.filter(|e: &Pev| {
                assert!(e.val != 13, "filter on event {}", e.val);
                true
            });
        }
        cx.on_all(p, |m: &mut Watch, cx: &mut Wx<'_>, e: &Pev| {
            m.log.push(format!("{} got {}", m.name, e.val));
            if e.val == 20 && m.name == "a" {
                // A routed event whose Drop panics, then one that is fine.
                let mut bad = pev(3, 21);
                bad.fault = Fault::Drop;
                cx.route(bad);
                cx.route(pev(3, 22));
            }
            if e.val == 30 && m.name == "a" {
                // A batch with an event whose kind() panics in the middle.
                cx.route(pev(1, 31));
                cx.route(faulty(1, 32, Fault::Kind));
                cx.route(pev(1, 33));
            }
        });
        // A keyed listener: the kind's dispatch now asks every event for its key.
        cx.on_all(
            Pattern::kind(1).key(99),
            |m: &mut Watch, _: &mut Wx<'_>, e: &Pev| {
                m.log.push(format!("{} keyed {}", m.name, e.val))
            },
        );
        cx.on_all(
            Pattern::kind(3),
            |m: &mut Watch, _: &mut Wx<'_>, e: &Pev| {
                m.log.push(format!("{} got routed {}", m.name, e.val))
            },
        );
        if self.name == "a" {
            // The only listener of kind 7: a chain (each event routes the next), whose third
            // link's kind() panics.
            cx.on_all(
                Pattern::kind(7),
                |m: &mut Watch, cx: &mut Wx<'_>, e: &Pev| {
                    m.log.push(format!("{} chain {}", m.name, e.val));
                    match e.val {
                        0 => cx.route(pev(7, 1)),
                        1 => cx.route(faulty(7, 2, Fault::Kind)),
                        _ => {}
                    }
                },
            );
        }
        cx.on_all(
            Pattern::kind(5),
            |m: &mut Watch, cx: &mut Wx<'_>, _: &Pev| {
                if m.name != "a" {
                    return;
                }
                m.drop_bomb = true;
                cx.die();
            },
        );
    }

    fn on_die(&mut self, reason: &DieReason, _cx: &mut Wx<'_>) {
        let r = match reason {
            DieReason::Panicked(m) => format!("panicked({m})"),
            other => format!("{other:?}"),
        };
        self.log.push(format!("{} die {r}", self.name));
    }
}

/// Runs one scenario: monitors `a` (picky if `picky`) and `b` in `main`, then value 1, the `bad`
/// event, value 2; returns the log, the contained panics counted and whether shutdown was clean.
fn contain(picky: bool, bad: Vec<Pev>) -> (Vec<String>, u64, bool) {
    bounded(move || {
        let log = Log::default();
        let c: Correlator<Pev> = Correlator::builder().external_time().build().unwrap();
        for (name, picky) in [("a", picky), ("b", false)] {
            c.load(Watch {
                name,
                log: log.clone(),
                picky,
                drop_bomb: false,
            })
            .unwrap();
        }
        c.start();
        let input = c.input();
        input.send_to(c.main(), pev(1, 1)).unwrap();
        for e in bad {
            input.send_to(c.main(), e).unwrap();
        }
        input.send_to(c.main(), pev(1, 2)).unwrap();
        let status = c.shutdown();
        // Contained panics of either kind: monitor code (`handler_panics`) and the event type's
        // own `kind()`, `key()` or `Drop` (`events_dropped_by_panic`).
        let panics = status.as_ref().map_or(0, |s| {
            s.totals.handler_panics + s.totals.events_dropped_by_panic
        });
        (log.snapshot(), panics, status.is_ok())
    })
}

fn faulty(kind: u32, val: u64, fault: Fault) -> Pev {
    Pev { kind, val, fault }
}

fn got(lines: &[String], name: &str) -> Vec<String> {
    let prefix = format!("{name} got ");
    lines
        .iter()
        .filter(|l| l.starts_with(&prefix))
        .cloned()
        .collect()
}

// R6.8: a panic in a listener's filter ends that listener's instance (`Panicked`) like a panic in
// its handler; the event still reaches the other listeners, and the context and every other
// instance carry on (each gets its `on_die` at shutdown). It used to end the whole context.
#[test]
fn r6_8_a_panicking_filter_ends_its_instance_only() {
    let (lines, panics, clean) = contain(true, vec![pev(1, 13)]);
    assert!(clean, "{lines:?}");
    assert_eq!(got(&lines, "a"), ["a got 1"], "{lines:?}");
    assert_eq!(got(&lines, "b"), ["b got 1", "b got 13", "b got 2"]);
    assert!(
        lines.contains(&"a die panicked(filter on event 13)".to_string()),
        "{lines:?}"
    );
    assert!(lines.contains(&"b die Shutdown".to_string()), "{lines:?}");
    assert_eq!(panics, 1);
}

// R6.8: an event whose `kind()` or `key()` panics is dropped and counted; no listener sees it, and
// the context and every instance carry on. It used to end the whole context.
#[test]
fn r6_8_an_event_whose_kind_or_key_panics_is_dropped_and_counted() {
    for fault in [Fault::Kind, Fault::Key] {
        let (lines, panics, clean) = contain(false, vec![faulty(1, 13, fault)]);
        assert!(clean, "{fault:?}: {lines:?}");
        assert_eq!(got(&lines, "a"), ["a got 1", "a got 2"], "{fault:?}");
        assert_eq!(got(&lines, "b"), ["b got 1", "b got 2"], "{fault:?}");
        assert!(lines.contains(&"a die Shutdown".to_string()), "{lines:?}");
        assert!(lines.contains(&"b die Shutdown".to_string()), "{lines:?}");
        assert_eq!(panics, 1, "{fault:?}");
    }
}

// R6.8: an event whose `Drop` panics (from the inbox, or routed) was processed and is counted; the
// events routed beside it, and everything after it, are still processed in order. It used to end
// the whole context.
#[test]
fn r6_8_an_event_whose_drop_panics_is_counted_and_processing_goes_on() {
    let (lines, panics, clean) = contain(false, vec![faulty(1, 13, Fault::Drop), pev(1, 20)]);
    assert!(clean, "{lines:?}");
    for name in ["a", "b"] {
        let expected: Vec<String> = ["1", "13", "20", "routed 21", "routed 22", "2"]
            .iter()
            .map(|v| format!("{name} got {v}"))
            .collect();
        assert_eq!(got(&lines, name), expected, "{lines:?}");
    }
    assert!(lines.contains(&"b die Shutdown".to_string()), "{lines:?}");
    // Event 13 once, the routed event 21 once.
    assert_eq!(panics, 2);
}

// R6.8: a monitor state whose `Drop` panics when its instance ends does not take the context with
// it: `on_die` ran, and the other instance carries on.
#[test]
fn r6_8_a_state_whose_drop_panics_ends_only_its_instance() {
    let (lines, panics, clean) = contain(false, vec![pev(5, 0)]);
    assert!(clean, "{lines:?}");
    assert!(lines.contains(&"a die Died".to_string()), "{lines:?}");
    assert_eq!(got(&lines, "b"), ["b got 1", "b got 2"], "{lines:?}");
    assert!(lines.contains(&"b die Shutdown".to_string()), "{lines:?}");
    assert_eq!(panics, 1, "{lines:?}");
}

// R6.8, R3.2: a routed event whose `kind()` panics is dropped; the events routed beside it are
// processed in routing order, and so is a chain of routed events (each routing the next) up to the
// link whose `kind()` panics.
#[test]
fn r6_8_a_routed_event_whose_kind_panics_is_dropped_and_its_batch_keeps_its_order() {
    let (lines, panics, clean) = contain(false, vec![pev(1, 30), pev(7, 0)]);
    assert!(clean, "{lines:?}");
    for name in ["a", "b"] {
        let expected: Vec<String> = ["1", "30", "31", "33", "2"]
            .iter()
            .map(|v| format!("{name} got {v}"))
            .collect();
        assert_eq!(got(&lines, name), expected, "{lines:?}");
    }
    let chain: Vec<&String> = lines.iter().filter(|l| l.contains("chain")).collect();
    assert_eq!(chain, ["a chain 0", "a chain 1"], "{lines:?}");
    // Event 32 once; the chain's link twice (the chain's look-ahead, then its own dispatch).
    assert_eq!(panics, 3, "{lines:?}");
    assert!(lines.contains(&"a die Shutdown".to_string()), "{lines:?}");
}

/// Plain data (no drop glue): an inbox entry's event of such a type is dispatched without entering
/// the route stack (`Context::run_root`). `fault` makes its `kind()` or `key()` panic.
#[derive(Clone, Copy, Debug)]
struct Cev {
    kind: u32,
    val: u64,
    fault: Fault,
}

impl Event for Cev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        if self.fault == Fault::Kind {
            panic!("kind() of plain event {}", self.val);
        }
        self.kind
    }
    fn key(&self) -> Option<u64> {
        if self.fault == Fault::Key {
            panic!("key() of plain event {}", self.val);
        }
        Some(self.val)
    }
}

fn cev(kind: u32, val: u64) -> Cev {
    Cev {
        kind,
        val,
        fault: Fault::None,
    }
}

/// Logs kind 1 (solo listener), kind 2 (keyed:
/// every event's `key()` is asked) and kind 3 (routed); value 30 routes 31, 32 and 33; kind 4
/// (value 40, which has a `completed` listener) routes 41, which routes 42 (a chain link).
struct Plain {
    log: Log,
}

type Px<'a> = Scope<'a, Cev, Plain>;

impl Monitor<Cev> for Plain {
    fn on_load(&mut self, cx: &mut Px<'_>) {
        cx.on_all(
            Pattern::kind(1),
            |m: &mut Plain, cx: &mut Px<'_>, e: &Cev| {
                m.log.push(format!("got {}", e.val));
                if e.val == 30 {
                    cx.route(cev(3, 31));
                    cx.route(cev(3, 32));
                    cx.route(cev(3, 33));
                }
            },
        );
        cx.on_all(
            Pattern::kind(2).key(7),
            |m: &mut Plain, _: &mut Px<'_>, e: &Cev| m.log.push(format!("keyed {}", e.val)),
        );
        cx.on_all(
            Pattern::kind(3),
            |m: &mut Plain, cx: &mut Px<'_>, e: &Cev| {
                m.log.push(format!("routed {}", e.val));
                if e.val == 41 {
                    cx.route(cev(3, 42));
                }
            },
        );
        cx.on_all(
            Pattern::kind(4),
            |m: &mut Plain, cx: &mut Px<'_>, e: &Cev| {
                m.log.push(format!("four {}", e.val));
                cx.route(cev(3, 41));
            },
        );
        cx.completed(
            Pattern::kind(4),
            |m: &mut Plain, _: &mut Px<'_>, e: &Cev| m.log.push(format!("completed {}", e.val)),
        );
    }
}

// R2.2, R3.2, R6.7, R6.8, R9.1 for an inbox event of a type without drop glue, which the context
// dispatches without putting it on the route stack: one whose `kind()` or `key()` panics is dropped
// and counted and the context carries on; what a root routes runs before the next inbox entry, in
// routing order (a chain included); a `completed` listener fires after everything its event
// routed; and the max route depth counts the root as one entry.
#[test]
fn r6_8_r2_2_a_plain_inbox_event_dispatched_off_the_stack_keeps_every_rule() {
    let (lines, status) = bounded(|| {
        let log = Log::default();
        let c: Correlator<Cev> = Correlator::builder().external_time().build().unwrap();
        c.load(Plain { log: log.clone() }).unwrap();
        c.start();
        let input = c.input();
        let bad = |kind, val, fault| Cev { kind, val, fault };
        for e in [
            cev(1, 1),
            bad(1, 13, Fault::Kind),
            bad(2, 14, Fault::Key),
            cev(2, 7),
            cev(1, 30),
            cev(4, 40),
            cev(1, 2),
        ] {
            input.send_to(c.main(), e).unwrap();
        }
        let main = c.main();
        let status = c.shutdown().expect("clean shutdown");
        (log.snapshot(), status.context(main).cloned())
    });
    assert_eq!(
        lines,
        [
            "got 1",
            "keyed 7",
            "got 30",
            "routed 31",
            "routed 32",
            "routed 33",
            "four 40",
            "routed 41",
            "routed 42",
            "completed 40",
            "got 2"
        ],
        "{lines:?}"
    );
    let main = status.expect("main's status");
    assert_eq!(main.events_dropped_by_panic, 2, "{main:?}");
    assert_eq!(main.handler_panics, 0, "{main:?}");
    // Every inbox event counts as processed, the two dropped ones included (as on the stack path).
    assert_eq!(main.processed, 7 + 5, "{main:?}");
    // Value 30's batch: 31 in the front slot, 32 and 33 on the stack.
    assert_eq!(main.max_route_depth, 3, "{main:?}");
}
