//! Outputs: bounded queues from the contexts to the service's own threads (SPEC R4.2, R4.3, R8.1,
//! R9.1).
//!
//! # The queue
//! Every output is an [`OutputQueue`]: a preallocated ring (crossbeam-queue's `ArrayQueue`, a
//! bounded MPMC queue after Dmitry Vyukov's bounded MPMC design, whose head and tail updates are
//! `SeqCst`) of its bound, one consumer (the [`OutputReceiver`], `Send` but not `Sync`) and any
//! number of producers (contexts emitting or sending to a channel, input handles sending to a
//! channel, [`Scope::emit_to`](crate::Scope::emit_to) on a typed [`Output`]). Pushing and taking
//! allocate nothing; a producer reads one state word before and one after its push.
//!
//! What a producer does when the ring is full is the output's [`Overflow`] policy:
//! `DropOldest` replaces the oldest event (`force_push`), `DropNewest` drops the new one, both
//! counted (the output's own count, the emitting context's `output_drops`); `Block` waits for room
//! (spin, yield, then park; counted in the emitting context's `output_blocked_ns`, and published
//! while it lasts, see `deliver`). A push that finds the receiver dropped or the output closed
//! discards the value and counts it in the output's own count as well (nothing is discarded
//! without a count).
//!
//! # The state word
//! One word (`state`, bits below) carries everything a producer or the receiver must see of the
//! other side: whether the receiver sleeps, whether producers wait for room, whether the overflow
//! list is in use, and the three ends (receiver dropped, shutdown began, shutdown ended).
//!
//! # Sleep and wake-up (no lost wake-up)
//! Both waits follow the inbox's protocol: register in the wait list (under `sleepers`' lock),
//! announce with a `SeqCst` read-modify-write of `state`, re-check, then park.
//! - The receiver with nothing to take stores its waiter (its thread, or an async task's waker),
//!   sets `RECEIVER_SLEEPS`, re-checks the ring and sleeps. A producer pushes, then reads `state`
//!   (`SeqCst`): the ring's tail update and the flag are both in the single `SeqCst` order, so
//!   either the re-check sees the event or the producer sees the flag, clears it and wakes the
//!   waiter it takes from the list. (Loom regards `SeqCst` accesses as `AcqRel`; the shim's
//!   `seq_cst_order` gives its models the same order with a fence, and is nothing here.)
//! - A `Block` producer finding the ring full adds its thread to the room list, sets
//!   `ROOM_WAITERS`, re-checks for room and parks (an async channel send adds its task's waker
//!   instead, once per waker, and returns `Pending`: [`OutputQueue::poll_room`]). The receiver, after every take, reads `state`:
//!   if producers wait, it clears the flag and unparks every thread of the list. A producer that
//!   registered after the list was taken set the flag after the take, so its re-check sees the room.
//!
//! Both handshakes, the async waker's and the ends' wake-ups are model-checked with loom
//! (`loom-tests/tests/model_outputs.rs`).
//!
//! # Ends (R8.1)
//! - *Receiver dropped*: producers stop waiting and discard what they would push; a channel
//!   forgets the output at its next send.
//! - *Shutdown began* (`DRAINING`, set right after external input closes): a full `Block` output
//!   stops making anyone wait: it takes events beyond its bound in an overflow list instead (as an
//!   inbox does to avoid a deadlock, R5.2), so that a receiver nobody reads until shutdown
//!   returns cannot hang the shutdown, and nothing accepted is lost. Once the list holds anything,
//!   every `Block` push joins it, and the receiver takes the ring first: each producer's order is
//!   kept. It is used only during shutdown; memory grows at most by what was accepted.
//! - *Shutdown ended* (`CLOSED`, after every context thread was joined): no producer is left; the
//!   receiver takes what is queued, then its stream ends. An output made later is closed at once.
//!
//! One job per file: `options` (the bound, the [`Overflow`] policy and their defaults), `queue`
//! (the [`OutputQueue`] and its two handshakes, whose wait list is the inbox's
//! `WaitList`), `registry` (every output of a correlator, for
//! shutdown) and `receiver` (the typed [`Output`] handle and the [`OutputReceiver`] API). The
//! delivery of an emitted event into an output, and its wait for room, is `deliver`'s.
//!
//! Owns the output queue, its options, the typed [`Output`] handle, the receiver and the registry
//! of a correlator's outputs. May import `sync`, `config`, `error` and `inbox`.

mod options;
mod queue;
mod receiver;
mod registry;

pub use options::{
    OutputOptions, Overflow, DEFAULT_OUTPUT_BLOCK_WARNING, DEFAULT_OUTPUT_CAPACITY,
    MAX_OUTPUT_CAPACITY,
};
pub use queue::{OutputQueue, Pushed};
#[cfg(feature = "async")]
pub use receiver::RecvFuture;
pub use receiver::{IntoIter, Iter, Output, OutputReceiver, TryIter};
pub(crate) use registry::OutputRegistry;
pub use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
