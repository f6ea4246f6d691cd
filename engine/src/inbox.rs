//! The inbox: a context's lock-free multi-producer, single-consumer input queue.
//!
//! # Algorithm
//! A bounded ring of slots with per-slot sequence stamps in the style of Dmitry Vyukov's bounded
//! queue (also crossbeam-queue's `ArrayQueue`), whose tail word carries everything a sender must
//! decide atomically:
//!
//! * **The tail word** (`tail.word`, a `u64`) packs the next *ticket* (48 bits), the number of
//!   *pending overflow reservations* (13 bits, see below) and three flags: `SLEEPING` (the consumer
//!   announced that it parks), `CLOSED` (the context stopped: every send is refused) and
//!   `INPUT_CLOSED` (external input stopped: sends from input handles are refused, sends from
//!   contexts still pass so that in-flight work can finish, SPEC R8.1). A sender reserves with
//!   **one CAS** on this word: it takes the ticket, clears `SLEEPING` and is refused by a close, all
//!   in the same step. Every decision two threads could race on (is there room, may the consumer
//!   sleep, must a sender wake it, is the inbox closed) is a read-modify-write of this word or is
//!   ordered by one, so no fence-based (Dekker) reasoning is needed. This is the protocol that
//!   `loom-tests/` checks.
//! * **Slots** hold `capacity` entries exactly. Tickets are lap-encoded, `lap * one_lap + index`
//!   with `one_lap` the power of two above `capacity`, so a ticket's slot is `ticket & (one_lap - 1)`
//!   without a division. A sender publishes ticket `t`'s entry by storing `t + 1` into the slot's
//!   stamp (`(t + 1) | TOMB` when it cancels the reservation instead); the consumer takes slot
//!   `head` when its stamp says `head + 1`. Only senders write stamps.
//! * **Room** is decided from the consumer's *freed* position: ticket `t` may be reserved once the
//!   consumer gave back the place of the ticket that used its slot one lap before. The consumer
//!   publishes that position (`progress.freed`, its own cache line); senders keep a copy of a value
//!   it had in their own line (`tail.freed_hint`, never ahead of it) and read the consumer's line
//!   only when the copy says "full", about once per `capacity` sends. So a reservation reads and
//!   writes only the senders' line: no slot and no consumer line before its CAS, and the consumer
//!   never writes a line that a sender writes.
//! * **Giving back is batched** (see [`HeldPlaces`]): a taken entry keeps its place until the
//!   consumer says it was processed and gives the places back, which stores the freed position and
//!   reads-and-clears the room-waiter flag. So the capacity counts entries accepted and not yet
//!   processed, which is what lets shutdown tell "idle" from "busy" by [`Inbox::len`].
//!
//! Two details keep a send from waiting on its own earlier stores (measured with
//! `benches/examples/stream_pair`: 7 -> 14 -> 30 M events/s): a [`Reservation`] is one word, so it
//! comes back in a register, and after publishing, a sender prefetches for writing the slot two
//! cache lines on, so that the line the next sends write is already on its way when the next CAS
//! waits for earlier stores to finish. (Taking several published entries out of the ring at once on
//! the consumer side was tried too: no measurable gain, 22 more instructions per entry.) A third
//! keeps it from paying a second transfer for one slot: an entry of up to a cache line is written
//! as 8-byte integer stores in order (`write_entry`), never with a vector store the compiler may
//! issue ahead of them (32-, 48- and 56-byte events: 15-60 % more events per second).
//!
//! **Batches** ([`Inbox::try_reserve_batch`]) take `n` consecutive tickets with the same one CAS:
//! the room for them is decided from the freed position like a single ticket's (the last of the `n`
//! is free only if every earlier one is), the new tail is the ticket `n` places on (wrapping around
//! the ring at most once, since `n <= capacity`), and a [`BatchReservation`] fills them in order,
//! publishing each entry by its own stamp as a single send does. The consumer takes them one by one
//! like any other tickets; places left unfilled are cancelled as tombstones. While the overflow holds
//! anything, a batch reserves `n` overflow places instead (adding `n` to the pending count in the same
//! CAS), so it keeps its order behind the overflow's entries.
//!
//! Per-sender FIFO (SPEC R2.3) follows from tickets: one sender's tickets increase in program order,
//! and the consumer takes tickets in order. A reserved ticket must be committed or cancelled; a
//! cancelled one leaves a tombstone that the consumer steps over. A reservation is never held while
//! user code runs or while its sender waits (see `deliver.rs`), since the consumer waits for it.
//!
//! # Beyond capacity (SPEC R5.2)
//! When waiting for room would close a cycle of contexts (decided by the caller), the sender reserves
//! *beyond* capacity ([`Inbox::reserve_overrun`]). Such an entry cannot go into the ring (its slot is
//! occupied), so it goes to the **overflow**, a FIFO taken only on this rare path. While the overflow
//! holds anything, every reservation goes there too (counted against the capacity unless it is an
//! overrun), so that a sender's later entry can never overtake its earlier one; the consumer empties
//! the ring before it takes from the overflow, re-reading the tail *after* it saw the overflow
//! non-empty (which orders it after that sender's earlier ring ticket). An overflow reservation takes
//! no ticket; it adds one to the tail word's pending count instead (so the consumer neither sleeps
//! nor counts itself idle while it is open), and its commit pushes the entry before it takes the
//! count back. The overflow is a mutex-guarded deque: it is touched only between an overrun and the
//! moment it drains, never on the steady-state path, and it shrinks back when it drains: the entry
//! that empties it gives back its memory beyond [`OVERFLOW_RETAINED`] entries.
//!
//! # Sleep and wake-up
//! The three-state handshake of a parker (running / announced sleep / woken), carried by the
//! `SLEEPING` flag: the consumer sets it with a CAS that succeeds only when every ticket was taken
//! and no overflow reservation is open (the re-check after announcing sleep is the CAS itself), then
//! parks until the flag is clear. A sender's reservation CAS clears the flag, and the sender that
//! cleared it unparks the consumer after it committed. Since the flag is cleared in the same atomic
//! step that takes the ticket, a wake-up cannot be lost.
//!
//! Senders waiting for room use the mirror image on a separate word (`room`), which only the consumer
//! and waiting senders touch: a waiter registers, sets `ROOM_WAITERS` with a read-modify-write and
//! then re-checks for room (reading `progress.freed`); the consumer stores the freed position and
//! then reads-and-clears the flag with a read-modify-write. Whichever of the two read-modify-writes
//! comes second sees the other's work. A thread is listed once: a wait that ends without a wake-up (a
//! spurious return, a re-check that found room) leaves its entry for its next wait to reuse, and a
//! wait that gives up (its deadline passed, the inbox closed) takes its entry out, so a sender that
//! times out again and again on an inbox that never drains grows nothing.
//!
//! **Async senders** (the `async` feature's futures) join the same list: a waiter is a parked thread
//! or a task's [`Waker`], and a task follows the same steps (register, set `ROOM_WAITERS`, re-check)
//! in [`Inbox::poll_room`], returning `Pending` instead of parking. A task registers *once* per
//! wait: its entry carries an id ([`RoomTicket`]), a later poll before the wake-up updates the
//! entry's waker in place, and a future dropped while registered removes its entry
//! ([`Inbox::cancel_room_wait`]), so a send cancelled again and again (a timeout around it) leaves
//! nothing behind. No task holds a reservation while it is pending. Waking takes the whole list
//! out under the lock by swapping it with a spare buffer, wakes outside the lock (a waker runs the
//! executor's code) and keeps the buffer as the next spare: no allocation per park or wake once the
//! two buffers have grown to the most waiters seen.
//!
//! Owns the queue, its reservations and its sleep/wake protocol. May import `sync` only. Private
//! unless the `internals` feature exposes it.

use std::collections::VecDeque;
use std::fmt;
use std::mem::MaybeUninit;
use std::task::{Poll, Waker};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering, Thread, UnsafeCell};

/// Tail word: the consumer announced sleep.
const SLEEPING: u64 = 1 << 63;
/// Tail word: the context stopped.
const CLOSED: u64 = 1 << 62;
/// Tail word: external input stopped.
const INPUT_CLOSED: u64 = 1 << 61;
/// Tail word: one open overflow reservation.
const PENDING_ONE: u64 = 1 << TICKET_BITS;
/// Tail word: the count of open overflow reservations.
const PENDING: u64 = INPUT_CLOSED - PENDING_ONE;
/// Tail word and stamps: the ticket.
const TICKET: u64 = PENDING_ONE - 1;
const TICKET_BITS: u32 = 48;
/// Stamp: the ticket's reservation was cancelled.
const TOMB: u64 = 1 << 63;
/// `room`: a sender is parked waiting for room.
const ROOM_WAITERS: usize = 1;

/// Room for entries the overflow keeps once it has drained (SPEC R5.2): after a burst of overruns
/// its memory beyond this is given back, so it does not stay at its peak.
pub const OVERFLOW_RETAINED: usize = 256;

/// The largest capacity an inbox accepts (tickets must keep at least a few laps apart in 48 bits).
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

/// Where a reserved entry goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The ring slot of this ticket.
    Ring(u64),
    /// The overflow (one pending count in the tail word).
    Overflow,
}

/// A place reserved in an inbox. It borrows its inbox, and is committed ([`commit`](Self::commit))
/// or cancelled ([`cancel`](Self::cancel), or by dropping it) through itself, so that it can only
/// ever fill the place it reserved. Commit or cancel it promptly, and run no user code while it is
/// held: the consumer waits for a reserved ticket.
///
/// Its state is one word (the ticket, or `OVERFLOW`, and `WAKE`) beside the inbox's address, so that
/// a reservation comes back in registers: returned through memory, its fields were written with
/// narrower stores than the caller's load, a forwarding failure that made every send wait for the
/// store buffer to drain.
#[must_use = "a reservation holds a place in the inbox until committed or cancelled (dropping it cancels)"]
pub struct Reservation<'a, T> {
    inbox: &'a Inbox<T>,
    bits: u64,
}

/// Places reserved for a batch ([`Inbox::try_reserve_batch`]): consecutive tickets of the ring, or
/// places in the overflow. Filled in order with [`push`](Self::push); the places left unfilled when
/// it is dropped are cancelled. Like a [`Reservation`] it is held briefly and no user code runs while
/// it is: the consumer waits for each reserved place in turn.
#[must_use = "a batch reservation holds places in the inbox until filled or dropped"]
pub struct BatchReservation<'a, T> {
    inbox: &'a Inbox<T>,
    /// The ticket of the next place to fill (ring), unused for the overflow.
    next: u64,
    /// Places reserved and not filled yet.
    left: usize,
    /// The places are in the overflow (each one is one pending count in the tail word).
    overflow: bool,
    /// The reservation cleared the consumer's `SLEEPING` flag: whoever ends it wakes the consumer.
    wake: bool,
}

impl<T> BatchReservation<'_, T> {
    /// Places reserved and not filled yet.
    #[inline]
    pub fn len(&self) -> usize {
        self.left
    }

    /// Whether every reserved place is filled.
    #[inline]
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// Fills the next reserved place with `value` and publishes it (the consumer may take it at
    /// once).
    ///
    /// # Panics
    /// If every reserved place is filled already (a bug of the caller; `value` is dropped).
    #[inline]
    pub fn push(&mut self, value: T) {
        assert!(self.left > 0, "a batch reservation filled beyond its places");
        self.left -= 1;
        let inbox = self.inbox;
        if self.overflow {
            inbox.commit_overflow(value);
            return;
        }
        let t = self.next;
        let slot = inbox.slot(t);
        // SAFETY: this sender took ticket `t` (one of the batch's) with its CAS after seeing
        // (through `freed`, or a hint a sender stored after reading it) that the consumer gave back
        // the place of the last ticket of the batch one lap before, and so of every earlier one;
        // only the holder of `t` writes the slot until it publishes `t + 1` below.
        slot.value.with_mut(|p| unsafe { write_entry(p, value) });
        slot.stamp.store((t + 1) & TICKET, Ordering::Release);
        prefetch_for_write(inbox.slot_after(t, inbox.prefetch_ahead));
        self.next = inbox.next(t);
    }
}

impl<T> Drop for BatchReservation<'_, T> {
    fn drop(&mut self) {
        let inbox = self.inbox;
        if self.left > 0 {
            if self.overflow {
                inbox
                    .tail
                    .word
                    .fetch_sub(PENDING_ONE * self.left as u64, Ordering::AcqRel);
            } else {
                let mut t = self.next;
                for _ in 0..self.left {
                    inbox
                        .slot(t)
                        .stamp
                        .store(((t + 1) & TICKET) | TOMB, Ordering::Release);
                    t = inbox.next(t);
                }
            }
            self.left = 0;
        }
        if self.wake {
            inbox.wake_consumer();
        }
    }
}

impl<T> fmt::Debug for BatchReservation<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchReservation")
            .field("left", &self.left)
            .field("overflow", &self.overflow)
            .field("wake", &self.wake)
            .finish()
    }
}

/// Reservation: the place is in the overflow.
const OVERFLOW: u64 = 1 << 62;
/// Reservation: the consumer was asleep and this reservation cleared its flag: whoever commits
/// wakes it.
const WAKE: u64 = 1 << 63;

/// The state of a [`Reservation`] without its inbox: what a sender keeps while it reserves places in
/// several inboxes at once (all-or-nothing sends), in a reused buffer whose element type cannot
/// borrow. Not `Clone`; [`Inbox::resume`] turns it back into the reservation.
///
/// Unlike a reservation it cannot give its place back when dropped (it does not know its inbox),
/// and the consumer would wait for that place forever: dropping one that was not resumed is a
/// bug, which a debug assertion reports (not while the thread unwinds, where a second panic would
/// abort).
#[derive(Debug)]
#[must_use = "a detached reservation holds a place until resumed and committed or cancelled"]
pub(crate) struct Detached(u64);

impl Drop for Detached {
    fn drop(&mut self) {
        debug_assert!(
            std::thread::panicking(),
            "a detached inbox reservation ({:?}) was dropped without being resumed: its place is \
             never committed or cancelled, and the consumer waits for it forever",
            place_of(self.0)
        );
    }
}

impl<'a, T> Reservation<'a, T> {
    #[inline]
    fn new(inbox: &'a Inbox<T>, place: Place, wake: bool) -> Self {
        let bits = match place {
            Place::Ring(t) => t,
            Place::Overflow => OVERFLOW,
        };
        Self {
            inbox,
            bits: bits | if wake { WAKE } else { 0 },
        }
    }

    /// Places `value` in the reserved place and wakes the consumer if the reservation found it
    /// asleep.
    #[inline(always)]
    pub fn commit(self, value: T) {
        let this = std::mem::ManuallyDrop::new(self);
        this.inbox.commit_bits(this.bits, value);
    }

    /// Gives the reserved place back without committing anything (what dropping it does).
    #[inline]
    pub fn cancel(self) {
        drop(self);
    }

    /// The inbox this reservation is for.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn inbox(&self) -> &'a Inbox<T> {
        self.inbox
    }

    /// Detaches the state from the inbox (see [`Detached`]); [`Inbox::resume`] on the same inbox
    /// turns it back into this reservation.
    #[inline]
    pub(crate) fn detach(self) -> Detached {
        let this = std::mem::ManuallyDrop::new(self);
        Detached(this.bits)
    }
}

impl<T> Drop for Reservation<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.inbox.cancel_bits(self.bits);
    }
}

impl<T> fmt::Debug for Reservation<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("place", &place_of(self.bits))
            .field("wake", &(self.bits & WAKE != 0))
            .finish()
    }
}

/// Where the reservation `bits` place their entry.
#[inline]
fn place_of(bits: u64) -> Place {
    if bits & OVERFLOW != 0 {
        Place::Overflow
    } else {
        Place::Ring(bits & TICKET)
    }
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
    /// See the module docs: `ticket + 1` once it holds that ticket's entry, `(ticket + 1) | TOMB`
    /// once that ticket's reservation was cancelled (its index before the first use). Written by
    /// senders only.
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A slot alone on its cache line: the ring's stride is 64 bytes and the ring starts on a line
/// boundary (see [`Inbox::LINE_SLOTS`]).
#[repr(align(64))]
struct LineSlot<T>(Slot<T>);

/// The line every sender updates.
struct Tail {
    /// Ticket, pending overflow reservations and flags (see the module docs). Updated with
    /// read-modify-writes only.
    word: AtomicU64,
    /// A value `Progress::freed` had (so never ahead of it), kept here by the senders so that they
    /// need not read the consumer's line for every send (see the module docs).
    freed_hint: AtomicU64,
}

/// What the consumer's thread keeps about its progress. Every field is written by that thread only;
/// the others read them for [`Inbox::len`] and `Drop`.
struct Progress {
    /// The next ticket to take.
    head: AtomicU64,
    /// Tickets below this one are processed (their places may be given back).
    done: AtomicU64,
    /// Tickets below this one are given back: their slots are free for the next lap.
    freed: AtomicU64,
    /// Entries taken from the overflow, processed, and given back, counted since the start.
    ov_taken: AtomicUsize,
    ov_done: AtomicUsize,
    ov_freed: AtomicUsize,
}

/// The shared side of an inbox: every sender holds it through an `Arc`.
pub struct Inbox<T> {
    /// The senders' line: the tail word and the freed hint.
    tail: CachePadded<Tail>,
    /// The consumer's progress, on its own line.
    progress: CachePadded<Progress>,
    /// `ROOM_WAITERS`; read-modify-written by the consumer when it gives places back.
    room: CachePadded<AtomicUsize>,
    /// The ring when slots are packed ([`Self::LINE_SLOTS`] false); empty otherwise.
    slots: Box<[Slot<T>]>,
    /// The ring when every slot has a cache line of its own; empty otherwise.
    line_slots: Box<[LineSlot<T>]>,
    /// `one_lap - 1`: a ticket's slot index.
    index_mask: u64,
    /// The power of two above `capacity`: a ticket's lap unit.
    one_lap: u64,
    /// Nominal capacity, `1..=MAX_CAPACITY`, and the number of slots.
    capacity: usize,
    /// How many slots ahead a committing sender prefetches ([`PREFETCH_AHEAD_BYTES`]).
    prefetch_ahead: usize,
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
    /// Senders (threads and tasks) waiting for room; touched only on that slow path.
    room_waiters: Mutex<RoomWaiters>,
}

/// One sender waiting for room: a parked thread or an async task.
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
enum RoomWaiter {
    Thread(Thread),
    /// A task's waker, with the id of its registration (see [`RoomTicket`]).
    Task(u64, Waker),
}

impl sync::ThreadWaiter for RoomWaiter {
    fn of_thread(thread: Thread) -> Self {
        RoomWaiter::Thread(thread)
    }
    fn thread_id(&self) -> Option<sync::ThreadId> {
        match self {
            RoomWaiter::Thread(t) => Some(t.id()),
            RoomWaiter::Task(..) => None,
        }
    }
}

impl RoomWaiter {
    fn wake(self) {
        match self {
            RoomWaiter::Thread(t) => t.unpark(),
            RoomWaiter::Task(_, w) => w.wake(),
        }
    }
}

/// The room-waiter list, its spare buffer (see the module docs: waking swaps them, so that neither
/// is freed and reallocated per wake) and the next task registration id.
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
struct RoomWaiters {
    list: Vec<RoomWaiter>,
    spare: Vec<RoomWaiter>,
    next_id: u64,
}

/// An async sender's registration in an inbox's room-waiter list, kept by its future between polls
/// ([`Inbox::poll_room`]); `None` in the future while it is not registered. Dropping a future that
/// holds one must call [`Inbox::cancel_room_wait`] with it, or its entry stays until the next wake.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub struct RoomTicket(u64);

// SAFETY: the slots hand values of `T` from senders to the consumer thread, so `T: Send` is required
// and sufficient; every shared field is an atomic, a mutex, or an `UnsafeCell` whose access protocol
// is documented on the field (slot values: stamp protocol; `consumer_thread`: written once before it
// is published through `tail`).
unsafe impl<T: Send> Send for Inbox<T> {}
// SAFETY: see `Send`; no `&T` is ever handed out to two threads.
unsafe impl<T: Send> Sync for Inbox<T> {}

/// How far ahead of the slot it just wrote a sender prefetches: two cache lines. Measured with
/// `benches/examples/stream_pair` (one input handle flooding a context, 40-byte slots) on the
/// 2-core VM: none 13.4-14.5 M events/s, one line 18-22, two lines 16-32, three 21-29, four 13-21.
const PREFETCH_AHEAD_BYTES: usize = 128;

/// Asks for the cache line of `slot` in a writable state. A hint: no effect on what the program
/// computes, and a no-op where there is no such instruction (or under loom and miri).
#[inline(always)]
fn prefetch_for_write<T>(slot: &Slot<T>) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    // SAFETY: `prefetchw` only hints the cache; it reads nothing architecturally and cannot fault.
    // Processors without it execute it as a no-op (the 0F 0D opcode space).
    unsafe {
        std::arch::asm!(
            "prefetchw [{0}]",
            in(reg) slot as *const Slot<T>,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(all(target_arch = "aarch64", not(loom), not(miri)))]
    // SAFETY: `prfm` only hints the cache and cannot fault.
    unsafe {
        std::arch::asm!(
            "prfm pstl1keep, [{0}]",
            in(reg) slot as *const Slot<T>,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), loom, miri))]
    let _ = slot;
}

/// Writes `value` into a slot. An entry of at most a cache line whose size is a multiple of 8 bytes
/// and whose alignment is at least 8 (every entry of an event with a `u64` in it) is written as
/// 8-byte words, each an integer store, in order, whatever instructions the compiler would pick for
/// a copy of `T`: a 16-byte vector store among them, with its data ready before the integer stores
/// (an event copied from memory, `send_to(ctx, *e)`, or fields the compiler merged), made a send
/// cost a second cross-core transfer on the EPYC VM (harness/BENCHMARKS.md, "The first store into
/// a slot"). The words are copied as `MaybeUninit<u64>`, so padding bytes are copied as what they
/// are, never read as integers. Larger entries keep the compiler's copy (not measured).
///
/// # Safety
/// `dst` is valid for a write of `T` and aligned for it.
#[inline(always)]
unsafe fn write_entry<T>(dst: *mut MaybeUninit<T>, value: T) {
    const WORD: usize = std::mem::size_of::<u64>();
    let size = std::mem::size_of::<T>();
    if size % WORD == 0 && size <= 64 && std::mem::align_of::<T>() >= WORD {
        let value = std::mem::ManuallyDrop::new(value);
        let src = (&*value as *const T).cast::<MaybeUninit<u64>>();
        let dst = dst.cast::<MaybeUninit<u64>>();
        for i in 0..size / WORD {
            // SAFETY: `T` is a whole number of words and both ends are aligned for `T`, so for a
            // word; `i` stays within `T`. A `MaybeUninit<u64>` may hold uninitialised bytes
            // (padding), and `value` is moved into `dst` (not dropped here, `ManuallyDrop`).
            unsafe { std::ptr::write_volatile(dst.add(i), src.add(i).read()) };
        }
    } else {
        // SAFETY: the caller's.
        unsafe { (*dst).write(value) };
    }
}

/// The tail word `cur` with its ticket taken: the next ticket, `SLEEPING` cleared (the step that
/// takes the place also takes the sleep announcement: no wake-up is lost).
#[inline]
fn with_ticket_taken(cur: u64, next: u64) -> u64 {
    (cur & !(SLEEPING | TICKET)) | next
}

/// The tail word `cur` with one more open overflow reservation, `SLEEPING` cleared.
#[inline]
fn with_overflow_reserved(cur: u64) -> u64 {
    (cur & !SLEEPING) + PENDING_ONE
}

/// Open overflow reservations in the tail word `cur`.
#[inline]
fn pending(cur: u64) -> usize {
    ((cur & PENDING) >> TICKET_BITS) as usize
}

/// Whether ticket `a` comes before ticket `b` (tickets in use lie within a few laps of each other,
/// far less than half the ticket space).
#[inline]
fn before(a: u64, b: u64) -> bool {
    let d = b.wrapping_sub(a) & TICKET;
    d != 0 && d < 1 << (TICKET_BITS - 1)
}

/// `capacity` slots made by `slot(index)`, or the allocation error.
fn ring<S>(
    capacity: usize,
    slot: impl FnMut(usize) -> S,
) -> Result<Vec<S>, std::collections::TryReserveError> {
    let mut ring = Vec::new();
    ring.try_reserve_exact(capacity)?;
    ring.extend((0..capacity).map(slot));
    Ok(ring)
}

impl<T> Inbox<T> {
    /// Whether each slot gets a cache line of its own (a 64-byte stride on a line-aligned ring)
    /// instead of slots packed edge to edge. Chosen by the slot's size (the entry and its stamp)
    /// from what `benches/examples/stream_pair` measured on the 2-core VM, one sender flooding a
    /// context (harness/BENCHMARKS.md, "Slot layout", has the table): a line per slot won a quarter
    /// to two thirds for 32-, 48-, 56- and 64-byte slots and lost a quarter for 24- and 40-byte ones;
    /// above a line it changed nothing but doubled the memory. A constant per entry type, so the
    /// choice costs no branch on the hot path.
    const LINE_SLOTS: bool = {
        let bytes = std::mem::size_of::<Slot<T>>();
        bytes <= 64 && bytes != 24 && bytes != 40
    };

    /// Bytes from one slot to the next.
    const SLOT_STRIDE: usize = if Self::LINE_SLOTS {
        std::mem::size_of::<LineSlot<T>>()
    } else {
        std::mem::size_of::<Slot<T>>()
    };

    /// Creates an inbox of nominal `capacity` (clamped to `1..=MAX_CAPACITY`) and its consumer end.
    ///
    /// # Panics
    /// If the slots cannot be allocated (a test helper: the engine uses
    /// [`try_with_capacity`](Self::try_with_capacity)).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn with_capacity(capacity: usize) -> (sync::Arc<Self>, Consumer<T>) {
        match Self::try_with_capacity(capacity) {
            Ok(pair) => pair,
            Err(e) => panic!("inbox of {capacity} entries: {e}"),
        }
    }

    /// [`with_capacity`](Self::with_capacity), or an error instead of an abort when the memory for
    /// the slots cannot be allocated (a capacity within [`MAX_CAPACITY`] may still need more
    /// memory than the machine has: `capacity` slots of an entry and a stamp each).
    pub fn try_with_capacity(
        capacity: usize,
    ) -> Result<(sync::Arc<Self>, Consumer<T>), std::collections::TryReserveError> {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        let one_lap = (capacity as u64 + 1).next_power_of_two();
        let slot = |i: usize| Slot {
            stamp: AtomicU64::new(i as u64),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        };
        let (slots, line_slots) = if Self::LINE_SLOTS {
            (Vec::new(), ring(capacity, |i| LineSlot(slot(i)))?)
        } else {
            (ring(capacity, slot)?, Vec::new())
        };
        let inbox = sync::Arc::new(Self {
            tail: CachePadded::new(Tail {
                word: AtomicU64::new(0),
                freed_hint: AtomicU64::new(0),
            }),
            progress: CachePadded::new(Progress {
                head: AtomicU64::new(0),
                done: AtomicU64::new(0),
                freed: AtomicU64::new(0),
                ov_taken: AtomicUsize::new(0),
                ov_done: AtomicUsize::new(0),
                ov_freed: AtomicUsize::new(0),
            }),
            room: CachePadded::new(AtomicUsize::new(0)),
            slots: slots.into_boxed_slice(),
            line_slots: line_slots.into_boxed_slice(),
            index_mask: one_lap - 1,
            one_lap,
            capacity,
            // Below `capacity`, as `slot_after` needs; a tiny ring just prefetches less far.
            prefetch_ahead: PREFETCH_AHEAD_BYTES
                .div_ceil(Self::SLOT_STRIDE)
                .max(1)
                % capacity,
            overflow: Mutex::new(VecDeque::new()),
            overflow_len: AtomicUsize::new(0),
            overruns: AtomicU64::new(0),
            consumer_thread: UnsafeCell::new(None),
            room_waiters: Mutex::new(RoomWaiters {
                list: Vec::new(),
                spare: Vec::new(),
                next_id: 0,
            }),
        });
        let consumer = Consumer {
            inbox: inbox.clone(),
            head: 0,
            registered: false,
            _not_sync: std::marker::PhantomData,
        };
        Ok((inbox, consumer))
    }

    /// The nominal capacity.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The ticket after `t`.
    #[inline]
    fn next(&self, t: u64) -> u64 {
        let next = if (t & self.index_mask) + 1 < self.capacity as u64 {
            t + 1
        } else {
            (t & !self.index_mask).wrapping_add(self.one_lap)
        };
        next & TICKET
    }

    /// The slot `ahead` places after the slot of `t` (`ahead < capacity`), wrapping around.
    #[inline]
    fn slot_after(&self, t: u64, ahead: usize) -> &Slot<T> {
        let mut i = (t & self.index_mask) as usize + ahead;
        if i >= self.capacity {
            i -= self.capacity;
        }
        self.slot_at(i)
    }

    /// The ticket `n` places after `t` (`n <= capacity`, so it wraps around the ring at most once).
    #[inline]
    fn ticket_after(&self, t: u64, n: usize) -> u64 {
        debug_assert!(n <= self.capacity);
        let i = (t & self.index_mask) + n as u64;
        let capacity = self.capacity as u64;
        let next = if i < capacity {
            t + n as u64
        } else {
            (t & !self.index_mask).wrapping_add(self.one_lap) + (i - capacity)
        };
        next & TICKET
    }

    #[inline]
    fn slot(&self, t: u64) -> &Slot<T> {
        self.slot_at((t & self.index_mask) as usize)
    }

    /// The slot of index `i` (`i < capacity`), in whichever ring this entry type uses.
    #[inline(always)]
    fn slot_at(&self, i: usize) -> &Slot<T> {
        if Self::LINE_SLOTS {
            &self.line_slots[i].0
        } else {
            &self.slots[i]
        }
    }

    /// Tickets from `from` up to `to` (0 if `from` is ahead, which a racy read can see).
    fn distance(&self, to: u64, from: u64) -> usize {
        let shift = self.one_lap.trailing_zeros();
        let lap_mask = TICKET >> shift;
        let laps = ((to >> shift).wrapping_sub(from >> shift)) & lap_mask;
        if laps > lap_mask / 2 {
            return 0;
        }
        let within = (to & self.index_mask) as i128 - (from & self.index_mask) as i128;
        (laps as i128 * self.capacity as i128 + within).max(0) as usize
    }

    /// Accepted entries not yet processed and given back: reserved, waiting, taken and held.
    ///
    /// Read from several words in the order an entry moves through them, so an entry is missed only
    /// if it was given back while this ran (shutdown's double scan relies on that).
    pub fn len(&self) -> usize {
        let cur = self.tail.word.load(Ordering::Acquire);
        let overflow = self.overflow_len.load(Ordering::Acquire);
        let p = &*self.progress;
        let ov_held = p
            .ov_taken
            .load(Ordering::Acquire)
            .saturating_sub(p.ov_freed.load(Ordering::Acquire));
        let ring = self.distance(cur & TICKET, p.freed.load(Ordering::Acquire));
        ring + pending(cur) + overflow + ov_held
    }

    /// Whether nothing is accepted and not yet given back.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reservations taken beyond capacity so far.
    pub fn overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }

    /// Entries currently held in the overflow.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn overflow_len(&self) -> usize {
        self.overflow_len.load(Ordering::Relaxed)
    }

    fn refuses(state: u64, sender: Sender) -> bool {
        state & CLOSED != 0 || (sender == Sender::External && state & INPUT_CLOSED != 0)
    }

    /// Reserves a place if the inbox is below capacity.
    ///
    /// # Errors
    /// [`Refusal::Full`] at capacity; [`Refusal::Closed`] when the inbox refuses this sender.
    #[inline]
    pub fn try_reserve(&self, sender: Sender) -> Result<Reservation<'_, T>, Refusal> {
        self.reserve(sender, false)
    }

    /// Reserves a place even beyond capacity (SPEC R5.2) and counts the overrun if it is one.
    ///
    /// # Errors
    /// [`Refusal::Closed`] when the inbox refuses this sender.
    pub fn reserve_overrun(&self, sender: Sender) -> Result<Reservation<'_, T>, Refusal> {
        self.reserve(sender, true)
    }

    /// Whether the slot of ticket `t` is free: the consumer gave back the place of the ticket that
    /// used it one lap before (on the first lap that ticket lies before the start, which `before`
    /// sees too). Decided from the senders' own line when the hint suffices, so no slot and no
    /// consumer line is read before the reservation's CAS.
    #[inline]
    fn is_free(&self, t: u64) -> bool {
        let previous = t.wrapping_sub(self.one_lap) & TICKET;
        if before(previous, self.tail.freed_hint.load(Ordering::Acquire)) {
            return true;
        }
        let freed = self.progress.freed.load(Ordering::Acquire);
        if before(previous, freed) {
            self.tail.freed_hint.store(freed, Ordering::Release);
            return true;
        }
        false
    }

    /// Whether an ordinary reservation into the overflow (non-empty) would exceed the capacity.
    fn overflow_full(&self, cur: u64, overflow: usize) -> bool {
        let ring = self.distance(cur & TICKET, self.progress.freed.load(Ordering::Acquire));
        ring + pending(cur) + overflow >= self.capacity
    }

    /// The common case inline (open, no overflow, room, the CAS succeeds at once); everything else
    /// in [`reserve_slow`](Self::reserve_slow), which decides it again from the start.
    #[inline]
    fn reserve(&self, sender: Sender, beyond: bool) -> Result<Reservation<'_, T>, Refusal> {
        let cur = self.tail.word.load(Ordering::Relaxed);
        let t = cur & TICKET;
        if !Self::refuses(cur, sender)
            && self.overflow_len.load(Ordering::Acquire) == 0
            && self.is_free(t)
            && self
                .tail
                .word
                .compare_exchange(
                    cur,
                    with_ticket_taken(cur, self.next(t)),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return Ok(Reservation::new(self, Place::Ring(t), cur & SLEEPING != 0));
        }
        self.reserve_slow(sender, beyond)
    }

    #[cold]
    #[inline(never)]
    fn reserve_slow(&self, sender: Sender, beyond: bool) -> Result<Reservation<'_, T>, Refusal> {
        let mut cur = self.tail.word.load(Ordering::Relaxed);
        loop {
            if Self::refuses(cur, sender) {
                return Err(Refusal::Closed);
            }
            let wake = cur & SLEEPING != 0;
            let t = cur & TICKET;
            let overflow = self.overflow_len.load(Ordering::Acquire);
            let (new, place, full) = if overflow == 0 && self.is_free(t) {
                (with_ticket_taken(cur, self.next(t)), Place::Ring(t), false)
            } else {
                // The ring is full, or the overflow holds entries that a ring ticket would overtake.
                let full = overflow == 0 || self.overflow_full(cur, overflow);
                if full && !beyond {
                    return Err(Refusal::Full);
                }
                (with_overflow_reserved(cur), Place::Overflow, full)
            };
            if place == Place::Overflow && cur & PENDING == PENDING {
                // 8191 overflow reservations open at once: wait for one to close.
                sync::spin_hint();
                cur = self.tail.word.load(Ordering::Relaxed);
                continue;
            }
            match self.tail.word.compare_exchange_weak(
                cur,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if full {
                        self.overruns.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(Reservation::new(self, place, wake));
                }
                Err(actual) => {
                    cur = actual;
                    sync::spin_hint();
                }
            }
        }
    }

    /// Free places of the ring from ticket `t` on, as far as the freed position `freed` shows.
    #[inline]
    fn ring_room(&self, t: u64, freed: u64) -> usize {
        self.capacity.saturating_sub(self.distance(t, freed))
    }

    /// Free places of the ring from ticket `t` on, up to `want`: decided from the senders' own line
    /// when the hint shows enough, otherwise from the consumer's freed position (refreshing the
    /// hint), as [`is_free`](Self::is_free) decides for one place.
    fn ring_room_up_to(&self, t: u64, want: usize) -> usize {
        let room = self.ring_room(t, self.tail.freed_hint.load(Ordering::Acquire));
        if room >= want {
            return want;
        }
        let freed = self.progress.freed.load(Ordering::Acquire);
        let fresh = self.ring_room(t, freed);
        if fresh > room {
            self.tail.freed_hint.store(freed, Ordering::Release);
        }
        fresh.min(want)
    }

    /// Room for ordinary reservations into the overflow (non-empty): the capacity less everything
    /// accepted and not given back.
    fn overflow_room(&self, cur: u64, overflow: usize) -> usize {
        let ring = self.distance(cur & TICKET, self.progress.freed.load(Ordering::Acquire));
        self.capacity
            .saturating_sub(ring + pending(cur) + overflow)
    }

    /// Reserves between `min` and `max` places at once (`1 <= min <= max`), as many as there is room
    /// for, with one CAS on the tail word: consecutive tickets of the ring, or places in the overflow
    /// while it holds anything (see the module docs). Never beyond capacity, so a `min` above
    /// [`capacity`](Self::capacity) is always refused with [`Refusal::Full`]; `max` is clamped to it.
    ///
    /// # Errors
    /// [`Refusal::Full`] when fewer than `min` places are free; [`Refusal::Closed`] when the inbox
    /// refuses this sender.
    pub fn try_reserve_batch(
        &self,
        sender: Sender,
        min: usize,
        max: usize,
    ) -> Result<BatchReservation<'_, T>, Refusal> {
        let min = min.max(1);
        let max = max.clamp(min, self.capacity.max(min));
        let mut cur = self.tail.word.load(Ordering::Relaxed);
        loop {
            if Self::refuses(cur, sender) {
                return Err(Refusal::Closed);
            }
            if min > self.capacity {
                return Err(Refusal::Full);
            }
            let t = cur & TICKET;
            let overflow = self.overflow_len.load(Ordering::Acquire);
            let (n, new) = if overflow == 0 {
                let n = self.ring_room_up_to(t, max);
                (n, with_ticket_taken(cur, self.ticket_after(t, n)))
            } else {
                // Behind the overflow's entries (per-sender FIFO), within the pending count's bits.
                let open = (PENDING >> TICKET_BITS) as usize - pending(cur);
                let n = self.overflow_room(cur, overflow).min(max).min(open);
                (n, (cur & !SLEEPING) + PENDING_ONE * n as u64)
            };
            if n < min {
                return Err(Refusal::Full);
            }
            match self.tail.word.compare_exchange_weak(
                cur,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Ok(BatchReservation {
                        inbox: self,
                        next: t,
                        left: n,
                        overflow: overflow != 0,
                        wake: cur & SLEEPING != 0,
                    })
                }
                Err(actual) => {
                    cur = actual;
                    sync::spin_hint();
                }
            }
        }
    }

    /// Turns a reservation [detached](Reservation::detach) from this inbox back into it.
    ///
    /// # Safety
    /// `detached` came from a reservation of this inbox (not of another one).
    #[inline]
    pub(crate) unsafe fn resume(&self, detached: Detached) -> Reservation<'_, T> {
        // The place passes back to a reservation, which commits or cancels it: no assertion.
        let detached = std::mem::ManuallyDrop::new(detached);
        Reservation {
            inbox: self,
            bits: detached.0,
        }
    }

    /// [`Reservation::commit`]: places `value` in the place `bits` reserved in this inbox.
    #[inline(always)]
    fn commit_bits(&self, bits: u64, value: T) {
        match place_of(bits) {
            Place::Ring(t) => {
                let slot = self.slot(t);
                // SAFETY: this sender took ticket `t` with its CAS after seeing (through `freed`, or
                // a hint a sender stored after reading it) that the consumer gave back the ticket
                // that used the slot one lap before, so nobody reads the slot; only the holder of
                // `t` writes it until it publishes `t + 1` below.
                slot.value.with_mut(|p| unsafe { write_entry(p, value) });
                slot.stamp.store((t + 1) & TICKET, Ordering::Release);
                // Ask for the line a few slots on now: the next sends write there, and the
                // reservation CAS of each send waits until the stores before it are done, which
                // for a line still cached by the consumer means a whole cross-core transfer.
                prefetch_for_write(self.slot_after(t, self.prefetch_ahead));
            }
            Place::Overflow => self.commit_overflow(value),
        }
        if bits & WAKE != 0 {
            self.wake_consumer();
        }
    }

    #[cold]
    #[inline(never)]
    fn commit_overflow(&self, value: T) {
        {
            let mut overflow = sync::lock(&self.overflow);
            overflow.push_back(value);
            self.overflow_len.fetch_add(1, Ordering::AcqRel);
        }
        // Only now the pending count goes: whoever sees it gone also sees the entry.
        self.tail.word.fetch_sub(PENDING_ONE, Ordering::AcqRel);
    }

    /// [`Reservation::cancel`]: gives the place `bits` reserved in this inbox back.
    fn cancel_bits(&self, bits: u64) {
        match place_of(bits) {
            Place::Ring(t) => self
                .slot(t)
                .stamp
                .store(((t + 1) & TICKET) | TOMB, Ordering::Release),
            Place::Overflow => {
                self.tail.word.fetch_sub(PENDING_ONE, Ordering::AcqRel);
            }
        }
        if bits & WAKE != 0 {
            // The consumer was woken by the reservation; let it see there is nothing and sleep again.
            self.wake_consumer();
        }
    }

    #[cold]
    fn wake_consumer(&self) {
        // SAFETY: `wake` is set only when the reservation CAS observed SLEEPING, which the consumer
        // sets only after writing `consumer_thread` (Release/Acquire through `tail`); the cell is
        // never written again, so this shared read does not race.
        let thread = self.consumer_thread.with(|p| unsafe { (*p).clone() });
        if let Some(t) = thread {
            t.unpark();
        }
    }

    /// Consumer thread only: records that ticket `head` was taken; returns the next one.
    #[inline]
    fn advance(&self, head: u64) -> u64 {
        let next = self.next(head);
        self.progress.head.store(next, Ordering::Relaxed);
        next
    }

    /// Consumer thread only: marks every entry taken so far as processed.
    #[inline]
    fn mark_done(&self) {
        let p = &*self.progress;
        p.done
            .store(p.head.load(Ordering::Relaxed), Ordering::Relaxed);
        p.ov_done
            .store(p.ov_taken.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Consumer thread only: frees the places of the processed entries and wakes senders waiting
    /// for room; returns whether there was any.
    fn give_back_done(&self) -> bool {
        let p = &*self.progress;
        let done = p.done.load(Ordering::Relaxed);
        let ov_done = p.ov_done.load(Ordering::Relaxed);
        if p.freed.load(Ordering::Relaxed) == done && p.ov_freed.load(Ordering::Relaxed) == ov_done
        {
            return false;
        }
        p.freed.store(done, Ordering::Release);
        p.ov_freed.store(ov_done, Ordering::Release);
        // A read-modify-write after the frees: a waiter's flag set before it is seen here, and a
        // waiter whose flag comes after it sees the frees (see the module docs).
        if self.room.fetch_and(!ROOM_WAITERS, Ordering::AcqRel) & ROOM_WAITERS != 0 {
            self.wake_room_waiters();
        }
        true
    }

    fn wake_room_waiters(&self) {
        let mut woken = {
            let mut w = sync::lock(&self.room_waiters);
            if w.list.is_empty() {
                return;
            }
            // The spare buffer becomes the list (no allocation): later registrations go there.
            let spare = std::mem::take(&mut w.spare);
            std::mem::replace(&mut w.list, spare)
        };
        // Outside the lock: a waker runs the executor's code, which may poll a send again.
        for waiter in woken.drain(..) {
            waiter.wake();
        }
        // Keep the buffer as the next spare (a concurrent wake may have left a smaller one there).
        let mut w = sync::lock(&self.room_waiters);
        if w.spare.capacity() < woken.capacity() {
            w.spare = woken;
        }
    }

    /// Registers an async sender waiting for room (the task's side of the room-waiter protocol,
    /// the mirror of [`wait_for_room_for`](Self::wait_for_room_for)): until room for `need`
    /// places at once (`1..=capacity`) may be available, or the inbox closes for `sender`. Call it
    /// after a reservation failed with [`Refusal::Full`], with the future's `ticket` (`None` the
    /// first time): the first call registers `waker` and stores the registration there, later ones
    /// update the waker of that same entry if it is still listed (a new one if a wake-up took it),
    /// so a future never has more than one entry.
    ///
    /// Returns `Ready(Retry)` when room may be there now (retry the reservation; the entry may
    /// still be listed and costs a spurious wake-up), `Ready(Closed)`, or `Pending` once
    /// registered: a consumer that frees places after this call wakes `waker`.
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub fn poll_room(
        &self,
        sender: Sender,
        need: usize,
        ticket: &mut Option<RoomTicket>,
        waker: &Waker,
    ) -> Poll<RoomWait> {
        {
            let mut w = sync::lock(&self.room_waiters);
            let listed = ticket.as_ref().and_then(|t| {
                w.list
                    .iter_mut()
                    .find(|e| matches!(e, RoomWaiter::Task(id, _) if *id == t.0))
            });
            match listed {
                Some(RoomWaiter::Task(_, old)) => {
                    if !old.will_wake(waker) {
                        old.clone_from(waker);
                    }
                }
                _ => {
                    let id = w.next_id;
                    w.next_id += 1;
                    w.list.push(RoomWaiter::Task(id, waker.clone()));
                    *ticket = Some(RoomTicket(id));
                }
            }
        }
        // Announce after registering, re-check after announcing: as `wait_for_room_with`.
        self.room.fetch_or(ROOM_WAITERS, Ordering::AcqRel);
        let cur = self.tail.word.load(Ordering::Acquire);
        if Self::refuses(cur, sender) {
            return Poll::Ready(RoomWait::Closed);
        }
        if self.has_room_for(cur, need) {
            return Poll::Ready(RoomWait::Retry);
        }
        Poll::Pending
    }

    /// Removes an async sender's registration (its future is dropped or done), if a wake-up has
    /// not taken it already.
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub fn cancel_room_wait(&self, ticket: RoomTicket) {
        let mut w = sync::lock(&self.room_waiters);
        if let Some(i) = w
            .list
            .iter()
            .position(|e| matches!(e, RoomWaiter::Task(id, _) if *id == ticket.0))
        {
            // Order does not matter: a wake-up wakes the whole list.
            let removed = w.list.swap_remove(i);
            // A waker's drop runs the executor's code: not under the lock.
            drop(w);
            drop(removed);
        }
    }

    /// Entries in the room-waiter list (threads and tasks): what the cancellation tests check.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn room_waiters(&self) -> usize {
        sync::lock(&self.room_waiters).list.len()
    }

    /// Whether an ordinary reservation could find room now (a hint for waiters).
    fn has_room(&self, cur: u64) -> bool {
        let overflow = self.overflow_len.load(Ordering::Acquire);
        if overflow > 0 {
            return !self.overflow_full(cur, overflow);
        }
        self.is_free(cur & TICKET)
    }

    /// Whether a batch reservation of `need` places could find room now (a hint for waiters).
    fn has_room_for(&self, cur: u64, need: usize) -> bool {
        let overflow = self.overflow_len.load(Ordering::Acquire);
        if overflow > 0 {
            return self.overflow_room(cur, overflow) >= need;
        }
        self.ring_room(cur & TICKET, self.progress.freed.load(Ordering::Acquire)) >= need
    }

    /// Parks the calling sender until room may be available, the inbox closes for `sender`, or
    /// `deadline` passes. Call it after a reservation failed with [`Refusal::Full`]; a `Retry` may be
    /// spurious.
    pub fn wait_for_room(&self, sender: Sender, deadline: Option<Instant>) -> RoomWait {
        self.wait_for_room_with(sender, deadline, |cur| self.has_room(cur))
    }

    /// [`wait_for_room`](Self::wait_for_room) for a batch: until room for `need` places at once may
    /// be available (`need <= capacity`; a larger one never finds it).
    pub fn wait_for_room_for(
        &self,
        sender: Sender,
        need: usize,
        deadline: Option<Instant>,
    ) -> RoomWait {
        self.wait_for_room_with(sender, deadline, |cur| self.has_room_for(cur, need))
    }

    /// The room-waiter protocol, with `has_room` telling from the tail word whether to retry.
    fn wait_for_room_with(
        &self,
        sender: Sender,
        deadline: Option<Instant>,
        has_room: impl Fn(u64) -> bool,
    ) -> RoomWait {
        // Register before announcing: the consumer that sees ROOM_WAITERS takes the list after it
        // cleared the flag, so it finds us. Once: an entry left by an earlier wait of this thread
        // that no wake-up took is reused (`sync::list_current`).
        sync::list_current(&mut sync::lock(&self.room_waiters).list);
        self.room.fetch_or(ROOM_WAITERS, Ordering::AcqRel);
        // Re-check after announcing: room freed before the consumer read the flag is visible now.
        let cur = self.tail.word.load(Ordering::Acquire);
        if Self::refuses(cur, sender) {
            self.unlist_current();
            return RoomWait::Closed;
        }
        if has_room(cur) {
            // Our list entry only costs a spurious unpark later (or serves our next wait).
            return RoomWait::Retry;
        }
        match deadline {
            None => sync::park(),
            Some(d) => {
                let now = Instant::now();
                if now < d {
                    sync::park_timeout(d - now);
                }
                if Instant::now() >= d {
                    // Giving up: leave nothing listed (a sender that times out again and again on
                    // an inbox that never drains must not grow the list, R5.1).
                    self.unlist_current();
                    return RoomWait::TimedOut;
                }
            }
        }
        RoomWait::Retry
    }

    /// Takes the calling thread's room-waiter entry out, if a wake-up has not taken it already.
    fn unlist_current(&self) {
        let removed = sync::unlist_current(&mut sync::lock(&self.room_waiters).list);
        drop(removed);
    }

    /// Refuses every later reservation (the context stopped). Entries already accepted stay and are
    /// taken by the consumer. Wakes parked senders so that they see the refusal.
    pub fn close(&self) {
        self.tail.word.fetch_or(CLOSED, Ordering::AcqRel);
        self.wake_room_waiters();
    }

    /// Refuses later reservations from external senders (SPEC R8.1); contexts may still send.
    pub fn close_input(&self) {
        self.tail.word.fetch_or(INPUT_CLOSED, Ordering::AcqRel);
        self.wake_room_waiters();
    }

    /// Whether [`close_input`](Self::close_input) was called.
    pub fn is_input_closed(&self) -> bool {
        self.tail.word.load(Ordering::Acquire) & INPUT_CLOSED != 0
    }

    /// Whether [`close`](Self::close) was called.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_closed(&self) -> bool {
        self.tail.word.load(Ordering::Acquire) & CLOSED != 0
    }
}

impl<T> Drop for Inbox<T> {
    fn drop(&mut self) {
        // `&mut self`: no sender or consumer is left, every read below is exclusive.
        let end = self.tail.word.load(Ordering::Relaxed) & TICKET;
        let mut t = self.progress.head.load(Ordering::Relaxed);
        while t != end {
            let slot = self.slot(t);
            if slot.stamp.load(Ordering::Relaxed) == (t + 1) & TICKET {
                // SAFETY: stamp `t + 1` means the slot holds an initialised value that was never
                // taken (taken ones lie below `head`); we drop it exactly once.
                slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
            t = self.next(t);
        }
    }
}

/// The places of entries the consumer took and processed but has not freed yet: giving them back
/// for a whole batch at once (one read-modify-write of the consumer's `room` word, whose line then
/// stays on the consumer's core) keeps the per-entry cost to plain stores.
///
/// Made by [`Consumer::held_places`] on the consumer's thread and kept wherever that thread must
/// free them (a context frees them before its own sends wait, too). Whoever holds places must free them
/// before the consumer sleeps and before it waits for anything a sender to this inbox could be
/// waiting for. It is neither `Send` nor `Sync`: it lives on the consumer's thread, which makes
/// it.
pub struct HeldPlaces<T> {
    inbox: sync::Arc<Inbox<T>>,
    held: usize,
    batch: usize,
    /// Consumer-only: neither `Send` nor `Sync`, so it stays on the thread that made it.
    _consumer_only: std::marker::PhantomData<*const ()>,
}

impl<T> HeldPlaces<T> {
    /// Marks every entry taken so far as processed, so that its place goes with the next
    /// [`give_back`](Self::give_back); returns whether the batch is full (call it now).
    #[inline]
    pub fn hold_one(&mut self) -> bool {
        self.inbox.mark_done();
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
        self.held = 0;
        self.inbox.give_back_done()
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
    /// Local copy of the next ticket to take (mirrored into `Progress::head`).
    head: u64,
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
    /// Taking an entry does not free its place: mark it processed with
    /// [`HeldPlaces::hold_one`] (or [`release_taken`](Self::release_taken)) before the next `pop`,
    /// and give the places back. Until then it counts as accepted, which is what lets shutdown tell
    /// "idle" from "busy" by the count alone.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let inbox = &*self.inbox;
        loop {
            let head = self.head;
            let slot = inbox.slot(head);
            let stamp = slot.stamp.load(Ordering::Acquire);
            let published = (head + 1) & TICKET;
            if stamp == published {
                // SAFETY: stamp `head + 1` publishes an initialised value (Release/Acquire on
                // `stamp`); only the consumer takes ticket `head`, once, and no sender writes the
                // slot again before the consumer gives this ticket's place back.
                let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
                self.head = inbox.advance(head);
                return Some(value);
            }
            if stamp != published | TOMB {
                break;
            }
            // A cancelled reservation: step over it. Every entry taken before this `pop` was
            // processed (see above), so its place goes with theirs; with no place held, nobody would
            // give it back later: do it now.
            self.head = inbox.advance(head);
            let p = &*inbox.progress;
            if p.done.load(Ordering::Relaxed) == head {
                p.done.store(self.head, Ordering::Relaxed);
                if p.freed.load(Ordering::Relaxed) == head
                    && p.ov_freed.load(Ordering::Relaxed) == p.ov_done.load(Ordering::Relaxed)
                {
                    inbox.give_back_done();
                }
            }
        }
        if inbox.overflow_len.load(Ordering::Acquire) > 0
            // Re-read the tail only now: a sender that put an entry into the ring before its entry
            // in the overflow took its ticket before that, so this read sees it (per-sender FIFO).
            && inbox.tail.word.load(Ordering::Acquire) & TICKET == self.head
        {
            let mut overflow = sync::lock(&inbox.overflow);
            let value = overflow.pop_front()?;
            if overflow.is_empty() && overflow.capacity() > OVERFLOW_RETAINED {
                // Drained after a burst: give its peak memory back (R5.2). Rare, like overruns.
                overflow.shrink_to(OVERFLOW_RETAINED);
            }
            // Counted as taken before it stops counting as waiting: `len` never misses it.
            let p = &*inbox.progress;
            p.ov_taken
                .store(p.ov_taken.load(Ordering::Relaxed) + 1, Ordering::Release);
            inbox.overflow_len.fetch_sub(1, Ordering::AcqRel);
            return Some(value);
        }
        None
    }

    /// Marks every entry taken so far as processed and frees their places at once (what a
    /// [`HeldPlaces`] of batch 1 does); returns whether there was any.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn release_taken(&mut self) -> bool {
        self.inbox.mark_done();
        self.inbox.give_back_done()
    }

    /// A batch of places to hold for taken entries and free together (see [`HeldPlaces`]),
    /// full at `batch` (at least 1) entries.
    pub fn held_places(&self, batch: usize) -> HeldPlaces<T> {
        HeldPlaces {
            inbox: self.inbox.clone(),
            held: 0,
            batch: batch.max(1),
            _consumer_only: std::marker::PhantomData,
        }
    }

    /// Announces sleep if nothing is waiting to be taken: returns `true` if the caller may now park
    /// with [`park`](Self::park). Returns `false` if an entry is accepted (take it instead).
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
        let tail = &self.inbox.tail.word;
        let mut cur = tail.load(Ordering::Relaxed);
        loop {
            if cur & TICKET != self.head || cur & PENDING != 0 {
                return false;
            }
            if cur & SLEEPING != 0 {
                break;
            }
            match tail.compare_exchange_weak(
                cur,
                cur | SLEEPING,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        // The CAS read the latest tail: an overflow commit that closed its pending count before it
        // is visible now.
        if self.inbox.overflow_len.load(Ordering::Acquire) > 0 {
            tail.fetch_and(!SLEEPING, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Parks until a sender clears `SLEEPING`, or `stop()` returns true (checked after every wake;
    /// whoever makes it true must unpark this thread). Clears `SLEEPING` before returning.
    pub fn park(&mut self, stop: impl Fn() -> bool) {
        let tail = &self.inbox.tail.word;
        while tail.load(Ordering::Acquire) & SLEEPING != 0 {
            if stop() {
                break;
            }
            sync::park();
        }
        tail.fetch_and(!SLEEPING, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
