//! Reserving and committing: a sender's side of the ring. A [`Reservation`] is one place, taken
//! with one CAS on the tail word and then committed (the entry written, the stamp published) or
//! cancelled (a tombstone); a [`BatchReservation`] is `n` consecutive places taken with the same
//! one CAS; a [`Detached`] reservation is one held apart from its inbox while a sender reserves in
//! several at once.
//!
//! Two details keep a send from waiting on its own earlier stores: a [`Reservation`] is one word,
//! so it comes back in a register, and after publishing, a sender prefetches for writing the slot
//! two cache lines on (`slot::PREFETCH_AHEAD_BYTES`), so that the line the next sends write is
//! already on its way when the next CAS waits for earlier stores to finish. A third keeps it from
//! paying a second transfer for one slot: an entry of up to a cache line is written as 8-byte
//! integer stores in order (`slot::write_entry`), never with a vector store the compiler may issue
//! ahead of them. What each one measured is in harness/BENCHMARKS.md ("The two-thread paths",
//! "The first store into a slot", "The inbox's prefetch distance").
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
//! Owns the reservation types and the reserve, commit and cancel steps. May import `sync` and
//! `hint` only.

use std::fmt;

use super::ring::{
    pending, with_overflow_reserved, with_ticket_taken, Inbox, PENDING, PENDING_ONE, SLEEPING,
    TICKET, TICKET_BITS, TOMB,
};
use super::slot::write_entry;
use crate::hint::prefetch_write;
use super::{Refusal, Sender};
use crate::sync::{self, Ordering};

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
        prefetch_write(inbox.slot_after(t, inbox.prefetch_ahead));
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

impl<T> Inbox<T> {
    /// Reserves a place if the inbox is below capacity.
    ///
    /// # Errors
    /// [`Refusal::Full`] at capacity; [`Refusal::Closed`] when the inbox refuses this sender.
    #[inline]
    pub fn try_reserve(&self, sender: Sender) -> Result<Reservation<'_, T>, Refusal> {
        self.reserve(sender, false)
    }

    /// The common case inline (open, no overflow, room, the CAS succeeds at once); everything else
    /// in [`reserve_slow`](Self::reserve_slow), which decides it again from the start.
    #[inline]
    pub(super) fn reserve(&self, sender: Sender, beyond: bool) -> Result<Reservation<'_, T>, Refusal> {
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
    pub(super) fn reserve_slow(&self, sender: Sender, beyond: bool) -> Result<Reservation<'_, T>, Refusal> {
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

    /// Reserves between `min` and `max` places at once (`1 <= min <= max`), as many as there is room
    /// for, with one CAS on the tail word: consecutive tickets of the ring, or places in the overflow
    /// while it holds anything (see the module docs and `overflow`). Never beyond capacity, so a
    /// `min` above [`capacity`](Self::capacity) is always refused with [`Refusal::Full`]; `max` is
    /// clamped to it.
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
    pub(super) fn commit_bits(&self, bits: u64, value: T) {
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
                prefetch_write(self.slot_after(t, self.prefetch_ahead));
            }
            Place::Overflow => self.commit_overflow(value),
        }
        if bits & WAKE != 0 {
            self.wake_consumer();
        }
    }

    /// [`Reservation::cancel`]: gives the place `bits` reserved in this inbox back.
    pub(super) fn cancel_bits(&self, bits: u64) {
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
}
