//! `harness compare A B`: what changed between two result folders.
//!
//! Records are matched by `(id, metric)`. The ratio is `B.median / A.median`. A change is called
//! *real* only when it exceeds the spread of the runs: the two folders' `min..max` ranges do not
//! overlap. Everything else is reported as noise, whatever its ratio, because the runs of one
//! folder already disagree by that much. A record measured in a single run has no spread to
//! exceed (its `min..max` is one point), so a change involving one is never called real: it is
//! reported as "spread unknown" (use `--runs 3` or more, or `--quick`/`--full`, to judge it).
//! The direction (better or worse) follows each metric's `better` field.

use crate::output::{fmt_value, read_summary};
use crate::record::{Better, Summary, SummaryRecord};
use std::path::Path;

/// How a record moved from A to B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Outside the spread, in the good direction.
    Better,
    /// Outside the spread, in the bad direction.
    Worse,
    /// Inside the spread of the runs.
    Noise,
    /// A or B has a single run: there is no spread to compare the change with.
    SpreadUnknown,
}

/// Fewest runs a record needs for its `min..max` to count as a spread.
pub const MIN_RUNS_FOR_SPREAD: usize = 2;

/// One matched record.
#[derive(Clone, Debug)]
pub struct Change {
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
    /// Verdict.
    pub verdict: Verdict,
    /// Check status in A and B when either failed.
    pub checks: Option<(String, String)>,
}

/// Whether the ranges `a` and `b` (`min..max`) are disjoint: the change exceeds the spread.
pub fn exceeds_spread(a: &SummaryRecord, b: &SummaryRecord) -> bool {
    b.min > a.max || b.max < a.min
}

/// Matches the records of `a` and `b`; returns the changes and the keys found in only one.
pub fn compare(a: &Summary, b: &Summary) -> (Vec<Change>, Vec<String>, Vec<String>) {
    let mut changes = Vec::new();
    let mut only_a = Vec::new();
    for ra in &a.records {
        let Some(rb) = b.get(&ra.id, &ra.metric) else {
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
        let verdict = if ra.runs < MIN_RUNS_FOR_SPREAD || rb.runs < MIN_RUNS_FOR_SPREAD {
            Verdict::SpreadUnknown
        } else if !exceeds_spread(ra, rb) {
            Verdict::Noise
        } else {
            let up = rb.median > ra.median;
            match (ra.better, up) {
                (Better::Higher, true) | (Better::Lower, false) => Verdict::Better,
                _ => Verdict::Worse,
            }
        };
        let checks = (ra.checks != "ok" || rb.checks != "ok")
            .then(|| (ra.checks.clone(), rb.checks.clone()));
        changes.push(Change {
            id: ra.id.clone(),
            metric: ra.metric.clone(),
            unit: ra.unit.clone(),
            a: ra.median,
            b: rb.median,
            ratio,
            verdict,
            checks,
        });
    }
    let only_b = b
        .records
        .iter()
        .filter(|rb| a.get(&rb.id, &rb.metric).is_none())
        .map(|rb| format!("{} {}", rb.id, rb.metric))
        .collect();
    (changes, only_a, only_b)
}

/// The printed table.
pub fn render(a_name: &str, b_name: &str, a: &Summary, b: &Summary) -> String {
    let (changes, only_a, only_b) = compare(a, b);
    let mut s = format!("A = {a_name}\nB = {b_name}\nratio = B/A of the medians; a change is real only when A and B each have 2+ runs and their min..max ranges (the spread of the runs) do not overlap\n\n");
    s += &format!(
        "{:<36} {:<28} {:>18} {:>18} {:>8}  {}\n",
        "id", "metric", "A", "B", "B/A", "verdict"
    );
    let (mut better, mut worse, mut unknown) = (0, 0, 0);
    for c in &changes {
        let v = match c.verdict {
            Verdict::Better => {
                better += 1;
                "REAL: better"
            }
            Verdict::Worse => {
                worse += 1;
                "REAL: worse"
            }
            Verdict::Noise => "within spread",
            Verdict::SpreadUnknown => {
                unknown += 1;
                "spread unknown (1 run)"
            }
        };
        s += &format!(
            "{:<36} {:<28} {:>18} {:>18} {:>7.3}x  {v}\n",
            c.id,
            c.metric,
            fmt_value(c.a, &c.unit),
            fmt_value(c.b, &c.unit),
            c.ratio
        );
        if let Some((ca, cb)) = &c.checks {
            s += &format!("    checks: A {ca} / B {cb}\n");
        }
    }
    for k in &only_a {
        s += &format!("only in A: {k}\n");
    }
    for k in &only_b {
        s += &format!("only in B: {k}\n");
    }
    s += &format!(
        "\n{} records compared: {better} really better, {worse} really worse, {} within the spread of the runs, {unknown} with a single run (no spread: not judged)\n",
        changes.len(),
        changes.len() - better - worse - unknown
    );
    s
}

/// `harness compare A B`: prints the table; exit code 2 when a folder cannot be read.
pub fn run(a: &Path, b: &Path) -> i32 {
    let (sa, sb) = match (read_summary(a), read_summary(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return crate::runner::EXIT_USAGE;
        }
    };
    print!(
        "{}",
        render(&a.display().to_string(), &b.display().to_string(), &sa, &sb)
    );
    crate::runner::EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SCHEMA;

    fn r(id: &str, med: f64, min: f64, max: f64, better: Better) -> SummaryRecord {
        SummaryRecord {
            id: id.into(),
            metric: "m".into(),
            unit: "ns".into(),
            median: med,
            min,
            max,
            runs: 3,
            percentiles: None,
            checks: "ok".into(),
            better,
            placement: String::new(),
            hgrm: None,
        }
    }

    fn s(records: Vec<SummaryRecord>) -> Summary {
        Summary {
            schema: SCHEMA,
            records,
        }
    }

    #[test]
    fn overlapping_ranges_are_noise_disjoint_ranges_are_real() {
        let a = s(vec![
            r("thr", 100.0, 90.0, 110.0, Better::Higher),
            r("lat", 100.0, 95.0, 105.0, Better::Lower),
            r("gone", 1.0, 1.0, 1.0, Better::Lower),
        ]);
        let b = s(vec![
            r("thr", 108.0, 105.0, 130.0, Better::Higher),
            r("lat", 150.0, 140.0, 160.0, Better::Lower),
            r("new", 1.0, 1.0, 1.0, Better::Lower),
        ]);
        let (c, only_a, only_b) = compare(&a, &b);
        assert_eq!(c[0].verdict, Verdict::Noise);
        assert!((c[0].ratio - 1.08).abs() < 1e-9);
        assert_eq!(c[1].verdict, Verdict::Worse);
        assert!((c[1].ratio - 1.5).abs() < 1e-9);
        assert_eq!(only_a, vec!["gone m"]);
        assert_eq!(only_b, vec!["new m"]);
    }

    #[test]
    fn a_single_run_has_no_spread_and_is_never_called_real() {
        let mut one = r("thr", 100.0, 100.0, 100.0, Better::Higher);
        one.runs = 1;
        let mut other = r("thr", 300.0, 300.0, 300.0, Better::Higher);
        other.runs = 1;
        let (c, _, _) = compare(&s(vec![one.clone()]), &s(vec![other.clone()]));
        assert_eq!(c[0].verdict, Verdict::SpreadUnknown);
        assert!((c[0].ratio - 3.0).abs() < 1e-9);
        // One side with runs is not enough either.
        let many = r("thr", 300.0, 290.0, 310.0, Better::Higher);
        let (c, _, _) = compare(&s(vec![one]), &s(vec![many]));
        assert_eq!(c[0].verdict, Verdict::SpreadUnknown);
        let text = render("a", "b", &s(vec![other.clone()]), &s(vec![other]));
        assert!(text.contains("0 really better, 0 really worse"), "{text}");
        assert!(text.contains("1 with a single run"), "{text}");
    }

    #[test]
    fn faster_throughput_and_lower_latency_are_better() {
        let a = s(vec![
            r("thr", 100.0, 99.0, 101.0, Better::Higher),
            r("lat", 100.0, 99.0, 101.0, Better::Lower),
        ]);
        let b = s(vec![
            r("thr", 200.0, 199.0, 201.0, Better::Higher),
            r("lat", 50.0, 49.0, 51.0, Better::Lower),
        ]);
        let (c, _, _) = compare(&a, &b);
        assert!(c.iter().all(|x| x.verdict == Verdict::Better));
        let text = render("a", "b", &a, &b);
        assert!(text.contains("2.000x"));
        assert!(text.contains("2 really better"));
    }
}
