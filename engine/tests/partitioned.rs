//! Partitioned contexts (`Pool`): a pool of contexts sharing work by key, one monitor instance per
//! key. Each test names the SPEC rule it checks in the pool's setting: per-key FIFO from each
//! sender (R2.3), one instance per key created by the factory and ended as any other (R6.2, R6.8),
//! channels and outputs from members (R4.2, R4.3), status (R9.1), typed errors (R8.2); and a
//! differential property against the single-context model of one instance per key.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use correlator::{
    partition_of, Channel, ContextOptions, ContextRef, Correlator, DieReason, Error, Event,
    Monitor, Pattern, Scope, SendErrorKind,
};
use proptest::prelude::*;

/// Every poll in these tests is bounded by this (and every scenario by `common::bounded`): a
/// hang fails the test instead of blocking it.
const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// Input for the per-key instances.
    In,
    /// What instances emit.
    Out,
    /// A broadcast on a channel.
    Ping,
}

/// The test event. `key` is the partition key; `sender`, `seq`, `val` are payload.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ev {
    kind: Kind,
    key: Option<u64>,
    sender: u64,
    seq: u64,
    val: u64,
}

impl Event for Ev {
    type Kind = Kind;
    fn kind(&self) -> Kind {
        self.kind
    }
    fn key(&self) -> Option<u64> {
        self.key
    }
}

fn keyed(key: u64, sender: u64, seq: u64, val: u64) -> Ev {
    Ev {
        kind: Kind::In,
        key: Some(key),
        sender,
        seq,
        val,
    }
}

/// Polls `cond` until it holds, failing after [`TIMEOUT`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// What one instance reports when it ends (on the `out` channel): its key, its context, how many
/// events it took (the factory's first one included), the per-sender sequence breaks it saw, and
/// the values in the order it took them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Report {
    key: u64,
    context: ContextRef,
    count: u64,
    breaks: u64,
    vals: Vec<u64>,
}

/// A per-key instance: checks per-sender order, records values, dies on a value divisible by
/// `die_every` (0: never), panics on `panic_on`.
struct Keyed {
    key: u64,
    out: Channel,
    reports: Arc<Mutex<Vec<Report>>>,
    next_seq: HashMap<u64, u64>,
    breaks: u64,
    vals: Vec<u64>,
    die_every: u64,
    panic_on: Option<u64>,
    /// The first event's value and whether it asks to die, handed over by the factory.
    first_dies: bool,
}

impl Keyed {
    fn take(&mut self, e: &Ev) -> bool {
        let expect = self.next_seq.entry(e.sender).or_insert(e.seq);
        if e.seq != *expect {
            self.breaks += 1;
        }
        *expect = e.seq + 1;
        self.vals.push(e.val);
        self.die_every != 0 && e.val.is_multiple_of(self.die_every)
    }
}

impl Monitor<Ev> for Keyed {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        if self.first_dies {
            cx.die();
            return;
        }
        let mine = Pattern::kind(Kind::In).key(self.key);
        cx.on_all(
            mine,
            |m: &mut Keyed, cx: &mut Scope<'_, Ev, Keyed>, e: &Ev| {
                if m.panic_on == Some(e.val) {
                    panic!("injected panic for key {}", m.key);
                }
                cx.emit(
                    m.out,
                    Ev {
                        kind: Kind::Out,
                        key: Some(m.key),
                        sender: 0,
                        seq: m.vals.len() as u64 + 1,
                        val: e.val,
                    },
                );
                if m.take(e) {
                    cx.die();
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, cx: &mut Scope<'_, Ev, Self>) {
        self.reports.lock().unwrap().push(Report {
            key: self.key,
            context: cx.context(),
            count: self.vals.len() as u64,
            breaks: self.breaks,
            vals: std::mem::take(&mut self.vals),
        });
    }
}

/// A factory of [`Keyed`] instances that counts its calls per key.
#[derive(Clone)]
struct Factory {
    out: Channel,
    reports: Arc<Mutex<Vec<Report>>>,
    calls: Arc<Mutex<BTreeMap<u64, u64>>>,
    die_every: u64,
    panic_on: Option<u64>,
}

impl Factory {
    fn new(out: Channel, die_every: u64) -> Self {
        Self {
            out,
            reports: Default::default(),
            calls: Default::default(),
            die_every,
            panic_on: None,
        }
    }

    fn make(&self, key: u64, first: &Ev) -> Keyed {
        *self.calls.lock().unwrap().entry(key).or_default() += 1;
        let mut m = Keyed {
            key,
            out: self.out,
            reports: self.reports.clone(),
            next_seq: HashMap::new(),
            breaks: 0,
            vals: Vec::new(),
            die_every: self.die_every,
            panic_on: self.panic_on,
            first_dies: false,
        };
        m.first_dies = m.take(first);
        m
    }

    fn reports(&self) -> Vec<Report> {
        self.reports.lock().unwrap().clone()
    }

    fn calls(&self) -> BTreeMap<u64, u64> {
        self.calls.lock().unwrap().clone()
    }
}

fn pool_with(partitions: usize, die_every: u64) -> (Correlator<Ev>, correlator::Pool<Ev>, Factory) {
    let c = Correlator::<Ev>::builder()
        .inbox_capacity(256)
        .external_time()
        .build()
        .unwrap();
    let out = c.channel("out").unwrap();
    let pool = c
        .create_pool(ContextOptions::new("part"), partitions)
        .unwrap();
    let factory = Factory::new(out, die_every);
    let f = factory.clone();
    pool.load_per_key([Kind::In], move |key, first: &Ev| f.make(key, first))
        .unwrap();
    (c, pool, factory)
}

// R2.3 (per-key FIFO from each sender): four senders on four threads, each sending a numbered
// stream to every one of 24 keys over a 3-member pool with small inboxes (so senders block). Every
// key's instance sees each sender's events gap-free and in order, and all of them.
#[test]
fn r2_3_per_key_order_under_concurrent_senders() {
    const SENDERS: u64 = 4;
    const KEYS: u64 = 24;
    const PER_KEY: u64 = 300;
    let factory = common::bounded(|| {
        let (c, pool, factory) = pool_with(3, 0);
        let input = pool.input();
        c.start();
        let threads: Vec<_> = (0..SENDERS)
            .map(|s| {
                let input = input.clone();
                std::thread::spawn(move || {
                    for i in 0..PER_KEY {
                        for k in 0..KEYS {
                            input.send(input_ev(k, s, i)).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        c.shutdown().unwrap();
        factory
    });
    let reports = factory.reports();
    assert_eq!(reports.len() as u64, KEYS, "one instance per key");
    for r in &reports {
        assert_eq!(r.breaks, 0, "key {}: a sender's events out of order", r.key);
        assert_eq!(r.count, SENDERS * PER_KEY, "key {}: events lost", r.key);
    }
}

fn input_ev(key: u64, sender: u64, seq: u64) -> Ev {
    keyed(key, sender, seq, seq)
}

// R6.2 (the factory creates one instance per distinct key, in the member that owns the key),
// R9.1 (live key counts per member): 200 keys from two senders, each key many times.
#[test]
fn r6_2_one_instance_per_distinct_key_in_its_owner() {
    const KEYS: u64 = 200;
    let (factory, live, per_member, members) = common::bounded(|| {
        let (c, pool, factory) = pool_with(4, 0);
        let a = pool.input();
        let b = a.clone();
        c.start();
        for round in 0..5 {
            for k in 0..KEYS {
                a.send(input_ev(k, 0, round)).unwrap();
                b.send(input_ev(KEYS - 1 - k, 1, round)).unwrap();
            }
        }
        wait_until("every event processed", || {
            let s = pool.status();
            s.members.iter().map(|m| m.context.received).sum::<u64>() >= 2 * 5 * KEYS
                && s.members.iter().all(|m| m.context.inbox_len == 0)
        });
        let status = pool.status();
        let per_member: Vec<u64> = status.members.iter().map(|m| m.live_keys).collect();
        c.shutdown().unwrap();
        let after = pool.status().live_keys;
        assert_eq!(after, 0, "shutdown ends every instance");
        (
            factory,
            status.live_keys,
            per_member,
            pool.members().to_vec(),
        )
    });
    assert_eq!(live, KEYS);
    let calls = factory.calls();
    assert_eq!(calls.len() as u64, KEYS);
    assert!(calls.values().all(|&n| n == 1), "a key got two instances");
    let mut expect = vec![0u64; members.len()];
    for k in 0..KEYS {
        expect[partition_of(k, members.len())] += 1;
    }
    assert_eq!(per_member, expect, "live keys per member");
    for r in factory.reports() {
        assert_eq!(r.context, members[partition_of(r.key, members.len())]);
        assert_eq!(r.count, 10);
    }
}

// R6.2 (a per-key instance is created in the member that owns its key, and only there): an
// event of a key owned by another member, put straight into a member's inbox (`send_to`),
// creates no instance there; the same key sent through the pool reaches its owner, which
// creates the key's one instance.
#[test]
fn r6_2_a_member_ignores_keys_it_does_not_own() {
    let (calls, live, reports, members) = common::bounded(|| {
        let (c, pool, factory) = pool_with(3, 0);
        let members = pool.members().to_vec();
        let key = 11;
        let owner = partition_of(key, members.len());
        let strangers: Vec<ContextRef> = (0..members.len())
            .filter(|&i| i != owner)
            .map(|i| members[i])
            .collect();
        let direct = c.input();
        c.start();
        for (i, &m) in strangers.iter().enumerate() {
            direct.send_to(m, keyed(key, 1, i as u64, 100)).unwrap();
        }
        let processed = |n: u64| {
            let s = pool.status();
            s.members.iter().map(|m| m.context.received).sum::<u64>() >= n
                && s.members.iter().all(|m| m.context.inbox_len == 0)
        };
        wait_until("the strangers' events processed", || {
            processed(strangers.len() as u64)
        });
        let calls_before = factory.calls();
        let live_before = pool.status().live_keys;
        assert_eq!(
            (calls_before, live_before),
            (BTreeMap::new(), 0),
            "a member created an instance for a key it does not own"
        );
        pool.input().send(keyed(key, 0, 0, 1)).unwrap();
        wait_until("the owner's event processed", || {
            processed(strangers.len() as u64 + 1)
        });
        let live = pool.status().live_keys;
        c.shutdown().unwrap();
        (factory.calls(), live, factory.reports(), members)
    });
    assert_eq!(calls, BTreeMap::from([(11, 1)]));
    assert_eq!(live, 1);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].context, members[partition_of(11, members.len())]);
    assert_eq!(
        reports[0].vals,
        [1],
        "the instance saw another member's event"
    );
}

// R6.8 (key isolation): an instance that dies or panics ends alone: the other keys' instances
// carry on undisturbed, its key is forgotten, and its next event creates a fresh instance whose
// factory sees that event first. A factory that panics creates nothing and harms nobody.
#[test]
fn r6_8_key_isolation_die_panic_and_fresh_instances() {
    let (factory, calls, live_mid) = common::bounded(|| {
        let c = Correlator::<Ev>::builder().external_time().build().unwrap();
        let out = c.channel("out").unwrap();
        let pool = c.create_pool(ContextOptions::new("iso"), 2).unwrap();
        let mut factory = Factory::new(out, 5); // dies on values divisible by 5
        factory.panic_on = Some(7);
        let f = factory.clone();
        pool.load_per_key([Kind::In], move |key, first: &Ev| {
            assert!(first.val != 99, "injected factory panic");
            f.make(key, first)
        })
        .unwrap();
        let input = pool.input();
        c.start();
        // Keys 0..4 share the members; key 1 dies at 5 and panics at 7, the others run on.
        let script: &[(u64, u64)] = &[
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 1),
            (1, 2),
            (1, 5), // key 1 dies
            (0, 2),
            (1, 6), // fresh instance, created from 6
            (2, 2),
            (1, 7),  // panics
            (3, 99), // key 3 is alive: its listener takes 99, the factory is not called
            (4, 99), // the factory panics: no instance for key 4
            (1, 8),  // fresh again
            (4, 1),  // now key 4 gets one
            (0, 3),
        ];
        for (i, &(k, v)) in script.iter().enumerate() {
            input.send(keyed(k, 0, i as u64, v)).unwrap();
        }
        wait_until("the script processed", || {
            pool.status()
                .members
                .iter()
                .map(|m| m.context.received)
                .sum::<u64>()
                >= script.len() as u64
                && pool
                    .status()
                    .members
                    .iter()
                    .all(|m| m.context.inbox_len == 0)
        });
        let live_mid = pool.status().live_keys;
        c.shutdown().unwrap();
        let calls = factory.calls();
        (factory, calls, live_mid)
    });
    assert_eq!(live_mid, 5, "keys 0..4 alive at the end of the script");
    assert_eq!(
        calls,
        BTreeMap::from([(0, 1), (1, 3), (2, 1), (3, 1), (4, 1)]),
        "key 1: first, after die, after panic; key 4: after its factory panicked (which \
         panics before counting)"
    );
    let mut by_key: BTreeMap<u64, Vec<Vec<u64>>> = BTreeMap::new();
    for r in factory.reports() {
        by_key.entry(r.key).or_default().push(r.vals);
    }
    assert_eq!(by_key[&0], [vec![1, 2, 3]]);
    assert_eq!(by_key[&1], [vec![1, 2, 5], vec![6], vec![8]]);
    assert_eq!(by_key[&2], [vec![1, 2]]);
    assert_eq!(by_key[&3], [vec![1, 99]]);
    assert_eq!(by_key[&4], [vec![1]]);
}

/// A per-key instance that subscribes to a broadcast channel and answers each broadcast on
/// the output channel with its key; it also routes and sends to `main`.
struct Subscriber {
    key: u64,
    ping: Channel,
    main: ContextRef,
}

impl Monitor<Ev> for Subscriber {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.subscribe(self.ping);
        cx.on_all(
            Pattern::kind(Kind::Ping),
            |m: &mut Subscriber, cx: &mut Scope<'_, Ev, Subscriber>, e: &Ev| {
                let answer = Ev {
                    kind: Kind::Out,
                    key: Some(m.key),
                    sender: cx.context().id() as u64,
                    seq: e.seq,
                    val: 0,
                };
                cx.send_to(m.main, answer).unwrap();
            },
        );
    }
}

// R4.2, R4.3 (channels and outputs from pool members): per-key instances subscribe to a channel;
// a send to it reaches every member holding a subscription once (R4.2), each instance answers
// with a `send_to(main)`, and a monitor in `main` emits the answers to an output receiver (R4.3).
#[test]
fn r4_2_channels_and_outputs_work_from_pool_members() {
    let (receivers, answers) = common::bounded(|| {
        let c = Correlator::<Ev>::builder().external_time().build().unwrap();
        let ping = c.channel("ping").unwrap();
        let out = c.channel("out").unwrap();
        let rx = c.output(out);
        let pool = c.create_pool(ContextOptions::new("sub"), 3).unwrap();
        let main = c.main();
        pool.load_per_key([Kind::In], move |key, _first: &Ev| Subscriber {
            key,
            ping,
            main,
        })
        .unwrap();
        struct Relay(Channel);
        impl Monitor<Ev> for Relay {
            fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
                cx.on_all(
                    Pattern::kind(Kind::Out),
                    |m: &mut Relay, cx: &mut Scope<'_, Ev, Relay>, e: &Ev| {
                        cx.emit(m.0, e.clone());
                    },
                );
            }
        }
        c.load(Relay(out)).unwrap();
        let input = pool.input();
        c.start();
        for k in 0..12 {
            input.send(input_ev(k, 0, 0)).unwrap();
        }
        wait_until("12 live keys", || pool.status().live_keys == 12);
        let raw = c.input();
        let ping_ev = Ev {
            kind: Kind::Ping,
            key: None,
            sender: 0,
            seq: 1,
            val: 0,
        };
        let receivers = raw.send(ping, ping_ev).unwrap();
        c.shutdown().unwrap();
        let answers: Vec<Ev> = rx.iter().collect();
        (receivers, answers)
    });
    assert_eq!(
        receivers, 3,
        "one copy per subscribed member, however many subscriptions"
    );
    let mut keys: Vec<u64> = answers.iter().filter_map(|e| e.key).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        (0..12).collect::<Vec<_>>(),
        "every instance answered once"
    );
}

// R8.2 (typed errors): a pool of 0 or of more contexts than `max_contexts` allows, a factory
// without kinds, an event without a key (handed back), a pool used with another correlator, a
// pool created after shutdown.
#[test]
fn r8_2_pool_errors_are_typed_and_hand_events_back() {
    common::bounded(|| {
        let c = Correlator::<Ev>::builder()
            .max_contexts(4)
            .external_time()
            .build()
            .unwrap();
        let opts = ContextOptions::new("p");
        assert_eq!(
            c.create_pool(opts.clone(), 0).unwrap_err(),
            Error::InvalidPoolSize {
                requested: 0,
                max: 3
            }
        );
        let err = c.create_pool(opts.clone(), 4).unwrap_err();
        assert_eq!(
            err,
            Error::InvalidPoolSize {
                requested: 4,
                max: 3
            }
        );
        assert!(err.to_string().contains("max_contexts"), "{err}");
        assert_eq!(
            c.status().contexts.len(),
            1,
            "a refused pool creates no context"
        );
        let pool = c.create_pool(opts.clone(), 3).unwrap();
        let none: [Kind; 0] = [];
        let main = c.main();
        let err = pool
            .load_per_key(none, move |key, _: &Ev| Subscriber {
                key,
                ping: Channel::DEFAULT,
                main,
            })
            .unwrap_err();
        assert_eq!(err, Error::NoKinds);
        let input = pool.input();
        let keyless = Ev {
            kind: Kind::In,
            key: None,
            sender: 9,
            seq: 9,
            val: 9,
        };
        for r in [
            input.send(keyless.clone()),
            input.try_send(keyless.clone()),
            input.send_timeout(keyless.clone(), Duration::from_millis(1)),
        ] {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), SendErrorKind::NoKey);
            assert!(e.to_string().contains("no key"), "{e}");
            assert_eq!(e.into_inner(), keyless);
        }
        c.shutdown().unwrap();
        let late = Correlator::<Ev>::builder().external_time().build().unwrap();
        late.shutdown().unwrap();
        assert_eq!(
            late.create_pool(opts, 1).unwrap_err(),
            Error::ShutDown,
            "no pool after shutdown"
        );
        let refused = input.send(input_ev(1, 0, 0)).unwrap_err();
        assert_eq!(refused.kind(), SendErrorKind::Closed);
        assert_eq!(refused.into_inner(), input_ev(1, 0, 0));
    });
}

/// The single-context model of one instance per key: each key's events in order; the first
/// event of a key (or the first after its instance died) starts a new instance; an instance ends
/// after a value divisible by `die_every`. Returns, per key, the values each instance took.
fn model(events: &[(u64, u64)], die_every: u64) -> BTreeMap<u64, Vec<Vec<u64>>> {
    let mut open: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut done: BTreeMap<u64, Vec<Vec<u64>>> = BTreeMap::new();
    for &(k, v) in events {
        let vals = open.entry(k).or_default();
        vals.push(v);
        if v % die_every == 0 {
            let vals = open.remove(&k).unwrap_or_default();
            done.entry(k).or_default().push(vals);
        }
    }
    for (k, vals) in open {
        done.entry(k).or_default().push(vals);
    }
    done
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Differential (R2.3, R6.2, R6.8): a random stream of keyed events from one sender into a
    // pool of 1 to 4 members gives every key exactly the instances, and every instance exactly the
    // values in order, that the single-context model gives; the member count changes nothing.
    #[test]
    fn r6_2_differential_pool_matches_single_context_model(
        partitions in 1usize..=4,
        events in proptest::collection::vec((0u64..8, 1u64..30), 1..200),
    ) {
        const DIE_EVERY: u64 = 4;
        let stream = events.clone();
        let reports = common::bounded(move || {
            let (c, pool, factory) = pool_with(partitions, DIE_EVERY);
            let input = pool.input();
            c.start();
            let mut seq: HashMap<u64, u64> = HashMap::new();
            for &(k, v) in &stream {
                let s = seq.entry(k).or_default();
                *s += 1;
                input.send(keyed(k, 0, *s, v)).unwrap();
            }
            c.shutdown().unwrap();
            factory.reports()
        });
        let mut got: BTreeMap<u64, Vec<Vec<u64>>> = BTreeMap::new();
        for r in reports {
            prop_assert_eq!(r.breaks, 0);
            got.entry(r.key).or_default().push(r.vals);
        }
        prop_assert_eq!(got, model(&events, DIE_EVERY));
    }
}

// The live key count (R9.1) follows instances ending: it falls as instances die, not only at
// shutdown.
#[test]
fn r9_1_live_keys_fall_when_instances_die() {
    common::bounded(|| {
        let (c, pool, factory) = pool_with(2, 2); // dies on even values
        let input = pool.input();
        c.start();
        for k in 0..10 {
            input.send(input_ev(k, 0, 1)).unwrap(); // odd: stays alive
        }
        wait_until("10 live keys", || pool.status().live_keys == 10);
        for k in 0..4 {
            input.send(keyed(k, 0, 2, 2)).unwrap(); // even: dies
        }
        wait_until("6 live keys", || pool.status().live_keys == 6);
        c.shutdown().unwrap();
        assert_eq!(pool.status().live_keys, 0);
        assert_eq!(factory.reports().len(), 10);
    });
}

/// Counts the allocations of the threads that opted in (a sender, and the member threads once a
/// handler there armed them), so that tests running in parallel do not disturb the count.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct Counting;

    pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

    thread_local! {
        static COUNTED: Cell<bool> = const { Cell::new(false) };
    }

    /// Counts the calling thread's allocations from now on.
    pub fn count_this_thread() {
        COUNTED.with(|c| c.set(true));
    }

    fn note() {
        if COUNTED.try_with(Cell::get).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
    }

    // SAFETY: every call is forwarded unchanged to `System`; counting touches no allocation.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note();
            // SAFETY: the caller's contract is passed on unchanged.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as above.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
            note();
            // SAFETY: as above.
            unsafe { System.realloc(ptr, layout, size) }
        }
    }
}

#[global_allocator]
static COUNTING: counting::Counting = counting::Counting;

/// The value that arms a member thread's allocation count.
const ARM: u64 = u64::MAX;

/// A per-key instance that only counts (and arms its thread's allocation count on [`ARM`]).
struct Quiet {
    key: u64,
    n: u64,
}

impl Monitor<Ev> for Quiet {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(Kind::In).key(self.key),
            |m: &mut Quiet, _cx: &mut Scope<'_, Ev, Quiet>, e: &Ev| {
                if e.val == ARM {
                    counting::count_this_thread();
                }
                m.n += 1;
            },
        );
    }
}

// "Once the engine is warm, nothing on the per-event path allocates" (SPEC, how the rules map
// to the code), for the pool's path: `PoolInput::send`, the dispatcher's lookup of a known key,
// and the key's instance. After a warm-up that creates every key's instance, 20,000 more events
// cost the sender and the member threads no allocation. The inboxes hold every event, so that the
// sender never parks for room: that path is the inbox's, and it allocates once per parking
// (`wait_for_room` pushes onto a waiter list that `wake_room_waiters` takes away whole).
#[test]
fn warm_pool_path_allocates_nothing_per_event() {
    const KEYS: u64 = 32;
    let allocations = common::bounded(|| {
        let c = Correlator::<Ev>::builder()
            .inbox_capacity(1 << 15)
            .external_time()
            .build()
            .unwrap();
        let pool = c.create_pool(ContextOptions::new("quiet"), 2).unwrap();
        pool.load_per_key([Kind::In], |key, _first: &Ev| Quiet { key, n: 1 })
            .unwrap();
        let input = pool.input();
        c.start();
        let members: Vec<ContextRef> = pool.members().to_vec();
        let c = Arc::new(c);
        let received = {
            let c = c.clone();
            move || -> u64 {
                let s = c.status();
                members
                    .iter()
                    .map(|&m| s.context(m).unwrap().received)
                    .sum()
            }
        };
        // One thread warms up and then measures, so that its own first-use costs (a first wait
        // for room, say) fall in the warm-up.
        let sender = std::thread::spawn(move || {
            let mut sent = 0;
            for round in 0..100 {
                for k in 0..KEYS {
                    input.send(input_ev(k, 0, round)).unwrap();
                    sent += 1;
                }
            }
            for k in 0..KEYS {
                input.send(keyed(k, 0, 100, ARM)).unwrap();
                sent += 1;
            }
            wait_until("the warm-up processed", || received() >= sent);
            counting::count_this_thread();
            let before = counting::ALLOCATIONS.load(Ordering::Relaxed);
            for round in 101..726 {
                for k in 0..KEYS {
                    input.send(input_ev(k, 0, round)).unwrap();
                    sent += 1;
                }
            }
            (before, sent, received)
        });
        let (before, sent, received) = sender.join().unwrap();
        wait_until("the measured events processed", || received() >= sent);
        let after = counting::ALLOCATIONS.load(Ordering::Relaxed);
        c.shutdown().unwrap();
        after - before
    });
    assert_eq!(allocations, 0, "allocations on the warm pool path");
}

/// Per instance of [`ByExpr`]: its key and the values it took.
type ExprLog = Arc<Mutex<Vec<(u64, Vec<u64>)>>>;

/// A per-key instance that listens through an event expression (`when_all`) and dies on a value
/// divisible by 3, recording what it took.
struct ByExpr {
    key: u64,
    vals: Vec<u64>,
    log: ExprLog,
}

impl Monitor<Ev> for ByExpr {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let mine = Pattern::kind(Kind::In).key(self.key);
        cx.when_all(
            mine,
            |m: &mut ByExpr, cx: &mut Scope<'_, Ev, ByExpr>, hit: &correlator::Match<Ev>| {
                for e in &hit.events {
                    m.vals.push(e.val);
                    if e.val % 3 == 0 {
                        cx.die();
                    }
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Scope<'_, Ev, Self>) {
        let vals = std::mem::take(&mut self.vals);
        self.log.lock().unwrap().push((self.key, vals));
    }
}

// R6.4, R6.8 (the order the factory relies on): the dispatcher registered its listener before
// any instance of the key, so it decides first for every event; an instance that dies on an event
// (here through an expression listener) does not make that event its successor's first one too.
#[test]
fn r6_4_event_an_instance_dies_on_is_not_its_successors_first() {
    let log = common::bounded(|| {
        let c = Correlator::<Ev>::builder().external_time().build().unwrap();
        let pool = c.create_pool(ContextOptions::new("expr"), 2).unwrap();
        let log: ExprLog = Arc::default();
        let l = log.clone();
        pool.load_per_key([Kind::In], move |key, first: &Ev| ByExpr {
            key,
            vals: vec![first.val],
            log: l.clone(),
        })
        .unwrap();
        let input = pool.input();
        c.start();
        for (i, v) in [1, 2, 3, 4, 5, 6, 7].into_iter().enumerate() {
            for k in 0..4 {
                input.send(keyed(k, 0, i as u64, v)).unwrap();
            }
        }
        c.shutdown().unwrap();
        let mut log = log.lock().unwrap().clone();
        log.sort();
        log
    });
    let want: Vec<(u64, Vec<u64>)> = (0..4)
        .flat_map(|k| [(k, vec![1, 2, 3]), (k, vec![4, 5, 6]), (k, vec![7])])
        .collect();
    assert_eq!(log, want);
}

/// A per-key instance that dies on the value 0 and whose `on_die` hook then panics.
struct PanickyDie {
    key: u64,
}

impl Monitor<Ev> for PanickyDie {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        let mine = Pattern::kind(Kind::In).key(self.key);
        cx.on_all(
            mine,
            |_: &mut PanickyDie, cx: &mut Scope<'_, Ev, PanickyDie>, e: &Ev| {
                if e.val == 0 {
                    cx.die();
                }
            },
        );
    }

    fn on_die(&mut self, _reason: &DieReason, _cx: &mut Scope<'_, Ev, Self>) {
        panic!("injected on_die panic for key {}", self.key);
    }
}

// R6.8 (an instance ends when it calls `die`; its `on_die` runs; the context carries on) with
// the pool's "an ended instance's key is forgotten": an `on_die` hook that panics still leaves
// its key forgotten (the next event of the key calls the factory and creates a fresh instance)
// and its live count gone, and the panic is contained and counted.
#[test]
fn r6_8_key_forgotten_when_its_on_die_panics() {
    let (calls, live_after_die, live_end, panics) = common::bounded(|| {
        let c = Correlator::<Ev>::builder().external_time().build().unwrap();
        let pool = c.create_pool(ContextOptions::new("die"), 2).unwrap();
        let calls: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
        let seen = calls.clone();
        pool.load_per_key([Kind::In], move |key, first: &Ev| {
            seen.lock().unwrap().push((key, first.val));
            PanickyDie { key }
        })
        .unwrap();
        let input = pool.input();
        c.start();
        let processed = |n: u64| {
            let s = pool.status();
            s.members.iter().map(|m| m.context.received).sum::<u64>() >= n
                && s.members.iter().all(|m| m.context.inbox_len == 0)
        };
        // Key 5 is created by 1 and dies on 0, whose `on_die` panics; key 6 lives on.
        for (i, &(k, v)) in [(5, 1), (6, 1), (5, 0)].iter().enumerate() {
            input.send(keyed(k, 0, i as u64, v)).unwrap();
        }
        wait_until("the death processed", || processed(3));
        let live_after_die = pool.status().live_keys;
        input.send(keyed(5, 0, 3, 2)).unwrap();
        wait_until("the next event of the key processed", || processed(4));
        let live_end = pool.status().live_keys;
        let panics = c.status().totals.handler_panics;
        c.shutdown().unwrap();
        let calls = calls.lock().unwrap().clone();
        (calls, live_after_die, live_end, panics)
    });
    assert_eq!(live_after_die, 1, "the dead key still counted live");
    assert_eq!(
        calls,
        [(5, 1), (6, 1), (5, 2)],
        "the next event of the key whose on_die panicked created no fresh instance"
    );
    assert_eq!(live_end, 2);
    assert!(panics >= 1, "the on_die panic was not counted");
}

// R1.2, R1.3: a pool can be created after `start()`; its members are pinned per the plan
// (context `i` to the plan's core for `i`), or to the options' core when they name one, and
// the pool works like one created before the start.
#[test]
fn r1_3_pool_members_pinned_per_plan_and_created_after_start() {
    let (cores, factory) = common::bounded(|| {
        let c = Correlator::<Ev>::builder()
            .pinning(correlator::PinningPlan::cores(vec![0]))
            .external_time()
            .build()
            .unwrap();
        let out = c.channel("out").unwrap();
        c.start();
        let pool = c.create_pool(ContextOptions::new("late"), 2).unwrap();
        let factory = Factory::new(out, 0);
        let f = factory.clone();
        pool.load_per_key([Kind::In], move |key, first: &Ev| f.make(key, first))
            .unwrap();
        let input = pool.input();
        for k in 0..6 {
            input.send(input_ev(k, 0, 0)).unwrap();
            input.send(input_ev(k, 0, 1)).unwrap();
        }
        let s = c.shutdown().unwrap();
        let cores: Vec<Option<usize>> = pool
            .members()
            .iter()
            .map(|&m| s.context(m).unwrap().core)
            .collect();
        (cores, factory)
    });
    assert_eq!(cores, [Some(0), Some(0)], "members pinned per the plan");
    let reports = factory.reports();
    assert_eq!(reports.len(), 6);
    assert!(reports.iter().all(|r| r.count == 2 && r.breaks == 0));
}
