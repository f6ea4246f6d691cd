//! The catalogue: every scenario id of `harness/BENCHMARKS.md`, in the order they run, for a plan
//! of so many cores. It sits on top of the scenarios: it knows every family module under
//! [`crate::scenario`] and calls each one's `register` ([`FAMILIES`]); the families know only the
//! vocabulary ([`Scenario`], [`crate::scenario::kit`]), never the list they are part of. The
//! runner asks it for the scenarios to run ([`catalogue`]).
//!
//! May import `scenario` (the vocabulary and every family module).

use crate::scenario::{
    async_tokio, baseline, burst, calibration, engine, nats, partitioned, peers, ticks, workload,
    Scenario,
};

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
            // Recording's cost (issue 35): beside the plain scenario, in the same round.
            if n <= 2 {
                engine::register_stream_recorded(v, n);
            }
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
        if std::env::var_os(baseline::SELFTEST_ENV).is_some() {
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

/// The scenario ids that `harness/BENCHMARKS.md` documents (N = 2 and K = 1 stand for their
/// families): the catalogue must offer each, and the smoke run (`tests/smoke.rs`) must run each.
pub const DOCUMENTED_IDS: &[&str] = &[
    "calibration/cacheline-pingpong",
    "calibration/timer",
    "route/dispatch",
    "route/floor",
    "route/crossbeam-channel",
    "route/tree",
    "listeners/indexed",
    "pingpong/engine",
    "pingpong/engine-park",
    "pingpong/crossbeam-channel",
    "pingpong/kanal",
    "pingpong/disruptor",
    "stream/1to1/engine",
    "stream/1to1/crossbeam-channel",
    "stream/1to1/std-mpsc",
    "stream/1to1/kanal",
    "stream/1to1/flume",
    "stream/1to1/tokio-mpsc",
    "stream/1to1/disruptor",
    "stream/1to1/disruptor-mp",
    "stream/1to1/rtrb",
    "stream/1to1/arrayqueue",
    "stream/2to1/engine",
    "stream/2to1/crossbeam-channel",
    "stream/2to1/kanal",
    "stream/2to1/flume",
    "stream/2to1/tokio-mpsc",
    "stream/2to1/disruptor-mp",
    "burst/1/engine",
    "burst/10/engine",
    "burst/100/engine",
    "burst/1/crossbeam-channel",
    "burst/10/disruptor",
    "burst/100/rtrb",
    "fanout/channel",
    "pipeline/1",
    "openloop/rate",
    "idle/wakeup",
    "backpressure/flood",
    "alloc/route",
    "alloc/send",
    "alloc/channel",
    "alloc/output",
    "async/tokio/engine",
    "async/tokio/tokio-mpsc",
    "calibration/ring-pingpong",
    "stream/1to1/engine-batch",
    "burst/100/disruptor",
    "burst/10/rtrb",
    "burst/10/crossbeam-channel",
    "alloc/send-batch",
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
    "workload/travel",
    "workload/travel/twin",
    "workload/burst",
    "workload/burst/twin",
    "workload/unconfirmed",
    "workload/unconfirmed/twin",
    "workload/vwap",
    "workload/vwap/twin",
    "workload/logins",
    "workload/logins/twin",
    "alloc/workload",
    "alloc/query",
    "partitioned/1",
    "partitioned/2",
    "record/stream/1to1",
    "record/stream/2to1",
    "record/workload/fraud",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_every_benchmarks_md_id_and_unique_ids() {
        let cat = catalogue(2);
        let ids: Vec<&str> = cat.iter().map(|s| s.id.as_str()).collect();
        for want in DOCUMENTED_IDS {
            assert!(ids.contains(want), "missing {want}");
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

    #[test]
    fn each_recording_scenario_runs_right_after_its_plain_one() {
        for cores in [2, 8] {
            let ids: Vec<String> = catalogue(cores).into_iter().map(|s| s.id).collect();
            // The pairs the targets compare (`targets::RECORDED`).
            for (recorded, plain, _) in crate::targets::RECORDED {
                let at = ids.iter().position(|id| id == recorded);
                let before = at.and_then(|i| i.checked_sub(1)).map(|i| ids[i].as_str());
                assert_eq!(before, Some(plain), "{recorded} with {cores} cores");
            }
            assert!(!ids.iter().any(|id| id.starts_with("record/stream/3to1")));
            // And each checkpointing one right after the same one without (issue 36).
            for (checkpointed, plain) in crate::targets::CHECKPOINTED {
                let at = ids.iter().position(|id| id == checkpointed);
                let before = at.and_then(|i| i.checked_sub(1)).map(|i| ids[i].as_str());
                assert_eq!(before, Some(plain), "{checkpointed} with {cores} cores");
            }
        }
    }
}
