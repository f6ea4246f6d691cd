//! `report.md`: every headline with its ratio to the baselines of the same run, every target of
//! BENCHMARKS.md with its measured ratio and verdict, the warnings, the placement and the plots.
//!
//! Ratios, not absolute figures, are what survive a noisy or shared machine; the report says on
//! what machine it was measured at the top, and the targets use medians over runs.

use crate::env::Env;
use crate::record::fmt_value;
use crate::record::{Summary, SummaryRecord};
use crate::{stats, targets};
use std::fmt::Write as _;

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

/// The baselines an engine record is compared with in the headline table.
pub fn baselines_of(id: &str) -> Vec<String> {
    if id == "route/dispatch" {
        return vec!["route/floor".into(), "route/crossbeam-channel".into()];
    }
    if id == "pingpong/engine" || id == "pingpong/engine-park" {
        return vec![
            "calibration/cacheline-pingpong".into(),
            "calibration/ring-pingpong".into(),
            "pingpong/crossbeam-channel".into(),
            "pingpong/kanal".into(),
            "pingpong/disruptor".into(),
        ];
    }
    if id == "async/tokio/engine" {
        return vec!["async/tokio/tokio-mpsc".into()];
    }
    // A checkpointing scenario beside the same scenario without checkpoints (issue 36).
    if let Some(&(_, plain)) = targets::CHECKPOINTED.iter().find(|r| r.0 == id) {
        return vec![plain.into()];
    }
    // record/* beside the same scenario not recording (issue 35).
    if let Some(&(_, plain, _)) = targets::RECORDED.iter().find(|r| r.0 == id) {
        return vec![plain.into()];
    }
    // workload/<name> and its variants (workload/fraud/pool) beside workload/<name>/twin.
    if let Some(rest) = id.strip_prefix("workload/") {
        let name = rest.split('/').next().unwrap_or(rest);
        if !id.ends_with("/twin") {
            return vec![format!("workload/{name}/twin")];
        }
    }
    if let Some(prefix) = id.strip_suffix("/engine") {
        if prefix.starts_with("burst/") {
            return ["crossbeam-channel", "disruptor", "rtrb"]
                .iter()
                .map(|b| format!("{prefix}/{b}"))
                .collect();
        }
        if prefix.starts_with("stream/") {
            return crate::scenario::peers::MP_PEERS
                .iter()
                .chain(&crate::scenario::peers::SP_PEERS)
                .chain(&["arrayqueue"])
                .map(|b| format!("{prefix}/{b}"))
                .collect();
        }
    }
    Vec::new()
}

/// Largest acceptable cost of the harness's bookkeeping on a peer, % of its bare throughput.
pub const BOOKKEEPING_LIMIT_PCT: f64 = 5.0;

/// The figures the A/B segments are compared on: (booked metric, bare metric, unit). Stream
/// peers compare throughputs, ping-pongs mean one-way latencies, bursts mean latencies per event.
const AB_PAIRS: [(&str, &str, &str); 3] = [
    ("throughput_booked", "throughput_bare", "events/s"),
    ("latency_one_way_booked", "latency_one_way_bare", "ns"),
    ("latency_per_event_booked", "latency_per_event_bare", "ns"),
];

/// One baseline's bookkeeping cost, from its A/B segments ([`crate::scenario::ab`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BareProbe {
    /// The baseline's id.
    pub id: String,
    /// Its booked segments' figure (median over runs).
    pub booked: f64,
    /// Its bare segments' figure (median over runs).
    pub bare: f64,
    /// The unit of `booked` and `bare`.
    pub unit: &'static str,
    /// Median of the pair costs of all runs, %.
    pub cost: f64,
    /// Pairs of all runs.
    pub pairs: usize,
    /// Runs that gave pairs.
    pub runs: usize,
    /// Smallest and largest of the runs' own medians, %.
    pub run_range: (f64, f64),
    /// Pairs whose two segments took 2x or more apart ([`is_regime_flip`]).
    pub flips: usize,
    /// Bootstrap 95 % interval of the median of the pooled pairs (`None` under 2 pairs).
    pub ci: Option<(f64, f64)>,
    /// [`UNDER`], [`OVER`] or [`UNSETTLED`]: the interval against [`BOOKKEEPING_LIMIT_PCT`].
    pub verdict: &'static str,
}

/// The cost's interval lies at or under the limit.
pub const UNDER: &str = "under the limit";
/// The cost's interval lies above the limit.
pub const OVER: &str = "**over the limit**";
/// The interval straddles the limit: the run cannot tell the bookkeeping from the noise.
pub const UNSETTLED: &str = "undecided";

/// Whether a pair cost (%) says one segment took at least twice as long as the other (cost at or
/// above 50 %, or at or below -100 %): the machine changed state between the two segments (a
/// neighbour took a vCPU, a spinning ring flipped), which no bookkeeping of a few clock reads
/// and stores explains. Such pairs stay in the verdict (the median is robust to them); their
/// share is reported, as the measured reason an interval stays wide.
pub fn is_regime_flip(cost: f64) -> bool {
    cost >= 50.0 || cost <= -100.0
}

/// The verdict on pooled pair costs: their median, the bootstrap interval of that median, and
/// [`UNDER`] when the whole interval is at or under [`BOOKKEEPING_LIMIT_PCT`], [`OVER`] when all
/// of it is above, [`UNSETTLED`] otherwise (or under 2 pairs).
pub fn pair_verdict(pairs: &[f64]) -> (f64, Option<(f64, f64)>, &'static str) {
    let ci = stats::bootstrap_median_ci(pairs, targets::LEVEL);
    let verdict = match targets::verdict(ci, BOOKKEEPING_LIMIT_PCT, false) {
        targets::MET => UNDER,
        targets::NOT_MET => OVER,
        _ => UNSETTLED,
    };
    (stats::median(pairs), ci, verdict)
}

/// Every record with A/B segment pairs, its cost over the pooled pairs of all runs and a verdict
/// ([`pair_verdict`]).
pub fn bookkeeping(s: &Summary) -> Vec<BareProbe> {
    s.records
        .iter()
        .filter(|r| r.metric == "bookkeeping_cost" && r.checks == "ok")
        .filter_map(|r| {
            let (booked, bare, unit) = AB_PAIRS.iter().find_map(|&(booked, bare, unit)| {
                Some((
                    s.get(&r.id, booked)?.median,
                    s.get(&r.id, bare)?.median,
                    unit,
                ))
            })?;
            let pooled: Vec<f64> = r.pairs.iter().flatten().copied().collect();
            if pooled.is_empty() {
                return None;
            }
            let (cost, ci, verdict) = pair_verdict(&pooled);
            Some(BareProbe {
                id: r.id.clone(),
                booked,
                bare,
                unit,
                cost,
                pairs: pooled.len(),
                runs: r.pairs.iter().filter(|p| !p.is_empty()).count(),
                run_range: (r.min, r.max),
                flips: pooled.iter().filter(|&&c| is_regime_flip(c)).count(),
                ci,
                verdict,
            })
        })
        .collect()
}

/// Metrics that have a baseline twin (the headline figures of a scenario).
const COMPARED_METRICS: [&str; 7] = [
    "throughput",
    "latency_send_to_recv",
    "latency_send_to_recv_p99",
    "ns_per_event",
    "latency_one_way",
    "latency_per_event",
    "latency_per_event_paused",
];

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

    let _ = writeln!(md, "## Targets (harness/BENCHMARKS.md)\n");
    let _ = writeln!(
        md,
        "Each round runs the engine scenario and its peers back to back. A target's figure is the **median of the per-round ratios** (engine / baseline of the same round; for \"the fastest peer\", the fastest multi-producer peer *of that round*), with a bootstrap 95 % interval of that median. MET: the whole interval meets the threshold; NOT MET: none of it does; UNDECIDED: it straddles the threshold (or one round only). Undecided targets were re-measured within the mode's time budget (quick 45 s, full 300 s; see the rounds column). Allocation targets: the largest allocs/event of any run must be 0. One-producer bounds, pingpong/engine against the ring floor (calibration/ring-pingpong: one event bounced through two rings of lines, the floor of any queue), the async/tokio pairing (engine vs tokio mpsc) and record/stream/2to1 against stream/2to1/engine (recording's cost with two senders) are reported, not targets.\n"
    );
    let _ = writeln!(
        md,
        "| target | median ratio | 95 % interval | required | rounds | verdict | per-round ratios |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for t in &s.targets {
        let required = match (t.kind.as_str(), t.direction.as_str()) {
            ("bound", _) => "none (reported)".to_string(),
            ("absolute", _) => "0 in every run".to_string(),
            (_, "at_least") => format!(">= {}x", fmt_ratio(t.threshold)),
            _ => format!("<= {}x", fmt_ratio(t.threshold)),
        };
        let per_round = t
            .ratios
            .iter()
            .enumerate()
            .map(|(i, r)| match t.fastest.get(i) {
                Some(f) => format!("{} ({f})", fmt_ratio(*r)),
                None => fmt_ratio(*r),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | **{}** | {} |",
            t.target,
            t.median.map_or("-".into(), |m| format!(
                "**{}{}**",
                fmt_ratio(m),
                // An absolute target, or a row of the engine's own figure (no baseline: RSS
                // per instance), is not a ratio.
                if t.is_absolute() || t.baselines.is_empty() {
                    ""
                } else {
                    "x"
                }
            )),
            t.ci95.map_or("-".into(), |(lo, hi)| format!(
                "{} .. {}",
                fmt_ratio(lo),
                fmt_ratio(hi)
            )),
            required,
            t.ratios.len(),
            t.verdict,
            per_round
        );
    }
    let judged: Vec<_> = s.targets.iter().filter(|t| !t.is_bound()).collect();
    let count = |v: &str| judged.iter().filter(|t| t.verdict == v).count();
    let _ = writeln!(
        md,
        "\n**{} of {} targets MET, {} NOT MET, {} UNDECIDED** on this machine ({}). A target the engine misses is reported as it is; `harness run` still exits 0 (only a failed check makes it exit 1).\n",
        count(crate::targets::MET),
        judged.len(),
        count(crate::targets::NOT_MET),
        count(crate::targets::UNDECIDED),
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

    let probes = bookkeeping(s);
    if !probes.is_empty() {
        let _ = writeln!(md, "## The harness's bookkeeping (A/B segments)\n");
        let _ = writeln!(
            md,
            "After its timed run, every baseline runs on in one stream, on the same queue(s) and threads, alternating segments of equal size *with* the harness's bookkeeping (booked: exactly what the timed run does, publishing counts, stop checks, sender counters, sampled clock reads and histogram records) and *without* it (bare), in ABBA order so that a drifting machine moves both alike; the clock is read only at segment boundaries, and each thread switches by its own count. Each pair of adjacent segments gives a cost, `1 - t_bare / t_booked` (`1 - rate_booked / rate_bare` on streams, `1 - bare_mean / booked_mean` on latency loops); the cost below is the median of the pairs of all runs, with a bootstrap {:.0} % interval of that median over the pooled pairs. It must stay under {BOOKKEEPING_LIMIT_PCT:.0} % for the bookkeeping not to decide the figure: *under the limit* when the whole interval is at or under it, *over* when all of it is above, *undecided* when it straddles it. \"pairs 2x apart\" is the share of pairs whose two segments took twice as long or longer one than the other: the machine changed state between them (a neighbour took a vCPU, a ring flipped), which no bookkeeping explains; they stay in the verdict (the median is robust to them), and a large share is the measured reason an interval stays wide. \"runs' medians\" is the spread of each run's own median: a wide one means the runs differ (placement, regime), which the pooled interval does not capture. In a stream the receiver decides and the senders follow within a queue's depth plus 1,024 events each; segments are at least 32 queue capacities, so the two sides agree on all but a few % of each. A spinning ring (rtrb, ArrayQueue) is bistable (harness/BENCHMARKS.md).\n",
            targets::LEVEL * 100.0
        );
        let count = |v: &str| probes.iter().filter(|p| p.verdict == v).count();
        let _ = writeln!(
            md,
            "Of {} baselines, {} are under the limit, {} over it, and {} undecided.\n",
            probes.len(),
            count(UNDER),
            count(OVER),
            count(UNSETTLED)
        );
        let _ = writeln!(
            md,
            "| peer | booked | bare | bookkeeping cost | 95 % interval | pairs (runs) | pairs 2x apart | runs' medians | |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
        for p in &probes {
            let ci = match p.ci {
                Some((lo, hi)) => format!("{lo:.1} % .. {hi:.1} %"),
                None => "- (one pair)".into(),
            };
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {:.1} % | {ci} | {} ({}) | {:.0} % | {:.1} .. {:.1} % | {} |",
                p.id,
                fmt_value(p.booked, p.unit),
                fmt_value(p.bare, p.unit),
                p.cost,
                p.pairs,
                p.runs,
                100.0 * p.flips as f64 / p.pairs as f64,
                p.run_range.0,
                p.run_range.1,
                p.verdict
            );
        }
        md.push('\n');
    }

    let lat: Vec<&SummaryRecord> = s
        .records
        .iter()
        .filter(|r| r.percentiles.is_some())
        .collect();
    if !lat.is_empty() {
        let _ = writeln!(md, "## Latency percentiles (histograms merged over runs)\n");
        let _ = writeln!(
            md,
            "| id | metric | p50 | p90 | p99 | p99.9 | max | distribution |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
        for r in lat {
            let p = r.percentiles.as_ref().expect("filtered");
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
                r.id,
                r.metric,
                fmt_value(p.p50, "ns"),
                fmt_value(p.p90, "ns"),
                fmt_value(p.p99, "ns"),
                fmt_value(p.p99_9, "ns"),
                fmt_value(p.max, "ns"),
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
         - `harness compare A B` prints B/A per record and per target ratio, what differs between the two machines and builds, and calls a change real only when a Mann–Whitney test (records) or a bootstrap interval (target ratios) says so; `--json` for CI, exit 3 when a target regressed.\n\
         - `bookkeeping_cost` of a baseline: how much slower its booked A/B segments ran than the bare ones next to them (the same transfer and per-event work in one stream, with and without the harness's publishing, stop checks, sender counters and sampled clock reads), the median of the run's segment pairs; the report decides on the pairs of all runs; it should stay under 5 %.\n\
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
            values: vec![Some(median)],
            pairs: Vec::new(),
            percentiles: None,
            checks: checks.into(),
            better: Better::Higher,
            placement: String::new(),
            hgrm: None,
        }
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
            targets: Vec::new(),
        };
        let w = figure_warnings(&s);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("80%") && w[0].contains("58 %"), "{}", w[0]);
    }

    /// A `bookkeeping_cost` row with each run's pairs (its value the run's median).
    fn cost_row(id: &str, runs: &[&[f64]]) -> SummaryRecord {
        let meds: Vec<f64> = runs.iter().map(|p| stats::median(p)).collect();
        let mut r = row(id, "bookkeeping_cost", stats::median(&meds), "ok");
        r.values = meds.iter().map(|x| Some(*x)).collect();
        r.min = meds.iter().copied().fold(f64::INFINITY, f64::min);
        r.max = meds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        r.runs = runs.len();
        r.pairs = runs.iter().map(|p| p.to_vec()).collect();
        r
    }

    #[test]
    fn bookkeeping_rows_pair_booked_and_bare_figures_over_the_pooled_pairs() {
        let s = Summary {
            schema: SCHEMA,
            records: vec![
                row("stream/1to1/kanal", "throughput_booked", 90.0, "ok"),
                row("stream/1to1/kanal", "throughput_bare", 100.0, "ok"),
                cost_row("stream/1to1/kanal", &[&[1.0, 3.0], &[2.0], &[]]),
                row("stream/1to1/engine", "throughput", 50.0, "ok"),
            ],
            targets: Vec::new(),
        };
        let b = bookkeeping(&s);
        assert_eq!(b.len(), 1);
        let p = &b[0];
        assert_eq!(
            (p.id.as_str(), p.booked, p.bare, p.unit),
            ("stream/1to1/kanal", 90.0, 100.0, "events/s")
        );
        // The median of the three pairs of all runs, not of the runs' medians (2, 2, -).
        assert_eq!((p.cost, p.pairs, p.runs), (2.0, 3, 2));
        assert_eq!(p.run_range, (2.0, 2.0));
        assert_eq!(p.flips, 0);
        assert!(is_regime_flip(50.0) && is_regime_flip(-100.0));
        assert!(!is_regime_flip(49.0) && !is_regime_flip(-99.0));
        assert!(p.ci.is_some());
    }

    #[test]
    fn bookkeeping_verdict_follows_the_interval_of_the_pooled_pairs() {
        let ab = |id: &str, runs: &[&[f64]]| {
            [
                row(id, "throughput_booked", 1.0, "ok"),
                row(id, "throughput_bare", 1.0, "ok"),
                cost_row(id, runs),
            ]
        };
        let scattered: Vec<f64> = (0..40).map(|i| 5.0 + (i % 9) as f64 * 4.0 - 16.0).collect();
        let s = Summary {
            schema: SCHEMA,
            records: [
                ab("stream/1to1/a", &[&[1.0, 2.0, 0.5], &[1.5, 2.5, 1.0]]),
                ab("stream/1to1/b", &[&[9.0, 8.0, 12.0], &[10.0, 11.0, 9.5]]),
                ab("stream/1to1/c", &[&scattered]),
                ab("stream/1to1/d", &[&[1.0]]),
            ]
            .concat(),
            targets: Vec::new(),
        };
        let v: Vec<_> = bookkeeping(&s).iter().map(|p| p.verdict).collect();
        // d: one pair has no interval.
        assert_eq!(v, [UNDER, OVER, UNSETTLED, UNSETTLED]);
        // The limit is inclusive: an interval ending at 5 % is under it.
        assert_eq!(pair_verdict(&[5.0, 5.0, 5.0]).2, UNDER);
        assert_eq!(pair_verdict(&[5.1, 5.2, 5.3]).2, OVER);
    }

    #[test]
    fn bookkeeping_rows_pair_pingpong_mean_latencies_and_skip_failed_or_pairless_runs() {
        let mut no_pairs = row("pingpong/disruptor", "bookkeeping_cost", 3.0, "ok");
        no_pairs.pairs = Vec::new();
        let mut failed = cost_row("pingpong/crossbeam-channel", &[&[9.0, 8.0]]);
        failed.checks = "failed: lost".into();
        let s = Summary {
            schema: SCHEMA,
            records: vec![
                row("pingpong/kanal", "latency_one_way", 400.0, "ok"),
                row("pingpong/kanal", "latency_one_way_booked", 500.0, "ok"),
                row("pingpong/kanal", "latency_one_way_bare", 480.0, "ok"),
                cost_row("pingpong/kanal", &[&[4.0, 3.0, 5.0]]),
                row(
                    "pingpong/crossbeam-channel",
                    "latency_one_way_booked",
                    500.0,
                    "ok",
                ),
                row(
                    "pingpong/crossbeam-channel",
                    "latency_one_way_bare",
                    400.0,
                    "ok",
                ),
                failed,
                row("pingpong/disruptor", "latency_one_way_booked", 500.0, "ok"),
                row("pingpong/disruptor", "latency_one_way_bare", 400.0, "ok"),
                no_pairs,
            ],
            targets: Vec::new(),
        };
        let b: Vec<_> = bookkeeping(&s)
            .into_iter()
            .map(|p| (p.id, p.booked, p.bare, p.cost, p.unit))
            .collect();
        assert_eq!(
            b,
            vec![("pingpong/kanal".to_string(), 500.0, 480.0, 4.0, "ns")]
        );
    }

    #[test]
    fn baselines_pair_engine_with_twins() {
        assert_eq!(
            baselines_of("route/dispatch"),
            vec!["route/floor", "route/crossbeam-channel"]
        );
        assert!(baselines_of("stream/3to1/engine")
            .contains(&"stream/3to1/crossbeam-channel".to_string()));
        assert!(baselines_of("stream/1to1/crossbeam-channel").is_empty());
        assert_eq!(
            baselines_of("async/tokio/engine"),
            vec!["async/tokio/tokio-mpsc"]
        );
        assert_eq!(baselines_of("workload/fraud"), vec!["workload/fraud/twin"]);
        assert_eq!(
            baselines_of("workload/fraud/pool"),
            vec!["workload/fraud/twin"]
        );
        assert!(baselines_of("workload/fraud/twin").is_empty());
        assert_eq!(
            baselines_of("record/workload/fraud"),
            vec!["workload/fraud"]
        );
        assert_eq!(
            baselines_of("record/stream/2to1"),
            vec!["stream/2to1/engine"]
        );
    }
}
