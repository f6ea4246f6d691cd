//! Contexts: one thread each, running events to completion (SPEC §1–§3, §6).
//!
//! # The loop
//! A context thread owns a [`Context`]: its inbox's consumer end, its route stack, its listener index
//! and its monitor instances. It takes one inbox entry at a time and runs it to completion (R2.2):
//! the entry's event is pushed on the route stack and the stack is drained completely, dispatching
//! each event to its listeners, before the next inbox entry is taken. The inbox place of the entry is
//! released only after that, so the inbox's count never falls below "accepted and not fully
//! processed", which graceful shutdown relies on (R8.1).
//!
//! # Giving places back in batches
//! Giving places back stores the inbox's freed position and reads-and-clears its room-waiter flag
//! with a read-modify-write (a locked instruction, which waits for every earlier store of this
//! thread); doing it once per entry would pay that on every event. The context therefore holds the
//! places of up to
//! `release_batch` processed entries ([`HeldPlaces`](crate::inbox::HeldPlaces)) and frees them
//! together, after publishing its status counters and its `done` count. It frees everything it
//! holds when a batch is full, whenever its inbox has nothing ready (so a context that waits,
//! sleeps or exits holds nothing, and the shutdown scan sees a zero count only once everything is
//! processed), and before a send of its own waits on a full inbox (so that its held places can
//! never be what it, or a cycle through it, waits for: R5.1 and R5.2 see exactly the unprocessed
//! entries of a waiting context). The batch is at most an eighth of the capacity.
//!
//! # Handlers and what they change
//! A handler runs with `&mut` to its instance's state and a [`Scope`](crate::Scope) over the
//! context's [`Effects`]: the route stack, links to other contexts, and a list of *operations*
//! (register a listener, quit one, subscribe, spawn locally). Routes and sends take effect at once;
//! the operations are applied as soon as the handler returns, before the next listener fires, so a
//! quit or a `die` also stops listeners later in the same dispatch. Every handler call is wrapped in
//! `catch_unwind`: a panic ends that handler's instance only (R6.8), never the context.
//!
//! # User code outside handlers
//! No user code ends a context (R6.8). A listener's filter (a [`Pattern::filter`](crate::Pattern::filter) closure, or the
//! templates of an expression) runs under `catch_unwind` too, on the listener path that has
//! filters at all: a panic there ends the listener's instance with `Panicked`, and the event goes
//! on to the other listeners. An event's `Drop` is caught where the route loop drops it (nothing
//! to catch for an event type without drop glue), and so is a monitor state's when its instance
//! ends. An event's `kind()` or `key()` (and the kind's `Hash`/`Eq`) run on the per-event path,
//! so they get no `catch_unwind` of their own: one `catch_unwind` covers the context's whole
//! loop, the route loop records in one word (once per entry it takes) which event it is
//! dispatching and where its batch begins, and the recovery drops that event, seals what its
//! listeners routed before the panic (they are still processed, in order), finishes the
//! interrupted inbox entry and goes on with the loop. Each contained panic is reported through
//! `tracing` and counted ([`Panicked`]): monitor code in `handler_panics`, the event type's own
//! code in `events_dropped_by_panic`. (A panic of the reporting itself, in the application's
//! `tracing` subscriber, is not contained: it ends the thread, and `ExitGuard` closes the inbox.)
//!
//! # Layout
//! This module owns the context thread: [`create_context`], the loop, publication, recovery.
//! `dispatch` (the route loop and firing listeners), `instances` (instance lifecycle and
//! deferred operations), `timers` (the logical clock), `ahead` (cache hints for the entries
//! waiting behind the one it takes), `snapshot` (its state in a checkpoint) and `cut` (its part
//! in a checkpoint across contexts) are the other jobs of the same [`Context`]; `timer_queue` is
//! the queue of pending timers, a leaf; `store` keeps the instances by id, their states apart.
//! May import the leaves, `channel`, `deliver`, `entry`, `event_time`, `expr`, `inbox`,
//! `listener`, `record`, `route`, `shared` and `status`: every module below the facade except
//! `monitor` and `input`, which sit on top of it.

use std::any::Any;
use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};

use crate::channel::Channel;
use crate::config::Backoff;
use crate::config::ContextOptions;
use crate::deliver::{GiveBack, Links, OwnInbox};
use crate::entry::{DieReason, Effects, Entry, Op};
use crate::error::Error;
use crate::event::Event;
use crate::event_time::{EventClock, Stamp};
use crate::expr::{Fired, Programs};
use crate::id::ContextRef;
use crate::inbox::{Consumer, Inbox};
use crate::listener::ListenerTable;
use crate::record::{EventCodec, Journal, Origin, Step};
use crate::route::RouteStack;
use crate::shared::{ContextShared, Shared};
use crate::status::Counters;
use crate::sync::{self, Arc, AtomicBool, Ordering};
use crate::time::Time;

mod ahead;
#[cfg(feature = "checkpoint")]
mod cut;
mod dispatch;
mod instances;
pub mod skeleton;
#[cfg(feature = "checkpoint")]
mod snapshot;
mod store;
mod timer_queue;
mod timers;

use instances::OpFrame;
use skeleton::{run_loop, Flow, LoopBody};
use store::Instances;
use timer_queue::TimerQueue;
use timers::TIMER_PURGE_MIN;

/// The state a context's thread owns.
pub(crate) struct Context<E: Event> {
    shared: sync::Arc<ContextShared<E>>,
    table: ListenerTable<E>,
    /// What the look-ahead learnt of the entries after the one being processed ([`ahead`]).
    ahead: ahead::Ahead,
    instances: Instances<E>,
    /// Context-level subscription counts (R4.4); the channel bit is set while a count is non-zero.
    subscriptions: HashMap<Channel, u32>,
    /// Instances whose listener count may have reached zero during the current handler.
    touched: Vec<u32>,
    /// How deep `after_handler` calls are nested (a spawn's initialiser runs inside its parent's).
    nesting: u32,
    /// The explicit stack of [`Context::apply_ops`] (empty between operations; kept for its
    /// capacity).
    op_frames: Vec<OpFrame<E>>,
    /// Emptied operation buffers of applied frames, handed to `fx.ops` when its buffer goes into
    /// a frame, so that a handler's operations allocate nothing in the steady state (see
    /// [`Context::take_ops`]).
    spare_ops: Vec<Vec<Op<E>>>,
    /// Pending timers: `(trigger time, creation sequence, listener handle)`, earliest first (R7.2).
    /// An entry whose listener has ended stays until it is due or until the queue is purged (see
    /// [`schedule`](Self::schedule)).
    timers: TimerQueue,
    timer_seq: u64,
    /// The queue length at which [`schedule`](Self::schedule) next drops the entries of ended
    /// listeners: twice the length the last purge left, at least [`TIMER_PURGE_MIN`].
    timer_purge_at: usize,
    /// Whether [`advance_time`](Self::advance_time) is firing timers.
    advancing: bool,
    /// The number of the clock stimulus being (or last) given: one per time at which a tick fires
    /// timers (a time due in two ticks is two stimuli). An expression listener takes one per
    /// number (`ExprListener::first_at`).
    stimulus: u64,
    /// Timers set while a tick fires timers that are already due at the clock's time (`wait(0)`,
    /// `at` a past time, `within(0)`): they join the heap once that tick is done, so they fire at the
    /// next tick and a repeating one fires at most once per tick (R7.2).
    deferred: Vec<timer_queue::TimerEntry>,
    /// Reused buffers for expression steps.
    step_timers: Vec<Time>,
    fired: Vec<Fired<E>>,
    /// The expression listeners' programs, one per shape (`expr::programs`).
    programs: Programs<E>,
    /// For each `completed` marker on the route stack, in push order: the first listener handle
    /// issued after its event started (R6.5: later listeners are left out). Markers pop in the
    /// reverse order of their pushes, so this is a stack beside the route stack, kept off the
    /// entries of every routed event.
    completed_since: Vec<u64>,
    /// Entries were processed since the status counters were last published.
    unpublished: bool,
    /// Set once shutdown ends the remaining instances ([`end_all`](Self::end_all)): local spawns
    /// are dropped from then on, so that an `on_die` that spawns cannot keep shutdown going.
    ending: bool,
    /// What the route loop is doing, for [`recover`](Self::recover): `mark << 1 | live`, with
    /// `mark` the height recorded when the entry now dispatched was taken and `live` whether the
    /// current slot holds an event (not for a `completed` marker). Written once per entry taken,
    /// and set to 0 when the route stack is drained.
    in_flight: usize,
    /// Event time and tick-mode warnings (see `event_time.rs`).
    event_clock: EventClock,
    /// How input events are recorded whole and read back (`record_inputs`), if they are.
    input_codec: Option<sync::StdArc<dyn EventCodec<E>>>,
    fx: Effects<E>,
    /// Whether the correlator takes checkpoints: the context then counts the events it takes
    /// from each input handle ([`input_taken`](Self::input_taken)).
    #[cfg(feature = "checkpoint")]
    counting: bool,
    /// Events taken from each input handle, by its creation number, and the source position
    /// of the last one that had one (`Event::position`, SPEC R11.9).
    #[cfg(feature = "checkpoint")]
    input_taken: crate::entry::InputsTaken,
    /// Where each input handle's entry in `input_taken` is (handles are numbered across the
    /// correlator's life, so a table indexed by number would grow with every handle ever made),
    /// and the last one looked up: a run of one sender's events finds it without the map.
    #[cfg(feature = "checkpoint")]
    input_index: (crate::hash::KindMap<u32, u32>, (u32, u32)),
    /// The checkpoint whose markers this context waits for, if one (`cut`).
    #[cfg(feature = "checkpoint")]
    cut: Option<Box<cut::Cut<E>>>,
    /// The number of the last checkpoint this context saved its state for.
    #[cfg(feature = "checkpoint")]
    last_cut: u64,
    /// Steps of per-instance bookkeeping (instance slots scanned at shutdown), for the tests that
    /// show shutdown is linear in the live instances ([`Shared::work`]).
    #[cfg(test)]
    work: u64,
    /// Slots the look-ahead's far stage found ([`Registry::looked`](crate::registry::Registry)).
    #[cfg(test)]
    looked: u64,
}

/// Whose code a contained panic was, that is which status counter it counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Panicked {
    /// Monitor code (a handler, hook, filter, or a state's or handler's `Drop`):
    /// `handler_panics`.
    Monitor,
    /// The event type's own code (`kind()`, `key()`, `Drop`): `events_dropped_by_panic`.
    Event,
}

/// The payload of a panic of the event type's own code met by engine code that runs as a handler
/// (a pool's dispatcher calling `key()`: [`event_code`]), with the original panic's message. The
/// handler's `catch_unwind` hands it on ([`Context::after_handler_slow`]) to the loop's
/// [`recover`](Context::recover), so it is treated as a `key()` panic of the engine's own
/// dispatch: the event is dropped and counted in `events_dropped_by_panic`, and the instance
/// whose handler met it carries on.
pub(crate) struct EventCodePanicked(String);

/// Runs `f`, the event type's own code (`event.key()`, `event.clone()`), for engine code that
/// runs as a handler: a panic there is the event's, not the handler's (see
/// [`EventCodePanicked`]), so it unwinds as one.
pub(crate) fn event_code<R>(f: impl FnOnce() -> R) -> R {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => panic::resume_unwind(Box::new(EventCodePanicked(panic_message(&*payload)))),
    }
}

/// Route-stack entries a context keeps room for between inbox entries (R3.4): a deeper storm's memory
/// is given back once the stack drains.
pub(crate) const ROUTE_STACK_RETAINED: usize = 1024;
/// Levels of nested spawns whose frames a context keeps room for (see [`Context::apply_ops`]).
const OP_FRAMES_RETAINED: usize = 64;

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(EventCodePanicked(s)) = payload.downcast_ref::<EventCodePanicked>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

impl<E: Event> Context<E> {
    pub(crate) fn new(
        shared: sync::Arc<ContextShared<E>>,
        consumer: &Consumer<Entry<E>>,
        correlator: sync::Arc<Shared<E>>,
    ) -> Self {
        let me = shared.reference();
        let places = consumer.held_places(correlator.settings.effective_release_batch());
        let own = OwnInbox::new(shared.clone(), places);
        let settings = &correlator.settings;
        let event_clock = EventClock::new(
            settings.event_time,
            settings.tick_rate,
            settings.late_events,
            settings.late_warning_interval,
        );
        #[cfg(feature = "checkpoint")]
        let checkpoints = settings.checkpoints;
        #[cfg(not(feature = "checkpoint"))]
        let checkpoints = false;
        let journal = Journal::new(
            correlator.journal.as_ref(),
            me.id(),
            &shared.name,
            checkpoints,
        );
        let input_codec = correlator.input_codec.clone();
        #[cfg(feature = "checkpoint")]
        let counting = settings.checkpoints;
        let links = Links::new(correlator, Some(me), own);
        Self {
            shared,
            table: ListenerTable::default(),
            ahead: ahead::Ahead::default(),
            instances: Instances::default(),
            subscriptions: HashMap::new(),
            touched: Vec::new(),
            nesting: 0,
            op_frames: Vec::new(),
            spare_ops: Vec::new(),
            timers: TimerQueue::default(),
            timer_seq: 0,
            timer_purge_at: TIMER_PURGE_MIN,
            advancing: false,
            stimulus: 0,
            deferred: Vec::new(),
            step_timers: Vec::new(),
            programs: Programs::default(),
            fired: Vec::new(),
            completed_since: Vec::new(),
            unpublished: false,
            ending: false,
            in_flight: 0,
            event_clock,
            input_codec,
            fx: Effects {
                routes: RouteStack::with_capacity(64),
                me,
                current: u32::MAX,
                ops: Vec::with_capacity(8),
                links,
                stats: Counters::default(),
                next_handle: 0,
                #[cfg(feature = "checkpoint")]
                restore_handles: Vec::new(),
                dispatchers: Vec::new(),
                now: Time::ZERO,
                journal,
                emit_ids: 0,
            },
            #[cfg(feature = "checkpoint")]
            counting,
            #[cfg(feature = "checkpoint")]
            input_taken: Vec::new(),
            #[cfg(feature = "checkpoint")]
            input_index: (Default::default(), (u32::MAX, 0)),
            #[cfg(feature = "checkpoint")]
            cut: None,
            #[cfg(feature = "checkpoint")]
            last_cut: 0,
            #[cfg(test)]
            work: 0,
            #[cfg(test)]
            looked: 0,
        }
    }

    /// The thread body: wait for start, run the loop over `consumer`, end the remaining
    /// instances.
    pub(crate) fn run(mut self, mut consumer: Consumer<Entry<E>>) {
        let shared = self.fx.links.shared().clone();
        while !shared.started.load(Ordering::Acquire) && !self.shared.exit.load(Ordering::Acquire) {
            sync::park();
        }
        if let Some(j) = shared.journal.clone() {
            // Counted as started once through its first steps, or if they panic.
            let _started = StartedGuard(j);
            // The stream may begin with ticks and recorded inputs.
            self.replay_steps();
        }
        self.event_loop(&mut consumer);
        self.end_all(DieReason::Shutdown);
        self.fx.journal.end();
        #[cfg(test)]
        shared
            .looked
            .fetch_add(self.looked, std::sync::atomic::Ordering::Relaxed);
        #[cfg(test)]
        shared.work.fetch_add(
            self.work + self.table.work(),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.publish();
    }

    /// The loop ([`run_loop`], with this context as its body), containing a panic of user code
    /// that runs outside a handler (see "User code outside handlers" in the module docs): one
    /// `catch_unwind` around the whole loop, so taking an entry pays nothing for it. After a panic
    /// the interrupted entry is finished (its routed events drained) and counted processed, and
    /// the loop goes on.
    fn event_loop(&mut self, consumer: &mut Consumer<Entry<E>>) {
        let mut backoff = Backoff::new(self.shared.wait);
        loop {
            match panic::catch_unwind(AssertUnwindSafe(|| run_loop(consumer, self, &mut backoff))) {
                Ok(()) => return,
                Err(payload) => {
                    self.recover(payload);
                    self.drain_contained();
                    self.entry_processed();
                }
            }
        }
    }

    /// After an inbox entry was processed: counts it, and gives places back once a batch is full.
    #[inline(always)]
    fn entry_processed(&mut self) {
        self.unpublished = true;
        if self.fx.links.held.processed_one() {
            self.publish_and_give_back();
        }
    }

    /// Publishes the status counters, then gives back the places of the processed entries (see
    /// "Giving places back in batches" in the module docs).
    ///
    /// First, since the route stack is empty here (between entries) and this runs once per batch
    /// of entries rather than per event: memory kept from a past route storm or spawn chain
    /// beyond [`ROUTE_STACK_RETAINED`] and [`OP_FRAMES_RETAINED`] entries is given back.
    fn publish_and_give_back(&mut self) {
        self.fx.routes.shrink_when_empty(ROUTE_STACK_RETAINED);
        if self.op_frames.capacity() > OP_FRAMES_RETAINED {
            self.op_frames.shrink_to(OP_FRAMES_RETAINED);
        }
        self.publish();
        self.unpublished = false;
        self.fx.links.held.give_back();
    }

    /// Publishes the local counters for the status snapshot.
    fn publish(&mut self) {
        // Events whose `Drop` panicked where the route stack dropped them (caught there, counted
        // here: once per publication, not per event).
        let drop_panics = self.fx.routes.take_drop_panics();
        if drop_panics > 0 {
            self.event_drops_panicked(drop_panics);
        }
        let c = &mut self.fx.stats;
        c.max_route_depth = self.fx.routes.max_depth() as u64;
        c.listeners = self.table.live() as u64;
        let held = self.table.held();
        c.partial_matches = held.matches;
        c.partial_events = held.events;
        let windows = self.table.windows();
        c.window_partitions = windows.partitions;
        c.window_values = windows.values;
        c.instances = self.instances.live() as u64;
        self.shared.stats.counters.store(c);
    }

    /// Runs one inbox entry to completion (R2.2). Always inlined: the loop's `process` is its
    /// hot caller, and with a second caller (a replay's steps) the compiler would otherwise call
    /// it out of line on every entry (harness/BENCHMARKS.md, "Recording's cost").
    #[inline(always)]
    fn run_entry(&mut self, entry: Entry<E>) {
        match entry {
            Entry::Event(_, e) => {
                if self.event_clock.looks() {
                    let fx = &mut self.fx;
                    let warned = &fx.links.shared().warned_ignored_times;
                    match self
                        .event_clock
                        .advance_for(&e, fx.now, &mut fx.stats, fx.me, warned)
                    {
                        Stamp::Forward(t) => self.advance_time(t),
                        Stamp::Keep => {}
                        Stamp::Divert => return self.divert_late(e),
                    }
                }
                self.run_root(e);
            }
            Entry::Spawn(_, new) => self.run_then_drain(|cx| cx.create_instance(*new)),
            Entry::Tick(t) => self.advance_time(t),
            #[cfg(feature = "checkpoint")]
            Entry::Control(c) => self.run_control(*c),
        }
    }

    /// Replaying: the entry goes to the replayer's buffer (its inbox place is given back as
    /// processed), then the context processes what the recorded order allows. A tick is dropped:
    /// the recording's ticks stand in for it.
    #[cold]
    #[inline(never)]
    fn replay_arrive(&mut self, entry: Entry<E>) -> Flow {
        #[cfg(feature = "checkpoint")]
        let entry = match entry {
            Entry::Control(c) => {
                self.run_control(*c);
                self.entry_processed();
                return Flow::Continue;
            }
            entry => entry,
        };
        if let (Some(origin), Journal::Replay(r)) = (entry.origin(), &mut self.fx.journal) {
            r.arrive(origin, entry);
        }
        self.entry_processed();
        self.replay_steps();
        Flow::Continue
    }

    /// Replaying: processes entries and ticks in the recorded order while what comes next has
    /// arrived.
    fn replay_steps(&mut self) {
        loop {
            let Journal::Replay(r) = &mut self.fx.journal else {
                return;
            };
            match r.next() {
                Step::Entry(e) => self.run_entry(e),
                Step::Tick(t) => self.advance_time(Time::from_nanos(t)),
                Step::Input(origin, bytes) => self.replay_input(origin, &bytes),
                Step::Wait | Step::Stop => return,
            }
        }
    }

    /// Replaying: a recorded input event, processed as if its handle had just sent it.
    #[cold]
    #[inline(never)]
    fn replay_input(&mut self, origin: Origin, bytes: &[u8]) {
        let decoded = match self.input_codec.as_deref() {
            Some(codec) => codec.decode(bytes),
            None => Err(
                "the recording has input events; replay it with `record_inputs` and \
                         the codec that wrote them"
                    .into(),
            ),
        };
        match decoded {
            Ok(e) => self.run_entry(Entry::Event(origin, e)),
            Err(why) => {
                if let Journal::Replay(r) = &mut self.fx.journal {
                    r.undecodable(why);
                }
            }
        }
    }

    /// A late event under `LateEvents::Drop` or `ToOutput` (already counted in `late_events`):
    /// dropped, or pushed to the late-events output under its overflow policy (drops and waits
    /// counted like an emit's).
    #[cold]
    #[inline(never)]
    fn divert_late(&mut self, e: E) {
        let Some(queue) = self.fx.links.shared().late_output.clone() else {
            return;
        };
        // A late event discarded because the reader is gone counts as a drop, as an emit's does;
        // the time waiting for room is published while it passes (`OutputWaitBoard`).
        let _queued = self.fx.links.push_typed_output(&queue, e);
        self.fx.stats.output_drops += self.fx.links.take_output_drops();
    }

    /// Runs `step` (an inbox event's push, a load hook, a timer handler, an `on_die` hook: code that
    /// may route outside any event's dispatch), then drains the route stack. What `step` routes is
    /// one batch, sealed like a listener's, so siblings keep routing order (R3.2).
    fn run_then_drain(&mut self, step: impl FnOnce(&mut Self)) {
        let mark = self.fx.routes.mark();
        step(self);
        self.fx.routes.seal(mark);
        self.drain_routes();
    }

    /// [`drain_routes`](Self::drain_routes), containing panics: for the work after a
    /// [`recover`](Self::recover), and at shutdown (outside the guarded event loop).
    #[cold]
    #[inline(never)]
    fn drain_contained(&mut self) {
        loop {
            match panic::catch_unwind(AssertUnwindSafe(|| self.drain_routes())) {
                Ok(()) => return,
                Err(payload) => self.recover(payload),
            }
        }
    }

    /// After a panic escaped the context's work (an event's `kind()` or `key()`, or other user
    /// code that runs outside a handler): drops the event being dispatched, if one was (counted,
    /// reported), seals what its listeners routed, and puts the context's per-dispatch state back
    /// in order; the caller then drains the route stack and goes on with the next entry.
    ///
    /// Outside the route loop's dispatch the recorded state says "no event" and mark 0, which is
    /// right there: the stack is empty between inbox entries, so whatever the interrupted work
    /// routed lies above 0.
    #[cold]
    #[inline(never)]
    fn recover(&mut self, payload: Box<dyn Any + Send>) {
        let (mark, live) = (self.in_flight >> 1, self.in_flight & 1 == 1);
        self.in_flight = mark << 1;
        self.fx.stats.events_dropped_by_panic += 1;
        tracing::warn!(
            context = self.fx.me.id(),
            message = %panic_message(&*payload),
            "user code outside a handler (an event's kind() or key(), say) panicked; the event \
             is dropped and the context carries on"
        );
        // Whatever was interrupted: operations half applied, frames of nested spawns.
        self.nesting = 0;
        let ops = std::mem::take(&mut self.fx.ops);
        let frames = std::mem::take(&mut self.op_frames);
        self.contain(
            move || drop((ops, frames)),
            Panicked::Monitor,
            "dropping interrupted operations",
        );
        if live {
            // SAFETY: `live` says the current slot holds the event taken last, not yet dropped
            // or completed (the loop clears it before it drops or completes one); the recorded
            // state is cleared above, so it is dropped once.
            unsafe { self.fx.routes.drop_current() };
        }
        // What its listeners routed before the panic is still processed, in routing order.
        debug_assert!(
            mark <= self.fx.routes.mark(),
            "a recovery mark above the stack"
        );
        self.fx.routes.seal(mark.min(self.fx.routes.mark()));
        self.end_listenerless();
        self.compact_listeners();
    }

    /// Runs `f` (user code: a `Drop`), containing a panic: counted as `whose` and reported as
    /// `what`.
    pub(super) fn contain(&mut self, f: impl FnOnce(), whose: Panicked, what: &str) {
        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(f)) {
            match whose {
                Panicked::Monitor => self.fx.stats.handler_panics += 1,
                Panicked::Event => self.fx.stats.events_dropped_by_panic += 1,
            }
            tracing::warn!(
                context = self.fx.me.id(),
                message = %panic_message(&*p),
                "a panic while {what} is contained"
            );
        }
    }

    /// `n` events' `Drop` panicked where the route stack dropped them: counted and reported.
    #[cold]
    #[inline(never)]
    fn event_drops_panicked(&mut self, n: u64) {
        self.fx.stats.events_dropped_by_panic += n;
        tracing::warn!(
            context = self.fx.me.id(),
            events = n,
            "events' Drop panicked; the panics were contained (the events were processed)"
        );
    }

    /// Compacts the listener table if it needs it. Dropping an ended listener's handler drops
    /// what its closure captured (user code): a panic there is contained.
    #[inline]
    fn compact_listeners(&mut self) {
        if self.table.needs_compaction() {
            self.compact_listeners_guarded();
        }
    }

    #[cold]
    #[inline(never)]
    fn compact_listeners_guarded(&mut self) {
        let table = &mut self.table;
        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| table.compact())) {
            self.fx.stats.handler_panics += 1;
            tracing::warn!(
                context = self.fx.me.id(),
                message = %panic_message(&*p),
                "dropping an ended listener panicked; the panic is contained"
            );
        }
    }
}

/// The context as the body of the loop skeleton.
impl<E: Event> LoopBody<Entry<E>> for Context<E> {
    #[inline(always)]
    fn process(&mut self, entry: Entry<E>) -> Flow {
        self.fx.stats.received += 1;
        match &mut self.fx.journal {
            Journal::Off => {}
            #[cfg(feature = "checkpoint")]
            Journal::Count => self.checkpoint_entry(&entry),
            Journal::Record(r) => {
                match (&entry, self.input_codec.as_deref()) {
                    (Entry::Tick(t), _) => r.tick(t.as_nanos()),
                    (Entry::Event(o, e), Some(codec)) if o.is_input() => {
                        r.input(*o, |out| codec.encode(e, out));
                    }
                    (Entry::Event(o, _) | Entry::Spawn(o, _), _) => r.take(*o),
                    // A checkpoint's request is not part of what a replay reproduces.
                    #[cfg(feature = "checkpoint")]
                    (Entry::Control(_), _) => {}
                }
                #[cfg(feature = "checkpoint")]
                if self.counting {
                    self.checkpoint_entry(&entry);
                }
            }
            Journal::Replay(_) => return self.replay_arrive(entry),
        }
        self.run_entry(entry);
        self.entry_processed();
        Flow::Continue
    }

    #[inline(always)]
    fn look_ahead(&mut self, consumer: &Consumer<Entry<E>>) {
        self.hint_ahead(consumer);
    }

    /// Gives every place back before waiting (a sleeping context holds none, and the shutdown
    /// scan needs a zero count).
    #[inline]
    fn idle(&mut self) {
        if self.unpublished {
            self.publish_and_give_back();
        }
    }

    #[inline]
    fn exit(&self) -> bool {
        self.shared.exit.load(Ordering::Acquire)
    }
}

/// Creates a context and starts its thread (it waits for `start()` if the correlator is not started).
///
/// `from_handler` is true when a handler asks: that stays possible while shutdown drains accepted
/// work (the new context then refuses external input like every other), while the user's own
/// threads are refused as soon as shutdown begins. Once shutdown stops the contexts (its final
/// phase, when `on_die(Shutdown)` hooks run) every request is refused: a context created then
/// would have a thread that nobody tells to exit.
pub(crate) fn create_context<E: Event>(
    shared: &Arc<Shared<E>>,
    options: ContextOptions,
    from_handler: bool,
) -> Result<ContextRef, Error> {
    if shared.shut_down.load(Ordering::Acquire) || (!from_handler && shared.input_closed()) {
        return Err(Error::ShutDown);
    }
    let _creating = sync::lock(&shared.creating);
    if shared.stopping.load(Ordering::Acquire) {
        return Err(Error::ShutDown);
    }
    let id = sync::read_lock(&shared.contexts).len();
    if id >= shared.settings.max_contexts {
        return Err(Error::TooManyContexts {
            max: shared.settings.max_contexts,
        });
    }
    let core = match options.core {
        Some(c) => Some(c),
        None => shared.settings.pinning.core_for(id),
    };
    if let Some(c) = core {
        if !shared.available_cores.contains(&c) {
            return Err(Error::NoSuchCore {
                core: c,
                available: shared.available_cores.clone(),
            });
        }
    }
    let (inbox, consumer) = Inbox::try_with_capacity(shared.settings.capacity).map_err(|_| {
        Error::AllocationFailed {
            setting: "inbox_capacity",
            requested: shared.settings.capacity,
        }
    })?;
    let ctx = Arc::new(ContextShared {
        id: id as u32,
        correlator: shared.tag,
        name: options.name,
        public: options.public,
        wait: options.wait.unwrap_or(shared.settings.wait),
        core,
        pinned: AtomicBool::new(false),
        inbox,
        stats: Default::default(),
        exit: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        thread: std::sync::OnceLock::new(),
    });
    if shared.input_closed() {
        ctx.inbox.close_input();
    }
    sync::write_lock(&shared.contexts).push(ctx.clone());
    if ctx.public {
        shared
            .channels
            .set_subscribed(Channel::DEFAULT, id as u32, true);
    }
    if let Some(j) = &shared.journal {
        // Before the thread starts: the shutdown's scan must not find it idle before its first
        // steps (see `JournalShared::context_started`).
        j.context_created();
    }
    let correlator = shared.clone();
    let thread_ctx = ctx.clone();
    let owner = Arc::as_ptr(shared) as usize;
    let spawned = sync::spawn_named(format!("ctx-{id}-{}", ctx.name), move || {
        sync::set_context_mark((owner, id as u32));
        // Marks the context stopped however the thread ends (see `ExitGuard`).
        let _exit = ExitGuard(thread_ctx.clone());
        if let Some(c) = thread_ctx.core {
            let ok = core_affinity::set_for_current(core_affinity::CoreId { id: c });
            thread_ctx.pinned.store(ok, Ordering::Release);
        }
        // Built here: its places in its own inbox are consumer-only (`!Send`).
        Context::new(thread_ctx, &consumer, correlator).run(consumer);
    });
    match spawned {
        Ok(handle) => {
            let _ = ctx.thread.set(handle.thread().clone());
            sync::lock(&shared.threads).push(handle);
            // The thread may already be parked at the start gate: make sure it sees `started`.
            ctx.unpark();
            Ok(ctx.reference())
        }
        Err(e) => {
            if let Some(j) = &shared.journal {
                j.context_started();
            }
            // The context exists in the registry but has no thread: close it so sends fail cleanly.
            ctx.inbox.close();
            ctx.stopped.store(true, Ordering::Release);
            Err(Error::ThreadSpawn(e.to_string()))
        }
    }
}

/// Tells a replay's shutdown scan that a context is through its first steps when dropped (see
/// `JournalShared::context_started`).
struct StartedGuard(sync::StdArc<crate::record::JournalShared>);

impl Drop for StartedGuard {
    fn drop(&mut self) {
        self.0.context_started();
    }
}

/// Set on a context's thread for its whole life: when the thread ends, normally or by a panic of
/// user code the engine calls outside a handler (an event's `kind()` or `clone()`, say), the
/// context is marked stopped. After a panic its inbox is also closed, so that senders get
/// `ContextStopped` instead of waiting for room nobody will make, and shutdown stops waiting for
/// it (and reports it through the thread's join).
struct ExitGuard<E: Event>(Arc<ContextShared<E>>);

impl<E: Event> Drop for ExitGuard<E> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.inbox.close();
            tracing::error!(
                context = self.0.id,
                name = %self.0.name,
                "a context's thread panicked outside any handler; the context has stopped"
            );
        }
        self.0.stopped.store(true, Ordering::Release);
    }
}
