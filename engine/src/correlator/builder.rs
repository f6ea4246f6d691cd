//! The builder: [`CorrelatorBuilder`], every setting with its documented default, the limits
//! on them, and [`build`](CorrelatorBuilder::build), which checks the settings and creates the
//! registry and the `main` context.
//!
//! May import the leaves, `channel`, `checkpoint`, `context`, `event_time`, `inbox`, `output`,
//! `record`, `registry` and `shared`.

use std::time::Duration;

use crate::channel::Channels;
use crate::config::{ContextOptions, PinningPlan, WaitStrategy};
use crate::context::create_context;
use crate::error::Error;
use crate::event::Event;
use crate::event_time::{LateEvents, DEFAULT_LATE_WARNING_INTERVAL};
use crate::inbox::MAX_CAPACITY;
use crate::output::{OutputReceiver, OutputRegistry};
use crate::record::{CodecSetting, EventCodec, JournalSetting, RecordSink, Recording};
use crate::registry::{Settings, WaitGraph};
use crate::shared::Shared;
use crate::sync::{self, Arc, AtomicBool, AtomicU64, Mutex, RwLock};

use super::{Correlator, Lifecycle};

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
pub struct CorrelatorBuilder<E: Event> {
    settings: Settings,
    max_channels: usize,
    journal: Option<JournalSetting>,
    input_codec: Option<CodecSetting<E>>,
    #[cfg(feature = "checkpoint")]
    checkpoints: super::checkpointing::CheckpointSetting<E>,
    _event: std::marker::PhantomData<fn() -> E>,
}

impl<E: Event> Default for CorrelatorBuilder<E> {
    fn default() -> Self {
        Self {
            settings: Settings {
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
                #[cfg(feature = "checkpoint")]
                checkpoints: false,
            },
            max_channels: DEFAULT_MAX_CHANNELS,
            journal: None,
            input_codec: None,
            #[cfg(feature = "checkpoint")]
            checkpoints: Default::default(),
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
        self.settings.capacity = capacity;
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
        self.settings.release_batch = entries;
        self
    }

    /// How idle contexts wait (default [`WaitStrategy::SpinYieldPark`]); a context's options can
    /// override it.
    pub fn wait_strategy(mut self, wait: WaitStrategy) -> Self {
        self.settings.wait = wait;
        self
    }

    /// Which core each context is pinned to (default: none).
    pub fn pinning(mut self, plan: PinningPlan) -> Self {
        self.settings.pinning = plan;
        self
    }

    /// The most contexts the correlator can hold (default [`DEFAULT_MAX_CONTEXTS`] = 256; at most
    /// [`MAX_CONTEXTS`], else [`build`](Self::build) returns [`Error::LimitTooLarge`]).
    pub fn max_contexts(mut self, max: usize) -> Self {
        self.settings.max_contexts = max;
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
        self.settings.output_block_warning = after;
        self
    }

    /// Logs a status line through `tracing` (target `correlator::status`, level INFO) every
    /// `interval` while the correlator runs (default: off).
    pub fn status_interval(mut self, interval: Duration) -> Self {
        self.settings.status_interval = Some(interval);
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
        self.settings.metrics_interval = Some(interval);
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
    /// **Cost**: every tick is one inbox entry per context (`rate × contexts` entries per
    /// second), and each wakes a parked context, which spins and yields a little before it parks
    /// again; so an idle correlator's CPU grows with the rate and the number of contexts, and
    /// without a clock thread it is next to nothing. The harness measures it (`ticks/cost`; the
    /// figures are in harness/BENCHMARKS.md, "Scenarios beyond the peers").
    ///
    /// Of `tick_rate`, [`external_time`](Self::external_time) and
    /// [`event_time`](Self::event_time), the last one called wins (R7.1).
    pub fn tick_rate(mut self, per_second: u32) -> Self {
        self.settings.tick_rate = Some(per_second);
        self.settings.event_time = false;
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
        self.settings.tick_rate = None;
        self.settings.event_time = false;
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
        self.settings.tick_rate = None;
        self.settings.event_time = true;
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
        self.settings.late_events = policy;
        self
    }

    /// The least time between two late-event warnings of one context (default
    /// [`DEFAULT_LATE_WARNING_INTERVAL`] = 10 s). Under
    /// event time a context logs a `tracing` warning at its first late event, then at most one per
    /// interval, saying how many late events came since the last one, how far behind the clock
    /// they were, and the likely cause (several feeders sending one context's or one key's
    /// events). Measured on the wall clock: warnings are for people. `Duration::MAX` logs only
    /// the first.
    pub fn late_event_warning_interval(mut self, interval: Duration) -> Self {
        self.settings.late_warning_interval = interval;
        self
    }

    /// Records the run to `sink` (SPEC §10, the `record` module): per context, which sender's
    /// inbox entries it took in which order, its clock ticks, its emits (with fingerprints where
    /// the output has one) and the contexts its handlers created. Off by default; on, it costs a
    /// comparison per inbox entry and a few bytes per change of sender (the harness measures it:
    /// `record/*`). A sink error stops the recording and is reported by
    /// [`shutdown`](Correlator::shutdown) ([`Error::Recording`]). Replaces an earlier
    /// [`replay`](Self::replay).
    ///
    /// ```
    /// use correlator::record::MemorySink;
    /// use correlator::{Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Tick;
    /// # impl Event for Tick { type Kind = (); fn kind(&self) {} }
    /// let sink = MemorySink::new();
    /// let c = Correlator::<Tick>::builder().record_to(sink.clone()).build()?;
    /// c.start();
    /// c.input().send_to(c.main(), Tick).unwrap();
    /// c.shutdown()?;
    /// let main = sink.recording().unwrap().summary().contexts[0].clone();
    /// assert_eq!(main.entries_by_origin.values().sum::<u64>(), 1);
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn record_to(mut self, sink: impl RecordSink) -> Self {
        self.journal = Some(JournalSetting::Record(sync::StdArc::new(sink)));
        self
    }

    /// Replays `recording` (SPEC §10): each context processes its inbox entries in the order
    /// the recording says, whatever order the senders' threads deliver them in, takes the
    /// recorded clock ticks (no clock thread runs), and checks every emit and context creation
    /// against the recording. The program must set up the same contexts and monitors, create its
    /// input handles in the same order and feed each the same events as the recorded run. The
    /// first difference stops the replay: [`Correlator::divergence`] names it and
    /// [`shutdown`](Correlator::shutdown) returns [`Error::Diverged`]. Replaces an earlier
    /// [`record_to`](Self::record_to).
    pub fn replay(mut self, recording: Recording) -> Self {
        self.journal = Some(JournalSetting::Replay(sync::StdArc::new(recording)));
        self
    }

    /// With [`record_to`](Self::record_to): records every event an input handle sends whole,
    /// written by `codec`, where it is taken, so that a replay needs no feeder: with
    /// [`replay`](Self::replay) and the same codec, each context processes the recorded events
    /// at their recorded positions itself (the replaying program creates its handles and loads
    /// its monitors as before, and sends no events: one it sends is an entry the recording does
    /// not have). For inputs that cannot be read again; it costs an encode and the event's bytes
    /// per input event, where positions alone cost next to nothing (SPEC §10).
    ///
    /// ```
    /// use correlator::record::{EventCodec, MemorySink};
    /// use correlator::{Correlator, Event};
    /// #[derive(Clone, Debug)]
    /// struct Reading(u32);
    /// impl Event for Reading { type Kind = (); fn kind(&self) {} }
    /// struct Le;
    /// impl EventCodec<Reading> for Le {
    ///     fn encode(&self, e: &Reading, out: &mut Vec<u8>) {
    ///         out.extend_from_slice(&e.0.to_le_bytes());
    ///     }
    ///     fn decode(&self, b: &[u8]) -> Result<Reading, String> {
    ///         Ok(Reading(u32::from_le_bytes(b.try_into().map_err(|_| "not 4 bytes")?)))
    ///     }
    /// }
    /// let sink = MemorySink::new();
    /// let c = Correlator::builder().record_to(sink.clone()).record_inputs(Le).build()?;
    /// c.start();
    /// c.input().send_to(c.main(), Reading(7)).unwrap();
    /// c.shutdown()?;
    /// // The replay feeds itself: the same setup, no sends.
    /// let r = Correlator::builder()
    ///     .replay(sink.recording().unwrap())
    ///     .record_inputs(Le)
    ///     .build()?;
    /// let _input = r.input(); // handles are created as in the recorded run
    /// r.start();
    /// r.shutdown()?;
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn record_inputs(mut self, codec: impl EventCodec<E>) -> Self {
        self.input_codec = Some(CodecSetting(sync::StdArc::new(codec)));
        self
    }

    /// Takes checkpoints into `store` and recovers from them (feature `checkpoint`; SPEC
    /// §11): [`Correlator::checkpoint`] saves the contexts' state, [`Correlator::recover`]
    /// restores the newest intact one. `codec` encodes the events that partial matches hold.
    /// Register every monitor whose instances may be live at a checkpoint with
    /// [`persistent`](Self::persistent).
    ///
    /// With checkpoints on, each context counts the events it takes from each input handle
    /// (one increment per inbox event), so that a recovery can say where to resume each
    /// [named input](Correlator::named_input).
    ///
    /// ```
    /// # #[derive(Clone, Debug)] struct Tick(u64);
    /// # impl correlator::Event for Tick { type Kind = (); fn kind(&self) {} }
    /// use correlator::checkpoint::DirStore;
    /// use correlator::record::EventCodec;
    /// use correlator::Correlator;
    ///
    /// struct Codec;
    /// impl EventCodec<Tick> for Codec {
    ///     fn encode(&self, e: &Tick, out: &mut Vec<u8>) {
    ///         out.extend_from_slice(&e.0.to_le_bytes());
    ///     }
    ///     fn decode(&self, b: &[u8]) -> Result<Tick, String> {
    ///         Ok(Tick(u64::from_le_bytes(b.try_into().map_err(|_| "not 8 bytes")?)))
    ///     }
    /// }
    /// let dir = std::env::temp_dir().join(format!("correlator-doc-ckpt-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let c = Correlator::<Tick>::builder()
    ///     .checkpoints(DirStore::open(&dir)?, Codec)
    ///     .build()?;
    /// assert!(c.recover()?.is_none()); // nothing stored yet: a fresh start, and started
    /// let seq = c.checkpoint()?;
    /// assert_eq!(c.recover().unwrap_err().to_string().contains("before `start`"), true);
    /// # let _ = seq;
    /// # c.shutdown()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "checkpoint")]
    pub fn checkpoints(
        mut self,
        store: impl crate::checkpoint::CheckpointStore + 'static,
        codec: impl EventCodec<E>,
    ) -> Self {
        self.checkpoints.store = Some(sync::StdArc::new(sync::StdMutex::new(Box::new(store))));
        self.checkpoints.codec = Some(sync::StdArc::new(codec));
        self.settings.checkpoints = true;
        self
    }

    /// Takes a checkpoint every `interval` (feature `checkpoint`; with
    /// [`checkpoints`](Self::checkpoints)), from the start until shutdown begins, on a thread
    /// of its own, as [`Correlator::checkpoint`] would. A checkpoint that fails is reported
    /// (`tracing`, WARN) and the next is tried an interval later. Default: none, only on
    /// request. A zero interval makes [`build`](Self::build) fail with
    /// [`Error::InvalidLimit`].
    #[cfg(feature = "checkpoint")]
    pub fn checkpoint_every(mut self, interval: Duration) -> Self {
        self.checkpoints.interval = Some(interval);
        self
    }

    /// Registers persistent monitor `M` (feature `checkpoint`): checkpoints save its
    /// instances, recovery restores them (SPEC R11.10, R11.11). Two types with the same
    /// [`Persistent::NAME`](crate::Persistent::NAME) make [`build`](Self::build) fail with
    /// [`Error::PersistentName`].
    #[cfg(feature = "checkpoint")]
    pub fn persistent<M: crate::Persistent<E>>(mut self) -> Self {
        self.checkpoints.add::<M>();
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
    /// [`Error::ThreadSpawn`]; with the `checkpoint` feature, `Error::PersistentName` for two
    /// persistent monitors of one name. Never a panic or an abort, whatever the values.
    pub fn build(self) -> Result<Correlator<E>, Error> {
        #[cfg(feature = "checkpoint")]
        if self.checkpoints.interval == Some(Duration::ZERO) {
            return Err(Error::InvalidLimit {
                setting: "checkpoint_every",
            });
        }
        #[cfg(feature = "checkpoint")]
        let checkpoints = self.checkpoints.build()?.map(sync::StdArc::new);
        let settings = self.settings;
        let late_options = match settings.late_events {
            LateEvents::ToOutput(options) => Some(options.checked()?),
            LateEvents::Process | LateEvents::Drop => None,
        };
        if settings.capacity == 0 || settings.capacity > MAX_CAPACITY {
            return Err(Error::InvalidCapacity {
                requested: settings.capacity,
                max: MAX_CAPACITY,
            });
        }
        if settings.max_contexts == 0 {
            return Err(Error::InvalidLimit {
                setting: "max_contexts",
            });
        }
        if settings.release_batch == 0 {
            return Err(Error::InvalidLimit {
                setting: "release_batch",
            });
        }
        if settings.tick_rate == Some(0) {
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
            ("max_contexts", settings.max_contexts, MAX_CONTEXTS),
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
        for &core in settings.pinning.core_list() {
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
            channels: Channels::new(self.max_channels, settings.max_contexts),
            outputs,
            late_output,
            late_receiver: Mutex::new(late_receiver),
            warned_ignored_times: AtomicBool::new(false),
            waits: WaitGraph::new(settings.max_contexts),
            contexts: RwLock::new(Vec::new()),
            started: AtomicBool::new(false),
            input_closed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            available_cores,
            threads: Mutex::new(Vec::new()),
            creating: Mutex::new(()),
            journal: self.journal.as_ref().map(|j| sync::StdArc::new(j.shared())),
            next_input: AtomicU64::new(0),
            input_codec: self.input_codec.map(|c| c.0),
            #[cfg(test)]
            work: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            looked: std::sync::atomic::AtomicU64::new(0),
            tag: sync::next_correlator_tag(),
            settings,
        });
        let main = create_context(&shared, ContextOptions::new("main").public(true), false)?;
        Ok(Correlator {
            shared,
            main,
            life: Arc::new(Lifecycle::new()),
            #[cfg(feature = "checkpoint")]
            checkpoints,
        })
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
        match (b.settings.tick_rate, b.settings.event_time) {
            (Some(rate), false) => Clock::Ticks(rate),
            (None, false) => Clock::External,
            (None, true) => Clock::EventTime,
            (Some(_), true) => panic!("a clock thread and event time at once: {:?}", b.settings),
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
