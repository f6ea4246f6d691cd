//! `workload/keys/{1k,100k,1m}`: what a live key costs as the key set grows (issue 31). A
//! keyed monitor written the way a user writes one: `Pool::load_per_key` on a pool of one member,
//! each key's instance registering one `on_all(Pattern::kind(..).key(k))` listener. The figures
//! of the three sizes are compared with each other (paired per round, `crate::targets`), so there
//! is no twin: the question is whether a key costs the same at 1,000,000 live keys as at 1,000.
//!
//! # What runs, in order, on one correlator
//! 1. **Create**: the harness's thread sends each key's first event (keys `0..n` in order); the
//!    member's dispatcher creates the key's instance from it. `create_ns_per_instance` is the time
//!    from the first send to the last instance's `on_load`, over `n`.
//! 2. **RSS**: `VmRSS` before the first send and with all `n` instances live;
//!    `rss_per_instance` is the growth over `n` (bytes). Before the first reading, one warm-up
//!    key (`n`, outside the measured ones) is created and ended, so that the member's allocator
//!    has set up its heap (at small key counts that set-up outweighs the instances:
//!    harness/BENCHMARKS.md, "The harness's own choices").
//! 3. **Steady state**: a sender thread sends events whose keys are drawn from a seeded
//!    splitmix64 stream, uniformly over all `n` keys, for the mode's warm-up and window;
//!    `throughput` is the events the instances took in the window over its length. At a million
//!    keys consecutive events touch unrelated instances: the cache misses of a large key set show.
//! 4. **End**: one kill event per key, in a seeded shuffled order; the instance's handler calls
//!    `die`. `end_ns_per_instance` is the time from the first kill to the last `on_die`, over `n`.
//! 5. **Re-create**: every key's next event creates a fresh instance (the ended key was
//!    forgotten); its time per instance is a parameter (`recreate_ns_per_instance`).
//! 6. **Shutdown** with all `n` keys live: `shutdown_ns_per_instance` is the whole `shutdown()`
//!    over `n` (the constant part, joining two context threads, is tens of µs).
//!
//! # Checks
//! Every instance hands its count over in `on_die`. A key's first instance must have taken its
//! creating event plus exactly the events the seeded stream drew for it (replayed after the run),
//! and end by `Died`; its second must have taken its creating event only and end by `Shutdown`;
//! each exactly once. An event reaching an instance of another key, a live key count
//! (`Pool::status`) other than `n` after each creation and 0 after the kills and after the
//! shutdown, or an end of another kind fails the run.
//!
//! # The shutdown guard
//! The engine's shutdown was quadratic in live instances (issue 31: 17.5 s at 100,000; linear
//! since), and a regression to that would take hours at a million: the guard keeps it from
//! hanging the lab. A size of [`GUARD_FROM`] keys or more first times the shutdown of
//! small correlators ([`PROBE_KEYS`] live instances, the fastest of two tries each), fits the
//! growth exponent and predicts this size's shutdown; when the prediction is over a quarter of the mode's run timeout the size
//! is skipped and the run fails with a message that gives the probe's figures. A skipped size
//! never reads as measured.

// Without the engine only the ids are registered; the data helpers serve the tests.
#![cfg_attr(not(feature = "engine"), allow(dead_code))]

use crate::scenario::Scenario;
#[cfg(feature = "engine")]
use crate::scenario::{Family, RunCtx};

/// The sizes: the id's suffix, the live keys in quick and full mode, the live keys in smoke
/// mode (CI: well under a second each).
pub const SIZES: [(&str, u64, u64); 3] = [
    ("1k", 1_000, 1_000),
    ("100k", 100_000, 3_000),
    ("1m", 1_000_000, 10_000),
];

/// Sizes of this many keys or more are guarded (see the module docs).
pub const GUARD_FROM: u64 = 200_000;

/// The live instances of the guard's two probe correlators.
pub const PROBE_KEYS: [u64; 2] = [20_000, 40_000];

/// Each probe size is timed this many times; the fastest counts (a descheduled shutdown is slow,
/// never fast).
const PROBE_TRIES: usize = 2;

/// Registers `workload/keys/{1k,100k,1m}`.
pub fn register(v: &mut Vec<Scenario>, _cores: usize) {
    for (name, keys, smoke) in SIZES {
        let id = format!("workload/keys/{name}");
        #[cfg(not(feature = "engine"))]
        {
            let _ = (keys, smoke);
            v.push(crate::scenario::engine::absent(id, 2));
        }
        #[cfg(feature = "engine")]
        v.push(Scenario::new(
            id,
            format!(
                "one-listener keyed monitor (load_per_key, one member) at {keys} live keys: \
                 events/s over all keys, create / end / shutdown ns and RSS per instance"
            ),
            2,
            Family::Engine,
            move |ctx: &RunCtx| imp::run(ctx, ctx.mode.pick(smoke, keys, keys)),
        ));
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): the seeded source of the key stream and the kill order.
#[derive(Clone, Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; `n > 0`).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The seed of every size's key stream and kill order.
const SEED: u64 = 0x6b65_7973_2d31_3233;

/// The keys `0..n` in a seeded shuffled order (Fisher–Yates).
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut rng = SplitMix(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// How many events of a stream of `sent` seeded draws over `n` keys each key gets.
fn drawn_per_key(n: u64, sent: u64, seed: u64) -> Vec<u64> {
    let mut per = vec![0u64; n as usize];
    let mut rng = SplitMix(seed);
    for _ in 0..sent {
        per[rng.below(n) as usize] += 1;
    }
    per
}

/// The shutdown time predicted at `keys` from two probes `(keys, seconds)`: the larger probe's
/// time grown by the fitted exponent, and that exponent. The exponent is clamped to 1..=2: a
/// probe faster at the larger size is noise, and the slowness to guard against is quadratic.
fn predict_shutdown(probes: [(u64, f64); 2], keys: u64) -> (f64, f64) {
    let [(n0, t0), (n1, t1)] = probes;
    let exponent = if t0 > 0.0 && t1 > 0.0 && n1 > n0 {
        ((t1 / t0).ln() / (n1 as f64 / n0 as f64).ln()).clamp(1.0, 2.0)
    } else {
        1.0
    };
    (t1 * (keys as f64 / n1 as f64).powf(exponent), exponent)
}

#[cfg(feature = "engine")]
mod imp {
    use super::{
        drawn_per_key, predict_shutdown, shuffled, SplitMix, GUARD_FROM, PROBE_KEYS, PROBE_TRIES,
        SEED,
    };
    use crate::clock::now_ns;
    use crate::pin::Probe;
    use crate::record::Better;
    use crate::scenario::engine::{wait_name, Clock, Cx, EngineRun, Running, Seen, KEYED_KIND};
    use crate::scenario::{
        timed_window, Ev, Outcome, RunCtx, Shared, Window, STALL_TIMEOUT, STOP_CHECK_EVERY,
        STREAM_CAPACITY,
    };
    use correlator::{ContextOptions, DieReason, Monitor, Pattern, Pool, PoolInput, WaitStrategy};
    use crossbeam_utils::CachePadded;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// The `seq` of a kill event: the instance that takes it calls `die`.
    const KILL: u64 = u64::MAX;
    /// How often the harness's thread looks at a phase's progress.
    const POLL: Duration = Duration::from_millis(1);
    /// The member's wait strategy: the partitioned scenarios' (an idle `main` and the harness's
    /// thread share the cores with the member and the sender).
    const WAIT: WaitStrategy = WaitStrategy::SpinYieldPark;

    fn ev(key: u64, seq: u64) -> Ev {
        Ev {
            kind: KEYED_KIND,
            seq,
            t_ns: 0,
            aux: key,
        }
    }

    /// A phase that the member's thread counts and timestamps: the harness's thread sets its
    /// goal before sending the phase's events (the send publishes it to the member), the member
    /// stamps the time of the first step and of the step that reaches the goal.
    #[derive(Default)]
    struct Phase {
        count: AtomicU64,
        goal: AtomicU64,
        first_at: AtomicU64,
        done_at: AtomicU64,
    }

    impl Phase {
        /// One step, on the member's thread (the only writer of `count`).
        fn step(&self) {
            let n = self.count.load(Ordering::Relaxed) + 1;
            self.count.store(n, Ordering::Relaxed);
            if n == 1 {
                self.first_at.store(now_ns().max(1), Ordering::Relaxed);
            }
            if n == self.goal.load(Ordering::Relaxed) {
                self.done_at.store(now_ns().max(1), Ordering::Release);
            }
        }

        /// Sets the count the next [`Phase::wait`] waits for.
        fn aim(&self, goal: u64) {
            self.done_at.store(0, Ordering::Relaxed);
            self.goal.store(goal, Ordering::Relaxed);
        }

        /// Waits for the goal; the time it was reached (`now_ns`).
        fn wait(&self, what: &str) -> Result<u64, String> {
            let goal = self.goal.load(Ordering::Relaxed);
            settle(&self.count, goal, what, || {
                self.done_at.load(Ordering::Acquire) != 0
            })?;
            Ok(self.done_at.load(Ordering::Acquire))
        }
    }

    /// Waits until `done`, failing when `count` has not moved for [`STALL_TIMEOUT`].
    fn settle(
        count: &AtomicU64,
        goal: u64,
        what: &str,
        done: impl Fn() -> bool,
    ) -> Result<(), String> {
        let (mut last, mut moved) = (count.load(Ordering::Relaxed), Instant::now());
        while !done() {
            std::thread::sleep(POLL);
            let now = count.load(Ordering::Relaxed);
            if now != last {
                (last, moved) = (now, Instant::now());
            } else if moved.elapsed() > STALL_TIMEOUT {
                return Err(format!(
                    "{what}: no progress for {} s at {now} of {goal}",
                    STALL_TIMEOUT.as_secs()
                ));
            }
        }
        Ok(())
    }

    /// What an instance hands over in `on_die`.
    #[derive(Clone, Copy, Debug)]
    struct Report {
        key: u64,
        taken: u64,
        died: bool,
    }

    /// What the instances share with the harness's thread.
    struct Book {
        sh: Arc<Shared>,
        /// Events taken by instance listeners (one writer, the member's thread).
        events: CachePadded<AtomicU64>,
        created: Phase,
        died: Phase,
        shut: Phase,
        /// Events that reached an instance of another key.
        wrong_key: AtomicU64,
        /// Every `on_die`, in order (reserved for two ends per key up front).
        reports: Mutex<Vec<Report>>,
        seen: Seen,
    }

    impl Book {
        #[inline]
        fn took(&self) {
            let n = self.events.load(Ordering::Relaxed) + 1;
            self.events.store(n, Ordering::Relaxed);
            self.sh.publish(n, false);
            if n % STOP_CHECK_EVERY == 1 {
                self.seen.mark();
            }
        }
    }

    /// A key's instance: one listener on its key's events, a count.
    struct KeyWatch {
        key: u64,
        /// Events taken, the creating one (handed to the factory) included.
        taken: u64,
        book: Arc<Book>,
    }

    impl KeyWatch {
        fn take(&mut self, cx: &mut Cx<'_, Self>, e: &Ev) {
            if e.seq == KILL {
                cx.die();
                return;
            }
            if e.aux != self.key {
                self.book.wrong_key.fetch_add(1, Ordering::Relaxed);
            }
            self.taken += 1;
            self.book.took();
        }
    }

    impl Monitor<Ev> for KeyWatch {
        fn on_load(&mut self, cx: &mut Cx<'_, Self>) {
            cx.on_all(Pattern::kind(KEYED_KIND).key(self.key), Self::take);
            self.book.created.step();
        }

        fn on_die(&mut self, reason: &DieReason, _cx: &mut Cx<'_, Self>) {
            let died = match reason {
                DieReason::Died => true,
                DieReason::Shutdown => false,
                other => {
                    self.book
                        .sh
                        .fail(format!("key {}: instance ended by {other:?}", self.key));
                    false
                }
            };
            let report = Report {
                key: self.key,
                taken: self.taken,
                died,
            };
            self.book
                .reports
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(report);
            if died {
                self.book.died.step();
            } else {
                self.book.shut.step();
            }
        }
    }

    /// A started correlator with its pool of one member and the per-key monitor loaded.
    struct Bench {
        run: Running,
        pool: Pool<Ev>,
        input: PoolInput<Ev>,
        book: Arc<Book>,
    }

    impl Bench {
        fn start(ctx: &RunCtx, keys: u64, out: &mut Outcome) -> Option<Bench> {
            let (run, (pool, input, book)) = EngineRun::new(ctx, STREAM_CAPACITY, WAIT)
                .clock(Clock::External)
                .start(out, |c, _, sh| {
                    let book = Arc::new(Book {
                        sh: sh.clone(),
                        events: CachePadded::new(AtomicU64::new(0)),
                        created: Phase::default(),
                        died: Phase::default(),
                        shut: Phase::default(),
                        wrong_key: AtomicU64::new(0),
                        reports: Mutex::new(Vec::with_capacity(2 * keys as usize)),
                        seen: Seen::default(),
                    });
                    let pool = c
                        .create_pool(ContextOptions::new("keys"), 1)
                        .map_err(|e| format!("create_pool: {e}"))?;
                    let shared = book.clone();
                    pool.load_per_key([KEYED_KIND], move |key, _first: &Ev| KeyWatch {
                        key,
                        taken: 1,
                        book: shared.clone(),
                    })
                    .map_err(|e| format!("load_per_key: {e}"))?;
                    let input = pool.input();
                    Ok((pool, input, book))
                })?;
            Some(Bench {
                run,
                pool,
                input,
                book,
            })
        }

        fn live(&self) -> u64 {
            self.pool.status().live_keys
        }

        /// Sends `events` and waits for `phase` to reach `goal`: ns from the first send to the
        /// goal.
        fn timed(
            &self,
            phase: &Phase,
            goal: u64,
            events: impl Iterator<Item = Ev>,
            what: &str,
        ) -> Result<u64, String> {
            phase.aim(goal);
            let t0 = now_ns();
            for e in events {
                self.input
                    .send(e)
                    .map_err(|e| format!("{what}: send failed: {e}"))?;
            }
            Ok(phase.wait(what)?.saturating_sub(t0))
        }

        /// Creates the instances of keys `0..keys` (`goal`: the instances created in all by then).
        fn create(&self, keys: u64, goal: u64, what: &str) -> Result<u64, String> {
            self.timed(&self.book.created, goal, (0..keys).map(|k| ev(k, 0)), what)
        }

        fn check_live(&self, want: u64, when: &str) -> Result<(), String> {
            let live = self.live();
            if live == want {
                Ok(())
            } else {
                Err(format!("{live} live keys {when}, expected {want}"))
            }
        }

        /// Shuts down with every key live: seconds of `shutdown()`, seconds from the first to
        /// the last `on_die(Shutdown)`.
        fn shutdown(&self, out: &mut Outcome) -> (f64, Option<f64>) {
            self.book.shut.aim(self.live());
            let t0 = Instant::now();
            self.run.finish(out);
            let secs = t0.elapsed().as_secs_f64();
            let (first, last) = (
                self.book.shut.first_at.load(Ordering::Relaxed),
                self.book.shut.done_at.load(Ordering::Acquire),
            );
            let hooks = (first != 0 && last >= first).then(|| (last - first) as f64 / 1e9);
            (secs, hooks)
        }
    }

    pub(super) fn run(ctx: &RunCtx, keys: u64) -> Outcome {
        let mut out = Outcome::default();
        out.param("keys", keys);
        out.param("seed", SEED);
        out.param("capacity", STREAM_CAPACITY as u64);
        out.param("wait_strategy", wait_name(WAIT));
        if keys >= GUARD_FROM {
            match guard(ctx, keys, &mut out) {
                Ok(true) => {}
                Ok(false) => return out,
                Err(e) => {
                    out.fail(format!("shutdown probe: {e}"));
                    return out;
                }
            }
        }
        let kill_order = shuffled(keys, SEED ^ 1);
        let Some(b) = Bench::start(ctx, keys, &mut out) else {
            return out;
        };
        let measured = measure(ctx, &b, keys, kill_order, &mut out);
        let live_before = b.live();
        let (secs, hooks) = b.shutdown(&mut out);
        out.param("shutdown_s", secs);
        out.param("live_at_shutdown", live_before);
        let sent = match measured {
            Ok(sent) => {
                out.value(
                    "shutdown_ns_per_instance",
                    "ns",
                    secs * 1e9 / keys as f64,
                    Better::Lower,
                );
                if let Some(h) = hooks {
                    out.param("shutdown_hooks_s", h);
                }
                sent
            }
            Err(e) => {
                out.fail(e);
                return out;
            }
        };
        if let Err(e) = b.check_live(0, "after the shutdown") {
            out.fail(e);
        }
        out.placed(b.book.seen.placement("member", ctx.map.core_for(1)));
        verify(&mut out, &b.book, keys, sent);
        out
    }

    /// Phases 1 to 5 of the module docs; the events of the steady state.
    fn measure(
        ctx: &RunCtx,
        b: &Bench,
        keys: u64,
        kill_order: Vec<u64>,
        out: &mut Outcome,
    ) -> Result<u64, String> {
        let n = keys as f64;
        // The warm-up key (one past the measured ones): its instance, created and ended before
        // the first RSS reading, makes the member's allocator set up its heap then, not during
        // the measured creation.
        b.timed(&b.book.created, 1, std::iter::once(ev(keys, 0)), "warm-up")?;
        b.timed(
            &b.book.died,
            1,
            std::iter::once(ev(keys, KILL)),
            "warm-up end",
        )?;
        let rss0 = crate::scenario::vm_kib("VmRSS:").ok_or("no VmRSS in /proc/self/status")?;
        let create = b.create(keys, keys + 1, "create")?;
        let rss1 = crate::scenario::vm_kib("VmRSS:").ok_or("no VmRSS in /proc/self/status")?;
        out.value(
            "create_ns_per_instance",
            "ns",
            create as f64 / n,
            Better::Lower,
        );
        out.param("rss_before_kib", rss0);
        out.param("rss_live_kib", rss1);
        out.value(
            "rss_per_instance",
            "bytes",
            rss1.saturating_sub(rss0) as f64 * 1024.0 / n,
            Better::Lower,
        );
        b.check_live(keys, "once every key's first event was taken")?;

        let (w, sent) = steady(ctx, b, keys, out)?;
        settle(&b.book.events, sent, "steady-state drain", || {
            b.book.events.load(Ordering::Relaxed) >= sent
        })?;
        out.throughput("throughput", "events/s", w.events, w.secs);
        out.param("events_in_window", w.events);
        out.param("events_sent", sent);

        let end = b.timed(
            &b.book.died,
            keys + 1,
            kill_order.into_iter().map(|k| ev(k, KILL)),
            "end",
        )?;
        b.check_live(0, "once every key's kill event was taken")?;
        out.value("end_ns_per_instance", "ns", end as f64 / n, Better::Lower);

        let recreate = b.create(keys, 2 * keys + 1, "re-create")?;
        b.check_live(keys, "once every key was created again")?;
        out.param("recreate_ns_per_instance", recreate as f64 / n);
        Ok(sent)
    }

    /// The steady state: a sender thread (slot 2) draws keys from the seeded stream until the
    /// window ends. The window and the events the sender sent.
    fn steady(
        ctx: &RunCtx,
        b: &Bench,
        keys: u64,
        out: &mut Outcome,
    ) -> Result<(Window, u64), String> {
        let (input, sh, core) = (b.input.clone(), b.run.sh.clone(), ctx.map.core_for(2));
        let sender = std::thread::spawn(move || {
            let probe = Probe::start("sender", core);
            let mut rng = SplitMix(SEED);
            let mut i = 0u64;
            loop {
                if i % STOP_CHECK_EVERY == 0 && sh.stopped() {
                    break;
                }
                if let Err(e) = input.send(ev(rng.below(keys), i)) {
                    sh.fail(format!("sender: send failed: {e}"));
                    break;
                }
                i += 1;
            }
            (probe.finish(), i)
        });
        let w = timed_window(ctx, &b.run.sh);
        let (placed, sent) = sender.join().map_err(|_| "the sender panicked")?;
        out.placed(placed);
        Ok((w?, sent))
    }

    /// Every instance's count and end against the seeded stream's draws.
    fn verify(out: &mut Outcome, book: &Book, keys: u64, sent: u64) {
        let wrong = book.wrong_key.load(Ordering::Relaxed);
        out.check(wrong == 0, || {
            format!("{wrong} event(s) reached an instance of another key")
        });
        let reports = std::mem::take(&mut *book.reports.lock().unwrap_or_else(|e| e.into_inner()));
        out.check(reports.len() as u64 == 2 * keys + 1, || {
            format!(
                "{} on_die calls, expected {} (two instances per key and the warm-up's, each \
                 ending once)",
                reports.len(),
                2 * keys + 1
            )
        });
        let drawn = drawn_per_key(keys, sent, SEED);
        // Index `keys` is the warm-up key: one instance, which took its creating event and died.
        let (mut ends, mut bad) = (vec![[0u32; 2]; keys as usize + 1], 0u64);
        let mut first_bad = None;
        for r in reports {
            let Some(e) = ends.get_mut(r.key as usize) else {
                bad += 1;
                first_bad.get_or_insert(format!("an instance of key {} (not sent)", r.key));
                continue;
            };
            e[usize::from(!r.died)] += 1;
            // First instance: its creating event and its draws; second: its creating event.
            let drawn = drawn.get(r.key as usize).copied().unwrap_or(0);
            let want = if r.died { 1 + drawn } else { 1 };
            if r.taken != want {
                bad += 1;
                first_bad.get_or_insert(format!(
                    "key {}'s {} instance took {} event(s), sent {want}",
                    r.key,
                    if r.died { "first" } else { "second" },
                    r.taken
                ));
            }
        }
        out.check(bad == 0, || {
            format!(
                "{bad} instance(s) with a wrong count, first: {}",
                first_bad.unwrap_or_default()
            )
        });
        let warm = ends.pop();
        out.check(warm == Some([1, 0]), || {
            format!("the warm-up key's instances ended {warm:?} times (died, shut down)")
        });
        let odd = ends.iter().filter(|e| **e != [1, 1]).count();
        out.check(odd == 0, || {
            format!("{odd} key(s) without exactly one died and one shut-down instance")
        });
    }

    /// Times the shutdown of two small correlators and predicts this size's: `Ok(false)` (the
    /// size skipped, the run failed with the figures) when the prediction is over a quarter of
    /// the mode's run timeout.
    fn guard(ctx: &RunCtx, keys: u64, out: &mut Outcome) -> Result<bool, String> {
        let mut probes = [(0u64, 0f64); 2];
        for (slot, &n) in probes.iter_mut().zip(&PROBE_KEYS) {
            let mut fastest = f64::INFINITY;
            for _ in 0..PROBE_TRIES {
                let mut scratch = Outcome::default();
                let b = Bench::start(ctx, n, &mut scratch)
                    .ok_or_else(|| scratch.failures.join("; "))?;
                b.create(n, n, "probe create")?;
                let (secs, _) = b.shutdown(&mut scratch);
                if !scratch.failures.is_empty() {
                    return Err(scratch.failures.join("; "));
                }
                fastest = fastest.min(secs);
            }
            *slot = (n, fastest);
        }
        let (predicted, exponent) = predict_shutdown(probes, keys);
        let budget = ctx.mode.run_timeout().as_secs_f64() / 4.0;
        for (n, secs) in probes {
            out.param(&format!("probe_shutdown_s[{n}]"), secs);
        }
        out.param("probe_exponent", exponent);
        out.param("predicted_shutdown_s", predicted);
        if predicted > budget {
            out.fail(format!(
                "skipped: shutdown is not linear in live instances ({} keys: {:.3} s, {} keys: \
                 {:.3} s, exponent {exponent:.2}); {keys} keys would take at least about \
                 {predicted:.0} s, over this mode's {budget:.0} s (a quarter of its run timeout)",
                probes[0].0, probes[0].1, probes[1].0, probes[1].1
            ));
            return Ok(false);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_three_sizes() {
        let mut v = Vec::new();
        register(&mut v, 2);
        let ids: Vec<String> = v.into_iter().map(|s| s.id).collect();
        assert_eq!(
            ids,
            ["workload/keys/1k", "workload/keys/100k", "workload/keys/1m"]
        );
    }

    #[test]
    fn the_key_stream_is_seeded_uniform_and_replayable() {
        let per = drawn_per_key(100, 100_000, SEED);
        assert_eq!(per.iter().sum::<u64>(), 100_000);
        // 1,000 expected per key; 4.4 standard deviations either side.
        assert!(per.iter().all(|&n| (860..1140).contains(&n)), "{per:?}");
        assert_eq!(per, drawn_per_key(100, 100_000, SEED));
        assert_ne!(per, drawn_per_key(100, 100_000, SEED ^ 1));
    }

    #[test]
    fn the_kill_order_is_a_seeded_permutation() {
        let v = shuffled(1000, 7);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<u64>>());
        assert_ne!(v, sorted);
        assert_eq!(v, shuffled(1000, 7));
    }

    #[test]
    fn a_quadratic_shutdown_is_predicted_far_over_a_linear_one() {
        // Quadratic: 4x the time for 2x the instances.
        let (t, e) = predict_shutdown([(20_000, 0.5), (40_000, 2.0)], 1_000_000);
        assert!(
            (e - 2.0).abs() < 1e-9 && (t - 1250.0).abs() < 1e-6,
            "{t} s, exponent {e}"
        );
        // Linear: the time per instance stays.
        let (t, e) = predict_shutdown([(20_000, 0.02), (40_000, 0.04)], 1_000_000);
        assert!(
            (e - 1.0).abs() < 1e-9 && (t - 1.0).abs() < 1e-9,
            "{t} s, exponent {e}"
        );
        // The figures (0.30 s at 20,000, 17.5 s at 100,000: exponent 2.5) are read as
        // quadratic; a larger probe faster than the smaller one as linear, never as shrinking.
        assert_eq!(predict_shutdown([(20_000, 0.3), (100_000, 17.5)], 1).1, 2.0);
        assert_eq!(predict_shutdown([(20_000, 0.04), (40_000, 0.03)], 1).1, 1.0);
    }
}
