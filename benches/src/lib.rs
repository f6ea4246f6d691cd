//! Criterion micro-benchmarks of the correlator engine live in `benches/engine.rs`; this library
//! holds the small event type and monitors they share.
//!
//! The benchmarks measure single paths in isolation (the route stack, the inbox on one thread,
//! listener dispatch, channel fan-out); whole-system figures with baselines, pinning and
//! checks are the harness's job (`harness run`). Run them with
//! `cargo bench -p correlator-benches`, or once each in test mode with
//! `cargo bench -p correlator-benches -- --test`; CI runs them so with `cargo test -p
//! correlator-benches --benches --profile ci` (criterion takes a run without `--bench` as test
//! mode), so they cannot rot.

#![warn(missing_docs)]

use correlator::{
    Channel, ContextRef, Correlator, Event, InputHandle, Monitor, Pattern, Scope, WaitStrategy,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The benchmark event: a kind (the listener key), a sequence number and a payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ev {
    /// Listener key.
    pub kind: u32,
    /// Remaining length of a chain, or a sequence number.
    pub seq: u64,
    /// Payload.
    pub payload: u64,
}

impl Event for Ev {
    type Kind = u32;
    fn kind(&self) -> u32 {
        self.kind
    }
    /// Keyed events ([`KEYED_KIND`]) carry their key in `payload`; other kinds have none, so
    /// their dispatch is the plain kind lookup.
    fn key(&self) -> Option<u64> {
        (self.kind == KEYED_KIND).then_some(self.payload)
    }
}

/// Kind of the keyed-chain events: their key (the indexed field, SPEC R6.9) is `payload`.
pub const KEYED_KIND: u32 = 1_000_000;

/// Kind of the chain events (other kinds are used by the idle listeners).
pub const CHAIN_KIND: u32 = 0;

/// A chain: an event with `seq = n` routes one with `seq = n - 1`; the event with `seq = 0`
/// bumps `done`. Optionally registers `idle_listeners` listeners on other kinds (1..), which
/// must not slow dispatch down (SPEC R6.9).
pub struct Chain {
    /// Chains completed.
    pub done: Arc<AtomicU64>,
    /// Listeners on kinds that never occur.
    pub idle_listeners: u32,
}

impl Monitor<Ev> for Chain {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.on_all(
            Pattern::kind(CHAIN_KIND),
            |m: &mut Chain, cx: &mut Scope<'_, Ev, Chain>, e: &Ev| {
                if e.seq == 0 {
                    m.done.fetch_add(1, Ordering::Release);
                } else {
                    cx.route(Ev {
                        seq: e.seq - 1,
                        ..*e
                    });
                }
            },
        );
        for k in 1..=self.idle_listeners {
            cx.on_all(
                Pattern::kind(k),
                |_m: &mut Chain, _cx: &mut Scope<'_, Ev, Chain>, _e: &Ev| {},
            );
        }
    }
}

/// Which keyed listener the next event of a [`KeyedChain`] hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextKey {
    /// The same listener as the current event (the chain stays on one key).
    Same,
    /// The listener `stride` keys further on, modulo the number of listeners: consecutive events
    /// hit listeners spread over the whole index (a cache-unfriendly walk).
    Stride(u64),
}

/// A chain over keyed listeners: `listeners` listeners on [`KEYED_KIND`], one per key
/// `0..listeners` (`Pattern::kind(KEYED_KIND).key(k)`). An event with `seq = n` hits exactly the
/// listener of its key, which checks that the key is its own and routes the next event
/// (`seq = n - 1`, key chosen by `next`); the event with `seq = 0` bumps `done`.
pub struct KeyedChain {
    /// Chains completed.
    pub done: Arc<AtomicU64>,
    /// Events that reached a listener of another key (must stay 0).
    pub misrouted: Arc<AtomicU64>,
    /// Listeners, on keys `0..listeners`.
    pub listeners: u64,
    /// How the chain moves between keys.
    pub next: NextKey,
}

impl KeyedChain {
    /// The first event of a chain of `len` events starting at `key`.
    pub fn first_event(key: u64, len: u64) -> Ev {
        Ev {
            kind: KEYED_KIND,
            seq: len - 1,
            payload: key,
        }
    }
}

impl Monitor<Ev> for KeyedChain {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        for k in 0..self.listeners {
            cx.on_all(
                Pattern::kind(KEYED_KIND).key(k),
                move |m: &mut KeyedChain, cx: &mut Scope<'_, Ev, KeyedChain>, e: &Ev| {
                    if e.payload != k {
                        m.misrouted.fetch_add(1, Ordering::Relaxed);
                    }
                    if e.seq == 0 {
                        m.done.fetch_add(1, Ordering::Release);
                        return;
                    }
                    let payload = match m.next {
                        NextKey::Same => k,
                        NextKey::Stride(s) => (k + s) % m.listeners,
                    };
                    cx.route(Ev {
                        kind: KEYED_KIND,
                        seq: e.seq - 1,
                        payload,
                    });
                },
            );
        }
    }
}

/// A channel subscriber that counts what it receives.
pub struct Counter {
    /// The channel to subscribe to.
    pub channel: Channel,
    /// Events received.
    pub seen: Arc<AtomicU64>,
}

impl Monitor<Ev> for Counter {
    fn on_load(&mut self, cx: &mut Scope<'_, Ev, Self>) {
        cx.subscribe(self.channel);
        cx.on_all(
            Pattern::kind(CHAIN_KIND),
            |m: &mut Counter, _cx: &mut Scope<'_, Ev, Counter>, _e: &Ev| {
                m.seen.fetch_add(1, Ordering::Release);
            },
        );
    }
}

/// The example's `index`-th command-line argument (1 is the first), or `default` when it is absent.
///
/// # Panics
/// When the argument is present and does not parse: the message names `what` it should be.
pub fn arg<T: std::str::FromStr>(index: usize, default: T, what: &str) -> T {
    std::env::args().nth(index).map_or(default, |a| {
        a.parse()
            .unwrap_or_else(|_| panic!("argument {index} ({what}): cannot parse {a:?}"))
    })
}

/// Waits (yielding: the benchmark thread may share a core with the contexts) until `cond`.
pub fn wait_until(mut cond: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !cond() {
        std::thread::yield_now();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "benchmark wait timed out: an event was lost"
        );
    }
}

/// The skeleton of `send_burst` and `send_batch_burst`: builds a correlator whose `main` inbox
/// holds the whole burst, loads a [`Counter`], hands `send` an input handle (by value: the send
/// loops compile as they did inline, 104 instructions a send) to put `n` events of [`CHAIN_KIND`] into
/// `main` before the correlator starts (nobody takes them meanwhile), then starts it, shuts it
/// down and checks that all `n` were dispatched. Returns the time `send` took and the time from
/// start to shutdown, for a quick look only (`scripts/callgrind.sh` counts instructions).
///
/// # Panics
/// When an event was lost (a benchmark must not measure a broken run).
pub fn burst(n: u64, send: impl FnOnce(InputHandle<Ev>, ContextRef)) -> (Duration, Duration) {
    let seen = Arc::new(AtomicU64::new(0));
    let corr = Correlator::<Ev>::builder()
        .wait_strategy(WaitStrategy::SpinYieldPark)
        // One more place for the monitor's load entry, queued before the burst.
        .inbox_capacity(n as usize + 1)
        .external_time()
        .build()
        .expect("build");
    corr.load(Counter {
        channel: Channel::DEFAULT,
        seen: seen.clone(),
    })
    .expect("load");
    let input = corr.input();
    let t0 = Instant::now();
    send(input, corr.main());
    let sent = t0.elapsed();
    let t1 = Instant::now();
    corr.start();
    let status = corr.shutdown().expect("shutdown");
    let drained = t1.elapsed();
    assert_eq!(seen.load(Ordering::Acquire), n, "events dispatched");
    let received = status.context(corr.main()).map_or(0, |c| c.received);
    assert!(received >= n, "events received: {received}");
    (sent, drained)
}
