//! The registry: what every thread knows about a correlator ([`Registry`]: its configuration, its
//! contexts, channels and wait graph) and about each context ([`ContextShared`]: its inbox and its
//! published counters).
//!
//! Owns the registry's data, not its behaviour: the facade (`correlator`) creates and stops
//! contexts, the context loop (`context`) publishes counters, `deliver` reads inboxes.
//!
//! The structures are generic over what an inbox holds (`I`): the engine's inboxes hold
//! `entry::Entry`s, and an entry can carry a handler's initialiser, whose `Effects` send through
//! links that hold this registry. Naming `Entry` here would close that circle of types into a
//! circle of modules; instead `shared` (above both) names the instantiation the engine uses,
//! `Shared<E>` and `ContextShared<E>`.
//!
//! May import the leaves, `channel`, `output`, `inbox`, `send` (the wait graph), `status`, `record` (what
//! recording or replaying contexts share) and `event_time` (its [`LateEvents`] setting).

use std::sync::OnceLock;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::channel::Channels;
use crate::config::{PinningPlan, WaitStrategy};
use crate::event::Event;
use crate::event_time::LateEvents;
use crate::id::ContextRef;
use crate::inbox::Inbox;
use crate::output::{OutputQueue, OutputReceiver, OutputRegistry};
use crate::record::{EventCodec, JournalShared};
pub(crate) use crate::send::WaitGraph;
use crate::status::{OutputWaitBoard, PublishedCounters};
use crate::sync::{self, Arc, AtomicBool, AtomicU64, JoinHandle, Mutex, Ordering, RwLock, Thread};

#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) capacity: usize,
    pub(crate) wait: WaitStrategy,
    pub(crate) pinning: PinningPlan,
    pub(crate) max_contexts: usize,
    pub(crate) status_interval: Option<Duration>,
    /// How often the status is published to the `metrics` facade (`export_metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) metrics_interval: Option<Duration>,
    /// Clock ticks per second; `None` when the user drives time (`external_time`).
    pub(crate) tick_rate: Option<u32>,
    /// Whether inbox events move their context's clock to their own time (`event_time`).
    pub(crate) event_time: bool,
    /// Processed inbox entries a context gives back at once (`release_batch`).
    pub(crate) release_batch: usize,
    /// How long a context waits on a full `Block` output before a warning names it; `None`: no
    /// warning (`output_block_warning`).
    pub(crate) output_block_warning: Option<Duration>,
    /// What a context does with a late event under event time (`late_events`).
    pub(crate) late_events: LateEvents,
    /// The least time between two late-event warnings of one context
    /// (`late_event_warning_interval`).
    pub(crate) late_warning_interval: Duration,
    /// Whether the correlator takes checkpoints (`checkpoints`): contexts count the events they
    /// take from each input handle.
    #[cfg(feature = "checkpoint")]
    pub(crate) checkpoints: bool,
}

impl Settings {
    /// The batch a context really uses: never more than an eighth of its inbox. A larger share
    /// starves small inboxes: senders parked on a full inbox get room only a whole batch at a
    /// time and leave the context idle while they wake (`backpressure/flood`, capacity 64; the
    /// figures are in harness/BENCHMARKS.md, "Release batch").
    pub(crate) fn effective_release_batch(&self) -> usize {
        self.release_batch.min(self.capacity / 8).max(1)
    }
}

/// State shared by the facade, every context thread and every handle, for events `E` and inboxes
/// of `I` (the engine's `I` is `Entry<E>`: see `shared::Shared`).
pub(crate) struct Registry<E: Event, I> {
    pub(crate) settings: Settings,
    /// This correlator's tag, unique in the process: every [`ContextRef`] of it carries it.
    pub(crate) tag: u32,
    /// Every context, indexed by id; append-only.
    pub(crate) contexts: RwLock<Vec<Arc<ContextShared<I>>>>,
    pub(crate) channels: Channels<E>,
    /// Every output (channel outputs and typed ones), for shutdown.
    pub(crate) outputs: OutputRegistry,
    pub(crate) waits: WaitGraph,
    pub(crate) started: AtomicBool,
    pub(crate) input_closed: AtomicBool,
    /// Set (under `creating`) when shutdown enters its stopping phase: no context is created after.
    pub(crate) stopping: AtomicBool,
    pub(crate) shut_down: AtomicBool,
    /// Channel sends nobody received (R4.5).
    pub(crate) dropped: AtomicU64,
    /// The output of late events (`LateEvents::ToOutput`), and its receiver until the user takes
    /// it (`Correlator::take_late_events`).
    pub(crate) late_output: Option<sync::StdArc<OutputQueue<E>>>,
    pub(crate) late_receiver: Mutex<Option<OutputReceiver<E>>>,
    /// Whether the tick-mode warning "events carry times the clock ignores" was logged.
    pub(crate) warned_ignored_times: AtomicBool,
    /// The cores this process may run on, read once when the correlator was built.
    pub(crate) available_cores: Vec<usize>,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Serialises context creation (ids are handed out in order).
    pub(crate) creating: Mutex<()>,
    /// Recording or replaying (see `record`), or neither.
    pub(crate) journal: Option<sync::StdArc<JournalShared>>,
    /// How input events are recorded whole and read back (`record_inputs`), if they are.
    pub(crate) input_codec: Option<sync::StdArc<dyn EventCodec<E>>>,
    /// The number of the next input handle (its [`Origin`](crate::record::Origin)).
    pub(crate) next_input: AtomicU64,
    /// Steps of per-instance and per-listener bookkeeping the contexts did (instance slots
    /// scanned at shutdown, list entries visited by compaction), added by each context when it
    /// exits: what the tests count to show that this work is linear in the instances, where a
    /// wall clock would not do.
    #[cfg(test)]
    pub(crate) work: std::sync::atomic::AtomicU64,
    /// Listener slots the contexts' look-ahead found for events waiting in their inboxes
    /// (`context::ahead`), added by each context when it exits: the tests' proof that it ran.
    #[cfg(test)]
    pub(crate) looked: std::sync::atomic::AtomicU64,
}

impl<E: Event, I> Registry<E, I> {
    pub(crate) fn input_closed(&self) -> bool {
        self.input_closed.load(Ordering::Acquire)
    }

    pub(crate) fn snapshot(&self) -> Vec<Arc<ContextShared<I>>> {
        sync::read_lock(&self.contexts).clone()
    }

    /// The context of this correlator whose thread is the calling thread, if any (a handler or
    /// hook is running). One thread-local read: no lock.
    pub(crate) fn context_of_current_thread(&self) -> Option<ContextRef> {
        // A context thread's mark is the address of its correlator's `Registry`, which cannot be
        // reused while the thread lives: the thread holds an `Arc` of it.
        let owner = self as *const Self as usize;
        sync::context_mark()
            .filter(|&(o, _)| o == owner)
            .map(|(_, id)| ContextRef::new(self.tag, id))
    }
}

/// What a context publishes for other threads: its status counters (R9.1) and its `done` count.
#[derive(Default)]
pub(crate) struct ContextStats {
    /// The counters of the status snapshot (the one list is in `status`).
    pub(crate) counters: PublishedCounters,
    /// Inbox entries fully processed (used by the shutdown scan). Written only by the context's
    /// thread.
    pub(crate) done: AtomicU64,
    /// Its waits for room in full `Block` outputs, published as they begin and end (R9.1).
    pub(crate) output_wait: OutputWaitBoard,
}

/// What other threads know about a context whose inbox holds `I`s.
pub(crate) struct ContextShared<I> {
    pub(crate) id: u32,
    /// The tag of the correlator it belongs to (see [`ContextRef`]).
    pub(crate) correlator: u32,
    pub(crate) name: String,
    pub(crate) public: bool,
    pub(crate) wait: WaitStrategy,
    /// The core the plan or the options asked for.
    pub(crate) core: Option<usize>,
    /// Whether pinning to `core` took effect (set by the thread itself).
    pub(crate) pinned: AtomicBool,
    pub(crate) inbox: Arc<Inbox<I>>,
    pub(crate) stats: CachePadded<ContextStats>,
    /// Set when the context must exit once its inbox is empty (after the shutdown scan).
    pub(crate) exit: AtomicBool,
    /// Set by the thread when it has exited.
    pub(crate) stopped: AtomicBool,
    pub(crate) thread: OnceLock<Thread>,
}

impl<I> ContextShared<I> {
    pub(crate) fn reference(&self) -> ContextRef {
        ContextRef::new(self.correlator, self.id)
    }

    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}
