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
        pairs: None,
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
pub fn aggregate<'a>(runs: &'a [RunRecord]) -> Vec<SummaryRecord> {
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
        // Per-run figures in run (round) order; a run without this metric, or whose check
        // failed, is `None`, so that index r is round r for every record.
        // This metric of run `r`, if the run's check passed.
        let of_ok_run = |r: &'a RunRecord| -> Option<&'a Measure> {
            r.metrics
                .iter()
                .find(|m| m.metric == name)
                .filter(|_| r.ok())
        };
        let per_run: Vec<Option<f64>> = runs
            .iter()
            .map(|r| of_ok_run(r).map(|m| m.value).filter(|v| v.is_finite()))
            .collect();
        let hists: Vec<Histogram<u64>> = ms
            .iter()
            .filter_map(|m| m.hist.as_deref().map(decode))
            .collect();
        let percentiles = (!hists.is_empty()).then(|| percentiles(&merge(&hists)));
        let pairs: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| {
                of_ok_run(r)
                    .and_then(|m| m.pairs.clone())
                    .unwrap_or_default()
            })
            .collect();
        let pairs = if pairs.iter().all(Vec::is_empty) {
            Vec::new()
        } else {
            pairs
        };
        rows.push(SummaryRecord {
            id: first.id.clone(),
            metric: name.to_string(),
            unit: ms[0].unit.clone(),
            median: median(&values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
            values: per_run,
            pairs,
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

/// Seed of every bootstrap: results are reproducible from the figures alone.
pub const BOOTSTRAP_SEED: u64 = 0x5eed_1ab5_7a75_0001;
/// Resamples per bootstrap interval.
pub const BOOTSTRAP_REPS: usize = 4000;

/// A small deterministic generator (xorshift64*) for the bootstrap.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced by a fixed non-zero seed).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 { BOOTSTRAP_SEED } else { seed })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A uniform index below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) % n as u64) as usize
    }
}

/// The `q` quantile (0..=1) of sorted `s` by linear interpolation.
fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    if s.is_empty() {
        return f64::NAN;
    }
    let pos = q * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// Percentile-bootstrap interval (`level`, e.g. 0.95) of the median of `v`: `v` resampled with
/// replacement [`BOOTSTRAP_REPS`] times. `None` with fewer than 2 values (no spread to
/// resample: one round cannot decide anything).
pub fn bootstrap_median_ci(v: &[f64], level: f64) -> Option<(f64, f64)> {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let mut rng = Rng::new(BOOTSTRAP_SEED ^ v.len() as u64);
    let mut meds = Vec::with_capacity(BOOTSTRAP_REPS);
    let mut buf = vec![0.0; v.len()];
    for _ in 0..BOOTSTRAP_REPS {
        for b in buf.iter_mut() {
            *b = v[rng.below(v.len())];
        }
        meds.push(median(&buf));
    }
    meds.sort_by(f64::total_cmp);
    let a = (1.0 - level) / 2.0;
    Some((quantile_sorted(&meds, a), quantile_sorted(&meds, 1.0 - a)))
}

/// Percentile-bootstrap interval of `median(b) / median(a)` for two independent samples (each
/// resampled on its own). `None` when either has fewer than 2 values.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], level: f64) -> Option<(f64, f64)> {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mut rng = Rng::new(BOOTSTRAP_SEED ^ ((a.len() as u64) << 32 | b.len() as u64));
    let (mut ba, mut bb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_REPS);
    for _ in 0..BOOTSTRAP_REPS {
        for x in ba.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in bb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        let (ma, mb) = (median(&ba), median(&bb));
        if ma != 0.0 {
            ratios.push(mb / ma);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let q = (1.0 - level) / 2.0;
    Some((
        quantile_sorted(&ratios, q),
        quantile_sorted(&ratios, 1.0 - q),
    ))
}

/// Largest number of label arrangements the exact Mann–Whitney test enumerates; above it the
/// normal approximation (with tie correction) is used.
pub const MW_EXACT_MAX: u64 = 200_000;

/// Two-sided p-value of the Mann–Whitney U test (Wilcoxon rank-sum) that `a` and `b` come from
/// the same distribution. Exact (every assignment of the pooled midranks to the two groups
/// enumerated) when there are at most [`MW_EXACT_MAX`] assignments, otherwise the normal
/// approximation with tie correction. `1.0` when either sample is empty.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return 1.0;
    }
    // Midranks of the pooled sample.
    let mut pooled: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = n + m;
    let mut ranks = vec![0.0; total];
    let mut ties = 0.0;
    let mut i = 0;
    while i < total {
        let mut j = i;
        while j + 1 < total && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for k in ranks.iter_mut().take(j + 1).skip(i) {
            *k = r;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let r_a: f64 = (0..total)
        .filter(|&k| pooled[k].1 == 0)
        .map(|k| ranks[k])
        .sum();
    let mean = n as f64 * (total as f64 + 1.0) / 2.0;
    let observed = (r_a - mean).abs();
    if binomial(total as u64, n as u64) <= MW_EXACT_MAX {
        // Count the assignments of n of the pooled ranks to group a at least as extreme.
        let (mut extreme, mut all) = (0u64, 0u64);
        let mut pick = Vec::with_capacity(n);
        enumerate(&ranks, n, 0, &mut pick, &mut |sum| {
            all += 1;
            if (sum - mean).abs() >= observed - 1e-9 {
                extreme += 1;
            }
        });
        return extreme as f64 / all as f64;
    }
    let (nf, mf, tf) = (n as f64, m as f64, total as f64);
    let var = nf * mf / 12.0 * ((tf + 1.0) - ties / (tf * (tf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = (observed - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_sf(z)).min(1.0)
}

fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    let mut r: u64 = 1;
    for i in 0..k {
        r = r.saturating_mul(n - i) / (i + 1);
        if r > MW_EXACT_MAX * 4 {
            return u64::MAX;
        }
    }
    r
}

fn enumerate(ranks: &[f64], k: usize, from: usize, pick: &mut Vec<f64>, f: &mut impl FnMut(f64)) {
    if pick.len() == k {
        f(pick.iter().sum());
        return;
    }
    let need = k - pick.len();
    for i in from..=ranks.len() - need {
        pick.push(ranks[i]);
        enumerate(ranks, k, i + 1, pick, f);
        pick.pop();
    }
}

/// Upper tail of the standard normal distribution (Abramowitz–Stegun 7.1.26, error < 1.5e-7).
fn normal_sf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
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

#[cfg(test)]
mod inference_tests {
    use super::*;

    #[test]
    fn bootstrap_interval_holds_the_median_and_needs_two_values() {
        let v = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98];
        let (lo, hi) = bootstrap_median_ci(&v, 0.95).unwrap();
        assert!(lo <= 1.0 && 1.0 <= hi, "{lo}..{hi}");
        assert!(lo >= 0.9 && hi <= 1.1, "{lo}..{hi}");
        // Wide data give a wider interval than tight data.
        let wide = [0.5, 1.5, 0.7, 1.3, 1.0, 0.6, 1.4];
        let (wl, wh) = bootstrap_median_ci(&wide, 0.95).unwrap();
        assert!(wh - wl > hi - lo, "{wl}..{wh} vs {lo}..{hi}");
        assert!(bootstrap_median_ci(&[1.0], 0.95).is_none());
        assert!(bootstrap_median_ci(&[], 0.95).is_none());
        // Deterministic: same input, same interval.
        assert_eq!(bootstrap_median_ci(&v, 0.95), bootstrap_median_ci(&v, 0.95));
    }

    #[test]
    fn bootstrap_ratio_interval_excludes_one_only_for_a_clear_change() {
        let a = [100.0, 102.0, 98.0, 101.0, 99.0];
        let same = [101.0, 99.0, 100.0, 98.5, 102.0];
        let (lo, hi) = bootstrap_ratio_ci(&a, &same, 0.95).unwrap();
        assert!(lo < 1.0 && 1.0 < hi, "{lo}..{hi}");
        let faster = [130.0, 128.0, 131.0, 129.0, 132.0];
        let (lo, hi) = bootstrap_ratio_ci(&a, &faster, 0.95).unwrap();
        assert!(lo > 1.2 && hi < 1.4, "{lo}..{hi}");
    }

    #[test]
    fn mann_whitney_exact_values_and_normal_tail() {
        // Complete separation of 5 vs 5: the exact two-sided p is 2 / C(10,5) = 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
        // Interleaved samples: no evidence.
        let c = [1.0, 3.0, 5.0, 7.0, 9.0];
        let d = [2.0, 4.0, 6.0, 8.0, 10.0];
        assert!(mann_whitney_p(&c, &d) > 0.5);
        // All tied: p = 1.
        assert_eq!(mann_whitney_p(&[1.0; 4], &[1.0; 4]), 1.0);
        assert_eq!(mann_whitney_p(&[], &[1.0]), 1.0);
        // Large samples take the normal approximation: a clear shift is tiny, none is large.
        let big_a: Vec<f64> = (0..40).map(f64::from).collect();
        let big_b: Vec<f64> = (0..40).map(|x| f64::from(x) + 30.0).collect();
        assert!(mann_whitney_p(&big_a, &big_b) < 1e-6);
        assert!(mann_whitney_p(&big_a, &big_a) > 0.9);
        assert!((normal_sf(0.0) - 0.5).abs() < 1e-6);
        assert!((normal_sf(1.959_964) - 0.025).abs() < 1e-5);
    }
}
