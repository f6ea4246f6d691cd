//! The std's mpsc adapter: how every scenario that runs std's mpsc builds and drives it,
//! `sync_channel(capacity)`, the blocking `send` and `recv` ([`StdMpsc`]): the `stream/1to1/std-mpsc` peer.
//!
//! May import `kit` and `peers::shape`.

use super::shape::blocking_channel;
use crate::scenario::Ev;

blocking_channel!(
    /// `std::sync::mpsc::sync_channel`.
    StdMpsc,
    std::sync::mpsc::SyncSender<Ev>,
    std::sync::mpsc::Receiver<Ev>,
    std::sync::mpsc::sync_channel
);
