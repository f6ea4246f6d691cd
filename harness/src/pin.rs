//! The pinning plan: which core each measured thread gets, and proof that it got it.
//!
//! The parent process reads the usable core list **once**, before anything is pinned
//! ([`available_cores`]): `core_affinity::get_core_ids()` reports the *calling thread's* mask, so a
//! second read from a pinned thread (or from a thread spawned by one) sees a single core and every
//! later "pin to core 1" silently lands on core 0. The resolved list is handed to each child
//! process on its command line, and children never read the mask themselves.
//!
//! A scenario names its threads by *slot* (0, 1, 2, ...); slot `i` runs on `cores[i % len]`, the
//! same rule the engine's `PinningPlan::cores` applies to contexts in creation order, so that an
//! engine scenario and its baseline twin put their threads on the same cores. Every pinned thread
//! checks `sched_getcpu()` right after pinning and again when it finishes, and the scenario
//! reports a [`Placement`] per thread; a mismatch becomes a warning in the results.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What `--pin` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinPlan {
    /// Every core of the parent's affinity mask, in ascending order (the default).
    Auto,
    /// No pinning: threads go where the scheduler puts them (their cores are still recorded).
    None,
    /// These cores, in this order: slot `i` gets `cores[i % len]`.
    Cores(Vec<usize>),
}

impl PinPlan {
    /// Parses `auto`, `none`, or a list such as `0,2,4-7`.
    ///
    /// # Errors
    /// A message naming the part of the plan that is not a core number or a range.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" | "" => Ok(PinPlan::Auto),
            "none" | "off" => Ok(PinPlan::None),
            list => {
                let mut cores = Vec::new();
                for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let bad = || {
                        format!("--pin: `{part}` is not a core number or a range like 2-5 (use auto, none, or e.g. 0,1,4-7)")
                    };
                    if let Some((a, b)) = part.split_once('-') {
                        let a: usize = a.trim().parse().map_err(|_| bad())?;
                        let b: usize = b.trim().parse().map_err(|_| bad())?;
                        if b < a {
                            return Err(bad());
                        }
                        cores.extend(a..=b);
                    } else {
                        cores.push(part.parse().map_err(|_| bad())?);
                    }
                }
                if cores.is_empty() {
                    return Err("--pin: the core list is empty".into());
                }
                Ok(PinPlan::Cores(cores))
            }
        }
    }
}

impl fmt::Display for PinPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinPlan::Auto => write!(f, "auto"),
            PinPlan::None => write!(f, "none"),
            PinPlan::Cores(c) => write!(f, "{}", join(c)),
        }
    }
}

/// Formats a core list as `0,1,2`.
pub fn join(cores: &[usize]) -> String {
    cores
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The cores this process may run on, read from the calling thread's affinity mask. Call it once,
/// in the parent, before pinning anything (see the module docs).
pub fn available_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        // No affinity information: fall back to 0..parallelism (pinning will be attempted and
        // verified like any other plan).
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        ids = (0..n).collect();
    }
    ids
}

/// The resolved plan handed to every child: the core list and whether to pin at all.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreMap {
    /// Cores in slot order (for `none`, the available cores, used only to size scenarios).
    pub cores: Vec<usize>,
    /// Whether threads are pinned.
    pub pinned: bool,
}

impl CoreMap {
    /// Resolves `plan` against the cores that are available.
    ///
    /// # Errors
    /// When the plan names a core that is not in `available`.
    pub fn resolve(plan: &PinPlan, available: &[usize]) -> Result<Self, String> {
        match plan {
            PinPlan::Auto => Ok(CoreMap {
                cores: available.to_vec(),
                pinned: true,
            }),
            PinPlan::None => Ok(CoreMap {
                cores: available.to_vec(),
                pinned: false,
            }),
            PinPlan::Cores(c) => {
                if let Some(bad) = c.iter().find(|c| !available.contains(c)) {
                    return Err(format!(
                        "--pin: core {bad} is not available to this process (available: {}); pick cores from that list",
                        join(available)
                    ));
                }
                Ok(CoreMap {
                    cores: c.clone(),
                    pinned: true,
                })
            }
        }
    }

    /// Number of distinct cores in the plan.
    pub fn distinct(&self) -> usize {
        let mut c = self.cores.clone();
        c.sort_unstable();
        c.dedup();
        c.len()
    }

    /// The core for slot `slot`, or `None` when not pinning.
    pub fn core_for(&self, slot: usize) -> Option<usize> {
        if self.pinned && !self.cores.is_empty() {
            Some(self.cores[slot % self.cores.len()])
        } else {
            None
        }
    }

    /// The cores of slots `0..n` (for the engine's pinning plan), or `None` when not pinning.
    pub fn cores_for_slots(&self, n: usize) -> Option<Vec<usize>> {
        (0..n).map(|s| self.core_for(s)).collect()
    }
}

/// The core the calling thread is running on right now (`sched_getcpu`).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// The core the calling thread last ran on according to the kernel
/// (`/proc/thread-self/stat`, field 39); a second witness next to `sched_getcpu`.
pub fn proc_stat_cpu() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The command name (field 2) may contain spaces; fields after the closing ')' are plain.
    let rest = &s[s.rfind(')')? + 2..];
    // `rest` starts at field 3, so field 39 is index 36.
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// Pins the calling thread to `core` and checks that it now runs there.
/// Returns whether the pin was verified.
pub fn pin_current(core: usize) -> bool {
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        return false;
    }
    // The kernel migrates the thread before sched_setaffinity returns; one yield makes sure
    // the migration has been observed even on kernels that defer it.
    if current_cpu() != Some(core) {
        std::thread::yield_now();
    }
    current_cpu() == Some(core)
}

/// Where one measured thread was meant to run and where it was seen running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The thread's role in the scenario (`sender0`, `receiver`, `context a`, ...).
    pub role: String,
    /// The core the plan gave it (`None` when not pinning).
    pub planned: Option<usize>,
    /// Distinct cores it was seen on (samples at start and end of its measured work).
    pub observed: Vec<usize>,
    /// Planned is `None`, or every observation equals the planned core.
    pub verified: bool,
}

impl Placement {
    /// A placement from a planned core and the cores seen.
    pub fn new(role: impl Into<String>, planned: Option<usize>, seen: &[Option<usize>]) -> Self {
        let mut observed: Vec<usize> = seen.iter().flatten().copied().collect();
        observed.sort_unstable();
        observed.dedup();
        let verified = match planned {
            None => true,
            Some(p) => !observed.is_empty() && observed.iter().all(|&o| o == p),
        };
        Placement {
            role: role.into(),
            planned,
            observed,
            verified,
        }
    }

    /// `role@planned(seen)` for logs and reports.
    pub fn describe(&self) -> String {
        let planned = self.planned.map_or("-".to_string(), |p| p.to_string());
        format!("{}@{}(seen {})", self.role, planned, join(&self.observed))
    }
}

/// A measured thread's record of its own placement: pins at start, samples at the end.
pub struct Probe {
    role: String,
    planned: Option<usize>,
    seen: Vec<Option<usize>>,
}

impl Probe {
    /// Pins the calling thread to `planned` (if any) and takes the first sample.
    pub fn start(role: impl Into<String>, planned: Option<usize>) -> Self {
        if let Some(core) = planned {
            pin_current(core);
        }
        Probe {
            role: role.into(),
            planned,
            seen: vec![current_cpu(), proc_stat_cpu()],
        }
    }

    /// Takes the last sample and returns the placement.
    pub fn finish(mut self) -> Placement {
        self.seen.push(current_cpu());
        self.seen.push(proc_stat_cpu());
        Placement::new(self.role, self.planned, &self.seen)
    }
}

/// Sets the calling thread's affinity mask to `cores` (inherited by the threads and processes
/// it spawns afterwards). The parent uses it to keep itself off the measured cores when there
/// are spare ones; a child widens its own mask back to the plan's cores at start, because the
/// engine's builder validates a pinning plan against the *calling thread's* mask.
pub fn set_current_mask(cores: &[usize]) -> bool {
    if cores.is_empty() {
        return false;
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        // SAFETY: CPU_SET writes one bit of `set`; `c` is below CPU_SETSIZE for any real core.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 means the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// The calling thread's affinity mask, read with `sched_getaffinity`.
pub fn current_mask() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 = calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads one bit of a valid set; `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(PinPlan::parse("auto").unwrap(), PinPlan::Auto);
        assert_eq!(PinPlan::parse("none").unwrap(), PinPlan::None);
        assert_eq!(
            PinPlan::parse("0, 2,4-6").unwrap(),
            PinPlan::Cores(vec![0, 2, 4, 5, 6])
        );
        assert!(PinPlan::parse("1-0").is_err());
        assert!(PinPlan::parse("x").is_err());
    }

    #[test]
    fn resolve_rejects_unavailable_core_and_wraps_slots() {
        let avail = [0, 1];
        assert!(CoreMap::resolve(&PinPlan::Cores(vec![0, 5]), &avail).is_err());
        let m = CoreMap::resolve(&PinPlan::Auto, &avail).unwrap();
        assert_eq!(m.core_for(0), Some(0));
        assert_eq!(m.core_for(3), Some(1));
        assert_eq!(m.cores_for_slots(3), Some(vec![0, 1, 0]));
        let none = CoreMap::resolve(&PinPlan::None, &avail).unwrap();
        assert_eq!(none.core_for(0), None);
    }

    #[test]
    fn placement_verification() {
        assert!(Placement::new("a", Some(1), &[Some(1), Some(1)]).verified);
        assert!(!Placement::new("a", Some(1), &[Some(1), Some(0)]).verified);
        assert!(!Placement::new("a", Some(1), &[None]).verified);
        assert!(Placement::new("a", None, &[Some(0), Some(1)]).verified);
    }

    #[test]
    fn proc_stat_and_sched_getcpu_agree_when_pinned() {
        let cores = available_cores();
        let core = *cores.last().unwrap();
        let p = std::thread::spawn(move || {
            let probe = Probe::start("t", Some(core));
            probe.finish()
        })
        .join()
        .unwrap();
        assert!(p.verified, "{p:?}");
        assert_eq!(p.observed, vec![core]);
    }
}
