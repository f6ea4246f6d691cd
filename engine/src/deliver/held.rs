//! The places a sending context holds: [`OwnInbox`], the places of the entries it has processed,
//! given back in batches (the context module's "Giving places back in batches") and before any of
//! its sends waits; and [`GiveBack`], what the send core asks of a sender before it waits.
//!
//! Owns a context's held places and its count of processed entries. May import the leaves,
//! `inbox`, `entry` and `shared`.

use crate::entry::Entry;
use crate::event::Event;
use crate::inbox;
use crate::shared::ContextShared;
use crate::sync::{Arc, Ordering};

/// A sending context's own inbox: the places it still holds for entries it has processed (see the
/// context module's "Giving places back in batches"), with its count of processed entries. A
/// context gives them back every `batch` entries, when its inbox has nothing ready, and before any
/// send of its own finds an inbox full, so that a context that waits holds none.
///
/// Consumer-only, like the [`inbox::HeldPlaces`] it wraps: `!Send`, made on the context's thread.
pub(crate) struct OwnInbox<E: Event> {
    ctx: Arc<ContextShared<E>>,
    places: inbox::HeldPlaces<Entry<E>>,
    /// Entries taken from the inbox and fully processed: the `done` figure of the shutdown scan.
    done: u64,
}

/// What a sender gives back before it waits for room: a context its [`OwnInbox`]'s places, an
/// input handle nothing ([`NoPlaces`]).
pub(crate) trait GiveBack {
    /// Frees the places held; returns whether it freed anything (the full inbox may have been the
    /// sender's own: retry at once).
    fn give_back(&mut self) -> bool;
}

/// An input handle's side of [`GiveBack`]: it never holds a place.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoPlaces;

impl GiveBack for NoPlaces {
    #[inline(always)]
    fn give_back(&mut self) -> bool {
        false
    }
}

impl<E: Event> OwnInbox<E> {
    /// For the context `ctx`, whose consumer made `places`.
    pub(crate) fn new(ctx: Arc<ContextShared<E>>, places: inbox::HeldPlaces<Entry<E>>) -> Self {
        Self {
            ctx,
            places,
            done: 0,
        }
    }

    /// Records one more processed entry; returns whether a batch is full (call
    /// [`give_back`](GiveBack::give_back)).
    #[inline]
    pub(crate) fn processed_one(&mut self) -> bool {
        self.done += 1;
        self.places.hold_one()
    }
}

impl<E: Event> GiveBack for OwnInbox<E> {
    /// Publishes the count of processed entries, then frees their places (in that order: the
    /// shutdown scan reads a zero count as "everything done" and then compares `done`); wakes
    /// senders waiting for room. Returns whether it freed anything.
    fn give_back(&mut self) -> bool {
        if self.places.held() == 0 {
            return false;
        }
        self.ctx.stats.done.store(self.done, Ordering::Release);
        self.places.give_back()
    }
}
