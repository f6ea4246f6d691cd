//! The scenario catalogue: every id of BENCHMARKS.md and what it runs ([`FAMILIES`], one
//! `register` per file). The measuring kit the scenarios share (sizes per mode, the event type,
//! timed windows, checks, outcome building) is in [`kit`].
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

/// The sender counts of `stream/{N}to1`: 2, 3, ... up to the cores, at least 2.
pub fn stream_fan_in(cores: usize) -> Vec<usize> {
    (2..=cores.max(2)).collect()
}

/// The chain lengths of `pipeline/{K}`.
pub fn pipeline_lengths(cores: usize) -> Vec<usize> {
    let mut ks = vec![1, 2, 3, 4];
    for k in [8, 16, 32] {
        if k < cores {
            ks.push(k);
        }
    }
    ks
}

/// A family of scenarios registered from a file of its own: `register(v, cores)` pushes its
/// scenarios (ids unique across the catalogue) for a plan of `cores` distinct cores.
pub type Register = fn(&mut Vec<Scenario>, usize);

/// Every family, in the order they run: an engine scenario and its peers sit next to each other,
/// so that they run back to back in a round. A new family (a file of its own under `scenario/`,
/// e.g. `nats/loopback`) adds its `register` here and its ids to `harness/BENCHMARKS.md`.
pub const FAMILIES: &[Register] = &[
    |v, _| calibration::register(v),
    |v, _| engine::register_route(v),
    |v, _| baseline::register_route(v),
    |v, _| engine::register_listeners(v),
    |v, _| engine::register_pingpong(v),
    |v, _| peers::register_pingpong(v),
    |v, cores| {
        for n in std::iter::once(1).chain(stream_fan_in(cores)) {
            engine::register_stream(v, n);
            if n == 1 {
                engine::register_stream_batch(v);
            }
            peers::register_stream(v, n);
        }
    },
    |v, _| engine::register_burst(v),
    |v, _| burst::register(v),
    |v, cores| engine::register_fanout(v, cores),
    |v, cores| {
        for k in pipeline_lengths(cores) {
            engine::register_pipeline(v, k);
        }
    },
    |v, _| engine::register_openloop(v),
    |v, _| engine::register_idle(v),
    |v, _| engine::register_backpressure(v),
    |v, _| engine::register_alloc(v),
    |v, cores| partitioned::register(v, cores),
    |v, _| ticks::register(v),
    |v, _| nats::register(v),
    |v, _| async_tokio::register(v),
    |v, cores| workload::register(v, cores),
    |v, _| {
        if std::env::var_os(SELFTEST_ENV).is_some() {
            baseline::register_selftest(v);
        }
    },
];

/// Every scenario, in the order they run, for a plan of `cores` distinct cores.
pub fn catalogue(cores: usize) -> Vec<Scenario> {
    let mut v = Vec::new();
    for register in FAMILIES {
        register(&mut v, cores);
    }
    v
}

/// When this environment variable is set, the catalogue also holds `selftest/lossy`, a stream
/// that drops one event on purpose: the harness's own test proves that a loss fails the run.
pub const SELFTEST_ENV: &str = "HARNESS_SELFTEST";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_every_benchmarks_md_id_and_unique_ids() {
        let cat = catalogue(2);
        let ids: Vec<&str> = cat.iter().map(|s| s.id.as_str()).collect();
        for want in [
            "calibration/cacheline-pingpong",
            "calibration/ring-pingpong",
            "calibration/timer",
            "route/dispatch",
            "route/floor",
            "route/crossbeam-channel",
            "route/tree",
            "listeners/indexed",
            "pingpong/engine",
            "pingpong/engine-park",
            "pingpong/crossbeam-channel",
            "stream/1to1/engine",
            "stream/1to1/engine-batch",
            "stream/1to1/crossbeam-channel",
            "stream/1to1/std-mpsc",
            "stream/1to1/arrayqueue",
            "stream/2to1/engine",
            "stream/2to1/crossbeam-channel",
            "stream/1to1/kanal",
            "stream/1to1/flume",
            "stream/1to1/tokio-mpsc",
            "stream/1to1/disruptor",
            "stream/1to1/disruptor-mp",
            "stream/1to1/rtrb",
            "stream/2to1/kanal",
            "stream/2to1/flume",
            "stream/2to1/tokio-mpsc",
            "stream/2to1/disruptor-mp",
            "pingpong/kanal",
            "pingpong/disruptor",
            "burst/1/engine",
            "burst/100/disruptor",
            "burst/10/rtrb",
            "burst/10/crossbeam-channel",
            "fanout/channel",
            "pipeline/1",
            "openloop/rate",
            "idle/wakeup",
            "backpressure/flood",
            "alloc/route",
            "alloc/send",
            "alloc/send-batch",
            "alloc/channel",
            "alloc/output",
            "async/tokio/engine",
            "async/tokio/tokio-mpsc",
            "workload/keys/1k",
            "workload/keys/100k",
            "workload/keys/1m",
            "workload/fraud",
            "workload/fraud/pool",
            "workload/fraud/twin",
            "workload/absence",
            "workload/absence/twin",
            "workload/spike",
            "workload/spike/twin",
            "alloc/workload",
        ] {
            assert!(ids.contains(&want), "missing {want}");
        }
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "duplicate ids");
        let c8: Vec<String> = catalogue(8).into_iter().map(|s| s.id).collect();
        assert!(c8.contains(&"stream/8to1/engine".to_string()));
        assert!(!c8.contains(&"stream/9to1/engine".to_string()));
        // The one-producer peers and std mpsc run in 1to1 only.
        for one in ["rtrb", "disruptor", "std-mpsc"] {
            assert!(!c8.contains(&format!("stream/2to1/{one}")), "{one} in 2to1");
        }
    }
}
