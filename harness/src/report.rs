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
    /// What was measured (the medians the ratio is made of).
    pub measured: String,
    /// The measured ratio (or the value, for absolute targets), from the medians over runs.
    pub ratio: Option<f64>,
    /// The condition the ratio must meet (`>= 5x`, `<= 2.5x`, `= 0`).
    pub required: String,
    /// The ratio's range over runs, worst to best pairing of the runs' figures (`a.min / b.max
    /// .. a.max / b.min`): when the threshold lies inside it, the verdict rests on noise.
    pub range: Option<(f64, f64)>,
    /// Outcome.
    pub verdict: Verdict,
}

impl TargetResult {
    fn not_measured(target: String, required: String, why: String) -> Self {
        TargetResult {
            target,
            measured: "-".into(),
            ratio: None,
            required,
            range: None,
            verdict: Verdict::NotMeasured(why),
        }
    }

    /// Whether the threshold lies inside the range over runs (some runs meet it, some do not).
    pub fn within_noise(&self, threshold: f64) -> bool {
        self.range
            .is_some_and(|(lo, hi)| lo < threshold && threshold < hi)
    }
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
    let required = format!("{} {threshold}x", if higher { ">=" } else { "<=" });
    match (usable(s, id, metric), usable(s, base, metric)) {
        (Ok(a), Ok(b)) => {
            let div = |x: f64, y: f64| if y != 0.0 { x / y } else { f64::INFINITY };
            let ratio = div(a.median, b.median);
            let met = if higher {
                ratio >= threshold
            } else {
                ratio <= threshold
            };
            TargetResult {
                target: target.into(),
                measured: format!(
                    "{} / {}",
                    fmt_value(a.median, &a.unit),
                    fmt_value(b.median, &b.unit)
                ),
                ratio: Some(ratio),
                required,
                range: Some((div(a.min, b.max), div(a.max, b.min))),
                verdict: if met { Verdict::Met } else { Verdict::NotMet },
            }
        }
        (Err(e), _) | (_, Err(e)) => TargetResult::not_measured(target.into(), required, e),
    }
}

/// Absolute throughput of route/dispatch required by BENCHMARKS.md, events/s.
pub const ROUTE_DISPATCH_TARGET: f64 = 100e6;

/// Evaluates every target of BENCHMARKS.md against `s`.
pub fn targets(s: &Summary) -> Vec<TargetResult> {
    let mut t = Vec::new();
    let target = "route/dispatch >= 100 M events/s on one core".to_string();
    let required = ">= 1x (100 M events/s)".to_string();
    t.push(match usable(s, "route/dispatch", "throughput") {
        Ok(r) => TargetResult {
            target,
            measured: fmt_value(r.median, &r.unit),
            ratio: Some(r.median / ROUTE_DISPATCH_TARGET),
            required,
            range: Some((r.min / ROUTE_DISPATCH_TARGET, r.max / ROUTE_DISPATCH_TARGET)),
            verdict: if r.median >= ROUTE_DISPATCH_TARGET {
                Verdict::Met
            } else {
                Verdict::NotMet
            },
        },
        Err(e) => TargetResult::not_measured(target, required, e),
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
        let required = "= 0 allocs/event in every run".to_string();
        t.push(match usable(s, &id, "allocs_per_event") {
            Ok(r) => TargetResult {
                target,
                measured: format!("{:.6} allocs/event (median over runs)", r.median),
                ratio: Some(r.max),
                required,
                range: Some((r.min, r.max)),
                verdict: if r.max == 0.0 {
                    Verdict::Met
                } else {
                    Verdict::NotMet
                },
            },
            Err(e) => TargetResult::not_measured(target, required, e),
        });
    }
    t
}

/// Formats a ratio or a range bound.
fn fmt_ratio(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() < 0.01 {
        format!("{x:.2e}")
    } else {
        format!("{x:.2}")
    }
}

/// Below this share of its target rate, an open-loop level did not get the load it asked for.
pub const OPENLOOP_MIN_ACHIEVED_PCT: f64 = 90.0;

/// Warnings that follow from the figures themselves: open-loop levels whose paced input fell
/// short of its target rate (their corrected latency then measures a growing backlog, not the
/// engine at that load).
pub fn figure_warnings(s: &Summary) -> Vec<String> {
    s.records
        .iter()
        .filter_map(|r| {
            let level = r.metric.strip_prefix("achieved_vs_target@")?;
            (r.median < OPENLOOP_MIN_ACHIEVED_PCT).then(|| {
                format!(
                    "{}: at {level} of the measured maximum the paced input reached only {:.0} % of its target rate (median over runs; below {OPENLOOP_MIN_ACHIEVED_PCT:.0} %): the machine could not sustain that load, so latency_corrected@{level} measures a growing backlog",
                    r.id, r.median
                )
            })
        })
        .collect()
}

/// The numeric threshold in a `required` string (`>= 5x` -> 5); `None` for the alloc targets.
fn threshold_of(required: &str) -> Option<f64> {
    let rest = required
        .strip_prefix(">= ")
        .or_else(|| required.strip_prefix("<= "))?;
    rest.split('x').next()?.trim().parse().ok()
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
    let _ = writeln!(
        md,
        "Ratios are of the medians over runs, measured in this run on the same cores. \"range over runs\" pairs the runs' extremes (engine min / baseline max .. engine max / baseline min); a verdict whose threshold lies inside that range rests on noise and is flagged. For the alloc targets the figure is the largest allocs/event of any run.\n"
    );
    let _ = writeln!(
        md,
        "| target | measured | ratio | required | range over runs | verdict |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    let results = targets(s);
    for t in &results {
        let threshold = threshold_of(&t.required);
        let noisy = threshold.is_some_and(|x| t.within_noise(x));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | **{}**{} |",
            t.target,
            t.measured,
            t.ratio
                .map_or("-".into(), |r| format!("**{}x**", fmt_ratio(r))),
            t.required,
            t.range.map_or("-".into(), |(lo, hi)| format!(
                "{} .. {}",
                fmt_ratio(lo),
                fmt_ratio(hi)
            )),
            t.verdict.label(),
            if noisy { " (within run spread)" } else { "" }
        );
    }
    let met = results.iter().filter(|t| t.verdict == Verdict::Met).count();
    let _ = writeln!(
        md,
        "\n**{met} of {} targets met** on this machine ({}).\n",
        results.len(),
        env.label
    );

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
    let figure_warnings = figure_warnings(s);
    if env.warnings.is_empty() && scenario_warnings.is_empty() && figure_warnings.is_empty() {
        let _ = writeln!(md, "None.\n");
    } else {
        for w in env
            .warnings
            .iter()
            .chain(scenario_warnings)
            .chain(&figure_warnings)
        {
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
        "- `summary.json` / `summary.csv` hold every row above; `runs.json` every run's record (its figures, parameters, placement, notes; the histograms are merged into the `.hgrm` files); `env.json` the machine and build.\n\
         - `.hgrm` files are HdrHistogram percentile distributions (values in ns), readable by HdrHistogram's plotter.\n\
         - Open-loop latencies are given twice: *corrected* from each event's intended send time (includes the queueing a stalled system imposes on later events) and *uncorrected* from its actual send time (coordinated omission).\n\
         - `harness compare A B` prints B/A per record and calls a change real only when both folders have 2+ runs of it and their min..max ranges (the spread of the runs) do not overlap.\n\
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
    fn ranges_over_runs_flag_verdicts_that_rest_on_noise() {
        let mut a = row("stream/1to1/engine", "throughput", 15e6, "ok");
        (a.min, a.max) = (10e6, 20e6);
        let mut b = row("stream/1to1/crossbeam-channel", "throughput", 10e6, "ok");
        (b.min, b.max) = (8e6, 12e6);
        let s = Summary {
            schema: SCHEMA,
            records: vec![a, b],
        };
        let t = targets(&s);
        let r = t
            .iter()
            .find(|x| x.target.starts_with("stream/1to1"))
            .unwrap();
        assert_eq!(r.verdict, Verdict::Met);
        assert_eq!(r.required, ">= 1.5x");
        let (lo, hi) = r.range.unwrap();
        assert!((lo - 10.0 / 12.0).abs() < 1e-9 && (hi - 2.5).abs() < 1e-9);
        assert_eq!(threshold_of(&r.required), Some(1.5));
        assert!(r.within_noise(1.5));
        assert!(!r.within_noise(3.0));
        assert_eq!(threshold_of("= 0 allocs/event in every run"), None);
        assert_eq!(threshold_of("<= 2.5x"), Some(2.5));
    }

    #[test]
    fn open_loop_levels_short_of_their_rate_are_warned_about() {
        let mut low = row("openloop/rate", "achieved_vs_target@80%", 58.0, "ok");
        low.unit = "%".into();
        let mut fine = row("openloop/rate", "achieved_vs_target@10%", 99.0, "ok");
        fine.unit = "%".into();
        let s = Summary {
            schema: SCHEMA,
            records: vec![low, fine],
        };
        let w = figure_warnings(&s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("80%") && w[0].contains("58 %"), "{}", w[0]);
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
