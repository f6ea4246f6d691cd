//! The flume adapter: how every scenario that runs flume builds and drives it,
//! `bounded(capacity)`, the blocking `send` and `recv` ([`Flume`]): the stream peers.
//!
//! May import `kit` and `peers::shape`.

use super::shape::blocking_channel;
use crate::scenario::Ev;

blocking_channel!(
    /// `flume::bounded`.
    Flume,
    flume::Sender<Ev>,
    flume::Receiver<Ev>,
    flume::bounded
);
