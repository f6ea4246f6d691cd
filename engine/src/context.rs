//! Contexts: one thread each, running events to completion (SPEC §1–§3, §6).
//!
//! # The loop
//! A context thread owns a [`Core`]: its inbox's consumer end, its route stack, its listener index
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
//! `release_batch` processed entries ([`HeldPlaces`](crate::deliver::HeldPlaces)) and frees them
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
//! No user code ends a context (R6.8). A listener's filter (a [`Pattern::filter`] closure, or the
//! templates of an expression) runs under `catch_unwind` too, on the listener path that has
//! filters at all: a panic there ends the listener's instance with `Panicked`, and the event goes
//! on to the other listeners. An event's `Drop` is caught where the route loop drops it (nothing
//! to catch for an event type without drop glue), and so is a monitor state's when its instance
//! ends. An event's `kind()` or `key()` (and the kind's `Hash`/`Eq`) run on the per-event path,
//! so they get no `catch_unwind` of their own: one `catch_unwind` covers the context's whole
//! loop, the route loop records in one word (once per entry it takes) which event it is
//! dispatching and where its batch begins, and the recovery drops that event, seals what its
//! listeners routed before the panic (they are still processed, in order), finishes the
//! interrupted inbox entry and goes on with the loop. Each contained panic counts in the
//! context's `handler_panics` and is reported through `tracing`.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;

use crate::channel::Channel;
use crate::config::{Backoff, Step, WaitStrategy};
use crate::correlator::Shared;
use crate::event::Event;
use crate::expr::Expr;
use crate::expr::{ExprListener, Match, StepOut, Stimulus};
use crate::inbox::{Consumer, Inbox};
use crate::listener::{Body, ListenerTable, Mode, Solo};
use crate::monitor::DieReason;
use crate::pattern::Pattern;
use crate::route::{RouteStack, Taken};
use crate::state::State;
use crate::sync::{self, AtomicBool, AtomicU64, Ordering, Thread};
use crate::time::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The smallest timer heap that [`Core::schedule`] purges of ended listeners' entries.
const TIMER_PURGE_MIN: usize = 64;

/// A reference to a context: a small `Copy` value (8 bytes) that can be stored in events and state,
/// compared and hashed (SPEC R1.2). Every context of a correlator has a unique one; `main` is the
/// first.
///
/// A reference also names its correlator (a tag unique in the process), so that a reference of
/// another correlator is refused rather than delivered to whichever context has the same id:
/// sends, spawns and loads into it fail with `UnknownContext`
/// ([`SendErrorKind::UnknownContext`](crate::SendErrorKind::UnknownContext),
/// [`Error::UnknownContext`](crate::Error::UnknownContext)), and references of two correlators
/// are never equal. Ordering compares the correlator's tag first, then the id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextRef {
    /// `id | correlator_tag << 32`: one word, so that a sender checks tag and id with one
    /// subtraction and one comparison (`Links::knows`).
    word: u64,
}

impl ContextRef {
    /// The context's unique id within its correlator (`main` is 0).
    #[inline(always)]
    pub fn id(self) -> u32 {
        self.word as u32
    }

    /// The reference of context `id` of the correlator tagged `correlator`.
    #[inline(always)]
    pub(crate) fn new(correlator: u32, id: u32) -> Self {
        Self {
            word: u64::from(id) | u64::from(correlator) << 32,
        }
    }

    /// The tag of the correlator the context belongs to.
    #[inline(always)]
    pub(crate) fn correlator(self) -> u32 {
        (self.word >> 32) as u32
    }

    /// The reference as one word: `id | correlator << 32`.
    #[inline(always)]
    pub(crate) fn word(self) -> u64 {
        self.word
    }
}

impl fmt::Debug for ContextRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ContextRef({}, correlator {})",
            self.id(),
            self.correlator()
        )
    }
}

impl fmt::Display for ContextRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "context #{}", self.id())
    }
}

/// A handler with its monitor type erased: downcasts the instance state and builds the `Scope`.
pub(crate) type Handler<E> = Box<dyn FnMut(&mut State, &mut Effects<E>, &E) + Send>;
/// An instance initialiser (load hook or spawn initialiser) with its monitor type erased.
pub(crate) type Init<E> = Box<dyn FnOnce(&mut State, &mut Effects<E>) + Send>;
/// A `when`/`when_all` handler with its monitor type erased.
pub(crate) type MatchHandler<E> = Box<dyn FnMut(&mut State, &mut Effects<E>, &Match<E>) + Send>;
/// An `on_die` hook with its monitor type erased; called once. Boxed so that the pool's per-key
/// instances can carry what tells their dispatcher they ended (a plain hook is a zero-sized box).
pub(crate) type OnDie<E> = Box<dyn FnMut(&mut State, &DieReason, &mut Effects<E>) + Send>;

/// A monitor instance to create in a context.
pub(crate) struct NewInstance<E: Event> {
    pub(crate) state: State,
    pub(crate) on_die: OnDie<E>,
    pub(crate) init: Init<E>,
}

/// An inbox entry.
pub(crate) enum Entry<E: Event> {
    Event(E),
    /// Boxed, so that an entry (an inbox slot) is as small as the event allows: most entries are
    /// events, and every slot of every inbox is the size of the largest variant.
    Spawn(Box<NewInstance<E>>),
    /// A clock tick: the context's logical time advances to it (R7.1).
    Tick(Time),
}

/// Counters a context publishes for the status snapshot (R9.1). Written only by the context's
/// thread, with relaxed stores after each inbox entry; read by anyone.
#[derive(Default)]
pub(crate) struct ContextStats {
    pub(crate) processed: AtomicU64,
    pub(crate) routed: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) received: AtomicU64,
    pub(crate) max_route_depth: AtomicU64,
    pub(crate) listeners: AtomicU64,
    pub(crate) instances: AtomicU64,
    pub(crate) blocked_ns: AtomicU64,
    pub(crate) handler_panics: AtomicU64,
    /// Inbox entries fully processed (used by the shutdown scan). Written only by the context's
    /// thread.
    pub(crate) done: AtomicU64,
}

/// What other threads know about a context.
pub(crate) struct ContextShared<E: Event> {
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
    pub(crate) inbox: sync::Arc<Inbox<Entry<E>>>,
    pub(crate) stats: CachePadded<ContextStats>,
    /// Set when the context must exit once its inbox is empty (after the shutdown scan).
    pub(crate) exit: AtomicBool,
    /// Set by the thread when it has exited.
    pub(crate) stopped: AtomicBool,
    pub(crate) thread: OnceLock<Thread>,
}

impl<E: Event> ContextShared<E> {
    pub(crate) fn reference(&self) -> ContextRef {
        ContextRef::new(self.correlator, self.id)
    }

    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Counters kept by the context's thread between publications.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct LocalStats {
    pub(crate) processed: u64,
    pub(crate) routed: u64,
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) blocked_ns: u64,
    pub(crate) handler_panics: u64,
}

/// What a new listener waits for.
pub(crate) enum Spec<E: Event> {
    Template(Pattern<E>, Handler<E>),
    Expr(Expr<E>, MatchHandler<E>),
}

/// A deferred change requested by a handler, applied when it returns.
pub(crate) enum Op<E: Event> {
    Listen {
        handle: u64,
        instance: u32,
        mode: Mode,
        spec: Spec<E>,
    },
    Quit(u64),
    Subscribe(u32, Channel),
    Unsubscribe(u32, Channel),
    Spawn(NewInstance<E>),
    /// `Scope::die`: the instance ends once its handler's other operations are applied. An
    /// operation rather than a flag, so that the check after every handler is one emptiness test.
    Die,
}

/// The part of a context that handlers act on through their `Scope`.
pub(crate) struct Effects<E: Event> {
    pub(crate) routes: RouteStack<E>,
    pub(crate) me: ContextRef,
    /// The instance whose handler is running.
    pub(crate) current: u32,
    pub(crate) ops: Vec<Op<E>>,
    pub(crate) links: crate::deliver::Links<E>,
    pub(crate) stats: LocalStats,
    pub(crate) next_handle: u64,
    /// The context's logical time: the last tick taken (R7.1).
    pub(crate) now: Time,
}

pub(crate) struct Instance<E: Event> {
    state: State,
    on_die: OnDie<E>,
    live_listeners: u32,
    /// Handles of the listeners it registered. Handles are never reused, so an entry whose listener
    /// already ended (and whose slot may now hold another instance's listener) matches nothing;
    /// such entries are pruned as the list grows.
    listeners: Vec<u64>,
    subscriptions: HashMap<Channel, u32>,
}

/// Operations still to apply, and what to do once they are applied: one level of the explicit
/// stack that [`Core::apply_ops`] keeps for spawns whose initialisers spawn (R6.2), instead of
/// recursing on the context's stack.
struct OpFrame<E: Event> {
    ops: std::vec::IntoIter<Op<E>>,
    then: AfterOps,
}

/// What [`Core::apply_ops`] does when a frame's operations are all applied.
enum AfterOps {
    Nothing,
    /// The operations were those of a spawned instance's initialiser: end the instance if the
    /// initialiser died or panicked, and have its listener count checked.
    Spawned {
        instance: u32,
        result: std::thread::Result<()>,
        died: bool,
    },
    /// The operations were those of an ended instance's `on_die`: its id may be reused.
    Free(u32),
}

/// What the route loop does with an event after [`Core::dispatch`].
enum Dispatched<K> {
    /// Drop it.
    Done,
    /// Keep it as a `completed` marker: listeners wait for its completion (R6.7).
    Completed,
    /// Its kind's solo listener ran it and left nothing to do: follow the chain it may have
    /// routed ([`Core::run_chain`]), then drop the last event.
    Chain(Solo, K),
}

/// The state a context's thread owns.
pub(crate) struct Core<E: Event> {
    shared: sync::Arc<ContextShared<E>>,
    consumer: Consumer<Entry<E>>,
    table: ListenerTable<E>,
    instances: Vec<Option<Instance<E>>>,
    free_instances: Vec<u32>,
    live_instances: usize,
    /// Context-level subscription counts (R4.4); the channel bit is set while a count is non-zero.
    subscriptions: HashMap<Channel, u32>,
    /// Instances whose listener count may have reached zero during the current handler.
    touched: Vec<u32>,
    /// How deep `after_handler` calls are nested (a spawn's initialiser runs inside its parent's).
    nesting: u32,
    /// The explicit stack of [`Core::apply_ops`] (empty between operations; kept for its
    /// capacity).
    op_frames: Vec<OpFrame<E>>,
    /// Pending timers: `(trigger time, creation sequence, listener handle)`, earliest first (R7.2).
    /// An entry whose listener has ended stays until it is due or until the heap is purged (see
    /// [`schedule`](Self::schedule)).
    timers: BinaryHeap<Reverse<(Time, u64, u64)>>,
    timer_seq: u64,
    /// The heap length at which [`schedule`](Self::schedule) next drops the entries of ended
    /// listeners: twice the length the last purge left, at least [`TIMER_PURGE_MIN`].
    timer_purge_at: usize,
    /// Whether [`advance_time`](Self::advance_time) is firing timers.
    advancing: bool,
    /// Timers set while a tick fires timers that are already due at the clock's time (`wait(0)`,
    /// `at` a past time, `within(0)`): they join the heap once that tick is done, so they fire at the
    /// next tick and a repeating one fires at most once per tick (R7.2).
    deferred: Vec<(Time, u64, u64)>,
    /// Reused buffers for expression steps.
    step_timers: Vec<Time>,
    fired: Vec<Match<E>>,
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
    fx: Effects<E>,
}

/// Route-stack entries a context keeps room for between inbox entries (R3.4): a deeper storm's memory
/// is given back once the stack drains.
pub(crate) const ROUTE_STACK_RETAINED: usize = 1024;
/// Levels of nested spawns whose frames a context keeps room for (see [`Core::apply_ops`]).
const OP_FRAMES_RETAINED: usize = 64;

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

impl<E: Event> Core<E> {
    pub(crate) fn new(
        shared: sync::Arc<ContextShared<E>>,
        consumer: Consumer<Entry<E>>,
        correlator: sync::Arc<Shared<E>>,
    ) -> Self {
        let me = shared.reference();
        let mut links = crate::deliver::Links::new(correlator.clone(), Some(me));
        let places = consumer.held_places(correlator.config.effective_release_batch());
        links.held = crate::deliver::HeldPlaces::of(shared.clone(), places);
        Self {
            shared,
            consumer,
            table: ListenerTable::default(),
            instances: Vec::new(),
            free_instances: Vec::new(),
            live_instances: 0,
            subscriptions: HashMap::new(),
            touched: Vec::new(),
            nesting: 0,
            op_frames: Vec::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            timer_purge_at: TIMER_PURGE_MIN,
            advancing: false,
            deferred: Vec::new(),
            step_timers: Vec::new(),
            fired: Vec::new(),
            completed_since: Vec::new(),
            unpublished: false,
            ending: false,
            in_flight: 0,
            fx: Effects {
                routes: RouteStack::with_capacity(64),
                me,
                current: u32::MAX,
                ops: Vec::with_capacity(8),
                links,
                stats: LocalStats::default(),
                next_handle: 0,
                now: Time::ZERO,
            },
        }
    }

    /// The thread body: wait for start, run the loop, end the remaining instances.
    pub(crate) fn run(mut self) {
        let shared = self.fx.links.shared().clone();
        while !shared.started.load(Ordering::Acquire) && !self.shared.exit.load(Ordering::Acquire) {
            sync::park();
        }
        self.event_loop();
        self.end_all(DieReason::Shutdown);
        self.publish();
    }

    /// The loop, containing a panic of user code that runs outside a handler (see "User code
    /// outside handlers" in the module docs): one `catch_unwind` around the whole loop, so taking
    /// an entry pays nothing for it. After a panic the interrupted entry is finished (its routed
    /// events drained) and counted processed, and the loop goes on.
    fn event_loop(&mut self) {
        loop {
            match panic::catch_unwind(AssertUnwindSafe(|| self.event_loop_unguarded())) {
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

    /// [`event_loop`](Self::event_loop) without the `catch_unwind`.
    fn event_loop_unguarded(&mut self) {
        let mut backoff = Backoff::new(self.shared.wait);
        loop {
            if let Some(entry) = self.consumer.pop() {
                backoff.reset();
                self.fx.stats.received += 1;
                self.process(entry);
                self.entry_processed();
                continue;
            }
            // Nothing ready: give every place back before waiting (a sleeping context holds none,
            // and the shutdown scan needs a zero count).
            if self.unpublished {
                self.publish_and_give_back();
            }
            // While it waits the loop reads only the next slot (in `pop`) and `exit`, never the
            // inbox's tail word: that word's cache line belongs to the senders, and reading it on
            // every turn would make each of their reservations fetch it back. An entry reserved
            // and not yet committed keeps `try_sleep` from sleeping and `exit` from ending the loop.
            if self.shared.exit.load(Ordering::Acquire) && self.consumer.inbox().is_empty() {
                return;
            }
            match backoff.next() {
                Step::Spin => sync::spin_hint(),
                Step::Yield => sync::yield_now(),
                Step::Park => {
                    if self.consumer.try_sleep() {
                        let exit = &self.shared.exit;
                        self.consumer.park(|| exit.load(Ordering::Acquire));
                    }
                    backoff.reset();
                }
            }
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
        let s = &self.shared.stats;
        let l = &self.fx.stats;
        s.processed.store(l.processed, Ordering::Relaxed);
        s.routed.store(l.routed, Ordering::Relaxed);
        s.sent.store(l.sent, Ordering::Relaxed);
        s.received.store(l.received, Ordering::Relaxed);
        s.blocked_ns.store(l.blocked_ns, Ordering::Relaxed);
        s.handler_panics.store(l.handler_panics, Ordering::Relaxed);
        s.max_route_depth
            .store(self.fx.routes.max_depth() as u64, Ordering::Relaxed);
        s.listeners.store(self.table.live as u64, Ordering::Relaxed);
        s.instances
            .store(self.live_instances as u64, Ordering::Relaxed);
    }

    /// Runs one inbox entry to completion (R2.2).
    fn process(&mut self, entry: Entry<E>) {
        match entry {
            Entry::Event(e) => {
                // The stack is empty between entries (R2.2): no batch to seal.
                self.fx.routes.push_root(e);
                self.drain_routes();
            }
            Entry::Spawn(new) => self.run_then_drain(|core| core.create_instance(*new)),
            Entry::Tick(t) => self.advance_time(t),
        }
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

    /// Advances the logical clock to `t`, firing every due timer in trigger-time order, then
    /// creation order, each run to completion with the clock at its trigger time (R7.2). A tick
    /// earlier than the clock changes nothing: logical time never goes back.
    ///
    /// A timer set while this runs that is already due at the clock's time (a repeating `wait(0)`
    /// restarting, say) waits for the next tick: without that, it would fire again and again at one
    /// logical time and the tick would never end.
    fn advance_time(&mut self, t: Time) {
        self.advancing = true;
        while let Some(&Reverse((due, _, handle))) = self.timers.peek() {
            if due > t {
                break;
            }
            self.timers.pop();
            if due > self.fx.now {
                self.fx.now = due;
            }
            if let Some(slot) = self.table.slot_of(handle) {
                self.run_then_drain(|core| {
                    core.fire_expr(slot, Stimulus::Time(due));
                });
                self.compact_listeners();
            }
        }
        self.advancing = false;
        self.timers.extend(self.deferred.drain(..).map(Reverse));
        if t > self.fx.now {
            self.fx.now = t;
        }
    }

    /// Queues the timers of `step_timers` for the listener `handle`. Timers already due while a tick
    /// fires timers are deferred to the next tick (see [`advance_time`](Self::advance_time)).
    ///
    /// The heap keeps the entries of listeners that ended (quit, fired through an event, or
    /// removed with their instance) until they are due, which may be never; so whenever it has
    /// doubled since the last purge, the entries of ended listeners are dropped. That bounds it by
    /// twice the live timers (plus [`TIMER_PURGE_MIN`]) at an amortised constant cost per timer.
    fn schedule(&mut self, handle: u64) {
        if self.step_timers.is_empty() {
            return;
        }
        if self.timers.len() >= self.timer_purge_at {
            let table = &self.table;
            self.timers
                .retain(|&Reverse((_, _, h))| table.slot_of(h).is_some());
            self.timer_purge_at = TIMER_PURGE_MIN.max(2 * self.timers.len());
            if self.timers.capacity() > 2 * self.timer_purge_at {
                self.timers.shrink_to(self.timer_purge_at);
            }
        }
        for due in self.step_timers.drain(..) {
            let entry = (due, self.timer_seq, handle);
            self.timer_seq += 1;
            if self.advancing && due <= self.fx.now {
                self.deferred.push(entry);
            } else {
                self.timers.push(Reverse(entry));
            }
        }
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
        self.fx.stats.handler_panics += 1;
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

    /// Runs `f` (user code: a `Drop`), containing a panic: counted and reported as `what`.
    fn contain(&mut self, f: impl FnOnce(), what: &str) {
        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(f)) {
            self.fx.stats.handler_panics += 1;
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
        self.fx.stats.handler_panics += n;
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

    /// Drains the route stack completely (R3.2). Records what it dispatches in `in_flight`, for
    /// [`recover`](Self::recover).
    fn drain_routes(&mut self) {
        while let Some(entry) = self.fx.routes.take() {
            let mark = self.fx.routes.mark();
            match entry {
                Taken::Event(slot) => {
                    self.in_flight = mark << 1 | 1;
                    // SAFETY: the current slot holds the event until `complete_current`,
                    // `drop_current` or `run_chain` below (`e` is not used after those), and
                    // nothing writes it meanwhile (see `RouteStack`).
                    let e = unsafe { slot.as_ref() };
                    self.fx.stats.processed += 1;
                    // Listeners registered from here on get handles from `first_new` up.
                    let first_new = self.fx.next_handle;
                    match self.dispatch(e) {
                        Dispatched::Completed => {
                            self.completed_since.push(first_new);
                            self.in_flight = mark << 1;
                            // SAFETY: the event taken above, not yet dropped or completed.
                            unsafe { self.fx.routes.complete_current() };
                        }
                        Dispatched::Done => {
                            // SAFETY: as above.
                            unsafe { self.fx.routes.drop_current() };
                        }
                        Dispatched::Chain(solo, kind) => {
                            // `e` is not used again: the chain drops its event and takes the next.
                            self.run_chain(solo, kind, mark);
                            // SAFETY: the current slot holds the chain's last event (`e` itself
                            // if the chain stopped at once), not yet dropped or completed.
                            unsafe { self.fx.routes.drop_current() };
                        }
                    }
                }
                Taken::Completed(e) => {
                    self.in_flight = mark << 1;
                    let first_new = self.completed_since.pop();
                    debug_assert!(first_new.is_some(), "a completed marker without its stamp");
                    self.dispatch_completed(&e, first_new.unwrap_or(0));
                    if std::mem::needs_drop::<E>() {
                        self.contain(move || drop(e), "dropping an event");
                    }
                }
            }
            // From the drop above to the next `take`, nothing can panic that is not contained
            // where it runs (the drop, compaction), so `in_flight` need not say "no event" yet.
            self.fx.routes.seal_taken(mark);
            self.compact_listeners();
        }
        // The last event is gone: no event is in flight outside the route loop.
        self.in_flight = 0;
    }

    /// Fires every ordinary listener matching `e`, or the `unmatched` ones if none matched, and
    /// says what the route loop does next with `e` (see [`Dispatched`]).
    #[inline]
    fn dispatch(&mut self, e: &E) -> Dispatched<E::Kind> {
        let Some(view) = self.table.view_of(&e.kind()) else {
            return Dispatched::Done;
        };
        // Read before the listeners run: a `completed` listener they register does not fire for
        // this event anyway (R6.5), and one they end is skipped by the completed dispatch.
        let done = if view.has_completed {
            Dispatched::Completed
        } else {
            Dispatched::Done
        };
        if let Some(solo) = view.solo {
            // One unkeyed listener that fires on every event of the kind (the usual case).
            let clean = self.fire_solo(solo, e);
            if clean && !view.has_completed {
                return Dispatched::Chain(solo, e.kind());
            }
            return done;
        }
        let b = view.bucket as usize;
        let bucket = &self.table.buckets[b];
        // The key matters only where some listener of the kind is keyed.
        let key = if bucket.ordinary.keyed.is_empty() {
            None
        } else {
            e.key()
        };
        if !self.dispatch_lists(b, Mode::All, key, e) {
            self.dispatch_unmatched(b, e);
        }
        done
    }

    /// The `unmatched` listeners of bucket `b` (off the hot path: most events match).
    #[inline(never)]
    fn dispatch_unmatched(&mut self, b: usize, e: &E) {
        self.dispatch_lists(b, Mode::Unmatched, e.key(), e);
    }

    /// The `completed` listeners of `e` registered before it started: those with a handle below
    /// `first_new` (R6.5, R6.7).
    #[inline(never)]
    fn dispatch_completed(&mut self, e: &E, first_new: u64) {
        if let Some(b) = self.table.bucket_of(&e.kind()) {
            self.dispatch_merged(b, Mode::Completed, e.key(), e, first_new);
        }
    }

    /// Offers `e` to the listeners of bucket `b` in `mode`'s lists: the unkeyed ones and those keyed
    /// on `e`'s key, merged in registration order (R6.4). Only listeners present when the dispatch
    /// started are offered (R6.5). Returns whether any matched.
    ///
    /// Inlined for the common case (`e` has no key, or no listener of the bucket is keyed: the plain
    /// list alone); the merge is [`dispatch_merged`](Self::dispatch_merged).
    #[inline(always)]
    fn dispatch_lists(&mut self, b: usize, mode: Mode, key: Option<u64>, e: &E) -> bool {
        let lists = self.table.buckets[b].lists(mode);
        if key.is_some() && !lists.keyed.is_empty() {
            return self.dispatch_merged(b, mode, key, e, u64::MAX);
        }
        let plain_len = lists.plain.len();
        if plain_len == 1 {
            // One listener (the usual case): nothing to carry across the handler call.
            let slot = lists.plain[0];
            return self.try_fire(slot, e);
        }
        self.dispatch_plain(b, mode, plain_len, e)
    }

    /// Offers `e` to the first `len` unkeyed listeners of bucket `b` in `mode`'s list.
    #[inline(always)]
    fn dispatch_plain(&mut self, b: usize, mode: Mode, len: usize, e: &E) -> bool {
        let mut matched = false;
        for i in 0..len {
            let slot = self.table.buckets[b].lists(mode).plain[i];
            matched |= self.try_fire(slot, e);
        }
        matched
    }

    /// [`dispatch_lists`](Self::dispatch_lists) where keyed listeners may match, offering only the
    /// listeners whose handle is below `first_new` (`u64::MAX`: all of them).
    #[inline(never)]
    fn dispatch_merged(
        &mut self,
        b: usize,
        mode: Mode,
        key: Option<u64>,
        e: &E,
        first_new: u64,
    ) -> bool {
        let lists = self.table.buckets[b].lists(mode);
        let table = &self.table;
        // Each list is in registration order, so in handle order: cut it at the first new handle.
        // (Between dispatches every listed slot is occupied: compaction unlists before it frees.)
        let cut = |list: &[u32]| {
            if first_new == u64::MAX {
                list.len()
            } else {
                list.partition_point(|&s| table.handle_at(s) < first_new)
            }
        };
        let plain_len = cut(&lists.plain);
        let keyed_len = match key {
            Some(k) if !lists.keyed.is_empty() => lists.keyed.get(&k).map_or(0, |v| cut(v)),
            _ => 0,
        };
        if keyed_len == 0 {
            return self.dispatch_plain(b, mode, plain_len, e);
        }
        let mut matched = false;
        let k = key.unwrap_or_default();
        let (mut i, mut j) = (0, 0);
        while i < plain_len || j < keyed_len {
            let lists = self.table.buckets[b].lists(mode);
            let keyed_slot = if j < keyed_len {
                lists.keyed.get(&k).and_then(|v| v.get(j).copied())
            } else {
                None
            };
            let plain_slot = if i < plain_len {
                Some(lists.plain[i])
            } else {
                None
            };
            let slot = match (plain_slot, keyed_slot) {
                (Some(p), Some(q)) if self.table.handle_at(p) < self.table.handle_at(q) => {
                    i += 1;
                    p
                }
                (_, Some(q)) => {
                    j += 1;
                    q
                }
                (Some(p), None) => {
                    i += 1;
                    p
                }
                (None, None) => break,
            };
            matched |= self.try_fire(slot, e);
        }
        matched
    }

    /// Fires the listener in `slot` if it is alive and matches; returns whether it matched.
    ///
    /// Inlined for a [`simple`](crate::listener::ListenerSlot::simple) listener (alive, `on_all`,
    /// no filter: it fires); everything else is [`try_fire_other`](Self::try_fire_other).
    #[inline(always)]
    fn try_fire(&mut self, slot: u32, e: &E) -> bool {
        match &self.table.slots[slot as usize] {
            Some(l) if l.simple => self.fire_template(slot, e),
            _ => self.try_fire_other(slot, e),
        }
    }

    /// [`try_fire`](Self::try_fire) for a listener that is dead, fires once, has filters or is an
    /// expression.
    #[inline(never)]
    fn try_fire_other(&mut self, slot: u32, e: &E) -> bool {
        let Some(l) = self.table.slots[slot as usize].as_mut() else {
            return false;
        };
        if !l.alive {
            return false;
        }
        match &l.body {
            Body::Template { template, .. } => {
                // User code (a filter): a panic ends the listener's instance, as in a handler.
                match panic::catch_unwind(AssertUnwindSafe(|| template.matches_listed(e))) {
                    Ok(true) => {}
                    Ok(false) => return false,
                    Err(payload) => {
                        let instance = l.instance;
                        self.after_handler(instance, Err(payload));
                        return false;
                    }
                }
            }
            Body::Expr { .. } => return self.fire_expr(slot, Stimulus::Event(e)),
        }
        if l.mode == Mode::Once {
            let instance = l.instance;
            return self.fire_once(slot, instance, e);
        }
        self.fire_template(slot, e)
    }

    /// Runs the handler of the template listener in `slot`, an `on_all` listener that matched.
    /// Returns true (it matched).
    #[inline(always)]
    fn fire_template(&mut self, slot: u32, e: &E) -> bool {
        let Some(l) = self.table.slots[slot as usize].as_mut() else {
            return true;
        };
        let Body::Template { handler, .. } = &mut l.body else {
            return true;
        };
        let instance = l.instance;
        if let Some(inst) = self.instances[instance as usize].as_mut() {
            let result = Self::run_handler(&mut self.fx, handler, inst, instance, e);
            self.after_handler_with(instance, result, true);
        }
        true
    }

    /// Runs the handler of a bucket's [`Solo`] listener: the listener through the table's
    /// unchecked [`solo_handler`](ListenerTable::solo_handler), its instance (named by the `Solo`,
    /// so loaded beside the listener rather than after it) with the usual check. Returns whether
    /// the handler ran and left nothing to do afterwards (see [`run_chain`](Self::run_chain)).
    #[inline(always)]
    fn fire_solo(&mut self, solo: Solo, e: &E) -> bool {
        let handler = self.table.solo_handler(solo);
        let Some(inst) = self.instances[solo.instance as usize].as_mut() else {
            return false;
        };
        let result = Self::run_handler(&mut self.fx, handler, inst, solo.instance, e);
        self.after_handler_with(solo.instance, result, true)
    }

    /// Runs the rest of a chain: while the event just dispatched by `solo`'s listener (the current
    /// one) routed exactly one event (the front slot; nothing above `mark`, the height after the
    /// take) and it is of the same `kind`, drops the current event, takes that one and runs the
    /// listener on it. Returns when the chain ends or leaves the fast case, with the current slot
    /// holding the last event dispatched and that event's after-handler work done.
    ///
    /// This is exactly what the route loop would do for each link (R3.2: the front event is the
    /// next entry; the height and so the max depth do not change), minus what cannot have changed:
    /// the loop enters only after a dispatch that left nothing to do (no operation, no panic, no
    /// instance to check, no `completed` listener of the kind), and a handler changes listeners
    /// and instances only through operations, so while each link also leaves nothing to do the
    /// kind's view, the listener, its instance and the compaction state stay as they were. A link
    /// that leaves work (an operation or a panic) gets the usual after-handler treatment and ends
    /// the chain; the loop then seals and compacts as after any event.
    #[inline(always)]
    fn run_chain(&mut self, solo: Solo, kind: E::Kind, mark: usize) {
        // Most dispatches are no chain link (an inbox event routing nothing, a leaf): decide that
        // before looking anything up.
        if !Self::links(&self.fx.routes, mark, kind) {
            return;
        }
        let Self {
            table,
            instances,
            fx,
            ..
        } = self;
        let handler = table.solo_handler(solo);
        let Some(inst) = instances[solo.instance as usize].as_mut() else {
            return;
        };
        let result = loop {
            // SAFETY: the current slot holds the event dispatched last, which nothing uses any
            // more, and `chained` found the front event.
            let slot = unsafe { fx.routes.advance() };
            // SAFETY: `advance` made the front event current; it stays in place until the next
            // `advance` or the caller's `drop_current`.
            let e = unsafe { slot.as_ref() };
            fx.stats.processed += 1;
            let result = Self::run_handler(fx, handler, inst, solo.instance, e);
            if result.is_err() || !fx.ops.is_empty() {
                break result;
            }
            if !Self::links(&fx.routes, mark, kind) {
                return;
            }
        };
        self.after_handler_with(solo.instance, result, true);
    }

    /// Whether the current event routed exactly one event since `mark`, of `kind`: the next link
    /// of a chain.
    #[inline(always)]
    fn links(routes: &RouteStack<E>, mark: usize, kind: E::Kind) -> bool {
        routes.chained(mark).is_some_and(|next| next.kind() == kind)
    }

    /// Calls `handler` (a template listener's, alive) on `e` with the state of `inst`, its instance
    /// `instance`, catching a panic.
    #[inline(always)]
    fn run_handler(
        fx: &mut Effects<E>,
        handler: &mut Handler<E>,
        inst: &mut Instance<E>,
        instance: u32,
        e: &E,
    ) -> std::thread::Result<()> {
        // The listener is alive, so its instance has a live listener until the handler's
        // operations (applied after it returns) say otherwise.
        debug_assert!(
            inst.live_listeners > 0,
            "a live listener's instance counts none"
        );
        fx.current = instance;
        let state = &mut inst.state;
        panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, e)))
    }

    /// [`try_fire`](Self::try_fire) for a matching `on` listener (fires once, then ends).
    #[inline(never)]
    fn fire_once(&mut self, slot: u32, instance: u32, e: &E) -> bool {
        // It ends before it runs, so its instance's count is right when the handler returns.
        self.table.kill(slot);
        self.listener_ended(instance);
        let Some(l) = self.table.slots[slot as usize].as_mut() else {
            return true;
        };
        let Body::Template { handler, .. } = &mut l.body else {
            return true;
        };
        let Some(inst) = self.instances[instance as usize].as_mut() else {
            return true;
        };
        self.fx.current = instance;
        let state = &mut inst.state;
        let fx = &mut self.fx;
        let result = panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, e)));
        self.after_handler(instance, result);
        true
    }

    /// Steps an expression listener with an event or a timer; fires its handler for every match.
    /// Returns whether the stimulus advanced it.
    fn fire_expr(&mut self, slot: u32, stim: Stimulus<'_, E>) -> bool {
        let now = self.fx.now;
        let mut out = StepOut {
            timers: std::mem::take(&mut self.step_timers),
            progressed: false,
        };
        let mut fired = std::mem::take(&mut self.fired);
        let Some(l) = self.table.slots[slot as usize].as_mut() else {
            return false;
        };
        let (handle, instance) = (l.handle, l.instance);
        let Body::Expr { expr, .. } = &mut l.body else {
            return false;
        };
        // User code (the filters of its templates): a panic ends the listener's instance.
        let stepped = panic::catch_unwind(AssertUnwindSafe(|| {
            expr.step(stim, now, &mut out, &mut fired)
        }));
        self.step_timers = out.timers;
        let (progressed, alive) = match stepped {
            Ok(step) => step,
            Err(payload) => {
                self.step_timers.clear();
                fired.clear();
                self.fired = fired;
                self.after_handler(instance, Err(payload));
                return false;
            }
        };
        if alive {
            self.schedule(handle);
        } else {
            self.step_timers.clear();
            // It can no longer fire: it ends before its last handler runs (R7.3).
            self.table.kill(slot);
            self.listener_ended(instance);
        }
        for m in fired.drain(..) {
            let Some(l) = self.table.slots[slot as usize].as_mut() else {
                break;
            };
            let Body::Expr { handler, .. } = &mut l.body else {
                break;
            };
            let Some(inst) = self.instances[instance as usize].as_mut() else {
                break;
            };
            self.fx.current = instance;
            let state = &mut inst.state;
            let fx = &mut self.fx;
            let result = panic::catch_unwind(AssertUnwindSafe(|| handler(state, fx, &m)));
            self.after_handler(instance, result);
            if self.table.slot_of(handle).is_none() && alive {
                // Quit, or its instance ended, while matches were being delivered.
                break;
            }
        }
        fired.clear();
        self.fired = fired;
        progressed
    }

    fn listener_ended(&mut self, instance: u32) {
        if let Some(inst) = self.instances[instance as usize].as_mut() {
            inst.live_listeners = inst.live_listeners.saturating_sub(1);
            self.touched.push(instance);
        }
    }

    /// Applies the handler's operations and ends its instance if it died, panicked or has no
    /// listener left (R6.8).
    ///
    /// The common case (the handler returned, asked for nothing, no listener ended, its instance
    /// still has listeners, and no outer handler is pending) changes nothing and is decided here
    /// without a call; everything else goes through [`after_handler_slow`](Self::after_handler_slow),
    /// which would reach the same verdict for that case.
    #[inline]
    fn after_handler(&mut self, instance: u32, result: std::thread::Result<()>) {
        let has_listeners = self.instances[instance as usize]
            .as_ref()
            .is_some_and(|inst| inst.live_listeners > 0);
        self.after_handler_with(instance, result, has_listeners);
    }

    /// [`after_handler`](Self::after_handler), told whether `instance` has a live listener.
    /// Returns whether there was nothing to do.
    #[inline(always)]
    fn after_handler_with(
        &mut self,
        instance: u32,
        result: std::thread::Result<()>,
        has_listeners: bool,
    ) -> bool {
        let nothing_to_do = result.is_ok()
            && self.fx.ops.is_empty()
            && self.nesting == 0
            && self.touched.is_empty()
            && has_listeners;
        if !nothing_to_do {
            self.after_handler_slow(instance, result);
        }
        nothing_to_do
    }

    #[inline(never)]
    fn after_handler_slow(&mut self, instance: u32, result: std::thread::Result<()>) {
        let died = self.fx.ops.iter().any(|op| matches!(op, Op::Die));
        self.nesting += 1;
        self.apply_ops();
        self.nesting -= 1;
        if let Some(reason) = self.end_reason(instance, result, died) {
            self.end_instance(instance, reason);
        }
        self.touched.push(instance);
        // Only the outermost call decides who has no listener left: an outer handler's operations
        // (registering its next listener, say) may still be pending behind a nested spawn.
        if self.nesting > 0 {
            return;
        }
        self.end_listenerless();
    }

    /// Why `instance` ends after a handler or initialiser that returned `result` and asked to die
    /// (`died`), if it does; counts and reports a panic.
    fn end_reason(
        &mut self,
        instance: u32,
        result: std::thread::Result<()>,
        died: bool,
    ) -> Option<DieReason> {
        match result {
            Err(payload) => {
                self.fx.stats.handler_panics += 1;
                let message = panic_message(&*payload);
                tracing::warn!(
                    context = self.fx.me.id(),
                    instance,
                    %message,
                    "a handler panicked; its monitor instance ends"
                );
                Some(DieReason::Panicked(message))
            }
            Ok(()) if died => Some(DieReason::Died),
            Ok(()) => None,
        }
    }

    /// Ends the instances of `touched` that have no listener left (R6.8).
    fn end_listenerless(&mut self) {
        while let Some(i) = self.touched.pop() {
            let empty = self.instances[i as usize]
                .as_ref()
                .is_some_and(|inst| inst.live_listeners == 0);
            if empty {
                self.end_instance(i, DieReason::NoListeners);
            }
        }
    }

    /// Applies the operations the last handler asked for, in order.
    ///
    /// A local spawn creates its instance and runs the initialiser at once, and the initialiser's
    /// own operations (more spawns among them) are applied before the operations that followed
    /// the spawn: depth first. That is done with an explicit stack of [`OpFrame`]s rather than by
    /// recursion, so a chain of initialisers that each spawn the next may be of any depth (R6.2);
    /// likewise the operations of an `on_die` that runs on the way. Without a spawn (the common
    /// case) the operations are applied in a plain loop and their buffer is kept.
    fn apply_ops(&mut self) {
        if self.fx.ops.is_empty() {
            return;
        }
        let mut ops = std::mem::take(&mut self.fx.ops);
        if ops.iter().any(|op| matches!(op, Op::Spawn(_))) {
            self.apply_ops_with_spawns(ops);
            return;
        }
        for op in ops.drain(..) {
            self.apply_op(op);
        }
        // Keep the capacity: no allocation for operations in the steady state.
        if self.fx.ops.is_empty() {
            self.fx.ops = ops;
        }
    }

    /// Applies one operation other than a spawn.
    fn apply_op(&mut self, op: Op<E>) {
        match op {
            Op::Listen {
                handle,
                instance,
                mode,
                spec,
            } => self.listen(handle, instance, mode, spec),
            Op::Quit(handle) => {
                if let Some(slot) = self.table.slot_of(handle) {
                    if let Some(instance) = self.table.kill(slot) {
                        self.listener_ended(instance);
                    }
                }
            }
            Op::Subscribe(instance, ch) => self.subscribe(instance, ch),
            Op::Unsubscribe(instance, ch) => self.unsubscribe(instance, ch, 1),
            Op::Spawn(new) => {
                // Only `apply_ops_with_spawns` meets spawns; apply it the same way if not.
                self.apply_ops_with_spawns(vec![Op::Spawn(new)]);
            }
            // Decided by the caller before the operations are applied.
            Op::Die => {}
        }
    }

    /// [`apply_ops`](Self::apply_ops) for operations with a spawn among them: what
    /// `create_instance` and `end_instance` would do, with their operations pushed as frames
    /// instead of applied by a nested call.
    #[inline(never)]
    fn apply_ops_with_spawns(&mut self, ops: Vec<Op<E>>) {
        let base = self.op_frames.len();
        self.op_frames.push(OpFrame {
            ops: ops.into_iter(),
            then: AfterOps::Nothing,
        });
        let mut spawned = false;
        while self.op_frames.len() > base {
            let next = self.op_frames.last_mut().and_then(|f| f.ops.next());
            match next {
                Some(Op::Spawn(_)) if self.ending => {
                    // Shutdown is ending every instance: a new one would owe an `on_die` that may
                    // spawn again. Dropped before its initialiser runs.
                    tracing::debug!(
                        context = self.fx.me.id(),
                        "a spawn asked for while shutdown ends the instances is dropped"
                    );
                }
                Some(Op::Spawn(new)) => {
                    spawned = true;
                    let (instance, result) = self.start_instance(new);
                    let died = self.fx.ops.iter().any(|op| matches!(op, Op::Die));
                    let ops = std::mem::take(&mut self.fx.ops);
                    self.op_frames.push(OpFrame {
                        ops: ops.into_iter(),
                        then: AfterOps::Spawned {
                            instance,
                            result,
                            died,
                        },
                    });
                }
                Some(op) => self.apply_op(op),
                None => {
                    let Some(frame) = self.op_frames.pop() else {
                        break;
                    };
                    match frame.then {
                        AfterOps::Nothing => {}
                        AfterOps::Spawned {
                            instance,
                            result,
                            died,
                        } => {
                            if let Some(reason) = self.end_reason(instance, result, died) {
                                if self.detach_instance(instance, reason) {
                                    let ops = std::mem::take(&mut self.fx.ops);
                                    self.op_frames.push(OpFrame {
                                        ops: ops.into_iter(),
                                        then: AfterOps::Free(instance),
                                    });
                                }
                            }
                            self.touched.push(instance);
                        }
                        AfterOps::Free(instance) => self.free_instances.push(instance),
                    }
                }
            }
        }
        // As `after_handler` does for an instance created outside any handler's operations: the
        // outermost call decides who has no listener left.
        if spawned && self.nesting == 0 {
            self.end_listenerless();
        }
    }

    fn listen(&mut self, handle: u64, instance: u32, mode: Mode, spec: Spec<E>) {
        if self.instances[instance as usize].is_none() {
            return;
        }
        let (body, index) = match spec {
            Spec::Template(p, handler) => {
                let index = [(p.template.kind, p.template.key)];
                let body = Body::Template {
                    template: p.template,
                    handler,
                };
                (body, index.to_vec())
            }
            Spec::Expr(expr, handler) => {
                let mut out = StepOut {
                    timers: std::mem::take(&mut self.step_timers),
                    progressed: false,
                };
                let l = ExprListener::new(expr, mode == Mode::All, self.fx.now, &mut out);
                self.step_timers = out.timers;
                if let Some(why) = l.never_matches() {
                    tracing::warn!(context = self.fx.me.id(), instance, handle, "{why}");
                }
                self.schedule(handle);
                let index = l.leaves();
                (Body::Expr { expr: l, handler }, index)
            }
        };
        self.table.insert(handle, instance, mode, body, &index);
        if let Some(inst) = self.instances[instance as usize].as_mut() {
            inst.live_listeners += 1;
            if inst.listeners.len() >= 2 * inst.live_listeners as usize + 8 {
                let table = &self.table;
                inst.listeners.retain(|&h| table.slot_of(h).is_some());
            }
            inst.listeners.push(handle);
        }
    }

    fn subscribe(&mut self, instance: u32, ch: Channel) {
        let Some(inst) = self.instances[instance as usize].as_mut() else {
            return;
        };
        *inst.subscriptions.entry(ch).or_insert(0) += 1;
        let count = self.subscriptions.entry(ch).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.fx
                .links
                .shared()
                .channels
                .set_subscribed(ch, self.fx.me.id(), true);
        }
    }

    fn unsubscribe(&mut self, instance: u32, ch: Channel, n: u32) {
        let Some(inst) = self.instances[instance as usize].as_mut() else {
            return;
        };
        let Some(held) = inst.subscriptions.get_mut(&ch) else {
            return;
        };
        let n = n.min(*held);
        *held -= n;
        if *held == 0 {
            inst.subscriptions.remove(&ch);
        }
        self.release_subscription(ch, n);
    }

    fn release_subscription(&mut self, ch: Channel, n: u32) {
        let Some(count) = self.subscriptions.get_mut(&ch) else {
            return;
        };
        *count = count.saturating_sub(n);
        if *count == 0 {
            self.subscriptions.remove(&ch);
            // A public context keeps its permanent bit for the default channel.
            if !(ch == Channel::DEFAULT && self.shared.public) {
                self.fx
                    .links
                    .shared()
                    .channels
                    .set_subscribed(ch, self.fx.me.id(), false);
            }
        }
    }

    /// Creates an instance and runs its initialiser (load hook or spawn initialiser).
    fn create_instance(&mut self, new: NewInstance<E>) {
        let (id, result) = self.start_instance(new);
        self.after_handler(id, result);
    }

    /// Creates an instance and runs its initialiser, leaving the initialiser's operations in
    /// `fx.ops`; returns the instance's id and how the initialiser ended.
    fn start_instance(&mut self, new: NewInstance<E>) -> (u32, std::thread::Result<()>) {
        let NewInstance {
            state,
            on_die,
            init,
        } = new;
        let instance = Instance {
            state,
            on_die,
            live_listeners: 0,
            listeners: Vec::new(),
            subscriptions: HashMap::new(),
        };
        let id = match self.free_instances.pop() {
            Some(id) => {
                self.instances[id as usize] = Some(instance);
                id
            }
            None => {
                self.instances.push(Some(instance));
                (self.instances.len() - 1) as u32
            }
        };
        self.live_instances += 1;
        let Some(inst) = self.instances[id as usize].as_mut() else {
            return (id, Ok(()));
        };
        self.fx.current = id;
        let state = &mut inst.state;
        let fx = &mut self.fx;
        let result = panic::catch_unwind(AssertUnwindSafe(|| init(state, fx)));
        (id, result)
    }

    /// Ends an instance: removes its listeners and subscriptions, then runs `on_die` once.
    fn end_instance(&mut self, id: u32, reason: DieReason) {
        if self.detach_instance(id, reason) {
            // Apply what `on_die` asked for before the id can be reused, so that nothing it
            // registered attaches to a later instance.
            self.apply_ops();
            self.free_instances.push(id);
        }
    }

    /// [`end_instance`](Self::end_instance) up to `on_die`, whose operations it leaves in
    /// `fx.ops`: the caller applies them, then frees the id. Returns false if the instance had
    /// already ended.
    fn detach_instance(&mut self, id: u32, reason: DieReason) -> bool {
        let Some(mut inst) = self.instances[id as usize].take() else {
            return false;
        };
        self.live_instances -= 1;
        for handle in inst.listeners.drain(..) {
            if let Some(slot) = self.table.slot_of(handle) {
                self.table.kill(slot);
            }
        }
        inst.live_listeners = 0;
        for (ch, n) in std::mem::take(&mut inst.subscriptions) {
            self.release_subscription(ch, n);
        }
        // `on_die` runs with the instance already detached: what it registers is dropped, what it
        // routes and sends is delivered.
        self.fx.current = id;
        let on_die = &mut inst.on_die;
        let state = &mut inst.state;
        let fx = &mut self.fx;
        let r = &reason;
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| on_die(state, r, fx))) {
            self.fx.stats.handler_panics += 1;
            tracing::error!(
                context = self.fx.me.id(),
                instance = id,
                message = %panic_message(&*payload),
                "an on_die hook panicked; the panic is contained"
            );
        }
        // The state's `Drop` is user code too.
        self.contain(move || drop(inst), "dropping a monitor instance's state");
        true
    }

    /// Ends every remaining instance (graceful shutdown). Local spawns asked for from here on (by
    /// an `on_die` hook, or by a handler of an event it routes) are dropped, so this ends.
    fn end_all(&mut self, reason: DieReason) {
        self.ending = true;
        // Each instance gets its hook exactly once; none is created meanwhile.
        while let Some(id) = self.instances.iter().position(Option::is_some) {
            let reason = reason.clone();
            // Outside the guarded event loop: contain what escapes here too.
            let ended = panic::catch_unwind(AssertUnwindSafe(|| {
                self.run_then_drain(|core| core.end_instance(id as u32, reason))
            }));
            if let Err(payload) = ended {
                self.recover(payload);
                self.drain_contained();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32-byte event, the size of the harness's.
    #[derive(Clone)]
    struct Wide {
        _fields: [u64; 3],
        kind: u32,
    }

    impl Event for Wide {
        type Kind = u32;
        fn kind(&self) -> u32 {
            self.kind
        }
    }

    // R5.1: an inbox of capacity N holds N entries of fixed size, so the entry size is the memory
    // of every inbox place: a spawn must not make every event's place larger than the event needs.
    #[test]
    fn r5_1_an_inbox_place_is_no_larger_than_an_event_and_a_tag() {
        let event = std::mem::size_of::<Wide>();
        // What the boxing of `Entry::Spawn` saves: a spawn's payload is larger than such an event.
        assert!(std::mem::size_of::<NewInstance<Wide>>() > event + 8);
        assert!(
            std::mem::size_of::<Entry<Wide>>() <= event + 8,
            "Entry<E> is {} bytes for a {event}-byte event",
            std::mem::size_of::<Entry<Wide>>()
        );
    }
}
