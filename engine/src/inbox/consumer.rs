//! Taking and giving back: the consumer's side of the ring. The [`Consumer`] takes entries in
//! ticket order (stepping over cancelled places, then the overflow once the ring is empty), and
//! [`HeldPlaces`] gives their places back in batches.
//!
//! **Giving back is batched**: a taken entry keeps its place until the consumer says it was
//! processed and gives the places back, which stores the freed position and reads-and-clears the
//! room-waiter flag (see `room`). So the capacity counts entries accepted and not yet processed,
//! which is what lets shutdown tell "idle" from "busy" by [`Inbox::len`].
//!
//! Entries are taken one at a time: taking several published entries out of the ring at once was
//! tried and gave nothing but more instructions per entry (harness/BENCHMARKS.md, "The inbox's
//! prefetch distance").
//!
//! Owns the consumer end, the constructors that hand it out with a new inbox, its take and the
//! give-back of places. May import `sync` only.

use std::fmt;

use super::ring::{Inbox, TICKET, TOMB};
use super::room::ROOM_WAITERS;
use crate::sync::{self, Ordering};

/// Creating an inbox hands out its one consumer end: the constructors live on this side, so that
/// the ring (`ring`) knows nothing of who takes from it.
impl<T> Inbox<T> {
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
    /// the slots cannot be allocated (a capacity within [`MAX_CAPACITY`](super::MAX_CAPACITY) may
    /// still need more memory than the machine has: `capacity` slots of an entry and a stamp each).
    pub fn try_with_capacity(
        capacity: usize,
    ) -> Result<(sync::Arc<Self>, Consumer<T>), std::collections::TryReserveError> {
        let inbox = Self::try_new(capacity)?;
        let consumer = Consumer::new(inbox.clone());
        Ok((inbox, consumer))
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
    pub(super) inbox: sync::Arc<Inbox<T>>,
    /// Local copy of the next ticket to take (mirrored into `Progress::head`).
    pub(super) head: u64,
    /// Whether the consumer's thread was recorded for senders to wake (see `parker`).
    pub(super) registered: bool,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl<T> Consumer<T> {
    /// The consumer end of `inbox`, which nothing has been sent to yet.
    pub(super) fn new(inbox: sync::Arc<Inbox<T>>) -> Self {
        Self {
            inbox,
            head: 0,
            registered: false,
            _not_sync: std::marker::PhantomData,
        }
    }

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
            return inbox.take_overflow();
        }
        None
    }

    /// Runs `f` on the entry `ahead` places after the next one to take, if that entry is
    /// published, without taking it: a look at what comes, for hints such as prefetching.
    #[inline]
    pub fn peek_with<R>(&self, ahead: usize, f: impl FnOnce(&T) -> R) -> Option<R> {
        let inbox = &*self.inbox;
        if ahead >= inbox.capacity() {
            return None;
        }
        let t = inbox.ticket_after(self.head, ahead);
        let slot = inbox.slot(t);
        if slot.stamp.load(Ordering::Acquire) != (t + 1) & TICKET {
            return None;
        }
        // SAFETY: stamp `t + 1` publishes an initialised value (Release/Acquire on `stamp`); it
        // stays in place, unwritten, until the consumer takes ticket `t` (which needs `&mut self`)
        // and gives its place back.
        Some(slot.value.with(|p| f(unsafe { (*p).assume_init_ref() })))
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
}

impl<T> Inbox<T> {
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
        // waiter whose flag comes after it sees the frees (see `room`).
        if self.room.fetch_and(!ROOM_WAITERS, Ordering::AcqRel) & ROOM_WAITERS != 0 {
            self.wake_room_waiters();
        }
        true
    }
}
