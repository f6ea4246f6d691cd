//! Every output of a correlator ([`OutputRegistry`]), so that shutdown can drain and close them
//! all and an output made after shutdown is closed at once.
//!
//! Owns the registry of outputs and their shutdown phase. May import `sync` only.

use super::{Output, OutputOptions, OutputQueue};
use crate::sync::{self, AtomicU64, Ordering, StdArc, StdMutex, StdWeak};

/// What shutdown does to an output of any type.
trait OutputEnd: Send + Sync {
    fn drain(&self);
    fn close(&self);
    fn id(&self) -> u64;
    fn name(&self) -> &str;
}

impl<A: Send> OutputEnd for OutputQueue<A> {
    fn drain(&self) {
        OutputQueue::drain(self);
    }
    fn close(&self) {
        OutputQueue::close(self);
    }
    fn id(&self) -> u64 {
        OutputQueue::id(self)
    }
    fn name(&self) -> &str {
        OutputQueue::name(self)
    }
}

/// Where a correlator is in its shutdown, for its outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    Draining,
    Closed,
}

/// Every output of a correlator (weakly held: a dropped receiver's queue goes when its last
/// producer lets go of it), so that shutdown can drain and close them all, and so that an output
/// made after shutdown is closed at once. Not part of the hot path: touched when an output is made
/// and twice by shutdown.
pub(crate) struct OutputRegistry {
    inner: StdMutex<(Phase, Vec<StdWeak<dyn OutputEnd>>)>,
    /// Events dropped by outputs' policies during sends from input handles (contexts count their
    /// own in their status counters).
    pub(crate) external_drops: AtomicU64,
    /// The id of the next output made (ids start at 1).
    next_id: AtomicU64,
    /// The named typed outputs' handles (`Correlator::named_output`), by name: each an
    /// `Output<A>` of its own `A`, which `Scope::output` finds again by name and type.
    named: StdMutex<std::collections::HashMap<String, Box<dyn std::any::Any + Send + Sync>>>,
}

impl OutputRegistry {
    pub(crate) fn new() -> Self {
        Self {
            inner: StdMutex::new((Phase::Running, Vec::new())),
            external_drops: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            named: StdMutex::new(std::collections::HashMap::new()),
        }
    }

    /// Keeps `output`'s handle under `name`; `false` (and nothing kept) if the name is taken.
    pub(crate) fn name<A: Send + 'static>(&self, name: &str, output: &Output<A>) -> bool {
        let mut named = sync::lock_std(&self.named);
        if named.contains_key(name) {
            return false;
        }
        named.insert(name.to_owned(), Box::new(output.clone()));
        true
    }

    /// The handle of the typed output named `name`, if there is one of values `A`.
    pub(crate) fn named<A: Send + 'static>(&self, name: &str) -> Option<Output<A>> {
        let named = sync::lock_std(&self.named);
        named.get(name)?.downcast_ref::<Output<A>>().cloned()
    }

    /// A new output called `name` (see [`OutputQueue::name`]), registered; drained or closed at
    /// once if shutdown already began or ended.
    pub(crate) fn make<A: Send + 'static>(
        &self,
        options: OutputOptions,
        name: String,
    ) -> StdArc<OutputQueue<A>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut inner = sync::lock_std(&self.inner);
        let (phase, list) = &mut *inner;
        let queue = match phase {
            // Nothing will ever be pushed: no need for the whole ring.
            Phase::Closed => OutputQueue::new(OutputOptions::bounded(1)),
            _ => OutputQueue::new(options),
        };
        let queue = StdArc::new(queue.named(id, name));
        match phase {
            Phase::Running => {}
            Phase::Draining => queue.drain(),
            Phase::Closed => queue.close(),
        }
        if *phase != Phase::Closed {
            // Forget the outputs whose queues are gone, so the list does not grow with them.
            list.retain(|w| w.strong_count() > 0);
            let end: StdArc<dyn OutputEnd> = queue.clone();
            list.push(StdArc::downgrade(&end));
        }
        queue
    }

    fn each(&self, phase: Phase, f: impl Fn(&dyn OutputEnd)) {
        let mut inner = sync::lock_std(&self.inner);
        inner.0 = phase;
        for w in &inner.1 {
            if let Some(o) = w.upgrade() {
                f(&*o);
            }
        }
        if phase == Phase::Closed {
            inner.1.clear();
        }
    }

    /// The name of the live output `id` (for the status snapshot; not the hot path).
    pub(crate) fn name_of(&self, id: u64) -> Option<String> {
        let inner = sync::lock_std(&self.inner);
        inner
            .1
            .iter()
            .filter_map(StdWeak::upgrade)
            .find(|o| o.id() == id)
            .map(|o| o.name().to_owned())
    }

    /// Shutdown began: no output makes anyone wait any more.
    pub(crate) fn drain_all(&self) {
        self.each(Phase::Draining, |o| o.drain());
    }

    /// Shutdown ended: every stream ends once read.
    pub(crate) fn close_all(&self) {
        self.each(Phase::Closed, |o| o.close());
    }
}
