//! The scenarios' vocabulary: what a [`Scenario`] is (its id, its [`Family`], its body) and the
//! measuring kit every scenario shares ([`kit`]: sizes per mode, the event type, timed windows,
//! checks, outcome building). One file (or folder) per family below this module registers its
//! scenarios; the list of every family, in the order they run, is [`crate::catalogue`], which
//! sits above the families: this module names none of them.
//!
//! # How a scenario measures
//! A scenario runs inside a child process ([`crate::runner`]) and returns an [`Outcome`]. Most
//! throughput scenarios are *time-bounded*: the measured threads run flat out, the consumer
//! publishes its running count every [`PUBLISH_EVERY`] events, and the (parked) main thread
//! sleeps through a warm-up window, takes a `(count, time)` sample, sleeps through the timed
//! window, takes another, then raises the stop flag. The warm-up is therefore discarded by
//! construction, the figure is `Δcount / Δtime`, and a slow machine simply measures fewer
//! events instead of running for minutes. After the stop every thread is joined and the
//! consumer's totals are checked against what the producers say they sent (count, per-sender
//! FIFO sequence, checksum): a lost, duplicated or reordered event fails the run.
//!
//! Latency scenarios record their samples (the ping-pongs and bursts one in
//! [`LATENCY_SAMPLE_EVERY`]) into per-thread HdrHistograms that are merged after.
//! Peers and baselines ([`peers`]: crossbeam-channel, std mpsc, kanal, flume, tokio mpsc, the
//! disruptor crate, rtrb, `ArrayQueue`; [`baseline`]: the route loop; [`burst`]; the cache-line
//! ping-pong; [`async_tokio`]: two tokio mpsc hops in a tokio service) use the same event type, capacities, thread slots and windows as their engine
//! twins, so that a ratio compares like with like.
//!
//! May import `kit` (re-exported here); the family modules it declares import it, never the
//! reverse.

pub mod ab;
pub mod async_tokio;
pub mod baseline;
pub mod burst;
pub mod calibration;
#[cfg(feature = "engine")]
pub mod engine;
#[cfg(not(feature = "engine"))]
#[path = "engine_absent.rs"]
pub mod engine;
pub mod kit;
pub mod nats;
pub mod partitioned;
pub mod peers;
pub mod ticks;
pub mod workload;

pub use kit::*;

/// Kind of a scenario (its family), used by the report to find twins and plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// No engine: the physical floor.
    Calibration,
    /// The engine.
    Engine,
    /// A crate a user would pick instead of the engine.
    Baseline,
}

type RunFn = Box<dyn Fn(&RunCtx) -> Outcome + Send + Sync>;

/// A scenario: its stable id, what it is, how many busy threads it needs, and its body.
pub struct Scenario {
    /// Stable id (`stream/2to1/engine`).
    pub id: String,
    /// One line on what runs.
    pub about: String,
    /// Threads that spin or flood at the same time (for the cores-vs-threads warning).
    pub threads: usize,
    /// Family.
    pub family: Family,
    run: RunFn,
}

impl Scenario {
    fn new(
        id: impl Into<String>,
        about: impl Into<String>,
        threads: usize,
        family: Family,
        run: impl Fn(&RunCtx) -> Outcome + Send + Sync + 'static,
    ) -> Self {
        Scenario {
            id: id.into(),
            about: about.into(),
            threads,
            family,
            run: Box::new(run),
        }
    }

    /// Runs the scenario once (in the calling process).
    pub fn run(&self, ctx: &RunCtx) -> Outcome {
        (self.run)(ctx)
    }
}
