//! Criterion micro-benchmarks of the engine's single paths (see the crate docs).
//!
//! - `route/push_pop`: the route stack alone: mark, push one event, seal, pop it.
//! - `route/dispatch`: a context processing a chain of routed events (push + dispatch through
//!   one listener), per event.
//! - `listeners/{1,10000}`: the same chain with 0 or 10,000 listeners on other kinds.
//! - `keyed/{1,100000,100000-spread}`: a chain through listeners keyed on distinct values of the
//!   indexed field (`Pattern::kind(k).key(v)`, SPEC R6.9), 1 vs 100,000 of them, per event.
//! - `inbox/push_pop`: one thread reserving, committing, popping and releasing one entry.
//! - `fanout/4`: one external sender, one channel, four subscribed contexts, per event sent.

use correlator::inbox::{Inbox, Sender};
use correlator::route::RouteStack;
use correlator::{ContextOptions, Correlator, Monitor, WaitStrategy};
use correlator_benches::{wait_until, Chain, Counter, Ev, KeyedChain, NextKey, CHAIN_KIND};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Events per chain in the dispatch benchmarks.
const CHAIN: u64 = 10_000;
/// Events per batch in the fan-out benchmark.
const FANOUT_BATCH: u64 = 2_000;

fn route_push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    g.throughput(Throughput::Elements(1));
    g.bench_function("push_pop", |b| {
        let mut stack: RouteStack<Ev> = RouteStack::with_capacity(64);
        let e = Ev::default();
        b.iter(|| {
            let mark = stack.mark();
            stack.push(black_box(e));
            stack.seal(mark);
            black_box(stack.pop());
        });
    });
    g.finish();
}

/// Runs whole chains on a one-context correlator holding `monitor`: each iteration sends `first`
/// and waits for the chain of `CHAIN` events it starts to complete (`done` bumped).
fn chain_bench<M: Monitor<Ev>>(
    c: &mut Criterion,
    group: &str,
    name: &str,
    monitor: M,
    done: &AtomicU64,
    first: Ev,
) {
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinThenYield)
        .build()
        .expect("build");
    corr.load(monitor).expect("load");
    corr.start();
    let input = corr.input();
    let main = corr.main();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(CHAIN));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let before = done.load(Ordering::Acquire);
            let t0 = Instant::now();
            for i in 0..iters {
                input.send_to(main, first).expect("send");
                wait_until(|| done.load(Ordering::Acquire) > before + i);
            }
            t0.elapsed()
        });
    });
    g.finish();
    corr.shutdown().expect("shutdown");
}

/// A chain of `CHAIN` events of [`CHAIN_KIND`] through one listener, plus `idle_listeners`
/// listeners on other kinds.
fn plain_chain(c: &mut Criterion, group: &str, name: &str, idle_listeners: u32) {
    let done = Arc::new(AtomicU64::new(0));
    let monitor = Chain {
        done: done.clone(),
        idle_listeners,
    };
    let first = Ev {
        kind: CHAIN_KIND,
        seq: CHAIN - 1,
        payload: 0,
    };
    chain_bench(c, group, name, monitor, &done, first);
}

fn route_dispatch(c: &mut Criterion) {
    plain_chain(c, "route", "dispatch", 0);
}

fn listeners(c: &mut Criterion) {
    plain_chain(c, "listeners", "1", 0);
    plain_chain(c, "listeners", "10000", 10_000);
}

/// Listeners in the large case of the keyed-index benchmark.
const KEYED_MANY: u64 = 100_000;
/// Key step of the spread walk: prime, so coprime with [`KEYED_MANY`] (every key is visited).
const KEYED_STRIDE: u64 = 7_919;

/// One keyed chain; fails loudly if an event reached a listener of another key.
fn keyed_chain(c: &mut Criterion, name: &str, listeners: u64, start: u64, next: NextKey) {
    let done = Arc::new(AtomicU64::new(0));
    let misrouted = Arc::new(AtomicU64::new(0));
    let monitor = KeyedChain {
        done: done.clone(),
        misrouted: misrouted.clone(),
        listeners,
        next,
    };
    let first = KeyedChain::first_event(start, CHAIN);
    chain_bench(c, "keyed", name, monitor, &done, first);
    assert_eq!(
        misrouted.load(Ordering::Acquire),
        0,
        "keyed/{name}: an event reached a listener of another key"
    );
}

/// The keyed listener index (SPEC R6.9): per-event cost with one keyed listener vs 100,000
/// listeners keyed on distinct values of the indexed field, each event hitting one of them.
/// `100000` stays on one key (the index lookup alone); `100000-spread` walks the keys with a
/// large stride, so that consecutive events touch listeners far apart (adds cache misses).
fn keyed(c: &mut Criterion) {
    keyed_chain(c, "1", 1, 0, NextKey::Same);
    keyed_chain(c, "100000", KEYED_MANY, KEYED_MANY / 2, NextKey::Same);
    keyed_chain(
        c,
        "100000-spread",
        KEYED_MANY,
        0,
        NextKey::Stride(KEYED_STRIDE),
    );
}

fn inbox_push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("inbox");
    g.throughput(Throughput::Elements(1));
    g.bench_function("push_pop", |b| {
        let (inbox, mut consumer) = Inbox::<Ev>::with_capacity(1024);
        b.iter(|| {
            let r = inbox.try_reserve(Sender::External).expect("room");
            r.commit(black_box(Ev::default()));
            let e = consumer.pop().expect("an entry");
            consumer.release_taken();
            black_box(e)
        });
    });
    g.finish();
}

fn fanout(c: &mut Criterion) {
    const SUBSCRIBERS: usize = 4;
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinYieldPark)
        .build()
        .expect("build");
    let ch = corr.channel("fanout").expect("channel");
    let counters: Vec<Arc<AtomicU64>> = (0..SUBSCRIBERS)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    let mut contexts = vec![corr.main()];
    for i in 1..SUBSCRIBERS {
        contexts.push(
            corr.create_context(ContextOptions::new(format!("sub{i}")))
                .expect("context"),
        );
    }
    for (cx, seen) in contexts.iter().zip(&counters) {
        corr.load_in(
            *cx,
            Counter {
                channel: ch,
                seen: seen.clone(),
            },
        )
        .expect("load");
    }
    corr.start();
    let input = corr.input();
    // Subscriptions take effect once each load hook has run.
    wait_until(|| {
        input
            .send(
                ch,
                Ev {
                    kind: 99,
                    ..Ev::default()
                },
            )
            .expect("send")
            == SUBSCRIBERS
    });
    let mut g = c.benchmark_group("fanout");
    g.throughput(Throughput::Elements(FANOUT_BATCH));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("4", |b| {
        b.iter_batched(
            || {
                counters
                    .iter()
                    .map(|c| c.load(Ordering::Acquire))
                    .collect::<Vec<_>>()
            },
            |before| {
                for i in 0..FANOUT_BATCH {
                    let n = input
                        .send(
                            ch,
                            Ev {
                                kind: CHAIN_KIND,
                                seq: i,
                                payload: 0,
                            },
                        )
                        .expect("send");
                    assert_eq!(n, SUBSCRIBERS);
                }
                for (c, b) in counters.iter().zip(&before) {
                    wait_until(|| c.load(Ordering::Acquire) >= b + FANOUT_BATCH);
                }
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
    corr.shutdown().expect("shutdown");
}

criterion_group!(
    benches,
    route_push_pop,
    route_dispatch,
    listeners,
    keyed,
    inbox_push_pop,
    fanout
);
criterion_main!(benches);
