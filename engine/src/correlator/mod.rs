//! The public facade: [`Correlator`], the handle a user holds: contexts, monitors, channels,
//! outputs, input handles, status and shutdown, each a thin call into the part that does it.
//!
//! # Layout
//! - `builder`: [`CorrelatorBuilder`], its settings and their defaults, and `build`.
//! - `background`: the helper threads a started correlator runs (status line, metrics exporter,
//!   clock) and [`Lifecycle::start`].
//! - `shutdown`: the shutdown sequence (R8.1) and the future of `shutdown_async`.
//! - here: the facade, the [`Lifecycle`] the last two share, and the status snapshot's reading
//!   of the registry (its assembly is `status`'s).
//!
//! Imported by nothing but `lib.rs` and `pool` (built on the public facade). May import the
//! leaves, `channel`, `checkpoint`, `context`, `deliver`, `entry`, `input`, `monitor`, `output`,
//! `record`, `shared` and `status`.

mod background;
mod builder;
#[cfg(feature = "checkpoint")]
mod checkpointing;
mod shutdown;

use crate::channel::Channel;
use crate::config::ContextOptions;
use crate::context::create_context;
use crate::deliver::{Links, NoPlaces};
use crate::error::Error;
use crate::event::Event;
use crate::id::ContextRef;
use crate::input::InputHandle;
use crate::monitor::Monitor;
use crate::output::{Output, OutputOptions, OutputReceiver};
use crate::shared::Shared;
use crate::status::{ContextReading, ContextStatus, Status};
use crate::sync::{self, Arc, AtomicBool, Mutex, Ordering};

use background::Periodic;
pub use builder::{
    CorrelatorBuilder, DEFAULT_INBOX_CAPACITY, DEFAULT_MAX_CHANNELS, DEFAULT_MAX_CONTEXTS,
    DEFAULT_RELEASE_BATCH, DEFAULT_TICK_RATE, MAX_CHANNELS, MAX_CONTEXTS,
};
#[cfg(feature = "checkpoint")]
pub use checkpointing::{InputTaken, Recovered};
#[cfg(feature = "async")]
use shutdown::ShutdownFuture;

/// An event correlator: contexts, monitors, listeners, channels (see the crate docs).
///
/// Dropping a correlator that was not shut down shuts it down gracefully.
pub struct Correlator<E: Event> {
    shared: Arc<Shared<E>>,
    main: ContextRef,
    /// The helper threads and the shutdown's result, shared with a shutdown running on a thread
    /// of its own ([`shutdown_async`](Self::shutdown_async)).
    life: Arc<Lifecycle>,
    /// The checkpoint coordinator, if the builder set `checkpoints`.
    #[cfg(feature = "checkpoint")]
    checkpoints: Option<sync::StdArc<checkpointing::Checkpoints<E>>>,
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
    /// The `checkpoint_every` job.
    #[cfg(feature = "checkpoint")]
    checkpointer: Mutex<Option<Periodic>>,
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
            #[cfg(feature = "checkpoint")]
            checkpointer: Mutex::new(None),
            shutdown: Mutex::new(None),
            handed_off: AtomicBool::new(false),
        }
    }
}

impl<E: Event> Correlator<E> {
    /// The bookkeeping steps the contexts counted (see [`Shared::work`]), for the tests.
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.shared.work.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The listener slots the contexts' look-ahead found (see [`Registry::looked`]), for the
    /// tests.
    ///
    /// [`Registry::looked`]: crate::registry::Registry
    #[cfg(test)]
    pub(crate) fn looked(&self) -> u64 {
        self.shared
            .looked
            .load(std::sync::atomic::Ordering::Relaxed)
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
        self.shared.settings.max_contexts.saturating_sub(existing)
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
                fingerprint: None,
            },
            OutputReceiver::new(queue),
        ))
    }

    /// [`typed_output`](Self::typed_output) under a name, so that a monitor can find the
    /// output's handle again with [`Scope::output`](crate::Scope::output): a persistent
    /// monitor restored from a checkpoint, whose state cannot hold the handle (it is not data),
    /// finds it in `on_restore` (SPEC R11.11). The output's name in the status is `name` too.
    ///
    /// # Errors
    /// [`Error::OutputNameTaken`] for a name another named output has;
    /// [`Error::InvalidOutputCapacity`] as for `typed_output`.
    pub fn named_output<A: Send + 'static>(
        &self,
        name: &str,
        options: OutputOptions,
    ) -> Result<(Output<A>, OutputReceiver<A>), Error> {
        let options = options.checked()?;
        let queue = self.shared.outputs.make::<A>(options, name.to_owned());
        let output = Output {
            queue: queue.clone(),
            fingerprint: None,
        };
        if !self.shared.outputs.name(name, &output) {
            return Err(Error::OutputNameTaken {
                name: name.to_owned(),
            });
        }
        Ok((output, OutputReceiver::new(queue)))
    }

    /// The receiver of the late events, under [`LateEvents::ToOutput`](crate::LateEvents::ToOutput): `Some` the first time,
    /// `None` after that and under the other policies. Late events are those stamped before their
    /// context's clock under [`event_time`](CorrelatorBuilder::event_time); each is counted in
    /// [`ContextStatus::late_events`](crate::ContextStatus::late_events) and, instead of being
    /// dispatched, queued here, in each context's order. Take it before
    /// [`start`](Self::start) and read it (the output's overflow policy says what a full one does,
    /// see [`LateEvents::ToOutput`](crate::LateEvents::ToOutput)); dropping it discards the late events from then on.
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
    pub fn shared_input(&self) -> crate::input::SharedInput<E> {
        self.input().into_shared()
    }

    /// Lets the contexts take their inboxes. Until then, input and loaded monitors wait in order, so
    /// that a recorded stream can be queued and replayed deterministically. Calling it again does
    /// nothing.
    pub fn start(&self) {
        self.life.start(&self.shared);
        #[cfg(feature = "checkpoint")]
        if let Some(cp) = &self.checkpoints {
            self.life.start_checkpointer(&self.shared, cp);
        }
    }

    /// Takes a checkpoint (feature `checkpoint`; SPEC R11.9): every context saves its state
    /// (instances, partial matches with their events, timers, logical clock) between two of
    /// its inbox entries, after everything it took before the request, and the store saves
    /// the whole under the next sequence number, which is returned. Blocks until the store has
    /// saved it durably. Contexts pause only while they write their own state.
    ///
    /// # Errors
    /// [`CheckpointError::NotConfigured`] without
    /// [`checkpoints`](CorrelatorBuilder::checkpoints); `NotNow` before `start`, during
    /// shutdown, or from a handler; `NotPersistent` for a live instance of a monitor not
    /// registered with [`persistent`](CorrelatorBuilder::persistent); `Unsupported` for what
    /// checkpoints cannot save (a stream query not built `persistent`, a `spawn_to` in flight
    /// between contexts); `Encode`;
    /// the store's own errors. Nothing is saved when it fails.
    ///
    /// [`CheckpointError::NotConfigured`]: crate::checkpoint::CheckpointError::NotConfigured
    #[cfg(feature = "checkpoint")]
    pub fn checkpoint(&self) -> Result<u64, crate::checkpoint::CheckpointError> {
        self.checkpoints
            .as_ref()
            .ok_or(crate::checkpoint::CheckpointError::NotConfigured)?
            .checkpoint(&self.shared)
    }

    /// Restores the newest intact checkpoint and starts the correlator (feature `checkpoint`;
    /// SPEC R11.11 - R11.13). Call it after creating the contexts the checkpoint was taken with
    /// (same names, same order) and before anything else reaches them: no load, no event.
    /// Each saved instance is created again from its state and runs
    /// [`Persistent::on_restore`](crate::Persistent::on_restore), which registers its
    /// listeners; they get back their partial matches and timers. Returns `None` (and the
    /// correlator is started, empty) when the store holds no checkpoint: then load the
    /// monitors as on a first start.
    ///
    /// The [`Recovered`] names the checkpoint, the newer ones passed over as damaged, and how
    /// many events each context had taken from each [named input](Self::named_input): feed
    /// each input again from there.
    ///
    /// # Errors
    /// `NotConfigured`; `NotNow` once started; the store's errors (`AllCorrupt` when no
    /// checkpoint is intact); `Decode`, `UnknownMonitor`, `ContextsDiffer`, `Mismatch` when the
    /// checkpoint does not fit this program. After an error in a context's restore the
    /// correlator is started with a partial state: shut it down.
    #[cfg(feature = "checkpoint")]
    pub fn recover(&self) -> Result<Option<Recovered>, crate::checkpoint::CheckpointError> {
        self.checkpoints
            .as_ref()
            .ok_or(crate::checkpoint::CheckpointError::NotConfigured)?
            .recover(&self.shared, || self.start())
    }

    /// A new input handle whose events checkpoints count under `name` (feature `checkpoint`;
    /// SPEC R11.9): after a recovery, [`Recovered::taken`] says how many of its events the
    /// checkpoint had seen processed, so the source can be read again from there. Create named
    /// inputs after [`recover`](Self::recover); the count goes on from the recovered one.
    ///
    /// # Errors
    /// `NotNow` when an input of that name exists.
    #[cfg(feature = "checkpoint")]
    pub fn named_input(
        &self,
        name: &str,
    ) -> Result<InputHandle<E>, crate::checkpoint::CheckpointError> {
        let input = self.input();
        if let Some(cp) = &self.checkpoints {
            let origin = input.links.borrow().origin;
            cp.name_input(origin.0 & !crate::record::Origin::INPUT, name)?;
        }
        Ok(input)
    }

    /// Where a replay ([`CorrelatorBuilder::replay`]) first differed from its recording, once it
    /// did (the replay stops there: SPEC §10); `None` while it agrees, and when not replaying.
    pub fn divergence(&self) -> Option<crate::record::Divergence> {
        self.shared.journal.as_ref().and_then(|j| j.divergence())
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
    /// `shutdown_async` (feature `async`) is under way, it does not wait: that
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

/// The status snapshot (R9.1): reads every context's part of the registry, and lets `status`
/// assemble it.
pub(crate) fn status_of<E: Event>(shared: &Shared<E>) -> Status {
    let contexts: Vec<ContextStatus> = shared
        .snapshot()
        .iter()
        .map(|c| {
            let reading = ContextReading {
                context: c.reference(),
                name: c.name.clone(),
                public: c.public,
                core: c.core,
                pinned: c.pinned.load(Ordering::Acquire),
                inbox_len: c.inbox.len() as u64,
                overruns: c.inbox.overruns(),
                stopped: c.stopped.load(Ordering::Acquire),
                counters: &c.stats.counters,
                output_wait: &c.stats.output_wait,
            };
            ContextStatus::assemble(reading, |output| shared.outputs.name_of(output))
        })
        .collect();
    Status::assemble(
        contexts,
        shared.dropped.load(Ordering::Relaxed),
        shared.outputs.external_drops.load(Ordering::Relaxed),
        shared.started.load(Ordering::Acquire),
        shared.shut_down.load(Ordering::Acquire),
    )
}
