//! The skeleton of the context loop: take an entry, process it to completion, hold its place; when
//! nothing is ready, give every held place back, leave if told to, and otherwise wait (back off,
//! then announce sleep and park). One function, [`run_loop`], that the context's thread runs (with
//! [`Context`](super::Context) as the [`LoopBody`]) and that the loom models in `loom-tests/` run
//! (with a body that records what it takes), so that the models check the loop itself, not a copy.
//!
//! Owns the order of the loop's steps only. May import `inbox`, `config` and `sync`.

use crate::config::{Backoff, Step};
use crate::inbox::Consumer;
use crate::sync;

/// What processing one entry tells the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Take the next entry.
    Continue,
    /// Give every held place back and return (the models stop once they have what they expect;
    /// a context never does: it leaves through [`LoopBody::exit`]).
    Stop,
}

/// The jobs [`run_loop`] leaves to its owner.
pub trait LoopBody<T> {
    /// Processes one taken entry to completion, then holds its place (giving the held places back
    /// once a batch is full).
    fn process(&mut self, entry: T) -> Flow;
    /// Nothing is ready, or the loop stops: gives every held place back, so that a waiting or
    /// sleeping consumer holds none (and shutdown sees a zero count).
    fn idle(&mut self);
    /// Whether the loop is to end once the inbox is empty (checked again while parked).
    fn exit(&self) -> bool;
    /// Called after an entry is taken and before it is processed, with the consumer: a body may
    /// look at the entries that come next (hints only: no effect on what it computes).
    #[inline(always)]
    fn look_ahead(&mut self, _consumer: &Consumer<T>) {}
}

/// The wait between polls of an empty inbox.
pub trait Pause {
    /// Performs one back-off step and returns `false`, or returns `true`: announce sleep and park.
    fn pause(&mut self) -> bool;
    /// Starts a new wait episode (an entry came, or the consumer woke).
    fn reset(&mut self);
}

impl Pause for Backoff {
    #[inline]
    fn pause(&mut self) -> bool {
        match self.next() {
            Step::Spin => sync::spin_hint(),
            Step::Yield => sync::yield_now(),
            Step::Park => return true,
        }
        false
    }

    #[inline]
    fn reset(&mut self) {
        Backoff::reset(self);
    }
}

/// Runs the loop over `consumer` until `body` stops it or [`LoopBody::exit`] holds with the inbox
/// empty.
///
/// While it waits the loop reads only the next slot (in `pop`) and `exit`, never the inbox's tail
/// word: that word's cache line belongs to the senders, and reading it on every turn would make
/// each of their reservations fetch it back. An entry reserved and not yet committed keeps
/// `try_sleep` from sleeping (the loop then spins through the shim's hint, which yields under
/// loom) and `exit` from ending the loop.
#[inline]
pub fn run_loop<T, B: LoopBody<T>, P: Pause>(
    consumer: &mut Consumer<T>,
    body: &mut B,
    pause: &mut P,
) {
    loop {
        if let Some(entry) = consumer.pop() {
            pause.reset();
            body.look_ahead(consumer);
            if body.process(entry) == Flow::Stop {
                body.idle();
                return;
            }
            continue;
        }
        body.idle();
        if body.exit() && consumer.inbox().is_empty() {
            return;
        }
        if pause.pause() {
            if consumer.try_sleep() {
                consumer.park(|| body.exit());
            } else {
                sync::spin_hint();
            }
            pause.reset();
        }
    }
}
