//! Delivery: a sender's view of the correlator ([`Links`]) and every send it makes — to one
//! context, to a batch, through a channel's fan-out, to outputs — each through the send core
//! ([`send`]: try, give back, wait by strategy or overrun where waiting would close a
//! cycle, SPEC §5) and [`Inbox`]'s commit.
//!
//! An input handle used on a context's own thread (inside a handler) is that context for the
//! back-pressure rule: it records the context's edge in the wait graph and overruns where waiting
//! would close a cycle, so that a handler's blocking send through a handle into its own full inbox
//! cannot hang. It still sends as external input (refused once shutdown closes input, R8.1).
//! Finding out is one read of a thread-local that every context thread sets when it starts, made
//! only by an input handle that is about to wait.
//!
//! Multi-target non-blocking sends are all-or-nothing by reserving every target first and cancelling
//! on the first refusal.
//!
//! The parts: this file holds [`Links`] and its sends to one context; `fanout` a channel's
//! fan-out to its subscribers; `output` the delivery to outputs and its waits; `held` the places a
//! context holds ([`OwnInbox`]); `tries` the single tries of sends that wait elsewhere (async
//! futures, shared inputs).
//!
//! Owns the send paths of a sender and [`OwnInbox`]. May import the leaves, `send`, `inbox`,
//! `channel`, `output`, `error`, `entry`, `record` (an entry's origin) and `shared` (the registry as the engine uses it).

mod fanout;
mod held;
mod output;
mod tries;

use crate::config::WaitStrategy;
use crate::entry::{Entry, HandlerLinks};
use crate::error::{Error, SendBatchError, SendError, SendErrorKind};
use crate::event::Event;
use crate::id::ContextRef;
use crate::inbox::{Detached, Inbox, Reservation, Sender};
use crate::record::Origin;
use crate::send::{self, SendSide, WaitGraph};
use crate::shared::{ContextShared, Shared};
use crate::sync::{self, Arc, Ordering};

pub(crate) use crate::send::Wait;
pub(crate) use held::{GiveBack, NoPlaces, OwnInbox};
use output::CachedOutputs;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use output::{push_blocking, push_waiting, OutputDelivery};
#[cfg_attr(not(feature = "async"), allow(unused_imports))]
pub(crate) use tries::TrySendBatch;
#[cfg_attr(not(feature = "async"), allow(unused_imports))]
pub(crate) use tries::{send_as_context, ChannelTry, TrySend};
pub(crate) use tries::{shared_send_channel, shared_send_to};

/// Turns a refused spawn or load into the operation error.
pub(crate) fn kind_to_error(kind: SendErrorKind, ctx: ContextRef) -> Error {
    match kind {
        SendErrorKind::UnknownContext => Error::UnknownContext(ctx),
        SendErrorKind::ContextStopped => Error::ContextStopped(ctx),
        SendErrorKind::FullBeforeStart => Error::FullBeforeStart(ctx),
        _ => Error::ShutDown,
    }
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
    /// The origin its entries carry: the context's, or the input handle's (set by
    /// [`name_input`](Self::name_input); until then that of no sender).
    pub(crate) origin: Origin,
}

/// A handler sends through the links of its context, which give back its own inbox's places.
impl<E: Event> HandlerLinks for E {
    type Links = Links<E, OwnInbox<E>>;
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
        let output_block_warning = shared.settings.output_block_warning;
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
            origin: me.map_or(Origin(u32::MAX), |c| Origin::context(c.id())),
        }
    }

    /// Makes these links an input handle's: the next input number is its origin. Only handles
    /// take numbers (not the clock thread's links), so the numbers follow the program's order of
    /// creating handles, which is what a replay relies on (`record`).
    pub(crate) fn name_input(&mut self) {
        let n = self.shared.next_input.fetch_add(1, Ordering::Relaxed);
        self.origin = Origin::input(n as u32);
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
    /// allows: the send core's step ([`send::reserve`]) with this sender's side ([`Waiter`]). A
    /// context gives back its held places before it waits (and retries at once if it gave any: the
    /// full inbox may be its own). Adds the time spent waiting to `blocked_ns`.
    ///
    /// Written out rather than calling [`send::reserve`]: the [`Waiter`] is made only once the
    /// try was refused, so that the common case (one [`Inbox::try_reserve`]) computes nothing for
    /// the cold slow path ([`send::reserve_refused`]) and saves no registers for it.
    #[inline(always)]
    fn reserve(&mut self, id: u32, wait: Wait) -> Result<Reservation<'_, Entry<E>>, SendErrorKind> {
        let sender = self.sender();
        // Split borrows: the reservation borrows `contexts`, the slow path the other fields.
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
                    me,
                    strategy,
                    held,
                    blocked_ns,
                };
                // The target's id is read here, from the target: the common case keeps one
                // pointer live across the try, not the id too.
                let (inbox, id) = (&target.inbox, target.id);
                send::reserve_refused(inbox, id, sender, wait, waiter, refusal).map(|(r, _)| r)
            }
        }
    }

    /// The inbox of context `id` and what the core's slow path needs of the rest of the links
    /// (split borrows: the reservation borrows `contexts`, the wait the other fields).
    #[inline(always)]
    fn target_and_waiter(&mut self, id: u32) -> (&Inbox<Entry<E>>, Waiter<'_, E, H>) {
        let Self {
            contexts,
            shared,
            me,
            strategy,
            held,
            blocked_ns,
            ..
        } = self;
        let waiter = Waiter {
            shared,
            me,
            strategy,
            held,
            blocked_ns,
        };
        (&contexts[id as usize].inbox, waiter)
    }
}

/// What the slow path of a send needs of its [`Links`] besides the target: the sender's side of
/// the send core ([`SendSide`]).
struct Waiter<'l, E: Event, H> {
    shared: &'l Shared<E>,
    me: &'l Option<ContextRef>,
    strategy: &'l WaitStrategy,
    held: &'l mut H,
    blocked_ns: &'l mut u64,
}

impl<E: Event, H: GiveBack> SendSide for Waiter<'_, E, H> {
    #[inline(always)]
    fn give_back(&mut self) -> bool {
        self.held.give_back()
    }

    fn started(&self) -> bool {
        self.shared.started.load(Ordering::Acquire)
    }

    fn waits_as(&self) -> Option<(&WaitGraph, u32)> {
        // An input handle waiting on a context's own thread waits as that context (module docs).
        let me = self
            .me
            .or_else(|| self.shared.context_of_current_thread())?;
        Some((&self.shared.waits, me.id()))
    }

    fn strategy(&self) -> WaitStrategy {
        *self.strategy
    }

    fn waited(&mut self, ns: u64) {
        *self.blocked_ns += ns;
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
        let origin = self.origin;
        match self.reserve_to(to, wait) {
            Ok(r) => {
                r.commit(Entry::Event(origin, event));
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
        self.send_batch(id, events, wait)
            .map_err(|kind| SendBatchError::new(kind, Some(to), total - events.len()))?;
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

    /// The send core's [`send::send_batch`] to context `id` (known: in `contexts`).
    fn send_batch(
        &mut self,
        id: u32,
        events: &mut Vec<E>,
        wait: Wait,
    ) -> Result<(), SendErrorKind> {
        let sender = self.sender();
        let origin = self.origin;
        let (inbox, waiter) = self.target_and_waiter(id);
        let item = move |e| Entry::Event(origin, e);
        send::send_batch(inbox, id, sender, events, item, wait, waiter)
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
}
