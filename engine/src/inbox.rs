//! The inbox: a context's lock-free multi-producer, single-consumer input queue.
//!
//! # Algorithm
//! Two pieces cooperate, both derived from well-known designs:
//!
//! * **A state word** (`state`) packs the number of *accepted* entries (reserved by a sender and not yet
//!   released by the consumer) with four flags: `SLEEPING` (the consumer announced that it parks),
//!   `ROOM_WAITERS` (a sender parked waiting for room), `CLOSED` (the context stopped: every send is
//!   refused) and `INPUT_CLOSED` (external input stopped: sends from input handles are refused, sends
//!   from contexts still pass so that in-flight work can finish, SPEC R8.1). Every decision that two
//!   threads could race on (is there room, may the consumer sleep, must a sender be woken, is the
//!   inbox closed) is a read-modify-write of this one word, so the decisions are totally ordered and
//!   no fence-based (Dekker) reasoning is needed. This is the protocol that `loom-tests/` checks.
//!   A sender first *reserves* a place (a CAS that fails when the count is at capacity), then
//!   *commits* its value. A reservation can be cancelled before commit, which is what makes a
//!   multi-context `try_send` all-or-nothing.
//! * **A ring of slots** with per-slot sequence stamps, in the style of Dmitry Vyukov's bounded queue
//!   (also crossbeam-queue's `ArrayQueue`): a committing sender takes a ticket (`tail.fetch_add`), writes
//!   slot `ticket % len` and publishes it by storing `stamp = ticket + 1`; the consumer takes slot
//!   `head % len` when its stamp is `head + 1` and frees it for the next lap with `stamp = head + len`.
//!   Because the state word never admits more than `capacity <= len` ordinary entries, a ticket's
//!   slot is always free by the time the ticket is taken. The sender guesses its ticket with a plain
//!   load of `tail` before the `fetch_add` and reads the guessed slot's stamp after it: the stamp's
//!   line is usually on the consumer's core, and with the address known early the processor fetches
//!   it while the locked instruction completes instead of after (a wrong guess just takes the slow
//!   path).
//!
//! Per-sender FIFO (SPEC R2.3) follows from tickets: one sender's tickets increase in program order,
//! and the consumer takes tickets in order.
//!
//! # Beyond capacity (SPEC R5.2)
//! When waiting for room would close a cycle of contexts (decided by the caller), the sender reserves
//! *beyond* capacity ([`Inbox::reserve_overrun`]). Such an entry cannot go into the ring (its slot may
//! still be occupied), so it goes to the **overflow**, a FIFO taken only on this rare path. While the
//! overflow holds anything, every commit goes there too, so that a sender's later entry can never
//! overtake its earlier one; the consumer empties the ring before it takes from the overflow, re-reading
//! the ring's tail *after* it saw the overflow non-empty (which orders it after that sender's earlier
//! ring ticket). The overflow is a mutex-guarded deque: it is touched only between an overrun and the
//! moment it drains, never on the steady-state path, and it shrinks back as it drains.
//!
//! # Sleep and wake-up
//! The three-state handshake of a parker (running / announced sleep / woken), carried by the
//! `SLEEPING` flag: the consumer sets it with a CAS that succeeds only when the count is zero (the
//! re-check after announcing sleep is the CAS itself), then parks until the flag is clear. A sender's
//! reservation CAS clears the flag, and the sender that cleared it unparks the consumer after it
//! committed. Since the flag is cleared in the same atomic step that makes the entry count, a wake-up
//! cannot be lost. Senders waiting for room use the mirror image with `ROOM_WAITERS`.

use std::collections::VecDeque;
use std::fmt;
use std::mem::MaybeUninit;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering, Thread, UnsafeCell};

const SLEEPING: usize = 1 << (usize::BITS - 1);
const ROOM_WAITERS: usize = 1 << (usize::BITS - 2);
const CLOSED: usize = 1 << (usize::BITS - 3);
const INPUT_CLOSED: usize = 1 << (usize::BITS - 4);
const COUNT: usize = INPUT_CLOSED - 1;

/// The largest capacity an inbox accepts (the count field must never reach the flag bits).
pub const MAX_CAPACITY: usize = 1 << 40;

/// Who is sending: an external input handle or a context. Only the former is refused once external
/// input is closed (SPEC R8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// An [`InputHandle`](crate::InputHandle) outside the correlator.
    External,
    /// A context (including a context sending to itself).
    Context,
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The inbox holds `capacity` entries.
    Full,
    /// The context has stopped, or external input is closed and the sender is external.
    Closed,
}

/// A place reserved in an inbox. It must be committed or cancelled.
#[derive(Debug)]
#[must_use = "a reservation holds a place in the inbox until committed or cancelled"]
pub struct Reservation {
    /// The consumer was asleep and this reservation cleared its flag: whoever commits wakes it.
    wake: bool,
    /// The place lies beyond the nominal capacity: the entry must go to the overflow.
    overrun: bool,
}

/// How a [`Inbox::wait_for_room`] call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomWait {
    /// Room may be available: try to reserve again.
    Retry,
    /// The inbox was closed while waiting.
    Closed,
    /// The deadline passed.
    TimedOut,
}

struct Slot<T> {
    /// `ticket + 1` once the slot holds the entry of `ticket`; `ticket` while it is free for it.
    /// Written by the committing sender (publish) and by the consumer (free for the next lap).
    stamp: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// The shared side of an inbox: every sender holds it through an `Arc`.
pub struct Inbox<T> {
    /// Count of accepted entries (bits below `INPUT_CLOSED`) and the four flags. Every sender and the
    /// consumer update it with read-modify-writes only.
    state: CachePadded<AtomicUsize>,
    /// The next ticket; only committing senders write it (`fetch_add`).
    tail: CachePadded<AtomicUsize>,
    /// The next ticket the consumer takes. Written only by the [`Consumer`]; read by `Drop`.
    head: CachePadded<UnsafeCell<usize>>,
    slots: Box<[Slot<T>]>,
    /// `slots.len() - 1`; `slots.len()` is a power of two `>= capacity`.
    mask: usize,
    /// Nominal capacity, `1..=MAX_CAPACITY`.
    capacity: usize,
    /// Entries that arrived while an overrun was pending (see the module docs).
    overflow: Mutex<VecDeque<T>>,
    /// `overflow.len()`, readable without the lock; changed only under it.
    overflow_len: AtomicUsize,
    /// How many reservations were taken beyond capacity (SPEC R5.2, R9.1).
    overruns: AtomicU64,
    /// The consumer's thread, written once by the consumer before it first sets `SLEEPING`, read by
    /// a sender only after its reservation CAS observed `SLEEPING` (which orders the read after the
    /// write).
    consumer_thread: UnsafeCell<Option<Thread>>,
    /// Senders parked waiting for room; touched only on that slow path.
    room_waiters: Mutex<Vec<Thread>>,
}

// SAFETY: the slots hand values of `T` from senders to the consumer thread, so `T: Send` is required
// and sufficient; every shared field is an atomic, a mutex, or an `UnsafeCell` whose access protocol
// is documented on the field (`head`: consumer only; slot values: stamp protocol; `consumer_thread`:
// written once before it is published through `state`).
unsafe impl<T: Send> Send for Inbox<T> {}
// SAFETY: see `Send`; no `&T` is ever handed out to two threads.
unsafe impl<T: Send> Sync for Inbox<T> {}

impl<T> Inbox<T> {
    /// Creates an inbox of nominal `capacity` (clamped to `1..=MAX_CAPACITY`) and its consumer end.
    pub fn with_capacity(capacity: usize) -> (sync::Arc<Self>, Consumer<T>) {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        let len = capacity.next_power_of_two();
        let slots = (0..len)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        let inbox = sync::Arc::new(Self {
            state: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(UnsafeCell::new(0)),
            slots,
            mask: len - 1,
            capacity,
            overflow: Mutex::new(VecDeque::new()),
            overflow_len: AtomicUsize::new(0),
            overruns: AtomicU64::new(0),
            consumer_thread: UnsafeCell::new(None),
            room_waiters: Mutex::new(Vec::new()),
        });
        let consumer = Consumer {
            inbox: inbox.clone(),
            head: 0,
            registered: false,
            _not_sync: std::marker::PhantomData,
        };
        (inbox, consumer)
    }

    /// The nominal capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Accepted entries not yet taken (reserved places included).
    pub fn len(&self) -> usize {
        self.state.load(Ordering::Relaxed) & COUNT
    }

    /// Whether no entry is accepted and not yet taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reservations taken beyond capacity so far.
    pub fn overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }

    /// Entries currently held in the overflow.
    pub fn overflow_len(&self) -> usize {
        self.overflow_len.load(Ordering::Relaxed)
    }

    fn refuses(state: usize, sender: Sender) -> bool {
        state & CLOSED != 0 || (sender == Sender::External && state & INPUT_CLOSED != 0)
    }

    /// Reserves a place if the inbox is below capacity.
    ///
    /// # Errors
    /// [`Refusal::Full`] at capacity; [`Refusal::Closed`] when the inbox refuses this sender.
    pub fn try_reserve(&self, sender: Sender) -> Result<Reservation, Refusal> {
        self.reserve(sender, false)
    }

    /// Reserves a place even beyond capacity (SPEC R5.2) and counts the overrun if it is one.
    ///
    /// # Errors
    /// [`Refusal::Closed`] when the inbox refuses this sender.
    pub fn reserve_overrun(&self, sender: Sender) -> Result<Reservation, Refusal> {
        self.reserve(sender, true)
    }

    fn reserve(&self, sender: Sender, beyond: bool) -> Result<Reservation, Refusal> {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if Self::refuses(cur, sender) {
                return Err(Refusal::Closed);
            }
            let count = cur & COUNT;
            let overrun = count >= self.capacity;
            if overrun && !beyond {
                return Err(Refusal::Full);
            }
            // Clearing SLEEPING here, in the step that makes the entry count, is what makes the
            // wake-up impossible to lose: the consumer's sleep CAS and this CAS are ordered.
            let new = ((cur & !SLEEPING) & !COUNT) | (count + 1);
            match self
                .state
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    if overrun {
                        self.overruns.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(Reservation {
                        wake: cur & SLEEPING != 0,
                        overrun,
                    });
                }
                Err(actual) => {
                    cur = actual;
                    sync::spin_hint();
                }
            }
        }
    }

    /// Places `value` in the reserved place and wakes the consumer if the reservation found it asleep.
    pub fn commit(&self, reservation: Reservation, value: T) {
        // An overrun goes to the overflow; so does everything while the overflow is non-empty, so that
        // no sender's later entry overtakes its earlier one (see the module docs).
        if reservation.overrun || self.overflow_len.load(Ordering::Acquire) > 0 {
            let mut overflow = sync::lock(&self.overflow);
            overflow.push_back(value);
            self.overflow_len.fetch_add(1, Ordering::AcqRel);
        } else {
            // Guess the ticket with a plain load first, so that the slot's address does not wait
            // for the locked `fetch_add`: the processor can then fetch the slot's stamp (usually a
            // line on the consumer's core) while the locked instruction completes.
            let guess = self.tail.load(Ordering::Relaxed);
            let ticket = self.tail.fetch_add(1, Ordering::AcqRel);
            let guessed = &self.slots[guess & self.mask];
            let guessed_stamp = guessed.stamp.load(Ordering::Acquire);
            let slot = if guess == ticket && guessed_stamp == ticket {
                guessed
            } else {
                let slot = &self.slots[ticket & self.mask];
                // The state word admits at most `capacity <= slots.len()` entries, so the previous
                // lap's entry in this slot was taken before this ticket was reserved; the loop only
                // waits for the consumer's stamp store to become visible.
                while slot.stamp.load(Ordering::Acquire) != ticket {
                    sync::spin_hint();
                }
                slot
            };
            // SAFETY: the stamp equals `ticket`, so the slot is free and this sender, the only holder
            // of `ticket`, has exclusive access until it publishes `ticket + 1` below.
            slot.value.with_mut(|p| unsafe { (*p).write(value) });
            slot.stamp.store(ticket.wrapping_add(1), Ordering::Release);
        }
        if reservation.wake {
            self.wake_consumer();
        }
    }

    /// Gives a reserved place back without committing anything.
    pub fn cancel(&self, reservation: Reservation) {
        if reservation.wake {
            // The consumer was woken by the reservation; let it see there is nothing and sleep again.
            self.wake_consumer();
        }
        self.release(1);
    }

    fn wake_consumer(&self) {
        // SAFETY: `wake` is set only when the reservation CAS observed SLEEPING, which the consumer
        // sets only after writing `consumer_thread` (Release/Acquire through `state`); the cell is
        // never written again, so this shared read does not race.
        let thread = self.consumer_thread.with(|p| unsafe { (*p).clone() });
        if let Some(t) = thread {
            t.unpark();
        }
    }

    /// Returns `n` places to the free count and wakes senders waiting for room.
    fn release(&self, n: usize) {
        let prev = self.state.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(prev & COUNT >= n, "inbox count underflow");
        if prev & ROOM_WAITERS != 0 {
            self.wake_room_waiters();
        }
    }

    fn wake_room_waiters(&self) {
        // Clear the flag first, then take the list: a sender that registers after we took the list
        // sees the flag clear and sets it again (see `wait_for_room`).
        self.state.fetch_and(!ROOM_WAITERS, Ordering::AcqRel);
        let waiters = std::mem::take(&mut *sync::lock(&self.room_waiters));
        for t in waiters {
            t.unpark();
        }
    }

    /// Parks the calling sender until room may be available, the inbox closes for `sender`, or
    /// `deadline` passes. Call it after a reservation failed with [`Refusal::Full`]; a `Retry` may be
    /// spurious.
    pub fn wait_for_room(&self, sender: Sender, deadline: Option<Instant>) -> RoomWait {
        // Register before announcing: the consumer that sees ROOM_WAITERS takes the list after it
        // cleared the flag, so it finds us.
        sync::lock(&self.room_waiters).push(sync::current());
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            if Self::refuses(cur, sender) {
                return RoomWait::Closed;
            }
            if cur & COUNT < self.capacity {
                // Room appeared between the failed reservation and now; our list entry only costs a
                // spurious unpark later.
                return RoomWait::Retry;
            }
            if cur & ROOM_WAITERS != 0 {
                break;
            }
            // Announce only if the inbox is still full in this exact state: if the consumer released a
            // place in between, the CAS fails and we re-check instead of sleeping through it.
            match self.state.compare_exchange_weak(
                cur,
                cur | ROOM_WAITERS,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        match deadline {
            None => sync::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return RoomWait::TimedOut;
                }
                sync::park_timeout(d - now);
            }
        }
        RoomWait::Retry
    }

    /// Refuses every later reservation (the context stopped). Entries already accepted stay and are
    /// taken by the consumer. Wakes parked senders so that they see the refusal.
    pub fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
        self.wake_room_waiters();
    }

    /// Refuses later reservations from external senders (SPEC R8.1); contexts may still send.
    pub fn close_input(&self) {
        self.state.fetch_or(INPUT_CLOSED, Ordering::AcqRel);
        self.wake_room_waiters();
    }

    /// Whether [`close_input`](Self::close_input) was called.
    pub fn is_input_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & INPUT_CLOSED != 0
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }
}

impl<T> Drop for Inbox<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no sender or consumer is left; reading `head` cannot race.
        let head = self.head.with(|p| unsafe { *p });
        let tail = self.tail.load(Ordering::Relaxed);
        let mut ticket = head;
        while ticket != tail {
            let slot = &self.slots[ticket & self.mask];
            if slot.stamp.load(Ordering::Relaxed) == ticket.wrapping_add(1) {
                // SAFETY: stamp `ticket + 1` means the slot holds an initialised value that was never
                // taken; we drop it exactly once.
                slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
            ticket = ticket.wrapping_add(1);
        }
    }
}

/// The places of entries the consumer took and processed but has not freed yet: freeing them one
/// read-modify-write at a time for a whole batch keeps the state word's cache line with the senders
/// instead of moving it to the consumer's core for every entry.
///
/// Made by [`Consumer::held_places`] and moved to wherever the consumer's thread must free them
/// (a context frees them before its own sends wait, too). Whoever holds places must free them
/// before the consumer sleeps (its sleep needs a zero count) and before it waits for anything a
/// sender to this inbox could be waiting for.
pub struct HeldPlaces<T> {
    inbox: sync::Arc<Inbox<T>>,
    held: usize,
    batch: usize,
}

impl<T> HeldPlaces<T> {
    /// Holds the place of one more processed entry; returns whether the batch is full (call
    /// [`give_back`](Self::give_back)).
    #[inline]
    pub fn hold_one(&mut self) -> bool {
        self.held += 1;
        self.held >= self.batch
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Frees every held place at once and wakes senders waiting for room; returns whether there
    /// was any.
    pub fn give_back(&mut self) -> bool {
        if self.held == 0 {
            return false;
        }
        self.inbox.release(self.held);
        self.held = 0;
        true
    }
}

impl<T> fmt::Debug for HeldPlaces<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldPlaces")
            .field("held", &self.held)
            .field("batch", &self.batch)
            .finish()
    }
}

/// The consumer end of an inbox, owned by the context's thread: neither `Clone` nor `Sync`.
pub struct Consumer<T> {
    inbox: sync::Arc<Inbox<T>>,
    /// Local copy of the next ticket to take (mirrored into `Inbox::head` for `Drop`).
    head: usize,
    registered: bool,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl<T> Consumer<T> {
    /// The shared side, to hand to senders.
    pub fn inbox(&self) -> &sync::Arc<Inbox<T>> {
        &self.inbox
    }

    /// Takes the next entry, or `None` if there is none *ready*. An entry may be accepted and not yet
    /// committed (its sender is between reserve and commit): then this returns `None` while
    /// [`Inbox::len`] is non-zero, and the caller retries.
    ///
    /// Taking an entry does not free its place: call [`release`](Self::release) once the entry has
    /// been processed. Until then it counts as accepted, which is what lets shutdown tell "idle" from
    /// "busy" by the count alone.
    pub fn pop(&mut self) -> Option<T> {
        let head = self.head;
        let inbox = &*self.inbox;
        let slot = &inbox.slots[head & inbox.mask];
        let value = if slot.stamp.load(Ordering::Acquire) == head.wrapping_add(1) {
            // SAFETY: stamp `head + 1` publishes an initialised value (Release/Acquire on `stamp`);
            // only the consumer takes ticket `head`, once.
            let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
            slot.stamp
                .store(head.wrapping_add(inbox.slots.len()), Ordering::Release);
            let next = head.wrapping_add(1);
            // SAFETY: only the consumer writes `head`; `Drop` reads it with exclusive access.
            inbox.head.with_mut(|p| unsafe { *p = next });
            self.head = next;
            value
        } else if inbox.overflow_len.load(Ordering::Acquire) > 0
            // Re-read the tail only now: a sender that put an entry into the ring before its entry
            // in the overflow took its ticket before that, so this read sees it (per-sender FIFO).
            && inbox.tail.load(Ordering::Acquire) == head
        {
            let mut overflow = sync::lock(&inbox.overflow);
            let value = overflow.pop_front()?;
            inbox.overflow_len.fetch_sub(1, Ordering::AcqRel);
            value
        } else {
            return None;
        };
        Some(value)
    }

    /// Frees the places of `n` taken entries (see [`pop`](Self::pop)) and wakes senders waiting for
    /// room.
    pub fn release(&mut self, n: usize) {
        self.inbox.release(n);
    }

    /// A batch of places to hold for taken entries and free together (see [`HeldPlaces`]),
    /// full at `batch` (at least 1) entries.
    pub fn held_places(&self, batch: usize) -> HeldPlaces<T> {
        HeldPlaces {
            inbox: self.inbox.clone(),
            held: 0,
            batch: batch.max(1),
        }
    }

    /// Announces sleep if nothing is accepted: returns `true` if the caller may now park with
    /// [`park`](Self::park). Returns `false` if an entry is accepted (take it instead).
    pub fn try_sleep(&mut self) -> bool {
        if !self.registered {
            let me = sync::current();
            // SAFETY: written once, by the consumer, before the first SLEEPING CAS below publishes
            // it; no sender reads it before observing SLEEPING.
            self.inbox
                .consumer_thread
                .with_mut(|p| unsafe { *p = Some(me) });
            self.registered = true;
        }
        let state = &self.inbox.state;
        let mut cur = state.load(Ordering::Relaxed);
        loop {
            if cur & COUNT != 0 {
                return false;
            }
            if cur & SLEEPING != 0 {
                return true;
            }
            match state.compare_exchange_weak(
                cur,
                cur | SLEEPING,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Parks until a sender clears `SLEEPING`, or `stop()` returns true (checked after every wake;
    /// whoever makes it true must unpark this thread). Clears `SLEEPING` before returning.
    pub fn park(&mut self, stop: impl Fn() -> bool) {
        let state = &self.inbox.state;
        while state.load(Ordering::Acquire) & SLEEPING != 0 {
            if stop() {
                break;
            }
            sync::park();
        }
        state.fetch_and(!SLEEPING, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
