//! The inbox: a context's lock-free multi-producer, single-consumer input queue.
//!
//! A bounded ring of slots with per-slot sequence stamps in the style of Dmitry Vyukov's bounded
//! queue (also crossbeam-queue's `ArrayQueue`), whose tail word carries everything a sender must
//! decide atomically: the next ticket, the open overflow reservations, and the flags that say the
//! consumer sleeps or the inbox is closed. A sender reserves a place with one CAS on that word,
//! writes its entry and publishes it by the slot's stamp; the consumer takes tickets in order and
//! gives their places back in batches once they are processed, so the capacity counts entries
//! accepted and not yet processed. Every decision two threads could race on is a read-modify-write
//! of one word or is ordered by one; `loom-tests/` checks the protocol.
//!
//! One job per file:
//! - `ring`: the shared state ([`Inbox`]), the tail word, tickets and their arithmetic, the
//!   count ([`Inbox::len`]) and closing;
//! - `slot`: one slot, the slot-layout table (`SLOT_LAYOUT`: a cache line per slot or packed, by
//!   size, each row with its reason), the prefetch distance and the slot write;
//! - `reserve`: a sender's side: [`Reservation`], [`BatchReservation`], commit and cancel;
//! - `consumer`: the consumer's side: [`Consumer::pop`] and [`HeldPlaces`], which give places
//!   back in batches;
//! - `overflow`: the policy beyond capacity (SPEC R5.2): overruns and the FIFO that keeps each
//!   sender's order behind them;
//! - `parker`: the consumer's sleep and a sender's wake-up (the three-state handshake on the tail
//!   word);
//! - `room`: senders waiting for room (threads and async tasks), [`Inbox::wait_for_room`] and
//!   [`Inbox::poll_room`];
//! - `wait_list`: the list of parked threads and tasks that `room` and the outputs (`output`)
//!   share.
//!
//! Figures measured for the choices made here (a reservation in a register, the prefetch distance,
//! the integer stores into a slot, the slot layout) are in `harness/BENCHMARKS.md`; the code's
//! comments keep the reasons.
//!
//! Owns the queue, its reservations and its sleep/wake protocol. May import `sync` and `hint`
//! only (`hint`: the cache hints, which import nothing). Private
//! unless the `internals` feature exposes it.

mod consumer;
mod overflow;
mod parker;
mod reserve;
mod ring;
mod room;
mod slot;
mod wait_list;

pub use consumer::{Consumer, HeldPlaces};
// What only the loom models, the benches and the tests name: unused here without `internals`.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use overflow::OVERFLOW_RETAINED;
pub(crate) use reserve::Detached;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use reserve::BatchReservation;
pub use reserve::Reservation;
pub use ring::{Inbox, MAX_CAPACITY};
pub use room::RoomWait;
pub use wait_list::RoomTicket;
pub(crate) use wait_list::{Parked, WaitList};

/// Who is sending: an external input handle or a context. Only the former is refused once external
/// input is closed (SPEC R8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// An [`InputHandle`](crate::InputHandle) outside the correlator.
    External,
    /// A context (including a context sending to itself).
    Context,
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The inbox holds `capacity` entries.
    Full,
    /// The context has stopped, or external input is closed and the sender is external.
    Closed,
}

#[cfg(test)]
mod tests;
