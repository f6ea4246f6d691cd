//! Captures the machine and build a result was measured on (`env.json`), and the warnings that
//! follow from it.
//!
//! Everything comes from files the kernel exposes (`/proc/cpuinfo`, `/sys/devices/system/cpu`),
//! `systemd-detect-virt` when it exists, `git` for the commit, and what the build script recorded
//! about the compiler and profile. A missing file is recorded as `unknown` rather than guessed.

use crate::pin::CoreMap;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One CPU cache as `/sys/devices/system/cpu/cpuN/cache/indexM` describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// 1, 2, 3, ...
    pub level: String,
    /// `Data`, `Instruction` or `Unified`.
    #[serde(rename = "type")]
    pub kind: String,
    /// As the kernel writes it (`32K`).
    pub size: String,
    /// CPUs sharing this cache (`0-1`).
    pub shared_cpu_list: String,
}

/// Everything `env.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Env {
    /// Human label of the machine (`shared 2-core VM`), from `--label` or derived.
    pub label: String,
    /// Short tag used in the result folder name (`vm2core`).
    pub machine_tag: String,
    /// Host name.
    pub hostname: String,
    /// UTC date and time of the capture (ISO 8601).
    pub captured_at: String,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Logical CPUs the OS reports (`available_parallelism`).
    pub logical_cpus: usize,
    /// `/sys/devices/system/cpu/online`.
    pub online_cpus: String,
    /// Cores in the parent's affinity mask, read once before pinning.
    pub affinity_cores: Vec<usize>,
    /// SMT sibling list per CPU (`cpu0: 0,8`); a CPU alone in its list has no sibling.
    pub smt_siblings: Vec<String>,
    /// `/sys/devices/system/cpu/smt/active` (`1`, `0` or `unknown`).
    pub smt_active: String,
    /// Distinct caches across the CPUs.
    pub caches: Vec<Cache>,
    /// `/proc/cpuinfo` has the `hypervisor` flag.
    pub hypervisor_flag: bool,
    /// `systemd-detect-virt --vm` (`kvm`, `none`, or `unknown` when the tool is missing).
    pub virt_vm: String,
    /// `systemd-detect-virt --container`.
    pub virt_container: String,
    /// Frequency governor per CPU, or `unavailable (no cpufreq)`.
    pub governor: String,
    /// `/sys/devices/system/cpu/isolated` (isolcpus).
    pub isolated_cpus: String,
    /// Kernel release and version.
    pub kernel: String,
    /// `/proc/loadavg` at capture time: a busy machine shows here.
    pub loadavg: String,
    /// `rustc -V` of the compiler that built the harness.
    pub rustc: String,
    /// Build profile, opt-level, debug info, target, RUSTFLAGS.
    pub build: BuildInfo,
    /// The global allocator.
    pub allocator: String,
    /// Git commit of the workspace.
    pub git_commit: String,
    /// Tracked files differ from the commit.
    pub git_dirty: bool,
    /// The harness's own command line.
    pub args: Vec<String>,
    /// The resolved pinning plan.
    pub pin_plan: String,
    /// Cores in slot order and whether pinned.
    pub core_map: CoreMap,
    /// Run mode (`smoke`, `quick`, `full`).
    pub mode: String,
    /// Runs per scenario.
    pub runs: usize,
    /// Warnings that apply to every figure of the folder.
    pub warnings: Vec<String>,
}

/// How the harness binary was built.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BuildInfo {
    /// Cargo profile (`release`, `debug`).
    pub profile: String,
    /// Optimisation level.
    pub opt_level: String,
    /// Debug info setting.
    pub debug: String,
    /// Target triple.
    pub target: String,
    /// RUSTFLAGS in effect.
    pub rustflags: String,
    /// Whether debug assertions are compiled in.
    pub debug_assertions: bool,
}

fn read(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cmd(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut c = Command::new(program);
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    let out = c.output().ok()?;
    // systemd-detect-virt exits 1 when it prints "none"; keep its output either way.
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// The workspace root the harness was built from (for `git`), falling back to the cwd.
pub fn workspace_dir() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if built.join(".git").exists() {
        built
    } else {
        PathBuf::from(".")
    }
}

/// `(full commit, short commit, dirty)` of the workspace, `unknown` outside git.
pub fn git_state() -> (String, String, bool) {
    let dir = workspace_dir();
    let commit = cmd("git", &["rev-parse", "HEAD"], Some(&dir)).unwrap_or_else(|| "unknown".into());
    let short =
        cmd("git", &["rev-parse", "--short", "HEAD"], Some(&dir)).unwrap_or_else(|| "nogit".into());
    let dirty = cmd(
        "git",
        &["status", "--porcelain", "--untracked-files=no"],
        Some(&dir),
    )
    .is_some();
    (commit, short, dirty)
}

/// Whether the machine looks virtualised (hypervisor flag or a VM detected).
pub fn virtualised(e: &Env) -> bool {
    e.hypervisor_flag || !(e.virt_vm == "none" || e.virt_vm == "unknown")
}

/// Calendar date and time (UTC) of a Unix timestamp, as `(YYYY-MM-DD, HH:MM:SS)`.
pub fn utc(secs: u64) -> (String, String) {
    // Howard Hinnant's days-to-civil algorithm.
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60),
    )
}

/// Seconds since the Unix epoch now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The machine label used when `--label` is not given: a virtual machine is called a *shared*
/// N-core VM (its vCPUs are time-shared with other guests unless its owner says otherwise with
/// `--label`), a physical one an N-core machine. N counts the cores usable by the harness.
pub fn derived_label(is_vm: bool, cores: usize, cpu_model: &str, virt_vm: &str) -> String {
    if is_vm {
        let hv = if virt_vm == "none" || virt_vm == "unknown" {
            String::new()
        } else {
            format!(", {virt_vm}")
        };
        format!("shared {cores}-core VM ({cpu_model}{hv})")
    } else {
        format!("{cores}-core physical machine ({cpu_model})")
    }
}

/// Captures the environment. `label`/`tag` override the derived machine label and tag.
pub fn capture(
    affinity: &[usize],
    map: &CoreMap,
    pin_plan: &str,
    mode: &str,
    runs: usize,
    label: Option<&str>,
    tag: Option<&str>,
) -> Env {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_string());
    let hypervisor_flag = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    let logical_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sys = Path::new("/sys/devices/system/cpu");
    let mut cpus: Vec<usize> = std::fs::read_dir(sys)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let n = e.file_name().into_string().ok()?;
                    n.strip_prefix("cpu")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    cpus.sort_unstable();
    let mut smt_siblings = Vec::new();
    let mut caches: Vec<Cache> = Vec::new();
    let mut governors: Vec<String> = Vec::new();
    for &c in &cpus {
        let base = sys.join(format!("cpu{c}"));
        if let Some(s) = read(base.join("topology/thread_siblings_list")) {
            smt_siblings.push(format!("cpu{c}: {s}"));
        }
        if let Some(g) = read(base.join("cpufreq/scaling_governor")) {
            governors.push(format!("cpu{c}: {g}"));
        }
        for i in 0..8 {
            let idx = base.join(format!("cache/index{i}"));
            let Some(level) = read(idx.join("level")) else {
                break;
            };
            let cache = Cache {
                level,
                kind: read(idx.join("type")).unwrap_or_default(),
                size: read(idx.join("size")).unwrap_or_default(),
                shared_cpu_list: read(idx.join("shared_cpu_list")).unwrap_or_default(),
            };
            if !caches.contains(&cache) {
                caches.push(cache);
            }
        }
    }
    let governor = if governors.is_empty() {
        "unavailable (no cpufreq)".to_string()
    } else {
        let distinct: Vec<&str> = {
            let mut v: Vec<&str> = governors
                .iter()
                .filter_map(|g| g.split_once(": ").map(|x| x.1))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        if distinct.len() == 1 {
            distinct[0].to_string()
        } else {
            governors.join(", ")
        }
    };
    let virt_vm = cmd("systemd-detect-virt", &["--vm"], None).unwrap_or_else(|| "unknown".into());
    let virt_container =
        cmd("systemd-detect-virt", &["--container"], None).unwrap_or_else(|| "unknown".into());
    let (git_commit, _, git_dirty) = git_state();
    let (date, time) = utc(unix_now());
    let is_vm = hypervisor_flag || !(virt_vm == "none" || virt_vm == "unknown");
    let derived_tag = format!(
        "{}{}core",
        if is_vm { "vm" } else { "metal" },
        affinity.len()
    );
    let derived_label = derived_label(is_vm, affinity.len(), &cpu_model, &virt_vm);
    let mut env = Env {
        label: label.map_or(derived_label, str::to_string),
        machine_tag: tag.map_or(derived_tag, str::to_string),
        hostname: read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
        captured_at: format!("{date}T{time}Z"),
        cpu_model,
        logical_cpus,
        online_cpus: read(sys.join("online")).unwrap_or_else(|| "unknown".into()),
        affinity_cores: affinity.to_vec(),
        smt_siblings,
        smt_active: read(sys.join("smt/active")).unwrap_or_else(|| "unknown".into()),
        caches,
        hypervisor_flag,
        virt_vm,
        virt_container,
        governor,
        isolated_cpus: read(sys.join("isolated")).unwrap_or_default(),
        kernel: format!(
            "{} {}",
            read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            read("/proc/sys/kernel/version").unwrap_or_default()
        ),
        loadavg: read("/proc/loadavg").unwrap_or_default(),
        rustc: env!("HARNESS_BUILD_RUSTC").to_string(),
        build: BuildInfo {
            profile: env!("HARNESS_BUILD_PROFILE").to_string(),
            opt_level: env!("HARNESS_BUILD_OPT_LEVEL").to_string(),
            debug: env!("HARNESS_BUILD_DEBUG").to_string(),
            target: env!("HARNESS_BUILD_TARGET").to_string(),
            rustflags: env!("HARNESS_BUILD_RUSTFLAGS").to_string(),
            debug_assertions: cfg!(debug_assertions),
        },
        allocator: crate::alloc::ALLOCATOR_NAME.to_string(),
        git_commit,
        git_dirty,
        args: std::env::args().collect(),
        pin_plan: pin_plan.to_string(),
        core_map: map.clone(),
        mode: mode.to_string(),
        runs,
        warnings: Vec::new(),
    };
    env.warnings = warnings(&env);
    env
}

/// The machine-wide warnings: virtualisation, governor, SMT placement, debug build, no pinning.
pub fn warnings(e: &Env) -> Vec<String> {
    let mut w = Vec::new();
    if virtualised(e) {
        w.push(format!(
            "virtualised (hypervisor flag: {}, vm: {}, container: {}): vCPUs may share physical cores with other guests; read ratios, not absolute figures",
            e.hypervisor_flag, e.virt_vm, e.virt_container
        ));
    }
    if e.governor.starts_with("unavailable") {
        w.push("no CPU frequency governor is exposed (no cpufreq, usual in a VM): `performance` cannot be confirmed, clocks may vary".into());
    } else if e.governor != "performance" {
        w.push(format!(
            "CPU frequency governor is `{}`, not `performance`: clocks may ramp during runs",
            e.governor
        ));
    }
    if e.build.debug_assertions || e.build.profile != "release" {
        w.push(format!(
            "built with profile `{}` (debug assertions: {}): not a release measurement",
            e.build.profile, e.build.debug_assertions
        ));
    }
    if !e.core_map.pinned {
        w.push("--pin none: threads are not pinned; each record lists the cores its threads were seen on".into());
    }
    let smt_pairs: Vec<&String> = e
        .smt_siblings
        .iter()
        .filter(|s| s.contains(',') || s.contains('-'))
        .collect();
    if !smt_pairs.is_empty() {
        w.push(format!(
            "SMT siblings present ({}): a plan that puts two threads on siblings shares L1/L2 and flatters cross-context latency",
            smt_pairs.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
        ));
    }
    if e.git_dirty {
        w.push("the workspace has uncommitted changes (git dirty)".into());
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), ("1970-01-01".into(), "00:00:00".into()));
        assert_eq!(utc(951_782_400), ("2000-02-29".into(), "00:00:00".into()));
        assert_eq!(utc(1_700_000_000), ("2023-11-14".into(), "22:13:20".into()));
    }

    #[test]
    fn a_vm_is_labelled_a_shared_n_core_vm() {
        assert_eq!(
            derived_label(true, 2, "AMD EPYC", "kvm"),
            "shared 2-core VM (AMD EPYC, kvm)"
        );
        assert_eq!(
            derived_label(true, 4, "X", "unknown"),
            "shared 4-core VM (X)"
        );
        assert_eq!(
            derived_label(false, 8, "X", "none"),
            "8-core physical machine (X)"
        );
    }

    #[test]
    fn capture_reads_this_machine() {
        let map = CoreMap {
            cores: vec![0],
            pinned: true,
        };
        let e = capture(&[0], &map, "auto", "smoke", 1, None, Some("t"));
        assert_eq!(e.machine_tag, "t");
        assert!(e.logical_cpus >= 1);
        assert!(e.rustc.starts_with("rustc"), "{}", e.rustc);
        assert_eq!(e.build.debug_assertions, cfg!(debug_assertions));
    }
}
