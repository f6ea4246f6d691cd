//! What a run writes and what a result folder holds.
//!
//! A child process (`harness run-one`) prints one [`RunRecord`] as a JSON line on stdout: the
//! scenario id, the check outcome, every measured value of that run (latencies with their full
//! histogram), and where each measured thread ran. The parent aggregates the records of all runs
//! of a scenario into [`SummaryRecord`]s, one per `(id, metric)`, which are the rows of
//! `summary.json` and `summary.csv`.

use crate::pin::Placement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `summary.json`'s schema version. 2 added each record's per-run `values` and the paired
/// `targets`; 3 added the per-run `pairs` of `bookkeeping_cost` (its A/B segment pairs), which
/// changed that record's meaning, and the booked/bare figures of the A/B segments (see
/// `harness/BENCHMARKS.md`, "summary.json").
pub const SCHEMA: u32 = 3;

/// The oldest schema [`read_summary`] reads: 2 has every field of 3 but `pairs` (read as empty).
pub const OLDEST_READABLE_SCHEMA: u32 = 2;

/// Metrics whose meaning changed in schema 3 (bare probes before and after the timed run became
/// A/B segments in one stream): `harness compare` does not pair them across schemas 2 and 3.
pub const CHANGED_IN_SCHEMA_3: [&str; 4] = [
    "bookkeeping_cost",
    "throughput_bare",
    "latency_one_way_bare",
    "latency_per_event_bare",
];

/// Which direction of a metric is an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Throughput-like: more is better.
    Higher,
    /// Latency-, cost- or count-like: less is better.
    Lower,
}

/// One value measured in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// Metric name, unique within its scenario (`throughput`, `latency_one_way`, ...).
    pub metric: String,
    /// Unit of `value` (`events/s`, `ns`, `allocs/event`, ...).
    pub unit: String,
    /// The run's figure; for a latency metric the p50 of `hist`.
    pub value: f64,
    /// Direction of improvement.
    pub better: Better,
    /// For latency metrics: the run's merged histogram as `[value_ns, count]` pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hist: Option<Vec<[u64; 2]>>,
    /// For a figure measured on pairs of A/B segments (`bookkeeping_cost`): every pair's value;
    /// `value` is their median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<Vec<f64>>,
}

impl Measure {
    /// A plain (non-latency) figure.
    pub fn value(metric: &str, unit: &str, value: f64, better: Better) -> Self {
        Measure {
            metric: metric.into(),
            unit: unit.into(),
            value,
            better,
            hist: None,
            pairs: None,
        }
    }
}

/// The JSON line a child prints: one run of one scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Scenario id.
    pub id: String,
    /// `ok`, or `failed: <why>` when the scenario's own check (counts, checksums) failed.
    pub check: String,
    /// Everything measured.
    pub metrics: Vec<Measure>,
    /// Where each measured thread was meant to run and ran.
    pub placement: Vec<Placement>,
    /// Sizes and settings of the run (event counts, capacities, strategies).
    pub params: BTreeMap<String, serde_json::Value>,
    /// Things a reader must know about this run (oversubscription, pin mismatches).
    pub notes: Vec<String>,
    /// Wall time of the whole run, milliseconds.
    pub wall_ms: f64,
}

impl RunRecord {
    /// Whether the run's check passed.
    pub fn ok(&self) -> bool {
        self.check == "ok"
    }
}

/// Percentiles of a latency record (nanoseconds), from the histogram merged over all runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    /// Largest value recorded.
    pub max: f64,
}

/// One row of `summary.json` / `summary.csv`: a metric of a scenario over all its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRecord {
    /// Scenario id.
    pub id: String,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Median over runs of the per-run figure.
    pub median: f64,
    /// Smallest per-run figure.
    pub min: f64,
    /// Largest per-run figure.
    pub max: f64,
    /// Number of runs aggregated.
    pub runs: usize,
    /// The per-run figures in round order (`null` for a run that failed or lacks the metric):
    /// index r of two records was measured in the same round, back to back.
    #[serde(default)]
    pub values: Vec<Option<f64>>,
    /// Records measured on pairs of A/B segments only (`bookkeeping_cost`): each run's pair
    /// values, in round order (empty for a run that failed or lacks them); `values` holds each
    /// run's median of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<Vec<f64>>,
    /// Latency records only: percentiles of the histogram merged over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentiles: Option<Percentiles>,
    /// `ok` or `failed: <why>`.
    pub checks: String,
    /// Direction of improvement.
    pub better: Better,
    /// Thread placement, as `role@planned(seen cores)`, from the first run.
    #[serde(default)]
    pub placement: String,
    /// Latency records only: the `.hgrm` file written for it, relative to the result folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hgrm: Option<String>,
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always [`SCHEMA`].
    pub schema: u32,
    /// One row per `(id, metric)`.
    pub records: Vec<SummaryRecord>,
    /// Every target, evaluated on paired per-round ratios.
    #[serde(default)]
    pub targets: Vec<TargetRecord>,
}

/// One target of `harness/BENCHMARKS.md`, evaluated on the rounds of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// The target as the benchmark document states it.
    pub target: String,
    /// `ratio` (engine / baseline per round), `absolute` (a value, e.g. allocations per event)
    /// or `bound` (reported only, no verdict: a one-producer bound, the ring floor, a paired peer).
    pub kind: String,
    /// The engine record.
    pub engine: String,
    /// The baseline record(s); for "the fastest peer" every candidate.
    pub baselines: Vec<String>,
    /// Metric compared.
    pub metric: String,
    /// `at_least` or `at_most`.
    pub direction: String,
    /// The threshold the ratio (or value) must meet.
    pub threshold: f64,
    /// The per-round ratios (or values), in round order, rounds where a side failed left out.
    pub ratios: Vec<f64>,
    /// For "the fastest peer": the peer that was fastest in each round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fastest: Vec<String>,
    /// Median of `ratios`.
    pub median: Option<f64>,
    /// Bootstrap 95 % interval of that median.
    pub ci95: Option<(f64, f64)>,
    /// `MET`, `NOT MET`, `UNDECIDED` (the interval straddles the threshold, or one round only),
    /// `NOT MEASURED (why)` or `REPORTED` (bounds).
    pub verdict: String,
}

impl Summary {
    /// The row for `(id, metric)`.
    pub fn get(&self, id: &str, metric: &str) -> Option<&SummaryRecord> {
        self.records
            .iter()
            .find(|r| r.id == id && r.metric == metric)
    }
}

/// `v` divided by the first of `steps` (threshold, prefix; largest first) that `|v|` reaches,
/// with that prefix; `(v, below)` under them all.
fn scaled(v: f64, steps: [(f64, &'static str); 3], below: &'static str) -> (f64, &'static str) {
    steps
        .iter()
        .find(|(t, _)| v.abs() >= *t)
        .map_or((v, below), |&(t, p)| (v / t, p))
}

/// A value with its unit, scaled for reading (`12.3 M events/s`, `84 ns`).
pub fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return format!("- {unit}");
    }
    if unit == "ns" {
        // Latencies in the unit a reader takes in at a glance.
        let (x, u) = scaled(v, [(1e9, "s"), (1e6, "ms"), (1e3, "µs")], "ns");
        let digits = if x.abs() >= 100.0 || x == x.trunc() {
            0
        } else if x.abs() >= 10.0 {
            1
        } else {
            2
        };
        return format!("{x:.digits$} {u}");
    }
    let (x, p) = if unit.ends_with("/s") {
        scaled(v, [(1e9, "G "), (1e6, "M "), (1e3, "k ")], "")
    } else {
        (v, "")
    };
    let digits = if x.abs() >= 100.0 || x == x.trunc() {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$} {p}{unit}")
}

/// Reads `summary.json` from a result folder.
///
/// # Errors
/// When the file is missing, is not JSON, or has a schema older than
/// [`OLDEST_READABLE_SCHEMA`] or newer than [`SCHEMA`].
pub fn read_summary(dir: &std::path::Path) -> Result<Summary, String> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let s: Summary = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a summary: {e}", path.display()))?;
    if !(OLDEST_READABLE_SCHEMA..=SCHEMA).contains(&s.schema) {
        return Err(format!(
            "{} has schema {}, this harness reads schemas {OLDEST_READABLE_SCHEMA} to {SCHEMA}",
            path.display(),
            s.schema,
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_scale() {
        assert_eq!(fmt_value(12_345_678.0, "events/s"), "12.3 M events/s");
        assert_eq!(fmt_value(84.0, "ns"), "84 ns");
        assert_eq!(fmt_value(12_500.0, "ns"), "12.5 µs");
        assert_eq!(fmt_value(3_210_000.0, "ns"), "3.21 ms");
        assert_eq!(fmt_value(2e9, "ns"), "2 s");
        assert_eq!(fmt_value(0.5, "allocs/event"), "0.50 allocs/event");
    }
}
