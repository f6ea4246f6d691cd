//! Criterion micro-benchmarks of the correlator engine live in `benches/engine.rs`; this library
//! holds the small event type and monitors they share.
//!
//! The benchmarks measure single paths in isolation (the route stack, the inbox on one thread,
//! listener dispatch, channel fan-out); whole-system figures with baselines, pinning and
//! checks are the harness's job (`harness run`). Run them with
//! `cargo bench -p correlator-benches`, or once each in test mode with
//! `cargo bench -p correlator-benches -- --test` (what CI does, so they cannot rot).

#![warn(missing_docs)]

use correlator::{Channel, Event, Monitor, Pattern, Scope};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
}

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
