//! Criterion micro-benchmarks of the engine's single paths (see the crate docs).
//!
//! - `route/push_pop`: the route stack alone: mark, push one event, seal, pop it.
//! - `route/dispatch`: a context processing a chain of routed events (push + dispatch through
//!   one listener), per event.
//! - `listeners/{1,10000}`: the same chain with 0 or 10,000 listeners on other kinds.
//! - `inbox/push_pop`: one thread reserving, committing, popping and releasing one entry.
//! - `fanout/4`: one external sender, one channel, four subscribed contexts, per event sent.

use correlator::inbox::{Inbox, Sender};
use correlator::route::RouteStack;
use correlator::{ContextOptions, Correlator, WaitStrategy};
use correlator_benches::{wait_until, Chain, Counter, Ev, CHAIN_KIND};
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

/// Runs whole chains on a one-context correlator: `iters` chains of `CHAIN` events.
fn chain_bench(c: &mut Criterion, group: &str, name: &str, idle_listeners: u32) {
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinThenYield)
        .build()
        .expect("build");
    let done = Arc::new(AtomicU64::new(0));
    corr.load(Chain {
        done: done.clone(),
        idle_listeners,
    })
    .expect("load");
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
                input
                    .send_to(
                        main,
                        Ev {
                            kind: CHAIN_KIND,
                            seq: CHAIN - 1,
                            payload: 0,
                        },
                    )
                    .expect("send");
                wait_until(|| done.load(Ordering::Acquire) > before + i);
            }
            t0.elapsed()
        });
    });
    g.finish();
    corr.shutdown().expect("shutdown");
}

fn route_dispatch(c: &mut Criterion) {
    chain_bench(c, "route", "dispatch", 0);
}

fn listeners(c: &mut Criterion) {
    chain_bench(c, "listeners", "1", 0);
    chain_bench(c, "listeners", "10000", 10_000);
}

fn inbox_push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("inbox");
    g.throughput(Throughput::Elements(1));
    g.bench_function("push_pop", |b| {
        let (inbox, mut consumer) = Inbox::<Ev>::with_capacity(1024);
        b.iter(|| {
            let r = inbox.try_reserve(Sender::External).expect("room");
            inbox.commit(r, black_box(Ev::default()));
            let e = consumer.pop().expect("an entry");
            consumer.release(1);
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
    inbox_push_pop,
    fanout
);
criterion_main!(benches);
