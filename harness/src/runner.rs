//! Process-per-run orchestration.
//!
//! The parent (`harness run`) never measures. It reads the core list once, resolves the pinning
//! plan, keeps itself off the measured cores when there are spare ones, captures the environment,
//! and then, in rounds (round r runs every scenario once, so that a drift of the machine affects
//! an engine scenario and its baseline twin alike), re-executes its own binary once per run as
//! `harness run-one --id ID --mode M --cores LIST --pinned B --run-index I`. The child runs the
//! scenario once (warm-up included and discarded), prints one [`RunRecord`] as a JSON line on
//! stdout and exits `0` (checks ok), `1` (a check failed) or `2` (bad arguments). A child that
//! crashes, prints no record or runs past the mode's timeout becomes a failed record, so a broken
//! scenario can never disappear from the results. After the rounds, targets whose interval
//! straddles their threshold (UNDECIDED, see [`crate::targets`]) get extra rounds of their
//! records, within [`Mode::repeat_budget`]. `harness run` exits 0 when every check passed,
//! whatever the target verdicts (a target the engine misses is a finding, reported in
//! `report.md`, not a failure of the run), 1 when a check failed. The parent waits on a child from a blocking
//! waiter thread (no polling), draws the progress bar between runs, and writes the result folder.

use crate::cli::{RunArgs, RunOneArgs, EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE};
use crate::pin::{self, CoreMap, PinPlan};
use crate::record::{RunRecord, Summary, SummaryRecord, SCHEMA};
use crate::scenario::{self, Mode, RunCtx};
use crate::{catalogue, env, output, stats, targets};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Most extra rounds `harness run` adds for undecided targets.
pub const MAX_EXTRA_ROUNDS: usize = 6;

/// `harness run-one`: runs a scenario once in this process and prints its record.
pub fn run_one(a: &RunOneArgs) -> i32 {
    crate::clock::init();
    let cores: Vec<usize> = match a
        .cores
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse())
        .collect()
    {
        Ok(c) => c,
        Err(_) => {
            eprintln!(
                "run-one: --cores must be a comma-separated core list, got `{}`",
                a.cores
            );
            return EXIT_USAGE;
        }
    };
    // The parent may have kept itself (and so this process) off the measured cores; widen the
    // mask to the plan's cores so that code reading the mask (the engine's builder) sees them.
    // Measured threads pin themselves; this thread only sleeps while they run.
    if a.pinned {
        let mut mask = pin::current_mask();
        mask.extend(cores.iter().copied());
        mask.sort_unstable();
        mask.dedup();
        pin::set_current_mask(&mask);
    }
    let map = CoreMap {
        cores,
        pinned: a.pinned,
    };
    let cat = catalogue::catalogue(map.distinct().max(1));
    let Some(sc) = cat.into_iter().find(|s| s.id == a.id) else {
        eprintln!("run-one: no scenario `{}` (see `harness list`)", a.id);
        return EXIT_USAGE;
    };
    let ctx = RunCtx {
        mode: a.mode,
        map,
        run_index: a.run_index,
    };
    let t0 = Instant::now();
    let mut o = sc.run(&ctx);
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    for p in &o.placement {
        if !p.verified {
            o.notes.push(format!(
                "pinning not verified: {} (planned core {:?}, seen on {})",
                p.role,
                p.planned,
                pin::join(&p.observed)
            ));
        }
    }
    let rec = RunRecord {
        id: sc.id.clone(),
        check: if o.failures.is_empty() {
            "ok".into()
        } else {
            format!("failed: {}", o.failures.join("; "))
        },
        metrics: o.metrics,
        placement: o.placement,
        params: o.params,
        notes: o.notes,
        wall_ms,
    };
    println!(
        "{}",
        serde_json::to_string(&rec).expect("a run record serialises")
    );
    if rec.ok() {
        EXIT_OK
    } else {
        EXIT_CHECK_FAILED
    }
}

/// Runs one child and turns whatever happens into a record.
fn spawn_child(exe: &PathBuf, id: &str, mode: Mode, map: &CoreMap, run: usize) -> RunRecord {
    let failed = |why: String| RunRecord {
        id: id.to_string(),
        check: format!("failed: {why}"),
        metrics: Vec::new(),
        placement: Vec::new(),
        params: BTreeMap::new(),
        notes: Vec::new(),
        wall_ms: 0.0,
    };
    let child = Command::new(exe)
        .args([
            "run-one",
            "--id",
            id,
            "--mode",
            mode.name(),
            "--cores",
            &pin::join(&map.cores),
            "--pinned",
            if map.pinned { "true" } else { "false" },
            "--run-index",
            &run.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return failed(format!("could not start the child process: {e}")),
    };
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    // The waiter blocks in wait(); the parent blocks on the channel with a timeout.
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let timeout = mode.run_timeout();
    let res = match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; `pid` is our own child, which
            // has not been reaped (the waiter is still blocked in wait()).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(10));
            return failed(format!(
                "timed out after {} s (killed): a lost event can hang a scenario",
                timeout.as_secs()
            ));
        }
    };
    let out = match res {
        Ok(o) => o,
        Err(e) => return failed(format!("waiting for the child failed: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = {
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(6)..].join(" | ")
    };
    let record = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .map(serde_json::from_str::<RunRecord>);
    match record {
        Some(Ok(r)) => {
            if r.ok() && !out.status.success() {
                failed(format!("exit status {} with an ok record", out.status))
            } else {
                r
            }
        }
        Some(Err(e)) => failed(format!("unreadable record ({e}); stderr: {tail}")),
        None => failed(format!(
            "no record (exit status {}); stderr: {tail}",
            out.status
        )),
    }
}

/// The default result folder: `results/<date>-<tag>-<short commit>`.
pub fn default_out(tag: &str) -> PathBuf {
    let (date, _) = env::utc(env::unix_now());
    let (_, short, _) = env::git_state();
    PathBuf::from("results").join(format!("{date}-{tag}-{short}"))
}

/// `harness run`: returns the exit code.
pub fn run(a: &RunArgs) -> i32 {
    let mode = a.mode();
    let runs = a.runs.unwrap_or_else(|| mode.default_runs()).max(1);
    // Read the core list ONCE, before anything is pinned (see pin.rs).
    let available = pin::available_cores();
    let (plan, map) = match pin_plan_and_map(&a.pin, &available) {
        Ok(pm) => pm,
        Err(code) => return code,
    };
    let filter = match a.filter.as_deref().map(regex::Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--filter: not a regular expression: {e}");
            return EXIT_USAGE;
        }
    };
    let mut env = env::capture(
        &available,
        &map,
        &plan.to_string(),
        mode.name(),
        runs,
        a.label.as_deref(),
        a.tag.as_deref(),
    );
    // Keep the parent (progress display, waiter threads) off the measured cores when possible.
    let spare: Vec<usize> = available
        .iter()
        .copied()
        .filter(|c| !map.pinned || !map.cores.contains(c))
        .collect();
    if map.pinned && !spare.is_empty() {
        pin::set_current_mask(&spare);
    } else if map.pinned {
        env.warnings.push(format!(
            "no spare core for the harness's own process: its (parked) progress display shares cores {} with the measured threads",
            pin::join(&map.cores)
        ));
    }
    let scenarios: Vec<scenario::Scenario> = catalogue::catalogue(map.distinct().max(1))
        .into_iter()
        .filter(|s| selected(filter.as_ref(), &s.id))
        .collect();
    if scenarios.is_empty() {
        eprintln!("--filter matches no scenario id (see `harness list`)");
        return EXIT_USAGE;
    }
    let out_dir = a
        .out
        .clone()
        .unwrap_or_else(|| default_out(&env.machine_tag));
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("cannot create {}: {e}", out_dir.display());
        return EXIT_USAGE;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find the harness binary to re-execute: {e}");
            return EXIT_USAGE;
        }
    };
    let total = (scenarios.len() * runs) as u64;
    let pb = if a.no_progress {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} runs  {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        pb
    };
    let started = Instant::now();
    eprintln!(
        "harness: {} scenarios x {runs} run(s), mode {}, cores {} ({}), writing {}",
        scenarios.len(),
        mode.name(),
        pin::join(&map.cores),
        if map.pinned { "pinned" } else { "not pinned" },
        out_dir.display()
    );
    let mut all_runs: Vec<(String, Vec<RunRecord>)> = Vec::new();
    let mut rows: Vec<SummaryRecord> = Vec::new();
    let mut scenario_warnings = Vec::new();
    // Runs are interleaved: round r runs every selected scenario once, in catalogue order. A slow
    // drift of the machine (a VM's vCPUs moved to other host cores, a neighbour's load coming
    // and going) then touches an engine scenario and its baseline twin alike, instead of landing
    // on all runs of one of them; the medians of a ratio come from the same rounds.
    let mut recs_of: Vec<Vec<RunRecord>> =
        scenarios.iter().map(|_| Vec::with_capacity(runs)).collect();
    for r in 0..runs {
        for (sc, recs) in scenarios.iter().zip(recs_of.iter_mut()) {
            pb.set_message(format!("round {}/{runs}: {}", r + 1, sc.id));
            recs.push(spawn_child(&exe, &sc.id, mode, &map, r));
            pb.inc(1);
        }
        if pb.is_hidden() && runs > 1 {
            eprintln!(
                "harness: round {}/{runs} done ({:.1} s)",
                r + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    // Undecided targets: repeat the rounds of their records (engine and peers, back to back,
    // so the new rounds pair like the first ones) until every target is decided, the mode's
    // time budget would be exceeded, or MAX_EXTRA_ROUNDS were added.
    let budget = mode.repeat_budget();
    let repeat_started = Instant::now();
    let mut extra = 0;
    while !budget.is_zero() && extra < MAX_EXTRA_ROUNDS {
        let so_far = Summary {
            schema: SCHEMA,
            records: scenarios
                .iter()
                .zip(&recs_of)
                .flat_map(|(_, recs)| stats::aggregate(recs))
                .collect(),
            targets: Vec::new(),
        };
        let ids = targets::undecided_ids(&targets::evaluate_all(&so_far));
        let todo: Vec<usize> = scenarios
            .iter()
            .enumerate()
            .filter(|(_, sc)| ids.contains(&sc.id))
            .map(|(i, _)| i)
            .collect();
        if todo.is_empty() {
            break;
        }
        // The cost of a round of them, from their runs so far (plus process start-up).
        let estimate: f64 = todo
            .iter()
            .map(|&i| {
                let recs = &recs_of[i];
                recs.iter().map(|r| r.wall_ms).sum::<f64>() / recs.len().max(1) as f64 + 50.0
            })
            .sum::<f64>()
            / 1e3;
        if repeat_started.elapsed().as_secs_f64() + estimate > budget.as_secs_f64() {
            let m = format!(
                "harness: {} scenario(s) of undecided targets not repeated: another round (~{estimate:.0} s) would exceed the {} s budget",
                todo.len(),
                budget.as_secs()
            );
            if pb.is_hidden() {
                eprintln!("{m}");
            } else {
                pb.println(m);
            }
            break;
        }
        extra += 1;
        pb.inc_length(todo.len() as u64);
        for &i in &todo {
            pb.set_message(format!(
                "undecided, extra round {extra}: {}",
                scenarios[i].id
            ));
            let run_index = recs_of[i].len();
            recs_of[i].push(spawn_child(&exe, &scenarios[i].id, mode, &map, run_index));
            pb.inc(1);
        }
        if pb.is_hidden() {
            eprintln!(
                "harness: extra round {extra} for undecided targets ({} scenarios) done ({:.1} s)",
                todo.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    for (sc, recs) in scenarios.iter().zip(recs_of) {
        if sc.threads > map.distinct() {
            scenario_warnings.push(format!(
                "{}: needs {} busy threads, the plan has {} core(s): threads share cores",
                sc.id,
                sc.threads,
                map.distinct()
            ));
        }
        let mut notes: Vec<String> = recs.iter().flat_map(|r| r.notes.clone()).collect();
        notes.sort();
        notes.dedup();
        for n in notes {
            scenario_warnings.push(format!("{}: {n}", sc.id));
        }
        let mut agg = stats::aggregate(&recs);
        if agg.is_empty() && !skipped(&recs) {
            // Every run failed before measuring: keep a row so the failure is visible.
            agg.push(failed_row(&sc.id, &recs));
        }
        let line = agg
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r.metric,
                    crate::record::fmt_value(r.median, &r.unit)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let status = agg.first().map_or("ok", |r| r.checks.as_str());
        let msg = if agg.is_empty() {
            format!("{:<36} {:<6} (see its note)", sc.id, "skipped")
        } else {
            format!(
                "{:<36} {:<6} {line}",
                sc.id,
                if status == "ok" { "ok" } else { "FAILED" }
            )
        };
        if pb.is_hidden() {
            eprintln!("{msg}");
        } else {
            pb.println(msg);
        }
        if status != "ok" {
            let m = format!("    {status}");
            if pb.is_hidden() {
                eprintln!("{m}");
            } else {
                pb.println(m);
            }
        }
        rows.extend(agg);
        all_runs.push((sc.id.clone(), recs));
    }
    pb.finish_and_clear();
    let mut summary = Summary {
        schema: SCHEMA,
        records: rows,
        targets: Vec::new(),
    };
    summary.targets = targets::evaluate_all(&summary);
    for t in &summary.targets {
        eprintln!(
            "target: {:<10} {} (median {}, 95 % interval {}, {} round(s))",
            t.verdict,
            t.target,
            t.median.map_or("-".into(), |m| format!("{m:.3}")),
            t.ci95
                .map_or("-".into(), |(lo, hi)| format!("{lo:.3} .. {hi:.3}")),
            t.ratios.len()
        );
    }
    let result = output::RunResult {
        env,
        summary,
        runs: all_runs,
        scenario_warnings,
        out: out_dir.clone(),
    };
    if let Err(e) = output::write_all(&result) {
        eprintln!("writing {} failed: {e}", out_dir.display());
        return EXIT_USAGE;
    }
    let failed: Vec<&SummaryRecord> = result
        .summary
        .records
        .iter()
        .filter(|r| r.checks != "ok")
        .collect();
    eprintln!(
        "harness: {} records in {:.1} s, {} failed; wrote {}",
        result.summary.records.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        out_dir.join("report.md").display()
    );
    if failed.is_empty() {
        EXIT_OK
    } else {
        for r in failed {
            eprintln!("FAILED {} {}: {}", r.id, r.metric, r.checks);
        }
        EXIT_CHECK_FAILED
    }
}

/// Whether a scenario was skipped, not failed: every run passed its check, measured nothing and
/// said why in a note (a peer built out, `nats/loopback` without a server). It gets no row; its
/// notes are among the report's warnings.
fn skipped(recs: &[RunRecord]) -> bool {
    !recs.is_empty()
        && recs
            .iter()
            .all(|r| r.ok() && r.metrics.is_empty() && !r.notes.is_empty())
}

fn failed_row(id: &str, recs: &[RunRecord]) -> SummaryRecord {
    SummaryRecord {
        id: id.to_string(),
        metric: "run".into(),
        unit: "".into(),
        median: 0.0,
        min: 0.0,
        max: 0.0,
        runs: recs.len(),
        values: Vec::new(),
        pairs: Vec::new(),
        percentiles: None,
        checks: recs.iter().find(|r| !r.ok()).map_or_else(
            || "failed: no metric was recorded".into(),
            |r| r.check.clone(),
        ),
        better: crate::record::Better::Higher,
        placement: String::new(),
        hgrm: None,
    }
}

/// Whether `id` passes the optional `--filter`.
fn selected(filter: Option<&regex::Regex>, id: &str) -> bool {
    match filter {
        None => true,
        Some(f) => f.is_match(id),
    }
}

/// `harness list`.
pub fn list(filter: Option<&str>) -> i32 {
    let f = match filter.map(regex::Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--filter: not a regular expression: {e}");
            return EXIT_USAGE;
        }
    };
    let cores = pin::available_cores().len();
    for s in catalogue::catalogue(cores) {
        if selected(f.as_ref(), &s.id) {
            println!("{:<36} {}", s.id, s.about);
        }
    }
    EXIT_OK
}

/// `--pin`'s plan and its resolution on `available`; on a bad plan, the message is printed and
/// the usage exit code returned.
fn pin_plan_and_map(pin: &str, available: &[usize]) -> Result<(PinPlan, CoreMap), i32> {
    let plan = PinPlan::parse(pin).map_err(|e| {
        eprintln!("{e}");
        EXIT_USAGE
    })?;
    let map = CoreMap::resolve(&plan, available).map_err(|e| {
        eprintln!("{e}");
        EXIT_USAGE
    })?;
    Ok((plan, map))
}

/// `harness env`.
pub fn env_cmd(pin_plan: &str) -> i32 {
    let available = pin::available_cores();
    let (plan, map) = match pin_plan_and_map(pin_plan, &available) {
        Ok(pm) => pm,
        Err(code) => return code,
    };
    let e = env::capture(&available, &map, &plan.to_string(), "env", 0, None, None);
    println!(
        "{}",
        serde_json::to_string_pretty(&e).expect("env serialises")
    );
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Better, Measure};

    fn rec(check: &str, measured: bool, note: bool) -> RunRecord {
        RunRecord {
            id: "workload/fraud/varpulis".into(),
            check: check.into(),
            metrics: if measured {
                vec![Measure {
                    metric: "throughput".into(),
                    unit: "events/s".into(),
                    value: 1.0,
                    better: Better::Higher,
                    hist: None,
                    pairs: None,
                }]
            } else {
                Vec::new()
            },
            placement: Vec::new(),
            params: BTreeMap::new(),
            notes: if note {
                vec!["left out".into()]
            } else {
                Vec::new()
            },
            wall_ms: 0.0,
        }
    }

    // A scenario is skipped (no row, its note among the warnings) only when every run passed,
    // measured nothing and said why; anything else keeps a row, so a failure stays visible.
    #[test]
    fn only_a_passing_silent_noted_scenario_is_skipped() {
        assert!(skipped(&[rec("ok", false, true), rec("ok", false, true)]));
        assert!(!skipped(&[]), "no run at all is a failure");
        assert!(
            !skipped(&[rec("ok", false, false)]),
            "nothing measured, no reason"
        );
        assert!(
            !skipped(&[rec("failed: lost", false, true)]),
            "a failed check"
        );
        assert!(
            !skipped(&[rec("ok", false, true), rec("ok", true, true)]),
            "one run measured"
        );
    }
}
