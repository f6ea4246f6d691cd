//! `report.md`: every headline with its ratio to the baselines of the same run, every target of
//! BENCHMARKS.md with its measured ratio and verdict, the warnings, the placement and the plots.
//!
//! Ratios, not absolute figures, are what survive a noisy or shared machine; the report says on
//! what machine it was measured at the top, and the targets use medians over runs.

use crate::env::Env;
use crate::output::fmt_value;
use crate::record::{Summary, SummaryRecord};
use std::fmt::Write as _;

/// A target's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The measured value meets the target.
    Met,
    /// It does not.
    NotMet,
    /// A record it needs is missing (filtered out) or failed its checks.
    NotMeasured(String),
}

impl Verdict {
    /// `MET`, `NOT MET`, `NOT MEASURED (...)`.
    pub fn label(&self) -> String {
        match self {
            Verdict::Met => "MET".into(),
            Verdict::NotMet => "NOT MET".into(),
            Verdict::NotMeasured(why) => format!("NOT MEASURED ({why})"),
        }
    }
}

/// One target of BENCHMARKS.md, evaluated.
#[derive(Clone, Debug)]
pub struct TargetResult {
    /// The target as BENCHMARKS.md states it.
    pub target: String,
    /// What was measured (values and ratio).
    pub measured: String,
    /// The ratio compared with the threshold (or the value for absolute targets).
    pub ratio: Option<f64>,
    /// Outcome.
    pub verdict: Verdict,
}

fn usable<'a>(s: &'a Summary, id: &str, metric: &str) -> Result<&'a SummaryRecord, String> {
    match s.get(id, metric) {
        None => Err(format!("{id} not run")),
        Some(r) if r.checks != "ok" => Err(format!("{id} failed its checks")),
        Some(r) if !r.median.is_finite() => Err(format!("{id} has no value")),
        Some(r) => Ok(r),
    }
}

/// `value / base >= at_least` (throughput) or `value / base <= at_most` (latency).
fn ratio_target(
    s: &Summary,
    target: &str,
    id: &str,
    base: &str,
    metric: &str,
    threshold: f64,
    higher: bool,
) -> TargetResult {
    match (usable(s, id, metric), usable(s, base, metric)) {
        (Ok(a), Ok(b)) => {
            let ratio = if b.median != 0.0 {
                a.median / b.median
            } else {
                f64::INFINITY
            };
            let met = if higher {
                ratio >= threshold
            } else {
                ratio <= threshold
            };
            TargetResult {
                target: target.into(),
                measured: format!(
                    "{} / {} = **{ratio:.2}x**",
                    fmt_value(a.median, &a.unit),
                    fmt_value(b.median, &b.unit)
                ),
                ratio: Some(ratio),
                verdict: if met { Verdict::Met } else { Verdict::NotMet },
            }
        }
        (Err(e), _) | (_, Err(e)) => TargetResult {
            target: target.into(),
            measured: "-".into(),
            ratio: None,
            verdict: Verdict::NotMeasured(e),
        },
    }
}

/// Evaluates every target of BENCHMARKS.md against `s`.
pub fn targets(s: &Summary) -> Vec<TargetResult> {
    let mut t = Vec::new();
    t.push(match usable(s, "route/dispatch", "throughput") {
        Ok(r) => TargetResult {
            target: "route/dispatch >= 100 M events/s on one core".into(),
            measured: format!(
                "{} = **{:.2}x** the 100 M/s target",
                fmt_value(r.median, &r.unit),
                r.median / 1e8
            ),
            ratio: Some(r.median / 1e8),
            verdict: if r.median >= 1e8 {
                Verdict::Met
            } else {
                Verdict::NotMet
            },
        },
        Err(e) => TargetResult {
            target: "route/dispatch >= 100 M events/s on one core".into(),
            measured: "-".into(),
            ratio: None,
            verdict: Verdict::NotMeasured(e),
        },
    });
    t.push(ratio_target(
        s,
        "route/dispatch >= 5x route/crossbeam-channel",
        "route/dispatch",
        "route/crossbeam-channel",
        "throughput",
        5.0,
        true,
    ));
    t.push(ratio_target(
        s,
        "pingpong/engine one-way p50 <= 2.5x calibration/cacheline-pingpong p50",
        "pingpong/engine",
        "calibration/cacheline-pingpong",
        "latency_one_way",
        2.5,
        false,
    ));
    t.push(ratio_target(
        s,
        "stream/1to1/engine >= 1.5x stream/1to1/crossbeam-channel",
        "stream/1to1/engine",
        "stream/1to1/crossbeam-channel",
        "throughput",
        1.5,
        true,
    ));
    let mut ns: Vec<usize> = s
        .records
        .iter()
        .filter_map(|r| {
            r.id.strip_prefix("stream/")?
                .strip_suffix("to1/engine")?
                .parse()
                .ok()
        })
        .filter(|&n| n > 1)
        .collect();
    ns.sort_unstable();
    ns.dedup();
    if ns.is_empty() {
        ns.push(2);
    }
    for n in ns {
        t.push(ratio_target(
            s,
            &format!("stream/{n}to1/engine >= 1.0x stream/{n}to1/crossbeam-channel"),
            &format!("stream/{n}to1/engine"),
            &format!("stream/{n}to1/crossbeam-channel"),
            "throughput",
            1.0,
            true,
        ));
    }
    for path in ["route", "send", "channel"] {
        let id = format!("alloc/{path}");
        let target = format!("{id}: 0 allocations per event");
        t.push(match usable(s, &id, "allocs_per_event") {
            Ok(r) => TargetResult {
                target,
                measured: format!(
                    "**{:.4}** allocs/event (max over runs {:.4})",
                    r.median, r.max
                ),
                ratio: Some(r.max),
                verdict: if r.max == 0.0 {
                    Verdict::Met
                } else {
                    Verdict::NotMet
                },
            },
            Err(e) => TargetResult {
                target,
                measured: "-".into(),
                ratio: None,
                verdict: Verdict::NotMeasured(e),
            },
        });
    }
    t
}

/// The baselines an engine record is compared with in the headline table.
pub fn baselines_of(id: &str) -> Vec<String> {
    if id == "route/dispatch" {
        return vec!["route/crossbeam-channel".into()];
    }
    if id == "pingpong/engine" || id == "pingpong/engine-park" {
        return vec![
            "calibration/cacheline-pingpong".into(),
            "pingpong/crossbeam-channel".into(),
        ];
    }
    if let Some(prefix) = id.strip_suffix("/engine") {
        if prefix.starts_with("stream/") {
            return ["crossbeam-channel", "std-mpsc", "arrayqueue"]
                .iter()
                .map(|b| format!("{prefix}/{b}"))
                .collect();
        }
    }
    Vec::new()
}

/// Metrics that have a baseline twin (the headline figures of a scenario).
const COMPARED_METRICS: [&str; 3] = ["throughput", "ns_per_event", "latency_one_way"];

fn vs_baselines(s: &Summary, r: &SummaryRecord) -> String {
    if !COMPARED_METRICS.contains(&r.metric.as_str()) {
        return String::new();
    }
    let mut parts = Vec::new();
    for b in baselines_of(&r.id) {
        if let Some(base) = s.get(&b, &r.metric) {
            if base.checks == "ok" && base.median != 0.0 && r.checks == "ok" {
                let short = b.rsplit('/').next().unwrap_or(&b);
                parts.push(format!("{:.2}x {short}", r.median / base.median));
            }
        }
    }
    parts.join(", ")
}

fn commit_line(env: &Env) -> String {
    format!(
        "{}{}",
        env.git_commit.get(..12).unwrap_or(&env.git_commit),
        if env.git_dirty { " (dirty)" } else { "" }
    )
}

/// Renders `report.md`. `plots` are the SVG file names written next to it, with titles.
pub fn render(
    env: &Env,
    s: &Summary,
    scenario_warnings: &[String],
    plots: &[(String, String)],
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmark report: {}\n", env.label);
    let _ = writeln!(
        md,
        "Measured {} on **{}**: {} ({} logical CPUs, usable cores {}; virtualisation: vm `{}`, container `{}`, hypervisor flag {}; governor `{}`), kernel {}.\n",
        env.captured_at,
        env.label,
        env.cpu_model,
        env.logical_cpus,
        crate::pin::join(&env.affinity_cores),
        env.virt_vm,
        env.virt_container,
        env.hypervisor_flag,
        env.governor,
        env.kernel.split_whitespace().next().unwrap_or("")
    );
    let _ = writeln!(
        md,
        "Commit `{}`, mode `{}`, {} run(s) per scenario (each a fresh process, warm-up discarded), pinning plan `{}` -> cores {} ({}), {}, {}, profile `{}` (opt-level {}).\n",
        commit_line(env),
        env.mode,
        env.runs,
        env.pin_plan,
        crate::pin::join(&env.core_map.cores),
        if env.core_map.pinned { "pinned" } else { "not pinned" },
        env.rustc,
        env.allocator,
        env.build.profile,
        env.build.opt_level
    );
    if crate::env::virtualised(env) {
        let _ = writeln!(
            md,
            "> These figures were measured on a virtual machine ({}). Its vCPUs are shared with other guests, so absolute numbers are noisy and low; the ratios between the engine and the baselines measured in the same run, on the same cores, are the figures to read.\n",
            env.label
        );
    }
    let failed: Vec<&SummaryRecord> = s.records.iter().filter(|r| r.checks != "ok").collect();
    if failed.is_empty() {
        let _ = writeln!(
            md,
            "Every scenario checked its own result (counts, per-sender order, checksums): **all {} records ok**.\n",
            s.records.len()
        );
    } else {
        let _ = writeln!(md, "**{} record(s) FAILED their checks:**\n", failed.len());
        for r in &failed {
            let _ = writeln!(md, "- `{}` {}: {}", r.id, r.metric, r.checks);
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Targets (BENCHMARKS.md)\n");
    let _ = writeln!(md, "| target | measured (median over runs) | verdict |");
    let _ = writeln!(md, "|---|---|---|");
    for t in targets(s) {
        let _ = writeln!(
            md,
            "| {} | {} | **{}** |",
            t.target,
            t.measured,
            t.verdict.label()
        );
    }
    md.push('\n');

    let _ = writeln!(md, "## Headlines\n");
    let _ = writeln!(
        md,
        "Median, min and max are over runs; \"vs baselines\" is this record's median divided by the baseline's median for the same metric in this run (throughput: higher is better; latency: lower is better).\n"
    );
    let _ = writeln!(
        md,
        "| id | metric | median | min .. max | runs | vs baselines | checks |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for r in &s.records {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} .. {} | {} | {} | {} |",
            r.id,
            r.metric,
            fmt_value(r.median, &r.unit),
            fmt_value(r.min, &r.unit),
            fmt_value(r.max, &r.unit),
            r.runs,
            vs_baselines(s, r),
            if r.checks == "ok" { "ok" } else { "**FAILED**" }
        );
    }
    md.push('\n');

    let lat: Vec<&SummaryRecord> = s
        .records
        .iter()
        .filter(|r| r.percentiles.is_some())
        .collect();
    if !lat.is_empty() {
        let _ = writeln!(
            md,
            "## Latency percentiles (ns, histograms merged over runs)\n"
        );
        let _ = writeln!(
            md,
            "| id | metric | p50 | p90 | p99 | p99.9 | max | distribution |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for r in lat {
            let p = r.percentiles.as_ref().expect("filtered");
            let _ = writeln!(
                md,
                "| `{}` | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
                r.id,
                r.metric,
                p.p50,
                p.p90,
                p.p99,
                p.p99_9,
                p.max,
                r.hgrm
                    .as_ref()
                    .map_or(String::new(), |h| format!("[{h}]({h})"))
            );
        }
        md.push('\n');
    }

    if !plots.is_empty() {
        let _ = writeln!(md, "## Plots\n");
        for (file, title) in plots {
            let _ = writeln!(md, "### {title}\n\n![{title}]({file})\n");
        }
    }

    let _ = writeln!(md, "## Warnings\n");
    if env.warnings.is_empty() && scenario_warnings.is_empty() {
        let _ = writeln!(md, "None.\n");
    } else {
        for w in env.warnings.iter().chain(scenario_warnings) {
            let _ = writeln!(md, "- {w}");
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Placement (first run of each scenario)\n");
    let _ = writeln!(
        md,
        "`role@planned core(seen cores)`; the harness pins each measured thread, checks `sched_getcpu()` and `/proc/thread-self/stat` after pinning and at the end, and warns above on any mismatch. SMT siblings: {}.\n",
        if env.smt_siblings.is_empty() {
            "unknown".to_string()
        } else {
            env.smt_siblings.join("; ")
        }
    );
    let _ = writeln!(md, "| id | threads |");
    let _ = writeln!(md, "|---|---|");
    let mut seen = Vec::new();
    for r in &s.records {
        if seen.contains(&r.id) {
            continue;
        }
        seen.push(r.id.clone());
        let _ = writeln!(md, "| `{}` | {} |", r.id, r.placement);
    }
    md.push('\n');

    let _ = writeln!(md, "## How to read this\n");
    let _ = writeln!(
        md,
        "- `summary.json` / `summary.csv` hold every row above; `runs.json` every run's raw record (parameters, placement, notes); `env.json` the machine and build.\n\
         - `.hgrm` files are HdrHistogram percentile distributions (values in ns), readable by HdrHistogram's plotter.\n\
         - Open-loop latencies are given twice: *corrected* from each event's intended send time (includes the queueing a stalled system imposes on later events) and *uncorrected* from its actual send time (coordinated omission).\n\
         - `harness compare A B` prints B/A per record and calls a change real only when the two folders' min..max ranges do not overlap.\n\
         - Units: events/s and ns are per event; `allocs/event` counts every allocation in the process during a steady-state window, divided by the events in it."
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Better, SCHEMA};

    fn row(id: &str, metric: &str, median: f64, checks: &str) -> SummaryRecord {
        SummaryRecord {
            id: id.into(),
            metric: metric.into(),
            unit: if metric == "throughput" {
                "events/s".into()
            } else {
                "ns".into()
            },
            median,
            min: median,
            max: median,
            runs: 1,
            percentiles: None,
            checks: checks.into(),
            better: Better::Higher,
            placement: String::new(),
            hgrm: None,
        }
    }

    #[test]
    fn targets_compute_ratios_and_verdicts() {
        let s = Summary {
            schema: SCHEMA,
            records: vec![
                row("route/dispatch", "throughput", 150e6, "ok"),
                row("route/crossbeam-channel", "throughput", 50e6, "ok"),
                row("pingpong/engine", "latency_one_way", 200.0, "ok"),
                row(
                    "calibration/cacheline-pingpong",
                    "latency_one_way",
                    100.0,
                    "ok",
                ),
                row("stream/1to1/engine", "throughput", 10e6, "ok"),
                row("stream/1to1/crossbeam-channel", "throughput", 10e6, "ok"),
                row("stream/2to1/engine", "throughput", 10e6, "failed: lost 1"),
                row("stream/2to1/crossbeam-channel", "throughput", 10e6, "ok"),
                row("alloc/route", "allocs_per_event", 0.0, "ok"),
                row("alloc/send", "allocs_per_event", 0.5, "ok"),
            ],
        };
        let t = targets(&s);
        let get = |p: &str| t.iter().find(|x| x.target.starts_with(p)).unwrap();
        assert_eq!(get("route/dispatch >= 100").verdict, Verdict::Met);
        let r = get("route/dispatch >= 5x");
        assert_eq!(r.verdict, Verdict::NotMet);
        assert!((r.ratio.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(get("pingpong/engine").verdict, Verdict::Met);
        assert_eq!(get("stream/1to1").verdict, Verdict::NotMet);
        assert!(matches!(
            get("stream/2to1").verdict,
            Verdict::NotMeasured(_)
        ));
        assert_eq!(get("alloc/route").verdict, Verdict::Met);
        assert_eq!(get("alloc/send").verdict, Verdict::NotMet);
        assert!(matches!(
            get("alloc/channel").verdict,
            Verdict::NotMeasured(_)
        ));
    }

    #[test]
    fn baselines_pair_engine_with_twins() {
        assert_eq!(
            baselines_of("route/dispatch"),
            vec!["route/crossbeam-channel"]
        );
        assert!(baselines_of("stream/3to1/engine")
            .contains(&"stream/3to1/crossbeam-channel".to_string()));
        assert!(baselines_of("stream/1to1/crossbeam-channel").is_empty());
    }
}
