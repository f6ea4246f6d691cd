//! One output's queue ([`OutputQueue`]): the ring, its policy on a full ring, the state word, the
//! receiver's sleep and the producers' wait for room, and the ends (see the `output` module docs
//! for the protocol). Who waits (a thread or a task) is an entry of the inbox's wait list
//! ([`Parked`], [`WaitList`]): the receiver alone in its slot, producers in the room list.
//!
//! Owns the output queue and its handshakes. May import `sync`, `config` and `inbox`.

use std::collections::VecDeque;
use std::fmt;
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::{OutputOptions, Overflow, RecvTimeoutError};
use crate::config::{Backoff, Step, WaitStrategy};
use crate::inbox::{Parked, WaitList};
use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering};

/// The receiver sleeps (its entry is in `sleepers.receiver`).
const RECEIVER_SLEEPS: usize = 1;
/// Producers wait for room (their entries are in `sleepers.room`).
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

/// Who waits on this output: touched only by a side that is about to sleep or that saw a flag
/// saying someone sleeps.
struct Sleepers {
    /// The receiver, asleep on an empty output (a thread, or an async task: [`Parked::ALONE`]).
    receiver: Option<Parked>,
    /// Producers waiting for room: threads, and tasks (async channel sends) each listed at most
    /// once per waker ([`WaitList::register_waker_once`]).
    room: WaitList,
}

/// Producers that can wait for room at once before the room list grows (it grows once, to the
/// most that ever waited, and keeps that memory): made with the output, so that the first wait
/// does not allocate in the steady state (`alloc/output` in the harness saw that one).
const ROOM_WAITERS_RESERVED: usize = 8;

impl Sleepers {
    fn new() -> Self {
        Self {
            receiver: None,
            room: WaitList::with_capacity(ROOM_WAITERS_RESERVED),
        }
    }
}

/// One output: a bounded ring, its policy, its sleepers and its drop count (see the `output` module
/// docs).
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
    sleepers: Mutex<Sleepers>,
    /// Events taken beyond the bound once shutdown began (`Block` only; see the `output` module
    /// docs).
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
            ring: ArrayQueue::new(options.capacity().max(1)),
            policy: options.overflow(),
            state: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            id: 0,
            name: "output".into(),
            sleepers: Mutex::new(Sleepers::new()),
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
    /// announcement (`output` module docs).
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
            let waiter = sync::lock(&self.sleepers).receiver.take();
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

    /// Takes `a` beyond the bound (shutdown began, `output` module docs).
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
        // cleared the flag, so it finds us. Once (`WaitList::list_current_thread`): an entry an earlier wait
        // of this thread left behind is reused.
        sync::lock(&self.sleepers).room.list_current_thread();
        let state = self.state.fetch_or(ROOM_WAITERS, Ordering::SeqCst);
        sync::seq_cst_order();
        // Re-check after announcing: room made before the receiver read the flag is visible now
        // (the ring's head update and our announcement are in one `SeqCst` order). Our list entry
        // then costs only a spurious unpark (or serves our next wait).
        if state & (GONE | CLOSED | DRAINING) != 0 || !self.ring.is_full() {
            return;
        }
        if sync::park_until(deadline) {
            // The caller gives up now: leave nothing listed (a producer that times out again and
            // again on an output nobody reads must not grow the list).
            let removed = sync::lock(&self.sleepers).room.unlist_current_thread();
            drop(removed);
        }
    }

    /// [`wait_for_room`](Self::wait_for_room) for an async producer: registers `waker` in the
    /// room list (once: a waker that will wake the same task is not listed twice, so a send
    /// cancelled and retried by one task adds nothing), announces and re-checks as a thread does;
    /// `Ready` when the caller should push again, `Pending` once registered.
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub fn poll_room(&self, waker: &Waker) -> std::task::Poll<()> {
        sync::lock(&self.sleepers).room.register_waker_once(waker);
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
            // Wakes outside the lock (a task's waker runs the executor's code, which may poll a
            // send on this output again) and keeps the list's memory (`WaitList::wake_all`).
            WaitList::wake_all(&self.sleepers, |s| &mut s.room);
        }
    }

    /// The next event, if one is queued.
    #[inline]
    pub fn take(&self) -> Option<A> {
        if let Some(a) = self.ring.pop() {
            // Pairs with a waiting producer's announcement (`output` module docs).
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
        // The ring first: everything in it is older than the list's head (`output` module docs).
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
    fn announce_sleep(&self, waiter: Parked) -> bool {
        sync::lock(&self.sleepers).receiver = Some(waiter);
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
        if self.announce_sleep(Parked::current_thread()) {
            match timeout {
                Some(t) => sync::park_timeout(t),
                None => sync::park(),
            }
            // Woken, timed out or spurious: the flag must not stay set for nothing.
            self.state.fetch_and(!RECEIVER_SLEEPS, Ordering::SeqCst);
        }
    }

    /// Takes the next event, waiting until `deadline` (forever if `None`): spin, yield, then park
    /// (at once under loom: `Backoff::next_or_park`). The loom models receive through it.
    pub fn take_until(&self, deadline: Option<Instant>) -> Result<A, RecvTimeoutError> {
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
            if self.announce_sleep(Parked::Task(Parked::ALONE, waker.clone())) {
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

    /// Shutdown began: stop making producers wait (`output` module docs).
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
        let waiter = sync::lock(&self.sleepers).receiver.take();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::StdArc;

    /// Entries in the room list (threads and tasks).
    fn room_listed<A>(q: &OutputQueue<A>) -> usize {
        sync::lock(&q.sleepers).room.len()
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
