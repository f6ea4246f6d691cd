//! Writes a result folder: `env.json`, `summary.json`, `summary.csv`, `runs.json` (every run's
//! record, histograms left out), one `.hgrm` per latency record (merged over threads and runs),
//! the SVG plots and `report.md`.

use crate::record::{RunRecord, Summary, SummaryRecord};
use crate::{plots, report, stats};
use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// Everything a finished run produced, as written into the result folder.
pub struct RunResult {
    /// The environment.
    pub env: crate::env::Env,
    /// Summary rows.
    pub summary: Summary,
    /// Every run's record, by scenario id (in run order).
    pub runs: Vec<(String, Vec<RunRecord>)>,
    /// Warnings specific to scenarios (cores, notes, pinning).
    pub scenario_warnings: Vec<String>,
    /// Where it was written.
    pub out: std::path::PathBuf,
}

/// A file-name-safe form of `id` + `metric` (`pingpong_engine.latency_one_way`).
pub fn file_stem(id: &str, metric: &str) -> String {
    let clean = |s: &str| {
        s.replace('@', "_at_")
            .replace('%', "pct")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("{}.{}", clean(id), clean(metric))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `summary.csv`: the rows of `summary.json`, percentiles flattened.
pub fn csv(summary: &Summary) -> String {
    let mut s =
        String::from("id,metric,unit,median,min,max,runs,p50,p90,p99,p99.9,p_max,checks,better\n");
    for r in &summary.records {
        let p = |f: fn(&crate::record::Percentiles) -> f64| {
            r.percentiles
                .as_ref()
                .map_or(String::new(), |p| format!("{}", f(p)))
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.id),
            csv_field(&r.metric),
            csv_field(&r.unit),
            r.median,
            r.min,
            r.max,
            r.runs,
            p(|p| p.p50),
            p(|p| p.p90),
            p(|p| p.p99),
            p(|p| p.p99_9),
            p(|p| p.max),
            csv_field(&r.checks),
            match r.better {
                crate::record::Better::Higher => "higher",
                crate::record::Better::Lower => "lower",
            }
        );
    }
    s
}

fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> io::Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// `rec` without the per-run latency histograms (for `runs.json`).
pub fn without_histograms(rec: &RunRecord) -> RunRecord {
    let mut rec = rec.clone();
    for m in &mut rec.metrics {
        m.hist = None;
    }
    rec
}

/// Writes everything into `r.out`.
///
/// # Errors
/// Any I/O error while writing.
pub fn write_all(r: &RunResult) -> io::Result<()> {
    let dir = &r.out;
    std::fs::create_dir_all(dir)?;
    let mut summary = r.summary.clone();
    // One .hgrm per latency record, merged over runs.
    for row in summary.records.iter_mut() {
        if row.percentiles.is_none() {
            continue;
        }
        let Some(runs) = r.runs.iter().find(|(id, _)| *id == row.id).map(|x| &x.1) else {
            continue;
        };
        if let Some(h) = stats::merged_hist(runs, &row.metric) {
            let name = format!("{}.hgrm", file_stem(&row.id, &row.metric));
            std::fs::write(dir.join(&name), stats::hgrm(&h, 1.0))?;
            row.hgrm = Some(name);
        }
    }
    let mut env = r.env.clone();
    env.warnings.extend(r.scenario_warnings.iter().cloned());
    write_json(&dir.join("env.json"), &env)?;
    write_json(&dir.join("summary.json"), &summary)?;
    std::fs::write(dir.join("summary.csv"), csv(&summary))?;
    // runs.json keeps every run's figures, parameters, placement and notes, but not its latency
    // histogram: those are merged into the .hgrm files, and kept per run they made a quick run's
    // folder many times larger (harness/BENCHMARKS.md, "The harness's own choices").
    let runs: serde_json::Map<String, serde_json::Value> = r
        .runs
        .iter()
        .map(|(id, recs)| {
            let recs: Vec<RunRecord> = recs.iter().map(without_histograms).collect();
            (
                id.clone(),
                serde_json::to_value(recs).unwrap_or(serde_json::Value::Null),
            )
        })
        .collect();
    write_json(&dir.join("runs.json"), &runs)?;
    let plots = plots::write_all(dir, &summary, &r.runs)?;
    let md = report::render(&r.env, &summary, &r.scenario_warnings, &plots);
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// Looks a row up.
pub fn row<'a>(s: &'a Summary, id: &str, metric: &str) -> Option<&'a SummaryRecord> {
    s.get(id, metric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Better, Percentiles, SCHEMA};

    #[test]
    fn stems_are_file_safe() {
        assert_eq!(
            file_stem("openloop/rate", "latency_corrected@50%"),
            "openloop_rate.latency_corrected_at_50pct"
        );
        assert_eq!(
            file_stem("idle/wakeup", "wake[busy-spin]"),
            "idle_wakeup.wake_busy-spin_"
        );
    }

    #[test]
    fn csv_has_a_row_per_record_and_quotes_commas() {
        let s = Summary {
            schema: SCHEMA,
            records: vec![SummaryRecord {
                id: "a/b".into(),
                metric: "latency".into(),
                unit: "ns".into(),
                median: 1.0,
                min: 1.0,
                max: 2.0,
                runs: 3,
                values: vec![Some(1.0), Some(2.0), None],
                pairs: Vec::new(),
                percentiles: Some(Percentiles {
                    p50: 1.0,
                    p90: 2.0,
                    p99: 3.0,
                    p99_9: 4.0,
                    max: 5.0,
                }),
                checks: "failed: lost 1, reordered 2".into(),
                better: Better::Lower,
                placement: String::new(),
                hgrm: None,
            }],
            targets: Vec::new(),
        };
        let text = csv(&s);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[1]
            .starts_with("a/b,latency,ns,1,1,2,3,1,2,3,4,5,\"failed: lost 1, reordered 2\",lower"));
    }
}
