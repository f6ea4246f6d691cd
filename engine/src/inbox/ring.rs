//! The ring: the shared side of an inbox ([`Inbox`]), its tail word, its tickets and the slots
//! they index. Reserving and committing are in `reserve`, taking in `consumer`; this file owns the
//! state they share and the arithmetic of tickets.
//!
//! # Algorithm
//! A bounded ring of slots with per-slot sequence stamps in the style of Dmitry Vyukov's bounded
//! queue (also crossbeam-queue's `ArrayQueue`), whose tail word carries everything a sender must
//! decide atomically:
//!
//! * **The tail word** (`tail.word`, a `u64`) packs the next *ticket* (48 bits), the number of
//!   *pending overflow reservations* (13 bits, see `overflow`) and three flags: `SLEEPING` (the
//!   consumer announced that it parks, see `parker`), `CLOSED` (the context stopped: every send is
//!   refused) and `INPUT_CLOSED` (external input stopped: sends from input handles are refused,
//!   sends from contexts still pass so that in-flight work can finish, SPEC R8.1). A sender
//!   reserves with **one CAS** on this word: it takes the ticket, clears `SLEEPING` and is refused
//!   by a close, all in the same step. Every decision two threads could race on (is there room,
//!   may the consumer sleep, must a sender wake it, is the inbox closed) is a read-modify-write of
//!   this word or is ordered by one, so no fence-based (Dekker) reasoning is needed. This is the
//!   protocol that `loom-tests/` checks.
//! * **Slots** hold `capacity` entries exactly. Tickets are lap-encoded, `lap * one_lap + index`
//!   with `one_lap` the power of two above `capacity`, so a ticket's slot is `ticket & (one_lap - 1)`
//!   without a division. A sender publishes ticket `t`'s entry by storing `t + 1` into the slot's
//!   stamp (`(t + 1) | TOMB` when it cancels the reservation instead); the consumer takes slot
//!   `head` when its stamp says `head + 1`. Only senders write stamps. How the slots lie in memory
//!   is the `slot` module's table.
//! * **Room** is decided from the consumer's *freed* position: ticket `t` may be reserved once the
//!   consumer gave back the place of the ticket that used its slot one lap before. The consumer
//!   publishes that position (`progress.freed`, on a cache line of its own); senders keep a copy of a value
//!   it had in their own line (`tail.freed_hint`, never ahead of it) and read the consumer's line
//!   only when the copy says "full", about once per `capacity` sends. So a reservation reads and
//!   writes only the senders' line: no slot and no consumer line before its CAS, and the consumer
//!   never writes a line that a sender writes.
//!
//! Per-sender FIFO (SPEC R2.3) follows from tickets: one sender's tickets increase in program order,
//! and the consumer takes tickets in order. A reserved ticket must be committed or cancelled; a
//! cancelled one leaves a tombstone that the consumer steps over. A reservation is never held while
//! user code runs or while its sender waits (see `send.rs`), since the consumer waits for it.
//!
//! Owns the inbox's shared state, its construction (the public constructors, which hand out the
//! consumer end too, are in `consumer`), its count and its closing. May import `sync` only.

use std::collections::VecDeque;
use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use super::slot::{self, LineSlot, Slot, PREFETCH_AHEAD_BYTES};
use super::wait_list::WaitList;
use super::Sender;
use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering, Thread, UnsafeCell};

/// Tail word: the consumer announced sleep.
pub(super) const SLEEPING: u64 = 1 << 63;
/// Tail word: the context stopped.
pub(super) const CLOSED: u64 = 1 << 62;
/// Tail word: external input stopped.
pub(super) const INPUT_CLOSED: u64 = 1 << 61;
/// Tail word: one open overflow reservation.
pub(super) const PENDING_ONE: u64 = 1 << TICKET_BITS;
/// Tail word: the count of open overflow reservations.
pub(super) const PENDING: u64 = INPUT_CLOSED - PENDING_ONE;
/// Tail word and stamps: the ticket.
pub(super) const TICKET: u64 = PENDING_ONE - 1;
pub(super) const TICKET_BITS: u32 = 48;
/// Stamp: the ticket's reservation was cancelled.
pub(super) const TOMB: u64 = 1 << 63;

/// The largest capacity an inbox accepts (tickets must keep at least a few laps apart in 48 bits).
pub const MAX_CAPACITY: usize = 1 << 40;


/// The line every sender updates.
pub(super) struct Tail {
    /// Ticket, pending overflow reservations and flags (see the module docs). Updated with
    /// read-modify-writes only.
    pub(super) word: AtomicU64,
    /// A value `Progress::freed` had (so never ahead of it), kept here by the senders so that they
    /// need not read the consumer's line for every send (see the module docs).
    pub(super) freed_hint: AtomicU64,
}

/// What the consumer's thread keeps about its progress. Every field is written by that thread only;
/// the others read them for [`Inbox::len`] and `Drop`, and senders read `freed` for room.
pub(super) struct Progress {
    /// The next ticket to take.
    pub(super) head: AtomicU64,
    /// Tickets below this one are processed (their places may be given back).
    pub(super) done: AtomicU64,
    /// Tickets below this one are given back: their slots are free for the next lap. On a line
    /// apart from `head` and `done`, which the consumer stores per entry: a sender that finds
    /// its hint full re-reads this one (every try while the inbox stays full), and sharing the
    /// line would cost the consumer a miss on each of those stores (`perf` on `workload/vwap`:
    /// an eighth of the context loop's samples on the store of `done`).
    pub(super) freed: CachePadded<AtomicU64>,
    /// Entries taken from the overflow, processed, and given back, counted since the start.
    pub(super) ov_taken: AtomicUsize,
    pub(super) ov_done: AtomicUsize,
    pub(super) ov_freed: AtomicUsize,
}

/// The shared side of an inbox: every sender holds it through an `Arc`.
pub struct Inbox<T> {
    /// The senders' line: the tail word and the freed hint.
    pub(super) tail: CachePadded<Tail>,
    /// The consumer's progress, on its own line.
    pub(super) progress: CachePadded<Progress>,
    /// `ROOM_WAITERS` (see `room`); read-modify-written by the consumer when it gives places back.
    pub(super) room: CachePadded<AtomicUsize>,
    /// The ring when slots are packed ([`Self::LINE_SLOTS`] false); empty otherwise.
    pub(super) slots: Box<[Slot<T>]>,
    /// The ring when every slot has a cache line of its own; empty otherwise.
    pub(super) line_slots: Box<[LineSlot<T>]>,
    /// `one_lap - 1`: a ticket's slot index.
    pub(super) index_mask: u64,
    /// The power of two above `capacity`: a ticket's lap unit.
    pub(super) one_lap: u64,
    /// Nominal capacity, `1..=MAX_CAPACITY`, and the number of slots.
    pub(super) capacity: usize,
    /// How many slots ahead a committing sender prefetches ([`PREFETCH_AHEAD_BYTES`]).
    pub(super) prefetch_ahead: usize,
    /// Entries that arrived while an overrun was pending (see `overflow`).
    pub(super) overflow: Mutex<VecDeque<T>>,
    /// `overflow.len()`, readable without the lock; changed only under it.
    pub(super) overflow_len: AtomicUsize,
    /// How many reservations were taken beyond capacity (SPEC R5.2, R9.1).
    pub(super) overruns: AtomicU64,
    /// The consumer's thread, written once by the consumer before it first sets `SLEEPING`, read by
    /// a sender only after its reservation CAS observed `SLEEPING` (which orders the read after the
    /// write; see `parker`).
    pub(super) consumer_thread: UnsafeCell<Option<Thread>>,
    /// Senders (threads and tasks) waiting for room; touched only on that slow path (see `room`).
    pub(super) room_waiters: Mutex<WaitList>,
}


// SAFETY: the slots hand values of `T` from senders to the consumer thread, so `T: Send` is required
// and sufficient; every shared field is an atomic, a mutex, or an `UnsafeCell` whose access protocol
// is documented on the field (slot values: stamp protocol; `consumer_thread`: written once before it
// is published through `tail`).
unsafe impl<T: Send> Send for Inbox<T> {}
// SAFETY: see `Send`; no `&T` is ever handed out to two threads.
unsafe impl<T: Send> Sync for Inbox<T> {}

/// takes the place also takes the sleep announcement: no wake-up is lost).
#[inline]
pub(super) fn with_ticket_taken(cur: u64, next: u64) -> u64 {
    (cur & !(SLEEPING | TICKET)) | next
}

/// The tail word `cur` with one more open overflow reservation, `SLEEPING` cleared.
#[inline]
pub(super) fn with_overflow_reserved(cur: u64) -> u64 {
    (cur & !SLEEPING) + PENDING_ONE
}

/// Open overflow reservations in the tail word `cur`.
#[inline]
pub(super) fn pending(cur: u64) -> usize {
    ((cur & PENDING) >> TICKET_BITS) as usize
}

/// Whether ticket `a` comes before ticket `b` (tickets in use lie within a few laps of each other,
/// far less than half the ticket space).
#[inline]
pub(super) fn before(a: u64, b: u64) -> bool {
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
    /// instead of slots packed edge to edge: the row of [`slot::SLOT_LAYOUT`] for this entry type's
    /// slot size. A constant per entry type, so the choice costs no branch on the hot path.
    pub(super) const LINE_SLOTS: bool = slot::line_per_slot(std::mem::size_of::<Slot<T>>());

    /// Bytes from one slot to the next.
    const SLOT_STRIDE: usize = if Self::LINE_SLOTS {
        std::mem::size_of::<LineSlot<T>>()
    } else {
        std::mem::size_of::<Slot<T>>()
    };

    /// A new inbox of nominal `capacity` (clamped to `1..=MAX_CAPACITY`), without its consumer end:
    /// [`try_with_capacity`](Self::try_with_capacity) (in `consumer`) hands out both.
    pub(super) fn try_new(
        capacity: usize,
    ) -> Result<sync::Arc<Self>, std::collections::TryReserveError> {
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
                freed: CachePadded::new(AtomicU64::new(0)),
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
            room_waiters: Mutex::new(WaitList::new()),
        });
        Ok(inbox)
    }

    /// The nominal capacity.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The ticket after `t`.
    #[inline]
    pub(super) fn next(&self, t: u64) -> u64 {
        let next = if (t & self.index_mask) + 1 < self.capacity as u64 {
            t + 1
        } else {
            (t & !self.index_mask).wrapping_add(self.one_lap)
        };
        next & TICKET
    }

    /// The slot `ahead` places after the slot of `t` (`ahead < capacity`), wrapping around.
    #[inline]
    pub(super) fn slot_after(&self, t: u64, ahead: usize) -> &Slot<T> {
        let mut i = (t & self.index_mask) as usize + ahead;
        if i >= self.capacity {
            i -= self.capacity;
        }
        self.slot_at(i)
    }

    /// The ticket `n` places after `t` (`n <= capacity`, so it wraps around the ring at most once).
    #[inline]
    pub(super) fn ticket_after(&self, t: u64, n: usize) -> u64 {
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
    pub(super) fn slot(&self, t: u64) -> &Slot<T> {
        self.slot_at((t & self.index_mask) as usize)
    }

    /// The slot of index `i` (`i < capacity`), in whichever ring this entry type uses.
    #[inline(always)]
    pub(super) fn slot_at(&self, i: usize) -> &Slot<T> {
        if Self::LINE_SLOTS {
            &self.line_slots[i].0
        } else {
            &self.slots[i]
        }
    }

    /// Tickets from `from` up to `to` (0 if `from` is ahead, which a racy read can see).
    pub(super) fn distance(&self, to: u64, from: u64) -> usize {
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


    pub(super) fn refuses(state: u64, sender: Sender) -> bool {
        state & CLOSED != 0 || (sender == Sender::External && state & INPUT_CLOSED != 0)
    }


    /// Whether the slot of ticket `t` is free: the consumer gave back the place of the ticket that
    /// used it one lap before (on the first lap that ticket lies before the start, which `before`
    /// sees too). Decided from the senders' own line when the hint suffices, so no slot and no
    /// consumer line is read before the reservation's CAS.
    #[inline]
    pub(super) fn is_free(&self, t: u64) -> bool {
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

    /// Free places of the ring from ticket `t` on, as far as the freed position `freed` shows.
    #[inline]
    pub(super) fn ring_room(&self, t: u64, freed: u64) -> usize {
        self.capacity.saturating_sub(self.distance(t, freed))
    }

    /// Free places of the ring from ticket `t` on, up to `want`: decided from the senders' own line
    /// when the hint shows enough, otherwise from the consumer's freed position (refreshing the
    /// hint), as [`is_free`](Self::is_free) decides for one place.
    pub(super) fn ring_room_up_to(&self, t: u64, want: usize) -> usize {
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

