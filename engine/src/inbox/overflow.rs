//! The overflow policy: what an inbox does beyond its capacity (SPEC R5.2).
//!
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
//! Owns the overflow's room, its commit and its take. May import `sync` only.

use super::ring::{pending, Inbox, PENDING_ONE, TICKET};
use super::{Refusal, Reservation, Sender};
use crate::sync::{self, Ordering};

/// Room for entries the overflow keeps once it has drained (SPEC R5.2): after a burst of overruns
/// its memory beyond this is given back, so it does not stay at its peak.
pub const OVERFLOW_RETAINED: usize = 256;

impl<T> Inbox<T> {
    /// Reserves a place even beyond capacity (SPEC R5.2) and counts the overrun if it is one.
    ///
    /// # Errors
    /// [`Refusal::Closed`] when the inbox refuses this sender.
    pub fn reserve_overrun(&self, sender: Sender) -> Result<Reservation<'_, T>, Refusal> {
        self.reserve(sender, true)
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

    /// Whether an ordinary reservation into the overflow (non-empty) would exceed the capacity.
    pub(super) fn overflow_full(&self, cur: u64, overflow: usize) -> bool {
        let ring = self.distance(cur & TICKET, self.progress.freed.load(Ordering::Acquire));
        ring + pending(cur) + overflow >= self.capacity
    }

    /// Room for ordinary reservations into the overflow (non-empty): the capacity less everything
    /// accepted and not given back.
    pub(super) fn overflow_room(&self, cur: u64, overflow: usize) -> usize {
        let ring = self.distance(cur & TICKET, self.progress.freed.load(Ordering::Acquire));
        self.capacity
            .saturating_sub(ring + pending(cur) + overflow)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn commit_overflow(&self, value: T) {
        {
            let mut overflow = sync::lock(&self.overflow);
            overflow.push_back(value);
            self.overflow_len.fetch_add(1, Ordering::AcqRel);
        }
        // Only now the pending count goes: whoever sees it gone also sees the entry.
        self.tail.word.fetch_sub(PENDING_ONE, Ordering::AcqRel);
    }

    /// Consumer thread only, once the ring is empty up to the tail and the overflow holds
    /// entries: takes the overflow's first entry (`None` if another look emptied it).
    #[inline(always)]
    pub(super) fn take_overflow(&self) -> Option<T> {
        let mut overflow = sync::lock(&self.overflow);
        let value = overflow.pop_front()?;
        if overflow.is_empty() && overflow.capacity() > OVERFLOW_RETAINED {
            // Drained after a burst: give its peak memory back (R5.2). Rare, like overruns.
            overflow.shrink_to(OVERFLOW_RETAINED);
        }
        // Counted as taken before it stops counting as waiting: `len` never misses it.
        let p = &*self.progress;
        p.ov_taken
            .store(p.ov_taken.load(Ordering::Relaxed) + 1, Ordering::Release);
        self.overflow_len.fetch_sub(1, Ordering::AcqRel);
        Some(value)
    }
}
