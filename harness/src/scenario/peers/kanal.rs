//! The kanal adapter: how every scenario that runs kanal builds and drives it,
//! `bounded(capacity)`, the blocking `send` and `recv` ([`Kanal`]): the stream and ping-pong peers.
//!
//! May import `kit` and `peers::shape`.

use super::shape::blocking_channel;
use crate::scenario::Ev;

blocking_channel!(
    /// `kanal::bounded`.
    Kanal,
    kanal::Sender<Ev>,
    kanal::Receiver<Ev>,
    kanal::bounded
);
