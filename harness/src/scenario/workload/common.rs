//! What the workloads share: the seeded generator, the twin's hasher and pending-watch list, the
//! alert record both sides emit, the fixed-work timing of a twin (and, with the `engine` feature,
//! of the engine: [`engine`]), and the check that compares alerts.
//!
//! # Fixed work
//! A workload's data set is generated before anything is timed. The clock starts when the
//! producer thread is started and stops when the last alert has been taken: for a twin, when its
//! consumer thread has processed the whole stream and its end; for the engine, when `shutdown()`
//! has returned (SPEC R8.1: everything accepted is processed first) and the alert reader has read
//! the output to its end. Throughput is the data set's events over that time.
//!
//! # The threads, on both sides
//! Slot 0: the producer (sharing its core with the engine's `main` context, which stays idle and
//! parks). Slot 1 (and up, for a pool): the consumer, i.e. the twin's state-machine thread or the
//! engine's context(s). The engine also has the alert reader (parked while no alert is queued);
//! the twin's consumer collects its alerts in a vector in place.

use crate::pin::{Placement, Probe};
use crate::record::Better;
use crate::scenario::peers::rtrb;
use crate::scenario::{Outcome, RunCtx, Spin, STREAM_CAPACITY};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Instant;

/// splitmix64 (Steele, Lea, Flood 2014): the seeded, deterministic source of every data set.
#[derive(Clone, Debug)]
pub(super) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant at these sizes).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub(super) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_mille` / 1000.
    pub(super) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// splitmix64's finaliser: also how the workloads turn an index into a sparse key (a card
/// number, a device id), so that keys are not dense and the twin needs a real map.
pub(super) fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The twins' hasher: FxHash's multiply-rotate (rustc's hasher), a fast non-cryptographic hash;
/// the keys are already well mixed.
#[derive(Clone, Copy, Default)]
pub(super) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`FxHasher`]: the twins' per-key state.
pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One alert, as both sides emit it: the rule, the key, and two numbers that pin it down (the
/// ids of the first and last events of the match, or an event id and a due time). Compared as a
/// sorted list: the order in which alerts leave either side is not part of the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Alert {
    /// Which rule of the workload.
    pub(crate) rule: u8,
    /// The key (card, symbol, device).
    pub(crate) key: u64,
    /// First event of the match.
    pub(crate) first: u64,
    /// Last event of the match, or the time (ms) an absence was due.
    pub(crate) last: u64,
}

/// The pending "within" watches of one key, in a twin: each holds its due time (exclusive, as the
/// engine's `within`: an event at or after it is too late) and what the rule compares with.
#[derive(Clone, Debug)]
pub(super) struct Watches<W>(Vec<(u64, W)>);

impl<W> Default for Watches<W> {
    fn default() -> Self {
        Watches(Vec::new())
    }
}

impl<W> Watches<W> {
    /// Watches for `w` until `due` (ms).
    pub(super) fn push(&mut self, due: u64, w: W) {
        self.0.push((due, w));
    }

    /// At event time `now`: drops the watches that are due, then fires (and drops) every watch
    /// `hit` accepts, oldest first.
    #[inline]
    pub(super) fn fire(
        &mut self,
        now: u64,
        mut hit: impl FnMut(&W) -> bool,
        mut emit: impl FnMut(&W),
    ) {
        if self.0.is_empty() {
            return;
        }
        self.0.retain(|(due, w)| {
            if *due <= now {
                false
            } else if hit(w) {
                emit(w);
                false
            } else {
                true
            }
        });
    }
}

/// A workload's rules written by hand: a per-key state machine over the stream.
pub(super) trait Twin<E>: Send + 'static {
    /// Takes one event.
    fn step(&mut self, e: &E, alerts: &mut Vec<Alert>);
    /// The stream has ended and time has moved to `end_ms`: fire what is due by then.
    fn end(&mut self, end_ms: u64, alerts: &mut Vec<Alert>);
}

/// A generated data set: the events, the time the stream ends at (ms), and the alerts it must
/// raise, computed by the twin in this thread, untimed.
pub(super) struct Data<E> {
    /// The events, in sending order.
    pub(super) events: Arc<[E]>,
    /// Where the clock moves once every event has been sent.
    pub(super) end_ms: u64,
}

impl<E> Data<E> {
    /// What `twin` makes of this data set, run in the calling thread.
    pub(super) fn reference<T: Twin<E>>(&self, mut twin: T) -> Vec<Alert> {
        let mut alerts = Vec::new();
        for e in self.events.iter() {
            twin.step(e, &mut alerts);
        }
        twin.end(self.end_ms, &mut alerts);
        alerts
    }
}

/// What a timed run hands back: its seconds, the alerts it raised, where its threads ran.
pub(super) struct Timed {
    /// From the producer's start to the last alert taken.
    pub(super) secs: f64,
    /// Every alert, in the order it came out.
    pub(super) alerts: Vec<Alert>,
    /// The measured threads.
    pub(super) placed: Vec<Placement>,
}

/// Runs the twin: a producer thread (slot 0) pushes every event into a bounded SPSC ring (rtrb,
/// [`STREAM_CAPACITY`]) and a consumer thread (slot 1) runs the state machine; both spin (or
/// yield, sharing a core) while the ring is full or empty. Timed from the producer's start to
/// the consumer's end.
pub(super) fn run_twin<E, T>(ctx: &RunCtx, data: &Data<E>, mut twin: T) -> Result<Timed, String>
where
    E: Copy + Send + Sync + 'static,
    T: Twin<E>,
{
    let (mut tx, mut rx) = rtrb::ring::<E>(STREAM_CAPACITY);
    let shared = ctx.share_core(0, 1);
    let (mut spin_c, mut spin_p) = (Spin::new(ctx, shared), Spin::new(ctx, shared));
    let (core_c, core_p) = (ctx.map.core_for(1), ctx.map.core_for(0));
    let end_ms = data.end_ms;
    let consumer = std::thread::spawn(move || {
        let probe = Probe::start("twin consumer", core_c);
        let mut alerts = Vec::new();
        rtrb::pop_until_abandoned(&mut rx, &mut spin_c, |e| twin.step(&e, &mut alerts));
        twin.end(end_ms, &mut alerts);
        (alerts, probe.finish())
    });
    let events = data.events.clone();
    let t0 = Instant::now();
    let producer = std::thread::spawn(move || {
        let probe = Probe::start("producer", core_p);
        for &e in events.iter() {
            rtrb::push_spinning(&mut tx, e, &mut spin_p);
        }
        probe.finish()
    });
    let p = producer.join().map_err(|_| "the producer panicked")?;
    let (alerts, c) = consumer.join().map_err(|_| "the twin consumer panicked")?;
    Ok(Timed {
        secs: t0.elapsed().as_secs_f64(),
        alerts,
        placed: vec![p, c],
    })
}

/// How many alerts a run must raise to prove anything.
#[derive(Clone, Copy, Debug)]
pub(super) enum Expect {
    /// Exactly this many (the generator knows).
    Exactly(usize),
    /// At least one, and fewer than the events.
    Some,
    /// Between these two, both included (what the data set bounds: `workload/vwap`'s rows,
    /// more than the events in smoke; `workload/logins`' alerts, at least one per planted burst).
    Between(usize, usize),
}

/// How a workload runs on the engine (in its `imp` module, with the `engine` feature).
pub(super) type EngineFn<'a, E> = &'a dyn Fn(&RunCtx, &Data<E>) -> Result<Timed, String>;

/// One run of a workload scenario on `data`: through `engine` when given, else through the twin
/// (producer and consumer threads); checked against the twin's reference ([`report`]).
pub(super) fn measure<E, T>(
    out: &mut Outcome,
    ctx: &RunCtx,
    data: &Data<E>,
    twin: impl Fn() -> T,
    engine: Option<EngineFn<'_, E>>,
    expect: Expect,
) where
    E: Copy + Send + Sync + 'static,
    T: Twin<E>,
{
    let reference = data.reference(twin());
    let timed = match engine {
        Some(run) => run(ctx, data),
        None => run_twin(ctx, data, twin()),
    };
    report(out, data.events.len(), timed, reference, expect);
}

/// Records a timed run's figures (`throughput` over `events`, `alerts`) and checks its alerts
/// against the reference: the same sorted list, and a plausible count.
pub(super) fn report(
    out: &mut Outcome,
    events: usize,
    run: Result<Timed, String>,
    mut reference: Vec<Alert>,
    expect: Expect,
) {
    out.param("events", events as u64);
    let mut run = match run {
        Ok(r) => r,
        Err(e) => {
            out.fail(e);
            return;
        }
    };
    for p in std::mem::take(&mut run.placed) {
        out.placed(p);
    }
    let rate = out.throughput("throughput", "events/s", events as u64, run.secs);
    if rate > 0.0 {
        out.value("ns_per_event", "ns", 1e9 / rate, Better::Lower);
    }
    out.value("alerts", "alerts", run.alerts.len() as f64, Better::Higher);
    out.param("alerts_expected", reference.len() as u64);
    reference.sort_unstable();
    let mut got = run.alerts;
    got.sort_unstable();
    if let Some(why) = first_difference(&got, &reference) {
        out.fail(why);
    }
    let n = reference.len();
    match expect {
        Expect::Exactly(want) => out.check(n == want, || {
            format!("the reference raised {n} alerts, the generator planted {want}")
        }),
        Expect::Some => out.check(n > 0 && n < events, || {
            format!("{n} alerts for {events} events: not a plausible workload")
        }),
        Expect::Between(lo, hi) => out.check(n >= lo && n <= hi, || {
            format!("the reference raised {n} alerts, outside the plausible {lo}..={hi}")
        }),
    }
}

/// `None` when the sorted lists are equal; otherwise what differs first.
fn first_difference(got: &[Alert], want: &[Alert]) -> Option<String> {
    if got == want {
        return None;
    }
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let detail = match (got.get(i), want.get(i)) {
        (Some(g), Some(w)) if g < w => format!("extra alert {g:?} (the reference's next is {w:?})"),
        (Some(g), Some(w)) => format!("missing alert {w:?} (got {g:?} in its place)"),
        (Some(g), None) => format!("extra alert {g:?}"),
        (None, Some(w)) => format!("missing alert {w:?}"),
        (None, None) => "the lists differ".into(),
    };
    Some(format!(
        "alerts differ from the twin's: {} vs {} expected; first difference at sorted index {i}: {detail}",
        got.len(),
        want.len()
    ))
}

#[cfg(feature = "engine")]
pub(super) mod engine {
    //! The engine's side of a workload: a correlator under event time, a pool of members with
    //! one monitor instance per key (`Pool::load_per_key`), fed by one producer thread through a
    //! `PoolInput` ([`run_keyed`]), or one monitor on the one member, fed through an input
    //! handle ([`run_single`]: the stream queries); alerts out through a typed `Block` output
    //! read by a thread of the harness.

    use super::{Alert, Data, Timed};
    use crate::pin::Probe;
    use crate::scenario::engine::{spin_or_park, Journal};
    use crate::scenario::{RunCtx, STREAM_CAPACITY};
    use correlator::{
        ContextOptions, Correlator, Event, Monitor, Output, OutputOptions, OutputReceiver, Pool,
        Time, WaitStrategy,
    };
    use std::time::Instant;

    /// A built, not yet started correlator with its pool and the alert output.
    pub(in crate::scenario::workload) struct Built<E: Event> {
        pub(in crate::scenario::workload) c: Correlator<E>,
        pub(in crate::scenario::workload) pool: Pool<E>,
        pub(in crate::scenario::workload) out: Output<Alert>,
        pub(in crate::scenario::workload) rx: OutputReceiver<Alert>,
        /// If set, the producer waits after its last send until this says the engine is done
        /// with what it measures, before it does anything else (`alloc/workload`: its
        /// allocation window must not overlap the producer's own ending, the clock entry or
        /// the shutdown, whose allocations would be counted against the events).
        pub(in crate::scenario::workload) settled: Option<Box<dyn Fn() -> bool + Send>>,
    }

    /// Builds the correlator (event time, inbox [`STREAM_CAPACITY`], context `i` pinned to slot
    /// `i`), a pool of `members` (slots 1..), and a typed alert output (`Block`, the default).
    /// `main` stays idle: it parks (the engine's default strategy); the members spin when every
    /// busy thread has a core of its own, else they spin, yield and park.
    pub(in crate::scenario::workload) fn build<E: Event>(
        ctx: &RunCtx,
        members: usize,
    ) -> Result<Built<E>, String> {
        build_with(ctx, members, &Journal::Off)
    }

    /// [`build`], the correlator recording to `journal` (`record/workload/*`).
    pub(in crate::scenario::workload) fn build_with<E: Event>(
        ctx: &RunCtx,
        members: usize,
        journal: &Journal,
    ) -> Result<Built<E>, String> {
        let b = Correlator::<E>::builder()
            .inbox_capacity(STREAM_CAPACITY)
            .wait_strategy(WaitStrategy::SpinYieldPark)
            .event_time();
        let c = journal.build(ctx, b)?;
        let wait = spin_or_park(ctx, members + 1);
        let pool = c
            .create_pool(ContextOptions::new("keys").wait_strategy(wait), members)
            .map_err(|e| format!("create_pool: {e}"))?;
        let (out, rx) = c
            .typed_output::<Alert>(OutputOptions::default())
            .map_err(|e| format!("typed_output: {e}"))?;
        Ok(Built {
            c,
            pool,
            out,
            rx,
            settled: None,
        })
    }

    /// Loads `factory` per key for `kinds` and runs the data set through the pool: producer on
    /// slot 0 (`PoolInput::send` per event, then `send_time(end)` so that what is due by then
    /// fires), then `shutdown()`; timed until the reader has read the output to its end.
    pub(in crate::scenario::workload) fn run_keyed<E, M>(
        ctx: &RunCtx,
        data: &Data<E>,
        built: Built<E>,
        kinds: impl IntoIterator<Item = E::Kind>,
        factory: impl Fn(u64, &E, Output<Alert>) -> M + Send + Sync + 'static,
    ) -> Result<Timed, String>
    where
        E: Event + Copy + Sync,
        M: Monitor<E>,
    {
        let Built {
            c,
            pool,
            out,
            rx,
            settled,
        } = built;
        pool.load_per_key(kinds, move |key, first: &E| {
            factory(key, first, out.clone())
        })
        .map_err(|e| format!("load_per_key: {e}"))?;
        let input = pool.input();
        let send = move |e: E| input.send(e).map_err(|e| format!("send: {e}"));
        drive(ctx, data, c, rx, settled, send, Some(data.end_ms))
    }

    /// Loads the one monitor `make` builds around the alert output in the pool's member (a
    /// pool of one: [`build`]`(ctx, 1)`) and runs the data set through that context, as the
    /// query module's docs drive one: producer on slot 0 (`InputHandle::send_to` the member per
    /// event); the clock is not moved after the last event, so it stops at the last event's
    /// stamp. Then `shutdown()`; timed until the reader has read the output to its end.
    pub(in crate::scenario::workload) fn run_single<E, M>(
        ctx: &RunCtx,
        data: &Data<E>,
        built: Built<E>,
        make: impl FnOnce(Output<Alert>) -> M,
    ) -> Result<Timed, String>
    where
        E: Event + Copy + Sync,
        M: Monitor<E>,
    {
        let Built {
            c,
            pool,
            out,
            rx,
            settled,
        } = built;
        let member = *pool.members().first().ok_or("a pool without members")?;
        c.load_in(member, make(out))
            .map_err(|e| format!("load_in: {e}"))?;
        let input = c.input();
        let send = move |e: E| input.send_to(member, e).map_err(|e| format!("send: {e}"));
        drive(ctx, data, c, rx, settled, send, None)
    }

    /// Starts `c` and times the data set through it: a producer on slot 0 hands each event to
    /// `send`, then (after `settled`, if set) moves the clock to `end_ms` if given; then
    /// `shutdown()` and the reader's end. Fails on a send, a handler panic or a late event.
    fn drive<E: Event + Copy + Sync>(
        ctx: &RunCtx,
        data: &Data<E>,
        c: Correlator<E>,
        rx: OutputReceiver<Alert>,
        settled: Option<Box<dyn Fn() -> bool + Send>>,
        send: impl Fn(E) -> Result<(), String> + Send + 'static,
        end_ms: Option<u64>,
    ) -> Result<Timed, String> {
        let clock = c.input();
        c.start();
        let reader = std::thread::spawn(move || rx.iter().collect::<Vec<Alert>>());
        let (events, core) = (data.events.clone(), ctx.map.core_for(0));
        let t0 = Instant::now();
        let producer = std::thread::spawn(move || {
            let probe = Probe::start("producer", core);
            for &e in events.iter() {
                send(e)?;
            }
            if let Some(settled) = settled {
                while !settled() {
                    std::thread::yield_now();
                }
            }
            if let Some(end) = end_ms {
                // Every event has arrived: the time entry comes after them in each inbox (R2.2).
                clock
                    .send_time(Time::from_millis(end))
                    .map_err(|e| format!("send_time: {e}"))?;
            }
            Ok::<_, String>(probe.finish())
        });
        let sent = producer.join().map_err(|_| "the producer panicked")?;
        let status = c.shutdown().map_err(|e| format!("shutdown: {e}"));
        let alerts = reader.join().map_err(|_| "the alert reader panicked")?;
        let secs = t0.elapsed().as_secs_f64();
        let status = status?;
        let placed = sent?;
        if status.totals.handler_panics > 0 {
            return Err(format!(
                "{} handler panic(s) in the monitors",
                status.totals.handler_panics
            ));
        }
        if status.totals.late_events > 0 {
            return Err(format!(
                "{} late event(s): the generator's times went back",
                status.totals.late_events
            ));
        }
        Ok(Timed {
            secs,
            alerts,
            placed: vec![placed],
        })
    }

    /// For the rules' tests: `events` (stamped in order) through the engine on one unpinned
    /// member, then through `twin`; both alert lists, sorted.
    #[cfg(test)]
    pub(in crate::scenario::workload) fn engine_and_twin<E, M, T>(
        events: Vec<E>,
        end_ms: u64,
        kinds: impl IntoIterator<Item = E::Kind>,
        factory: impl Fn(u64, &E, Output<Alert>) -> M + Send + Sync + 'static,
        twin: T,
    ) -> (Vec<Alert>, Vec<Alert>)
    where
        E: Event + Copy + Sync,
        M: Monitor<E>,
        T: super::Twin<E>,
    {
        side_by_side(events, end_ms, twin, |ctx, data, b| {
            run_keyed(ctx, data, b, kinds, factory)
        })
    }

    /// [`engine_and_twin`] for one monitor on one context ([`run_single`]).
    #[cfg(test)]
    pub(in crate::scenario::workload) fn single_and_twin<E, M, T>(
        events: Vec<E>,
        make: impl FnOnce(Output<Alert>) -> M,
        twin: T,
    ) -> (Vec<Alert>, Vec<Alert>)
    where
        E: Event + Copy + Sync,
        M: Monitor<E>,
        T: super::Twin<E>,
    {
        side_by_side(events, 0, twin, |ctx, data, b| {
            run_single(ctx, data, b, make)
        })
    }

    /// `events` through `run` on one unpinned member and through `twin`; both sorted.
    #[cfg(test)]
    fn side_by_side<E, T>(
        events: Vec<E>,
        end_ms: u64,
        twin: T,
        run: impl FnOnce(&RunCtx, &Data<E>, Built<E>) -> Result<Timed, String>,
    ) -> (Vec<Alert>, Vec<Alert>)
    where
        E: Event + Copy + Sync,
        T: super::Twin<E>,
    {
        let ctx = RunCtx {
            mode: crate::scenario::Mode::Smoke,
            map: crate::pin::CoreMap {
                cores: vec![0],
                pinned: false,
            },
            run_index: 0,
        };
        let data = Data {
            events: events.into(),
            end_ms,
        };
        let run = build(&ctx, 1).and_then(|b| run(&ctx, &data, b));
        let mut got = run.expect("the engine ran").alerts;
        let mut want = data.reference(twin);
        got.sort_unstable();
        want.sort_unstable();
        (got, want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_exclusive_at_their_due_time_and_fire_once() {
        let mut w: Watches<u32> = Watches::default();
        w.push(100, 1);
        w.push(200, 2);
        let mut fired = Vec::new();
        // At 100 the first is due (exclusive bound): gone without firing.
        w.fire(100, |_| true, |&x| fired.push(x));
        assert_eq!(fired, [2]);
        w.fire(150, |_| true, |&x| fired.push(x));
        assert_eq!(fired, [2], "a watch fires once");
    }

    #[test]
    fn a_difference_names_the_first_differing_alert() {
        let a = |first| Alert {
            rule: 1,
            key: 7,
            first,
            last: 9,
        };
        assert!(first_difference(&[a(1), a(2)], &[a(1), a(2)]).is_none());
        let why = first_difference(&[a(1), a(3)], &[a(1), a(2)]).unwrap();
        assert!(why.contains("missing") && why.contains("first: 2"), "{why}");
        let why = first_difference(&[a(1), a(2)], &[a(1)]).unwrap();
        assert!(why.contains("extra") && why.contains("first: 2"), "{why}");
    }

    #[test]
    fn the_generator_is_seeded() {
        let (mut a, mut b) = (Rng::new(5), Rng::new(5));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], Rng::new(6).next_u64());
    }
}
