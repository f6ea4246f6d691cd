//! The room-waiter protocol: senders that found the inbox full wait for the consumer to give
//! places back.
//!
//! The mirror image of the parker, on a separate word (`room`) that only the consumer and waiting
//! senders touch: a waiter registers in the inbox's [`WaitList`], sets `ROOM_WAITERS` with a
//! read-modify-write and then re-checks for room (reading `progress.freed`); the consumer stores
//! the freed position and then reads-and-clears the flag with a read-modify-write (in `consumer`).
//! Whichever of the two read-modify-writes comes second sees the other's work. A thread is listed
//! once: a wait that ends without a wake-up (a spurious return, a re-check that found room) leaves
//! its entry for its next wait to reuse, and a wait that gives up (its deadline passed, the inbox
//! closed) takes its entry out, so a sender that times out again and again on an inbox that never
//! drains grows nothing.
//!
//! **Async senders** (the `async` feature's futures) join the same list: a waiter is a parked
//! thread or a task's waker, and a task follows the same steps (register, set `ROOM_WAITERS`,
//! re-check) in [`Inbox::poll_room`], returning `Pending` instead of parking. A task registers
//! *once* per wait: its entry carries an id ([`RoomTicket`]), a later poll before the wake-up
//! updates the entry's waker in place, and a future dropped while registered removes its entry
//! ([`Inbox::cancel_room_wait`]), so a send cancelled again and again (a timeout around it) leaves
//! nothing behind. No task holds a reservation while it is pending. Waking is the list's
//! ([`WaitList::wake_all`]): no allocation per park or wake.
//!
//! Owns the room flag, the waits for room and their wake-up. May import `sync` only.

use std::task::{Poll, Waker};
use std::time::Instant;

use super::ring::{Inbox, TICKET};
use super::wait_list::{RoomTicket, WaitList};
use super::Sender;
use crate::sync::{self, Ordering};

/// `room`: a sender is parked waiting for room.
pub(super) const ROOM_WAITERS: usize = 1;

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

impl<T> Inbox<T> {
    /// Wakes every sender waiting for room (the consumer gave places back, or the inbox closed).
    pub(super) fn wake_room_waiters(&self) {
        WaitList::wake_all(&self.room_waiters, |w| w);
    }

    /// Registers an async sender waiting for room (the task's side of the room-waiter protocol,
    /// the mirror of [`wait_for_room_for`](Self::wait_for_room_for)): until room for `need`
    /// places at once (`1..=capacity`) may be available, or the inbox closes for `sender`. Call it
    /// after a reservation failed with [`Refusal::Full`](super::Refusal::Full), with the future's
    /// `ticket` (`None` the first time): the first call registers `waker` and stores the
    /// registration there, later ones update the waker of that same entry if it is still listed (a
    /// new one if a wake-up took it), so a future never has more than one entry.
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
        sync::lock(&self.room_waiters).register_task(ticket, waker);
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
        let removed = sync::lock(&self.room_waiters).cancel_task(ticket);
        // A waker's drop runs the executor's code: not under the lock.
        drop(removed);
    }

    /// Entries in the room-waiter list (threads and tasks): what the cancellation tests check.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn room_waiters(&self) -> usize {
        sync::lock(&self.room_waiters).len()
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
    /// `deadline` passes. Call it after a reservation failed with
    /// [`Refusal::Full`](super::Refusal::Full); a `Retry` may be spurious.
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
        // that no wake-up took is reused (`WaitList::list_current_thread`).
        sync::lock(&self.room_waiters).list_current_thread();
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
        if sync::park_until(deadline) {
            // Giving up: leave nothing listed (a sender that times out again and again on an
            // inbox that never drains must not grow the list, R5.1).
            self.unlist_current();
            return RoomWait::TimedOut;
        }
        RoomWait::Retry
    }

    /// Takes the calling thread's room-waiter entry out, if a wake-up has not taken it already.
    fn unlist_current(&self) {
        let removed = sync::lock(&self.room_waiters).unlist_current_thread();
        drop(removed);
    }
}
