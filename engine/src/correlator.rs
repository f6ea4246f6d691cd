//! The public facade: the builder, the correlator, the registry of contexts, and shutdown.
//!
//! # Shutdown (R8.1)
//! 1. External input closes: every inbox refuses input handles from now on (one atomic flag in each
//!    inbox's tail word, so a handle's reservation is either before it, and counted, or refused).
//! 2. No output makes anyone wait any more: a full output with the `Block` policy takes what is
//!    still emitted beyond its bound (see the `output` module), so that a receiver read only after
//!    `shutdown` returns cannot hang it. If the correlator was never started, it starts, so that
//!    everything accepted is processed.
//! 3. Quiescence is detected by scanning every context twice: if both scans find every inbox count at
//!    zero and every context's "entries done" counter unchanged, no context processed anything in
//!    between, and since a context releases an entry's inbox place only after it (and all it routed)
//!    is processed, nothing was in flight either: no new work can appear. Otherwise scan again.
//! 4. *Stopping*: context creation closes (under the lock that creates contexts, so the list of
//!    threads to join is complete), every inbox closes, and only then is every thread told to exit;
//!    each ends its remaining instances with [`DieReason::Shutdown`](crate::DieReason::Shutdown) and
//!    exits; the threads are joined. From this point an `on_die` hook can still route, emit and
//!    send to output receivers, but creating a context is refused ([`Error::ShutDown`]), every send
//!    or `spawn_to` into a context is refused ([`Error::ContextStopped`]: all inboxes are closed
//!    before any instance ends), and a local `spawn` is dropped: a refused spawn runs no
//!    initialiser and creates no instance, so no `on_die` is owed for it, and an `on_die` that
//!    spawns again cannot keep shutdown going.
//!
//! Concurrent calls are serialised: the first performs the shutdown, the others wait for it and
//! return its result. `shutdown_async` goes through the same lock from a thread of its own, which
//! holds the shared state and the [`Lifecycle`] (helper threads and the result), not the
//! correlator: the future borrows nothing. A call from a context's own thread (a handler or hook) is refused with
//! [`Error::ShutdownFromContext`]: it would wait for itself.
//!
//! The facade, on top of everything: owns the builder, the shutdown sequence and the status
//! snapshot's assembly; imported by nothing but `lib.rs` and `pool` (built on the public facade). May import every
//! other module but `pool`.

use std::time::{Duration, Instant};

use crate::channel::{Channel, Channels};
use crate::config::{ContextOptions, PinningPlan, WaitStrategy};
use crate::context::create_context;
use crate::deliver::{Links, NoPlaces, Wait};
use crate::error::Error;
use crate::event::Event;
use crate::event_time::{LateEvents, DEFAULT_LATE_WARNING_INTERVAL};
use crate::handle::InputHandle;
use crate::id::ContextRef;
use crate::inbox::MAX_CAPACITY;
use crate::monitor::Monitor;
use crate::output::{Output, OutputOptions, OutputReceiver, OutputRegistry};
use crate::registry::{Config, WaitGraph};
use crate::shared::Shared;
use crate::status::{BlockedOnOutput, ContextStatus, Status};
use crate::sync::{self, Arc, AtomicBool, AtomicU64, JoinHandle, Mutex, Ordering, RwLock};
use crate::time::Time;

/// The default inbox capacity (SPEC R5.1).
pub const DEFAULT_INBOX_CAPACITY: usize = 20_000;
/// The default limit on contexts.
pub const DEFAULT_MAX_CONTEXTS: usize = 256;
/// The default limit on channel names.
pub const DEFAULT_MAX_CHANNELS: usize = 1024;
/// The largest [`CorrelatorBuilder::max_contexts`]. Every context is an OS thread, and the
/// correlator sizes its tables for `max_contexts` when it is built (per channel, one subscription
/// bit per context): with both limits at their maxima those tables take 32 MiB.
pub const MAX_CONTEXTS: usize = 4096;
/// The largest [`CorrelatorBuilder::max_channels`] (see [`MAX_CONTEXTS`] for the memory it sizes).
pub const MAX_CHANNELS: usize = 65_536;
/// The default rate of the clock thread's ticks, per second (R7.1).
pub const DEFAULT_TICK_RATE: u32 = 10;
/// Default of [`CorrelatorBuilder::release_batch`].
pub const DEFAULT_RELEASE_BATCH: usize = 128;

/// Builds a [`Correlator`]; every setting has a documented default.
///
/// ```
/// use correlator::{Correlator, Event, PinningPlan, WaitStrategy};
/// # #[derive(Clone, Debug)] struct Tick;
/// # impl Event for Tick { type Kind = (); fn kind(&self) {} }
/// let c = Correlator::<Tick>::builder()
///     .inbox_capacity(1024)
///     .wait_strategy(WaitStrategy::SpinThenYield)
///     .pinning(PinningPlan::none())
///     .build()?;
/// # Ok::<(), correlator::Error>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "call build() to create the correlator"]
pub struct CorrelatorBuilder<E> {
    config: Config,
    max_channels: usize,
    _event: std::marker::PhantomData<fn() -> E>,
}

impl<E: Event> Default for CorrelatorBuilder<E> {
    fn default() -> Self {
        Self {
            config: Config {
                capacity: DEFAULT_INBOX_CAPACITY,
                wait: WaitStrategy::default(),
                pinning: PinningPlan::none(),
                max_contexts: DEFAULT_MAX_CONTEXTS,
                status_interval: None,
                #[cfg(feature = "metrics")]
                metrics_interval: None,
                tick_rate: Some(DEFAULT_TICK_RATE),
                event_time: false,
                release_batch: DEFAULT_RELEASE_BATCH,
                output_block_warning: Some(crate::output::DEFAULT_OUTPUT_BLOCK_WARNING),
                late_events: LateEvents::Process,
                late_warning_interval: DEFAULT_LATE_WARNING_INTERVAL,
            },
            max_channels: DEFAULT_MAX_CHANNELS,
            _event: std::marker::PhantomData,
        }
    }
}

impl<E: Event> CorrelatorBuilder<E> {
    /// Capacity of every context's inbox, in entries (default [`DEFAULT_INBOX_CAPACITY`] = 20,000).
    /// A sender that finds an inbox full waits for room (R5.1).
    ///
    /// Every context allocates its whole inbox when it is created: `capacity` places of an event
    /// (plus a tag) and an 8-byte stamp, each rounded up to a 64-byte cache line when that comes
    /// to 32 to 64 bytes other than 40 (harness/BENCHMARKS.md, "Slot layout", says why).
    /// [`build`](Self::build) and `create_context` return [`Error::InvalidCapacity`] outside
    /// `1..=`[`MAX_INBOX_CAPACITY`](crate::MAX_INBOX_CAPACITY) and [`Error::AllocationFailed`]
    /// when the memory cannot be allocated; an allocation the operating system grants but cannot
    /// back when it is written is beyond what the engine can see, so size inboxes for the machine.
    pub fn inbox_capacity(mut self, capacity: usize) -> Self {
        self.config.capacity = capacity;
        self
    }

    /// How many processed inbox entries a context gives back to its inbox's free count at once
    /// (default [`DEFAULT_RELEASE_BATCH`] = 128; never more than an eighth of the inbox capacity).
    ///
    /// Giving places back is a store of the inbox's freed position plus one read-modify-write of
    /// a word only the context and waiting senders touch (a locked instruction); batching pays
    /// that once per batch instead of once per entry. The cost is that a sender waiting for room
    /// may wait up to that many entries longer. A context always gives
    /// back everything it holds when its inbox has nothing ready and before a send of its own
    /// finds an inbox full, so batching never makes a context wait (R5.1, R5.2) or delays a
    /// shutdown (R8.1). `1` gives each place back as soon as its entry is processed. The status
    /// counters (R9.1) are published at the same moments.
    pub fn release_batch(mut self, entries: usize) -> Self {
        self.config.release_batch = entries;
        self
    }

    /// How idle contexts wait (default [`WaitStrategy::SpinYieldPark`]); a context's options can
    /// override it.
    pub fn wait_strategy(mut self, wait: WaitStrategy) -> Self {
        self.config.wait = wait;
        self
    }

    /// Which core each context is pinned to (default: none).
    pub fn pinning(mut self, plan: PinningPlan) -> Self {
        self.config.pinning = plan;
        self
    }

    /// The most contexts the correlator can hold (default [`DEFAULT_MAX_CONTEXTS`] = 256; at most
    /// [`MAX_CONTEXTS`], else [`build`](Self::build) returns [`Error::LimitTooLarge`]).
    pub fn max_contexts(mut self, max: usize) -> Self {
        self.config.max_contexts = max;
        self
    }

    /// The most channel names (default [`DEFAULT_MAX_CHANNELS`] = 1024; at most [`MAX_CHANNELS`],
    /// else [`build`](Self::build) returns [`Error::LimitTooLarge`]).
    pub fn max_channels(mut self, max: usize) -> Self {
        self.max_channels = max;
        self
    }

    /// Warns through `tracing` (level WARN, target `correlator::deliver`) when a context has
    /// waited `after` for room in a full [`Overflow::Block`](crate::Overflow::Block) output: the
    /// line names the context and the output (its [`name`](crate::OutputReceiver::name) and id),
    /// as [`ContextStatus::blocked_on_output`](crate::ContextStatus::blocked_on_output) does.
    /// Rate-limited: while the same wait goes on, it warns again after 2, 4, 8, … times `after`,
    /// so a context logs at most one line per `after`. Default
    /// `Some(`[`DEFAULT_OUTPUT_BLOCK_WARNING`](crate::DEFAULT_OUTPUT_BLOCK_WARNING)`)` (1 s);
    /// `None` turns the warning off (the status still shows the wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// use correlator::{Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Alert;
    /// # impl Event for Alert { type Kind = (); fn kind(&self) {} }
    /// let quiet = Correlator::<Alert>::builder().output_block_warning(None).build()?;
    /// let eager = Correlator::<Alert>::builder()
    ///     .output_block_warning(Some(Duration::from_millis(100)))
    ///     .build()?;
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn output_block_warning(mut self, after: Option<Duration>) -> Self {
        self.config.output_block_warning = after;
        self
    }

    /// Logs a status line through `tracing` (target `correlator::status`, level INFO) every
    /// `interval` while the correlator runs (default: off).
    pub fn status_interval(mut self, interval: Duration) -> Self {
        self.config.status_interval = Some(interval);
        self
    }

    /// Publishes the status to the `metrics` facade ([`metrics::export`](crate::metrics::export),
    /// see [`crate::metrics`] for the names) every `interval` while the correlator runs, from a
    /// helper thread that sleeps in between, and once more when it has shut down (default: off;
    /// feature `metrics`). The metrics are described ([`metrics::describe`](crate::metrics::describe))
    /// when the correlator starts. Install the recorder before `start()`.
    ///
    /// # Example
    /// ```
    /// # use correlator::{Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Tick;
    /// # impl Event for Tick { type Kind = (); fn kind(&self) {} }
    /// use std::time::Duration;
    /// let c = Correlator::<Tick>::builder()
    ///     .export_metrics(Duration::from_secs(5))
    ///     .build()?;
    /// c.start();
    /// # Ok::<(), correlator::Error>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn export_metrics(mut self, interval: Duration) -> Self {
        self.config.metrics_interval = Some(interval);
        self
    }

    /// How many clock ticks per second the correlator's clock thread sends to every context
    /// (default [`DEFAULT_TICK_RATE`] = 10). Logical time counts from `start()`. A tick that finds an
    /// inbox full is skipped for that context: the next one carries the later time, and timers
    /// catch up in order (R7.2).
    ///
    /// **Resolution.** An event is evaluated at the time of the last tick its context took, and a
    /// timer fires at the first tick at or after its due time: `wait(d)` and `within(d)` are
    /// counted in whole tick periods. At the default 10 per second, `within(50ms)` means "before
    /// the next tick": a cancel 65 ms after its trade can match, and whether it does depends on
    /// when they arrived. Registering a `wait` or `within` shorter than the period logs a warning
    /// (once per monitor type and context). For bounds measured on the events themselves, at any
    /// replay speed, use [`event_time`](Self::event_time).
    ///
    /// **Cost** (measured by the harness, `ticks/cost`, on a 2-core VM with the default wait
    /// strategy and no input): every tick is one inbox entry per context, and each wakes a parked
    /// context, which spins and yields a little before it parks again: about 50 µs of CPU per
    /// tick and context. Idle process CPU, 1 context: 0.06 % of a core at 10 ticks/s, 0.6 % at
    /// 100, 4.3 % at 1,000; with 4 contexts 0.27 %, 2.5 % and 18.5 %; without a clock thread
    /// 0.001 %. Inbox entries: `rate × contexts` per second.
    ///
    /// Of `tick_rate`, [`external_time`](Self::external_time) and
    /// [`event_time`](Self::event_time), the last one called wins (R7.1).
    pub fn tick_rate(mut self, per_second: u32) -> Self {
        self.config.tick_rate = Some(per_second);
        self.config.event_time = false;
        self
    }

    /// No clock thread: logical time advances only through
    /// [`InputHandle::send_time`](crate::InputHandle::send_time) and
    /// [`send_time_to`](crate::InputHandle::send_time_to). This is what replays and tests use: every
    /// run then processes the same entries in the same order.
    ///
    /// Of [`tick_rate`](Self::tick_rate), `external_time` and [`event_time`](Self::event_time),
    /// the last one called wins (R7.1).
    pub fn external_time(mut self) -> Self {
        self.config.tick_rate = None;
        self.config.event_time = false;
        self
    }

    /// Event time: no clock thread; each context advances its logical clock to the timestamp of
    /// every event it takes from its inbox ([`Event::time`]) before dispatching it, firing first
    /// every timer due at or before that time, in time order, each at its own due time (R7.1,
    /// R7.2). The output then depends only on the events and their stamps, never on the wall
    /// clock: a recorded stream replayed fast or slowly gives the same matches.
    ///
    /// Per context the clock never goes back: an event stamped before its context's clock is
    /// processed at the clock's time and counted in
    /// [`ContextStatus::late_events`](crate::ContextStatus::late_events); an event without a time
    /// keeps the clock where it is; routed events are dispatched at the time of the inbox entry
    /// they come from. [`InputHandle::send_time`](crate::InputHandle::send_time) still moves the
    /// clocks forward, to fire what is pending at the end of a stream. Of `tick_rate`,
    /// `external_time` and `event_time`, the last one called wins.
    ///
    /// ```
    /// use correlator::{Correlator, Event, Time};
    /// # #[derive(Clone, Debug)] struct Stamped(u64);
    /// # impl Event for Stamped {
    /// #     type Kind = ();
    /// #     fn kind(&self) {}
    /// #     fn time(&self) -> Option<Time> { Some(Time::from_millis(self.0)) }
    /// # }
    /// let c = Correlator::<Stamped>::builder().event_time().build()?;
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn event_time(mut self) -> Self {
        self.config.tick_rate = None;
        self.config.event_time = true;
        self
    }

    /// What a context does with a *late* event under [`event_time`](Self::event_time), one
    /// stamped before its context's clock (default [`LateEvents::Process`]: dispatched at the
    /// clock's time). Whatever the policy, every late event counts in
    /// [`ContextStatus::late_events`](crate::ContextStatus::late_events) and is reported in a
    /// rate-limited warning ([`late_event_warning_interval`](Self::late_event_warning_interval)).
    /// With [`LateEvents::ToOutput`], read them through
    /// [`Correlator::take_late_events`]. Under ticks or external time no event is late.
    ///
    /// ```
    /// use correlator::{Correlator, Event, LateEvents, Time};
    /// # #[derive(Clone, Debug)] struct Stamped(u64);
    /// # impl Event for Stamped {
    /// #     type Kind = ();
    /// #     fn kind(&self) {}
    /// #     fn time(&self) -> Option<Time> { Some(Time::from_millis(self.0)) }
    /// # }
    /// let c = Correlator::<Stamped>::builder()
    ///     .event_time()
    ///     .late_events(LateEvents::Drop)
    ///     .build()?;
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn late_events(mut self, policy: LateEvents) -> Self {
        self.config.late_events = policy;
        self
    }

    /// The least time between two late-event warnings of one context (default
    /// [`DEFAULT_LATE_WARNING_INTERVAL`](crate::DEFAULT_LATE_WARNING_INTERVAL) = 10 s). Under
    /// event time a context logs a `tracing` warning at its first late event, then at most one per
    /// interval, saying how many late events came since the last one, how far behind the clock
    /// they were, and the likely cause (several feeders sending one context's or one key's
    /// events). Measured on the wall clock: warnings are for people. `Duration::MAX` logs only
    /// the first.
    pub fn late_event_warning_interval(mut self, interval: Duration) -> Self {
        self.config.late_warning_interval = interval;
        self
    }

    /// Checks the settings and creates the correlator with its `main` context (public). No event is
    /// taken before [`Correlator::start`].
    ///
    /// # Errors
    /// [`Error::InvalidCapacity`], [`Error::InvalidLimit`] for a limit of zero,
    /// [`Error::LimitTooLarge`] for `max_contexts` above [`MAX_CONTEXTS`] or `max_channels` above
    /// [`MAX_CHANNELS`], [`Error::AllocationFailed`] for an inbox the memory cannot hold,
    /// [`Error::NoSuchCore`] for a pinning plan naming a core this process cannot run on,
    /// [`Error::InvalidOutputCapacity`] for a [`LateEvents::ToOutput`] bound outside
    /// `1..=`[`MAX_OUTPUT_CAPACITY`](crate::MAX_OUTPUT_CAPACITY),
    /// [`Error::ThreadSpawn`]. Never a panic or an abort, whatever the values.
    pub fn build(self) -> Result<Correlator<E>, Error> {
        let config = self.config;
        let late_options = match config.late_events {
            LateEvents::ToOutput(options) => Some(options.checked()?),
            LateEvents::Process | LateEvents::Drop => None,
        };
        if config.capacity == 0 || config.capacity > MAX_CAPACITY {
            return Err(Error::InvalidCapacity {
                requested: config.capacity,
                max: MAX_CAPACITY,
            });
        }
        if config.max_contexts == 0 {
            return Err(Error::InvalidLimit {
                setting: "max_contexts",
            });
        }
        if config.release_batch == 0 {
            return Err(Error::InvalidLimit {
                setting: "release_batch",
            });
        }
        if config.tick_rate == Some(0) {
            return Err(Error::InvalidLimit {
                setting: "tick_rate",
            });
        }
        if self.max_channels == 0 {
            return Err(Error::InvalidLimit {
                setting: "max_channels",
            });
        }
        // The tables sized by these two are allocated below, before any context exists.
        for (setting, requested, max) in [
            ("max_contexts", config.max_contexts, MAX_CONTEXTS),
            ("max_channels", self.max_channels, MAX_CHANNELS),
        ] {
            if requested > max {
                return Err(Error::LimitTooLarge {
                    setting,
                    requested,
                    max,
                });
            }
        }
        // Read the core list once, before anything is pinned: a pinned thread sees only its own core.
        let available_cores: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect();
        for &core in config.pinning.core_list() {
            if !available_cores.contains(&core) {
                return Err(Error::NoSuchCore {
                    core,
                    available: available_cores,
                });
            }
        }
        let outputs = OutputRegistry::new();
        let late_output =
            late_options.map(|options| outputs.make::<E>(options, "late events".to_string()));
        let late_receiver = late_output.clone().map(OutputReceiver::new);
        let shared = Arc::new(Shared {
            channels: Channels::new(self.max_channels, config.max_contexts),
            outputs,
            late_output,
            late_receiver: Mutex::new(late_receiver),
            warned_ignored_times: AtomicBool::new(false),
            waits: WaitGraph::new(config.max_contexts),
            contexts: RwLock::new(Vec::new()),
            started: AtomicBool::new(false),
            input_closed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            available_cores,
            threads: Mutex::new(Vec::new()),
            creating: Mutex::new(()),
            #[cfg(test)]
            work: std::sync::atomic::AtomicU64::new(0),
            tag: sync::next_correlator_tag(),
            config,
        });
        let main = create_context(&shared, ContextOptions::new("main").public(true), false)?;
        Ok(Correlator {
            shared,
            main,
            life: Arc::new(Lifecycle::new()),
        })
    }
}

/// A helper thread (status line, clock) that parks between its periodic jobs.
struct Periodic {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Periodic {
    /// Runs `job` every `interval` on a parked helper thread until stopped.
    fn start(
        name: &str,
        interval: Duration,
        mut job: impl FnMut() + Send + 'static,
    ) -> Option<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // It never competes with the contexts for a core: it sleeps between jobs.
        let thread = sync::spawn_named(name.to_owned(), move || {
            let mut next = Instant::now() + interval;
            while !flag.load(Ordering::Acquire) {
                let now = Instant::now();
                if now < next {
                    sync::park_timeout(next - now);
                    continue;
                }
                next += interval;
                job();
            }
        })
        .ok()?;
        Some(Self { stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

/// An event correlator: contexts, monitors, listeners, channels (see the crate docs).
///
/// Dropping a correlator that was not shut down shuts it down gracefully.
pub struct Correlator<E: Event> {
    shared: Arc<Shared<E>>,
    main: ContextRef,
    /// The helper threads and the shutdown's result, shared with a shutdown running on a thread
    /// of its own ([`shutdown_async`](Self::shutdown_async)).
    life: Arc<Lifecycle>,
}

/// What starting and shutting down need besides the contexts' [`Shared`] state: the helper
/// threads and the shutdown's result. It does not depend on the event type, and it lives apart
/// from the [`Correlator`] (both behind an `Arc`), so that a shutdown on a thread of its own
/// reaches everything it needs without borrowing the correlator, which may then be dropped.
struct Lifecycle {
    status_logger: Mutex<Option<Periodic>>,
    /// The `export_metrics` job.
    #[cfg(feature = "metrics")]
    metrics_exporter: Mutex<Option<Periodic>>,
    clock: Mutex<Option<Periodic>>,
    /// The result of the shutdown, once one ran; held while it runs, so that concurrent calls
    /// (blocking and async alike) wait for it and report it.
    shutdown: Mutex<Option<Result<Status, Error>>>,
    /// Set when `shutdown_async` handed the shutdown to a thread of its own (cleared only if that
    /// thread could not be started): it sees the shutdown through, so a drop need not wait.
    handed_off: AtomicBool,
}

impl Lifecycle {
    fn new() -> Self {
        Self {
            status_logger: Mutex::new(None),
            #[cfg(feature = "metrics")]
            metrics_exporter: Mutex::new(None),
            clock: Mutex::new(None),
            shutdown: Mutex::new(None),
            handed_off: AtomicBool::new(false),
        }
    }

    /// [`Correlator::start`] over the shared state.
    fn start<E: Event>(&self, shared: &Arc<Shared<E>>) {
        if shared.started.swap(true, Ordering::AcqRel) {
            return;
        }
        for ctx in shared.snapshot() {
            ctx.unpark();
        }
        if let Some(interval) = shared.config.status_interval {
            let shared = shared.clone();
            let logger = Periodic::start("correlator-status", interval, move || {
                let status = status_of(&shared);
                tracing::info!(target: "correlator::status", "{status}");
            });
            *sync::lock(&self.status_logger) = logger;
        }
        #[cfg(feature = "metrics")]
        if let Some(interval) = shared.config.metrics_interval {
            crate::metrics::describe();
            let shared = shared.clone();
            let exporter = Periodic::start("correlator-metrics", interval, move || {
                crate::metrics::export(&status_of(&shared));
            });
            *sync::lock(&self.metrics_exporter) = exporter;
        }
        if let Some(rate) = shared.config.tick_rate {
            self.start_clock(shared, rate);
        }
    }

    fn start_clock<E: Event>(&self, shared: &Arc<Shared<E>>, per_second: u32) {
        let mut links = Links::new(shared.clone(), None, NoPlaces);
        // Fill the clock's context cache now, so that a tick allocates only after a context was
        // created since the previous one (never in the steady state).
        links.refresh();
        let origin = Instant::now();
        let interval = Duration::from_secs(1) / per_second;
        let clock = Periodic::start("correlator-clock", interval, move || {
            // Never wait: a full inbox skips this tick, the next carries the later time.
            links.send_time_all(Time::from(origin.elapsed()), Wait::Never);
        });
        *sync::lock(&self.clock) = clock;
    }

    /// [`Correlator::shutdown`] over the shared state: every caller, blocking or async, goes
    /// through the one result mutex, so one shutdown runs and all get its result.
    fn shutdown<E: Event>(&self, shared: &Arc<Shared<E>>) -> Result<Status, Error> {
        if let Some(ctx) = shared.context_of_current_thread() {
            return Err(Error::ShutdownFromContext(ctx));
        }
        let mut result = sync::lock(&self.shutdown);
        if let Some(r) = &*result {
            return r.clone();
        }
        let r = self.shut_down_now(shared);
        *result = Some(r.clone());
        r
    }

    /// The shutdown itself (see the module docs); called once.
    fn shut_down_now<E: Event>(&self, shared: &Arc<Shared<E>>) -> Result<Status, Error> {
        if let Some(clock) = sync::lock(&self.clock).take() {
            clock.stop();
        }
        shared.input_closed.store(true, Ordering::Release);
        for ctx in shared.snapshot() {
            ctx.inbox.close_input();
        }
        // No output makes anyone wait from now on: a full `Block` output takes what the contexts
        // still emit beyond its bound, so an output nobody reads until shutdown returns cannot
        // hang it, and nothing accepted is lost (see the `output` module).
        shared.outputs.drain_all();
        self.start(shared);
        wait_quiescent(shared);
        let contexts = {
            let _creating = sync::lock(&shared.creating);
            shared.stopping.store(true, Ordering::Release);
            shared.snapshot()
        };
        // Every inbox closes before any context is told to exit, so that no `on_die` hook can put
        // an entry into an inbox that was not closed yet (and whose context might take it).
        for ctx in &contexts {
            ctx.inbox.close();
        }
        for ctx in &contexts {
            ctx.exit.store(true, Ordering::Release);
            ctx.unpark();
        }
        let threads = std::mem::take(&mut *sync::lock(&shared.threads));
        let mut failed = None;
        for (i, t) in threads.into_iter().enumerate() {
            if t.join().is_err() {
                failed.get_or_insert(ContextRef::new(shared.tag, i as u32));
            }
        }
        shared.outputs.close_all();
        if let Some(logger) = sync::lock(&self.status_logger).take() {
            logger.stop();
        }
        shared.shut_down.store(true, Ordering::Release);
        #[cfg(feature = "metrics")]
        if let Some(exporter) = sync::lock(&self.metrics_exporter).take() {
            exporter.stop();
            // The final figures, so that a scrape after shutdown sees everything processed.
            crate::metrics::export(&status_of(shared));
        }
        match failed {
            Some(ctx) => Err(Error::ContextStopped(ctx)),
            None => Ok(status_of(shared)),
        }
    }
}

impl<E: Event> Correlator<E> {
    /// The bookkeeping steps the contexts counted (see [`Shared::work`]), for the tests.
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.shared.work.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A builder with the default settings.
    pub fn builder() -> CorrelatorBuilder<E> {
        CorrelatorBuilder::default()
    }

    /// The `main` context (public, created with the correlator: R1.1).
    pub fn main(&self) -> ContextRef {
        self.main
    }

    /// Creates a context (R1.2); it starts taking its inbox once the correlator is started.
    ///
    /// # Errors
    /// [`Error::TooManyContexts`], [`Error::NoSuchCore`], [`Error::ThreadSpawn`],
    /// [`Error::ShutDown`].
    pub fn create_context(&self, options: ContextOptions) -> Result<ContextRef, Error> {
        create_context(&self.shared, options, false)
    }

    /// The state the contexts share (for a pool, which keeps it to make inputs and statuses).
    pub(crate) fn shared(&self) -> &Arc<Shared<E>> {
        &self.shared
    }

    /// How many more contexts `max_contexts` allows now (for `create_pool`'s check).
    pub(crate) fn context_room(&self) -> usize {
        let existing = sync::read_lock(&self.shared.contexts).len();
        self.shared.config.max_contexts.saturating_sub(existing)
    }

    /// The name a context was created with.
    pub fn context_name(&self, ctx: ContextRef) -> Option<String> {
        if ctx.correlator() != self.shared.tag {
            return None;
        }
        sync::read_lock(&self.shared.contexts)
            .get(ctx.id() as usize)
            .map(|c| c.name.clone())
    }

    /// Loads a monitor: its first instance is created in `main`, where its load hook runs (R6.1).
    /// The instance travels through `main`'s inbox, so it keeps its order with later input.
    ///
    /// # Errors
    /// [`Error::ShutDown`], [`Error::FullBeforeStart`].
    pub fn load<M: Monitor<E>>(&self, monitor: M) -> Result<(), Error> {
        self.load_in(self.main, monitor)
    }

    /// Loads a monitor with its first instance in `ctx`.
    ///
    /// # Errors
    /// [`Error::ShutDown`], [`Error::UnknownContext`], [`Error::ContextStopped`],
    /// [`Error::FullBeforeStart`].
    pub fn load_in<M: Monitor<E>>(&self, ctx: ContextRef, monitor: M) -> Result<(), Error> {
        // One path for loads: a fresh input handle is a sender of its own, as before.
        self.input().load_in(ctx, monitor)
    }

    /// The channel called `name` (created on first use); `""` is [`Channel::DEFAULT`].
    ///
    /// # Errors
    /// [`Error::TooManyChannels`] past the builder's `max_channels`.
    pub fn channel(&self, name: &str) -> Result<Channel, Error> {
        self.shared.channels.intern(name)
    }

    /// The name of a channel.
    pub fn channel_name(&self, channel: Channel) -> String {
        self.shared.channels.name(channel)
    }

    /// A receiver of everything sent (`send`) or emitted (`emit`) to `channel` from now on, with
    /// the default [`OutputOptions`]: at most [`DEFAULT_OUTPUT_CAPACITY`](crate::DEFAULT_OUTPUT_CAPACITY)
    /// (20,000) events queued, and a context that emits to it when it is full waits for room
    /// ([`Overflow::Block`](crate::Overflow::Block)): back-pressure, never loss, as with inboxes
    /// (R5.1). Use [`output_with`](Self::output_with) for another bound or policy.
    ///
    /// Taken after [`shutdown`](Self::shutdown), its stream has already ended: `recv` returns an
    /// error at once.
    pub fn output(&self, channel: Channel) -> OutputReceiver<E> {
        self.channel_output(channel, OutputOptions::default())
    }

    /// A receiver of everything sent or emitted to `channel` from now on, bounded and with the
    /// overflow policy of `options` (see [`Overflow`](crate::Overflow)).
    ///
    /// ```
    /// use correlator::{Correlator, Event, OutputOptions, Overflow};
    /// # #[derive(Clone, Debug)] struct Alert;
    /// # impl Event for Alert { type Kind = (); fn kind(&self) {} }
    /// let c = Correlator::<Alert>::builder().build()?;
    /// let alerts = c.channel("alerts")?;
    /// // Keeps the latest 1,024 alerts; older ones make room and are counted.
    /// let rx = c.output_with(alerts, OutputOptions::bounded(1024).policy(Overflow::DropOldest))?;
    /// assert_eq!(rx.capacity(), 1024);
    /// # Ok::<(), correlator::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidOutputCapacity`] for a bound outside
    /// `1..=`[`MAX_OUTPUT_CAPACITY`](crate::MAX_OUTPUT_CAPACITY).
    pub fn output_with(
        &self,
        channel: Channel,
        options: OutputOptions,
    ) -> Result<OutputReceiver<E>, Error> {
        Ok(self.channel_output(channel, options.checked()?))
    }

    fn channel_output(&self, channel: Channel, options: OutputOptions) -> OutputReceiver<E> {
        let name = format!("channel {:?}", self.shared.channels.name(channel));
        let queue = self.shared.outputs.make::<E>(options, name);
        self.shared.channels.add_output(channel, queue.clone());
        OutputReceiver::new(queue)
    }

    /// A typed output: handlers put values of any type `A` into it with
    /// [`Scope::emit_to`](crate::Scope::emit_to), and the receiver reads them. The output is not
    /// a channel: only holders of the [`Output`] handle (keep a clone in a monitor's state) can
    /// emit to it, so the type always matches. Bounded and with the overflow policy of `options`,
    /// like [`output_with`](Self::output_with); its stream ends at shutdown like every output.
    ///
    /// ```
    /// use correlator::{Correlator, Event, Monitor, Output, OutputOptions, Pattern, Scope};
    /// # #[derive(Clone, Debug)] struct Trade { price: f64 }
    /// # impl Event for Trade { type Kind = (); fn kind(&self) {} }
    /// /// The alert type: not an event.
    /// #[derive(Debug, PartialEq)]
    /// struct Spike(f64);
    ///
    /// struct Watch { out: Output<Spike> }
    /// impl Monitor<Trade> for Watch {
    ///     fn on_load(&mut self, cx: &mut Scope<'_, Trade, Self>) {
    ///         cx.on_all(Pattern::kind(()), |m: &mut Watch, cx: &mut Scope<'_, Trade, Watch>, t: &Trade| {
    ///             if t.price > 100.0 {
    ///                 // `false` when not queued (counted: `Output::dropped`, `output_drops`).
    ///                 let _queued = cx.emit_to(&m.out, Spike(t.price));
    ///             }
    ///         });
    ///     }
    /// }
    ///
    /// let c = Correlator::<Trade>::builder().build()?;
    /// let (out, spikes) = c.typed_output::<Spike>(OutputOptions::default())?;
    /// c.load(Watch { out })?;
    /// let input = c.input();
    /// c.start();
    /// input.send_to(c.main(), Trade { price: 99.0 })?;
    /// input.send_to(c.main(), Trade { price: 120.0 })?;
    /// c.shutdown()?;
    /// assert_eq!(spikes.iter().collect::<Vec<_>>(), [Spike(120.0)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidOutputCapacity`] for a bound outside
    /// `1..=`[`MAX_OUTPUT_CAPACITY`](crate::MAX_OUTPUT_CAPACITY).
    pub fn typed_output<A: Send + 'static>(
        &self,
        options: OutputOptions,
    ) -> Result<(Output<A>, OutputReceiver<A>), Error> {
        let name = format!("typed output of {}", std::any::type_name::<A>());
        let queue = self.shared.outputs.make::<A>(options.checked()?, name);
        Ok((
            Output {
                queue: queue.clone(),
            },
            OutputReceiver::new(queue),
        ))
    }

    /// The receiver of the late events, under [`LateEvents::ToOutput`]: `Some` the first time,
    /// `None` after that and under the other policies. Late events are those stamped before their
    /// context's clock under [`event_time`](CorrelatorBuilder::event_time); each is counted in
    /// [`ContextStatus::late_events`](crate::ContextStatus::late_events) and, instead of being
    /// dispatched, queued here, in each context's order. Take it before
    /// [`start`](Self::start) and read it (the output's overflow policy says what a full one does,
    /// see [`LateEvents::ToOutput`]); dropping it discards the late events from then on.
    ///
    /// ```
    /// use correlator::{Correlator, Event, LateEvents, OutputOptions, Time};
    /// # #[derive(Clone, Debug)] struct Stamped(u64);
    /// # impl Event for Stamped {
    /// #     type Kind = ();
    /// #     fn kind(&self) {}
    /// #     fn time(&self) -> Option<Time> { Some(Time::from_millis(self.0)) }
    /// # }
    /// let c = Correlator::<Stamped>::builder()
    ///     .event_time()
    ///     .late_events(LateEvents::ToOutput(OutputOptions::default()))
    ///     .build()?;
    /// assert!(c.take_late_events().is_some());
    /// assert!(c.take_late_events().is_none(), "taken once");
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn take_late_events(&self) -> Option<OutputReceiver<E>> {
        sync::lock(&self.shared.late_receiver).take()
    }

    /// A new input handle (one sender for the FIFO rule R2.3).
    pub fn input(&self) -> InputHandle<E> {
        InputHandle::new(Links::new(self.shared.clone(), None, NoPlaces))
    }

    /// A new [`SharedInput`](crate::SharedInput): one sender for the FIFO rule (R2.3), that is
    /// `Send + Sync + Clone` (its clones are the same sender).
    pub fn shared_input(&self) -> crate::SharedInput<E> {
        self.input().into_shared()
    }

    /// Lets the contexts take their inboxes. Until then, input and loaded monitors wait in order, so
    /// that a recorded stream can be queued and replayed deterministically. Calling it again does
    /// nothing.
    pub fn start(&self) {
        self.life.start(&self.shared);
    }

    /// Whether [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }

    /// A status snapshot (R9.1): cheap, callable from any thread at any time.
    pub fn status(&self) -> Status {
        status_of(&self.shared)
    }

    /// Shuts down gracefully (R8.1): stops external input, processes everything already accepted
    /// (routes, inboxes, cross-context sends in flight), ends every instance with
    /// [`DieReason::Shutdown`](crate::DieReason::Shutdown), and joins every thread it started.
    /// Returns the final status.
    ///
    /// Outputs never make a context wait during shutdown: from its start, a full output with the
    /// [`Block`](crate::Overflow::Block) policy takes what is still emitted beyond its bound, so
    /// an output read only after `shutdown` returns gets everything, in order, and cannot hang
    /// it. The output streams end once read.
    ///
    /// It always ends: while the instances end, `on_die` hooks may route, emit and send to output
    /// receivers (everything they emit is delivered before the output streams end), but creating
    /// a context returns [`Error::ShutDown`], a send or `spawn_to` into any context returns
    /// [`Error::ContextStopped`] (every inbox is closed before the first instance ends), and a
    /// local [`spawn`](crate::Scope::spawn) is dropped without running its initialiser (so no
    /// `on_die` is owed for it, and an `on_die` that spawns again cannot prolong shutdown).
    ///
    /// Calls from several threads at once perform one shutdown: the others wait for it and
    /// return its result; a later call returns that result at once.
    ///
    /// # Errors
    /// [`Error::ShutdownFromContext`] when called from a handler or hook (a context's own thread):
    /// shutdown waits for every context, that one included, so it could never return; call it
    /// from a thread of your own. The correlator carries on as if it had not been called.
    ///
    /// [`Error::ContextStopped`] if a context's thread panicked outside any handler (in user code
    /// the engine calls directly, such as an event's `kind()`, or in the engine itself): that
    /// context stopped taking entries at that moment, and what was left in its inbox was not
    /// processed. The panic is reported here rather than propagated.
    pub fn shutdown(&self) -> Result<Status, Error> {
        self.life.shutdown(&self.shared)
    }

    /// [`shutdown`](Self::shutdown) for async code: a future that completes with its result
    /// without blocking the executor's thread. The shutdown (which waits for every context to
    /// process what it accepted and joins their threads) runs on a thread of its own, started
    /// here, that completes the future; no runtime is needed, any executor drives it, a
    /// `current_thread` one included. Dropping the future does not stop the shutdown: it goes on
    /// to the end on its thread.
    ///
    /// It takes `&self` and the future borrows nothing (it is `'static + Send`): a correlator
    /// shared as an `Arc<Correlator>` (with a status task, say) shuts down through any of its
    /// references, and every holder keeps calling [`status`](Self::status), which shows
    /// `shut_down` once it is done. Calls of `shutdown` and `shutdown_async`, from any threads
    /// and tasks and in any mix, perform one shutdown, and all of them return its result.
    ///
    /// Dropping the correlator while the future is pending is fine: the drop does not wait (the
    /// shutdown is already under way on its thread), and the future still completes with the
    /// result.
    ///
    /// Keep reading the outputs while it runs, or not: as with `shutdown`, an output read only
    /// after it completes gets everything, in order.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown). Called on a context's own thread it completes at once
    /// with [`Error::ShutdownFromContext`], and the correlator carries on. If the thread cannot
    /// be started, the shutdown runs in the first poll instead (and a drop of the correlator
    /// before that poll shuts down as [`Drop`](#impl-Drop-for-Correlator%3CE%3E) does).
    ///
    /// # Example
    /// A status task shares the correlator through an `Arc`; another task shuts it down through
    /// its own reference, without owning it:
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use correlator::{Correlator, Event};
    ///
    /// #[derive(Clone, Debug)]
    /// struct Tick;
    /// impl Event for Tick {
    ///     type Kind = ();
    ///     fn kind(&self) {}
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// # runtime.block_on(async {
    /// let c = Arc::new(Correlator::<Tick>::builder().build()?);
    /// c.start();
    ///
    /// // The status task reports until the correlator has shut down.
    /// let watched = Arc::clone(&c);
    /// let status_task = tokio::spawn(async move {
    ///     loop {
    ///         let status = watched.status();
    ///         if status.shut_down {
    ///             return status;
    ///         }
    ///         println!("{status}");
    ///         tokio::time::sleep(Duration::from_millis(100)).await;
    ///     }
    /// });
    ///
    /// // Shut down through the shared reference; the status task still holds its own.
    /// let status = c.shutdown_async().await?;
    /// assert!(status.shut_down);
    /// assert!(status_task.await?.shut_down);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    #[cfg(feature = "async")]
    pub fn shutdown_async(
        &self,
    ) -> impl std::future::Future<Output = Result<Status, Error>> + Send + 'static {
        ShutdownFuture::start(&self.shared, &self.life)
    }
}

impl<E: Event> Drop for Correlator<E> {
    /// Shuts down gracefully unless that was done. Dropped on a context's own thread (the last
    /// reference released inside a handler), it cannot wait for that context
    /// ([`Error::ShutdownFromContext`]) and leaves the contexts running: keep a reference outside
    /// the handlers and shut down from a thread of your own. Dropped while a
    /// [`shutdown_async`](Correlator::shutdown_async) is under way, it does not wait: that
    /// shutdown goes on to the end on its own thread and completes its future.
    fn drop(&mut self) {
        if self.shared.shut_down.load(Ordering::Acquire)
            || self.life.handed_off.load(Ordering::Acquire)
        {
            return;
        }
        let _ = self.shutdown();
    }
}

/// Blocks until no context has anything accepted and not yet processed (see the module docs). A
/// context whose thread has ended is not waited for: nothing will take its entries.
fn wait_quiescent<E: Event>(shared: &Shared<E>) {
    let scan = || -> Option<Vec<u64>> {
        let contexts = shared.snapshot();
        let mut done = Vec::with_capacity(contexts.len());
        for c in &contexts {
            if !c.inbox.is_empty() && !c.stopped.load(Ordering::Acquire) {
                return None;
            }
            done.push(c.stats.done.load(Ordering::Acquire));
        }
        Some(done)
    };
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(first) = scan() {
            if scan().is_some_and(|second| second == first) {
                return;
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

pub(crate) fn status_of<E: Event>(shared: &Shared<E>) -> Status {
    let contexts: Vec<ContextStatus> = shared
        .snapshot()
        .iter()
        .map(|c| {
            let mut status = ContextStatus {
                context: Some(c.reference()),
                name: c.name.clone(),
                public: c.public,
                core: c.core,
                pinned: c.pinned.load(Ordering::Acquire),
                inbox_len: c.inbox.len() as u64,
                overruns: c.inbox.overruns(),
                stopped: c.stopped.load(Ordering::Acquire),
                ..ContextStatus::default()
            };
            status.set_published(c.stats.counters.load());
            // Published by the wait itself, so a wait going on counts up to now.
            let wait = c.stats.output_wait.read();
            status.output_blocked_ns = wait.total_ns;
            status.blocked_on_output = wait.now.map(|(output, waited_ns)| {
                let waited = Duration::from_nanos(waited_ns);
                BlockedOnOutput {
                    output,
                    name: shared.outputs.name_of(output).unwrap_or_default(),
                    since: std::time::SystemTime::now()
                        .checked_sub(waited)
                        .unwrap_or(std::time::UNIX_EPOCH),
                    waited_ns,
                }
            });
            status
        })
        .collect();
    let totals = Status::sum(
        &contexts,
        shared.dropped.load(Ordering::Relaxed),
        shared.outputs.external_drops.load(Ordering::Relaxed),
    );
    Status {
        contexts,
        totals,
        started: shared.started.load(Ordering::Acquire),
        shut_down: shared.shut_down.load(Ordering::Acquire),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug)]
    struct Ev;
    impl Event for Ev {
        type Kind = ();
        fn kind(&self) {}
    }

    /// The clock a builder's settings select: what `Correlator::start` and the contexts read.
    #[derive(Debug, PartialEq, Eq)]
    enum Clock {
        Ticks(u32),
        External,
        EventTime,
    }

    fn clock(b: &CorrelatorBuilder<Ev>) -> Clock {
        match (b.config.tick_rate, b.config.event_time) {
            (Some(rate), false) => Clock::Ticks(rate),
            (None, false) => Clock::External,
            (None, true) => Clock::EventTime,
            (Some(_), true) => panic!("a clock thread and event time at once: {:?}", b.config),
        }
    }

    type Setting = fn(CorrelatorBuilder<Ev>) -> CorrelatorBuilder<Ev>;

    // R7.1 (Decisions, "Event time"): of `tick_rate`, `external_time` and `event_time`, whichever
    // is called last decides the clock, whatever was called before it, in every order.
    #[test]
    fn r7_1_the_last_clock_setting_called_wins() {
        let settings: [(Setting, Clock); 3] = [
            (|b| b.tick_rate(25), Clock::Ticks(25)),
            (|b| b.external_time(), Clock::External),
            (|b| b.event_time(), Clock::EventTime),
        ];
        assert_eq!(
            clock(&Correlator::<Ev>::builder()),
            Clock::Ticks(DEFAULT_TICK_RATE)
        );
        for (first, _) in &settings {
            for (second, _) in &settings {
                for (last, expect) in &settings {
                    let b = last(second(first(Correlator::builder())));
                    assert_eq!(&clock(&b), expect);
                }
            }
        }
    }
}

/// The one-shot the shutdown thread of [`Correlator::shutdown_async`] completes: its result, and
/// the waker of the task that waits for it.
#[cfg(feature = "async")]
#[derive(Default)]
struct ShutdownSlot {
    result: Option<Result<Status, Error>>,
    waker: Option<std::task::Waker>,
}

/// The future of [`Correlator::shutdown_async`]. It holds the correlator's shared state, not
/// the correlator, so it borrows nothing and outlives a dropped correlator.
#[cfg(feature = "async")]
enum ShutdownFuture<E: Event> {
    /// The shutdown runs on its thread, which fills the slot and wakes the task.
    Running(crate::sync::StdArc<crate::sync::StdMutex<ShutdownSlot>>),
    /// It could not run elsewhere: it runs at the first poll.
    Here(Option<(Arc<Shared<E>>, Arc<Lifecycle>)>),
    /// Known at the call (refused on a context's own thread); taken by the first poll.
    Done(Option<Result<Status, Error>>),
}

#[cfg(feature = "async")]
impl<E: Event> ShutdownFuture<E> {
    fn start(shared: &Arc<Shared<E>>, life: &Arc<Lifecycle>) -> Self {
        if let Some(ctx) = shared.context_of_current_thread() {
            return Self::Done(Some(Err(Error::ShutdownFromContext(ctx))));
        }
        let slot = crate::sync::StdArc::new(crate::sync::StdMutex::new(ShutdownSlot::default()));
        let done = slot.clone();
        let (thread_shared, thread_life) = (shared.clone(), life.clone());
        // Set before the thread exists, so that a drop of the correlator right after this call
        // returns leaves the shutdown to the thread; cleared below if there is no thread (and no
        // earlier call's thread). The caller's `&self` keeps the correlator alive until then.
        let earlier = life.handed_off.swap(true, Ordering::AcqRel);
        let spawned = std::thread::Builder::new()
            .name("correlator-shutdown".into())
            .spawn(move || {
                // Through the one result mutex: a concurrent `shutdown` runs it or this does.
                let r = thread_life.shutdown(&thread_shared);
                drop((thread_shared, thread_life));
                let waker = {
                    let mut s = sync::lock_std(&done);
                    s.result = Some(r);
                    s.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            });
        match spawned {
            Ok(_) => Self::Running(slot),
            Err(_) => {
                if !earlier {
                    life.handed_off.store(false, Ordering::Release);
                }
                Self::Here(Some((shared.clone(), life.clone())))
            }
        }
    }
}

#[cfg(feature = "async")]
impl<E: Event> std::future::Future for ShutdownFuture<E> {
    type Output = Result<Status, Error>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Self::Running(slot) => {
                let mut s = sync::lock_std(slot);
                match s.result.take() {
                    Some(r) => std::task::Poll::Ready(r),
                    None => {
                        match &mut s.waker {
                            Some(w) if w.will_wake(cx.waker()) => {}
                            w => *w = Some(cx.waker().clone()),
                        }
                        std::task::Poll::Pending
                    }
                }
            }
            Self::Here(state) => {
                let Some((shared, life)) = state.take() else {
                    panic!("the shutdown future polled after it completed");
                };
                std::task::Poll::Ready(life.shutdown(&shared))
            }
            Self::Done(result) => match result.take() {
                Some(r) => std::task::Poll::Ready(r),
                None => panic!("the shutdown future polled after it completed"),
            },
        }
    }
}
