//! Settings: wait strategies, pinning plans and per-context options.
//!
//! Owns the settings and the back-off of waits. A leaf: imports nothing from the engine.

/// How an idle context, or a sender waiting for room in a full inbox, waits (SPEC R1.3).
///
/// Every strategy works with more contexts than cores; they differ in latency and CPU use:
///
/// | strategy | wake latency | CPU while idle | use when |
/// |---|---|---|---|
/// | [`BusySpin`](Self::BusySpin) | lowest (a cache-line transfer) | a full core, always | a dedicated, pinned core per context |
/// | [`SpinThenYield`](Self::SpinThenYield) | low while the core is free | a full core, but it gives way to other threads | more threads than cores, latency still matters |
/// | [`SpinYieldPark`](Self::SpinYieldPark) (default) | adds an OS wake-up (microseconds) after a short spin | none once parked | shared machines, many contexts, idle periods |
///
/// `BusySpin` never yields the core: a context with this strategy must not share its core with a
/// thread it waits for. Waiting *senders* always escalate to parking after spinning and yielding, so
/// that no strategy can livelock a machine with more contexts than cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WaitStrategy {
    /// Spin with a CPU pause hint, never yield or park.
    BusySpin,
    /// Spin [`SPIN_LIMIT`] times, then yield to the OS scheduler between checks.
    SpinThenYield,
    /// Spin [`SPIN_LIMIT`] times, yield [`YIELD_LIMIT`] times, then park until woken (no lost wake-up:
    /// see the inbox's sleep protocol).
    #[default]
    SpinYieldPark,
}

/// Spins before a waiter starts yielding.
pub const SPIN_LIMIT: u32 = 128;
/// Yields before a waiter that may park parks.
pub const YIELD_LIMIT: u32 = 16;

/// What one wait step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Spin,
    Yield,
    Park,
}

/// The escalation of one wait episode.
#[derive(Debug)]
pub(crate) struct Backoff {
    strategy: WaitStrategy,
    steps: u32,
}

impl Backoff {
    pub(crate) fn new(strategy: WaitStrategy) -> Self {
        Self { strategy, steps: 0 }
    }

    /// The next step of this episode.
    pub(crate) fn next(&mut self) -> Step {
        let step = self.steps;
        self.steps = self.steps.saturating_add(1);
        match self.strategy {
            WaitStrategy::BusySpin => Step::Spin,
            _ if step < SPIN_LIMIT => Step::Spin,
            WaitStrategy::SpinThenYield => Step::Yield,
            WaitStrategy::SpinYieldPark if step < SPIN_LIMIT + YIELD_LIMIT => Step::Yield,
            WaitStrategy::SpinYieldPark => Step::Park,
        }
    }

    /// For waits that must end by parking whatever the strategy (senders waiting for room, an
    /// output's receiver). Under `cfg(loom)` it parks at once: the spin and yield steps only delay
    /// the park, and under loom each would be one more schedule to explore.
    pub(crate) fn next_or_park(&mut self) -> Step {
        if cfg!(loom) {
            return Step::Park;
        }
        let step = self.steps;
        self.steps = self.steps.saturating_add(1);
        if step < SPIN_LIMIT {
            Step::Spin
        } else if step < SPIN_LIMIT + YIELD_LIMIT {
            Step::Yield
        } else {
            Step::Park
        }
    }

    pub(crate) fn reset(&mut self) {
        self.steps = 0;
    }
}

/// Which core each context's thread is pinned to.
///
/// The cores are checked when the correlator is built: a core this process cannot run on is an
/// [`Error::NoSuchCore`](crate::Error::NoSuchCore), not a panic. Pinning is a policy, not an
/// assumption: a plan may place several contexts on one core, and more contexts than cores work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinningPlan {
    cores: Vec<usize>,
}

impl PinningPlan {
    /// No pinning (the default): the OS schedules context threads.
    pub fn none() -> Self {
        Self::default()
    }

    /// Context number `i` in creation order (`main` is 0) is pinned to `cores[i % cores.len()]`.
    pub fn cores(cores: impl Into<Vec<usize>>) -> Self {
        Self {
            cores: cores.into(),
        }
    }

    /// The cores of the plan, in order.
    pub fn core_list(&self) -> &[usize] {
        &self.cores
    }

    /// The core for the context created `index`-th, if the plan pins it.
    pub(crate) fn core_for(&self, index: usize) -> Option<usize> {
        if self.cores.is_empty() {
            None
        } else {
            Some(self.cores[index % self.cores.len()])
        }
    }
}

/// The settings of one new context.
///
/// ```
/// use correlator::{ContextOptions, WaitStrategy};
/// let opts = ContextOptions::new("pricing").public(true).wait_strategy(WaitStrategy::SpinThenYield);
/// assert_eq!(opts.name(), "pricing");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextOptions {
    pub(crate) name: String,
    pub(crate) public: bool,
    pub(crate) wait: Option<WaitStrategy>,
    pub(crate) core: Option<usize>,
}

impl ContextOptions {
    /// A private context called `name` (names need not be unique), with the correlator's wait
    /// strategy and the pinning plan's core.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            public: false,
            wait: None,
            core: None,
        }
    }

    /// Whether the context receives the default channel `""` (SPEC R1.2, R4.2). Default: false.
    pub fn public(mut self, public: bool) -> Self {
        self.public = public;
        self
    }

    /// This context's wait strategy instead of the correlator's.
    pub fn wait_strategy(mut self, wait: WaitStrategy) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Pins this context to `core` instead of the plan's choice.
    pub fn pin_core(mut self, core: usize) -> Self {
        self.core = Some(core);
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // R1.3: every strategy that may park reaches parking; busy-spin never yields.
    #[test]
    fn r1_3_backoff_escalates() {
        let mut b = Backoff::new(WaitStrategy::SpinYieldPark);
        let steps: Vec<Step> = (0..SPIN_LIMIT + YIELD_LIMIT + 1)
            .map(|_| b.next())
            .collect();
        assert_eq!(steps[0], Step::Spin);
        assert_eq!(steps[SPIN_LIMIT as usize], Step::Yield);
        assert_eq!(*steps.last().unwrap(), Step::Park);
        let mut y = Backoff::new(WaitStrategy::SpinThenYield);
        assert!((0..1000).map(|_| y.next()).all(|s| s != Step::Park));
        let mut s = Backoff::new(WaitStrategy::BusySpin);
        assert!((0..1000).map(|_| s.next()).all(|s| s == Step::Spin));
        let mut senders = Backoff::new(WaitStrategy::BusySpin);
        assert_eq!(
            (0..1000).map(|_| senders.next_or_park()).last(),
            Some(Step::Park)
        );
    }

    #[test]
    fn pinning_plan_cycles_over_its_cores() {
        let p = PinningPlan::cores(vec![3, 5]);
        assert_eq!(
            (0..4).map(|i| p.core_for(i)).collect::<Vec<_>>(),
            [Some(3), Some(5), Some(3), Some(5)]
        );
        assert_eq!(PinningPlan::none().core_for(0), None);
    }
}
