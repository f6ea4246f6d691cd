//! End-to-end: the built `harness` binary runs `--smoke` into a temporary folder, and everything
//! BENCHMARKS.md says a result folder holds is there, with every record's checks ok. Also: a
//! deliberate loss fails the run, `compare` prints ratios, a bad pinning plan is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_harness");

/// The tests run harness processes that spin on every core: one at a time, so that a smoke run
/// is not measured next to another.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harness-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect()
}

/// Every scenario id of BENCHMARKS.md: the one list the catalogue's own test checks too.
use harness::catalogue::DOCUMENTED_IDS as IDS;

#[test]
fn smoke_run_writes_a_complete_result_folder_with_every_check_ok() {
    let _one = serial();
    let out = tmpdir("smoke");
    let run = Command::new(BIN)
        .args(["run", "--smoke", "--no-progress", "--out"])
        .arg(&out)
        .output()
        .expect("run the harness");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "harness run --smoke failed: {stderr}");

    for f in [
        "env.json",
        "summary.json",
        "summary.csv",
        "report.md",
        "runs.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(!files_with_ext(&out, "svg").is_empty(), "no .svg plot");
    assert!(!files_with_ext(&out, "hgrm").is_empty(), "no .hgrm file");

    // runs.json: every run of every scenario, without the per-run histograms (kept small).
    let runs = json(&out.join("runs.json"));
    for id in IDS {
        assert_eq!(
            runs[id].as_array().map(Vec::len),
            Some(1),
            "runs.json lacks the run of {id}"
        );
    }
    assert!(
        !runs.to_string().contains("\"hist\""),
        "runs.json holds histograms"
    );

    let env = json(&out.join("env.json"));
    for key in [
        "cpu_model",
        "logical_cpus",
        "smt_siblings",
        "caches",
        "virt_vm",
        "governor",
        "kernel",
        "rustc",
        "build",
        "allocator",
        "git_commit",
        "git_dirty",
        "args",
    ] {
        assert!(env.get(key).is_some(), "env.json lacks {key}");
    }
    assert!(env["allocator"].as_str().unwrap().contains("mimalloc"));

    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["schema"], 3);
    let records = summary["records"].as_array().expect("records");
    let ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for id in IDS {
        assert!(ids.contains(id), "no record for {id}");
    }
    // Every baseline (and the engine's bursts, which share their driver) measured its
    // bookkeeping (A/B segments).
    let measures_bookkeeping = |id: &str| {
        let engine = ["/engine", "/engine-park", "/engine-batch"]
            .iter()
            .any(|e| id.ends_with(e));
        id.starts_with("burst/")
            || ((id.starts_with("stream/") || id.starts_with("pingpong/")) && !engine)
    };
    for id in IDS.iter().filter(|id| measures_bookkeeping(id)) {
        assert!(
            records
                .iter()
                .any(|r| r["id"] == *id && r["metric"] == "bookkeeping_cost"),
            "{id} has no bookkeeping_cost"
        );
    }
    for r in records {
        assert_eq!(
            r["checks"], "ok",
            "record {} {} failed: {}",
            r["id"], r["metric"], r["checks"]
        );
        for k in ["id", "metric", "unit", "median", "min", "max", "runs"] {
            assert!(r.get(k).is_some(), "record lacks {k}: {r}");
        }
        assert!(r["median"].as_f64().unwrap().is_finite());
        // Schema 2: the per-run figures, one per run, in round order.
        assert_eq!(
            r["values"].as_array().map(Vec::len),
            r["runs"].as_u64().map(|n| n as usize),
            "values of {r}"
        );
        assert!(r["min"].as_f64().unwrap() <= r["max"].as_f64().unwrap());
        // Schema 3: the bookkeeping's cost carries each run's A/B segment pairs.
        if r["metric"] == "bookkeeping_cost" {
            let pairs = r["pairs"].as_array().expect("bookkeeping_cost has pairs");
            assert_eq!(pairs.len(), r["values"].as_array().unwrap().len(), "{r}");
            assert!(
                pairs.iter().all(|p| !p.as_array().unwrap().is_empty()),
                "a run without pairs: {r}"
            );
        }
        if let Some(p) = r.get("percentiles") {
            for k in ["p50", "p90", "p99", "p99.9", "max"] {
                assert!(p.get(k).is_some(), "percentiles lack {k}");
            }
            assert!(p["p50"].as_f64().unwrap() <= p["p99"].as_f64().unwrap());
            let h = r["hgrm"].as_str().expect("latency record names its .hgrm");
            let text = std::fs::read_to_string(out.join(h)).unwrap();
            assert!(text.contains("Percentile") && text.contains("#[Max"));
        }
    }
    // Every latency-kind metric of the scenarios carries percentiles.
    let pp = records
        .iter()
        .find(|r| r["id"] == "pingpong/engine" && r["metric"] == "latency_one_way")
        .expect("pingpong/engine latency");
    assert!(pp.get("percentiles").is_some());

    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        records.len() + 1,
        "csv rows != records"
    );
    assert!(csv.starts_with("id,metric,unit,median,min,max,runs"));

    // Schema 2: the targets, on paired per-round ratios. Smoke has one round: no interval, so
    // no ratio target can be decided.
    let targets = summary["targets"].as_array().expect("targets");
    for t in targets {
        let v = t["verdict"].as_str().unwrap();
        match t["kind"].as_str().unwrap() {
            "ratio" => {
                assert_eq!(v, "UNDECIDED", "one round decided a target: {t}");
                assert_eq!(t["ratios"].as_array().unwrap().len(), 1, "{t}");
                assert!(t["ci95"].is_null(), "{t}");
            }
            "bound" => assert_eq!(v, "REPORTED", "{t}"),
            _ => assert!(v == "MET" || v == "NOT MET", "{t}"),
        }
    }
    let st = targets
        .iter()
        .find(|t| t["engine"] == "stream/1to1/engine" && t["kind"] == "ratio")
        .expect("stream/1to1 target");
    assert_eq!(
        st["baselines"].as_array().unwrap().len(),
        6,
        "the six multi-producer peers: {st}"
    );

    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Targets"));
    for t in [
        "route/dispatch >= 0.7x route/floor",
        "route/dispatch vs route/crossbeam-channel (the same loop through a channel",
        "pingpong/engine one-way p50 <= 1.5x",
        "stream/1to1/engine >= 1x the fastest multi-producer peer",
        "stream/2to1/engine >= 1x the fastest multi-producer peer",
        "stream/1to1/engine vs stream/1to1/rtrb (one-producer bound",
        "alloc/route",
        "UNDECIDED",
    ] {
        assert!(report.contains(t), "report.md lacks target {t}");
    }
    assert!(report.contains(".svg)"), "report.md links no plot");

    // compare: the folder against itself: ratio 1, same environment, nothing judged real.
    let cmp = Command::new(BIN)
        .arg("compare")
        .arg(&out)
        .arg(&out)
        .output()
        .unwrap();
    assert!(cmp.status.success());
    let text = String::from_utf8_lossy(&cmp.stdout);
    assert!(text.contains("1.000x"), "{text}");
    assert!(text.contains("Environment: same commit"), "{text}");
    // Smoke records have one run each: nothing can be shown real.
    assert!(text.contains("too few runs to judge"), "{text}");
    assert!(text.contains("0 regressed"), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Runs `harness run --smoke` on the scenarios matching `filter` with `runs` runs into `out`.
fn smoke_into(out: &Path, filter: &str, runs: usize) {
    let run = Command::new(BIN)
        .args(["run", "--smoke", "--no-progress", "--filter", filter])
        .args(["--runs", &runs.to_string(), "--out"])
        .arg(out)
        .output()
        .expect("run the harness");
    assert!(
        run.status.success(),
        "harness run into {} failed: {}",
        out.display(),
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn compare_prints_a_ratio_and_a_verdict_for_every_record_of_two_runs() {
    let _one = serial();
    let (a, b) = (tmpdir("cmp-a"), tmpdir("cmp-b"));
    let filter = "^(calibration/timer|route/dispatch|route/crossbeam-channel)$";
    smoke_into(&a, filter, 2);
    smoke_into(&b, filter, 2);
    let cmp = Command::new(BIN)
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(cmp.status.success());
    let text = String::from_utf8_lossy(&cmp.stdout);
    let summary = json(&a.join("summary.json"));
    let records = summary["records"].as_array().unwrap();
    assert!(records.len() >= 5, "{summary}");
    for r in records {
        let (id, metric) = (r["id"].as_str().unwrap(), r["metric"].as_str().unwrap());
        let line = text
            .lines()
            .find(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(id) && w.next() == Some(metric)
            })
            .unwrap_or_else(|| panic!("no line for {id} {metric}:\n{text}"));
        let ratio = line
            .split_whitespace()
            .find_map(|w| w.strip_suffix('x').and_then(|x| x.parse::<f64>().ok()))
            .unwrap_or_else(|| panic!("no ratio in `{line}`"));
        assert!(ratio.is_finite() && ratio > 0.0, "{line}");
        // Two runs a side: every record is judged by the test.
        assert!(
            line.ends_with("no real change")
                || line.ends_with("REAL: better")
                || line.ends_with("REAL: worse"),
            "{line}"
        );
    }
    assert!(
        text.contains(&format!("{} records compared", records.len())),
        "{text}"
    );
    // A folder without summary.json is refused with a usage error.
    let bad = Command::new(BIN)
        .arg("compare")
        .arg(&a)
        .arg(tmpdir("missing"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// Runs `harness compare --json A B`: (exit code, parsed JSON).
fn compare_json(a: &Path, b: &Path) -> (Option<i32>, serde_json::Value) {
    let cmp = Command::new(BIN)
        .args(["compare", "--json"])
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&cmp.stdout);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (cmp.status.code(), v)
}

#[test]
fn compare_json_reports_environment_and_targets_and_exits_3_on_a_regression() {
    let _one = serial();
    let a = tmpdir("cmpj-a");
    let filter = "^(route/dispatch|route/floor)$";
    smoke_into(&a, filter, harness::compare::MIN_TARGET_ROUNDS);
    // Against itself: exit 0, no environment difference, no regression, every target compared.
    let (code, v) = compare_json(&a, &a);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["regressions"], 0);
    assert_eq!(v["env_diff"].as_array().unwrap().len(), 0, "{v}");
    let route = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["target"]
                .as_str()
                .unwrap()
                .starts_with("route/dispatch >=")
        })
        .expect("route target compared");
    assert_eq!(route["verdict"], "no_real_change", "{route}");
    assert_eq!(route["change"], 1.0);

    // A2 and B: A's folder with the route target's per-round ratios set to steady figures
    // (smoke windows on a loaded machine are too noisy to rely on), B with them cut to a tenth
    // and another commit: a regression of the target, which must exit 3.
    let steady = |dir: &Path, ratios: [f64; 4], commit: &str| {
        std::fs::create_dir_all(dir).unwrap();
        let mut summary = json(&a.join("summary.json"));
        for t in summary["targets"].as_array_mut().unwrap() {
            if t["target"]
                .as_str()
                .unwrap()
                .starts_with("route/dispatch >=")
            {
                t["median"] = serde_json::json!(ratios[0]);
                t["ratios"] = serde_json::json!(ratios);
            }
        }
        std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
        let mut env = json(&a.join("env.json"));
        env["git_commit"] = serde_json::json!(commit);
        std::fs::write(dir.join("env.json"), env.to_string()).unwrap();
    };
    let (a2, b) = (tmpdir("cmpj-a2"), tmpdir("cmpj-b"));
    steady(
        &a2,
        [12.0, 12.5, 11.8, 12.2],
        "1111111111111111111111111111111111111111",
    );
    steady(
        &b,
        [1.2, 1.25, 1.18, 1.22],
        "0000000000000000000000000000000000000000",
    );
    let _ = std::fs::remove_dir_all(&a);
    let a = a2;
    let (code, v) = compare_json(&a, &b);
    assert_eq!(code, Some(3), "a regressed target must exit 3: {v}");
    assert_eq!(v["regressions"], 1, "{v}");
    assert!(v["env_diff"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["field"] == "git_commit"));
    // The other way round it is an improvement: exit 0.
    let (code, v) = compare_json(&b, &a);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["regressions"], 0, "{v}");
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn a_lost_event_fails_the_run_loudly() {
    let _one = serial();
    let out = tmpdir("lossy");
    let run = Command::new(BIN)
        .env("HARNESS_SELFTEST", "1")
        .args([
            "run",
            "--smoke",
            "--no-progress",
            "--filter",
            "^selftest/",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run the harness");
    assert_eq!(run.status.code(), Some(1), "a lossy scenario must exit 1");
    let summary = json(&out.join("summary.json"));
    let r = &summary["records"][0];
    assert_eq!(r["id"], "selftest/lossy");
    let checks = r["checks"].as_str().unwrap();
    assert!(
        checks.starts_with("failed:") && checks.contains("lost"),
        "{checks}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("FAILED"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn list_names_every_id_and_bad_plans_are_refused() {
    let _one = serial();
    let list = Command::new(BIN).arg("list").output().unwrap();
    assert!(list.status.success());
    let text = String::from_utf8_lossy(&list.stdout);
    for id in IDS {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(id)),
            "list lacks {id}"
        );
    }
    let bad = Command::new(BIN)
        .args(["run", "--smoke", "--pin", "4096", "--out"])
        .arg(tmpdir("bad"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not available"));
}
