//! `harness compare A B [--json]`: what changed between two result folders.
//!
//! Three parts:
//! - **Environment**: every field of `env.json` that differs between A and B and that decides
//!   what a figure means (commit and dirty flag, machine label, CPU model, logical CPUs, cores
//!   and pinning, mode, runs, kernel, rustc, virtualisation). Figures from two machines are not
//!   comparable however the tests come out; the differences are printed first.
//! - **Target ratios**: for every target present in both, the median of the per-round ratios
//!   (engine / baseline of the same round) in A and in B. The change is `B / A` of those medians.
//!   Per-round ratios are heavy-tailed (a round that a neighbour's load hits lands several times
//!   off the others: harness/BENCHMARKS.md, "`harness compare A B [--json]`"), so the test is
//!   rank-based: the two-sided Mann–Whitney test of A's per-round ratios
//!   against B's, its p-values adjusted over every target tested (Benjamini–Hochberg, false
//!   discovery rate [`TARGET_ALPHA`]). A change is *real* only when each side has at least
//!   [`MIN_TARGET_ROUNDS`] ratios, the adjusted p is below [`TARGET_ALPHA`] **and** the change
//!   is at least [`MIN_EFFECT`]. A real change in the bad direction is a **regression**. The
//!   bootstrap 95 % interval of the change ([`stats::bootstrap_ratio_ci`]) is printed for the
//!   reader; it does not decide (with 5 rounds a side a single outlying round moves the
//!   bootstrap's median and gave "real" changes between two runs of one commit).
//! - **Absolute figures**: every `(id, metric)` in both. Each gets the two-sided Mann–Whitney
//!   test over the runs' figures; because some 150 records are tested at once, the p-values are
//!   adjusted for multiple comparisons (Benjamini–Hochberg, false discovery rate [`ALPHA`]). A
//!   change is *real* only when the adjusted p-value is below [`ALPHA`] **and** the medians differ
//!   by at least [`MIN_EFFECT`]. With 5 runs a side (quick) the exact test cannot get below
//!   2/252 ≈ 0.008 per record, which the adjustment over ~150 records does not let through: show
//!   an absolute change with more runs (`--runs 10`). Absolute figures move with the machine's
//!   load; they are reported, but only target ratios decide the exit code.
//!
//! Exit code: 0 when no target regressed, [`crate::cli::EXIT_REGRESSION`] (3) when one did, 2
//! when a folder cannot be read. `--json` prints one JSON object ([`Report`]) instead of the
//! table, for CI.

use crate::record::{fmt_value, read_summary, CHANGED_IN_SCHEMA_3};
use crate::record::{Better, Summary, TargetRecord};
use crate::{stats, targets};
use serde::Serialize;
use std::path::Path;

/// Significance level of the Mann–Whitney test on absolute figures. With 5 runs against 5 the
/// exact test reaches it only when the two sets of runs do not overlap at all.
pub const ALPHA: f64 = 0.01;
/// Smallest relative change called real (5 %): below it a change does not matter in practice,
/// whatever the test says.
pub const MIN_EFFECT: f64 = 0.05;

/// Fewest per-round ratios each side needs before a target's change can be called real. With
/// two a side the smallest two-sided Mann–Whitney p is 1/3; with four a side it is 2/70.
pub const MIN_TARGET_ROUNDS: usize = 4;
/// False discovery rate over the target ratios tested together. The targets are a family of
/// their own (they decide the exit code; the absolute records do not): with 5 rounds a side
/// the exact test's smallest p, 2/252 ≈ 0.008, adjusted over the six ratio targets of a quick
/// run is 0.048, so one clearly separated target can still be shown to have moved.
pub const TARGET_ALPHA: f64 = 0.05;
/// Confidence level of the interval on target ratios.
pub const LEVEL: f64 = 0.95;

/// How a figure moved from A to B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A real change in the good direction.
    Better,
    /// A real change in the bad direction.
    Worse,
    /// Not shown to be real.
    NoRealChange,
    /// A or B has fewer than 2 figures: nothing can be shown.
    TooFewRuns,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Better => "REAL: better",
            Verdict::Worse => "REAL: worse",
            Verdict::NoRealChange => "no real change",
            Verdict::TooFewRuns => "too few runs to judge",
        }
    }
}

/// One absolute record in both folders.
#[derive(Clone, Debug, Serialize)]
pub struct RecordChange {
    /// Scenario id.
    pub id: String,
    /// Metric.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// A's median.
    pub a: f64,
    /// B's median.
    pub b: f64,
    /// `b / a`.
    pub ratio: f64,
    /// Mann–Whitney two-sided p-value over the runs' figures.
    pub p_value: f64,
    /// That p-value adjusted over every record compared (Benjamini–Hochberg).
    pub p_adjusted: f64,
    /// Verdict.
    pub verdict: Verdict,
    /// Check status in A and B when either failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<(String, String)>,
}

/// One target in both folders.
#[derive(Clone, Debug, Serialize)]
pub struct TargetChange {
    /// The target.
    pub target: String,
    /// Median per-round ratio in A.
    pub a_ratio: Option<f64>,
    /// Median per-round ratio in B.
    pub b_ratio: Option<f64>,
    /// `b_ratio / a_ratio`.
    pub change: Option<f64>,
    /// Bootstrap 95 % interval of that change (for the reader; the test decides).
    pub ci95: Option<(f64, f64)>,
    /// Two-sided Mann–Whitney p of A's per-round ratios against B's (`None`: not tested).
    pub p_value: Option<f64>,
    /// That p-value adjusted over every target tested (Benjamini–Hochberg).
    pub p_adjusted: Option<f64>,
    /// Verdict of the change (for a bound: never a regression).
    pub verdict: Verdict,
    /// A's verdict of the target.
    pub a_verdict: String,
    /// B's verdict of the target.
    pub b_verdict: String,
    /// Whether this is a regression (a real change in the bad direction of a judged target).
    pub regression: bool,
}

/// One environment field that differs.
#[derive(Clone, Debug, Serialize)]
pub struct EnvDiff {
    /// Field of env.json.
    pub field: String,
    /// Value in A.
    pub a: String,
    /// Value in B.
    pub b: String,
}

/// Everything `compare` found (what `--json` prints).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Folder A.
    pub a: String,
    /// Folder B.
    pub b: String,
    /// Environment differences.
    pub env_diff: Vec<EnvDiff>,
    /// Target ratios.
    pub targets: Vec<TargetChange>,
    /// Absolute records.
    pub records: Vec<RecordChange>,
    /// `id metric` found only in A.
    pub only_a: Vec<String>,
    /// `id metric` found only in B.
    pub only_b: Vec<String>,
    /// Targets that regressed.
    pub regressions: usize,
    /// Real changes among the absolute records.
    pub real_record_changes: usize,
    /// The exit code `compare` returns.
    pub exit_code: i32,
}

fn finite(v: &[Option<f64>]) -> Vec<f64> {
    v.iter()
        .flatten()
        .copied()
        .filter(|x| x.is_finite())
        .collect()
}

fn direction(up: bool, higher_is_better: bool) -> Verdict {
    if up == higher_is_better {
        Verdict::Better
    } else {
        Verdict::Worse
    }
}

/// Compares the absolute records.
pub fn compare_records(a: &Summary, b: &Summary) -> (Vec<RecordChange>, Vec<String>, Vec<String>) {
    let mut changes = Vec::new();
    let mut only_a = Vec::new();
    // A record that changed meaning between the two schemas is not compared (listed as only in
    // each).
    let changed = |metric: &str| {
        a.schema.min(b.schema) < 3
            && a.schema.max(b.schema) >= 3
            && CHANGED_IN_SCHEMA_3.contains(&metric)
    };
    for ra in &a.records {
        let Some(rb) = b.get(&ra.id, &ra.metric).filter(|_| !changed(&ra.metric)) else {
            only_a.push(format!("{} {}", ra.id, ra.metric));
            continue;
        };
        let ratio = if ra.median != 0.0 {
            rb.median / ra.median
        } else if rb.median == 0.0 {
            1.0
        } else {
            f64::INFINITY
        };
        let (va, vb) = (finite(&ra.values), finite(&rb.values));
        let p = stats::mann_whitney_p(&va, &vb);
        // Decided below, once every p-value is known.
        let verdict = if va.len() < 2 || vb.len() < 2 {
            Verdict::TooFewRuns
        } else {
            Verdict::NoRealChange
        };
        let checks = (ra.checks != "ok" || rb.checks != "ok")
            .then(|| (ra.checks.clone(), rb.checks.clone()));
        changes.push(RecordChange {
            id: ra.id.clone(),
            metric: ra.metric.clone(),
            unit: ra.unit.clone(),
            a: ra.median,
            b: rb.median,
            ratio,
            p_value: p,
            p_adjusted: 1.0,
            verdict,
            checks,
        });
    }
    let tested: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].verdict != Verdict::TooFewRuns)
        .collect();
    let adjusted = benjamini_hochberg(
        &tested
            .iter()
            .map(|&i| changes[i].p_value)
            .collect::<Vec<_>>(),
    );
    for (&i, q) in tested.iter().zip(adjusted) {
        let c = &mut changes[i];
        c.p_adjusted = q;
        if q < ALPHA && (c.ratio - 1.0).abs() >= MIN_EFFECT {
            let higher = a
                .get(&c.id, &c.metric)
                .is_some_and(|r| r.better == Better::Higher);
            c.verdict = direction(c.b > c.a, higher);
        }
    }
    let only_b = b
        .records
        .iter()
        .filter(|rb| a.get(&rb.id, &rb.metric).is_none() || changed(&rb.metric))
        .map(|rb| format!("{} {}", rb.id, rb.metric))
        .collect();
    (changes, only_a, only_b)
}

/// Benjamini–Hochberg adjusted p-values (same order as `p`): `min over j >= rank of m/j * p_(j)`,
/// capped at 1.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p[x].total_cmp(&p[y]));
    let mut out = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        out[i] = running.min(1.0);
    }
    out
}

/// A target's change, untested (`verdict` is `TooFewRuns` or `NoRealChange` until
/// [`compare_targets`] has adjusted every p-value).
fn compare_target(ta: &TargetRecord, tb: &TargetRecord) -> TargetChange {
    let change = match (ta.median, tb.median) {
        (Some(x), Some(y)) if x != 0.0 => Some(y / x),
        _ => None,
    };
    let mut p_value = None;
    let verdict = if ta.is_absolute() {
        // Allocations: any run that allocated where none did before is a regression.
        let worst = |t: &TargetRecord| t.ratios.iter().copied().fold(0.0, f64::max);
        if ta.ratios.is_empty() || tb.ratios.is_empty() {
            Verdict::TooFewRuns
        } else if worst(ta) == 0.0 && worst(tb) > 0.0 {
            Verdict::Worse
        } else if worst(ta) > 0.0 && worst(tb) == 0.0 {
            Verdict::Better
        } else {
            Verdict::NoRealChange
        }
    } else if ta.ratios.len() < MIN_TARGET_ROUNDS
        || tb.ratios.len() < MIN_TARGET_ROUNDS
        || change.is_none()
    {
        Verdict::TooFewRuns
    } else {
        p_value = Some(stats::mann_whitney_p(&ta.ratios, &tb.ratios));
        Verdict::NoRealChange
    };
    TargetChange {
        target: ta.target.clone(),
        a_ratio: ta.median,
        b_ratio: tb.median,
        change,
        ci95: stats::bootstrap_ratio_ci(&ta.ratios, &tb.ratios, LEVEL),
        p_value,
        p_adjusted: None,
        verdict,
        a_verdict: ta.verdict.clone(),
        b_verdict: tb.verdict.clone(),
        regression: false,
    }
}

/// Compares the targets present in both: every ratio target with enough rounds is tested, the
/// p-values are adjusted together, and a change is real when its adjusted p is below
/// [`TARGET_ALPHA`] and it is at least [`MIN_EFFECT`].
pub fn compare_targets(a: &Summary, b: &Summary) -> Vec<TargetChange> {
    // (change, higher is better, a bound: reported, never a regression)
    let mut changes: Vec<(TargetChange, bool, bool)> = targets::in_both(a, b)
        .into_iter()
        .map(|(ta, tb)| (compare_target(ta, tb), ta.higher_is_better(), ta.is_bound()))
        .collect();
    let tested: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].0.p_value.is_some())
        .collect();
    let adjusted = benjamini_hochberg(
        &tested
            .iter()
            .filter_map(|&i| changes[i].0.p_value)
            .collect::<Vec<_>>(),
    );
    for (&i, q) in tested.iter().zip(adjusted) {
        let (c, higher_is_better, _) = &mut changes[i];
        c.p_adjusted = Some(q);
        if let Some(ch) = c.change {
            if q < TARGET_ALPHA && (ch - 1.0).abs() >= MIN_EFFECT {
                c.verdict = direction(ch > 1.0, *higher_is_better);
            }
        }
    }
    changes
        .into_iter()
        .map(|(mut c, _, bound)| {
            c.regression = c.verdict == Verdict::Worse && !bound;
            c
        })
        .collect()
}

/// The `env.json` fields that differ (missing files count as empty).
pub fn env_diff(a: &serde_json::Value, b: &serde_json::Value) -> Vec<EnvDiff> {
    const FIELDS: [&str; 14] = [
        "git_commit",
        "git_dirty",
        "label",
        "hostname",
        "cpu_model",
        "logical_cpus",
        "affinity_cores",
        "core_map",
        "mode",
        "runs",
        "kernel",
        "rustc",
        "virt_vm",
        "allocator",
    ];
    let show = |v: Option<&serde_json::Value>| match v {
        None => "(absent)".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    FIELDS
        .iter()
        .filter_map(|f| {
            let (x, y) = (a.get(*f), b.get(*f));
            (x != y).then(|| EnvDiff {
                field: (*f).to_string(),
                a: show(x),
                b: show(y),
            })
        })
        .collect()
}

fn read_env(dir: &Path) -> serde_json::Value {
    std::fs::read_to_string(dir.join("env.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Builds the whole comparison.
pub fn build(
    a_name: &str,
    b_name: &str,
    a: &Summary,
    b: &Summary,
    env_a: &serde_json::Value,
    env_b: &serde_json::Value,
) -> Report {
    let (records, only_a, only_b) = compare_records(a, b);
    let targets = compare_targets(a, b);
    let regressions = targets.iter().filter(|t| t.regression).count();
    let real_record_changes = records
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Better | Verdict::Worse))
        .count();
    Report {
        a: a_name.into(),
        b: b_name.into(),
        env_diff: env_diff(env_a, env_b),
        targets,
        records,
        only_a,
        only_b,
        regressions,
        real_record_changes,
        exit_code: if regressions > 0 {
            crate::cli::EXIT_REGRESSION
        } else {
            crate::cli::EXIT_OK
        },
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The printed table.
pub fn render(r: &Report) -> String {
    let mut s = format!("A = {}\nB = {}\n\n", r.a, r.b);
    if r.env_diff.is_empty() {
        s += "Environment: same commit, machine, mode and cores.\n\n";
    } else {
        s += "Environment differences (figures from different machines or builds are not comparable):\n";
        for d in &r.env_diff {
            s += &format!("  {:<16} A: {}\n  {:<16} B: {}\n", d.field, d.a, "", d.b);
        }
        s += "\n";
    }
    s += &format!(
        "Target ratios (median of per-round ratios; change = B/A, real when the Mann-Whitney p of A's against B's per-round ratios, adjusted over the targets (Benjamini-Hochberg), is below {TARGET_ALPHA}, each side has {MIN_TARGET_ROUNDS}+ rounds and the change is at least {:.0} %; the bootstrap {:.0} % interval is for the reader):\n",
        MIN_EFFECT * 100.0,
        LEVEL * 100.0
    );
    s += &format!(
        "{:<72} {:>9} {:>9} {:>8} {:>17} {:>8}  {}\n",
        "target", "A", "B", "B/A", "interval", "p adj", "verdict"
    );
    for t in &r.targets {
        s += &format!(
            "{:<72} {:>9} {:>9} {:>8} {:>17} {:>8}  {}{} [A {} / B {}]\n",
            t.target,
            opt(t.a_ratio),
            opt(t.b_ratio),
            opt(t.change),
            t.ci95
                .map_or("-".into(), |(lo, hi)| format!("{lo:.3}..{hi:.3}")),
            t.p_adjusted.map_or("-".into(), |q| format!("{q:.4}")),
            t.verdict.label(),
            if t.regression { " REGRESSION" } else { "" },
            t.a_verdict,
            t.b_verdict
        );
    }
    s += &format!(
        "\nAbsolute figures (ratio = B/A of the medians; real when the Mann-Whitney p, adjusted over all records (Benjamini-Hochberg), is below {ALPHA} and the change is at least {:.0} %):\n",
        MIN_EFFECT * 100.0
    );
    s += &format!(
        "{:<36} {:<28} {:>18} {:>18} {:>8} {:>8} {:>8}  {}\n",
        "id", "metric", "A", "B", "B/A", "p", "p adj", "verdict"
    );
    for c in &r.records {
        s += &format!(
            "{:<36} {:<28} {:>18} {:>18} {:>7.3}x {:>8.4} {:>8.4}  {}\n",
            c.id,
            c.metric,
            fmt_value(c.a, &c.unit),
            fmt_value(c.b, &c.unit),
            c.ratio,
            c.p_value,
            c.p_adjusted,
            c.verdict.label()
        );
        if let Some((ca, cb)) = &c.checks {
            s += &format!("    checks: A {ca} / B {cb}\n");
        }
    }
    for k in &r.only_a {
        s += &format!("only in A: {k}\n");
    }
    for k in &r.only_b {
        s += &format!("only in B: {k}\n");
    }
    s += &format!(
        "\n{} target(s) compared, {} regressed; {} records compared, {} real change(s). Exit code {}.\n",
        r.targets.len(),
        r.regressions,
        r.records.len(),
        r.real_record_changes,
        r.exit_code
    );
    s
}

/// `harness compare A B [--json]`: prints the comparison; returns 0, 3 (a target regressed) or
/// 2 (a folder cannot be read).
pub fn run(a: &Path, b: &Path, json: bool) -> i32 {
    let (sa, sb) = match (read_summary(a), read_summary(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return crate::cli::EXIT_USAGE;
        }
    };
    let r = build(
        &a.display().to_string(),
        &b.display().to_string(),
        &sa,
        &sb,
        &read_env(a),
        &read_env(b),
    );
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r).expect("a comparison serialises")
        );
    } else {
        print!("{}", render(&r));
    }
    r.exit_code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{SummaryRecord, SCHEMA};

    fn r(id: &str, values: &[f64], better: Better) -> SummaryRecord {
        SummaryRecord {
            id: id.into(),
            metric: "m".into(),
            unit: "ns".into(),
            median: stats::median(values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
            values: values.iter().map(|&v| Some(v)).collect(),
            pairs: Vec::new(),
            percentiles: None,
            checks: "ok".into(),
            better,
            placement: String::new(),
            hgrm: None,
        }
    }

    fn t(target: &str, ratios: &[f64]) -> TargetRecord {
        TargetRecord {
            target: target.into(),
            kind: "ratio".into(),
            engine: "e".into(),
            baselines: vec!["b".into()],
            metric: "throughput".into(),
            direction: "at_least".into(),
            threshold: 1.0,
            ratios: ratios.to_vec(),
            fastest: Vec::new(),
            median: Some(stats::median(ratios)),
            ci95: stats::bootstrap_median_ci(ratios, 0.95),
            verdict: "MET".into(),
        }
    }

    fn s(records: Vec<SummaryRecord>, targets: Vec<TargetRecord>) -> Summary {
        Summary {
            schema: SCHEMA,
            records,
            targets,
        }
    }

    #[test]
    fn absolute_changes_need_a_significant_test_and_a_real_effect() {
        let a = s(
            vec![
                r("thr", &[100.0, 90.0, 110.0, 95.0, 105.0], Better::Higher),
                r(
                    "lat",
                    &[100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1],
                    Better::Lower,
                ),
                r(
                    "tiny",
                    &[100.0, 100.1, 100.2, 100.3, 100.4, 100.05, 100.15, 100.25],
                    Better::Higher,
                ),
                r("gone", &[1.0, 1.0], Better::Lower),
            ],
            Vec::new(),
        );
        let b = s(
            vec![
                // Overlapping runs: a 1.29x median ratio is not shown to be real.
                r("thr", &[129.0, 92.0, 140.0, 96.0, 131.0], Better::Higher),
                // Separated and 50 % worse (8 runs a side: exact p = 2/12870).
                r(
                    "lat",
                    &[150.0, 151.0, 149.0, 152.0, 148.0, 150.5, 149.5, 151.5],
                    Better::Lower,
                ),
                // Separated but 1 %: significant, not real in practice.
                r(
                    "tiny",
                    &[101.0, 101.1, 101.2, 101.3, 101.4, 101.05, 101.15, 101.25],
                    Better::Higher,
                ),
                r("new", &[1.0, 1.0], Better::Lower),
            ],
            Vec::new(),
        );
        let (c, only_a, only_b) = compare_records(&a, &b);
        assert_eq!(c[0].verdict, Verdict::NoRealChange, "{:?}", c[0]);
        assert_eq!(c[1].verdict, Verdict::Worse, "{:?}", c[1]);
        assert!(c[1].p_adjusted < ALPHA);
        assert_eq!(c[2].verdict, Verdict::NoRealChange, "{:?}", c[2]);
        assert!(c[2].p_adjusted < ALPHA);
        assert_eq!(only_a, vec!["gone m"]);
        assert_eq!(only_b, vec!["new m"]);
        // One run has no spread: never judged.
        let one = s(vec![r("thr", &[100.0], Better::Higher)], Vec::new());
        let other = s(vec![r("thr", &[300.0], Better::Higher)], Vec::new());
        let (c, _, _) = compare_records(&one, &other);
        assert_eq!(c[0].verdict, Verdict::TooFewRuns);
    }

    #[test]
    fn many_records_at_the_floor_of_a_five_run_test_are_not_called_real() {
        // 5 runs a side, 40 records, 5 of them fully separated by 2x: each has p = 2/252, but
        // over 40 tests that is what chance alone produces now and then; the adjustment keeps
        // them from being called real.
        let mut ra = Vec::new();
        let mut rb = Vec::new();
        for i in 0..40 {
            let id = format!("r{i}");
            ra.push(r(&id, &[10.0, 11.0, 12.0, 13.0, 14.0], Better::Higher));
            if i < 5 {
                rb.push(r(&id, &[20.0, 21.0, 22.0, 23.0, 24.0], Better::Higher));
            } else {
                rb.push(r(&id, &[10.5, 11.5, 12.5, 13.5, 14.5], Better::Higher));
            }
        }
        let (c, _, _) = compare_records(&s(ra, Vec::new()), &s(rb, Vec::new()));
        assert!((c[0].p_value - 2.0 / 252.0).abs() < 1e-12);
        assert!(c[0].p_adjusted > ALPHA, "{:?}", c[0]);
        assert!(c.iter().all(|x| x.verdict == Verdict::NoRealChange));
        let adj = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.2]);
        let want = [0.04, 0.16 / 3.0, 0.16 / 3.0, 0.2];
        for (g, w) in adj.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{adj:?}");
        }
    }

    #[test]
    fn a_target_regression_sets_the_exit_code_and_noise_does_not() {
        let base = [1.30, 1.32, 1.28, 1.31, 1.29];
        let a = s(Vec::new(), vec![t("stream/1to1", &base)]);
        let same = s(
            Vec::new(),
            vec![t("stream/1to1", &[1.31, 1.27, 1.30, 1.33, 1.29])],
        );
        let worse = s(
            Vec::new(),
            vec![t("stream/1to1", &[0.90, 0.92, 0.88, 0.91, 0.89])],
        );
        let better = s(
            Vec::new(),
            vec![t("stream/1to1", &[1.90, 1.92, 1.88, 1.91, 1.89])],
        );
        let null = serde_json::Value::Null;
        // Two rounds a side, every B below every A: chance at that size, not a regression.
        let two_a = s(Vec::new(), vec![t("stream/1to1", &[1.30, 1.32])]);
        let two_b = s(Vec::new(), vec![t("stream/1to1", &[1.10, 1.12])]);
        let r = build("a", "b", &two_a, &two_b, &null, &null);
        assert_eq!(r.targets[0].verdict, Verdict::TooFewRuns);
        assert_eq!(r.exit_code, 0);
        let r = build("a", "b", &a, &same, &null, &null);
        assert_eq!(r.regressions, 0);
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.targets[0].verdict, Verdict::NoRealChange);
        let r = build("a", "b", &a, &worse, &null, &null);
        assert_eq!(r.targets[0].verdict, Verdict::Worse);
        assert_eq!(r.regressions, 1);
        assert_eq!(r.exit_code, crate::cli::EXIT_REGRESSION);
        assert!(render(&r).contains("REGRESSION"));
        let r = build("a", "b", &a, &better, &null, &null);
        assert_eq!(r.targets[0].verdict, Verdict::Better);
        assert_eq!(r.exit_code, 0);
        // A latency target (at most): a higher ratio is the regression.
        let mut la = t("pingpong", &base);
        la.direction = "at_most".into();
        let mut lb = t("pingpong", &[1.90, 1.92, 1.88, 1.91, 1.89]);
        lb.direction = "at_most".into();
        let r = build(
            "a",
            "b",
            &s(Vec::new(), vec![la]),
            &s(Vec::new(), vec![lb]),
            &null,
            &null,
        );
        assert!(r.targets[0].regression);
    }

    /// The committed result folders of two back-to-back quick runs of one commit.
    fn same_commit_pairs() -> Vec<(Summary, Summary)> {
        let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
        ["89fc229", "ab4d822"]
            .iter()
            .map(|c| {
                let dir = |suffix: &str| results.join(format!("2026-12-03-vm2core-{c}{suffix}"));
                (
                    read_summary(&dir("")).expect("committed run A"),
                    read_summary(&dir("-b")).expect("committed run B"),
                )
            })
            .collect()
    }

    #[test]
    fn two_runs_of_one_commit_show_no_real_target_change() {
        // ab4d822 against ab4d822-b: the pingpong target's ratios are 1.69, 5.5, 7.71, 1.83,
        // 1.83 against eleven rounds around 0.55..5.15; one outlying round moved the bootstrap's
        // median, which called the change "REAL: better".
        let null = serde_json::Value::Null;
        for (a, b) in same_commit_pairs() {
            for (x, y) in [(&a, &b), (&b, &a)] {
                let r = build("a", "b", x, y, &null, &null);
                for t in &r.targets {
                    assert!(
                        !matches!(t.verdict, Verdict::Better | Verdict::Worse),
                        "{t:?}"
                    );
                }
                assert_eq!(r.exit_code, crate::cli::EXIT_OK);
                assert!(r.targets.iter().any(|t| t.p_adjusted.is_some()));
            }
        }
    }

    /// Heavy-tailed per-round ratios around `centre`: mostly within a few % of it, one round in
    /// eight hit by a neighbour's load (1.5x..6x off).
    fn heavy_tailed(rng: &mut stats::Rng, centre: f64, rounds: usize) -> Vec<f64> {
        (0..rounds)
            .map(|_| {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let bulk = centre * (0.94 + 0.12 * u);
                if rng.below(8) == 0 {
                    bulk * (1.5 + 4.5 * u)
                } else {
                    bulk
                }
            })
            .collect()
    }

    #[test]
    fn a_known_1_3x_shift_of_heavy_tailed_ratios_is_real_and_no_shift_is_not() {
        let null = serde_json::Value::Null;
        let mut rng = stats::Rng::new(17);
        let (mut found, mut false_alarms) = (0, 0);
        for _ in 0..20 {
            let a = heavy_tailed(&mut rng, 1.0, 10);
            let same = heavy_tailed(&mut rng, 1.0, 10);
            let shifted = heavy_tailed(&mut rng, 1.3, 10);
            let sa = s(Vec::new(), vec![t("stream/1to1", &a), t("route", &a)]);
            let sb = s(
                Vec::new(),
                vec![t("stream/1to1", &shifted), t("route", &same)],
            );
            let r = build("a", "b", &sa, &sb, &null, &null);
            if r.targets[0].verdict == Verdict::Better {
                found += 1;
            }
            if r.targets[1].verdict != Verdict::NoRealChange {
                false_alarms += 1;
            }
        }
        assert!(found >= 18, "the 1.3x shift was found {found} times in 20");
        assert!(false_alarms <= 1, "{false_alarms} false alarms in 20");
        eprintln!("1.3x shift found {found}/20, false alarms {false_alarms}/20");
        // Shifted down: a regression of a judged target.
        let a = heavy_tailed(&mut rng, 1.3, 10);
        let b = heavy_tailed(&mut rng, 1.0, 10);
        let r = build(
            "a",
            "b",
            &s(Vec::new(), vec![t("stream/1to1", &a)]),
            &s(Vec::new(), vec![t("stream/1to1", &b)]),
            &null,
            &null,
        );
        assert!(r.targets[0].regression, "{:?}", r.targets[0]);
        assert_eq!(r.exit_code, crate::cli::EXIT_REGRESSION);
    }

    #[test]
    fn environment_differences_are_listed() {
        let a = serde_json::json!({"git_commit": "abc", "mode": "quick", "cpu_model": "X", "logical_cpus": 2});
        let b = serde_json::json!({"git_commit": "def", "mode": "quick", "cpu_model": "Y", "logical_cpus": 2});
        let d = env_diff(&a, &b);
        let fields: Vec<&str> = d.iter().map(|x| x.field.as_str()).collect();
        assert!(
            fields.contains(&"git_commit") && fields.contains(&"cpu_model"),
            "{fields:?}"
        );
        assert!(!fields.contains(&"mode") && !fields.contains(&"logical_cpus"));
        assert!(env_diff(&a, &a).is_empty());
    }

    #[test]
    fn records_that_changed_meaning_in_schema_3_are_not_paired_with_schema_2() {
        let mut cost = r("stream/1to1/kanal", &[1.0, 2.0, 3.0], Better::Lower);
        cost.metric = "bookkeeping_cost".into();
        let mut tp = cost.clone();
        tp.metric = "throughput".into();
        let old = Summary {
            schema: 2,
            records: vec![cost.clone(), tp.clone()],
            targets: Vec::new(),
        };
        let new = Summary {
            schema: SCHEMA,
            ..old.clone()
        };
        let (changes, only_a, only_b) = compare_records(&old, &new);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].metric, "throughput");
        assert_eq!(only_a, ["stream/1to1/kanal bookkeeping_cost"]);
        assert_eq!(only_b, ["stream/1to1/kanal bookkeeping_cost"]);
        // Same schema: paired as usual.
        let (changes, _, _) = compare_records(&new, &new);
        assert_eq!(changes.len(), 2);
    }
}
