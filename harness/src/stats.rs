//! Histograms, percentiles and the aggregation of runs.
//!
//! Latencies are recorded in nanoseconds into HdrHistograms (3 significant digits, 1 ns to
//! 100 s), one per recording thread; a scenario merges its threads' histograms into one per
//! metric and ships it to the parent as `[value, count]` pairs (lossless for the histogram's
//! precision). The parent merges the runs again for the percentiles of a record, while
//! `median/min/max` of a record are taken over the runs' own figures: the spread of those is
//! what `harness compare` uses to tell a real change from noise.

use crate::record::{Measure, Percentiles, RunRecord, SummaryRecord};
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Highest latency a histogram tracks (100 s, in ns); larger values saturate.
pub const HIST_MAX_NS: u64 = 100_000_000_000;
/// Significant decimal digits kept by every histogram.
pub const HIST_SIGFIG: u8 = 3;

/// A latency histogram with the harness's bounds.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG).expect("static histogram bounds")
}

/// The recorded values of `h` as `[value, count]` pairs (value = highest equivalent value).
pub fn encode(h: &Histogram<u64>) -> Vec<[u64; 2]> {
    h.iter_recorded()
        .map(|v| [v.value_iterated_to(), v.count_at_value()])
        .collect()
}

/// Rebuilds a histogram from [`encode`]'s pairs.
pub fn decode(pairs: &[[u64; 2]]) -> Histogram<u64> {
    let mut h = new_hist();
    for &[v, c] in pairs {
        h.saturating_record_n(v.max(1), c);
    }
    h
}

/// Merges histograms (one per thread, or one per run) into one.
pub fn merge<'a>(hists: impl IntoIterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut out = new_hist();
    for h in hists {
        out.add(h).expect("histograms share bounds");
    }
    out
}

/// A latency measure from a (merged) histogram: value = p50.
pub fn latency_measure(metric: &str, h: &Histogram<u64>) -> Measure {
    Measure {
        metric: metric.into(),
        unit: "ns".into(),
        value: h.value_at_quantile(0.5) as f64,
        better: crate::record::Better::Lower,
        hist: Some(encode(h)),
    }
}

/// The standard percentiles of `h`.
pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    Percentiles {
        p50: h.value_at_quantile(0.5) as f64,
        p90: h.value_at_quantile(0.9) as f64,
        p99: h.value_at_quantile(0.99) as f64,
        p99_9: h.value_at_quantile(0.999) as f64,
        max: h.max() as f64,
    }
}

/// Median of `v` (mean of the two middle values for an even count); `NaN` when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The percentile distribution of `h` in HdrHistogram's text format (`.hgrm`, as written by
/// `outputPercentileDistribution` with 5 ticks per half distance), values divided by `scale`.
pub fn hgrm(h: &Histogram<u64>, scale: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / scale;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:>12.3} {q:>2.12} {total:>10} {:>14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value:>12.3} {q:>2.12} {total:>10}");
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

/// Aggregates the runs of one scenario into summary rows, one per metric, in the order the
/// metrics first appear. A run whose check failed makes every row of the scenario say so.
pub fn aggregate(runs: &[RunRecord]) -> Vec<SummaryRecord> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let checks = runs
        .iter()
        .find(|r| !r.ok())
        .map_or_else(|| "ok".to_string(), |r| r.check.clone());
    let placement = first
        .placement
        .iter()
        .map(|p| p.describe())
        .collect::<Vec<_>>()
        .join(" ");
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for m in &r.metrics {
            if !names.contains(&m.metric.as_str()) {
                names.push(&m.metric);
            }
        }
    }
    let mut rows = Vec::new();
    for name in names {
        let ms: Vec<&Measure> = runs
            .iter()
            .filter_map(|r| r.metrics.iter().find(|m| m.metric == name))
            .collect();
        let values: Vec<f64> = ms.iter().map(|m| m.value).collect();
        let hists: Vec<Histogram<u64>> = ms
            .iter()
            .filter_map(|m| m.hist.as_deref().map(decode))
            .collect();
        let percentiles = (!hists.is_empty()).then(|| percentiles(&merge(&hists)));
        rows.push(SummaryRecord {
            id: first.id.clone(),
            metric: name.to_string(),
            unit: ms[0].unit.clone(),
            median: median(&values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
            percentiles,
            checks: checks.clone(),
            better: ms[0].better,
            placement: placement.clone(),
            hgrm: None,
        });
    }
    rows
}

/// The histogram of `(id, metric)` merged over `runs` (for `.hgrm` files and plots).
pub fn merged_hist(runs: &[RunRecord], metric: &str) -> Option<Histogram<u64>> {
    let hists: Vec<Histogram<u64>> = runs
        .iter()
        .filter_map(|r| r.metrics.iter().find(|m| m.metric == metric))
        .filter_map(|m| m.hist.as_deref().map(decode))
        .collect();
    (!hists.is_empty()).then(|| merge(&hists))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Better, RunRecord};
    use std::collections::BTreeMap;

    fn run(check: &str, v: f64, lat: &[u64]) -> RunRecord {
        let mut h = new_hist();
        for &x in lat {
            h.record(x).unwrap();
        }
        RunRecord {
            id: "x/y".into(),
            check: check.into(),
            metrics: vec![
                Measure::value("throughput", "events/s", v, Better::Higher),
                latency_measure("latency", &h),
            ],
            placement: vec![],
            params: BTreeMap::new(),
            notes: vec![],
            wall_ms: 1.0,
        }
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn encode_decode_roundtrip_keeps_percentiles() {
        let mut h = new_hist();
        for v in 1..=10_000u64 {
            h.record(v * 7).unwrap();
        }
        let back = decode(&encode(&h));
        assert_eq!(back.len(), h.len());
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q={q}");
        }
    }

    #[test]
    fn merge_sums_counts_and_widens_range() {
        let mut a = new_hist();
        let mut b = new_hist();
        a.record(100).unwrap();
        b.record(1_000_000).unwrap();
        b.record(1_000_000).unwrap();
        let m = merge([&a, &b]);
        assert_eq!(m.len(), 3);
        assert_eq!(m.min(), 100);
        assert!(m.value_at_quantile(0.5) >= 999_000);
    }

    #[test]
    fn aggregate_takes_median_min_max_and_merges_histograms() {
        let runs = vec![
            run("ok", 10.0, &[100, 100]),
            run("ok", 30.0, &[200, 200]),
            run("ok", 20.0, &[300, 300]),
        ];
        let rows = aggregate(&runs);
        assert_eq!(rows.len(), 2);
        let t = &rows[0];
        assert_eq!((t.median, t.min, t.max, t.runs), (20.0, 10.0, 30.0, 3));
        assert!(t.percentiles.is_none());
        let l = &rows[1];
        assert_eq!(l.median, 200.0);
        let p = l.percentiles.as_ref().unwrap();
        assert_eq!(p.p50, 200.0);
        assert_eq!(p.max, 300.0);
        assert!(rows.iter().all(|r| r.checks == "ok"));
    }

    #[test]
    fn one_failed_run_fails_every_row() {
        let runs = vec![
            run("ok", 1.0, &[1]),
            run("failed: lost 3 events", 1.0, &[1]),
        ];
        let rows = aggregate(&runs);
        assert!(rows.iter().all(|r| r.checks == "failed: lost 3 events"));
    }

    #[test]
    fn hgrm_has_header_rows_and_footer() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v).unwrap();
        }
        let text = hgrm(&h, 1.0);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("Value") && lines[0].contains("1/(1-Percentile)"));
        assert!(lines[1].is_empty());
        let last_row = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        // The last row is the 100th percentile with the full count and no 1/(1-p) column.
        let cols: Vec<&str> = last_row.split_whitespace().collect();
        assert_eq!(cols.len(), 3, "{last_row}");
        assert_eq!(cols[1].parse::<f64>().unwrap(), 1.0);
        assert_eq!(cols[2], "1000");
        assert!(text.contains("#[Max     =     1000.000, Total count    =         1000]"));
    }
}
