//! The one push path: every send (from a context or an input handle; blocking, non-blocking or
//! timed; to a context or a channel) goes through [`Links::reserve`] and [`Inbox::commit`].
//!
//! # Back-pressure and deadlock avoidance (SPEC §5)
//! A sender that finds an inbox full waits for room (R5.1), escalating spin → yield → park through
//! the inbox's room-waiter protocol. A *context* about to wait first records the edge
//! "I wait on target" in the correlator's wait graph and walks the graph from the target: if the walk
//! comes back to the sender, waiting would close a cycle of contexts each waiting on the next one's
//! full inbox (a context sending to its own full inbox is the shortest), so the sender takes a place
//! beyond capacity instead (R5.2). The graph is a mutex-guarded vector touched only by senders that
//! are about to block, so every edge insertion is totally ordered: of two contexts closing a cycle at
//! the same moment, the second to record its edge sees the first's and overruns. Edges are removed
//! when the wait ends.
//!
//! An input handle used on a context's own thread (inside a handler) is that context for this
//! rule: it records the context's edge and overruns where waiting would close a cycle, so that a
//! handler's blocking send through a handle into its own full inbox cannot hang. It still sends
//! as external input (refused once shutdown closes input, R8.1). Finding out is one read of a
//! thread-local that every context thread sets when it starts, made only by an input handle that
//! is about to wait.
//!
//! A sender never holds a reservation while it waits: a reserved, uncommitted place makes the
//! consumer spin for it, so holding one while blocked could stall a context outside the wait graph.
//! Multi-target non-blocking sends are all-or-nothing by reserving every target first and cancelling
//! on the first refusal.
//!
//! Owns the send path (reserve, wait, commit) and [`OwnInbox`]. May import the leaves, `inbox`,
//! `channel`, `error`, `entry` and `registry` (the type recursion that `entry` names).

use std::time::Instant;

use crate::channel::Channel;
use crate::config::{Backoff, Step, WaitStrategy};
use crate::entry::{Entry, HandlerLinks};
use crate::error::{Error, SendBatchError, SendError, SendErrorKind};
use crate::event::Event;
use crate::id::ContextRef;
use crate::inbox::{self, Detached, Inbox, Refusal, Reservation, RoomTicket, RoomWait, Sender};
use crate::output::{OutputQueue, Pushed};
use crate::registry::WaitGraph;
use crate::shared::{ContextShared, Shared};
use crate::sync::{self, Arc, Ordering, StdArc};

/// How long a send may wait for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until there is room (or the target closes).
    Block,
    /// Not at all.
    Never,
    /// Until this instant.
    Until(Instant),
}

/// Why a closed inbox refused `sender`: an input handle while external input is closed is refused
/// because of the shutdown, which is what it needs to know; otherwise the context has stopped (a
/// context sender is refused only then, and an input handle only when the context's thread died
/// while the correlator runs).
fn refusal_kind<T>(inbox: &Inbox<T>, sender: Sender) -> SendErrorKind {
    if sender == Sender::External && inbox.is_input_closed() {
        SendErrorKind::Closed
    } else {
        SendErrorKind::ContextStopped
    }
}

/// Turns a refused spawn or load into the operation error.
pub(crate) fn kind_to_error(kind: SendErrorKind, ctx: ContextRef) -> Error {
    match kind {
        SendErrorKind::UnknownContext => Error::UnknownContext(ctx),
        SendErrorKind::ContextStopped => Error::ContextStopped(ctx),
        SendErrorKind::FullBeforeStart => Error::FullBeforeStart(ctx),
        _ => Error::ShutDown,
    }
}

/// A sending context's own inbox: the places it still holds for entries it has processed (see the
/// context module's "Giving places back in batches"), with its count of processed entries. A
/// context gives them back every `batch` entries, when its inbox has nothing ready, and before any
/// send of its own finds an inbox full, so that a context that waits holds none.
///
/// Consumer-only, like the [`inbox::HeldPlaces`] it wraps: `!Send`, made on the context's thread.
pub(crate) struct OwnInbox<E: Event> {
    ctx: Arc<ContextShared<E>>,
    places: inbox::HeldPlaces<Entry<E>>,
    /// Entries taken from the inbox and fully processed: the `done` figure of the shutdown scan.
    done: u64,
}

/// What a sender gives back before it waits for room: a context its [`OwnInbox`]'s places, an
/// input handle nothing ([`NoPlaces`]).
pub(crate) trait GiveBack {
    /// Frees the places held; returns whether it freed anything (the full inbox may have been the
    /// sender's own: retry at once).
    fn give_back(&mut self) -> bool;
}

/// An input handle's side of [`GiveBack`]: it never holds a place.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoPlaces;

impl GiveBack for NoPlaces {
    #[inline(always)]
    fn give_back(&mut self) -> bool {
        false
    }
}

impl<E: Event> OwnInbox<E> {
    /// For the context `ctx`, whose consumer made `places`.
    pub(crate) fn new(ctx: Arc<ContextShared<E>>, places: inbox::HeldPlaces<Entry<E>>) -> Self {
        Self {
            ctx,
            places,
            done: 0,
        }
    }

    /// Records one more processed entry; returns whether a batch is full (call
    /// [`give_back`](GiveBack::give_back)).
    #[inline]
    pub(crate) fn processed_one(&mut self) -> bool {
        self.done += 1;
        self.places.hold_one()
    }
}

impl<E: Event> GiveBack for OwnInbox<E> {
    /// Publishes the count of processed entries, then frees their places (in that order: the
    /// shutdown scan reads a zero count as "everything done" and then compares `done`); wakes
    /// senders waiting for room. Returns whether it freed anything.
    fn give_back(&mut self) -> bool {
        if self.places.held() == 0 {
            return false;
        }
        self.ctx.stats.done.store(self.done, Ordering::Release);
        self.places.give_back()
    }
}

/// How a wait for a place ended without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPlace {
    /// The inbox closed for this sender while it waited.
    Closed,
    /// The deadline passed.
    TimedOut,
}

/// The slow path of every send that may wait, after `try_reserve` found `inbox` full (the loom models
/// in `loom-tests/` call this very function).
///
/// `cycle` is `(graph, me, target)` for a sending context and `None` for an input handle. A context
/// first records the edge "`me` waits on `target`": if that closes a cycle of contexts each waiting
/// on the next one's full inbox, it takes a place beyond capacity at once (R5.2) and the result says
/// `true`. Otherwise it waits for room (R5.1): each round calls `pause`, which performs one back-off
/// step (spin or yield) and returns `false`, or returns `true` to park through the inbox's
/// room-waiter protocol; then it tries to reserve again. The edge is removed when the wait ends.
///
/// # Errors
/// [`NoPlace::Closed`] when the inbox refuses `sender`; [`NoPlace::TimedOut`] once `deadline` passed.
pub fn reserve_after_full<'a, T>(
    inbox: &'a Inbox<T>,
    sender: Sender,
    cycle: Option<(&WaitGraph, u32, u32)>,
    deadline: Option<Instant>,
    mut pause: impl FnMut() -> bool,
) -> Result<(Reservation<'a, T>, bool), NoPlace> {
    if let Some((graph, me, target)) = cycle {
        if graph.would_deadlock(me, target) {
            // A cycle can overrun on every send while it lasts: log the 1st, 2nd, 4th, 8th, ...
            // overrun of each inbox, so a storm costs a few lines (the status counts every one).
            // Logged before the place is taken: `tracing` runs the user's subscriber, and no user
            // code runs while a reservation is held (the consumer waits for a reserved place).
            let overruns = inbox.overruns() + 1;
            if overruns.is_power_of_two() {
                tracing::warn!(
                    from = me,
                    to = target,
                    overruns,
                    "inbox taken beyond capacity: waiting would close a cycle of full inboxes"
                );
            }
            let r = inbox.reserve_overrun(sender);
            return r.map(|r| (r, true)).map_err(|_| NoPlace::Closed);
        }
    }
    let result = loop {
        if pause() {
            match inbox.wait_for_room(sender, deadline) {
                RoomWait::Retry => {}
                RoomWait::Closed => break Err(NoPlace::Closed),
                RoomWait::TimedOut => break Err(NoPlace::TimedOut),
            }
        }
        match inbox.try_reserve(sender) {
            Ok(r) => break Ok((r, false)),
            Err(Refusal::Closed) => break Err(NoPlace::Closed),
            Err(Refusal::Full) => {}
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Err(NoPlace::TimedOut);
        }
    };
    if let Some((graph, me, _)) = cycle {
        graph.clear(me);
    }
    result
}

/// How many receivers a channel send reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deliveries {
    pub(crate) contexts: usize,
    pub(crate) outputs: usize,
}

impl Deliveries {
    pub(crate) fn total(self) -> usize {
        self.contexts + self.outputs
    }
}

/// A sender's view of the correlator: a local cache of the context registry, so that a send looks
/// its target up without a lock, refreshed only when it meets a context it does not know yet.
pub(crate) struct Links<E: Event, H: GiveBack = NoPlaces> {
    shared: Arc<Shared<E>>,
    contexts: Vec<Arc<ContextShared<E>>>,
    me: Option<ContextRef>,
    /// The correlator's tag: a [`ContextRef`] carrying another is refused.
    tag: u32,
    /// [`ContextRef::word`] of this correlator's context 0: the word of context `i` is
    /// `base + i`.
    base: u64,
    strategy: WaitStrategy,
    /// Reused buffer of channel subscribers.
    targets: Vec<u32>,
    /// Reused buffer of reservations for all-or-nothing sends.
    reserved: Vec<(u32, Detached)>,
    /// Reused buffer of the copies an all-or-nothing send commits.
    copies: Vec<E>,
    /// What the sender gives back before it waits: a context's own inbox places.
    pub(crate) held: H,
    blocked_ns: u64,
    /// This sender's copies of the output lists of the channels it delivered to (see `channel`).
    outputs: Vec<CachedOutputs<E>>,
    /// Events the outputs' policies dropped (or discarded, for typed outputs) since the last
    /// [`take_output_drops`](Links::take_output_drops). (Its time waiting for room in `Block`
    /// outputs is published at once, in the context's `OutputWaitBoard`.)
    output_drops: u64,
    /// The sending context's shared part (`None` for an input handle): where it publishes its
    /// waits for room in `Block` outputs (R9.1).
    own: Option<Arc<ContextShared<E>>>,
    /// The builder's `output_block_warning`.
    output_block_warning: Option<std::time::Duration>,
}

/// A handler sends through the links of its context, which give back its own inbox's places.
impl<E: Event> HandlerLinks for E {
    type Links = Links<E, OwnInbox<E>>;
}

/// A sender's copy of one channel's output list, valid while the channel's generation is
/// `generation`.
struct CachedOutputs<E> {
    channel: Channel,
    generation: u64,
    queues: Vec<StdArc<OutputQueue<E>>>,
}

/// How one delivery to an output ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutputDelivery {
    /// Queued (possibly displacing an older event, counted).
    Queued,
    /// Dropped by the policy (counted).
    Dropped,
    /// The receiver is gone or the output closed.
    Disconnected,
}

impl<E: Event, H: GiveBack> Links<E, H> {
    /// Links for the context `me` (giving back `held` before it waits), or for an input handle
    /// (`me` is `None`, `held` is [`NoPlaces`]).
    pub(crate) fn new(shared: Arc<Shared<E>>, me: Option<ContextRef>, held: H) -> Self {
        let own = me.and_then(|c| {
            sync::read_lock(&shared.contexts)
                .get(c.id() as usize)
                .cloned()
        });
        let strategy = own.as_ref().map(|ctx| ctx.wait).unwrap_or_default();
        let output_block_warning = shared.config.output_block_warning;
        Self {
            tag: shared.tag,
            base: u64::from(shared.tag) << 32,
            shared,
            contexts: Vec::new(),
            me,
            strategy,
            targets: Vec::new(),
            reserved: Vec::new(),
            copies: Vec::new(),
            held,
            blocked_ns: 0,
            outputs: Vec::new(),
            output_drops: 0,
            own,
            output_block_warning,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<E>> {
        &self.shared
    }

    /// Time spent blocked since the last call.
    pub(crate) fn take_blocked_ns(&mut self) -> u64 {
        std::mem::take(&mut self.blocked_ns)
    }

    /// Events dropped by outputs' policies since the last call (a context's deliveries; an input
    /// handle's drops are counted in the correlator's registry at once).
    pub(crate) fn take_output_drops(&mut self) -> u64 {
        std::mem::take(&mut self.output_drops)
    }

    /// Makes sure `id` is in the local cache; returns whether it exists.
    #[inline]
    fn know(&mut self, id: u32) -> bool {
        if (id as usize) < self.contexts.len() {
            return true;
        }
        self.refresh();
        (id as usize) < self.contexts.len()
    }

    /// The id of `to` if it is a context of this correlator, making sure it is in the local cache.
    ///
    /// A reference of another correlator names none of ours, whatever its id. Checked with the
    /// cache's bound: `to.word() - base` is the id for a reference of this correlator, and at
    /// least 2^32 (wrapping) for any other, so the common case is one subtraction and one
    /// comparison.
    #[inline(always)]
    fn index_of(&mut self, to: ContextRef) -> Option<u32> {
        let i = to.word().wrapping_sub(self.base);
        if i < self.contexts.len() as u64 {
            return Some(i as u32);
        }
        self.index_of_new(to)
    }

    /// [`index_of`](Self::index_of) for a reference not in the cache.
    #[cold]
    #[inline(never)]
    fn index_of_new(&mut self, to: ContextRef) -> Option<u32> {
        (to.correlator() == self.tag && self.know(to.id())).then_some(to.id())
    }

    /// Copies the contexts created since the last refresh into the local cache.
    pub(crate) fn refresh(&mut self) {
        let registry = sync::read_lock(&self.shared.contexts);
        self.contexts
            .extend(registry[self.contexts.len()..].iter().cloned());
    }

    /// Reserves a place in `to`'s inbox; the caller commits through the reservation.
    #[inline(always)]
    fn reserve_to(
        &mut self,
        to: ContextRef,
        wait: Wait,
    ) -> Result<Reservation<'_, Entry<E>>, SendErrorKind> {
        let Some(id) = self.index_of(to) else {
            return Err(SendErrorKind::UnknownContext);
        };
        self.reserve(id, wait)
    }

    /// Reserves a place in the inbox of context `id` (known: in `contexts`), waiting as `wait`
    /// allows. A context gives back its held places before it waits (and retries at once if it
    /// gave any: the full inbox may be its own). Adds the time spent waiting to `blocked_ns`.
    ///
    /// Inlined: the common case is one [`Inbox::try_reserve`]; a refusal goes to the cold
    /// [`Waiter::reserve_refused`], so that a send inlines no waiting code and saves
    /// no registers for it.
    #[inline(always)]
    fn reserve(&mut self, id: u32, wait: Wait) -> Result<Reservation<'_, Entry<E>>, SendErrorKind> {
        let sender = self.sender();
        // Split borrows: the reservation borrows `contexts`, the slow path needs the other fields.
        let Self {
            contexts,
            shared,
            me,
            strategy,
            held,
            blocked_ns,
            ..
        } = self;
        let target = &contexts[id as usize];
        match target.inbox.try_reserve(sender) {
            Ok(r) => Ok(r),
            Err(refusal) => {
                let waiter = Waiter {
                    shared,
                    me: *me,
                    strategy: *strategy,
                    held,
                    blocked_ns,
                };
                waiter.reserve_refused(target, wait, sender, refusal)
            }
        }
    }
}

/// What the slow path of a send needs of its [`Links`] besides the target (see
/// [`Links::reserve`]'s split borrows).
struct Waiter<'l, E: Event, H> {
    shared: &'l Shared<E>,
    me: Option<ContextRef>,
    strategy: WaitStrategy,
    held: &'l mut H,
    blocked_ns: &'l mut u64,
}

impl<E: Event, H: GiveBack> Waiter<'_, E, H> {
    /// [`Links::reserve`] after `try_reserve` refused with `refusal`.
    #[cold]
    #[inline(never)]
    fn reserve_refused<'t>(
        self,
        target: &'t ContextShared<E>,
        wait: Wait,
        sender: Sender,
        mut refusal: Refusal,
    ) -> Result<Reservation<'t, Entry<E>>, SendErrorKind> {
        loop {
            match refusal {
                Refusal::Closed => return Err(refusal_kind(&target.inbox, sender)),
                Refusal::Full if self.held.give_back() => {}
                Refusal::Full => break,
            }
            match target.inbox.try_reserve(sender) {
                Ok(r) => return Ok(r),
                Err(again) => refusal = again,
            }
        }
        let deadline = match wait {
            Wait::Never => return Err(SendErrorKind::Full),
            Wait::Until(d) => Some(d),
            Wait::Block => None,
        };
        if !self.shared.started.load(Ordering::Acquire) {
            // Nobody takes entries before `start()`: a wait could only end by timing out.
            if deadline.is_none() {
                return Err(SendErrorKind::FullBeforeStart);
            }
        }
        let began = Instant::now();
        // An input handle waiting on a context's own thread waits as that context (module docs).
        let me = self.me.or_else(|| self.shared.context_of_current_thread());
        let cycle = me.map(|me| (&self.shared.waits, me.id(), target.id));
        let mut backoff = Backoff::new(self.strategy);
        let result = reserve_after_full(&target.inbox, sender, cycle, deadline, || {
            match backoff.next_or_park() {
                Step::Spin => sync::spin_hint(),
                Step::Yield => sync::yield_now(),
                Step::Park => return true,
            }
            false
        })
        .map(|(r, _)| r)
        .map_err(|end| match end {
            NoPlace::Closed => refusal_kind(&target.inbox, sender),
            NoPlace::TimedOut => SendErrorKind::Timeout,
        });
        *self.blocked_ns += began.elapsed().as_nanos() as u64;
        result
    }
}

impl<E: Event, H: GiveBack> Links<E, H> {
    /// Pushes one entry into `to`'s inbox.
    pub(crate) fn push_entry(
        &mut self,
        to: ContextRef,
        entry: Entry<E>,
        wait: Wait,
    ) -> Result<(), SendErrorKind> {
        self.reserve_to(to, wait)?.commit(entry);
        Ok(())
    }

    /// Sends an event to one context. Always inlined into the caller's loop, for the reason given
    /// at `InputHandle::send_to`.
    #[inline(always)]
    pub(crate) fn send_to(
        &mut self,
        to: ContextRef,
        event: E,
        wait: Wait,
    ) -> Result<(), SendError<E>> {
        match self.reserve_to(to, wait) {
            Ok(r) => {
                r.commit(Entry::Event(event));
                Ok(())
            }
            Err(kind) => Err(SendError::new(kind, Some(to), event)),
        }
    }

    /// Sends the events of `events` to one context, in order, in as few reservations as the room
    /// allows (each one CAS for all the places it takes), removing what it sent from the front of
    /// `events`; returns how many it sent.
    ///
    /// `Wait::Block` takes whatever room there is (up to the rest of the batch) and waits, as a
    /// single send does, only when there is none: one event then goes through the single send's
    /// slow path (waiting for room, R5.1, or beyond capacity where waiting would close a cycle,
    /// R5.2), and the batch goes on. Any size is accepted. `Wait::Never` and `Wait::Until` are
    /// all-or-nothing: every event is sent with one reservation or none is, so a batch above the
    /// capacity is refused with `BatchTooLarge`; the timed send waits (holding nothing) until room
    /// for the whole batch is free at once.
    pub(crate) fn send_batch_to(
        &mut self,
        to: ContextRef,
        events: &mut Vec<E>,
        wait: Wait,
    ) -> Result<usize, SendBatchError> {
        let total = events.len();
        let Some(id) = self.index_of(to) else {
            return Err(SendBatchError::new(
                SendErrorKind::UnknownContext,
                Some(to),
                0,
            ));
        };
        if total == 0 {
            return Ok(0);
        }
        let sender = self.sender();
        let result = match wait {
            Wait::Block => self.send_batch_blocking(id, events, sender),
            Wait::Never => self.send_batch_whole(id, events, sender, None),
            Wait::Until(d) => self.send_batch_whole(id, events, sender, Some(d)),
        };
        result.map_err(|kind| SendBatchError::new(kind, Some(to), total - events.len()))?;
        Ok(total)
    }

    /// Whether this links' sends are a context's or an input handle's.
    #[inline]
    fn sender(&self) -> Sender {
        if self.me.is_some() {
            Sender::Context
        } else {
            Sender::External
        }
    }

    /// [`send_batch_to`](Self::send_batch_to) with `Wait::Block`.
    fn send_batch_blocking(
        &mut self,
        id: u32,
        events: &mut Vec<E>,
        sender: Sender,
    ) -> Result<(), SendErrorKind> {
        while !events.is_empty() {
            let inbox = &self.contexts[id as usize].inbox;
            let refusal = match inbox.try_reserve_batch(sender, 1, events.len()) {
                Ok(mut places) => {
                    // Moves only: no user code runs while the places are held.
                    for e in events.drain(..places.len()) {
                        places.push(Entry::Event(e));
                    }
                    continue;
                }
                Err(refusal) => refusal,
            };
            if refusal == Refusal::Closed {
                return Err(refusal_kind(inbox, sender));
            }
            // No room at all: the single send's slow path (wait, or overrun) for the first event.
            let r = self.reserve(id, Wait::Block)?;
            r.commit(Entry::Event(events.remove(0)));
        }
        Ok(())
    }

    /// [`send_batch_to`](Self::send_batch_to), all-or-nothing: waits until `deadline` (holding no
    /// place) if given.
    fn send_batch_whole(
        &mut self,
        id: u32,
        events: &mut Vec<E>,
        sender: Sender,
        deadline: Option<Instant>,
    ) -> Result<(), SendErrorKind> {
        let n = events.len();
        loop {
            let inbox = &self.contexts[id as usize].inbox;
            if n > inbox.capacity() {
                return Err(SendErrorKind::BatchTooLarge);
            }
            match inbox.try_reserve_batch(sender, n, n) {
                Ok(mut places) => {
                    // Moves only: no user code runs while the places are held.
                    for e in events.drain(..) {
                        places.push(Entry::Event(e));
                    }
                    return Ok(());
                }
                Err(Refusal::Closed) => return Err(refusal_kind(inbox, sender)),
                Err(Refusal::Full) => {}
            }
            // A context's own held places may be what fills it: give them back and retry at once.
            if self.held.give_back() {
                continue;
            }
            let Some(d) = deadline else {
                return Err(SendErrorKind::Full);
            };
            if Instant::now() >= d {
                return Err(SendErrorKind::Timeout);
            }
            let began = Instant::now();
            let waited = self.contexts[id as usize]
                .inbox
                .wait_for_room_for(sender, n, Some(d));
            self.blocked_ns += began.elapsed().as_nanos() as u64;
            match waited {
                RoomWait::Retry => {}
                RoomWait::Closed => {
                    return Err(refusal_kind(&self.contexts[id as usize].inbox, sender))
                }
                RoomWait::TimedOut => return Err(SendErrorKind::Timeout),
            }
        }
    }

    /// The reference of this correlator's context `id`.
    fn context_ref(&self, id: u32) -> ContextRef {
        ContextRef::new(self.tag, id)
    }

    /// Sends a clock tick to every context, in id order (R7.1); returns how many took it.
    pub(crate) fn send_time_all(&mut self, t: crate::time::Time, wait: Wait) -> usize {
        self.refresh();
        let mut n = 0;
        for id in 0..self.contexts.len() as u32 {
            if self
                .push_entry(self.context_ref(id), Entry::Tick(t), wait)
                .is_ok()
            {
                n += 1;
            }
        }
        n
    }

    /// Delivers `event` to the output receivers of `channel`; returns how many queued it.
    pub(crate) fn emit(&mut self, channel: Channel, event: &E) -> usize {
        self.deliver_outputs(channel, event)
    }

    /// The index in `outputs` of `channel`'s list, brought up to date; `None` when the channel
    /// never had an output. Steady state: one atomic read and a short scan, no lock.
    #[inline]
    fn cached_outputs(&mut self, channel: Channel) -> Option<usize> {
        let generation = self.shared.channels.output_generation(channel);
        if generation == 0 {
            return None;
        }
        match self.outputs.iter().position(|c| c.channel == channel) {
            Some(i) if self.outputs[i].generation == generation => Some(i),
            found => Some(self.refresh_outputs(channel, found)),
        }
    }

    /// Copies `channel`'s output list (it changed, or this sender never delivered to it).
    #[cold]
    #[inline(never)]
    fn refresh_outputs(&mut self, channel: Channel, found: Option<usize>) -> usize {
        let (generation, queues) = self.shared.channels.outputs_of(channel);
        let fresh = CachedOutputs {
            channel,
            generation,
            queues,
        };
        match found {
            Some(i) => {
                self.outputs[i] = fresh;
                i
            }
            None => {
                self.outputs.push(fresh);
                self.outputs.len() - 1
            }
        }
    }

    /// Delivers a copy of `event` to every output of `channel` (R4.2, R4.3), each as its policy
    /// says; returns how many queued it. Forgets outputs whose receivers are gone.
    pub(crate) fn deliver_outputs(&mut self, channel: Channel, event: &E) -> usize {
        let Some(i) = self.cached_outputs(channel) else {
            return 0;
        };
        // Moved out for the loop (no allocation), so that the pushes may use `self`.
        let queues = std::mem::take(&mut self.outputs[i].queues);
        let mut n = 0;
        let mut gone = false;
        for q in &queues {
            match self.push_output(q, event.clone()) {
                OutputDelivery::Queued => n += 1,
                OutputDelivery::Dropped => {}
                OutputDelivery::Disconnected => gone = true,
            }
        }
        self.outputs[i].queues = queues;
        if gone {
            self.shared.channels.prune_outputs(channel);
        }
        n
    }

    /// Whether a `Block` output of `channel` is full now (an all-or-nothing send must not wait
    /// for it); returns it.
    fn full_block_output(&mut self, channel: Channel) -> Option<StdArc<OutputQueue<E>>> {
        let i = self.cached_outputs(channel)?;
        self.outputs[i]
            .queues
            .iter()
            .find(|q| q.would_block())
            .cloned()
    }

    /// Pushes `value` into `queue` as its policy says; a `Block` output that is full makes this
    /// sender wait (see [`push_output_waiting`](Self::push_output_waiting)). Counts drops.
    #[inline]
    pub(crate) fn push_output<A>(&mut self, queue: &OutputQueue<A>, value: A) -> OutputDelivery {
        match queue.push(value) {
            Pushed::Queued => OutputDelivery::Queued,
            Pushed::Displaced => {
                self.count_output_drop();
                OutputDelivery::Queued
            }
            Pushed::Dropped => {
                self.count_output_drop();
                OutputDelivery::Dropped
            }
            Pushed::Disconnected => OutputDelivery::Disconnected,
            Pushed::Full(value) => self.push_output_waiting(queue, value),
        }
    }

    /// Puts `value` into a typed output (`Scope::emit_to`): as [`push_output`](Self::push_output),
    /// and a value discarded because the receiver is gone or the output closed counts as a drop
    /// too (the output counted it already). A channel's output is different: its receiver's drop
    /// takes it off the channel, like an unsubscribe, so a copy that meets it gone is not counted.
    pub(crate) fn push_typed_output<A>(&mut self, queue: &OutputQueue<A>, value: A) -> bool {
        match self.push_output(queue, value) {
            OutputDelivery::Queued => true,
            OutputDelivery::Dropped => false,
            OutputDelivery::Disconnected => {
                self.count_output_drop();
                false
            }
        }
    }

    fn count_output_drop(&mut self) {
        if self.me.is_some() {
            self.output_drops += 1;
        } else {
            self.shared
                .outputs
                .external_drops
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A `Block` output is full: wait for room (spin, yield, then park; module docs of `output`),
    /// holding no inbox place (a context gives its held places back first, as before any wait).
    ///
    /// A context publishes the wait while it lasts (R9.1): "blocked on this output since now" in
    /// its `OutputWaitBoard` as it begins, the time it took as it ends; the status snapshot reads
    /// that (`blocked_on_output`, and `output_blocked_ns` counting up while the wait goes on).
    /// Once the wait has lasted the builder's `output_block_warning` it logs a warning naming the
    /// output, then again after 2, 4, 8, … times that (it parks with a deadline for each).
    #[cold]
    #[inline(never)]
    fn push_output_waiting<A>(&mut self, queue: &OutputQueue<A>, value: A) -> OutputDelivery {
        self.held.give_back();
        let began = Instant::now();
        let board = self.own.as_ref().map(|own| {
            let since = own.stats.output_wait.begin(queue.id());
            (own.clone(), since)
        });
        // The next warning, and the wait it is due after (doubled after each warning).
        let mut warn_after = self.output_block_warning.filter(|_| board.is_some());
        let mut backoff = Backoff::new(self.strategy);
        let mut value = value;
        let delivery = loop {
            match backoff.next_or_park() {
                Step::Spin => sync::spin_hint(),
                Step::Yield => sync::yield_now(),
                Step::Park => match warn_after {
                    None => queue.wait_for_room(None),
                    Some(after) => {
                        queue.wait_for_room(Some(began + after));
                        let waited = began.elapsed();
                        if waited >= after {
                            self.warn_blocked(queue, waited);
                            warn_after = Some(after.saturating_mul(2));
                        }
                    }
                },
            }
            match queue.push(value) {
                Pushed::Full(back) => value = back,
                Pushed::Queued | Pushed::Displaced => break OutputDelivery::Queued,
                Pushed::Dropped => break OutputDelivery::Dropped,
                Pushed::Disconnected => break OutputDelivery::Disconnected,
            }
        };
        if let Some((own, since)) = board {
            own.stats.output_wait.end(since);
        }
        delivery
    }

    /// The warning of a long wait on a full `Block` output (no inbox place is held: `tracing`
    /// runs the user's subscriber).
    #[cold]
    fn warn_blocked<A>(&self, queue: &OutputQueue<A>, waited: std::time::Duration) {
        let context = self.me.map_or(u32::MAX, |c| c.id());
        tracing::warn!(
            context,
            output = queue.id(),
            waited_ms = waited.as_millis() as u64,
            "context {context} has waited {} ms for room in output {} ({}), a full `Block` \
             output: read its receiver, or give it a dropping overflow policy",
            waited.as_millis(),
            queue.id(),
            queue.name(),
        );
    }

    fn collect_targets(&mut self, channel: Channel) {
        let mut targets = std::mem::take(&mut self.targets);
        targets.clear();
        self.shared
            .channels
            .for_each_subscriber(channel, |c| targets.push(c));
        if let Some(&max) = targets.last() {
            self.know(max);
        }
        self.targets = targets;
    }

    /// Sends to every subscriber of `channel` one after the other, waiting as `wait` allows for each;
    /// a subscriber that stopped is skipped. Counts a drop when nobody received it (R4.5).
    pub(crate) fn send_channel(
        &mut self,
        channel: Channel,
        event: E,
        wait: Wait,
        outputs: bool,
    ) -> Deliveries {
        self.collect_targets(channel);
        let mut d = Deliveries::default();
        if outputs {
            d.outputs = self.deliver_outputs(channel, &event);
        }
        let mut event = Some(event);
        for i in 0..self.targets.len() {
            let id = self.targets[i];
            if id as usize >= self.contexts.len() {
                continue;
            }
            // Copy before reserving: user code (`clone`) never runs while a place is reserved, since
            // the consumer waits for a reserved place (see the inbox's module docs).
            let last = i + 1 == self.targets.len();
            let Some(e) = (if last { event.take() } else { event.clone() }) else {
                continue;
            };
            if let Ok(r) = self.reserve(id, wait) {
                r.commit(Entry::Event(e));
                d.contexts += 1;
            }
        }
        if d.total() == 0 {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    /// Sends every event of `events` to every subscriber of `channel`, each subscriber getting the
    /// whole batch in order through [`send_batch_to`](Self::send_batch_to)'s blocking path (as many
    /// places per reservation as are free), one subscriber after the other; a subscriber that
    /// stopped is skipped. Output receivers get each event first (`outputs`). Every copy is made
    /// before the places of its subscriber are reserved, into a reused buffer; the last subscriber
    /// gets the originals. Empties `events`; counts a drop per event when nobody received the batch
    /// (R4.5).
    pub(crate) fn send_channel_batch(
        &mut self,
        channel: Channel,
        events: &mut Vec<E>,
        outputs: bool,
    ) -> Deliveries {
        let mut d = Deliveries::default();
        if events.is_empty() {
            return d;
        }
        self.collect_targets(channel);
        if outputs {
            for e in events.iter() {
                d.outputs += self.deliver_outputs(channel, e);
            }
        }
        let sender = self.sender();
        let n = self.targets.len();
        let count = events.len();
        for i in 0..n {
            let id = self.targets[i];
            if id as usize >= self.contexts.len() {
                continue;
            }
            if i + 1 == n {
                let before = events.len();
                // A refusal (the subscriber stopped) skips it, as `send_channel` does.
                let _ = self.send_batch_blocking(id, events, sender);
                d.contexts += before - events.len();
            } else {
                let mut copies = std::mem::take(&mut self.copies);
                copies.clear();
                copies.extend(events.iter().cloned());
                let _ = self.send_batch_blocking(id, &mut copies, sender);
                d.contexts += count - copies.len();
                copies.clear();
                self.copies = copies;
            }
        }
        events.clear();
        if d.total() == 0 {
            self.shared
                .dropped
                .fetch_add(count as u64, Ordering::Relaxed);
        }
        d
    }

    /// All-or-nothing channel send for input handles: every subscribed context gets a copy, or none
    /// does and the event comes back. Waits (without holding places) until `deadline` if given.
    pub(crate) fn try_send_channel(
        &mut self,
        channel: Channel,
        event: E,
        deadline: Option<Instant>,
    ) -> Result<Deliveries, SendError<E>> {
        loop {
            self.collect_targets(channel);
            // Every copy is made before the first place is reserved: user code (`clone`) never runs
            // while a place is reserved, since the consumer waits for a reserved place. The original
            // goes to the last context unless output receivers need it after the commits.
            // A full `Block` output would make this send wait after its commits: refuse (or wait
            // for room, holding nothing) first, like a full inbox.
            if let Some(full) = self.full_block_output(channel) {
                if deadline.is_none_or(|d| Instant::now() >= d) {
                    let kind = if deadline.is_some() {
                        SendErrorKind::Timeout
                    } else {
                        SendErrorKind::Full
                    };
                    return Err(SendError::new(kind, None, event));
                }
                full.wait_for_room(deadline);
                continue;
            }
            let keep = self
                .cached_outputs(channel)
                .is_some_and(|i| !self.outputs[i].queues.is_empty());
            let n = self.targets.len();
            self.copies.clear();
            let copies = if keep { n } else { n.saturating_sub(1) };
            self.copies.extend((0..copies).map(|_| event.clone()));
            let mut refused = None;
            for i in 0..self.targets.len() {
                let id = self.targets[i];
                if id as usize >= self.contexts.len() {
                    continue;
                }
                let reserved = self.reserve(id, Wait::Never).map(Reservation::detach);
                match reserved {
                    Ok(r) => self.reserved.push((id, r)),
                    Err(kind) => {
                        refused = Some((id, kind));
                        break;
                    }
                }
            }
            let Some((id, kind)) = refused else {
                break;
            };
            for (rid, r) in self.reserved.drain(..) {
                let inbox = &self.contexts[rid as usize].inbox;
                // SAFETY: `r` was detached from a reservation of context `rid`'s inbox above.
                unsafe { inbox.resume(r) }.cancel();
            }
            // The copies of a refused round are not kept: the event comes back whole, and nothing
            // of it stays behind in the handle (a retry makes its copies again).
            self.copies.clear();
            let timed_out = deadline.is_none_or(|d| Instant::now() >= d);
            if kind != SendErrorKind::Full || timed_out {
                let kind = if kind == SendErrorKind::Full && deadline.is_some() {
                    SendErrorKind::Timeout
                } else {
                    kind
                };
                return Err(SendError::new(kind, Some(self.context_ref(id)), event));
            }
            // Wait for room in the inbox that refused, holding nothing, then try the round again.
            match self.contexts[id as usize]
                .inbox
                .wait_for_room(Sender::External, deadline)
            {
                RoomWait::Retry | RoomWait::TimedOut => {}
                RoomWait::Closed => {
                    let kind = refusal_kind(&self.contexts[id as usize].inbox, Sender::External);
                    return Err(SendError::new(kind, Some(self.context_ref(id)), event));
                }
            }
        }
        let mut d = Deliveries::default();
        let mut event = Some(event);
        for (id, r) in self.reserved.drain(..) {
            // The copies are all alike; the original comes last (when outputs do not keep it).
            // SAFETY: `r` was detached from a reservation of context `id`'s inbox above.
            let r = unsafe { self.contexts[id as usize].inbox.resume(r) };
            match self.copies.pop().or_else(|| event.take()) {
                Some(e) => {
                    r.commit(Entry::Event(e));
                    d.contexts += 1;
                }
                None => r.cancel(),
            }
        }
        // Copies made for subscribers that were skipped (unknown contexts).
        self.copies.clear();
        if let Some(event) = event {
            d.outputs = self.deliver_outputs(channel, &event);
        }
        if d.total() == 0 {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(d)
    }
}

/// How a send that waits outside its [`Links`] (an async send, a [`SharedInput`](crate::SharedInput)
/// send) went at one try: the links are borrowed only for the try, never while it waits.
pub(crate) enum TrySend<E: Event> {
    /// Committed.
    Sent,
    /// Refused for good (the error carries the event).
    Refused(SendError<E>),
    /// The target's inbox is full: wait for room in it, then try again.
    Full(Arc<ContextShared<E>>, E),
}

/// How a channel try went (see [`TrySend`]): each try is all-or-nothing
/// ([`Links::try_send_channel`]).
pub(crate) enum ChannelTry<E: Event> {
    /// Delivered to this many receivers (0: dropped and counted, R4.5).
    Sent(usize),
    /// Refused for good.
    Refused(SendError<E>),
    /// A subscriber's inbox is full: wait for room there, then try again.
    FullInbox(Arc<ContextShared<E>>, E),
    /// A `Block` output of the channel is full: wait for room there, then try again.
    FullOutput(StdArc<OutputQueue<E>>, E),
    /// The full output found room before it could be named: try again at once.
    Retry(E),
}

/// How a batch try went (see [`TrySend`]); the events not sent are still in the vector.
#[cfg_attr(not(feature = "async"), allow(dead_code))]
pub(crate) enum TrySendBatch<E: Event> {
    /// Every event was sent.
    Sent,
    /// Refused for good.
    Refused(SendErrorKind),
    /// The target's inbox has no room at all.
    Full(Arc<ContextShared<E>>),
}

impl<E: Event, H: GiveBack> Links<E, H> {
    /// One try of a send to `to` that waits elsewhere: commits if there is room now, otherwise
    /// hands the full target back with the event (no place held). Before `start()` a full inbox
    /// is refused with `FullBeforeStart`, as a blocking send is.
    pub(crate) fn try_send_or_full(&mut self, to: ContextRef, event: E) -> TrySend<E> {
        let Some(id) = self.index_of(to) else {
            return TrySend::Refused(SendError::new(
                SendErrorKind::UnknownContext,
                Some(to),
                event,
            ));
        };
        let sender = self.sender();
        let target = &self.contexts[id as usize];
        match target.inbox.try_reserve(sender) {
            Ok(r) => {
                r.commit(Entry::Event(event));
                TrySend::Sent
            }
            Err(Refusal::Closed) => TrySend::Refused(SendError::new(
                refusal_kind(&target.inbox, sender),
                Some(to),
                event,
            )),
            Err(Refusal::Full) if !self.shared.started.load(Ordering::Acquire) => TrySend::Refused(
                SendError::new(SendErrorKind::FullBeforeStart, Some(to), event),
            ),
            Err(Refusal::Full) => TrySend::Full(target.clone(), event),
        }
    }

    /// One try of a batch send to `to` that waits elsewhere: sends as many events from the front
    /// of `events` as there is room for, in as few reservations as the room allows, until they are
    /// all sent or the inbox has no room at all.
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(crate) fn try_send_batch_or_full(
        &mut self,
        to: ContextRef,
        events: &mut Vec<E>,
    ) -> TrySendBatch<E> {
        let Some(id) = self.index_of(to) else {
            return TrySendBatch::Refused(SendErrorKind::UnknownContext);
        };
        let sender = self.sender();
        let target = &self.contexts[id as usize];
        while !events.is_empty() {
            match target.inbox.try_reserve_batch(sender, 1, events.len()) {
                Ok(mut places) => {
                    // Moves only: no user code runs while the places are held.
                    for e in events.drain(..places.len()) {
                        places.push(Entry::Event(e));
                    }
                }
                Err(Refusal::Closed) => {
                    return TrySendBatch::Refused(refusal_kind(&target.inbox, sender))
                }
                Err(Refusal::Full) if !self.shared.started.load(Ordering::Acquire) => {
                    return TrySendBatch::Refused(SendErrorKind::FullBeforeStart)
                }
                Err(Refusal::Full) => return TrySendBatch::Full(target.clone()),
            }
        }
        TrySendBatch::Sent
    }

    /// One try of a channel send that waits elsewhere (an input handle's): all-or-nothing, like
    /// [`try_send_channel`](Self::try_send_channel); a full subscriber's inbox or a full `Block`
    /// output comes back with the event, to wait for room there. Before `start()` a full inbox is
    /// refused with `FullBeforeStart`, as a blocking send is; a full output is waited for (its
    /// reader is the service's, started or not).
    pub(crate) fn try_send_channel_or_full(&mut self, channel: Channel, event: E) -> ChannelTry<E> {
        if self.shared.input_closed() {
            return ChannelTry::Refused(SendError::new(SendErrorKind::Closed, None, event));
        }
        let e = match self.try_send_channel(channel, event, None) {
            Ok(d) => return ChannelTry::Sent(d.total()),
            Err(e) if e.kind() == SendErrorKind::Full => e,
            Err(e) => return ChannelTry::Refused(e),
        };
        match e.target() {
            Some(_) if !self.shared.started.load(Ordering::Acquire) => {
                let target = e.target();
                ChannelTry::Refused(SendError::new(
                    SendErrorKind::FullBeforeStart,
                    target,
                    e.into_inner(),
                ))
            }
            Some(ctx) => match self.index_of(ctx) {
                Some(id) => {
                    ChannelTry::FullInbox(self.contexts[id as usize].clone(), e.into_inner())
                }
                None => ChannelTry::Refused(e),
            },
            None => match self.full_block_output(channel) {
                Some(q) => ChannelTry::FullOutput(q, e.into_inner()),
                // Room appeared since: the caller tries again at once.
                None => ChannelTry::Retry(e.into_inner()),
            },
        }
    }
}

/// A blocking send of `event` to the full `target`, waiting as context `me` waits (recording its
/// wait edge, and beyond capacity where waiting would close a cycle, R5.2): what a send that waits
/// outside its links does on a context's own thread, where a future or a lock must not hold the
/// thread's turn. Parks at each round (a rare path: a handler sending through a handle).
pub(crate) fn send_as_context<E: Event>(
    shared: &Shared<E>,
    me: ContextRef,
    target: &ContextShared<E>,
    event: E,
) -> Result<(), SendError<E>> {
    let to = ContextRef::new(target.correlator, target.id);
    let cycle = Some((&shared.waits, me.id(), target.id));
    match reserve_after_full(&target.inbox, Sender::External, cycle, None, || true) {
        Ok((r, _)) => {
            r.commit(Entry::Event(event));
            Ok(())
        }
        Err(_) => Err(SendError::new(
            refusal_kind(&target.inbox, Sender::External),
            Some(to),
            event,
        )),
    }
}

/// An async sender's place in a full inbox's room-waiter list, kept by its future between polls:
/// dropping it (the future is cancelled or done) takes the entry out of the list, so nothing stays
/// behind (see the inbox's module docs).
#[cfg_attr(not(feature = "async"), allow(dead_code))]
pub(crate) struct RoomRegistration<E: Event> {
    target: Option<Arc<ContextShared<E>>>,
    ticket: Option<RoomTicket>,
}

#[cfg_attr(not(feature = "async"), allow(dead_code))]
impl<E: Event> RoomRegistration<E> {
    pub(crate) const fn new() -> Self {
        Self {
            target: None,
            ticket: None,
        }
    }

    /// Registers `waker` with `target`'s inbox until room for `need` places may be there (see
    /// [`Inbox::poll_room`]); a registration with another inbox is taken back first.
    pub(crate) fn poll(
        &mut self,
        target: Arc<ContextShared<E>>,
        need: usize,
        waker: &std::task::Waker,
    ) -> std::task::Poll<RoomWait> {
        if !self
            .target
            .as_ref()
            .is_some_and(|t| Arc::ptr_eq(t, &target))
        {
            self.cancel();
            self.target = Some(target);
        }
        let Some(target) = &self.target else {
            unreachable!("set above")
        };
        target
            .inbox
            .poll_room(Sender::External, need, &mut self.ticket, waker)
    }

    /// Takes the entry out of the list, if a wake-up has not taken it already.
    pub(crate) fn cancel(&mut self) {
        if let (Some(target), Some(ticket)) = (self.target.take(), self.ticket.take()) {
            target.inbox.cancel_room_wait(ticket);
        }
    }
}

impl<E: Event> Drop for RoomRegistration<E> {
    fn drop(&mut self) {
        self.cancel();
    }
}
