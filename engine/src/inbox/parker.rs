//! The parker: the consumer's sleep and a sender's wake-up.
//!
//! The three-state handshake of a parker (running / announced sleep / woken), carried by the
//! `SLEEPING` flag of the tail word: the consumer sets it with a CAS that succeeds only when every
//! ticket was taken and no overflow reservation is open (the re-check after announcing sleep is the
//! CAS itself), then parks until the flag is clear. A sender's reservation CAS clears the flag, and
//! the sender that cleared it unparks the consumer after it committed (or cancelled). Since the
//! flag is cleared in the same atomic step that takes the ticket, a wake-up cannot be lost.
//!
//! Owns the consumer's sleep announcement, its park and its wake-up. May import `sync` only.

use super::ring::{Inbox, PENDING, SLEEPING, TICKET};
use super::Consumer;
use crate::sync::{self, Ordering};

impl<T> Inbox<T> {
    /// Unparks the consumer: called by the sender whose reservation cleared `SLEEPING`, once it
    /// committed or cancelled its place.
    #[cold]
    pub(super) fn wake_consumer(&self) {
        // SAFETY: `wake` is set only when the reservation CAS observed SLEEPING, which the consumer
        // sets only after writing `consumer_thread` (Release/Acquire through `tail`); the cell is
        // never written again, so this shared read does not race.
        let thread = self.consumer_thread.with(|p| unsafe { (*p).clone() });
        if let Some(t) = thread {
            t.unpark();
        }
    }
}

impl<T> Consumer<T> {
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
