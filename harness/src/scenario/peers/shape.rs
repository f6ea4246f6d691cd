//! The two shapes a peer crate is driven in, each implemented once per crate in the crate's own
//! adapter file: a [`BlockingChannel`] (crossbeam-channel, std mpsc, kanal, flume, tokio mpsc from
//! plain threads) and a [`SpinRing`] (rtrb, crossbeam-queue's `ArrayQueue`). The disruptor has
//! neither shape (a managed processor, not a receive call): its adapter is [`super::disruptor`].
//!
//! May import `kit` (the event type).

use crate::scenario::Ev;

/// A channel with a blocking send and a blocking receive, driven as its documentation shows.
pub trait BlockingChannel: 'static {
    /// Sending half (cloned per sender).
    type Tx: Send + 'static;
    /// Receiving half.
    type Rx: Send + 'static;
    /// A bounded channel of `capacity` events.
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Another sender.
    fn clone_tx(tx: &Self::Tx) -> Self::Tx;
    /// Blocking send; `false` when the receiver is gone.
    fn send(tx: &Self::Tx, e: Ev) -> bool;
    /// Receives with the blocking receive until every sender is gone, handing each event to `f`.
    fn drain(rx: Self::Rx, f: impl FnMut(Ev));
    /// Blocking receive of one event (`None` when every sender is gone).
    fn recv(rx: &mut Self::Rx) -> Option<Ev>;
}

/// Implements [`BlockingChannel`] for a channel whose halves have the usual `send` / `recv`
/// returning `Result` (crossbeam-channel, std mpsc, kanal, flume).
macro_rules! blocking_channel {
    ($(#[$doc:meta])* $name:ident, $tx:ty, $rx:ty, $make:path) => {
        $(#[$doc])*
        pub struct $name;
        impl $crate::scenario::peers::shape::BlockingChannel for $name {
            type Tx = $tx;
            type Rx = $rx;
            fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
                $make(capacity)
            }
            fn clone_tx(tx: &Self::Tx) -> Self::Tx {
                tx.clone()
            }
            fn send(tx: &Self::Tx, e: $crate::scenario::Ev) -> bool {
                tx.send(e).is_ok()
            }
            fn drain(rx: Self::Rx, mut f: impl FnMut($crate::scenario::Ev)) {
                while let Ok(e) = rx.recv() {
                    f(e);
                }
            }
            fn recv(rx: &mut Self::Rx) -> Option<$crate::scenario::Ev> {
                rx.recv().ok()
            }
        }
    };
}
pub(crate) use blocking_channel;

/// A ring whose two sides spin while it is full or empty (no blocking operations): rtrb's SPSC
/// `RingBuffer`, crossbeam-queue's `ArrayQueue`.
pub trait SpinRing: 'static {
    /// Pushing side.
    type Tx: Send + 'static;
    /// Popping side.
    type Rx: Send + 'static;
    /// A ring of `capacity` events.
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Pushes `e`, or hands it back when the ring is full.
    fn push(tx: &mut Self::Tx, e: Ev) -> Result<(), Ev>;
    /// Pops the oldest event, if any.
    fn pop(rx: &mut Self::Rx) -> Option<Ev>;
    /// Whether the sender is gone (everything it pushed is then in the ring).
    fn abandoned(rx: &Self::Rx) -> bool;
}
