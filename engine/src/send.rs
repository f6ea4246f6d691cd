//! The send core: the one step every send into an inbox takes (SPEC §5). Try to reserve; on a full
//! inbox give back the places the sender holds and try again; then wait by the sender's strategy
//! (spin, yield, park), or take a place beyond capacity where waiting would close a cycle of
//! contexts (R5.2); then commit. Input handles, shared inputs, the async send futures, channel
//! fan-out and handler sends (`deliver::Links`) all call it, and so do the loom models in
//! `loom-tests/` (through `correlator::internals`): they check this code, not a copy of it.
//!
//! The core is generic over the inbox's item (the engine's inboxes hold `Entry`s, the models'
//! small values) and over the sender's side ([`SendSide`]: what it gives back, whether anybody takes
//! entries yet, and which context it waits as), so it knows nothing of the registry.
//!
//! # Back-pressure and deadlock avoidance (SPEC §5)
//! A sender that finds an inbox full waits for room (R5.1), escalating spin → yield → park through
//! the inbox's room-waiter protocol. A *context* about to wait first records the edge
//! "I wait on target" in the correlator's [`WaitGraph`] and walks the graph from the target: if the
//! walk comes back to the sender, waiting would close a cycle of contexts each waiting on the next
//! one's full inbox (a context sending to its own full inbox is the shortest), so the sender takes a
//! place beyond capacity instead (R5.2). The graph is a mutex-guarded vector touched only by
//! senders that are about to block, so every edge insertion is totally ordered: of two contexts
//! closing a cycle at the same moment, the second to record its edge sees the first's and overruns.
//! Edges are removed when the wait ends.
//!
//! A sender never holds a reservation while it waits: a reserved, uncommitted place makes the
//! consumer spin for it, so holding one while blocked could stall a context outside the wait graph.
//!
//! Under `cfg(loom)` a waiting sender parks at once: the spin and yield steps only delay the park
//! step, and under loom each of them is a yield that multiplies the schedules without adding any.
//!
//! Owns the send step, the sender's wait, the wait graph and a task's room registration. May import
//! the leaves, `inbox` and `error`.

use std::task::{Poll, Waker};
use std::time::Instant;

use crate::config::{Backoff, Step, WaitStrategy};
use crate::error::SendErrorKind;
use crate::inbox::{Inbox, Refusal, Reservation, RoomTicket, RoomWait, Sender};
use crate::sync::{self, Arc, Mutex};

/// How long a send may wait for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Until there is room (or the target closes).
    Block,
    /// Not at all.
    Never,
    /// Until this instant.
    Until(Instant),
}

/// How a send got its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// There was room at once (or once the sender gave its own places back).
    Direct,
    /// The sender waited for room (R5.1).
    AfterWait,
    /// Waiting would have closed a cycle: taken beyond capacity (R5.2).
    Overrun,
}

/// How a wait for a place ended without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPlace {
    /// The inbox closed for this sender while it waited.
    Closed,
    /// The deadline passed.
    TimedOut,
}

/// The sender's side of a send that found its target full: what the core asks of it before and
/// while it waits. Every method has the answer of an input handle outside any context.
pub trait SendSide {
    /// Frees the places the sender holds (a context's processed entries); returns whether it
    /// freed anything (the full inbox may have been the sender's own: retry at once).
    fn give_back(&mut self) -> bool {
        false
    }

    /// Whether anybody takes entries yet: before `start()` a wait could only end by timing out.
    fn started(&self) -> bool {
        true
    }

    /// The wait graph and the context this sender waits as (R5.2); `None` outside the graph.
    fn waits_as(&self) -> Option<(&WaitGraph, u32)> {
        None
    }

    /// The sender's wait strategy (its back-off's steps).
    fn strategy(&self) -> WaitStrategy {
        WaitStrategy::default()
    }

    /// Whether each round of the wait parks at once instead of spinning and yielding first.
    fn parks_at_once(&self) -> bool {
        false
    }

    /// Adds the time the sender waited, in nanoseconds.
    fn waited(&mut self, _ns: u64) {}
}

impl<S: SendSide + ?Sized> SendSide for &mut S {
    #[inline(always)]
    fn give_back(&mut self) -> bool {
        (**self).give_back()
    }
    fn started(&self) -> bool {
        (**self).started()
    }
    fn waits_as(&self) -> Option<(&WaitGraph, u32)> {
        (**self).waits_as()
    }
    fn strategy(&self) -> WaitStrategy {
        (**self).strategy()
    }
    fn parks_at_once(&self) -> bool {
        (**self).parks_at_once()
    }
    fn waited(&mut self, ns: u64) {
        (**self).waited(ns)
    }
}

/// An input handle's side outside any context: it holds no place and waits outside the graph.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Outside;

impl SendSide for Outside {}

/// A sender that waits as context `me` of `graph` and parks at each round: a send on a context's
/// own thread that waits outside its links (a handler sending through a handle; the loom models'
/// contexts).
#[derive(Clone, Copy, Debug)]
pub struct AsContext<'g> {
    /// The correlator's wait graph.
    pub graph: &'g WaitGraph,
    /// The context the sender waits as.
    pub me: u32,
}

impl SendSide for AsContext<'_> {
    fn waits_as(&self) -> Option<(&WaitGraph, u32)> {
        Some((self.graph, self.me))
    }

    fn parks_at_once(&self) -> bool {
        true
    }
}

/// Why a closed inbox refused `sender`: an input handle while external input is closed is refused
/// because of the shutdown, which is what it needs to know; otherwise the context has stopped (a
/// context sender is refused only then, and an input handle only when the context's thread died
/// while the correlator runs).
pub fn refusal_kind<T>(inbox: &Inbox<T>, sender: Sender) -> SendErrorKind {
    if sender == Sender::External && inbox.is_input_closed() {
        SendErrorKind::Closed
    } else {
        SendErrorKind::ContextStopped
    }
}

/// Reserves a place in `inbox` (the inbox of context `target`) for `sender`, waiting as `wait`
/// allows and as `side` waits; the caller commits through the reservation.
///
/// Inlined: the common case is one [`Inbox::try_reserve`]; a refusal goes to the cold
/// [`reserve_refused`], so that a send inlines no waiting code and saves no registers for it.
///
/// # Errors
/// `Closed` or `ContextStopped` ([`refusal_kind`]), `Full` (`Wait::Never`), `FullBeforeStart`
/// (`Wait::Block` before anybody takes entries), `Timeout` (`Wait::Until`).
#[inline(always)]
pub fn reserve<'t, T, S: SendSide>(
    inbox: &'t Inbox<T>,
    target: u32,
    sender: Sender,
    wait: Wait,
    side: S,
) -> Result<(Reservation<'t, T>, Placed), SendErrorKind> {
    match inbox.try_reserve(sender) {
        Ok(r) => Ok((r, Placed::Direct)),
        Err(refusal) => reserve_refused(inbox, target, sender, wait, side, refusal),
    }
}

/// [`reserve`], then commit `value`; the value comes back with the error.
///
/// # Errors
/// As [`reserve`].
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
#[inline(always)]
pub fn send<T, S: SendSide>(
    inbox: &Inbox<T>,
    target: u32,
    sender: Sender,
    value: T,
    wait: Wait,
    side: S,
) -> Result<Placed, (SendErrorKind, T)> {
    match reserve(inbox, target, sender, wait, side) {
        Ok((r, placed)) => {
            r.commit(value);
            Ok(placed)
        }
        Err(kind) => Err((kind, value)),
    }
}

/// [`reserve`] after `try_reserve` refused with `refusal`: the sender gives its places back (and
/// retries at once if it gave any: the full inbox may be its own), then waits ([`reserve_after_full`]),
/// adding the time to its side.
///
/// # Errors
/// As [`reserve`].
#[cold]
#[inline(never)]
pub fn reserve_refused<'t, T, S: SendSide>(
    inbox: &'t Inbox<T>,
    target: u32,
    sender: Sender,
    wait: Wait,
    mut side: S,
    mut refusal: Refusal,
) -> Result<(Reservation<'t, T>, Placed), SendErrorKind> {
    loop {
        match refusal {
            Refusal::Closed => return Err(refusal_kind(inbox, sender)),
            Refusal::Full if side.give_back() => {}
            Refusal::Full => break,
        }
        match inbox.try_reserve(sender) {
            Ok(r) => return Ok((r, Placed::Direct)),
            Err(again) => refusal = again,
        }
    }
    let deadline = match wait {
        Wait::Never => return Err(SendErrorKind::Full),
        Wait::Until(d) => Some(d),
        Wait::Block => None,
    };
    // Nobody takes entries before `start()`: a wait could only end by timing out.
    if deadline.is_none() && !side.started() {
        return Err(SendErrorKind::FullBeforeStart);
    }
    let began = Instant::now();
    let cycle = side.waits_as().map(|(graph, me)| (graph, me, target));
    let mut backoff = Backoff::new(side.strategy());
    let at_once = side.parks_at_once();
    let result = reserve_after_full(inbox, sender, cycle, deadline, || {
        if at_once {
            return true;
        }
        pause(&mut backoff)
    })
    .map(|(r, overran)| {
        let placed = if overran {
            Placed::Overrun
        } else {
            Placed::AfterWait
        };
        (r, placed)
    })
    .map_err(|end| match end {
        NoPlace::Closed => refusal_kind(inbox, sender),
        NoPlace::TimedOut => SendErrorKind::Timeout,
    });
    side.waited(began.elapsed().as_nanos() as u64);
    result
}

/// One round of a sender's back-off: a spin or a yield step (returns `false`), or `true` when the
/// sender should park (at once under loom: [`Backoff::next_or_park`]).
#[inline]
pub(crate) fn pause(backoff: &mut Backoff) -> bool {
    match backoff.next_or_park() {
        Step::Spin => sync::spin_hint(),
        Step::Yield => sync::yield_now(),
        Step::Park => return true,
    }
    false
}

/// The wait of a send that found `inbox` full (after [`reserve_refused`] gave the sender's places
/// back).
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

/// Sends the values of `values` (each made an item by `item`) to `inbox`, in order, in as few
/// reservations as the room allows (each one CAS for all the places it takes), removing what it
/// sent from the front of `values`.
///
/// `Wait::Block` takes whatever room there is (up to the rest of the batch) and waits, as a single
/// send does, only when there is none: one value then goes through [`reserve`]'s slow path
/// (waiting for room, R5.1, or beyond capacity where waiting would close a cycle, R5.2), and the
/// batch goes on. Any size is accepted. `Wait::Never` and `Wait::Until` are all-or-nothing
/// ([`send_batch_whole`]).
///
/// # Errors
/// As [`reserve`], and `BatchTooLarge` for an all-or-nothing batch above the capacity; the values
/// not sent are still in `values`.
#[inline]
pub fn send_batch<T, V, S: SendSide>(
    inbox: &Inbox<T>,
    target: u32,
    sender: Sender,
    values: &mut Vec<V>,
    item: impl Fn(V) -> T,
    wait: Wait,
    mut side: S,
) -> Result<(), SendErrorKind> {
    if wait != Wait::Block {
        return send_batch_whole(inbox, sender, values, item, wait, side);
    }
    while !values.is_empty() {
        let refusal = match inbox.try_reserve_batch(sender, 1, values.len()) {
            Ok(mut places) => {
                // Moves only: no user code runs while the places are held.
                for v in values.drain(..places.len()) {
                    places.push(item(v));
                }
                continue;
            }
            Err(refusal) => refusal,
        };
        if refusal == Refusal::Closed {
            return Err(refusal_kind(inbox, sender));
        }
        // No room at all: the single send's slow path (wait, or overrun) for the first value.
        let (r, _) = reserve(inbox, target, sender, Wait::Block, &mut side)?;
        r.commit(item(values.remove(0)));
    }
    Ok(())
}

/// [`send_batch`], all-or-nothing: every value is sent with one reservation or none is. Waits
/// (holding no place) for room for the whole batch at once as `wait` allows; a context's own held
/// places are given back first, since they may be what fills the inbox.
///
/// # Errors
/// `BatchTooLarge` when the batch is larger than the capacity (it could never fit at once);
/// otherwise as [`reserve`] (`Full` for `Wait::Never`). On an error `values` is untouched.
pub fn send_batch_whole<T, V, S: SendSide>(
    inbox: &Inbox<T>,
    sender: Sender,
    values: &mut Vec<V>,
    item: impl Fn(V) -> T,
    wait: Wait,
    mut side: S,
) -> Result<(), SendErrorKind> {
    let n = values.len();
    if n > inbox.capacity() {
        return Err(SendErrorKind::BatchTooLarge);
    }
    loop {
        match inbox.try_reserve_batch(sender, n, n) {
            Ok(mut places) => {
                // Moves only: no user code runs while the places are held.
                for v in values.drain(..) {
                    places.push(item(v));
                }
                return Ok(());
            }
            Err(Refusal::Closed) => return Err(refusal_kind(inbox, sender)),
            Err(Refusal::Full) => {}
        }
        if side.give_back() {
            continue;
        }
        let deadline = match wait {
            Wait::Never => return Err(SendErrorKind::Full),
            Wait::Until(d) if Instant::now() >= d => return Err(SendErrorKind::Timeout),
            Wait::Until(d) => Some(d),
            Wait::Block => None,
        };
        let began = Instant::now();
        let waited = inbox.wait_for_room_for(sender, n, deadline);
        side.waited(began.elapsed().as_nanos() as u64);
        match waited {
            RoomWait::Retry => {}
            RoomWait::Closed => return Err(refusal_kind(inbox, sender)),
            RoomWait::TimedOut => return Err(SendErrorKind::Timeout),
        }
    }
}

/// A task's place in a full inbox's room-waiter list, kept by its send future between polls:
/// dropping it (the future is cancelled or done) takes the entry out of the list, so nothing stays
/// behind (see the inbox's module docs). Task senders are input handles ([`Sender::External`]).
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub struct RoomRegistration<T> {
    target: Option<Arc<Inbox<T>>>,
    ticket: Option<RoomTicket>,
}

#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
impl<T> RoomRegistration<T> {
    /// Registered nowhere.
    pub const fn new() -> Self {
        Self {
            target: None,
            ticket: None,
        }
    }

    /// Registers `waker` with `inbox` until room for `need` places may be there (see
    /// [`Inbox::poll_room`]); a registration with another inbox is taken back first. Takes the
    /// caller's handle of the inbox (kept while registered there, dropped if it already is).
    pub fn poll(&mut self, inbox: Arc<Inbox<T>>, need: usize, waker: &Waker) -> Poll<RoomWait> {
        let same = self.target.as_ref().is_some_and(|t| Arc::ptr_eq(t, &inbox));
        if !same {
            self.cancel();
            self.target = Some(inbox);
        }
        let Some(target) = &self.target else {
            unreachable!("set above")
        };
        target.poll_room(Sender::External, need, &mut self.ticket, waker)
    }

    /// The inbox this registration is with, if any.
    pub fn inbox(&self) -> Option<&Inbox<T>> {
        self.target.as_deref()
    }

    /// Takes the entry out of the list, if a wake-up has not taken it already.
    pub fn cancel(&mut self) {
        if let (Some(target), Some(ticket)) = (self.target.take(), self.ticket.take()) {
            target.cancel_room_wait(ticket);
        }
    }
}

impl<T> Default for RoomRegistration<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for RoomRegistration<T> {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// How one try of a send that waits as a task went (see [`poll_send`]).
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub enum Attempt<T, V, R> {
    /// Over: sent, or refused for good, or waited for elsewhere (on a context's own thread).
    Done(R),
    /// The target's inbox is full: wait for room in it, then try again with the value.
    Full(Arc<Inbox<T>>, V),
}

/// One poll of a send future that waits as a task (R5.1): tries with `attempt`; when the target is
/// full registers the task's waker in its room-waiter list ([`RoomRegistration`]) and returns
/// `Pending`, holding no place; tries again at once where the registration's re-check found room.
/// The value stays in `value` while the future is pending. `closed` makes the result of a send whose
/// target closed for it while it waited (`attempt` says why at the next try, where it can).
///
/// # Panics
/// If polled again after it completed (`value` is empty).
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub fn poll_send<T, V, R>(
    room: &mut RoomRegistration<T>,
    value: &mut Option<V>,
    waker: &Waker,
    mut attempt: impl FnMut(V) -> Attempt<T, V, R>,
    closed: impl FnOnce(&Inbox<T>, V) -> R,
) -> Poll<R> {
    loop {
        let Some(v) = value.take() else {
            panic!("a send future polled after it completed");
        };
        let (target, v) = match attempt(v) {
            Attempt::Done(r) => {
                room.cancel();
                return Poll::Ready(r);
            }
            Attempt::Full(target, v) => (target, v),
        };
        match room.poll(target, 1, waker) {
            Poll::Ready(RoomWait::Retry) => *value = Some(v),
            Poll::Ready(RoomWait::Closed | RoomWait::TimedOut) => {
                let Some(inbox) = room.inbox() else {
                    unreachable!("registered above")
                };
                let result = closed(inbox, v);
                room.cancel();
                return Poll::Ready(result);
            }
            Poll::Pending => {
                *value = Some(v);
                return Poll::Pending;
            }
        }
    }
}

/// One try of a send that waits elsewhere: commits `value` if `inbox` has room now; otherwise the
/// value comes back with the refusal.
///
/// # Errors
/// `(Refusal::Full, value)` or `(Refusal::Closed, value)`.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
#[inline]
pub fn try_send<T>(inbox: &Inbox<T>, sender: Sender, value: T) -> Result<(), (Refusal, T)> {
    match inbox.try_reserve(sender) {
        Ok(r) => {
            r.commit(value);
            Ok(())
        }
        Err(refusal) => Err((refusal, value)),
    }
}

/// No edge: the context waits on nobody.
const NO_EDGE: u32 = u32::MAX;

/// Which context waits on which: one edge per waiting context, to the context whose full inbox it
/// waits on; a send that would close a cycle takes a place beyond capacity instead of waiting
/// (R5.2, module docs).
#[derive(Debug)]
pub struct WaitGraph {
    edges: Mutex<Vec<u32>>,
}

impl WaitGraph {
    /// A graph for contexts `0..max_contexts`, with no edge.
    pub fn new(max_contexts: usize) -> Self {
        Self {
            edges: Mutex::new(vec![NO_EDGE; max_contexts]),
        }
    }

    /// Records "`me` waits on `target`"; returns `true` (and removes the edge) if that closes a cycle.
    pub fn would_deadlock(&self, me: u32, target: u32) -> bool {
        let mut edges = sync::lock(&self.edges);
        let Some(slot) = edges.get_mut(me as usize) else {
            return false;
        };
        *slot = target;
        let mut cur = target;
        for _ in 0..edges.len() {
            if cur == me {
                edges[me as usize] = NO_EDGE;
                return true;
            }
            match edges.get(cur as usize) {
                Some(&next) if next != NO_EDGE => cur = next,
                _ => return false,
            }
        }
        false
    }

    /// Removes `me`'s edge.
    pub fn clear(&self, me: u32) {
        if let Some(slot) = sync::lock(&self.edges).get_mut(me as usize) {
            *slot = NO_EDGE;
        }
    }
}
