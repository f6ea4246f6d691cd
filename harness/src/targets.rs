//! The targets of `harness/BENCHMARKS.md`, evaluated on *paired* figures.
//!
//! A run is made of rounds; round r runs every scenario once, so an engine scenario and its
//! peers run back to back in it. A ratio target takes, in every round where all its records
//! have a figure, the ratio engine / baseline (for "the fastest peer", the best peer *of that
//! round*), then the median of those per-round ratios and its bootstrap 95 % interval
//! ([`stats::bootstrap_median_ci`]). A machine that slows down for a while slows both sides of a
//! round, so it moves the per-round ratios much less than it moves the absolute figures.
//!
//! Verdicts: **MET** when the whole interval is on the good side of the threshold, **NOT MET**
//! when it is entirely on the bad side, **UNDECIDED** when it straddles the threshold (or there
//! is one round only: no interval). `harness run` repeats the records of undecided targets within
//! a time budget ([`crate::runner`]). The allocation targets are absolute: MET when no run
//! allocated. The one-producer bounds (rtrb, single-producer disruptor), `pingpong/engine` against
//! the ring floor (`calibration/ring-pingpong`) and the `async/tokio` pairing (engine against
//! tokio mpsc, issue 19: "in the same run", no threshold) are reported with their ratio and
//! interval but carry no verdict (`REPORTED`).

use crate::record::{Summary, SummaryRecord, TargetRecord};
use crate::scenario::peers::{MP_PEERS, SP_PEERS};
use crate::stats;

/// Confidence level of every target interval.
pub const LEVEL: f64 = 0.95;
/// route/dispatch must be at least this fraction of the same loop written by hand (`route/floor`:
/// a `Vec` stack and a `match` dispatcher), issue 31.
pub const ROUTE_RATIO: f64 = 0.7;
/// pingpong/engine p50 must be at most this many times the cache-line floor.
pub const PINGPONG_RATIO: f64 = 1.5;
/// stream/*/engine must be at least this many times the fastest multi-producer peer.
pub const STREAM_RATIO: f64 = 1.0;
/// stream/1to1/engine-batch must be at least this fraction of rtrb (one producer, one consumer).
pub const BATCH_RATIO: f64 = 0.5;
/// workload/keys/1m throughput must be at least this fraction of workload/keys/1k's (issue 31).
pub const KEYS_THROUGHPUT_RATIO: f64 = 0.5;
/// workload/keys/1m shutdown ns per live instance must be at most this many times 1k's.
pub const KEYS_SHUTDOWN_RATIO: f64 = 2.0;
/// What RSS per live instance of a one-listener keyed monitor should be (bytes): reported only.
pub const KEYS_RSS_AIM: f64 = 256.0;
/// workload/{fraud,absence,spike} (issue 31), workload/{travel,burst,unconfirmed} (issue 33) and
/// workload/{vwap,logins} (issue 34) (the engine) must be at least this fraction of its twin (the
/// same rules written by hand).
pub const WORKLOAD_RATIO: f64 = 0.5;
/// The workloads judged against their twins by [`WORKLOAD_RATIO`].
pub const WORKLOADS: [&str; 8] = [
    "fraud",
    "absence",
    "spike",
    "travel",
    "burst",
    "unconfirmed",
    "vwap",
    "logins",
];
/// A scenario recording its run to a file (`record/*`) must keep at least this fraction of the
/// same scenario's throughput not recording: at most 5 % cost (issue 35).
pub const RECORD_RATIO: f64 = 0.95;
/// Each `record/*` scenario, the plain scenario it is paired with, and whether [`RECORD_RATIO`]
/// judges it (issue 35 asks only to measure the two-sender stream).
pub const RECORDED: [(&str, &str, bool); 3] = [
    ("record/stream/1to1", "stream/1to1/engine", true),
    ("record/stream/2to1", "stream/2to1/engine", false),
    ("record/workload/fraud", "workload/fraud", true),
];

/// A scenario taking a checkpoint every second must keep at least this fraction of the same
/// scenario's throughput without checkpoints: at most 5 % cost (issue 36).
pub const CHECKPOINT_RATIO: f64 = 0.95;
/// Each checkpointing scenario and the same scenario without checkpoints, run right before it.
pub const CHECKPOINTED: [(&str, &str); 1] =
    [("checkpoint/workload/fraud", "checkpoint/workload/fraud/off")];

/// `kind` of a target that judges a ratio against its threshold.
pub const KIND_RATIO: &str = "ratio";
/// `kind` of a comparison without a target (a one-producer bound, the ring floor, the `async/tokio`
/// pairing): its ratio is reported, never judged.
pub const KIND_BOUND: &str = "bound";
/// `kind` of an absolute target (allocations): judged on every run's figure.
pub const KIND_ABSOLUTE: &str = "absolute";
/// `direction` of a target whose ratio must be at least its threshold.
pub const AT_LEAST: &str = "at_least";
/// `direction` of a target whose ratio must be at most its threshold.
pub const AT_MOST: &str = "at_most";

/// Reading a target record back (`summary.json`'s `targets`), for [`crate::report`] and
/// [`crate::compare`].
impl TargetRecord {
    /// Whether a higher ratio is better (`direction` is [`AT_LEAST`]).
    pub fn higher_is_better(&self) -> bool {
        self.direction == AT_LEAST
    }

    /// Whether this is a comparison without a target (reported, never a regression).
    pub fn is_bound(&self) -> bool {
        self.kind == KIND_BOUND
    }

    /// Whether this is an absolute target (allocations).
    pub fn is_absolute(&self) -> bool {
        self.kind == KIND_ABSOLUTE
    }
}

/// The targets present in both `a` and `b`, paired by name, in `a`'s order.
pub fn in_both<'a>(a: &'a Summary, b: &'a Summary) -> Vec<(&'a TargetRecord, &'a TargetRecord)> {
    a.targets
        .iter()
        .filter_map(|ta| Some((ta, b.targets.iter().find(|t| t.target == ta.target)?)))
        .collect()
}

/// Verdict labels.
pub const MET: &str = "MET";
/// See [`MET`].
pub const NOT_MET: &str = "NOT MET";
/// See [`MET`].
pub const UNDECIDED: &str = "UNDECIDED";
/// See [`MET`].
pub const REPORTED: &str = "REPORTED";

/// What a target compares.
struct Def {
    target: String,
    kind: &'static str,
    engine: String,
    baselines: Vec<String>,
    metric: &'static str,
    at_least: bool,
    threshold: f64,
    fastest: bool,
}

fn usable<'a>(s: &'a Summary, id: &str, metric: &str) -> Result<&'a SummaryRecord, String> {
    match s.get(id, metric) {
        None => Err(format!("{id} not run")),
        Some(r) if r.checks != "ok" => Err(format!("{id} failed its checks")),
        Some(r) => Ok(r),
    }
}

/// The stream fan-ins present in `s` (`N` of `stream/{N}to1/engine`).
fn fan_ins(s: &Summary) -> Vec<usize> {
    let mut ns: Vec<usize> = s
        .records
        .iter()
        .filter_map(|r| {
            r.id.strip_prefix("stream/")?
                .strip_suffix("to1/engine")?
                .parse()
                .ok()
        })
        .collect();
    ns.sort_unstable();
    ns.dedup();
    ns
}

fn definitions(s: &Summary) -> Vec<Def> {
    let mut d = vec![
        Def {
            target: format!("route/dispatch >= {ROUTE_RATIO}x route/floor (the same loop by hand: a Vec stack and a match)"),
            kind: KIND_RATIO,
            engine: "route/dispatch".into(),
            baselines: vec!["route/floor".into()],
            metric: "throughput",
            at_least: true,
            threshold: ROUTE_RATIO,
            fastest: false,
        },
        Def {
            target: format!("pingpong/engine one-way p50 <= {PINGPONG_RATIO}x calibration/cacheline-pingpong p50"),
            kind: KIND_RATIO,
            engine: "pingpong/engine".into(),
            baselines: vec!["calibration/cacheline-pingpong".into()],
            metric: "latency_one_way",
            at_least: false,
            threshold: PINGPONG_RATIO,
            fastest: false,
        },
    ];
    // The same loop through a channel (the route target before issue 31): reported, never judged.
    let channel = "route/crossbeam-channel";
    if s.get(channel, "throughput").is_some() {
        d.push(Def {
            target: format!(
                "route/dispatch vs {channel} (the same loop through a channel, no target)"
            ),
            kind: KIND_BOUND,
            engine: "route/dispatch".into(),
            baselines: vec![channel.into()],
            metric: "throughput",
            at_least: true,
            threshold: 1.0,
            fastest: false,
        });
    }
    // The hand-off through a ring of lines, the floor of any queue's ping-pong on the machine
    // (`calibration/ring-pingpong`): reported beside the target, never judged.
    let ring = "calibration/ring-pingpong";
    if s.get(ring, "latency_one_way").is_some() {
        d.push(Def {
            target: format!(
                "pingpong/engine one-way p50 vs {ring} p50 (a queue's floor, no target)"
            ),
            kind: KIND_BOUND,
            engine: "pingpong/engine".into(),
            baselines: vec![ring.into()],
            metric: "latency_one_way",
            at_least: false,
            threshold: 1.0,
            fastest: false,
        });
    }
    let mut ns = fan_ins(s);
    if ns.is_empty() {
        ns = vec![1, 2];
    }
    for n in ns {
        let prefix = format!("stream/{n}to1");
        // The candidates: every multi-producer peer registered for this fan-in and in the run
        // (std mpsc runs in 1to1 only); when none is in the run, all of them (not measured).
        let mut peers: Vec<String> = MP_PEERS
            .iter()
            .map(|p| format!("{prefix}/{p}"))
            .filter(|id| s.get(id, "throughput").is_some())
            .collect();
        if peers.is_empty() {
            peers = vec![format!("{prefix}/crossbeam-channel")];
        }
        d.push(Def {
            target: format!(
                "{prefix}/engine >= {STREAM_RATIO}x the fastest multi-producer peer of each round"
            ),
            kind: KIND_RATIO,
            engine: format!("{prefix}/engine"),
            baselines: peers,
            metric: "throughput",
            at_least: true,
            threshold: STREAM_RATIO,
            fastest: true,
        });
        if n == 1 {
            d.push(Def {
                target: format!(
                    "{prefix}/engine-batch >= {BATCH_RATIO}x {prefix}/rtrb in the run (batches of {})",
                    crate::scenario::STREAM_BATCH
                ),
                kind: KIND_RATIO,
                engine: format!("{prefix}/engine-batch"),
                baselines: vec![format!("{prefix}/rtrb")],
                metric: "throughput",
                at_least: true,
                threshold: BATCH_RATIO,
                fastest: false,
            });
            for p in SP_PEERS {
                let id = format!("{prefix}/{p}");
                if s.get(&id, "throughput").is_some() {
                    d.push(Def {
                        target: format!("{prefix}/engine vs {id} (one-producer bound, no target)"),
                        kind: KIND_BOUND,
                        engine: format!("{prefix}/engine"),
                        baselines: vec![id],
                        metric: "throughput",
                        at_least: true,
                        threshold: 1.0,
                        fastest: false,
                    });
                }
            }
        }
    }
    // The async service against the same two hops through tokio mpsc: reported, no target.
    let (engine, peer) = ("async/tokio/engine", "async/tokio/tokio-mpsc");
    if s.get(engine, "throughput").is_some() && s.get(peer, "throughput").is_some() {
        for (metric, at_least) in [("throughput", true), ("latency_send_to_recv_p99", false)] {
            d.push(Def {
                target: format!("{engine} vs {peer}: {metric} (paired, no target)"),
                kind: KIND_BOUND,
                engine: engine.into(),
                baselines: vec![peer.into()],
                metric,
                at_least,
                threshold: 1.0,
                fastest: false,
            });
        }
    }
    for path in ["route", "send", "send-batch", "channel", "output"] {
        d.push(Def {
            target: format!("alloc/{path}: 0 allocations per event in every run"),
            kind: KIND_ABSOLUTE,
            engine: format!("alloc/{path}"),
            baselines: Vec::new(),
            metric: "allocs_per_event",
            at_least: false,
            threshold: 0.0,
            fastest: false,
        });
    }
    d.push(Def {
        target:
            "alloc/workload: 0 allocations per non-matching event on workload/fraud in every run"
                .into(),
        kind: KIND_ABSOLUTE,
        engine: "alloc/workload".into(),
        baselines: Vec::new(),
        metric: "allocs_per_event",
        at_least: false,
        threshold: 0.0,
        fastest: false,
    });
    d.push(Def {
        target: "alloc/query: 0 allocations per event on workload/vwap's stream query once its windows are warm, in every run"
            .into(),
        kind: KIND_ABSOLUTE,
        engine: "alloc/query".into(),
        baselines: Vec::new(),
        metric: "allocs_per_event",
        at_least: false,
        threshold: 0.0,
        fastest: false,
    });
    for w in WORKLOADS {
        d.push(Def {
            target: format!(
                "workload/{w} >= {WORKLOAD_RATIO}x workload/{w}/twin (the same rules by hand)"
            ),
            kind: KIND_RATIO,
            engine: format!("workload/{w}"),
            baselines: vec![format!("workload/{w}/twin")],
            metric: "throughput",
            at_least: true,
            threshold: WORKLOAD_RATIO,
            fastest: false,
        });
    }
    // The fraud rules on a published CEP engine (Varpulis, harness feature `varpulis`): reported,
    // no target; only when the peer ran.
    let cep = "workload/fraud/varpulis";
    if s.get(cep, "throughput").is_some() {
        d.push(Def {
            target: format!("workload/fraud vs {cep} (a CEP peer, no target)"),
            kind: KIND_BOUND,
            engine: "workload/fraud".into(),
            baselines: vec![cep.into()],
            metric: "throughput",
            at_least: true,
            threshold: 1.0,
            fastest: false,
        });
    }
    // Recording's cost (issue 35): each record/* scenario against the same scenario not recording,
    // run back to back in every round. The unjudged one only when it ran.
    for (recorded, plain, judged) in RECORDED {
        if !judged && s.get(recorded, "throughput").is_none() {
            continue;
        }
        d.push(Def {
            target: if judged {
                format!(
                    "{recorded} >= {RECORD_RATIO}x {plain} (recording to a file costs at most 5 %)"
                )
            } else {
                format!("{recorded} vs {plain} (recording's cost, no target)")
            },
            kind: if judged { KIND_RATIO } else { KIND_BOUND },
            engine: recorded.into(),
            baselines: vec![plain.into()],
            metric: "throughput",
            at_least: true,
            threshold: if judged { RECORD_RATIO } else { 1.0 },
            fastest: false,
        });
    }
    // Checkpoints' cost (issue 36): the checkpointing scenario against the same one without,
    // run back to back in every round.
    for (checkpointed, plain) in CHECKPOINTED {
        d.push(Def {
            target: format!(
                "{checkpointed} >= {CHECKPOINT_RATIO}x {plain} (a checkpoint a second costs at most 5 %)"
            ),
            kind: KIND_RATIO,
            engine: checkpointed.into(),
            baselines: vec![plain.into()],
            metric: "throughput",
            at_least: true,
            threshold: CHECKPOINT_RATIO,
            fastest: false,
        });
    }
    // A recovery's time at 100,000 live instances (issue 36): reported, no target, no baseline.
    d.push(Def {
        target: "checkpoint/recover: recovery time at 100,000 live instances in ms, not a ratio (reported)"
            .into(),
        kind: KIND_BOUND,
        engine: "checkpoint/recover".into(),
        baselines: Vec::new(),
        metric: "recovery_ms",
        at_least: false,
        threshold: 0.0,
        fastest: false,
    });
    // workload/keys (issue 31): a live key should cost about the same at a million keys as at a
    // thousand; the two sizes run in every round, so their figures pair per round.
    let (small, large) = ("workload/keys/1k", "workload/keys/1m");
    for (metric, what, at_least, threshold) in [
        ("throughput", "throughput", true, KEYS_THROUGHPUT_RATIO),
        (
            "shutdown_ns_per_instance",
            "shutdown ns per live instance",
            false,
            KEYS_SHUTDOWN_RATIO,
        ),
    ] {
        d.push(Def {
            target: format!(
                "{large} {what} {} {threshold}x {small}",
                if at_least { ">=" } else { "<=" }
            ),
            kind: KIND_RATIO,
            engine: large.into(),
            baselines: vec![small.into()],
            metric,
            at_least,
            threshold,
            fastest: false,
        });
    }
    // No baseline: the per-round figures are the engine's own (bytes, not a ratio).
    d.push(Def {
        target: format!(
            "{large} RSS per live instance in bytes, not a ratio (reported; aim <= {KEYS_RSS_AIM})"
        ),
        kind: KIND_BOUND,
        engine: large.into(),
        baselines: Vec::new(),
        metric: "rss_per_instance",
        at_least: false,
        threshold: KEYS_RSS_AIM,
        fastest: false,
    });
    d
}

/// The verdict of a median's interval against a threshold.
pub fn verdict(ci: Option<(f64, f64)>, threshold: f64, at_least: bool) -> &'static str {
    match ci {
        None => UNDECIDED,
        Some((lo, hi)) if at_least => {
            if lo >= threshold {
                MET
            } else if hi < threshold {
                NOT_MET
            } else {
                UNDECIDED
            }
        }
        Some((lo, hi)) => {
            if hi <= threshold {
                MET
            } else if lo > threshold {
                NOT_MET
            } else {
                UNDECIDED
            }
        }
    }
}

fn evaluate(s: &Summary, d: Def) -> TargetRecord {
    let mut t = TargetRecord {
        target: d.target,
        kind: d.kind.into(),
        engine: d.engine.clone(),
        baselines: d.baselines.clone(),
        metric: d.metric.into(),
        direction: if d.at_least { AT_LEAST } else { AT_MOST }.into(),
        threshold: d.threshold,
        ratios: Vec::new(),
        fastest: Vec::new(),
        median: None,
        ci95: None,
        verdict: String::new(),
    };
    let engine = match usable(s, &d.engine, d.metric) {
        Ok(r) => r,
        Err(e) => {
            t.verdict = format!("NOT MEASURED ({e})");
            return t;
        }
    };
    if d.kind == KIND_ABSOLUTE {
        t.ratios = engine.values.iter().flatten().copied().collect();
        t.median = (!t.ratios.is_empty()).then(|| stats::median(&t.ratios));
        // No interval: the verdict rests on the worst run, not on a median.
        let worst = t.ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        t.verdict = if t.ratios.is_empty() {
            "NOT MEASURED (no run)".into()
        } else if worst <= d.threshold {
            MET.into()
        } else {
            NOT_MET.into()
        };
        return t;
    }
    let mut bases = Vec::new();
    for b in &d.baselines {
        match usable(s, b, d.metric) {
            Ok(r) => bases.push(r),
            Err(e) => {
                t.verdict = format!("NOT MEASURED ({e})");
                return t;
            }
        }
    }
    let rounds = engine.values.len();
    for r in 0..rounds {
        let Some(e) = engine.values[r] else { continue };
        if bases.is_empty() {
            // A bound without a baseline reports the engine's own figure.
            t.ratios.push(e);
            continue;
        }
        let vals: Option<Vec<f64>> = bases
            .iter()
            .map(|b| b.values.get(r).copied().flatten())
            .collect();
        let Some(vals) = vals else { continue };
        // The best baseline of the round: the highest throughput, or the lowest latency.
        let (bi, best) =
            vals.iter()
                .copied()
                .enumerate()
                .fold((0, f64::NAN), |(bi, best), (i, v)| {
                    let better = best.is_nan() || if d.at_least { v > best } else { v < best };
                    if better {
                        (i, v)
                    } else {
                        (bi, best)
                    }
                });
        if best > 0.0 && e.is_finite() {
            t.ratios.push(e / best);
            if d.fastest {
                let id = &bases[bi].id;
                t.fastest
                    .push(id.rsplit('/').next().unwrap_or(id).to_string());
            }
        }
    }
    if t.ratios.is_empty() {
        t.verdict = "NOT MEASURED (no round with every record)".into();
        return t;
    }
    t.median = Some(stats::median(&t.ratios));
    t.ci95 = stats::bootstrap_median_ci(&t.ratios, LEVEL);
    t.verdict = if d.kind == "bound" {
        REPORTED.into()
    } else {
        verdict(t.ci95, d.threshold, d.at_least).into()
    };
    t
}

/// Every target of the benchmark document, evaluated on `s`'s per-round figures.
pub fn evaluate_all(s: &Summary) -> Vec<TargetRecord> {
    definitions(s).into_iter().map(|d| evaluate(s, d)).collect()
}

/// The records of the undecided ratio targets (to repeat).
pub fn undecided_ids(targets: &[TargetRecord]) -> Vec<String> {
    let mut ids = Vec::new();
    for t in targets
        .iter()
        .filter(|t| t.kind == "ratio" && t.verdict == UNDECIDED)
    {
        for id in std::iter::once(&t.engine).chain(&t.baselines) {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Better, SCHEMA};

    fn row(id: &str, metric: &str, values: &[f64]) -> SummaryRecord {
        SummaryRecord {
            id: id.into(),
            metric: metric.into(),
            unit: "events/s".into(),
            median: stats::median(values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
            values: values.iter().map(|&v| Some(v)).collect(),
            pairs: Vec::new(),
            percentiles: None,
            checks: "ok".into(),
            better: Better::Higher,
            placement: String::new(),
            hgrm: None,
        }
    }

    fn summary(records: Vec<SummaryRecord>) -> Summary {
        Summary {
            schema: SCHEMA,
            records,
            targets: Vec::new(),
        }
    }

    fn find<'a>(t: &'a [TargetRecord], prefix: &str) -> &'a TargetRecord {
        t.iter().find(|x| x.target.starts_with(prefix)).unwrap()
    }

    #[test]
    fn verdict_is_undecided_when_the_interval_straddles_the_threshold() {
        assert_eq!(verdict(Some((1.1, 1.3)), 1.0, true), MET);
        assert_eq!(verdict(Some((0.7, 0.9)), 1.0, true), NOT_MET);
        assert_eq!(verdict(Some((0.9, 1.1)), 1.0, true), UNDECIDED);
        assert_eq!(verdict(Some((1.0, 1.2)), 1.0, true), MET);
        assert_eq!(verdict(Some((1.1, 1.4)), 1.5, false), MET);
        assert_eq!(verdict(Some((1.6, 1.9)), 1.5, false), NOT_MET);
        assert_eq!(verdict(Some((1.4, 1.6)), 1.5, false), UNDECIDED);
        assert_eq!(verdict(None, 1.0, true), UNDECIDED);
    }

    #[test]
    fn ratios_are_paired_per_round_against_that_rounds_fastest_peer() {
        // Round 2 is slow for everyone: absolute medians would mislead, per-round ratios do not.
        let s = summary(vec![
            row(
                "stream/1to1/engine",
                "throughput",
                &[20.0, 22.0, 5.0, 21.0, 20.0],
            ),
            row(
                "stream/1to1/crossbeam-channel",
                "throughput",
                &[10.0, 11.0, 2.5, 10.0, 10.0],
            ),
            row(
                "stream/1to1/kanal",
                "throughput",
                &[15.0, 10.0, 4.0, 14.0, 16.0],
            ),
            row(
                "stream/1to1/rtrb",
                "throughput",
                &[40.0, 44.0, 10.0, 42.0, 40.0],
            ),
        ]);
        let t = evaluate_all(&s);
        let st = find(&t, "stream/1to1/engine >=");
        let want = [
            20.0 / 15.0,
            22.0 / 11.0,
            5.0 / 4.0,
            21.0 / 14.0,
            20.0 / 16.0,
        ];
        assert_eq!(st.ratios.len(), 5);
        for (got, want) in st.ratios.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        assert_eq!(
            st.fastest,
            ["kanal", "crossbeam-channel", "kanal", "kanal", "kanal"]
        );
        assert_eq!(st.verdict, MET, "{st:?}");
        let (lo, hi) = st.ci95.unwrap();
        assert!(lo <= st.median.unwrap() && st.median.unwrap() <= hi);
        // rtrb is a bound: reported, never a verdict.
        let b = find(&t, "stream/1to1/engine vs stream/1to1/rtrb");
        assert_eq!(b.verdict, REPORTED);
        assert!((b.median.unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn async_tokio_pairing_is_reported_per_round_only_when_both_ran() {
        let t = evaluate_all(&summary(vec![row(
            "async/tokio/engine",
            "throughput",
            &[2.0, 4.0],
        )]));
        assert!(!t.iter().any(|t| t.engine.starts_with("async/")));
        let s = summary(vec![
            row("async/tokio/engine", "throughput", &[2.0, 4.0, 3.0]),
            row("async/tokio/tokio-mpsc", "throughput", &[1.0, 1.0, 2.0]),
            row(
                "async/tokio/engine",
                "latency_send_to_recv_p99",
                &[10.0, 10.0, 10.0],
            ),
            row(
                "async/tokio/tokio-mpsc",
                "latency_send_to_recv_p99",
                &[20.0, 40.0, 20.0],
            ),
        ]);
        let t = evaluate_all(&s);
        let thr = find(
            &t,
            "async/tokio/engine vs async/tokio/tokio-mpsc: throughput",
        );
        assert_eq!(thr.ratios, [2.0, 4.0, 1.5]);
        assert_eq!(thr.verdict, REPORTED);
        let lat = find(&t, "async/tokio/engine vs async/tokio/tokio-mpsc: latency");
        assert_eq!(lat.ratios, [0.5, 0.25, 0.5]);
        assert_eq!(lat.verdict, REPORTED);
        assert!(undecided_ids(&t).iter().all(|id| !id.starts_with("async/")));
    }

    #[test]
    fn straddling_ratios_are_undecided_and_one_round_decides_nothing() {
        let s = summary(vec![
            row(
                "stream/1to1/engine",
                "throughput",
                &[9.0, 11.0, 9.5, 10.5, 10.0],
            ),
            row("stream/1to1/crossbeam-channel", "throughput", &[10.0; 5]),
            row("route/dispatch", "throughput", &[100.0]),
            row("route/floor", "throughput", &[1.0]),
        ]);
        let t = evaluate_all(&s);
        let st = find(&t, "stream/1to1/engine >=");
        assert_eq!(st.verdict, UNDECIDED, "{st:?}");
        let r = find(&t, "route/dispatch >=");
        assert_eq!(r.verdict, UNDECIDED, "one round has no interval: {r:?}");
        let ids = undecided_ids(&t);
        assert!(ids.contains(&"stream/1to1/engine".to_string()));
        assert!(ids.contains(&"stream/1to1/crossbeam-channel".to_string()));
        assert!(ids.contains(&"route/dispatch".to_string()));
        assert!(ids.contains(&"route/floor".to_string()));
    }

    #[test]
    fn route_is_judged_against_its_hand_written_floor_and_the_channel_only_reported() {
        let s = summary(vec![
            row(
                "route/dispatch",
                "throughput",
                &[200.0, 210.0, 190.0, 205.0],
            ),
            row("route/floor", "throughput", &[320.0, 330.0, 310.0, 325.0]),
            row(
                "route/crossbeam-channel",
                "throughput",
                &[40.0, 42.0, 38.0, 41.0],
            ),
        ]);
        let t = evaluate_all(&s);
        // 0.625, 0.636, 0.613, 0.631 of the floor, paired per round: under 0.7x in every round.
        let target = find(&t, "route/dispatch >=");
        assert_eq!(target.baselines, vec!["route/floor"]);
        assert_eq!(target.threshold, ROUTE_RATIO);
        assert_eq!(target.verdict, NOT_MET, "{target:?}");
        let channel = find(&t, "route/dispatch vs route/crossbeam-channel");
        assert!(channel.is_bound());
        assert_eq!(channel.verdict, REPORTED);
        assert!(channel.median.unwrap() > 4.9, "{:?}", channel.median);
        // Without the channel in the run there is nothing to report beside the target.
        let only = summary(vec![
            row("route/dispatch", "throughput", &[250.0, 260.0, 255.0]),
            row("route/floor", "throughput", &[300.0, 300.0, 300.0]),
        ]);
        let t = evaluate_all(&only);
        assert_eq!(find(&t, "route/dispatch >=").verdict, MET);
        assert!(!t.iter().any(|r| r.target.starts_with("route/dispatch vs")));
    }

    #[test]
    fn failed_peers_and_allocations_are_judged_honestly() {
        let mut bad = row("stream/2to1/kanal", "throughput", &[1.0; 3]);
        bad.checks = "failed: lost 1".into();
        let mut alloc = row("alloc/send", "allocs_per_event", &[0.0, 0.0, 0.001]);
        alloc.unit = "allocs/event".into();
        let s = summary(vec![
            row("stream/2to1/engine", "throughput", &[1.0; 3]),
            row("stream/2to1/crossbeam-channel", "throughput", &[1.0; 3]),
            bad,
            row("alloc/route", "allocs_per_event", &[0.0, 0.0, 0.0]),
            alloc,
            row(
                "pingpong/engine",
                "latency_one_way",
                &[100.0, 110.0, 105.0, 100.0, 102.0],
            ),
            row(
                "calibration/cacheline-pingpong",
                "latency_one_way",
                &[50.0, 52.0, 51.0, 50.0, 50.0],
            ),
        ]);
        let t = evaluate_all(&s);
        assert!(find(&t, "stream/2to1").verdict.starts_with("NOT MEASURED"));
        assert_eq!(find(&t, "alloc/route").verdict, MET);
        assert_eq!(find(&t, "alloc/send").verdict, NOT_MET);
        assert!(find(&t, "alloc/channel")
            .verdict
            .starts_with("NOT MEASURED"));
        // About 2x the floor against a 1.5x ceiling: NOT MET.
        assert_eq!(find(&t, "pingpong/engine").verdict, NOT_MET);
        // No ring floor in the run: no row for it.
        assert!(!t.iter().any(|x| x.target.contains("ring-pingpong")));
    }

    #[test]
    fn workloads_are_judged_against_their_twins_and_alloc_workload_is_absolute() {
        let mut alloc = row("alloc/workload", "allocs_per_event", &[0.0, 0.0, 0.0]);
        alloc.unit = "allocs/event".into();
        let s = summary(vec![
            // fraud: 0.2x its twin in every round.
            row("workload/fraud", "throughput", &[1.0, 1.2, 0.8, 1.0]),
            row("workload/fraud/twin", "throughput", &[5.0, 6.0, 4.0, 5.0]),
            // absence: 0.8x.
            row("workload/absence", "throughput", &[8.0, 8.0, 8.0, 8.0]),
            row(
                "workload/absence/twin",
                "throughput",
                &[10.0, 10.0, 10.0, 10.0],
            ),
            // The pattern language's (issue 33): burst 0.6x, unconfirmed 0.4x.
            row("workload/burst", "throughput", &[6.0, 6.0, 6.0, 6.0]),
            row("workload/burst/twin", "throughput", &[10.0; 4]),
            row("workload/unconfirmed", "throughput", &[4.0, 4.0, 4.0, 4.0]),
            row("workload/unconfirmed/twin", "throughput", &[10.0; 4]),
            alloc,
        ]);
        let t = evaluate_all(&s);
        let fraud = find(&t, "workload/fraud >=");
        assert_eq!(fraud.baselines, vec!["workload/fraud/twin"]);
        assert!((fraud.median.unwrap() - 0.2).abs() < 1e-9, "{fraud:?}");
        assert_eq!(fraud.verdict, NOT_MET);
        assert_eq!(find(&t, "workload/absence >=").verdict, MET);
        let burst = find(&t, "workload/burst >=");
        assert_eq!(burst.baselines, vec!["workload/burst/twin"]);
        assert_eq!(burst.verdict, MET);
        assert_eq!(find(&t, "workload/unconfirmed >=").verdict, NOT_MET);
        // spike, travel and the stream queries (issue 34) did not run: not measured, never met.
        for w in ["spike", "travel", "vwap", "logins"] {
            assert!(find(&t, &format!("workload/{w} >="))
                .verdict
                .starts_with("NOT MEASURED"));
        }
        assert_eq!(find(&t, "alloc/workload").verdict, MET);
    }

    #[test]
    fn recording_is_paired_per_round_with_the_same_scenario_not_recording() {
        let s = summary(vec![
            // 1to1: 0.98x in every round, although the absolute figures move 2x between
            // rounds: the pairing is per round.
            row(
                "stream/1to1/engine",
                "throughput",
                &[100.0, 50.0, 100.0, 50.0],
            ),
            row(
                "record/stream/1to1",
                "throughput",
                &[98.0, 49.0, 98.0, 49.0],
            ),
            // fraud: 0.9x, 10 % cost.
            row("workload/fraud", "throughput", &[10.0, 10.0, 10.0, 10.0]),
            row("record/workload/fraud", "throughput", &[9.0, 9.0, 9.0, 9.0]),
            // 2to1: measured, never judged.
            row(
                "stream/2to1/engine",
                "throughput",
                &[10.0, 10.0, 10.0, 10.0],
            ),
            row("record/stream/2to1", "throughput", &[5.0, 5.0, 5.0, 5.0]),
        ]);
        let t = evaluate_all(&s);
        let one = find(&t, "record/stream/1to1 >=");
        assert_eq!(one.baselines, vec!["stream/1to1/engine"]);
        assert!((one.median.unwrap() - 0.98).abs() < 1e-9, "{one:?}");
        assert_eq!(one.verdict, MET);
        assert_eq!(find(&t, "record/workload/fraud >=").verdict, NOT_MET);
        let two = find(&t, "record/stream/2to1 vs");
        assert!(two.is_bound());
        assert_eq!(two.verdict, REPORTED);
        assert!((two.median.unwrap() - 0.5).abs() < 1e-9, "{two:?}");
        // Not run: the judged ones are not measured, the reported one is left out.
        let t = evaluate_all(&summary(Vec::new()));
        assert!(find(&t, "record/stream/1to1 >=")
            .verdict
            .starts_with("NOT MEASURED"));
        assert!(!t.iter().any(|x| x.target.starts_with("record/stream/2to1")));
    }

    #[test]
    fn keys_sizes_pair_per_round_and_rss_is_reported_as_bytes() {
        let mut rss = row(
            "workload/keys/1m",
            "rss_per_instance",
            &[900.0, 920.0, 910.0],
        );
        rss.unit = "bytes".into();
        let s = summary(vec![
            // Round 3 is slow for both sizes: the per-round ratios stay at 0.6.
            row(
                "workload/keys/1k",
                "throughput",
                &[10.0, 10.0, 5.0, 10.0, 10.0],
            ),
            row("workload/keys/1m", "throughput", &[6.0, 6.0, 3.0, 6.0, 6.0]),
            row("workload/keys/1k", "shutdown_ns_per_instance", &[100.0; 5]),
            row(
                "workload/keys/1m",
                "shutdown_ns_per_instance",
                &[900.0, 1000.0, 1100.0, 950.0, 1050.0],
            ),
            rss,
        ]);
        let t = evaluate_all(&s);
        let thr = find(&t, "workload/keys/1m throughput >=");
        assert_eq!(thr.baselines, vec!["workload/keys/1k"]);
        assert!(
            thr.ratios.iter().all(|r| (r - 0.6).abs() < 1e-12),
            "{thr:?}"
        );
        assert_eq!(thr.verdict, MET);
        let down = find(&t, "workload/keys/1m shutdown");
        assert!(!down.higher_is_better());
        assert!((down.median.unwrap() - 10.0).abs() < 1e-9, "{down:?}");
        assert_eq!(down.verdict, NOT_MET);
        let mem = find(&t, "workload/keys/1m RSS");
        assert!(mem.is_bound());
        assert_eq!(mem.ratios, [900.0, 920.0, 910.0]);
        assert_eq!(mem.verdict, REPORTED);
        assert!(undecided_ids(&t)
            .iter()
            .all(|id| !id.starts_with("workload/keys")));
        // A skipped 1m (its only record a failed `run` row) is not measured, never met.
        let mut skipped = row("workload/keys/1m", "run", &[0.0]);
        skipped.checks = "failed: skipped: shutdown is not linear".into();
        let s = summary(vec![
            row("workload/keys/1k", "throughput", &[10.0; 3]),
            row("workload/keys/1k", "shutdown_ns_per_instance", &[100.0; 3]),
            skipped,
        ]);
        for t in evaluate_all(&s)
            .iter()
            .filter(|t| t.engine == "workload/keys/1m")
        {
            assert!(t.verdict.starts_with("NOT MEASURED"), "{t:?}");
        }
    }

    #[test]
    fn the_ring_floor_is_reported_beside_the_pingpong_target_and_judges_nothing() {
        let s = summary(vec![
            row("pingpong/engine", "latency_one_way", &[90.0, 95.0, 90.0]),
            row(
                "calibration/cacheline-pingpong",
                "latency_one_way",
                &[60.0, 60.0, 60.0],
            ),
            row(
                "calibration/ring-pingpong",
                "latency_one_way",
                &[75.0, 80.0, 75.0],
            ),
        ]);
        let t = evaluate_all(&s);
        // The target still compares with the single line (1.5x, 1.58x, 1.5x: the median is on
        // the threshold, the interval straddles it).
        let target = find(&t, "pingpong/engine one-way p50 <=");
        assert_eq!(target.baselines, vec!["calibration/cacheline-pingpong"]);
        assert_eq!(target.verdict, UNDECIDED);
        let ring = find(
            &t,
            "pingpong/engine one-way p50 vs calibration/ring-pingpong",
        );
        assert!(ring.is_bound());
        assert_eq!(ring.verdict, REPORTED);
        assert!(
            (ring.median.unwrap() - 1.2).abs() < 1e-9,
            "{:?}",
            ring.median
        );
    }
}
