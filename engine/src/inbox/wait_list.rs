//! The wait list: who is parked waiting for something a queue's other side will make (room in a
//! full inbox or output, a value in an empty output), and how they are woken. An entry is
//! [`Parked`]: a parked thread, or an async task's waker. The inbox's room-waiter list and an
//! output's room list are each one [`WaitList`]; an output's receiver, which waits alone, is one
//! `Parked` entry. (Not to be confused with the send path's wait for room in `deliver`, which
//! *uses* an inbox's list: this module is only the list.)
//!
//! The caller keeps the list under its own mutex, touched only on its slow path, and pairs it with
//! a flag word: a waiter registers here, then announces itself on the flag with a read-modify-write
//! and re-checks; the side that makes progress reads-and-clears the flag, then wakes the list
//! ([`WaitList::wake_all`]). The protocol around the list is the caller's (`room`, `output`).
//!
//! The list never grows with the number of waits, only with the number of waiters: a thread is
//! listed once (a wait that ends without a wake-up leaves its entry for its next wait, a wait that
//! gives up takes it out), and a task once per registration ([`RoomTicket`]) or once per waker.
//! Waking takes the whole list out under the lock by swapping it with a spare buffer, wakes
//! outside the lock (a waker runs the executor's code, which may register again) and keeps the
//! emptied buffer as the next spare: no allocation per park or wake once the two buffers have
//! grown to the most waiters seen.
//!
//! Owns the wait list and its entries. May import `sync` only.

use std::task::Waker;

use crate::sync::{self, Mutex, Thread};

/// One party waiting in a [`WaitList`] (or alone, in a slot of its own).
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub(crate) enum Parked {
    /// A parked thread: woken by unparking it.
    Thread(Thread),
    /// A pending task's waker, with the id of its registration in a list ([`RoomTicket`];
    /// [`Parked::ALONE`] for a task that waits in no list).
    Task(u64, Waker),
}

impl Parked {
    /// Whether it is the parked thread `id`.
    fn is_thread(&self, id: sync::ThreadId) -> bool {
        matches!(self, Parked::Thread(t) if t.id() == id)
    }

    /// The id of a task that waits in no list (an output's receiver): never a registration's,
    /// which count up from 0.
    pub(crate) const ALONE: u64 = u64::MAX;

    /// The calling thread, about to park.
    pub(crate) fn current_thread() -> Self {
        Parked::Thread(sync::current())
    }

    /// Wakes it: unparks the thread, or wakes the task.
    pub(crate) fn wake(self) {
        match self {
            Parked::Thread(t) => t.unpark(),
            Parked::Task(_, w) => w.wake(),
        }
    }
}

/// A task's registration in a wait list (the inbox's room-waiter list), kept by its future between
/// polls (`Inbox::poll_room`); `None` in the future while it is not registered. Dropping a future
/// that holds one must take its entry out (`Inbox::cancel_room_wait`), or the entry stays until
/// the next wake.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub struct RoomTicket(u64);

/// Threads and tasks waiting for the same thing, the spare buffer that waking swaps in (see the
/// module docs) and the next task registration id.
#[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
pub(crate) struct WaitList {
    list: Vec<Parked>,
    spare: Vec<Parked>,
    next_id: u64,
}

impl WaitList {
    /// An empty list that allocates on its first waiter.
    pub(crate) fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty list with room for `n` waiters in each of its two buffers, so that up to `n`
    /// waiters never allocate.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            list: Vec::with_capacity(n),
            spare: Vec::with_capacity(n),
            next_id: 0,
        }
    }

    /// Entries listed now (threads and tasks).
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The spare buffer's capacity: what the tests check to see that a wake-up kept its memory.
    #[cfg(test)]
    pub(crate) fn spare_capacity(&self) -> usize {
        self.spare.capacity()
    }

    /// Lists the calling thread unless it is listed already. A thread waits in one place at a
    /// time, so one entry is all it ever needs; a wait that ends without a wake-up (a spurious
    /// return, a re-check that found room) leaves its entry behind, and the next wait reuses it
    /// instead of adding another, so a thread that waits again and again grows nothing.
    pub(crate) fn list_current_thread(&mut self) {
        let me = sync::current();
        if !self.list.iter().any(|w| w.is_thread(me.id())) {
            self.list.push(Parked::Thread(me));
        }
    }

    /// Takes the calling thread's entry out, if a wake-up has not taken it already (a wait that
    /// gives up: its deadline passed, or what it waited on closed); the caller drops it outside
    /// the lock.
    pub(crate) fn unlist_current_thread(&mut self) -> Option<Parked> {
        let me = sync::current().id();
        let i = self.list.iter().position(|w| w.is_thread(me))?;
        // Order does not matter: a wake-up wakes the whole list.
        Some(self.list.swap_remove(i))
    }

    /// Registers a task by its registration: with `ticket` `None` (the first poll) it lists `waker`
    /// and stores the registration there; later, it updates the waker of that same entry if it is
    /// still listed (a new entry if a wake-up took it), so a future never has more than one entry.
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub(crate) fn register_task(&mut self, ticket: &mut Option<RoomTicket>, waker: &Waker) {
        let listed = ticket.as_ref().and_then(|t| {
            self.list
                .iter_mut()
                .find(|e| matches!(e, Parked::Task(id, _) if *id == t.0))
        });
        match listed {
            Some(Parked::Task(_, old)) => {
                if !old.will_wake(waker) {
                    old.clone_from(waker);
                }
            }
            _ => {
                let id = self.next_id;
                self.next_id += 1;
                self.list.push(Parked::Task(id, waker.clone()));
                *ticket = Some(RoomTicket(id));
            }
        }
    }

    /// Registers a task by its waker: listed unless a waker that wakes the same task is (a caller
    /// that keeps no registration, and whose task may poll again after a cancellation, adds
    /// nothing).
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub(crate) fn register_waker_once(&mut self, waker: &Waker) {
        let listed = self
            .list
            .iter()
            .any(|e| matches!(e, Parked::Task(_, w) if w.will_wake(waker)));
        if !listed {
            let id = self.next_id;
            self.next_id += 1;
            self.list.push(Parked::Task(id, waker.clone()));
        }
    }

    /// Takes a task's entry out (its future is dropped or done), if a wake-up has not taken it
    /// already; the caller drops it outside the lock (a waker's drop runs the executor's code).
    #[cfg_attr(not(any(feature = "async", feature = "internals")), allow(dead_code))]
    pub(crate) fn cancel_task(&mut self, ticket: RoomTicket) -> Option<Parked> {
        let i = self
            .list
            .iter()
            .position(|e| matches!(e, Parked::Task(id, _) if *id == ticket.0))?;
        // Order does not matter: a wake-up wakes the whole list.
        Some(self.list.swap_remove(i))
    }

    /// Wakes everyone in the list that `list` picks out of the state `m` guards: takes the list
    /// out under the lock (the spare buffer takes its place, so later registrations go there),
    /// wakes outside it, and keeps the emptied buffer as the next spare (a concurrent wake may
    /// have left a smaller one there).
    pub(crate) fn wake_all<S>(m: &Mutex<S>, list: impl Fn(&mut S) -> &mut WaitList) {
        let mut woken = {
            let mut guard = sync::lock(m);
            let w = list(&mut guard);
            if w.list.is_empty() {
                return;
            }
            let spare = std::mem::take(&mut w.spare);
            std::mem::replace(&mut w.list, spare)
        };
        // Outside the lock: a waker runs the executor's code, which may register again.
        for waiter in woken.drain(..) {
            waiter.wake();
        }
        let mut guard = sync::lock(m);
        let w = list(&mut guard);
        if w.spare.capacity() < woken.capacity() {
            w.spare = woken;
        }
    }
}
