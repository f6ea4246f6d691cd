//! Outputs: bounded queues from the contexts to the service's own threads (SPEC R4.2, R4.3, R8.1,
//! R9.1).
//!
//! # The queue
//! Every output is an [`OutputQueue`]: a preallocated ring (crossbeam-queue's `ArrayQueue`, a
//! bounded MPMC queue after Dmitry Vyukov's bounded MPMC design, whose head and tail updates are
//! `SeqCst`) of its bound, one consumer (the [`OutputReceiver`], `Send` but not `Sync`) and any
//! number of producers (contexts emitting or sending to a channel, input handles sending to a
//! channel, [`Scope::emit_to`](crate::Scope::emit_to) on a typed [`Output`]). Pushing and taking
//! allocate nothing; a producer reads one state word before and one after its push.
//!
//! What a producer does when the ring is full is the output's [`Overflow`] policy:
//! `DropOldest` replaces the oldest event (`force_push`), `DropNewest` drops the new one, both
//! counted (the output's own count, the emitting context's `output_drops`); `Block` waits for room
//! (spin, yield, then park; counted in the emitting context's `output_blocked_ns`, and published
//! while it lasts, see `deliver`). A push that finds the receiver dropped or the output closed
//! discards the value and counts it in the output's own count as well (nothing is discarded
//! without a count).
//!
//! # The state word
//! One word (`state`, bits below) carries everything a producer or the receiver must see of the
//! other side: whether the receiver sleeps, whether producers wait for room, whether the overflow
//! list is in use, and the three ends (receiver dropped, shutdown began, shutdown ended).
//!
//! # Sleep and wake-up (no lost wake-up)
//! Both waits follow the inbox's protocol: register in the waiter list (under `waiters`' lock),
//! announce with a `SeqCst` read-modify-write of `state`, re-check, then park.
//! - The receiver with nothing to take stores its waiter (its thread, or an async task's waker),
//!   sets `RECEIVER_SLEEPS`, re-checks the ring and sleeps. A producer pushes, then reads `state`
//!   (`SeqCst`): the ring's tail update and the flag are both in the single `SeqCst` order, so
//!   either the re-check sees the event or the producer sees the flag, clears it and wakes the
//!   waiter it takes from the list. (Loom regards `SeqCst` accesses as `AcqRel`; the shim's
//!   `seq_cst_order` gives its models the same order with a fence, and is nothing here.)
//! - A `Block` producer finding the ring full adds its thread to the room list, sets
//!   `ROOM_WAITERS`, re-checks for room and parks (an async channel send adds its task's waker
//!   instead, once per waker, and returns `Pending`: [`OutputQueue::poll_room`]). The receiver, after every take, reads `state`:
//!   if producers wait, it clears the flag and unparks every thread of the list. A producer that
//!   registered after the list was taken set the flag after the take, so its re-check sees the room.
//!
//! Both handshakes, the async waker's and the ends' wake-ups are model-checked with loom
//! (`loom-tests/tests/model_outputs.rs`).
//!
//! # Ends (R8.1)
//! - *Receiver dropped*: producers stop waiting and discard what they would push; a channel
//!   forgets the output at its next send.
//! - *Shutdown began* (`DRAINING`, set right after external input closes): a full `Block` output
//!   stops making anyone wait: it takes events beyond its bound in an overflow list instead (as an
//!   inbox does to avoid a deadlock, R5.2), so that a receiver nobody reads until shutdown
//!   returns cannot hang the shutdown, and nothing accepted is lost. Once the list holds anything,
//!   every `Block` push joins it, and the receiver takes the ring first: each producer's order is
//!   kept. It is used only during shutdown; memory grows at most by what was accepted.
//! - *Shutdown ended* (`CLOSED`, after every context thread was joined): no producer is left; the
//!   receiver takes what is queued, then its stream ends. An output made later is closed at once.
//!
//! Owns the output queue, its options, the typed [`Output`] handle, the receiver and the registry
//! of a correlator's outputs. May import `sync`, `config` and `error`.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use crate::config::{Backoff, Step, WaitStrategy};
use crate::error::Error;
use crate::sync::{
    self, AtomicU64, AtomicUsize, Mutex, Ordering, StdArc, StdMutex, StdWeak, Thread,
};

pub use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};

/// The bound of an output made with [`Correlator::output`](crate::Correlator::output) or
/// [`OutputOptions::default`]: 20,000 events, like an inbox (R5.1).
pub const DEFAULT_OUTPUT_CAPACITY: usize = 20_000;

/// How long a context waits for room in a full [`Overflow::Block`] output before a warning
/// names the output (1 s): see
/// [`CorrelatorBuilder::output_block_warning`](crate::CorrelatorBuilder::output_block_warning).
pub const DEFAULT_OUTPUT_BLOCK_WARNING: Duration = Duration::from_secs(1);

/// The largest output bound [`OutputOptions::bounded`] accepts (2^24 events): the ring is
/// allocated whole when the output is made.
pub const MAX_OUTPUT_CAPACITY: usize = 1 << 24;

/// What an output does with an event when it holds its bound already.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// The producer waits for room (the default): back-pressure into the emitting context, as a
    /// full inbox does (R5.1), counted in
    /// [`ContextStatus::output_blocked_ns`](crate::ContextStatus::output_blocked_ns). Nothing is
    /// lost. The wait ends when the receiver takes an event, when it is dropped (the event is
    /// discarded), or when shutdown begins (the output then takes events beyond its bound, see
    /// [`Correlator::shutdown`](crate::Correlator::shutdown)). A thread that reads a `Block`
    /// output must not itself wait on the correlator (a blocking send into a full inbox, say):
    /// the context it waits for may be waiting for it.
    #[default]
    Block,
    /// The oldest queued event is dropped to make room for the new one; counted.
    DropOldest,
    /// The new event is dropped; counted.
    DropNewest,
}

/// The bound and overflow policy of an output. The default is
/// [`bounded`](Self::bounded)`(`[`DEFAULT_OUTPUT_CAPACITY`]`)` with [`Overflow::Block`].
///
/// Why bounded and blocking by default: an unbounded output grows without limit when its reader
/// falls behind (3 million unread alerts doubled a service's memory), and the engine's contract
/// is back-pressure, never silent loss (R5.1). A reader that would rather lose old alerts than
/// slow the correlator down says so with [`Overflow::DropOldest`].
///
/// ```
/// use correlator::{OutputOptions, Overflow};
/// let latest = OutputOptions::bounded(1024).policy(Overflow::DropOldest);
/// assert_eq!(latest.capacity(), 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OutputOptions {
    capacity: usize,
    policy: Overflow,
}

impl Default for OutputOptions {
    fn default() -> Self {
        Self::bounded(DEFAULT_OUTPUT_CAPACITY)
    }
}

impl OutputOptions {
    /// An output that holds at most `capacity` events (`1..=`[`MAX_OUTPUT_CAPACITY`], checked
    /// when the output is made), with [`Overflow::Block`].
    pub fn bounded(capacity: usize) -> Self {
        Self {
            capacity,
            policy: Overflow::Block,
        }
    }

    /// What to do when the output is full (default [`Overflow::Block`]).
    pub fn policy(mut self, policy: Overflow) -> Self {
        self.policy = policy;
        self
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The overflow policy.
    pub fn overflow(&self) -> Overflow {
        self.policy
    }

    /// The options if the bound is valid.
    pub(crate) fn checked(self) -> Result<Self, Error> {
        if self.capacity == 0 || self.capacity > MAX_OUTPUT_CAPACITY {
            return Err(Error::InvalidOutputCapacity {
                requested: self.capacity,
                max: MAX_OUTPUT_CAPACITY,
            });
        }
        Ok(self)
    }
}

/// The receiver sleeps (its waiter is in the list).
const RECEIVER_SLEEPS: usize = 1;
/// Producers wait for room (their threads are in the list).
const ROOM_WAITERS: usize = 1 << 1;
/// The overflow list holds events (set and cleared under its lock).
const OVERFLOW: usize = 1 << 2;
/// Shutdown began: a full `Block` output takes events into the overflow list.
const DRAINING: usize = 1 << 3;
/// The receiver was dropped.
const GONE: usize = 1 << 4;
/// Shutdown ended: no producer is left.
const CLOSED: usize = 1 << 5;

/// How a push ended.
#[derive(Debug)]
pub enum Pushed<A> {
    /// Queued, nothing dropped.
    Queued,
    /// Queued; the oldest event was dropped for it (`DropOldest`).
    Displaced,
    /// Dropped (`DropNewest` on a full output).
    Dropped,
    /// Not queued: the receiver is gone or the output closed (counted in the output's drops).
    Disconnected,
    /// A `Block` output is full: wait for room and push again.
    Full(A),
}

/// Who sleeps on an empty output, or waits for room in a full one.
enum Waiter {
    Thread(Thread),
    Task(Waker),
}

impl sync::ThreadWaiter for Waiter {
    fn of_thread(thread: Thread) -> Self {
        Waiter::Thread(thread)
    }
    fn thread_id(&self) -> Option<sync::ThreadId> {
        match self {
            Waiter::Thread(t) => Some(t.id()),
            Waiter::Task(_) => None,
        }
    }
}

impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Thread(t) => t.unpark(),
            Waiter::Task(w) => w.wake(),
        }
    }
}

/// The waiter lists: touched only by a side that is about to sleep or that saw a flag saying
/// someone sleeps.
struct Waiters {
    receiver: Option<Waiter>,
    /// Producers waiting for room: threads, and tasks (async channel sends) each listed at most
    /// once per waker.
    room: Vec<Waiter>,
    /// The room list's second buffer: a wake-up swaps the two, wakes outside the lock (a task's
    /// waker runs the executor's code, which may poll a send on this output again) and keeps the
    /// emptied buffer as the next spare, so neither is freed and reallocated per wake.
    spare: Vec<Waiter>,
}

/// Producers that can wait for room at once before the room list grows (it grows once, to the
/// most that ever waited, and keeps that memory): made with the output, so that the first wait
/// does not allocate in the steady state (`alloc/output` in the harness saw that one).
const ROOM_WAITERS_RESERVED: usize = 8;

impl Waiters {
    fn new() -> Self {
        Self {
            receiver: None,
            room: Vec::with_capacity(ROOM_WAITERS_RESERVED),
            spare: Vec::with_capacity(ROOM_WAITERS_RESERVED),
        }
    }
}

/// One output: a bounded ring, its policy, its waiters and its drop count (see the module docs).
pub struct OutputQueue<A> {
    ring: ArrayQueue<A>,
    policy: Overflow,
    /// The flags above. Any thread may write it, always with read-modify-writes.
    state: AtomicUsize,
    /// Events dropped by the policy or discarded because the receiver was gone or the output
    /// closed; read by anyone.
    dropped: AtomicU64,
    /// Unique among the outputs of one correlator, from 1 (0: made outside a correlator).
    id: u64,
    /// What the output is, for the status and the log: `channel "alerts"`, or the type of a
    /// typed output.
    name: Box<str>,
    waiters: Mutex<Waiters>,
    /// Events taken beyond the bound once shutdown began (`Block` only; see the module docs).
    overflow: Mutex<VecDeque<A>>,
}

impl<A> fmt::Debug for OutputQueue<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputQueue")
            .field("capacity", &self.ring.capacity())
            .field("len", &self.ring.len())
            .field("policy", &self.policy)
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<A> OutputQueue<A> {
    /// A queue with the options' bound (`options` checked: a zero bound is taken as 1).
    pub fn new(options: OutputOptions) -> Self {
        Self {
            ring: ArrayQueue::new(options.capacity.max(1)),
            policy: options.policy,
            state: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            id: 0,
            name: "output".into(),
            waiters: Mutex::new(Waiters::new()),
            overflow: Mutex::new(VecDeque::new()),
        }
    }

    /// The queue with its id and name (see the fields).
    pub(crate) fn named(mut self, id: u64, name: String) -> Self {
        self.id = id;
        self.name = name.into_boxed_str();
        self
    }

    /// Its id: unique among one correlator's outputs, from 1.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What it is: `channel "alerts"`, or the type of a typed output.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value is not queued: the receiver is gone or the output closed. Counted.
    #[cold]
    fn discard(&self) -> Pushed<A> {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        Pushed::Disconnected
    }

    /// Pushes `a` as the policy says; never waits. On `Full` the caller waits
    /// ([`wait_for_room`](Self::wait_for_room)) and pushes again.
    #[inline]
    pub fn push(&self, a: A) -> Pushed<A> {
        // A hint only: the bits it tests are set by this producer itself (OVERFLOW, in program
        // order) or mean that nobody will read what it pushes.
        if self.state.load(Ordering::Relaxed) & (OVERFLOW | GONE | CLOSED) != 0 {
            return self.push_slow(a);
        }
        self.push_ring(a)
    }

    /// The push into the ring, by policy.
    #[inline(always)]
    fn push_ring(&self, a: A) -> Pushed<A> {
        let pushed = match self.policy {
            Overflow::Block => match self.ring.push(a) {
                Ok(()) => Pushed::Queued,
                Err(a) => return self.full(a),
            },
            Overflow::DropNewest => match self.ring.push(a) {
                Ok(()) => Pushed::Queued,
                Err(a) => {
                    drop(a);
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return Pushed::Dropped;
                }
            },
            Overflow::DropOldest => match self.ring.force_push(a) {
                None => Pushed::Queued,
                Some(old) => {
                    drop(old);
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    Pushed::Displaced
                }
            },
        };
        self.wake_receiver();
        pushed
    }

    /// After a push: wakes the receiver if it sleeps. The `SeqCst` read pairs with the receiver's
    /// announcement (module docs).
    #[inline(always)]
    fn wake_receiver(&self) {
        sync::seq_cst_order();
        if self.state.load(Ordering::SeqCst) & RECEIVER_SLEEPS != 0 {
            self.wake_receiver_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_receiver_slow(&self) {
        // Only the producer that clears the flag wakes: one wake-up per sleep.
        if self.state.fetch_and(!RECEIVER_SLEEPS, Ordering::SeqCst) & RECEIVER_SLEEPS != 0 {
            let waiter = sync::lock(&self.waiters).receiver.take();
            if let Some(w) = waiter {
                w.wake();
            }
        }
    }

    /// A `Block` push found the ring full.
    #[cold]
    fn full(&self, a: A) -> Pushed<A> {
        let state = self.state.load(Ordering::SeqCst);
        if state & (GONE | CLOSED) != 0 {
            return self.discard();
        }
        if state & DRAINING != 0 {
            return self.push_overflow(a);
        }
        Pushed::Full(a)
    }

    /// The push path when the receiver is gone, the output closed or the overflow list in use.
    #[cold]
    #[inline(never)]
    fn push_slow(&self, a: A) -> Pushed<A> {
        let state = self.state.load(Ordering::SeqCst);
        if state & (GONE | CLOSED) != 0 {
            return self.discard();
        }
        if state & OVERFLOW != 0 {
            // Only `Block` outputs use the list: once it holds anything, every push joins it.
            return self.push_overflow(a);
        }
        // The list was emptied since the hint was read: the ring is the way again.
        self.push_ring(a)
    }

    /// Takes `a` beyond the bound (shutdown began, module docs).
    #[cold]
    fn push_overflow(&self, a: A) -> Pushed<A> {
        {
            let mut list = sync::lock(&self.overflow);
            list.push_back(a);
            // Set under the list's lock, after the push: the receiver clears it under the same
            // lock when it empties the list.
            self.state.fetch_or(OVERFLOW, Ordering::SeqCst);
        }
        self.wake_receiver();
        Pushed::Queued
    }

    /// Waits (parks) until the ring may have room, the receiver is gone, the output closed or
    /// shutdown began, or `deadline` passed; returns at once if one of those is already true.
    /// Spurious returns are allowed: the caller pushes again.
    pub fn wait_for_room(&self, deadline: Option<Instant>) {
        // Register before announcing: the receiver that sees ROOM_WAITERS takes the list after it
        // cleared the flag, so it finds us. Once (`sync::list_current`): an entry an earlier wait
        // of this thread left behind is reused.
        sync::list_current(&mut sync::lock(&self.waiters).room);
        let state = self.state.fetch_or(ROOM_WAITERS, Ordering::SeqCst);
        sync::seq_cst_order();
        // Re-check after announcing: room made before the receiver read the flag is visible now
        // (the ring's head update and our announcement are in one `SeqCst` order). Our list entry
        // then costs only a spurious unpark (or serves our next wait).
        if state & (GONE | CLOSED | DRAINING) != 0 || !self.ring.is_full() {
            return;
        }
        match deadline {
            None => sync::park(),
            Some(d) => {
                let now = Instant::now();
                if now < d {
                    sync::park_timeout(d - now);
                }
                if Instant::now() >= d {
                    // The caller gives up now: leave nothing listed (a producer that times out
                    // again and again on an output nobody reads must not grow the list).
                    let removed = sync::unlist_current(&mut sync::lock(&self.waiters).room);
                    drop(removed);
                }
            }
        }
    }

    /// [`wait_for_room`](Self::wait_for_room) for an async producer: registers `waker` in the
    /// room list (once: a waker that will wake the same task is not listed twice, so a send
    /// cancelled and retried by one task adds nothing), announces and re-checks as a thread does;
    /// `Ready` when the caller should push again, `Pending` once registered.
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub fn poll_room(&self, waker: &Waker) -> std::task::Poll<()> {
        {
            let mut w = sync::lock(&self.waiters);
            let listed = w
                .room
                .iter()
                .any(|e| matches!(e, Waiter::Task(t) if t.will_wake(waker)));
            if !listed {
                w.room.push(Waiter::Task(waker.clone()));
            }
        }
        let state = self.state.fetch_or(ROOM_WAITERS, Ordering::SeqCst);
        sync::seq_cst_order();
        if state & (GONE | CLOSED | DRAINING) != 0 || !self.ring.is_full() {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }

    /// Wakes every producer waiting for room.
    fn wake_room_waiters(&self) {
        if self.state.fetch_and(!ROOM_WAITERS, Ordering::SeqCst) & ROOM_WAITERS != 0 {
            let mut woken = {
                let mut w = sync::lock(&self.waiters);
                let spare = std::mem::take(&mut w.spare);
                std::mem::replace(&mut w.room, spare)
            };
            // Outside the lock (see `Waiters::spare`).
            for t in woken.drain(..) {
                t.wake();
            }
            let mut w = sync::lock(&self.waiters);
            if w.spare.capacity() < woken.capacity() {
                w.spare = woken;
            }
        }
    }

    /// The next event, if one is queued.
    #[inline]
    pub fn take(&self) -> Option<A> {
        if let Some(a) = self.ring.pop() {
            // Pairs with a waiting producer's announcement (module docs).
            sync::seq_cst_order();
            if self.state.load(Ordering::SeqCst) & ROOM_WAITERS != 0 {
                self.wake_room_waiters();
            }
            return Some(a);
        }
        sync::seq_cst_order();
        if self.state.load(Ordering::SeqCst) & OVERFLOW != 0 {
            return self.take_overflow();
        }
        None
    }

    #[cold]
    fn take_overflow(&self) -> Option<A> {
        let mut list = sync::lock(&self.overflow);
        // The ring first: everything in it is older than the list's head (module docs).
        if let Some(a) = self.ring.pop() {
            return Some(a);
        }
        let a = list.pop_front();
        if list.is_empty() {
            self.state.fetch_and(!OVERFLOW, Ordering::SeqCst);
        }
        a
    }

    /// Whether shutdown ended this output: once a take finds nothing after this said `true`, the
    /// stream has ended (read it *before* that take: no producer pushes after the close).
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::SeqCst) & CLOSED != 0
    }

    /// Announces that the receiver is about to sleep on `waiter`; returns `false` (and withdraws
    /// the announcement) when the re-check finds an event or the end, so that it must not sleep.
    fn announce_sleep(&self, waiter: Waiter) -> bool {
        sync::lock(&self.waiters).receiver = Some(waiter);
        let state = self.state.fetch_or(RECEIVER_SLEEPS, Ordering::SeqCst);
        sync::seq_cst_order();
        // Re-check after announcing: an event pushed before a producer could see the flag is
        // visible here; one pushed after it makes that producer wake us.
        if state & (OVERFLOW | CLOSED) != 0 || !self.ring.is_empty() {
            self.state.fetch_and(!RECEIVER_SLEEPS, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The receiver's sleep after a take found nothing: announce, re-check, park (at most
    /// `timeout`). Returns when an event or the end may be there, or spuriously.
    pub fn park_receiver(&self, timeout: Option<Duration>) {
        if self.announce_sleep(Waiter::Thread(sync::current())) {
            match timeout {
                Some(t) => sync::park_timeout(t),
                None => sync::park(),
            }
            // Woken, timed out or spurious: the flag must not stay set for nothing.
            self.state.fetch_and(!RECEIVER_SLEEPS, Ordering::SeqCst);
        }
    }

    /// Takes the next event, waiting until `deadline` (forever if `None`): spin, yield, then park.
    fn take_until(&self, deadline: Option<Instant>) -> Result<A, RecvTimeoutError> {
        let mut backoff = Backoff::new(WaitStrategy::SpinYieldPark);
        loop {
            let closed = self.is_closed();
            if let Some(a) = self.take() {
                return Ok(a);
            }
            if closed {
                return Err(RecvTimeoutError::Disconnected);
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(RecvTimeoutError::Timeout),
                },
                None => None,
            };
            match backoff.next_or_park() {
                Step::Spin => sync::spin_hint(),
                Step::Yield => sync::yield_now(),
                Step::Park => self.park_receiver(left),
            }
        }
    }

    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    /// The async take: `Ready(Some)` with an event, `Ready(None)` at the end, `Pending` after
    /// registering `waker`.
    pub fn poll_take(&self, waker: &Waker) -> std::task::Poll<Option<A>> {
        use std::task::Poll;
        for _ in 0..2 {
            let closed = self.is_closed();
            if let Some(a) = self.take() {
                return Poll::Ready(Some(a));
            }
            if closed {
                return Poll::Ready(None);
            }
            if self.announce_sleep(Waiter::Task(waker.clone())) {
                return Poll::Pending;
            }
        }
        // Twice an event or the end appeared during the announcement: let the task poll again.
        waker.wake_by_ref();
        Poll::Pending
    }

    /// The receiver is gone: producers stop waiting for it.
    pub fn disconnect(&self) {
        self.state.fetch_or(GONE, Ordering::SeqCst);
        self.wake_room_waiters();
    }

    /// Shutdown began: stop making producers wait (module docs).
    pub fn drain(&self) {
        self.state.fetch_or(DRAINING, Ordering::SeqCst);
        self.wake_room_waiters();
    }

    /// Shutdown ended: the stream ends once the receiver took what is queued.
    pub fn close(&self) {
        self.state.fetch_or(CLOSED | DRAINING, Ordering::SeqCst);
        self.wake_room_waiters();
        // Unconditionally: the receiver must see the end even if it announced nothing yet.
        self.state.fetch_and(!RECEIVER_SLEEPS, Ordering::SeqCst);
        let waiter = sync::lock(&self.waiters).receiver.take();
        if let Some(w) = waiter {
            w.wake();
        }
    }

    /// Whether a push would have to wait now: a `Block` output, full, still read and not
    /// draining.
    pub fn would_block(&self) -> bool {
        self.policy == Overflow::Block
            && self.state.load(Ordering::SeqCst) & (GONE | CLOSED | DRAINING) == 0
            && self.ring.is_full()
    }

    /// Whether the receiver was dropped or the output closed.
    pub fn is_disconnected(&self) -> bool {
        self.state.load(Ordering::Acquire) & (GONE | CLOSED) != 0
    }

    /// Events queued now (beyond the bound included).
    pub fn len(&self) -> usize {
        let beyond = if self.state.load(Ordering::Acquire) & OVERFLOW != 0 {
            sync::lock(&self.overflow).len()
        } else {
            0
        };
        self.ring.len() + beyond
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Events dropped by the policy, or discarded because the receiver was gone or the output
    /// closed, so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

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
}

impl OutputRegistry {
    pub(crate) fn new() -> Self {
        Self {
            inner: StdMutex::new((Phase::Running, Vec::new())),
            external_drops: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        }
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

/// A typed output: where [`Scope::emit_to`](crate::Scope::emit_to) puts values of any type `A`,
/// for the one [`OutputReceiver<A>`] made with it by
/// [`Correlator::typed_output`](crate::Correlator::typed_output). The type is checked by the
/// compiler: an `Output<A>` only takes `A`s. Cheap to clone (keep one in a monitor's state); a
/// clone is the same output.
pub struct Output<A> {
    pub(crate) queue: StdArc<OutputQueue<A>>,
}

impl<A> Clone for Output<A> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<A> fmt::Debug for Output<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Output").field(&self.queue).finish()
    }
}

impl<A> Output<A> {
    /// Events this output lost so far: dropped by its overflow policy, or discarded because
    /// they were emitted after its receiver was dropped or the correlator shut down (nothing is
    /// discarded without a count).
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Its id: unique among the correlator's outputs (from 1), the one
    /// [`BlockedOnOutput::output`](crate::BlockedOnOutput::output) shows while a context waits
    /// for room in it; the same as its receiver's [`OutputReceiver::id`].
    pub fn id(&self) -> u64 {
        self.queue.id()
    }

    /// What it is, as the status and the log name it: `typed output of <the value type>`.
    pub fn name(&self) -> &str {
        self.queue.name()
    }

    /// Whether its receiver was dropped or the correlator has shut down: what is emitted to it
    /// now is discarded.
    pub fn is_disconnected(&self) -> bool {
        self.queue.is_disconnected()
    }
}

/// Receives what is sent or emitted to one output, in the order each producer (context or input
/// handle) produced it (R4.2, R4.3). The stream ends (`Disconnected`, `None`) once the correlator
/// has shut down and everything was received, including what `on_die` hooks emitted during
/// shutdown; a receiver made after shutdown has ended at once.
///
/// One consumer: `Send` (move it to the thread or task that reads) but not `Sync`. Dropping it
/// releases producers waiting for room; what they emit to it after that is discarded.
pub struct OutputReceiver<A> {
    queue: StdArc<OutputQueue<A>>,
    /// Not `Sync`: one waiter slot, one consumer.
    _one_consumer: PhantomData<std::cell::Cell<()>>,
}

impl<A> fmt::Debug for OutputReceiver<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OutputReceiver").field(&self.queue).finish()
    }
}

impl<A> OutputReceiver<A> {
    pub(crate) fn new(queue: StdArc<OutputQueue<A>>) -> Self {
        Self {
            queue,
            _one_consumer: PhantomData,
        }
    }

    /// Waits for the next event.
    ///
    /// # Errors
    /// [`RecvError`] once the correlator has shut down and nothing is left.
    pub fn recv(&self) -> Result<A, RecvError> {
        self.queue.take_until(None).map_err(|_| RecvError)
    }

    /// The next event if one is waiting.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] if none is waiting, [`TryRecvError::Disconnected`] after shutdown
    /// once nothing is left.
    pub fn try_recv(&self) -> Result<A, TryRecvError> {
        let closed = self.queue.is_closed();
        match self.queue.take() {
            Some(a) => Ok(a),
            None if closed => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Waits at most `timeout` for the next event.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`], or [`RecvTimeoutError::Disconnected`] after shutdown once
    /// nothing is left.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<A, RecvTimeoutError> {
        self.queue.take_until(Some(Instant::now() + timeout))
    }

    /// Everything received until the stream ends (blocking).
    pub fn iter(&self) -> Iter<'_, A> {
        Iter { rx: self }
    }

    /// Everything waiting now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, A> {
        TryIter { rx: self }
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The output's bound.
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Events this output lost so far: dropped by its overflow policy (discards after the
    /// receiver is dropped count in [`Output::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Its id: unique among the correlator's outputs (from 1), the one
    /// [`BlockedOnOutput::output`](crate::BlockedOnOutput::output) shows while a context waits
    /// for room in it.
    ///
    /// ```
    /// use correlator::{Correlator, Event};
    /// # #[derive(Clone, Debug)] struct Alert;
    /// # impl Event for Alert { type Kind = (); fn kind(&self) {} }
    /// let c = Correlator::<Alert>::builder().build()?;
    /// let rx = c.output(c.channel("alerts")?);
    /// assert!(rx.id() >= 1);
    /// assert_eq!(rx.name(), "channel \"alerts\"");
    /// # Ok::<(), correlator::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.queue.id()
    }

    /// What it is, as the status and the log name it: `channel "<name>"` for a channel's output,
    /// `typed output of <the value type>` for a typed one.
    pub fn name(&self) -> &str {
        self.queue.name()
    }
}

#[cfg(feature = "async")]
impl<A> OutputReceiver<A> {
    /// Waits for the next event without blocking the thread: a future for any executor. The
    /// waker is registered with the output (no wake-up is lost: see the `output` module docs);
    /// a dropped future loses nothing.
    ///
    /// It takes the receiver by `&mut`, so the future is `Send` whenever the receiver is (with
    /// `A: Send`): `rx.recv_async().await` works in a task that `tokio::spawn` moves between
    /// threads (a shared borrow of the receiver, which is not `Sync`, would not be `Send`).
    ///
    /// # Errors
    /// [`RecvError`] once the correlator has shut down and nothing is left.
    pub fn recv_async(&mut self) -> RecvFuture<'_, A> {
        RecvFuture { rx: self }
    }
}

/// The future of [`OutputReceiver::recv_async`].
#[cfg(feature = "async")]
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct RecvFuture<'a, A> {
    rx: &'a mut OutputReceiver<A>,
}

#[cfg(feature = "async")]
impl<A> std::future::Future for RecvFuture<'_, A> {
    type Output = Result<A, RecvError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.rx
            .queue
            .poll_take(cx.waker())
            .map(|a| a.ok_or(RecvError))
    }
}

/// The receiver as an async stream: `None` once the correlator has shut down and nothing is left.
#[cfg(feature = "async")]
impl<A> futures_core::Stream for OutputReceiver<A> {
    type Item = A;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<A>> {
        self.queue.poll_take(cx.waker())
    }
}

impl<A> Drop for OutputReceiver<A> {
    fn drop(&mut self) {
        self.queue.disconnect();
    }
}

/// The blocking iterator of [`OutputReceiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, A> {
    rx: &'a OutputReceiver<A>,
}

impl<A> Iterator for Iter<'_, A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.recv().ok()
    }
}

/// The non-blocking iterator of [`OutputReceiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, A> {
    rx: &'a OutputReceiver<A>,
}

impl<A> Iterator for TryIter<'_, A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.try_recv().ok()
    }
}

/// The blocking iterator of a receiver taken by value.
#[derive(Debug)]
pub struct IntoIter<A> {
    rx: OutputReceiver<A>,
}

impl<A> Iterator for IntoIter<A> {
    type Item = A;
    fn next(&mut self) -> Option<A> {
        self.rx.recv().ok()
    }
}

impl<A> IntoIterator for OutputReceiver<A> {
    type Item = A;
    type IntoIter = IntoIter<A>;
    fn into_iter(self) -> IntoIter<A> {
        IntoIter { rx: self }
    }
}

impl<'a, A> IntoIterator for &'a OutputReceiver<A> {
    type Item = A;
    type IntoIter = Iter<'a, A>;
    fn into_iter(self) -> Iter<'a, A> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries in the room list (threads and tasks).
    fn room_listed<A>(q: &OutputQueue<A>) -> usize {
        sync::lock(&q.waiters).room.len()
    }

    // R4.3 (a `Block` output): a producer that waits for room with a deadline on an output nobody
    // reads, again and again, leaves nothing listed once each wait gives up; one that waits
    // without a deadline and returns without a wake-up keeps a single entry; a listed producer is
    // woken when the receiver takes an event.
    #[test]
    fn r4_3_thread_waits_list_each_thread_once_and_timeouts_leave_nothing() {
        let q = StdArc::new(OutputQueue::new(OutputOptions::bounded(1)));
        assert!(matches!(q.push(1u8), Pushed::Queued));
        for _ in 0..50 {
            q.wait_for_room(Some(Instant::now() + Duration::from_micros(200)));
            assert_eq!(room_listed(&q), 0, "a timed-out wait leaves no entry");
        }
        let roomy = OutputQueue::<u8>::new(OutputOptions::bounded(4));
        for _ in 0..50 {
            roomy.wait_for_room(None);
        }
        assert_eq!(
            room_listed(&roomy),
            1,
            "one entry per thread, however often it waits"
        );
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || {
                let began = Instant::now();
                q.wait_for_room(Some(Instant::now() + Duration::from_secs(30)));
                began.elapsed()
            })
        };
        while room_listed(&q) == 0 {
            std::thread::yield_now();
        }
        assert_eq!(q.take(), Some(1));
        let waited = waiter.join().unwrap();
        assert!(
            waited < Duration::from_secs(30),
            "woken by the take, not by its deadline"
        );
    }
}
